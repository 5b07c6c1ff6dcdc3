//! Slurm's own preemption rules: whether Slurm itself would let a running job be preempted for a
//! waiting one. The host preempts no job these rules protect, unless the waiting pod's grant names
//! it (see `offer`). Pure: the rules come from [`Rules`], read from slurmrestd now and then.
//!
//! As slurmctld decides (src/interfaces/preempt.c, src/plugins/preempt/*, acct_policy.c):
//! - `PreemptType=preempt/none`, or a cluster `PreemptMode` that removes no job (`OFF`): nothing;
//! - `preempt/partition_prio`: a job of a partition of a lower `PriorityTier` whose `PreemptMode`
//!   (its own, else the cluster's) is not `OFF`;
//! - `preempt/qos`: a job whose QOS the preemptor's QOS lists in its `Preempt`; within one QOS only
//!   with `PreemptMode=WITHIN` and a higher job priority;
//! - a `PRIORITY` PreemptMode also wants the preemptor's job priority above the victim's;
//! - whatever the type: no job that has run less than its `PreemptExemptTime` (its QOS's, or its
//!   partition's QOS's, else the cluster's), nor one above `PreemptParameters=min_exempt_priority`.

use std::collections::BTreeMap;
use std::fmt;

use crate::slurm::{Job, PartitionPreemptMode, PreemptModes, Qos};

/// `PreemptType`: the plugin that says which jobs may be preempted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PreemptType {
    None,
    PartitionPrio,
    Qos,
}

impl std::str::FromStr for PreemptType {
    type Err = String;

    /// slurm.conf's spelling; Slurm leaves an unset type out, or calls it `preempt/none`.
    fn from_str(text: &str) -> Result<Self, String> {
        match text.trim().to_ascii_lowercase().as_str() {
            "" | "none" | "preempt/none" => Ok(Self::None),
            "preempt/partition_prio" | "partition_prio" => Ok(Self::PartitionPrio),
            "preempt/qos" | "qos" => Ok(Self::Qos),
            other => Err(format!("{other:?} is no PreemptType sunk knows (preempt/none, partition_prio, qos)")),
        }
    }
}

/// What a partition contributes to the rules.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PartitionRule {
    pub tier: u16,
    /// Its own PreemptMode, if it has one (`None`: the cluster's).
    pub mode: Option<PreemptModes>,
    /// Its QOS (slurm.conf's `QOS=`), empty for none.
    pub qos: String,
}

/// Slurm's preemption rules, as last read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rules {
    /// `None` where neither slurmrestd nor the operator says it: Slurm's rules then protect every
    /// job, and only what a grant names may be preempted.
    pub preempt_type: Option<PreemptType>,
    /// The cluster's PreemptMode.
    pub mode: PreemptModes,
    /// The cluster's PreemptExemptTime, in seconds.
    pub exempt_time: Option<u64>,
    pub min_exempt_priority: Option<u64>,
    pub partitions: BTreeMap<String, PartitionRule>,
    /// Every QOS by name; empty where Slurm keeps no accounting (jobs then have none).
    pub qos: BTreeMap<String, Qos>,
}

/// Whether a running job may be preempted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    Preemptable,
    Protected(Protection),
}

