//! Which installation of sunk a placeholder belongs to, so that two installations sharing one Slurm
//! (two releases, or two clusters on one slurmctld) never take each other's jobs for their own.

use super::Seal;
use crate::vocabulary::INSTALLATION_MARK;

/// One installation: its scheduler name and the UID of its cluster's `kube-system` namespace, which
/// every replica of one installation shares and no other cluster has.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Installation {
    id: String,
    seal: Seal,
}

impl Installation {
    pub fn new(scheduler_name: &str, cluster_uid: &str) -> Self {
        Self { id: format!("{scheduler_name}@{cluster_uid}"), seal: Seal::default() }
    }

    /// The installation, sealing links with a key derived from `secret` (see [`Seal`]).
    pub fn sealing_with(self, secret: &[u8]) -> Self {
        Self { seal: Seal::keyed_from(secret), ..self }
    }

    /// How this installation seals links into a field its tenants can write.
    pub fn seal(&self) -> &Seal {
        &self.seal
    }

    /// `link`, marked as this installation's.
    pub fn sign(&self, link: String) -> String {
        format!("{link}{INSTALLATION_MARK}{}", self.id)
    }

    /// Whether a job's `admin_comment` is another installation's placeholder. A link without the
    /// mark (written before installations were named) is everyone's, as it always was.
    pub fn is_foreign(&self, admin_comment: &str) -> bool {
        let mark = INSTALLATION_MARK.trim_start_matches(';');
        admin_comment.split(';').skip(1).find_map(|part| part.strip_prefix(mark)).is_some_and(|id| id != self.id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scheduler::link::{PodKey, attempt, is_replaced, replaced};

    #[test]
    fn a_signed_link_is_its_installations_alone_and_keeps_its_marks() {
        let ours = Installation::new("sunk", "cluster-a");
        let key = PodKey { namespace: "ml".into(), name: "a".into(), uid: "u1".into() };
        let signed = ours.sign(key.link());
        assert_eq!(signed, "sunk.dev/pod=ml/a/u1;by=sunk@cluster-a");
        assert_eq!(PodKey::from_link(&signed), Some(key.clone()));
        let marked = replaced(&attempt(&signed));
        assert!(is_replaced(&crate::slurm::Job { admin_comment: marked.clone().into(), ..Default::default() }));
        for comment in [&signed, &marked] {
            assert!(!ours.is_foreign(comment), "{comment}");
            assert!(Installation::new("sunk", "cluster-b").is_foreign(comment), "another cluster: {comment}");
            assert!(Installation::new("gpu-sunk", "cluster-a").is_foreign(comment), "another release: {comment}");
        }
        assert!(!ours.is_foreign(&key.link()), "a link from before installations were named");
        assert!(!ours.is_foreign("rack 4"));
    }
}
