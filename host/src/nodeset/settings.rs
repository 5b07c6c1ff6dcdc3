//! A NodeSet's spec checked and turned into typed settings; every mistake names its field.

use std::fmt;
use std::time::Duration;

use k8s_openapi::api::core::v1::PodTemplateSpec;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use super::resource::{NodeSetSpec, TopologySpec, UpdateStrategyType};

const DEFAULT_DRAIN_TIMEOUT: Duration = Duration::from_secs(3600);

/// How outdated pods are replaced.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Strategy {
    OnDelete,
    RollingUpdate { max_unavailable: MaxUnavailable, partition: u32 },
}

/// `maxUnavailable`, not yet scaled to a number of Nodes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MaxUnavailable {
    Count(u32),
    Percent(u32),
}

impl MaxUnavailable {
    /// As a DaemonSet: a percentage of `desired` rounded up, and never less than one.
    pub fn of(self, desired: usize) -> usize {
        let scaled = match self {
            MaxUnavailable::Count(count) => count as usize,
            MaxUnavailable::Percent(percent) => (desired * percent as usize).div_ceil(100),
        };
        scaled.max(1)
    }
}

/// Everything the controller reads from a valid spec.
#[derive(Debug, Clone)]
pub struct Settings {
    pub template: PodTemplateSpec,
    /// The NodeSet's name first, then `features`, then `partitions`, without repeats.
    pub features: Vec<String>,
    pub extra_conf: Vec<(String, String)>,
    pub topology: Option<TopologySpec>,
    pub strategy: Strategy,
    pub drain_timeout: Duration,
    pub force: bool,
    pub slurm_key_secret: Option<String>,
}

/// What is wrong with a spec: one entry per field.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SpecErrors(pub Vec<(String, String)>);

impl fmt::Display for SpecErrors {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let parts: Vec<String> = self.0.iter().map(|(field, problem)| format!("{field}: {problem}")).collect();
        f.write_str(&parts.join("; "))
    }
}

impl std::error::Error for SpecErrors {}

/// Checks `spec` of the NodeSet named `name`.
pub fn settings(name: &str, spec: &NodeSetSpec) -> Result<Settings, SpecErrors> {
    let mut errors = Vec::new();
    let mut check = |field: &str, result: Result<(), String>| {
        if let Err(problem) = result {
            errors.push((field.to_owned(), problem));
        }
    };
    let template = spec.template.parse();
    check("spec.template", template.as_ref().map(drop).map_err(Clone::clone));
    let has_containers = template.as_ref().ok().and_then(|t| t.spec.as_ref()).is_some_and(|s| !s.containers.is_empty());
    if template.is_ok() && !has_containers {
        check("spec.template.spec.containers", Err("needs the slurmd container".into()));
    }
    let mut features = vec![name.to_owned()];
    for (field, names) in [("spec.features", &spec.features), ("spec.partitions", &spec.partitions)] {
        for feature in names {
            check(field, slurm_word(feature));
            if !features.contains(feature) {
                features.push(feature.clone());
            }
        }
    }
    let extra_conf = spec.extra_conf.as_deref().map(extra_conf).unwrap_or(Ok(Vec::new()));
    check("spec.extraConf", extra_conf.as_ref().map(drop).map_err(Clone::clone));
    if let Some(topology) = &spec.topology {
        check("spec.topology.label", (!topology.label.is_empty()).then_some(()).ok_or("must name a Node label".into()));
        check("spec.topology.name", topology.name.as_deref().map_or(Ok(()), slurm_word));
    }
    let strategy = strategy(spec);
    check("spec.updateStrategy.rollingUpdate", strategy.as_ref().map(drop).map_err(Clone::clone));
    let drain_timeout = spec.drain_timeout.as_deref().map_or(Ok(DEFAULT_DRAIN_TIMEOUT), parse_duration);
    check("spec.drainTimeout", drain_timeout.as_ref().map(drop).map_err(Clone::clone));
    if let Some(secret) = &spec.slurm_key_secret {
        check("spec.slurmKeySecret", (!secret.is_empty()).then_some(()).ok_or("must not be empty".into()));
    }
    if !errors.is_empty() {
        return Err(SpecErrors(errors));
    }
    Ok(Settings {
        template: template.unwrap_or_default(),
        features,
        extra_conf: extra_conf.unwrap_or_default(),
        topology: spec.topology.clone(),
        strategy: strategy.unwrap_or(Strategy::OnDelete),
        drain_timeout: drain_timeout.unwrap_or(DEFAULT_DRAIN_TIMEOUT),
        force: spec.force,
        slurm_key_secret: spec.slurm_key_secret.clone(),
    })
}

