//! What Slurm's own preemption rules are made of, as slurmrestd tells them (it knows nothing of what
//! a caller makes of them):
//!
//! - the cluster's `PreemptType`, `PreemptMode`, `PreemptExemptTime` and `PreemptParameters`, from
//!   slurm.conf (`GET /slurm/v0.0.45/conf`: only Slurm 26.05's slurmrestd serves it);
//! - each partition's `PriorityTier`, QOS and `PreemptMode` (the mode only from data parser v0.0.45
//!   on: earlier parsers leave it out);
//! - each QOS's `Preempt` list, `PreemptMode`, `PreemptExemptTime` and flags
//!   (`GET /slurmdb/{v}/qos`, where slurmrestd runs its openapi/slurmdbd plugin).
//!
//! Shapes follow Slurm's data parsers (src/plugins/data_parser/v0.0.4x/parsers.c).

use serde::{Deserialize, Deserializer};

use crate::NoValue;
use crate::model::Envelope;

/// A `PreemptMode` as Slurm lists it: `["REQUEUE", "GANG"]`, or `["DISABLED"]` for `OFF`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PreemptModes {
    pub suspend: bool,
    pub requeue: bool,
    pub cancel: bool,
    /// Gang scheduling: no way of preempting by itself.
    pub gang: bool,
    /// `preempt/qos`: jobs of one QOS may preempt each other, by priority.
    pub within: bool,
    /// A preemptor must rank above its victim by job priority.
    pub priority: bool,
}

impl PreemptModes {
    /// From the names slurmrestd lists (`DISABLED` sets nothing). A name Slurm may add later is
    /// ignored: it cannot make a job preemptable that the known ones do not.
    pub fn from_names<S: AsRef<str>>(names: &[S]) -> Self {
        let mut modes = Self::default();
        for name in names {
            match name.as_ref().to_ascii_uppercase().as_str() {
                "SUSPEND" => modes.suspend = true,
                "REQUEUE" => modes.requeue = true,
                "CANCEL" => modes.cancel = true,
                "GANG" => modes.gang = true,
                "WITHIN" => modes.within = true,
                "PRIORITY" => modes.priority = true,
                _ => {}
            }
        }
        modes
    }

    /// From slurm.conf's spelling, `REQUEUE,GANG` or `OFF`; an unknown word is an error (the text is
    /// an operator's, who should hear of a typo).
    pub fn parse_conf(text: &str) -> Result<Self, String> {
        let words: Vec<&str> = text.split(',').map(str::trim).filter(|word| !word.is_empty()).collect();
        for word in &words {
            let known = ["OFF", "SUSPEND", "REQUEUE", "CANCEL", "GANG", "WITHIN", "PRIORITY"];
            if !known.iter().any(|known| known.eq_ignore_ascii_case(word)) {
                return Err(format!(
                    "{word:?} is no PreemptMode (OFF, SUSPEND, REQUEUE, CANCEL, GANG, WITHIN, PRIORITY)"
                ));
            }
        }
        Ok(Self::from_names(&words))
    }

    /// Whether the mode removes a job from its nodes (suspends, requeues or cancels it). A mode
    /// without one (`OFF`, or `GANG` alone) preempts nothing.
    pub fn removes_jobs(&self) -> bool {
        self.suspend || self.requeue || self.cancel
    }
}

impl<'de> Deserialize<'de> for PreemptModes {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        Ok(Self::from_names(&Vec::<String>::deserialize(deserializer)?))
    }
}

/// A partition's own `PreemptMode`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum PartitionPreemptMode {
    /// The data parser does not list it (v0.0.42 to v0.0.44 skip the field).
    #[default]
    Unlisted,
    /// None of its own: the cluster's applies (`CLUSTER_GLOBAL`).
    Cluster,
    Own(PreemptModes),
}

impl<'de> Deserialize<'de> for PartitionPreemptMode {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let names = Vec::<String>::deserialize(deserializer)?;
        if names.iter().any(|name| name.eq_ignore_ascii_case("CLUSTER_GLOBAL")) {
            return Ok(Self::Cluster);
        }
        Ok(Self::Own(PreemptModes::from_names(&names)))
    }
}

