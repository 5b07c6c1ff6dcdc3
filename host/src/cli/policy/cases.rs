//! The cases file of `sunk policy test`: inputs, what to expect, and how answers are compared.
//!
//! A case names only what matters: its `input` is merged over the world's first sample input, and its
//! `expect` need only be a subset of the answer (objects compared key by key, lists and scalars whole).

use std::collections::BTreeMap;

use anyhow::{Context as _, Result, bail};
use serde::Deserialize;
use serde_json::Value;

use crate::delivery::Decision;
use crate::policy::PolicyError;

/// A whole cases file.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CasesFile {
    /// The decision point; must agree with the module's.
    pub decision: Option<Decision>,
    /// The module's configuration for every case (overridden by `--config-file`).
    pub config: Option<String>,
    pub cases: Vec<Case>,
}

/// One input and what the module must answer.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Case {
    pub name: String,
    /// Merged over the world's first sample input.
    #[serde(default = "nothing_to_merge")]
    pub input: Value,
    /// A subset of the expected answer.
    pub expect: Option<Value>,
    /// The kind of failure expected instead of an answer.
    pub expect_error: Option<ErrorKind>,
}

fn nothing_to_merge() -> Value {
    Value::Object(Default::default())
}

/// A [`PolicyError`] without its details, as a case names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ErrorKind {
    Trap,
    OutOfFuel,
    Timeout,
    OutOfMemory,
    Invalid,
}

impl ErrorKind {
    pub fn of(error: &PolicyError) -> Self {
        match error {
            PolicyError::Trap(_) => Self::Trap,
            PolicyError::OutOfFuel => Self::OutOfFuel,
            PolicyError::Timeout => Self::Timeout,
            PolicyError::OutOfMemory => Self::OutOfMemory,
            PolicyError::Invalid(_) | PolicyError::Withheld(_) => Self::Invalid,
        }
    }
}

impl CasesFile {
    pub fn parse(text: &str) -> Result<Self> {
        let file: CasesFile = serde_saphyr::from_str(text)?;
        if file.cases.is_empty() {
            bail!("`cases` is empty");
        }
        let mut seen = BTreeMap::new();
        for (index, case) in file.cases.iter().enumerate() {
            if case.expect.is_some() == case.expect_error.is_some() {
                bail!("cases[{index}] ({}): give exactly one of `expect` and `expectError`", case.name);
            }
            if let Some(first) = seen.insert(case.name.as_str(), index) {
                bail!("cases[{index}]: the name `{}` is already used by cases[{first}]", case.name);
            }
        }
        Ok(file)
    }
}

/// `overlay` merged into `base`: objects key by key, anything else replaced. A variant (an object of one
/// capitalised key, as serde writes `Cordoned(..)`) replaces a different variant whole.
pub fn merge(base: &mut Value, overlay: &Value) {
    match (base, overlay) {
        (Value::Object(base), Value::Object(overlay)) if !is_other_variant(base, overlay) => {
            for (key, value) in overlay {
                match base.get_mut(key) {
                    Some(slot) => merge(slot, value),
                    None => {
                        base.insert(key.clone(), value.clone());
                    }
                }
            }
        }
        (base, overlay) => *base = overlay.clone(),
    }
}

fn is_other_variant(base: &serde_json::Map<String, Value>, overlay: &serde_json::Map<String, Value>) -> bool {
    let variant = |map: &serde_json::Map<String, Value>| match map.keys().collect::<Vec<_>>().as_slice() {
        [key] if key.starts_with(|c: char| c.is_ascii_uppercase()) => Some((*key).clone()),
        _ => None,
    };
    matches!((variant(base), variant(overlay)), (Some(a), Some(b)) if a != b)
}

/// The first place where `actual` does not contain `expected`, as `path: expected X, got Y`.
pub fn mismatch(expected: &Value, actual: &Value) -> Option<String> {
    mismatch_at("", expected, actual)
}

