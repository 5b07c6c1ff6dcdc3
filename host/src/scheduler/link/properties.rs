//! Property tests of the link codec: whatever pods, gangs and arrays the host writes into a job's
//! `admin_comment`, signed and marked as it marks them, read back as exactly those pods and that
//! installation; and no text, however mangled, makes a reader panic.

use proptest::prelude::*;

use super::{ArrayLink, GangLink, Installation, PodKey, attempt, is_replaced, linked_pods, replaced};
use crate::slurm::Job;

/// A Kubernetes object name (a DNS-1123 label, which pod and namespace names satisfy).
fn name() -> impl Strategy<Value = String> {
    "[a-z0-9]([a-z0-9-]{0,20}[a-z0-9])?"
}

fn uid() -> impl Strategy<Value = String> {
    "[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"
}

fn members(namespace: String) -> impl Strategy<Value = Vec<PodKey>> {
    prop::collection::vec((name(), uid()), 1..20).prop_map(move |pods| {
        pods.into_iter().map(|(name, uid)| PodKey { namespace: namespace.clone(), name, uid }).collect()
    })
}

/// One link of each kind the host writes, with the pods it names.
fn link() -> impl Strategy<Value = (String, Vec<PodKey>)> {
    let one = (name(), name(), uid()).prop_map(|(namespace, name, uid)| {
        let pod = PodKey { namespace, name, uid };
        (pod.link(), vec![pod])
    });
    let gang = (name(), name()).prop_flat_map(|(namespace, group)| {
        members(namespace.clone())
            .prop_map(move |members| (GangLink::new(&namespace, &group, members.clone()).render(), members))
    });
    let array = name().prop_flat_map(|namespace| {
        members(namespace.clone()).prop_map(move |members| {
            (ArrayLink { namespace: namespace.clone(), members: members.clone() }.render(), members)
        })
    });
    prop_oneof![one, gang, array]
}

fn job(admin_comment: String) -> Job {
    // A record of tasks still pending together, so that an array's record stands for all its pods.
    Job {
        admin_comment: admin_comment.into(),
        array_job_id: crate::slurm::NoValue::of(7),
        array_task_string: "0-19".into(),
        ..Default::default()
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn a_signed_and_marked_link_reads_back_its_pods_and_installation(
        (link, pods) in link(),
        (scheduler, cluster, other) in (name(), uid(), uid()),
        attempted in any::<bool>(),
        was_replaced in any::<bool>(),
    ) {
        let ours = Installation::new(&scheduler, &cluster);
        let mut comment = ours.sign(link);
        if attempted {
            comment = attempt(&comment);
        }
        if was_replaced {
            comment = replaced(&comment);
        }
        let job = job(comment.clone());
        let mut read = linked_pods(&job);
        read.truncate(pods.len());
        prop_assert_eq!(read, pods);
        prop_assert!(!ours.is_foreign(&comment));
        prop_assert!(Installation::new(&scheduler, &other).is_foreign(&comment) == (other != cluster));
        prop_assert_eq!(is_replaced(&job), was_replaced);
    }

    #[test]
    fn any_admin_comment_is_read_without_panicking(
        comment in "(sunk\\.dev/(pod|gang|array)=)?[a-z0-9/:,;=@-]{0,60}|\\PC{0,60}",
    ) {
        let job = job(comment.clone());
        for pod in linked_pods(&job) {
            prop_assert!(!pod.namespace.is_empty() && !pod.name.is_empty() && !pod.uid.is_empty());
        }
        let _ = Installation::new("sunk", "uid").is_foreign(&comment);
    }
}
