//! Slurm's preemption rules as the host last read them: one read of slurmrestd every [`READ_EVERY`]
//! (they change only when an administrator reconfigures Slurm), never one per pod.
//!
//! What slurmrestd cannot say is the operator's word ([`Stated`], `--slurm-preempt-*`): slurm.conf's
//! PreemptType, PreemptMode and PreemptExemptTime before Slurm 26.05 (whose slurmrestd serves no
//! slurm.conf), and a partition's PreemptMode before data parser v0.0.45. Fail closed: rules that
//! cannot be read, or were last read more than [`STALE_AFTER`] ago, are no rules, and nothing is
//! preempted on them; a PreemptType nobody says protects every job but those grants name.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::slurm::{PreemptModes, PreemptionSetup, Slurm};

use super::slurm_rules::{PartitionRule, PreemptType, Rules, partition_mode};

/// How often the rules are read.
pub const READ_EVERY: Duration = Duration::from_secs(30);
/// How long the last rules read serve while reads fail: three reads missed.
pub const STALE_AFTER: Duration = Duration::from_secs(100);

/// slurm.conf's preemption lines, as the operator states them for a slurmrestd that cannot say them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Stated {
    pub preempt_type: Option<PreemptType>,
    /// The cluster's PreemptMode; Slurm's default (`OFF`) when not stated.
    pub mode: Option<PreemptModes>,
    /// PreemptExemptTime, in seconds.
    pub exempt_time: Option<u64>,
    /// Partitions with a PreemptMode of their own (every other takes the cluster's).
    pub partition_modes: BTreeMap<String, PreemptModes>,
}

/// A duration as slurm.conf writes one (`minutes`, `MM:SS`, `HH:MM:SS`, `D-HH`, `D-HH:MM`,
/// `D-HH:MM:SS`), in seconds; `-1` (none) is 0.
pub fn slurm_duration(text: &str) -> Result<u64, String> {
    let text = text.trim();
    if text == "-1" {
        return Ok(0);
    }
    let bad = || format!("{text:?} is no Slurm time (minutes, MM:SS, HH:MM:SS, D-HH, D-HH:MM or D-HH:MM:SS)");
    let number = |part: &str| part.parse::<u64>().map_err(|_| bad());
    let (days, rest) = match text.split_once('-') {
        Some((days, rest)) => (Some(number(days)?), rest),
        None => (None, text),
    };
    let parts = rest.split(':').map(number).collect::<Result<Vec<u64>, String>>()?;
    let seconds = match (days, parts.as_slice()) {
        (None, [minutes]) => minutes * 60,
        (None, [minutes, seconds]) => minutes * 60 + seconds,
        (None, [hours, minutes, seconds]) => hours * 3600 + minutes * 60 + seconds,
        (Some(days), [hours]) => days * 86_400 + hours * 3600,
        (Some(days), [hours, minutes]) => days * 86_400 + hours * 3600 + minutes * 60,
        (Some(days), [hours, minutes, seconds]) => days * 86_400 + hours * 3600 + minutes * 60 + seconds,
        _ => return Err(bad()),
    };
    Ok(seconds)
}

/// `urgent=OFF`, `batch=SUSPEND,GANG`: a partition's own PreemptMode, as slurm.conf gives it.
pub fn partition_preempt_mode(text: &str) -> Result<(String, PreemptModes), String> {
    let (partition, mode) =
        text.split_once('=').ok_or_else(|| format!("{text:?} is not PARTITION=MODE, e.g. urgent=OFF"))?;
    if partition.trim().is_empty() {
        return Err(format!("{text:?} names no partition"));
    }
    Ok((partition.trim().to_owned(), PreemptModes::parse_conf(mode)?))
}