fn mismatch_at(path: &str, expected: &Value, actual: &Value) -> Option<String> {
    match (expected, actual) {
        (Value::Object(expected), Value::Object(actual)) => expected.iter().find_map(|(key, expected)| {
            let here = if path.is_empty() { key.clone() } else { format!("{path}.{key}") };
            match actual.get(key) {
                Some(actual) => mismatch_at(&here, expected, actual),
                None => Some(format!("{here}: expected {expected}, but there is no such field")),
            }
        }),
        _ if numbers_equal(expected, actual) || expected == actual => None,
        _ => Some(format!("{}: expected {expected}, got {actual}", if path.is_empty() { "answer" } else { path })),
    }
}

/// YAML `1` and JSON `1.0` are the same number to a reader.
fn numbers_equal(a: &Value, b: &Value) -> bool {
    matches!((a.as_f64(), b.as_f64()), (Some(a), Some(b)) if a == b)
}

/// The decision a cases file is for, checked against the one given on the command line.
pub fn decision(file: &CasesFile, given: Option<Decision>) -> Result<Option<Decision>> {
    match (file.decision, given) {
        (Some(a), Some(b)) if a != b => {
            bail!("the cases are for {}, but --decision says {}", a.as_str(), b.as_str())
        }
        (a, b) => Ok(a.or(b)),
    }
}

/// Reads and parses a cases file, naming it in errors.
pub fn read(path: &std::path::Path) -> Result<CasesFile> {
    let text = std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    CasesFile::parse(&text).with_context(|| format!("{} is not a valid cases file", path.display()))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn merge_replaces_lists_and_merges_objects() {
        let mut base = json!({"pod": {"name": "a", "labels": [{"key": "x", "value": "1"}]}, "cluster": {"p": 1}});
        merge(&mut base, &json!({"pod": {"labels": [{"key": "team", "value": "ml"}]}}));
        assert_eq!(
            base,
            json!({"pod": {"name": "a", "labels": [{"key": "team", "value": "ml"}]}, "cluster": {"p": 1}})
        );
    }

    #[test]
    fn a_variant_replaces_another_one() {
        let mut base = json!({"event": {"Cordoned": {"by": "kubectl"}}, "node": {"name": "n"}});
        merge(&mut base, &json!({"event": {"Uncordoned": null}}));
        assert_eq!(base, json!({"event": {"Uncordoned": null}, "node": {"name": "n"}}));
        merge(&mut base, &json!({"event": {"Uncordoned": 1}}));
        assert_eq!(base["event"], json!({"Uncordoned": 1}));
    }

    #[test]
    fn expect_is_a_subset() {
        let answer = json!({"Job": {"account": "ml", "cpus": 1, "comment": null}});
        assert_eq!(mismatch(&json!({"Job": {"account": "ml"}}), &answer), None);
        assert_eq!(mismatch(&json!({"Job": {"cpus": 1.0}}), &answer), None);
        assert_eq!(mismatch(&json!({"Job": {"comment": null}}), &answer), None);
        assert_eq!(
            mismatch(&json!({"Job": {"account": "ops"}}), &answer).as_deref(),
            Some(r#"Job.account: expected "ops", got "ml""#)
        );
        assert!(mismatch(&json!({"Reject": {}}), &answer).unwrap().starts_with("Reject: expected"));
    }

    #[test]
    fn cases_need_exactly_one_expectation_and_unique_names() {
        let neither = "cases:\n  - name: a\n    input: {}\n";
        assert!(format!("{:#}", CasesFile::parse(neither).unwrap_err()).contains("exactly one"));
        let twice = "cases:\n  - {name: a, expectError: trap}\n  - {name: a, expectError: invalid}\n";
        assert!(format!("{:#}", CasesFile::parse(twice).unwrap_err()).contains("already used"));
        let fine = "decision: job-mapper\ncases:\n  - {name: a, expect: {Job: {}}}\n  - {name: b, expectError: out-of-memory}\n  - {name: c, expectError: out-of-fuel}\n";
        let file = CasesFile::parse(fine).unwrap();
        assert_eq!(file.decision, Some(Decision::JobMapper));
        assert_eq!(file.cases[1].expect_error, Some(ErrorKind::OutOfMemory));
        assert_eq!(file.cases[2].expect_error, Some(ErrorKind::OutOfFuel));
        assert_eq!(file.cases[1].input, json!({}), "a case without input runs the sample as it is");
    }
}
