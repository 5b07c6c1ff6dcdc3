//! Where one member's pass stands with its group, decided from what it sees (pure): the group
//! incomplete, full without this pod, already submitted by another member's pass, or complete with it.

use std::sync::Arc;

use crate::scheduler::watched_pod::WatchedPod;
use kube::ResourceExt;

/// A member's standing in its group of `size` pods.
#[derive(Debug, PartialEq)]
pub enum Membership<'a> {
    /// Fewer pods than the group's size carry its label: no job is asked for yet.
    Incomplete { have: usize },
    /// The group has its pods, and this one is not among them (it came later).
    NoPlace,
    /// Another member's pass submitted the group's job while this one waited for the group's lock.
    Submitted,
    /// The group is complete with this pod: its members, oldest first, the first the leader.
    Complete(&'a [Arc<WatchedPod>]),
}

/// `members` are the group's unbound pods that are not leaving, oldest first; `me` this pod's UID;
/// `has_live_job` whether a member already has a job that has not ended.
pub fn membership<'a>(
    size: usize,
    members: &'a [Arc<WatchedPod>],
    me: &str,
    has_live_job: impl Fn(&WatchedPod) -> bool,
) -> Membership<'a> {
    if members.len() < size {
        return Membership::Incomplete { have: members.len() };
    }
    let chosen = &members[..size];
    if !chosen.iter().any(|member| member.uid().as_deref() == Some(me)) {
        return Membership::NoPlace;
    }
    if chosen.iter().any(|member| has_live_job(member)) {
        return Membership::Submitted;
    }
    Membership::Complete(chosen)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(uid: &str) -> Arc<WatchedPod> {
        Arc::new(serde_json::from_value(serde_json::json!({"metadata": {"name": uid, "uid": uid}})).unwrap())
    }

    #[test]
    fn a_member_waits_for_its_group_then_submits_once() {
        let three = [pod("a"), pod("b"), pod("c")];
        let four = [pod("a"), pod("b"), pod("c"), pod("d")];
        let none = |_: &WatchedPod| false;
        let a_has_one = |pod: &WatchedPod| pod.uid().as_deref() == Some("a");
        let cases: Vec<(&str, Membership, Membership)> = vec![
            ("alone of three", membership(3, &three[..1], "a", none), Membership::Incomplete { have: 1 }),
            ("two of three", membership(3, &three[..2], "b", none), Membership::Incomplete { have: 2 }),
            ("complete", membership(3, &three, "c", none), Membership::Complete(&three)),
            ("a fourth pod of three", membership(3, &four, "d", none), Membership::NoPlace),
            ("the first three of four", membership(3, &four, "a", none), Membership::Complete(&four[..3])),
            ("another pass submitted", membership(3, &three, "b", a_has_one), Membership::Submitted),
        ];
        for (name, got, expected) in cases {
            assert_eq!(got, expected, "{name}");
        }
    }
}