/// The rules that follow from what slurmrestd said and the operator states, or why there are none.
pub fn rules_from(setup: PreemptionSetup, stated: &Stated) -> Result<Rules, String> {
    let (preempt_type, mode, exempt_time, min_exempt_priority) = match &setup.conf {
        Some(conf) => {
            let preempt_type = conf.preempt_type.parse()?;
            (Some(preempt_type), conf.preempt_mode, conf.preempt_exempt_time, conf.min_exempt_priority())
        }
        // Before Slurm 26.05: the operator's word, if any (none: every job protected but what grants name).
        None => (stated.preempt_type, stated.mode.unwrap_or_default(), stated.exempt_time, None),
    };
    let qos = match setup.qos {
        Some(list) => list.into_iter().map(|qos| (qos.name.clone(), qos)).collect(),
        None if preempt_type == Some(PreemptType::Qos) => {
            return Err("PreemptType=preempt/qos, and slurmrestd serves no QOS (it runs no openapi/slurmdbd)".into());
        }
        // No accounting as far as slurmrestd tells: no QOS, so no QOS's PreemptExemptTime either.
        None => BTreeMap::new(),
    };
    let partitions = setup
        .partitions
        .into_iter()
        .map(|partition| {
            let stated = stated.partition_modes.get(&partition.name).copied();
            let rule = PartitionRule {
                tier: partition.priority.tier,
                mode: partition_mode(partition.preempt_mode, stated),
                qos: partition.qos.assigned,
            };
            (partition.name, rule)
        })
        .collect();
    Ok(Rules { preempt_type, mode, exempt_time, min_exempt_priority, partitions, qos })
}

/// The rules last read, shared by every pass.
#[derive(Clone, Default)]
pub struct KnownRules(Arc<Mutex<Known>>);

#[derive(Default)]
struct Known {
    rules: Option<(Instant, Arc<Rules>)>,
    /// Why the last read gave no rules.
    trouble: Option<String>,
}

impl KnownRules {
    /// The rules to judge by now, or why there are none.
    pub fn current(&self) -> Result<Arc<Rules>, String> {
        let known = self.0.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        match &known.rules {
            Some((read_at, rules)) if read_at.elapsed() < STALE_AFTER => Ok(rules.clone()),
            _ => Err(known.trouble.clone().unwrap_or_else(|| "Slurm's preemption rules are not read yet".into())),
        }
    }

    /// Takes a read's outcome; says so in the log when it changes what is known.
    fn learn(&self, outcome: Result<Rules, String>) {
        let mut known = self.0.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        match outcome {
            Ok(rules) => {
                if known.rules.as_ref().is_none_or(|(_, old)| **old != rules) {
                    tracing::info!(rules = ?rules, "Slurm's preemption rules read");
                }
                known.rules = Some((Instant::now(), Arc::new(rules)));
                known.trouble = None;
            }
            Err(trouble) => {
                if known.trouble.as_deref() != Some(trouble.as_str()) {
                    tracing::warn!(%trouble, "Slurm's preemption rules cannot be read: nothing is preempted without them");
                }
                // What cannot be said is no rules at all; a read that failed leaves the last until stale.
                if trouble.starts_with(UNSAID) {
                    known.rules = None;
                }
                known.trouble = Some(trouble);
            }
        }
    }

    /// For tests: rules as if just read.
    #[cfg(test)]
    pub fn of(rules: Rules) -> Self {
        let known = Self::default();
        known.learn(Ok(rules));
        known
    }
}

/// The start of a trouble that is Slurm's configuration, not a failed read.
const UNSAID: &str = "rules: ";

