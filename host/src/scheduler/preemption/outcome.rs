//! What a preemption pass tells the waiting pod.

/// What a preemption pass did, for the waiting pod's condition.
#[derive(Debug, PartialEq)]
pub struct Outcome {
    pub note: String,
    /// Look again soon, not at the next routine pass: victims are on their way out, or a disruption
    /// budget refused an eviction for now.
    pub look_again_soon: bool,
}

impl Outcome {
    /// Nothing is under way: the pod is looked at again as it would be.
    pub(super) fn settled(note: String) -> Self {
        Self { note, look_again_soon: false }
    }
}
