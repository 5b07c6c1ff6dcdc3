//! One lock per group, so that two members' passes never both submit.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use crate::scheduler::conditions::WaitReason;

/// A group, by namespace and name.
pub type GroupKey = (String, String);

/// What a group last waited for (the members' shared condition), until its job is submitted.
pub type GroupWait = Option<(WaitReason, String)>;

/// One lock per group, so that two members' passes never both submit; it guards the group's last wait.
#[derive(Default)]
pub struct GroupLocks(Mutex<HashMap<GroupKey, Arc<tokio::sync::Mutex<GroupWait>>>>);

impl GroupLocks {
    pub(super) fn of(&self, namespace: &str, group: &str) -> Arc<tokio::sync::Mutex<GroupWait>> {
        let mut locks = self.0.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        locks.entry((namespace.to_owned(), group.to_owned())).or_default().clone()
    }
}