/// One partition, as `GET /partitions` lists it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
pub struct Partition {
    pub name: String,
    #[serde(default)]
    pub priority: PartitionPriority,
    /// The partition's QOS (slurm.conf's `QOS=`), empty for none.
    #[serde(default)]
    pub qos: PartitionQos,
    #[serde(default)]
    pub preempt_mode: PartitionPreemptMode,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
pub struct PartitionPriority {
    /// `PriorityTier`: with `preempt/partition_prio`, a job of a higher tier may preempt.
    #[serde(default)]
    pub tier: u16,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
pub struct PartitionQos {
    #[serde(default)]
    pub assigned: String,
}

#[derive(Debug, Deserialize)]
pub(super) struct PartitionsResponse {
    /// Required: a listing without its list is unreadable, never "no partitions".
    pub partitions: Vec<Partition>,
    #[serde(flatten)]
    pub envelope: Envelope,
}

/// One QOS, as `GET /slurmdb/{v}/qos` lists it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
pub struct Qos {
    pub name: String,
    #[serde(default)]
    pub preempt: QosPreempt,
    /// `OVERRIDE_PARTITION_QOS` among them puts this QOS's limits before its partition's.
    #[serde(default)]
    pub flags: Vec<String>,
}

impl Qos {
    pub fn overrides_partition_qos(&self) -> bool {
        self.flags.iter().any(|flag| flag == "OVERRIDE_PARTITION_QOS")
    }
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
pub struct QosPreempt {
    /// The QOS whose jobs a job of this one may preempt (`Preempt=`).
    #[serde(default)]
    pub list: Vec<String>,
    /// Its own `PreemptMode`; `DISABLED` (none set) takes the cluster's.
    #[serde(default)]
    pub mode: PreemptModes,
    /// Seconds a job of it runs before it may be preempted; unset or infinite: none of its own.
    #[serde(default)]
    pub exempt_time: NoValue,
}

#[derive(Debug, Deserialize)]
pub(super) struct QosResponse {
    pub qos: Vec<Qos>,
    #[serde(flatten)]
    pub envelope: Envelope,
}

/// The preemption lines of slurm.conf.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
pub struct PreemptionConf {
    /// `preempt/partition_prio`, `preempt/qos`; absent, empty or `preempt/none`: none.
    #[serde(rename = "PreemptType", default, deserialize_with = "text_or_null")]
    pub preempt_type: String,
    #[serde(rename = "PreemptMode", default)]
    pub preempt_mode: PreemptModes,
    /// Seconds every job runs before it may be preempted, unless its QOS says otherwise.
    #[serde(rename = "PreemptExemptTime", default, deserialize_with = "seconds")]
    pub preempt_exempt_time: Option<u64>,
    /// `PreemptParameters`, one option each (`min_exempt_priority=1000`).
    #[serde(rename = "PreemptParameters", default)]
    pub preempt_parameters: Vec<String>,
}

impl PreemptionConf {
    /// `PreemptParameters=min_exempt_priority=N`: a job of a priority above N is never preempted.
    pub fn min_exempt_priority(&self) -> Option<u64> {
        self.preempt_parameters.iter().find_map(|option| option.strip_prefix("min_exempt_priority=")?.parse().ok())
    }
}

#[derive(Debug, Deserialize)]
pub(super) struct ConfResponse {
    pub slurm_conf: PreemptionConf,
    #[serde(flatten)]
    pub envelope: Envelope,
}

/// Everything slurmrestd could say of Slurm's preemption rules at one moment.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PreemptionSetup {
    /// slurm.conf's lines; `None` where slurmrestd cannot say (before Slurm 26.05).
    pub conf: Option<PreemptionConf>,
    pub partitions: Vec<Partition>,
    /// Every QOS; `None` where slurmrestd serves no accounting (no openapi/slurmdbd plugin).
    pub qos: Option<Vec<Qos>>,
}

fn text_or_null<'de, D: Deserializer<'de>>(deserializer: D) -> Result<String, D::Error> {
    Ok(Option::<String>::deserialize(deserializer)?.unwrap_or_default())
}

/// Seconds as slurmrestd writes a `UINT32_NO_VAL`: `{"set": true, "number": 300}`, or a bare number;
/// unset or infinite is none.
fn seconds<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Option<u64>, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Either {
        Plain(u64),
        Slurm(NoValue),
        Null(()),
    }
    Ok(match Either::deserialize(deserializer)? {
        Either::Plain(seconds) => Some(seconds),
        Either::Slurm(value) => value.get(),
        Either::Null(()) => None,
    })
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn modes_read_as_slurmrestd_lists_them_and_as_slurm_conf_spells_them() {
        assert_eq!(PreemptModes::from_names(&["DISABLED"]), PreemptModes::default());
        let requeue_gang = PreemptModes { requeue: true, gang: true, ..Default::default() };
        assert_eq!(PreemptModes::from_names(&["REQUEUE", "GANG", "SOMETHING_NEW"]), requeue_gang);
        assert_eq!(PreemptModes::parse_conf("requeue,GANG"), Ok(requeue_gang));
        assert_eq!(PreemptModes::parse_conf("OFF"), Ok(PreemptModes::default()));
        assert!(PreemptModes::parse_conf("REQUEU").unwrap_err().contains("\"REQUEU\" is no PreemptMode"));
        assert!(!PreemptModes::parse_conf("GANG").unwrap().removes_jobs(), "gang scheduling alone removes nothing");
        assert!(PreemptModes::parse_conf("CANCEL").unwrap().removes_jobs());
    }

