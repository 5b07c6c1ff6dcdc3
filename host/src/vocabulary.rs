//! The names sunk shares with users, operators and other controllers: every label, annotation,
//! finalizer, condition type and admin-comment link it reads or writes. They are public API: a name
//! changed here breaks someone's selector, alert or script. A leaf: it imports nothing.
//!
//! The reasons of a pod's `PodScheduled=False` condition are `scheduler::WaitReason`; Event reasons
//! are written where each Event is raised.

// Pods the host schedules, and gangs.

/// Label naming a pod's group (a gang: one Slurm job for all its members).
pub const POD_GROUP_LABEL: &str = "sunk.dev/pod-group";
/// Label or annotation giving the number of pods in a group.
pub const POD_GROUP_SIZE: &str = "sunk.dev/pod-group-size";
/// The coscheduling plugin's group label, honoured as well (its PodGroup's `minMember` is the size).
pub const COSCHEDULING_POD_GROUP_LABEL: &str = "scheduling.x-k8s.io/pod-group";

// Slurm jobs: the link in a placeholder's `admin_comment` (only Slurm administrators can change it).

/// One pod's job: `sunk.dev/pod=<namespace>/<pod>/<uid>`.
pub const POD_LINK: &str = "sunk.dev/pod=";
/// A gang's job: `sunk.dev/gang=<namespace>/<group>/<pod>:<uid>,...`.
pub const GANG_LINK: &str = "sunk.dev/gang=";
/// A job array of pods: `sunk.dev/array=<namespace>/<pod>:<uid>,...`, task `i` the `i`-th pod.
pub const ARRAY_LINK: &str = "sunk.dev/array=";
/// A hold job's: `sunk.dev/hold=<Slurm node>`, holding there what pods outside Slurm use.
pub const HOLD_LINK: &str = "sunk.dev/hold=";
/// Appended to every link a host writes: `;by=<scheduler name>@<kube-system namespace UID>`, the
/// installation the placeholder belongs to.
pub const INSTALLATION_MARK: &str = ";by=";
/// Appended to the link of a job the host cancelled to submit a better placed one.
pub const REPLACED_MARK: &str = ";replaced";
/// Appended to the link of an immediate allocation attempt (Slurm keeps a refused one as FAILED).
pub const ATTEMPT_MARK: &str = ";immediate";
/// In a link sealed into a tenant's `comment` (`link::Seal`): the uid the job was allocated as, then
/// the seal.
pub const SEALED_UID_MARK: &str = ";as=";
pub const SEAL_MARK: &str = ";seal=";

// slurmd pods and NodeSets.

/// Label on a slurmd pod whose value is the name of the Slurm node it runs. Only a claim: the
/// scheduler and the Syncer believe it on a pod a NodeSet controls and its Slurm node records.
pub const SLURM_NODE_LABEL: &str = "sunk.dev/slurm-node";
/// NoSchedule taint on a Node that runs a Slurm node: kube-scheduler places there only pods that
/// tolerate it; sunk's own pods go through Slurm, which holds what they need.
pub const SLURM_NODE_TAINT: &str = "sunk.dev/slurm-node";
/// Label on a slurmd pod: the NodeSet it belongs to.
pub const NODESET_LABEL: &str = "sunk.dev/nodeset";
/// Label on a slurmd pod: the NodeSet revision it was built from.
pub const REVISION_LABEL: &str = "sunk.dev/revision";
/// Annotation on a slurmd pod: the `--conf` its slurmd registered with (it also depends on the Node).
pub const CONF_ANNOTATION: &str = "sunk.dev/slurmd-conf";
/// Annotations on a slurmd pod the NodeSet is removing: when it asked Slurm to drain the node, and
/// the reason it gave, so a restarted host keeps the deadline and undoes only its own drain.
pub const DRAIN_SINCE_ANNOTATION: &str = "sunk.dev/nodeset-drain-since";
pub const DRAIN_REASON_ANNOTATION: &str = "sunk.dev/nodeset-drain-reason";
/// Finalizer that keeps a deleted NodeSet until its Slurm nodes are drained and removed.
pub const NODESET_FINALIZER: &str = "sunk.dev/nodeset-cleanup";

