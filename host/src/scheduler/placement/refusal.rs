//! What the pod-level rules say of a Node, in kube-scheduler's words where it has some: why a Node is
//! refused ([`Refusal`]), which rules only rank Nodes and are ignored ([`Ignored`]), and which rule
//! cannot be honoured exactly ([`Unhonoured`]), each naming the field it is in.

use std::fmt;

/// Why a Node is refused, in the words of kube-scheduler's filters where they have some.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refusal {
    /// The Node has no label for the topology key of the pod's required affinity term `term`.
    AffinityKeyMissing { term: usize, topology_key: String },
    /// No pod that every required affinity term asks for runs in the Node's domain of term `term`.
    NoAffinityMatch { term: usize, domain: Domain },
    /// `pod` runs in the Node's domain and the pod's required anti-affinity term `term` refuses it.
    AntiAffinity { term: usize, domain: Domain, pod: String },
    /// `pod` runs in the Node's domain and its own required anti-affinity refuses this pod.
    ExistingAntiAffinity { domain: Domain, pod: String },
    /// The Node has no label for the topology key of the pod's spread constraint `constraint`.
    SpreadKeyMissing { constraint: usize, topology_key: String },
    /// Placing the pod in the Node's domain would spread it wider than the constraint's maxSkew.
    Skew { constraint: usize, domain: Domain, skew: i64, max_skew: i32 },
}

/// A topology domain: a topology key and the value Nodes in the domain carry for it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Domain {
    pub key: String,
    pub value: String,
}

/// A rule that only ranks Nodes, ignored: Slurm picks among the Nodes the required rules leave.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ignored {
    PreferredPodAffinity,
    PreferredPodAntiAffinity,
    /// A spread constraint with `whenUnsatisfiable: ScheduleAnyway`.
    ScheduleAnyway {
        constraint: usize,
    },
}

impl Ignored {
    /// The field the ignored rule is in, as a condition names it.
    pub fn field(&self) -> String {
        match self {
            Ignored::PreferredPodAffinity => format!("{POD_AFFINITY}.preferredDuringSchedulingIgnoredDuringExecution"),
            Ignored::PreferredPodAntiAffinity => {
                format!("{POD_ANTI_AFFINITY}.preferredDuringSchedulingIgnoredDuringExecution")
            }
            Ignored::ScheduleAnyway { constraint } => format!("{TOPOLOGY_SPREAD}[{constraint}]"),
        }
    }
}

pub(super) const POD_AFFINITY: &str = "spec.affinity.podAffinity";
pub(super) const POD_ANTI_AFFINITY: &str = "spec.affinity.podAntiAffinity";
pub(super) const REQUIRED: &str = "requiredDuringSchedulingIgnoredDuringExecution";
pub(super) const TOPOLOGY_SPREAD: &str = "spec.topologySpreadConstraints";

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Refusal::AffinityKeyMissing { term, topology_key } => {
                write!(f, "didn't match pod affinity rules: no {topology_key} label (required term {term})")
            }
            Refusal::NoAffinityMatch { term, domain } => {
                write!(f, "didn't match pod affinity rules: no matching pod in {domain} (required term {term})")
            }
            Refusal::AntiAffinity { term, domain, pod } => {
                write!(f, "didn't match pod anti-affinity rules: {pod} runs in {domain} (required term {term})")
            }
            Refusal::ExistingAntiAffinity { domain, pod } => {
                write!(f, "didn't satisfy existing pods anti-affinity rules: {pod} refuses the pod in {domain}")
            }
            Refusal::SpreadKeyMissing { constraint, topology_key } => {
                write!(
                    f,
                    "didn't match pod topology spread constraints: no {topology_key} label (constraint {constraint})"
                )
            }
            Refusal::Skew { constraint, domain, skew, max_skew } => write!(
                f,
                "didn't match pod topology spread constraints: skew {skew} in {domain} over maxSkew {max_skew} (constraint {constraint})"
            ),
        }
    }
}

impl fmt::Display for Domain {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}={}", self.key, self.value)
    }
}

impl fmt::Display for Ignored {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Ignored::ScheduleAnyway { .. } => write!(f, "{} (whenUnsatisfiable: ScheduleAnyway)", self.field()),
            _ => f.write_str(&self.field()),
        }
    }
}

/// A rule not honoured exactly, and the field it is in.
pub(super) struct Unhonoured {
    pub field: String,
    pub why: String,
}