    /// v0.0.45's partition (Slurm 26.05): its PreemptMode is listed, `CLUSTER_GLOBAL` when it has none.
    #[test]
    fn a_v0_0_45_partition_lists_its_preempt_mode() {
        let listed = |mode: serde_json::Value| {
            let partition = json!({"name": "urgent", "priority": {"job_factor": 1, "tier": 2},
                                   "qos": {"allowed": "", "assigned": "high", "deny": ""}, "preempt_mode": mode});
            serde_json::from_value::<Partition>(partition).unwrap()
        };
        let off = listed(json!(["DISABLED"]));
        assert_eq!((off.priority.tier, off.qos.assigned.as_str()), (2, "high"));
        assert_eq!(off.preempt_mode, PartitionPreemptMode::Own(PreemptModes::default()));
        assert_eq!(listed(json!(["CLUSTER_GLOBAL"])).preempt_mode, PartitionPreemptMode::Cluster);
        let requeue = PreemptModes { requeue: true, ..Default::default() };
        assert_eq!(listed(json!(["REQUEUE"])).preempt_mode, PartitionPreemptMode::Own(requeue));
    }

    /// A QOS as v0.0.42 to v0.0.45 list it (`slurmdb_qos_rec_t`'s parser).
    #[test]
    fn a_qos_lists_whom_it_preempts_how_and_after_how_long() {
        let answer = json!({"qos": [
            {"name": "high", "flags": ["OVERRIDE_PARTITION_QOS"], "priority": {"set": true, "number": 100},
             "preempt": {"list": ["normal", "scavenger"], "mode": ["REQUEUE"],
                         "exempt_time": {"set": true, "infinite": false, "number": 300}}},
            {"name": "normal", "preempt": {"list": [], "mode": ["DISABLED"],
                                           "exempt_time": {"set": false, "infinite": true, "number": 0}}}
        ], "errors": [], "warnings": []});
        let read: QosResponse = serde_json::from_value(answer).unwrap();
        let (high, normal) = (&read.qos[0], &read.qos[1]);
        assert_eq!(high.preempt.list, ["normal", "scavenger"]);
        assert!(high.preempt.mode.requeue && high.overrides_partition_qos());
        assert_eq!(high.preempt.exempt_time.get(), Some(300));
        assert_eq!((normal.preempt.mode, normal.preempt.exempt_time.get()), (PreemptModes::default(), None));
    }

    /// `GET /slurm/v0.0.45/conf` (Slurm 26.05): slurm.conf's keys as its parser names them.
    #[test]
    fn the_conf_says_the_cluster_s_preemption() {
        let answer = json!({"slurm_conf": {"PreemptType": "preempt/qos", "PreemptMode": ["REQUEUE", "GANG"],
                                           "PreemptExemptTime": {"set": true, "infinite": false, "number": 600},
                                           "PreemptParameters": ["youngest_first", "min_exempt_priority=5000"],
                                           "ClusterName": "x"},
                            "errors": [], "warnings": []});
        let conf = serde_json::from_value::<ConfResponse>(answer).unwrap().slurm_conf;
        assert_eq!(conf.preempt_type, "preempt/qos");
        assert!(conf.preempt_mode.requeue && conf.preempt_mode.gang);
        assert_eq!((conf.preempt_exempt_time, conf.min_exempt_priority()), (Some(600), Some(5000)));
        let bare: PreemptionConf =
            serde_json::from_value(json!({"PreemptType": null, "PreemptExemptTime": 0})).unwrap();
        assert_eq!((bare.preempt_type.as_str(), bare.preempt_exempt_time), ("", Some(0)));
        assert_eq!(bare.preempt_mode, PreemptModes::default());
    }
}