/// Why Slurm's rules protect a job.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Protection {
    /// `PreemptType=preempt/none`, or a cluster PreemptMode that removes no job.
    SlurmPreemptsNothing,
    /// Neither slurmrestd (before Slurm 26.05) nor the operator (`--slurm-preempt-type`) says the
    /// PreemptType: what Slurm would preempt cannot be said.
    TypeUnknown,
    /// `preempt/partition_prio`: its partition's tier is not below the waiting job's.
    TierNotBelow { partition: String, tier: u16, preemptor_tier: u16 },
    /// Its partition's PreemptMode is `OFF`.
    PartitionModeOff(String),
    /// `preempt/qos`: the waiting job's QOS does not list its QOS in `Preempt`.
    QosNotListed { qos: String, preemptor_qos: String },
    /// `preempt/qos`: the same QOS as the waiting job's, without `PreemptMode=WITHIN`.
    SameQos(String),
    /// `preempt/qos` and it has no QOS (Slurm preempts such a job for nobody).
    NoQos,
    /// A `PRIORITY` (or `WITHIN`) PreemptMode, and the waiting job's priority is not above its own.
    PriorityNotAbove { priority: u64, preemptor_priority: u64 },
    /// It has run less than its PreemptExemptTime.
    Exempt { ran: u64, exempt: u64 },
    /// Its priority is above `PreemptParameters=min_exempt_priority`.
    PriorityExempt { priority: u64, min: u64 },
    /// A partition or QOS the rules, as last read, do not know.
    Unknown(String),
}

impl Protection {
    /// Whether a grant naming the job's partition or QOS may overrule this. A grant widens who may
    /// be preempted for its pods; it never shortens a job's exempt time, and never acts on what the
    /// host does not know.
    pub fn a_grant_may_overrule(&self) -> bool {
        !matches!(self, Self::Exempt { .. } | Self::PriorityExempt { .. } | Self::Unknown(_))
    }
}

impl fmt::Display for Protection {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::SlurmPreemptsNothing => write!(f, "Slurm preempts nothing (PreemptType or PreemptMode)"),
            Self::TypeUnknown => {
                write!(f, "Slurm's PreemptType is not known (set --slurm-preempt-type before Slurm 26.05)")
            }
            Self::TierNotBelow { partition, tier, preemptor_tier } => {
                write!(
                    f,
                    "its partition {partition} has PriorityTier {tier}, not below the waiting job's {preemptor_tier}"
                )
            }
            Self::PartitionModeOff(partition) => write!(f, "its partition {partition} has PreemptMode=OFF"),
            Self::QosNotListed { qos, preemptor_qos } => write!(f, "QOS {preemptor_qos} may not preempt its QOS {qos}"),
            Self::SameQos(qos) => write!(f, "it runs in the waiting job's QOS {qos}, without PreemptMode=WITHIN"),
            Self::NoQos => write!(f, "it has no QOS"),
            Self::PriorityNotAbove { priority, preemptor_priority } => {
                write!(
                    f,
                    "its priority {priority} is not below the waiting job's {preemptor_priority} (PreemptMode=PRIORITY)"
                )
            }
            Self::Exempt { ran, exempt } => write!(f, "it has run {ran} s of its PreemptExemptTime {exempt} s"),
            Self::PriorityExempt { priority, min } => {
                write!(f, "its priority {priority} is above PreemptParameters=min_exempt_priority={min}")
            }
            Self::Unknown(what) => write!(f, "Slurm's rules, as last read, do not know {what}"),
        }
    }
}

/// Whether Slurm's rules let `victim`, running, be preempted for `waiting`, at `now` (UNIX seconds).
pub fn judge(rules: &Rules, waiting: &Job, victim: &Job, now: u64) -> Verdict {
    let protection = who_may_preempt(rules, waiting, victim).or_else(|| still_exempt(rules, victim, now));
    protection.map_or(Verdict::Preemptable, Verdict::Protected)
}