/// A feature, partition or topology name: what Slurm accepts inside a comma-separated list.
fn slurm_word(word: &str) -> Result<(), String> {
    let valid = !word.is_empty() && word.chars().all(|c| c.is_ascii_alphanumeric() || "_-.".contains(c));
    if valid { Ok(()) } else { Err(format!("{word:?} may only hold letters, digits, '_', '-' and '.'")) }
}

fn extra_conf(text: &str) -> Result<Vec<(String, String)>, String> {
    let mut pairs = Vec::new();
    for item in text.split_whitespace() {
        let Some((key, value)) = item.split_once('=').filter(|(key, _)| !key.is_empty()) else {
            return Err(format!("{item:?} is not Key=Value"));
        };
        if key.eq_ignore_ascii_case("Features") || key.eq_ignore_ascii_case("Feature") {
            return Err("set features in spec.features".into());
        }
        if key.eq_ignore_ascii_case("NodeName") {
            return Err("the host names each node after its Kubernetes Node".into());
        }
        if !item.chars().all(|c| c.is_ascii_graphic()) || item.contains(['"', '\'']) {
            return Err(format!("{item:?} holds quotes or characters Slurm would not read"));
        }
        pairs.push((key.to_owned(), value.to_owned()));
    }
    Ok(pairs)
}

fn strategy(spec: &NodeSetSpec) -> Result<Strategy, String> {
    if spec.update_strategy.type_ == UpdateStrategyType::OnDelete {
        return Ok(Strategy::OnDelete);
    }
    let rolling = spec.update_strategy.rolling_update.clone().unwrap_or_default();
    let max_unavailable = match rolling.max_unavailable {
        None => MaxUnavailable::Count(1),
        Some(IntOrString::Int(count)) if count >= 1 => MaxUnavailable::Count(count as u32),
        Some(IntOrString::Int(count)) => return Err(format!("maxUnavailable {count} must be at least 1")),
        Some(IntOrString::String(text)) => {
            parse_percent(&text).map_err(|problem| format!("maxUnavailable {problem}"))?
        }
    };
    let partition = match rolling.partition.unwrap_or(0) {
        partition if partition >= 0 => partition as u32,
        partition => return Err(format!("partition {partition} must not be negative")),
    };
    Ok(Strategy::RollingUpdate { max_unavailable, partition })
}

fn parse_percent(text: &str) -> Result<MaxUnavailable, String> {
    let number =
        text.trim().strip_suffix('%').ok_or_else(|| format!("{text:?} is neither a count nor a percentage"))?;
    match number.parse::<u32>() {
        Ok(percent) if (1..=100).contains(&percent) => Ok(MaxUnavailable::Percent(percent)),
        Ok(percent) => Err(format!("{percent}% must be between 1% and 100%")),
        Err(_) => Err(format!("{text:?} is not a percentage")),
    }
}