// The bundled job-mapper's pod annotations: the policy reads them (it cannot import this module);
// the host names them when a namespace's grant refuses what one asks for (`tenancy`).

pub const USER_ID_ANNOTATION: &str = "sunk.dev/user-id";
pub const GROUP_ID_ANNOTATION: &str = "sunk.dev/group-id";
pub const ACCOUNT_ANNOTATION: &str = "sunk.dev/account";
pub const PARTITION_ANNOTATION: &str = "sunk.dev/partition";
pub const QOS_ANNOTATION: &str = "sunk.dev/qos";
pub const RESERVATION_ANNOTATION: &str = "sunk.dev/reservation";
pub const PRIORITY_ANNOTATION: &str = "sunk.dev/priority";
/// The priority annotation CoreWeave's SUNK reads, for users migrating from it.
pub const LEGACY_PRIORITY_ANNOTATION: &str = "sunk.coreweave.com/priority";
pub const REQUIRED_NODES_ANNOTATION: &str = "sunk.dev/required-nodes";
pub const WORKING_DIR_ANNOTATION: &str = "sunk.dev/current-working-dir";

// Policies.

/// Label on the ConfigMap `sunk policy push` writes a module into: the PolicyModule it is for.
pub const POLICY_MODULE_LABEL: &str = "sunk.dev/policy-module";

// State sync.

/// Node label an operator sets to drain the Slurm node (its value says why, e.g. `bad-dimm`).
pub const DRAIN_LABEL: &str = "sunk.dev/drain";
/// Pod annotations mirroring Slurm: its state flags joined by `+`, and the drain reason.
pub const STATE_ANNOTATION: &str = "sunk.dev/slurm-state";
pub const DRAIN_ANNOTATION: &str = "sunk.dev/drain";
/// The drain annotation CoreWeave's SUNK sets, for users migrating from it.
pub const LEGACY_DRAIN_ANNOTATION: &str = "sunk.coreweave.com/drain";
/// Pod annotation: the cause the Syncer drained the Slurm node for (its own memory, not a mirror).
pub const DRAINED_FOR_ANNOTATION: &str = "sunk.dev/drained-for";
/// The slurmd pod annotations the host keeps itself, which no drain policy may write: its memory of
/// why it drained, the NodeSet controller's drain and slurmd configuration, and the mirror of Slurm's
/// drain reason.
pub const HOST_OWNED_ANNOTATIONS: &[&str] = &[
    DRAINED_FOR_ANNOTATION,
    DRAIN_ANNOTATION,
    LEGACY_DRAIN_ANNOTATION,
    CONF_ANNOTATION,
    DRAIN_SINCE_ANNOTATION,
    DRAIN_REASON_ANNOTATION,
];
/// Prefix of the pod conditions mirroring Slurm state flags (`SlurmNodeDrain`, ...).
pub const POD_CONDITION_PREFIX: &str = "SlurmNode";
/// Node conditions, each True when the Slurm node has the flag.
pub const NODE_CONDITIONS: &[(&str, &str)] = &[("SlurmDrain", "DRAIN"), ("SlurmNotResponding", "NOT_RESPONDING")];

/// Drain ownership, which the NodeSet controller and the Syncer both obey: every drain sunk sets has
/// a reason starting with this, and sunk only ever undoes a drain whose reason does. An
/// administrator's drain (any other reason) is never touched.
pub const OWNED_DRAIN_PREFIX: &str = "k8s:";

/// Whether a Slurm node's drain reason is one sunk set (and so may undo).
pub fn is_owned_drain(reason: &str) -> bool {
    reason.starts_with(OWNED_DRAIN_PREFIX)
}

/// A drain reason sunk may set: `reason`, prefixed as sunk's unless it already is.
pub fn owned_drain(reason: String) -> String {
    if is_owned_drain(&reason) { reason } else { format!("{OWNED_DRAIN_PREFIX} {reason}") }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sunk_undoes_only_the_drains_it_set() {
        assert!(is_owned_drain("k8s: cordoned by kubectl"));
        assert!(!is_owned_drain("bad dimm, ticket 42"));
        assert_eq!(owned_drain("maintenance".into()), "k8s: maintenance");
        assert_eq!(owned_drain("k8s: mine".into()), "k8s: mine");
    }
}