/// What the plugin (`PreemptType`) says, as `preempt_p_preemptable` does.
fn who_may_preempt(rules: &Rules, waiting: &Job, victim: &Job) -> Option<Protection> {
    let Some(preempt_type) = rules.preempt_type else {
        return Some(Protection::TypeUnknown);
    };
    if !rules.mode.removes_jobs() {
        return Some(Protection::SlurmPreemptsNothing);
    }
    let (priority, preemptor_priority) = (job_priority(victim), job_priority(waiting));
    let priority_not_above = Protection::PriorityNotAbove { priority, preemptor_priority };
    match preempt_type {
        PreemptType::None => Some(Protection::SlurmPreemptsNothing),
        PreemptType::PartitionPrio => {
            let partition = |name: &str| {
                rules.partitions.get(name).ok_or_else(|| Protection::Unknown(format!("partition {name:?}")))
            };
            let (theirs, ours) = match (partition(&victim.partition), partition(&waiting.partition)) {
                (Ok(theirs), Ok(ours)) => (theirs, ours),
                (Err(unknown), _) | (_, Err(unknown)) => return Some(unknown),
            };
            let wants_priority = ours.mode.is_some_and(|mode| mode.priority) || rules.mode.priority;
            if wants_priority && preemptor_priority < priority {
                return Some(priority_not_above);
            }
            if theirs.tier >= ours.tier {
                let partition = victim.partition.clone();
                return Some(Protection::TierNotBelow { partition, tier: theirs.tier, preemptor_tier: ours.tier });
            }
            if theirs.mode.is_some_and(|mode| !mode.removes_jobs()) {
                return Some(Protection::PartitionModeOff(victim.partition.clone()));
            }
            None
        }
        PreemptType::Qos => {
            if victim.qos.is_empty() || waiting.qos.is_empty() {
                return Some(Protection::NoQos);
            }
            let Some(ours) = rules.qos.get(&waiting.qos) else {
                return Some(Protection::Unknown(format!("QOS {:?}", waiting.qos)));
            };
            if victim.qos == waiting.qos {
                let within = ours.preempt.mode.within || rules.mode.within;
                return match within && preemptor_priority > priority {
                    true => None,
                    false if within => Some(priority_not_above),
                    false => Some(Protection::SameQos(victim.qos.clone())),
                };
            }
            if !ours.preempt.list.contains(&victim.qos) {
                return Some(Protection::QosNotListed { qos: victim.qos.clone(), preemptor_qos: waiting.qos.clone() });
            }
            if (ours.preempt.mode.priority || rules.mode.priority) && preemptor_priority <= priority {
                return Some(priority_not_above);
            }
            None
        }
    }
}

/// What protects a job whatever the plugin: `min_exempt_priority`, and its PreemptExemptTime (its
/// QOS's first, or its partition's QOS's first when its own does not override the partition's;
/// else the cluster's).
fn still_exempt(rules: &Rules, victim: &Job, now: u64) -> Option<Protection> {
    let priority = job_priority(victim);
    if let Some(min) = rules.min_exempt_priority.filter(|min| priority > *min) {
        return Some(Protection::PriorityExempt { priority, min });
    }
    let own = rules.qos.get(&victim.qos);
    let partition = rules.partitions.get(&victim.partition).and_then(|partition| rules.qos.get(&partition.qos));
    let ordered = match own.is_some_and(Qos::overrides_partition_qos) {
        true => [own, partition],
        false => [partition, own],
    };
    let qos_exempt = ordered.into_iter().flatten().find_map(|qos| qos.preempt.exempt_time.get());
    let exempt = qos_exempt.or(rules.exempt_time).filter(|seconds| *seconds > 0)?;
    let ran = victim.start_time.get().map_or(0, |start| now.saturating_sub(start));
    (ran < exempt).then_some(Protection::Exempt { ran, exempt })
}

/// The verdict once the waiting pod's grant is heard: a protection a grant may overrule is, for a
/// job the grant names (`named`).
pub fn overruled(verdict: Verdict, named: bool) -> Verdict {
    match verdict {
        Verdict::Protected(protection) if named && protection.a_grant_may_overrule() => Verdict::Preemptable,
        verdict => verdict,
    }
}

fn job_priority(job: &Job) -> u64 {
    job.priority.get().unwrap_or(0)
}

