//! A placeholder Slurm holds starts only once someone releases it (`scontrol release`): no amount of
//! capacity helps, so the pod says why as an error, and the job is kept for that release. Pure: the
//! job and what the host knows of the grant behind its uid in, the hold and the pod's message out.

use super::conditions::describe;
use crate::slurm::Job;
use crate::tenancy::{GivenUid, GrantName};

/// Slurm's reasons for a job that waits for a release, not for nodes: an administrator's hold (also
/// slurmctld's own, below), a user's, and too many requeues.
const HELD: [&str; 3] = ["JobHeldAdmin", "JobHeldUser", "JobHoldMaxRequeue"];

/// What slurmctld writes in the system comment of a job it holds because it cannot create the job's
/// credential, which it cannot do for a uid it resolves to no user (no passwd entry, no directory
/// answer). Slurm 24.11 and 26.05 write `slurm_cred_create failure, holding job.`.
const CREDENTIAL_FAILURE: &str = "slurm_cred_create failure";

/// The grant that gave a placeholder its uid.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UidGrant {
    /// The pod's namespace, whose grant it is.
    pub namespace: String,
    pub grant: GrantName,
    pub given: GivenUid,
}

/// Why Slurm holds a placeholder.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Hold {
    /// slurmctld cannot create the job's credential: it knows no user with the job's uid. The grant
    /// that gave the uid, when the host knows it.
    UnknownUser(Option<UidGrant>),
    /// An administrator's or a user's hold, or too many requeues.
    Other,
}

/// Whether Slurm holds the job rather than keeping it waiting for nodes.
pub fn is_held(job: &Job) -> bool {
    HELD.contains(&job.state_reason.as_str())
}

/// Why Slurm holds the job, if it does; `granted` is the grant behind the job's uid, if known.
pub fn hold(job: &Job, granted: Option<&UidGrant>) -> Option<Hold> {
    if !is_held(job) {
        return None;
    }
    if job.system_comment.contains(CREDENTIAL_FAILURE) {
        return Some(Hold::UnknownUser(granted.cloned()));
    }
    Some(Hold::Other)
}

/// What the pod says: the job, Slurm's reason and note, why, and how the pod gets placed.
pub fn message(job: &Job, hold: &Hold) -> String {
    let mut held = format!("Slurm holds job {}", describe(job));
    if !job.system_comment.is_empty() {
        held = format!("{held}, noting {:?}", job.system_comment);
    }
    let release = format!("scontrol release {}", job.target());
    match hold {
        Hold::UnknownUser(granted) => {
            let user = match job.user_id {
                Some(uid) => format!("uid {uid}"),
                None => "the uid".to_string(),
            };
            format!(
                "{held}: slurmctld knows no user with {user}, {}; add the user where slurmctld resolves users \
                 (its passwd or directory), then release the job: {release}",
                given_by(granted.as_ref())
            )
        }
        Hold::Other => format!("{held}; the pod is placed once the job is released: {release}"),
    }
}

/// Where the uid came from, in words.
fn given_by(granted: Option<&UidGrant>) -> String {
    let Some(UidGrant { namespace, grant, given }) = granted else {
        return "which the placeholder runs as".into();
    };
    let grant = format!("namespace {namespace}'s grant (tenancy {grant})");
    match given {
        GivenUid::User => format!("the user {grant} runs placeholders as"),
        GivenUid::UserIds(range) => format!("which the pod named (sunk.dev/user-id) within userIds {range} of {grant}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tenancy::IdRange;

    fn job(reason: &str, system_comment: &str) -> Job {
        Job {
            job_id: 48,
            job_state: vec!["PENDING".into()],
            state_reason: reason.into(),
            system_comment: system_comment.into(),
            user_id: Some(1500),
            ..Default::default()
        }
    }

    const CRED: &str = "slurm_cred_create failure, holding job.";

    fn granted(given: GivenUid) -> UidGrant {
        UidGrant { namespace: "ml".into(), grant: GrantName::Listed(0), given }
    }

    #[test]
    fn only_a_release_ends_a_hold_and_a_credential_failure_is_an_unknown_user() {
        let by_user_ids = granted(GivenUid::UserIds(IdRange { first: 1500, last: 1599 }));
        let cases = [
            ("Resources", "", None, None),
            ("Priority", CRED, Some(&by_user_ids), None),
            ("JobHeldUser", "", None, Some(Hold::Other)),
            ("JobHoldMaxRequeue", "", None, Some(Hold::Other)),
            ("JobHeldAdmin", "", None, Some(Hold::Other)),
            ("JobHeldAdmin", CRED, None, Some(Hold::UnknownUser(None))),
            ("JobHeldAdmin", CRED, Some(&by_user_ids), Some(Hold::UnknownUser(Some(by_user_ids.clone())))),
        ];
        for (reason, comment, grant, expected) in cases {
            assert_eq!(hold(&job(reason, comment), grant), expected, "{reason} {comment:?}");
        }
    }

    #[test]
    fn the_message_names_the_job_slurms_reason_and_note_the_uid_and_its_grant() {
        let unknown = |granted| message(&job("JobHeldAdmin", CRED), &Hold::UnknownUser(granted));
        let held = r#"Slurm holds job 48 (PENDING: JobHeldAdmin), noting "slurm_cred_create failure, holding job.": "#;
        let fix = "; add the user where slurmctld resolves users (its passwd or directory), then release the job: \
                   scontrol release 48";
        let cases = [
            (
                unknown(Some(granted(GivenUid::UserIds(IdRange { first: 1500, last: 1599 })))),
                "slurmctld knows no user with uid 1500, which the pod named (sunk.dev/user-id) within userIds \
                 1500-1599 of namespace ml's grant (tenancy grants[0])",
            ),
            (
                unknown(Some(granted(GivenUid::User))),
                "slurmctld knows no user with uid 1500, the user namespace ml's grant (tenancy grants[0]) runs \
                 placeholders as",
            ),
            (unknown(None), "slurmctld knows no user with uid 1500, which the placeholder runs as"),
        ];
        for (said, why) in cases {
            assert_eq!(said, format!("{held}{why}{fix}"));
        }
        let by_hand = message(&job("JobHeldUser", ""), &Hold::Other);
        assert_eq!(
            by_hand,
            "Slurm holds job 48 (PENDING: JobHeldUser); the pod is placed once the job is released: scontrol release 48"
        );
    }
}
