//! How a gang's one Slurm job names its member pods, in its `admin_comment`:
//! `sunk.dev/gang=<namespace>/<group>/<pod>:<uid>,<pod>:<uid>...`, so that after any restart the host
//! knows every member of every gang job without state of its own.

use super::PodKey;
use super::{parse_members, render_members};

use crate::vocabulary::GANG_LINK;

/// A gang job's link: its namespace, group and members, in the order their nodes are given.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GangLink {
    pub namespace: String,
    pub group: String,
    pub members: Vec<PodKey>,
}

impl GangLink {
    pub fn new(namespace: &str, group: &str, members: Vec<PodKey>) -> Self {
        Self { namespace: namespace.to_owned(), group: group.to_owned(), members }
    }

    pub fn render(&self) -> String {
        format!("{GANG_LINK}{}/{}/{}", self.namespace, self.group, render_members(&self.members))
    }

    /// The link in a job's `admin_comment`, if the job is a gang's (a `;mark` after it is ignored).
    pub fn parse(admin_comment: &str) -> Option<Self> {
        let rest = admin_comment.strip_prefix(GANG_LINK)?;
        let rest = rest.split_once(';').map_or(rest, |(link, _mark)| link);
        let mut parts = rest.splitn(3, '/');
        let (namespace, group, members) = (parts.next()?, parts.next()?, parts.next()?);
        let members = parse_members(namespace, members)?;
        (!namespace.is_empty() && !group.is_empty()).then(|| Self::new(namespace, group, members))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(name: &str, uid: &str) -> PodKey {
        PodKey { namespace: "ml".into(), name: name.into(), uid: uid.into() }
    }

    #[test]
    fn a_link_names_every_member_and_survives_a_mark() {
        let link = GangLink::new("ml", "train", vec![key("w-0", "u0"), key("w-1", "u1")]);
        let text = link.render();
        assert_eq!(text, "sunk.dev/gang=ml/train/w-0:u0,w-1:u1");
        assert_eq!(GangLink::parse(&text), Some(link.clone()));
        assert_eq!(GangLink::parse(&format!("{text};replaced")), Some(link));
        assert_eq!(GangLink::parse("sunk.dev/pod=ml/w-0/u0"), None);
        assert_eq!(GangLink::parse("sunk.dev/gang=ml/train/"), None);
        assert_eq!(GangLink::parse("sunk.dev/gang=ml/train/w-0"), None);
    }
}