/// A partition's own PreemptMode, where the rules are known to say it; `stated` is the operator's
/// word for a partition slurmrestd does not list one of (before v0.0.45).
pub fn partition_mode(listed: PartitionPreemptMode, stated: Option<PreemptModes>) -> Option<PreemptModes> {
    match listed {
        PartitionPreemptMode::Own(mode) => Some(mode),
        PartitionPreemptMode::Cluster => None,
        PartitionPreemptMode::Unlisted => stated,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::slurm::{NoValue, QosPreempt};

    const NOW: u64 = 10_000;

    fn modes(text: &str) -> PreemptModes {
        PreemptModes::parse_conf(text).unwrap()
    }

    fn qos(name: &str, preempts: &[&str], mode: &str, exempt: Option<u64>) -> (String, Qos) {
        let preempt = QosPreempt {
            list: preempts.iter().map(|qos| qos.to_string()).collect(),
            mode: modes(mode),
            exempt_time: exempt.map_or_else(NoValue::default, NoValue::of),
        };
        (name.to_owned(), Qos { name: name.to_owned(), preempt, flags: Vec::new() })
    }

    /// batch (tier 1), scavenger (tier 0, PreemptMode=OFF), urgent (tier 2, QOS `boost`), and QOS
    /// high (preempts normal), normal, boost (exempt 50 s).
    fn rules(preempt_type: PreemptType) -> Rules {
        let partition =
            |tier, mode: Option<&str>, qos: &str| PartitionRule { tier, mode: mode.map(modes), qos: qos.into() };
        Rules {
            preempt_type: Some(preempt_type),
            mode: modes("REQUEUE"),
            exempt_time: None,
            min_exempt_priority: None,
            partitions: BTreeMap::from([
                ("batch".into(), partition(1, None, "")),
                ("scavenger".into(), partition(0, Some("OFF"), "")),
                ("urgent".into(), partition(2, None, "boost")),
            ]),
            qos: BTreeMap::from([
                qos("high", &["normal"], "OFF", None),
                qos("normal", &[], "OFF", None),
                qos("boost", &[], "OFF", Some(50)),
            ]),
        }
    }

    fn job(partition: &str, qos: &str, priority: u64, started: u64) -> Job {
        Job {
            partition: partition.into(),
            qos: qos.into(),
            priority: NoValue::of(priority),
            start_time: NoValue::of(started),
            ..Default::default()
        }
    }

    type Case = (&'static str, Rules, Job, Job, Option<Protection>);

    #[test]
    fn each_rule_of_slurm_protects_or_lets_go() {
        let with = |preempt_type, change: &dyn Fn(&mut Rules)| {
            let mut rules = rules(preempt_type);
            change(&mut rules);
            rules
        };
        let (partition_prio, by_qos) = (PreemptType::PartitionPrio, PreemptType::Qos);
        let none = |_: &mut Rules| {};
        let old = NOW - 1_000;
        let cases: Vec<Case> = vec![
            // The type and the cluster's mode.
            (
                "preempt/none",
                rules(PreemptType::None),
                job("urgent", "", 9, 0),
                job("batch", "", 1, old),
                Some(Protection::SlurmPreemptsNothing),
            ),
            (
                "cluster PreemptMode=OFF",
                with(partition_prio, &|r| r.mode = modes("OFF")),
                job("urgent", "", 9, 0),
                job("batch", "", 1, old),
                Some(Protection::SlurmPreemptsNothing),
            ),
            (
                "cluster PreemptMode=GANG alone",
                with(partition_prio, &|r| r.mode = modes("GANG")),
                job("urgent", "", 9, 0),
                job("batch", "", 1, old),
                Some(Protection::SlurmPreemptsNothing),
            ),
            // preempt/partition_prio.
            (
                "a higher tier preempts a lower one",
                rules(partition_prio),
                job("urgent", "", 1, 0),
                job("batch", "", 9, old),
                None,
            ),
            (
                "the same tier does not",
                rules(partition_prio),
                job("batch", "", 9, 0),
                job("batch", "", 1, old),
                Some(Protection::TierNotBelow { partition: "batch".into(), tier: 1, preemptor_tier: 1 }),
            ),
            (
                "a lower tier does not",
                rules(partition_prio),
                job("batch", "", 9, 0),
                job("urgent", "", 1, old),
                Some(Protection::TierNotBelow { partition: "urgent".into(), tier: 2, preemptor_tier: 1 }),
            ),
            (
                "a partition with PreemptMode=OFF keeps its jobs",
                rules(partition_prio),
                job("batch", "", 9, 0),
                job("scavenger", "", 1, old),
                Some(Protection::PartitionModeOff("scavenger".into())),
            ),
            (
                "PreemptMode=PRIORITY wants the preemptor's priority not below",
                with(partition_prio, &|r| r.mode = modes("REQUEUE,PRIORITY")),
                job("urgent", "", 1, 0),
                job("batch", "", 9, old),
                Some(Protection::PriorityNotAbove { priority: 9, preemptor_priority: 1 }),
            ),
            (
                "a partition unknown to the rules",
                rules(partition_prio),
                job("urgent", "", 9, 0),
                job("new", "", 1, old),
                Some(Protection::Unknown("partition \"new\"".into())),
            ),
            // preempt/qos.
            (
                "a QOS preempts a QOS it lists",
                rules(by_qos),
                job("batch", "high", 1, 0),
                job("batch", "normal", 9, old),
                None,
            ),
            (
                "not one it does not list",
                rules(by_qos),
                job("batch", "normal", 9, 0),
                job("batch", "high", 1, old),
                Some(Protection::QosNotListed { qos: "high".into(), preemptor_qos: "normal".into() }),
            ),
            (
                "not its own QOS",
                rules(by_qos),
                job("batch", "normal", 9, 0),
                job("batch", "normal", 1, old),
                Some(Protection::SameQos("normal".into())),
            ),
            (
                "its own with WITHIN, by priority",
                with(by_qos, &|r| r.mode = modes("REQUEUE,WITHIN")),
                job("batch", "normal", 9, 0),
                job("batch", "normal", 1, old),
                None,
            ),
            (
                "its own with WITHIN, not a higher priority",
                with(by_qos, &|r| r.mode = modes("REQUEUE,WITHIN")),
                job("batch", "normal", 1, 0),
                job("batch", "normal", 1, old),
                Some(Protection::PriorityNotAbove { priority: 1, preemptor_priority: 1 }),
            ),
            (
                "a job without a QOS",
                rules(by_qos),
                job("batch", "high", 1, 0),
                job("batch", "", 9, old),
                Some(Protection::NoQos),
            ),
            (
                "a QOS unknown to the rules",
                rules(by_qos),
                job("batch", "new", 1, 0),
                job("batch", "normal", 9, old),
                Some(Protection::Unknown("QOS \"new\"".into())),
            ),
            // Whatever the type: exempt times and priorities.
            (
                "younger than the cluster's PreemptExemptTime",
                with(partition_prio, &|r| r.exempt_time = Some(300)),
                job("urgent", "", 1, 0),
                job("batch", "", 9, NOW - 100),
                Some(Protection::Exempt { ran: 100, exempt: 300 }),
            ),
            (
                "older than it",
                with(partition_prio, &|r| r.exempt_time = Some(300)),
                job("urgent", "", 1, 0),
                job("batch", "", 9, NOW - 300),
                None,
            ),
            (
                "its QOS's exempt time beats the cluster's",
                with(by_qos, &|r| {
                    r.exempt_time = Some(10);
                    r.qos.insert("normal".into(), qos("normal", &[], "OFF", Some(600)).1);
                }),
                job("batch", "high", 1, 0),
                job("batch", "normal", 9, NOW - 100),
                Some(Protection::Exempt { ran: 100, exempt: 600 }),
            ),
            (
                "its partition's QOS's exempt time (50 s) comes before its own (600 s)",
                with(partition_prio, &|r| {
                    r.qos.insert("normal".into(), qos("normal", &[], "OFF", Some(600)).1);
                    r.partitions.get_mut("batch").unwrap().qos = "boost".into();
                }),
                job("urgent", "", 1, 0),
                job("batch", "normal", 9, NOW - 100),
                None,
            ),
            (
                "unless its own overrides the partition's",
                with(partition_prio, &|r| {
                    let mut normal = qos("normal", &[], "OFF", Some(600)).1;
                    normal.flags = vec!["OVERRIDE_PARTITION_QOS".into()];
                    r.qos.insert("normal".into(), normal);
                    r.partitions.get_mut("batch").unwrap().qos = "boost".into();
                }),
                job("urgent", "", 1, 0),
                job("batch", "normal", 9, NOW - 100),
                Some(Protection::Exempt { ran: 100, exempt: 600 }),
            ),
            (
                "above min_exempt_priority",
                with(partition_prio, &|r| r.min_exempt_priority = Some(5)),
                job("urgent", "", 1, 0),
                job("batch", "", 9, old),
                Some(Protection::PriorityExempt { priority: 9, min: 5 }),
            ),
            (
                "at it",
                with(partition_prio, &|r| r.min_exempt_priority = Some(9)),
                job("urgent", "", 1, 0),
                job("batch", "", 9, old),
                None,
            ),
            ("unchanged rules", with(partition_prio, &none), job("urgent", "", 1, 0), job("batch", "", 9, old), None),
        ];
        for (what, rules, waiting, victim, protection) in cases {
            let expected = protection.map_or(Verdict::Preemptable, Verdict::Protected);
            assert_eq!(judge(&rules, &waiting, &victim, NOW), expected, "{what}");
        }
    }

    #[test]
    fn a_grant_overrules_who_may_preempt_never_an_exempt_time_or_the_unknown() {
        let overrulable = [
            Protection::SlurmPreemptsNothing,
            Protection::TypeUnknown,
            Protection::PartitionModeOff("p".into()),
            Protection::SameQos("q".into()),
            Protection::TierNotBelow { partition: "p".into(), tier: 1, preemptor_tier: 1 },
        ];
        assert!(overrulable.iter().all(Protection::a_grant_may_overrule));
        let kept = [
            Protection::Exempt { ran: 1, exempt: 2 },
            Protection::PriorityExempt { priority: 2, min: 1 },
            Protection::Unknown("x".into()),
        ];
        assert!(kept.iter().all(|protection| !protection.a_grant_may_overrule()));
        let off = || Verdict::Protected(Protection::PartitionModeOff("p".into()));
        let exempt = || Verdict::Protected(Protection::Exempt { ran: 1, exempt: 2 });
        let cases = [
            (off(), true, Verdict::Preemptable),
            (off(), false, off()),
            (exempt(), true, exempt()),
            (Verdict::Preemptable, false, Verdict::Preemptable),
        ];
        for (verdict, named, expected) in cases {
            assert_eq!(overruled(verdict.clone(), named), expected, "{verdict:?} named={named}");
        }
    }

    #[test]
    fn a_partition_s_mode_is_its_own_the_cluster_s_or_the_operator_s_word() {
        let off = PreemptModes::default();
        assert_eq!(partition_mode(PartitionPreemptMode::Own(off), Some(modes("CANCEL"))), Some(off));
        assert_eq!(partition_mode(PartitionPreemptMode::Cluster, Some(off)), None);
        assert_eq!(partition_mode(PartitionPreemptMode::Unlisted, Some(off)), Some(off));
        assert_eq!(partition_mode(PartitionPreemptMode::Unlisted, None), None);
        assert_eq!("preempt/partition_prio".parse(), Ok(PreemptType::PartitionPrio));
        assert_eq!("".parse(), Ok(PreemptType::None));
        assert!("preempt/fancy".parse::<PreemptType>().is_err());
    }
}
