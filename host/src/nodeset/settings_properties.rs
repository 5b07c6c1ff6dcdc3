//! Property tests of NodeSet spec validation: any spec a user may write is turned into settings or
//! refused naming fields of the spec, never a panic; durations read back what they say.

use proptest::prelude::*;
use serde_json::{Value, json};

use super::resource::NodeSetSpec;
use super::settings::{parse_duration, settings};

/// Every field a refusal may name.
const FIELDS: [&str; 10] = [
    "spec.template",
    "spec.template.spec.containers",
    "spec.features",
    "spec.partitions",
    "spec.extraConf",
    "spec.topology.label",
    "spec.topology.name",
    "spec.updateStrategy.rollingUpdate",
    "spec.drainTimeout",
    "spec.slurmKeySecret",
];

fn text() -> impl Strategy<Value = String> {
    prop_oneof!["[a-z0-9_.-]{0,12}", "[A-Za-z]{1,8}=[a-z0-9,]{0,8}( [A-Za-z]{1,8}=[0-9]{0,4}){0,3}", "\\PC{0,20}"]
}

fn template() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(json!({"spec": {"containers": [{"name": "slurmd", "image": "slurmd"}]}})),
        Just(json!({"spec": {"containers": []}})),
        Just(json!({})),
        Just(json!({"spec": {"containers": "slurmd"}})),
        Just(json!(42)),
        "\\PC{0,12}".prop_map(Value::String),
    ]
}

fn max_unavailable() -> impl Strategy<Value = Value> {
    prop_oneof![
        any::<i32>().prop_map(Value::from),
        "[0-9]{0,4}%?".prop_map(Value::String),
        "\\PC{0,6}".prop_map(Value::String)
    ]
}

fn spec() -> impl Strategy<Value = Value> {
    (
        template(),
        prop::collection::vec(text(), 0..4),
        prop::collection::vec(text(), 0..4),
        prop::option::of(text()),
        prop::option::of((text(), prop::option::of(text()))),
        prop::option::of((max_unavailable(), prop::option::of(any::<i32>()))),
        prop::option::of(prop_oneof!["([0-9]{1,6}[smhd]){1,4}", "\\PC{0,10}"]),
        prop::option::of(text()),
    )
        .prop_map(|(template, features, partitions, extra_conf, topology, rolling, drain_timeout, secret)| {
            let mut spec = json!({"template": template, "features": features, "partitions": partitions});
            if let Some(extra) = extra_conf {
                spec["extraConf"] = extra.into();
            }
            if let Some((label, name)) = topology {
                spec["topology"] = json!({"label": label, "name": name});
            }
            if let Some((max, partition)) = rolling {
                spec["updateStrategy"] =
                    json!({"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": max, "partition": partition}});
            }
            if let Some(timeout) = drain_timeout {
                spec["drainTimeout"] = timeout.into();
            }
            if let Some(secret) = secret {
                spec["slurmKeySecret"] = secret.into();
            }
            spec
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn any_spec_is_settings_or_refused_naming_its_fields(spec in spec(), name in "[a-z][a-z0-9-]{0,10}") {
        let spec: NodeSetSpec = serde_json::from_value(spec).expect("the generator writes the spec's types");
        match settings(&name, &spec) {
            Ok(settings) => {
                prop_assert_eq!(&settings.features[0], &name);
                let unique: std::collections::BTreeSet<&String> = settings.features.iter().collect();
                prop_assert_eq!(unique.len(), settings.features.len());
            }
            Err(errors) => {
                prop_assert!(!errors.0.is_empty());
                for (field, problem) in &errors.0 {
                    prop_assert!(FIELDS.contains(&field.as_str()), "{field}: {problem}");
                    prop_assert!(!problem.is_empty());
                }
            }
        }
    }

    #[test]
    fn a_duration_reads_back_its_seconds(parts in prop::collection::vec((0u64..10_000, 0usize..4), 1..5)) {
        let units = [("s", 1), ("m", 60), ("h", 3600), ("d", 86_400)];
        let text: String = parts.iter().map(|&(n, unit)| format!("{n}{}", units[unit].0)).collect();
        let seconds: u64 = parts.iter().map(|&(n, unit)| n * units[unit].1).sum();
        prop_assert_eq!(parse_duration(&text), Ok(std::time::Duration::from_secs(seconds)));
    }
}
