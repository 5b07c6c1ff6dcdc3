//! A job replaced by a new one: the pod's job runs where the pod may not (a taint or label that came
//! since, a neighbour its rules refuse), or its exclusions must change and it cannot carry them. The
//! job is marked replaced and cancelled, and the pass decides again at once: the pod, still Pending
//! and with no live job, gets a new job in the same pass.
//!
//! The mark comes first, so that a restart between the two writes still knows the cancelled job was
//! replaced rather than ended. slurmctld refuses to update a job whose excluded nodes name a node
//! deleted since, and an array's task whose record is still the array's cannot be updated alone (see
//! `Job::update_id`): such a job cannot be marked in Slurm, so the host keeps the mark
//! (`JobCache::record_replaced`), and submitting its successor in the same pass leaves nothing that a
//! restarted host would read as the pod's end. A successor not submitted (no node fits the pod any
//! more) leaves the pod waiting; a host restarted before the successor is submitted reads a cancelled
//! job, and deletes the pod for its owner to recreate.

use super::link;
use super::placeholder::Placeholder;
use super::step::{Again, Plan, Step};
use super::timing::RETRY;

/// Cancels the pod's job for a new one, saying why in `note`.
pub fn replaced(placeholder: &Placeholder, note: String) -> Plan<'_> {
    // A gang's job stands for every member: they decide on its successor together, at their next look.
    let again = if link::is_gang(&placeholder.job) { Again::After(RETRY) } else { Again::Now };
    let cancel = Step::CancelAsReplaced { placeholder, why: note.clone() };
    let event = Step::Event { warning: true, reason: "SlurmJobReplaced", action: "Schedule", note };
    Plan { steps: vec![cancel, event], again }
}
