//! The grant applied to what the job-mapper asked for: a policy may narrow a grant, never widen it.
//!
//! Pure: the job request, the pod it is for and the namespace's grant in, the request Slurm gets (or
//! the first thing it asks for beyond the grant) out.

use std::collections::BTreeSet;
use std::fmt;

use super::grant::{Grant, IdRange};
use crate::policy::{Cluster, JobRequest, Pod};
use crate::vocabulary::{
    ACCOUNT_ANNOTATION, GROUP_ID_ANNOTATION, LEGACY_PRIORITY_ANNOTATION, PARTITION_ANNOTATION, PRIORITY_ANNOTATION,
    QOS_ANNOTATION, REQUIRED_NODES_ANNOTATION, RESERVATION_ANNOTATION, USER_ID_ANNOTATION, WORKING_DIR_ANNOTATION,
};

/// A request beyond the grant: which annotation asks for it, the value, and what the grant allows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NotGranted {
    /// The annotation that sets the field with the bundled job-mapper, e.g. `sunk.dev/account`.
    pub annotation: &'static str,
    pub value: String,
    pub namespace: String,
    /// What the grant allows for that field, in words.
    pub granted: String,
}

impl fmt::Display for NotGranted {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let Self { annotation, value, namespace, granted } = self;
        write!(f, "{annotation}={value:?} is beyond what namespace {namespace} is granted ({granted})")
    }
}

/// The annotation asking for a Slurm priority, under the prefixes the bundled job-mapper reads.
const PRIORITY_ANNOTATIONS: [&str; 2] = [PRIORITY_ANNOTATION, LEGACY_PRIORITY_ANNOTATION];

/// The request as Slurm gets it under `grant`: unset identities filled in with the grant's, a
/// priority that only the PriorityClass raised capped; anything else beyond the grant refused.
pub fn enforce(mut request: JobRequest, pod: &Pod, cluster: &Cluster, grant: &Grant) -> Result<JobRequest, NotGranted> {
    let refuse = |annotation, value: String, granted: String| NotGranted {
        annotation,
        value,
        namespace: pod.namespace.clone(),
        granted,
    };
    request.user_id = Some(id(request.user_id, grant.user, grant.user_ids).map_err(|(value, granted)| {
        refuse(USER_ID_ANNOTATION, value, format!("runs as user {}{granted}", grant.user))
    })?);
    request.group_id = Some(id(request.group_id, grant.group, grant.group_ids).map_err(|(value, granted)| {
        let granted = format!("runs as group {}{granted}; a pod's group id defaults to its user id", grant.group);
        refuse(GROUP_ID_ANNOTATION, value, granted)
    })?);
    let named = [
        (ACCOUNT_ANNOTATION, &request.account, &grant.accounts, cluster.default_account.as_deref(), "accounts"),
        (
            PARTITION_ANNOTATION,
            &request.partition,
            &grant.partitions,
            cluster.default_partition.as_deref(),
            "partitions",
        ),
        (QOS_ANNOTATION, &request.qos, &grant.qos, None, "QOS"),
        (RESERVATION_ANNOTATION, &request.reservation, &grant.reservations, None, "reservations"),
    ];
    for (annotation, asked, allowed, operator_default, what) in named {
        if let Some(asked) = asked
            && !allowed.contains(asked)
            && operator_default != Some(asked)
        {
            return Err(refuse(annotation, asked.clone(), listed(what, allowed, operator_default)));
        }
    }
    if let Some(priority) = request.priority
        && priority > grant.max_priority
    {
        let annotated = pod.annotations.iter().any(|kv| PRIORITY_ANNOTATIONS.contains(&kv.key.as_str()));
        if annotated {
            return Err(refuse(PRIORITY_ANNOTATION, priority.to_string(), ceiling(grant.max_priority)));
        }
        // Raised by the pod's PriorityClass: capped, as Kubernetes ranks are the operator's to map.
        request.priority = (grant.max_priority > 0).then_some(grant.max_priority);
    }
    if !request.required_nodes.is_empty() && !grant.required_nodes {
        let granted = "naming nodes is not granted".to_owned();
        return Err(refuse(REQUIRED_NODES_ANNOTATION, request.required_nodes.join(","), granted));
    }
    if let Some(directory) = &request.current_working_directory
        && !grant.working_directory
    {
        let granted = "choosing the working directory is not granted".to_owned();
        return Err(refuse(WORKING_DIR_ANNOTATION, directory.clone(), granted));
    }
    Ok(request)
}

/// The rank a pod preempts with: its PriorityClass's value, capped by the grant (an annotation
/// never raises it).
pub fn preemption_rank(pod_priority: Option<i32>, grant: &Grant) -> u32 {
    pod_priority.and_then(|value| u32::try_from(value).ok()).unwrap_or(0).min(grant.max_priority)
}

/// The id a placeholder runs as: the grant's own unless the request names one the grant allows;
/// on refusal, the value and the end of the sentence saying what is allowed.
fn id(asked: Option<u32>, own: u32, range: Option<IdRange>) -> Result<u32, (String, String)> {
    match asked {
        None => Ok(own),
        Some(id) if id == own || range.is_some_and(|range| range.contains(id)) => Ok(id),
        Some(id) => {
            let others =
                range.map_or_else(|| ", naming another is not granted".to_owned(), |r| format!(" or one of {r}"));
            Err((id.to_string(), others))
        }
    }
}

fn listed(what: &str, allowed: &BTreeSet<String>, operator_default: Option<&str>) -> String {
    let mut names: Vec<&str> = allowed.iter().map(String::as_str).collect();
    names.extend(operator_default.filter(|name| !allowed.contains(*name)));
    if names.is_empty() { format!("no {what} granted") } else { format!("{what}: {}", names.join(", ")) }
}

fn ceiling(max_priority: u32) -> String {
    match max_priority {
        0 => "setting a priority is not granted".into(),
        max => format!("priorities up to {max}"),
    }
}

#[cfg(test)]
#[path = "enforce_tests.rs"]
mod tests;
