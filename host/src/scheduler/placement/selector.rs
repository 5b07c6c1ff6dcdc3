//! Kubernetes label selectors as kube-scheduler reads them in pod (anti-)affinity terms and spread
//! constraints: a null selector matches nothing, an empty one everything.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;

/// A Kubernetes label selector: a null one matches nothing, an empty one everything.
#[derive(Debug, Clone)]
pub(super) enum Selector<'a> {
    Nothing,
    /// Every requirement holds (none: everything matches).
    Requiring(Vec<Requirement<'a>>),
}

#[derive(Debug, Clone)]
pub(super) struct Requirement<'a> {
    key: &'a str,
    operator: Operator,
    values: Vec<&'a str>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Operator {
    In,
    NotIn,
    Exists,
    DoesNotExist,
}

impl<'a> Selector<'a> {
    /// The selector as Kubernetes reads it, or why it cannot be (the API server refuses such a
    /// selector, so only an object that bypassed its validation has one).
    pub(super) fn read(selector: Option<&'a LabelSelector>) -> Result<Self, String> {
        let Some(selector) = selector else { return Ok(Selector::Nothing) };
        let pairs = selector.match_labels.iter().flatten();
        let mut requirements: Vec<Requirement> =
            pairs.map(|(key, value)| Requirement { key, operator: Operator::In, values: vec![value] }).collect();
        for (at, expression) in selector.match_expressions.iter().flatten().enumerate() {
            let values: Vec<&str> = expression.values.iter().flatten().map(String::as_str).collect();
            let operator = match expression.operator.as_str() {
                "In" => Operator::In,
                "NotIn" => Operator::NotIn,
                "Exists" => Operator::Exists,
                "DoesNotExist" => Operator::DoesNotExist,
                other => return Err(format!("matchExpressions[{at}]: operator {other:?} is not a label selector's")),
            };
            let needs_values = matches!(operator, Operator::In | Operator::NotIn);
            if needs_values == values.is_empty() {
                let why = if needs_values { "needs values" } else { "takes no values" };
                return Err(format!("matchExpressions[{at}]: {} {why}", expression.operator));
            }
            requirements.push(Requirement { key: &expression.key, operator, values });
        }
        Ok(Selector::Requiring(requirements))
    }

    pub(super) fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        let Selector::Requiring(requirements) = self else { return false };
        requirements.iter().all(|requirement| {
            let value = labels.get(requirement.key).map(String::as_str);
            let listed = value.is_some_and(|value| requirement.values.contains(&value));
            match requirement.operator {
                Operator::In => listed,
                Operator::NotIn => !listed,
                Operator::Exists => value.is_some(),
                Operator::DoesNotExist => value.is_none(),
            }
        })
    }

    pub(super) fn is_everything(&self) -> bool {
        matches!(self, Selector::Requiring(requirements) if requirements.is_empty())
    }

    /// Adds a requirement on one value; a null selector becomes one of that requirement alone.
    pub(super) fn require(&mut self, key: &'a str, operator: Operator, value: &'a str) {
        let requirement = Requirement { key, operator, values: vec![value] };
        match self {
            Selector::Nothing => *self = Selector::Requiring(vec![requirement]),
            Selector::Requiring(requirements) => requirements.push(requirement),
        }
    }
}