/// Reads the rules every [`READ_EVERY`], for ever.
pub async fn read(known: KnownRules, slurm: Arc<dyn Slurm>, stated: Stated) {
    let mut ticker = tokio::time::interval(READ_EVERY);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        ticker.tick().await;
        let outcome = match slurm.preemption_setup().await {
            Ok(setup) => rules_from(setup, &stated).map_err(|why| format!("{UNSAID}{why}")),
            Err(error) => Err(format!("reading them from slurmrestd failed: {error}")),
        };
        known.learn(outcome);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::slurm::{Partition, PartitionPreemptMode, PartitionPriority, PreemptionConf, Qos};

    fn partition(name: &str, tier: u16, mode: PartitionPreemptMode) -> Partition {
        Partition { name: name.into(), priority: PartitionPriority { tier }, preempt_mode: mode, ..Default::default() }
    }

    fn modes(text: &str) -> PreemptModes {
        PreemptModes::parse_conf(text).unwrap()
    }

    #[test]
    fn slurm_s_word_beats_the_operator_s_and_the_operator_s_fills_what_slurmrestd_cannot_say() {
        let stated = Stated {
            preempt_type: Some(PreemptType::PartitionPrio),
            mode: Some(modes("REQUEUE")),
            exempt_time: Some(60),
            partition_modes: BTreeMap::from([("urgent".into(), modes("OFF"))]),
        };
        // Slurm 24.11: no slurm.conf, no partition PreemptMode, no accounting.
        let old = PreemptionSetup {
            conf: None,
            partitions: vec![
                partition("batch", 1, PartitionPreemptMode::Unlisted),
                partition("urgent", 2, PartitionPreemptMode::Unlisted),
            ],
            qos: None,
        };
        let rules = rules_from(old.clone(), &stated).unwrap();
        assert_eq!(
            (rules.preempt_type, rules.mode, rules.exempt_time),
            (Some(PreemptType::PartitionPrio), modes("REQUEUE"), Some(60))
        );
        assert_eq!(rules.partitions["batch"].mode, None, "a partition not stated takes the cluster's mode");
        assert_eq!(rules.partitions["urgent"].mode, Some(modes("OFF")));
        let unstated = rules_from(old.clone(), &Stated::default()).unwrap();
        assert_eq!((unstated.preempt_type, unstated.exempt_time), (None, None), "unknown, not made up");
        let qos_without_accounting = Stated { preempt_type: Some(PreemptType::Qos), ..stated.clone() };
        assert!(rules_from(old, &qos_without_accounting).unwrap_err().contains("serves no QOS"));

        // Slurm 26.05: slurm.conf and partition modes from slurmrestd, whatever the operator states.
        let conf = PreemptionConf {
            preempt_type: "preempt/qos".into(),
            preempt_mode: modes("CANCEL"),
            preempt_exempt_time: Some(5),
            preempt_parameters: vec!["min_exempt_priority=7".into()],
        };
        let new = PreemptionSetup {
            conf: Some(conf),
            partitions: vec![partition("urgent", 2, PartitionPreemptMode::Cluster)],
            qos: Some(vec![Qos { name: "normal".into(), ..Default::default() }]),
        };
        let rules = rules_from(new, &stated).unwrap();
        assert_eq!(
            (rules.preempt_type, rules.mode, rules.exempt_time),
            (Some(PreemptType::Qos), modes("CANCEL"), Some(5))
        );
        assert_eq!((rules.min_exempt_priority, rules.partitions["urgent"].mode), (Some(7), None));
        assert!(rules.qos.contains_key("normal"));
    }

    #[test]
    fn no_rules_until_read_a_failed_read_keeps_the_last_and_an_unsaid_rule_drops_them() {
        let known = KnownRules::default();
        assert!(known.current().unwrap_err().contains("not read yet"));
        let rules = rules_from(
            PreemptionSetup::default(),
            &Stated { preempt_type: Some(PreemptType::None), ..Default::default() },
        );
        known.learn(rules);
        assert!(known.current().is_ok());
        known.learn(Err("reading them from slurmrestd failed: down".into()));
        assert!(known.current().is_ok(), "the last rules serve until stale");
        known.learn(Err(format!("{UNSAID}PreemptType unknown")));
        assert!(known.current().unwrap_err().contains("PreemptType unknown"));
        let stale = KnownRules::default();
        stale.0.lock().unwrap().rules = Some((Instant::now() - STALE_AFTER, Arc::new(known_rules())));
        assert!(stale.current().is_err(), "rules read too long ago are none");
    }

    #[test]
    fn slurm_conf_s_spellings_read_as_slurm_reads_them() {
        let cases = [
            ("5", Ok(300)),
            ("5:30", Ok(330)),
            ("01:00:00", Ok(3600)),
            ("1-2", Ok(93_600)),
            ("1-0:1", Ok(86_460)),
            ("0-0:0:7", Ok(7)),
            ("-1", Ok(0)),
        ];
        for (text, seconds) in cases {
            assert_eq!(slurm_duration(text), seconds, "{text}");
        }
        for bad in ["", "five", "1:2:3:4", "1-2:3:4:5", "-5"] {
            assert!(slurm_duration(bad).is_err(), "{bad}");
        }
        assert_eq!(partition_preempt_mode("urgent=OFF"), Ok(("urgent".into(), PreemptModes::default())));
        assert_eq!(partition_preempt_mode("b=SUSPEND,GANG").map(|(_, mode)| mode.suspend && mode.gang), Ok(true));
        assert!(partition_preempt_mode("urgent").is_err() && partition_preempt_mode("=OFF").is_err());
        assert!(partition_preempt_mode("u=OOF").is_err());
    }

    fn known_rules() -> Rules {
        rules_from(PreemptionSetup::default(), &Stated { preempt_type: Some(PreemptType::None), ..Default::default() })
            .unwrap()
    }
}