/// `1h30m`, `90s`, `2d`: numbers with units s, m, h, d.
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let problem = || format!("{text:?} is not a duration (e.g. 30m, 1h30m, 90s)");
    let mut total: u64 = 0;
    let mut number = String::new();
    for c in text.trim().chars() {
        if c.is_ascii_digit() {
            number.push(c);
            continue;
        }
        let unit = match c {
            's' => 1,
            'm' => 60,
            'h' => 3600,
            'd' => 86_400,
            _ => return Err(problem()),
        };
        let value: u64 = number.parse().map_err(|_| problem())?;
        total = value.checked_mul(unit).and_then(|seconds| total.checked_add(seconds)).ok_or_else(problem)?;
        number.clear();
    }
    if !number.is_empty() || text.trim().is_empty() {
        return Err(problem());
    }
    Ok(Duration::from_secs(total))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::nodeset::resource::{PodTemplate, RollingUpdate, UpdateStrategy};

    fn spec() -> NodeSetSpec {
        NodeSetSpec {
            template: PodTemplate(serde_json::json!({"spec": {"containers": [{"name": "slurmd", "image": "x"}]}})),
            ..Default::default()
        }
    }

    fn with_max_unavailable(value: IntOrString) -> NodeSetSpec {
        let rolling = RollingUpdate { max_unavailable: Some(value), partition: None };
        NodeSetSpec {
            update_strategy: UpdateStrategy { rolling_update: Some(rolling), ..Default::default() },
            ..spec()
        }
    }

    fn error_of(spec: &NodeSetSpec) -> String {
        settings("ns", spec).unwrap_err().to_string()
    }

    #[test]
    fn defaults_are_one_at_a_time_and_an_hour() {
        let settings = settings("cpu", &spec()).unwrap();
        assert_eq!(
            settings.strategy,
            Strategy::RollingUpdate { max_unavailable: MaxUnavailable::Count(1), partition: 0 }
        );
        assert_eq!(settings.drain_timeout, Duration::from_secs(3600));
        assert_eq!(settings.features, ["cpu"]);
    }

    #[test]
    fn bad_max_unavailable_names_the_field() {
        for (value, expected) in [
            (IntOrString::String("150%".into()), "150% must be between 1% and 100%"),
            (IntOrString::String("abc".into()), "\"abc\" is neither a count nor a percentage"),
            (IntOrString::String("x%".into()), "\"x%\" is not a percentage"),
            (IntOrString::String("0%".into()), "0% must be between"),
            (IntOrString::Int(0), "maxUnavailable 0 must be at least 1"),
            (IntOrString::Int(-3), "maxUnavailable -3 must be at least 1"),
        ] {
            let error = error_of(&with_max_unavailable(value));
            assert!(error.starts_with("spec.updateStrategy.rollingUpdate: maxUnavailable"), "{error}");
            assert!(error.contains(expected), "{error}");
        }
        let ok = settings("ns", &with_max_unavailable(IntOrString::String("25%".into()))).unwrap();
        assert!(matches!(ok.strategy, Strategy::RollingUpdate { max_unavailable: MaxUnavailable::Percent(25), .. }));
    }

    #[test]
    fn max_unavailable_scales_like_a_daemonset() {
        assert_eq!(MaxUnavailable::Percent(25).of(10), 3);
        assert_eq!(MaxUnavailable::Percent(10).of(3), 1);
        assert_eq!(MaxUnavailable::Percent(100).of(4), 4);
        assert_eq!(MaxUnavailable::Percent(50).of(0), 1);
        assert_eq!(MaxUnavailable::Count(2).of(1), 2);
    }

    #[test]
    fn reports_every_bad_field() {
        let spec = NodeSetSpec {
            template: PodTemplate(serde_json::json!({"spec": {"containers": "no"}})),
            features: vec!["ok".into(), "bad feature".into()],
            partitions: vec!["a,b".into()],
            extra_conf: Some("Weight=5 Features=x".into()),
            drain_timeout: Some("soon".into()),
            ..Default::default()
        };
        let error = error_of(&spec);
        for field in ["spec.template:", "spec.features:", "spec.partitions:", "spec.extraConf:", "spec.drainTimeout:"] {
            assert!(error.contains(field), "{field} missing from {error}");
        }
    }

    #[test]
    fn a_template_without_containers_is_refused() {
        let spec = NodeSetSpec { template: PodTemplate(serde_json::json!({"spec": {"containers": []}})), ..spec() };
        assert!(error_of(&spec).starts_with("spec.template.spec.containers"));
        let spec = NodeSetSpec { template: PodTemplate(serde_json::json!({})), ..spec };
        assert!(error_of(&spec).starts_with("spec.template.spec.containers"));
    }

    #[test]
    fn features_start_with_the_nodeset_and_include_partitions() {
        let spec = NodeSetSpec {
            features: vec!["h100".into(), "gpu".into()],
            partitions: vec!["gpu".into(), "batch".into()],
            ..spec()
        };
        assert_eq!(settings("ns", &spec).unwrap().features, ["ns", "h100", "gpu", "batch"]);
    }

    #[test]
    fn parses_durations() {
        assert_eq!(parse_duration("90s"), Ok(Duration::from_secs(90)));
        assert_eq!(parse_duration("1h30m"), Ok(Duration::from_secs(5400)));
        assert_eq!(parse_duration("2d"), Ok(Duration::from_secs(172_800)));
        assert_eq!(parse_duration("0s"), Ok(Duration::ZERO));
        for bad in ["", "5", "m", "1x", "-1s", "99999999999999999999d"] {
            assert!(parse_duration(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn extra_conf_is_key_value_pairs() {
        assert_eq!(
            extra_conf("Weight=10  TmpDisk=100").unwrap(),
            [("Weight".into(), "10".into()), ("TmpDisk".into(), "100".into())]
        );
        assert!(extra_conf("Weight").is_err());
        assert!(extra_conf("=5").is_err());
        assert!(extra_conf("NodeName=x").is_err());
        assert!(extra_conf("Reason='a'").is_err());
    }

    #[test]
    fn a_negative_partition_is_refused() {
        let rolling = RollingUpdate { max_unavailable: None, partition: Some(-1) };
        let spec = NodeSetSpec {
            update_strategy: UpdateStrategy { rolling_update: Some(rolling), ..Default::default() },
            ..spec()
        };
        assert!(error_of(&spec).contains("partition -1 must not be negative"));
    }
}
