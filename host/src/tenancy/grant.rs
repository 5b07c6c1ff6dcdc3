//! What the operator grants a namespace's pods in Slurm, and which grant a namespace gets.
//!
//! Read from a JSON document the chart renders from its `tenancy` values (`--tenancy`). Everything a
//! grant does not name is withheld: a fresh installation runs every placeholder as `nobody` and
//! honours no annotation that asks Slurm for an identity, an account or a rank.
//!
//! A grant is for namespaces by name, by label (`namespaceSelector`), or both. A namespace named by a
//! grant gets that grant; otherwise the first grant, in the document's order, whose selector its
//! labels match; otherwise `default`. Namespace labels are the cluster administrator's to set, not a
//! namespace user's (who may edit objects in a namespace, not the namespace).

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use serde::Deserialize;

/// The Slurm user and group placeholders run as when no grant says otherwise: `nobody`/`nogroup`,
/// which every Debian-based Slurm image and host resolves.
pub const NOBODY: u32 = 65534;

/// The whole tenancy document.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct Tenancy {
    /// SUNK's behaviour before grants: every annotation honoured, placeholders run as whoever the
    /// job-mapper says (the host's own Slurm user when it says nobody). For migrations only.
    pub trust_annotations: bool,
    /// The grant of every namespace no entry of `grants` names.
    pub default: Grant,
    pub grants: Vec<NamespaceGrant>,
}

/// A grant and the namespaces it is for.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct NamespaceGrant {
    /// Namespaces by name.
    #[serde(default)]
    pub namespaces: BTreeSet<String>,
    /// Namespaces by label.
    #[serde(default)]
    pub namespace_selector: Option<NamespaceSelector>,
    #[serde(flatten)]
    pub grant: Grant,
}

/// Namespaces by label, as a Kubernetes label selector: every `matchLabels` pair and every
/// requirement of `matchExpressions` must hold.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct NamespaceSelector {
    #[serde(default)]
    pub match_labels: BTreeMap<String, String>,
    #[serde(default)]
    pub match_expressions: Vec<LabelRequirement>,
}

#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct LabelRequirement {
    pub key: String,
    pub operator: LabelOperator,
    #[serde(default)]
    pub values: BTreeSet<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
pub enum LabelOperator {
    In,
    NotIn,
    Exists,
    DoesNotExist,
}

impl NamespaceSelector {
    pub fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        self.match_labels.iter().all(|(key, value)| labels.get(key) == Some(value))
            && self.match_expressions.iter().all(|requirement| requirement.matches(labels))
    }

    /// Why the selector cannot be used, if it cannot: one that selects every namespace (an empty one,
    /// most likely a misspelt field) must be the `default` grant instead, and an operator needs the
    /// values it compares with.
    fn unusable(&self) -> Option<String> {
        if self.match_labels.is_empty() && self.match_expressions.is_empty() {
            return Some("an empty namespaceSelector selects every namespace (that is the default grant)".into());
        }
        self.match_expressions.iter().find_map(|requirement| {
            let (key, operator) = (&requirement.key, requirement.operator);
            match (operator, requirement.values.is_empty()) {
                (LabelOperator::In | LabelOperator::NotIn, true) => Some(format!("{key} {operator:?} needs values")),
                (LabelOperator::Exists | LabelOperator::DoesNotExist, false) => {
                    Some(format!("{key} {operator:?} takes no values"))
                }
                _ => None,
            }
        })
    }
}

impl LabelRequirement {
    fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        let value = labels.get(&self.key);
        match self.operator {
            LabelOperator::In => value.is_some_and(|value| self.values.contains(value)),
            LabelOperator::NotIn => value.is_none_or(|value| !self.values.contains(value)),
            LabelOperator::Exists => value.is_some(),
            LabelOperator::DoesNotExist => value.is_none(),
        }
    }
}

/// What one namespace's pods may get in Slurm; a field a grant does not name is [`Grant::default`]'s.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct Grant {
    /// The Slurm user id placeholders run as unless a pod names another in `user_ids`.
    pub user: u32,
    /// The Slurm group id placeholders run as unless a pod names another in `group_ids`.
    pub group: u32,
    /// The user ids a pod may name (`sunk.dev/user-id`); none unless granted.
    pub user_ids: Option<IdRange>,
    /// The group ids a pod may name (`sunk.dev/group-id`); none unless granted.
    pub group_ids: Option<IdRange>,
    pub accounts: BTreeSet<String>,
    pub partitions: BTreeSet<String>,
    pub qos: BTreeSet<String>,
    pub reservations: BTreeSet<String>,
    /// The highest Slurm priority a placeholder may carry, and the highest rank a pod preempts with;
    /// 0 leaves every placeholder's priority to Slurm and lets none preempt.
    pub max_priority: u32,
    /// Whether `sunk.dev/required-nodes` is honoured.
    pub required_nodes: bool,
    /// Whether `sunk.dev/current-working-dir` is honoured.
    pub working_directory: bool,
    /// Jobs the host may preempt for this grant's pods even where Slurm's own rules would not.
    pub preemptable: Preemptable,
}

/// Slurm jobs, by partition or QOS, that a grant's pods may preempt even where Slurm's own rules
/// (PreemptType, PriorityTier, PreemptMode, a QOS's Preempt list) would not let them: say, when
/// Slurm preempts nothing itself, or pods run in the same partition as the jobs they are to make
/// room for. A job still within its PreemptExemptTime stays protected. Names only, no patterns: an
/// operator widens what may be killed one partition or QOS at a time.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct Preemptable {
    pub partitions: BTreeSet<String>,
    pub qos: BTreeSet<String>,
}

impl Preemptable {
    /// Whether it names a job of `partition` and `qos` (a job listed in several partitions, `a,b`,
    /// runs in one: each is looked at).
    pub fn names(&self, partition: &str, qos: &str) -> bool {
        partition.split(',').any(|partition| self.partitions.contains(partition)) || self.qos.contains(qos)
    }

    /// Why it cannot be used, if it cannot: an empty name or a pattern names no partition or QOS.
    fn unusable(&self) -> Option<String> {
        let listed =
            self.partitions.iter().map(|name| ("partitions", name)).chain(self.qos.iter().map(|name| ("qos", name)));
        listed.into_iter().find_map(|(field, name)| {
            let bad = name.trim().is_empty() || name.contains(['*', ',', '?', ' ']);
            bad.then(|| format!("preemptable.{field}: {name:?} is no partition or QOS name (names only, no patterns)"))
        })
    }
}

impl Default for Grant {
    fn default() -> Self {
        Self {
            user: NOBODY,
            group: NOBODY,
            user_ids: None,
            group_ids: None,
            accounts: BTreeSet::new(),
            partitions: BTreeSet::new(),
            qos: BTreeSet::new(),
            reservations: BTreeSet::new(),
            max_priority: 0,
            required_nodes: false,
            working_directory: false,
            preemptable: Preemptable::default(),
        }
    }
}

impl Grant {
    /// How the grant lets its pods run as `uid`, if it does.
    pub fn gives_uid(&self, uid: u32) -> Option<GivenUid> {
        match self.user_ids {
            _ if uid == self.user => Some(GivenUid::User),
            Some(range) if range.contains(uid) => Some(GivenUid::UserIds(range)),
            _ => None,
        }
    }
}

/// How a grant lets its pods run as a uid.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GivenUid {
    /// It is the grant's `user`, which placeholders run as unless a pod names another.
    User,
    /// It is within the grant's `userIds`, which a pod may name (`sunk.dev/user-id`).
    UserIds(IdRange),
}

/// Which entry of the tenancy document a grant is, as an operator finds it there.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GrantName {
    Default,
    /// `grants[i]`.
    Listed(usize),
}

impl fmt::Display for GrantName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            GrantName::Default => write!(f, "default"),
            GrantName::Listed(index) => write!(f, "grants[{index}]"),
        }
    }
}

/// An inclusive range of ids, written `"1000-1999"` (or one id, `"1000"`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IdRange {
    pub first: u32,
    pub last: u32,
}

impl IdRange {
    pub fn contains(self, id: u32) -> bool {
        (self.first..=self.last).contains(&id)
    }
}

impl fmt::Display for IdRange {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.first == self.last { write!(f, "{}", self.first) } else { write!(f, "{}-{}", self.first, self.last) }
    }
}

impl std::str::FromStr for IdRange {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, String> {
        let id =
            |part: &str| part.trim().parse::<u32>().map_err(|_| format!("{text:?} is not an id range like 1000-1999"));
        let (first, last) = match text.split_once('-') {
            Some((first, last)) => (id(first)?, id(last)?),
            None => (id(text)?, id(text)?),
        };
        if first > last {
            return Err(format!("{text:?} runs backwards"));
        }
        Ok(Self { first, last })
    }
}

impl<'de> Deserialize<'de> for IdRange {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        String::deserialize(deserializer)?.parse().map_err(serde::de::Error::custom)
    }
}

/// Why a tenancy document cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum TenancyError {
    #[error("reading {path}: {source}")]
    Read { path: String, source: std::io::Error },
    #[error("{path}: {source}")]
    Parse { path: String, source: serde_json::Error },
    #[error("{path}: namespace {namespace} is named by two grants")]
    NamedTwice { path: String, namespace: String },
    #[error("{path}: grants[{index}]: {problem}")]
    Unusable { path: String, index: usize, problem: String },
    #[error("{path}: default: {problem}")]
    UnusableDefault { path: String, problem: String },
}

impl Tenancy {
    /// Reads the document at `path`.
    pub fn load(path: &std::path::Path) -> Result<Self, TenancyError> {
        let shown = path.display().to_string();
        let text =
            std::fs::read_to_string(path).map_err(|source| TenancyError::Read { path: shown.clone(), source })?;
        Self::parse(&text, &shown)
    }

    /// Parses a document; `path` only names it in errors.
    pub fn parse(text: &str, path: &str) -> Result<Self, TenancyError> {
        let tenancy: Tenancy =
            serde_json::from_str(text).map_err(|source| TenancyError::Parse { path: path.into(), source })?;
        let mut seen = BTreeSet::new();
        for namespace in tenancy.grants.iter().flat_map(|entry| &entry.namespaces) {
            if !seen.insert(namespace) {
                return Err(TenancyError::NamedTwice { path: path.into(), namespace: namespace.clone() });
            }
        }
        if let Some(problem) = tenancy.default.preemptable.unusable() {
            return Err(TenancyError::UnusableDefault { path: path.into(), problem });
        }
        for (index, entry) in tenancy.grants.iter().enumerate() {
            let problem = match &entry.namespace_selector {
                None if entry.namespaces.is_empty() => Some("names no namespace and has no namespaceSelector".into()),
                None => None,
                Some(selector) => selector.unusable(),
            };
            let problem = problem.or_else(|| entry.grant.preemptable.unusable());
            if let Some(problem) = problem {
                return Err(TenancyError::Unusable { path: path.into(), index, problem });
            }
        }
        Ok(tenancy)
    }

    /// Whether some grant is for namespaces by label, so that their labels must be known.
    pub fn selects_by_label(&self) -> bool {
        self.grants.iter().any(|entry| entry.namespace_selector.is_some())
    }

    /// The grant of `namespace`, whose labels are `labels` if known; `None` when a grant could
    /// select it by label and its labels are not known.
    pub fn grant_for(&self, namespace: &str, labels: Option<&BTreeMap<String, String>>) -> Option<&Grant> {
        self.named_grant_for(namespace, labels).map(|(_, grant)| grant)
    }

    /// The same, with the entry of the document it is.
    pub fn named_grant_for(
        &self,
        namespace: &str,
        labels: Option<&BTreeMap<String, String>>,
    ) -> Option<(GrantName, &Grant)> {
        fn listed((index, entry): (usize, &NamespaceGrant)) -> (GrantName, &Grant) {
            (GrantName::Listed(index), &entry.grant)
        }
        if let Some(named) = self.grants.iter().enumerate().find(|(_, entry)| entry.namespaces.contains(namespace)) {
            return Some(listed(named));
        }
        let default = (GrantName::Default, &self.default);
        if !self.selects_by_label() {
            return Some(default);
        }
        let labels = labels?;
        let mut selectors = self.grants.iter().enumerate();
        let selected =
            selectors.find(|(_, entry)| entry.namespace_selector.as_ref().is_some_and(|s| s.matches(labels)));
        Some(selected.map_or(default, listed))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_empty_document_grants_nothing_and_runs_as_nobody() {
        let tenancy = Tenancy::parse("{}", "t.json").expect("parses");
        assert_eq!(tenancy, Tenancy::default());
        let grant = tenancy.grant_for("anyone", None).expect("no selector");
        assert_eq!((grant.user, grant.group, grant.max_priority), (NOBODY, NOBODY, 0));
        assert!(grant.user_ids.is_none() && !grant.required_nodes && !grant.working_directory);
    }

    #[test]
    fn a_namespace_gets_the_grant_that_names_it_and_others_the_default() {
        let text = r#"{"default": {"user": 2000, "group": 2000},
            "grants": [{"namespaces": ["ml", "vision"], "user": 1000, "group": 1001, "userIds": "1000-1999",
                        "accounts": ["ml"], "maxPriority": 5000, "requiredNodes": true}]}"#;
        let tenancy = Tenancy::parse(text, "t.json").expect("parses");
        let ml = tenancy.grant_for("vision", None).expect("named");
        assert_eq!((ml.user, ml.group, ml.max_priority), (1000, 1001, 5000));
        assert_eq!(ml.user_ids, Some(IdRange { first: 1000, last: 1999 }));
        assert!(ml.accounts.contains("ml") && ml.required_nodes);
        assert_eq!(tenancy.grant_for("web", None).map(|grant| grant.user), Some(2000));
        let bare = Tenancy::parse(r#"{"grants": [{"namespaces": ["ml"]}]}"#, "t.json").expect("parses");
        assert_eq!(bare.grant_for("ml", None), Some(&Grant::default()), "what a grant does not name is the default's");
    }

    #[test]
    fn a_document_that_says_something_unclear_is_refused_naming_it() {
        let cases = [
            (r#"{"grants": [{"namespaces": ["a"], "userIds": "1999-1000"}]}"#, "runs backwards"),
            (r#"{"grants": [{"namespaces": ["a"], "userIds": "many"}]}"#, "not an id range"),
            (r#"{"grants": [{"namespaces": ["a"], "acounts": ["x"]}]}"#, "unknown field `acounts`"),
            (r#"{"grants": [{"namespaces": ["a"]}, {"namespaces": ["b", "a"]}]}"#, "namespace a is named by two"),
            (r#"{"trustAnnotations": "yes"}"#, "invalid type"),
            (r#"{"grants": [{"user": 1000}]}"#, "grants[0]: names no namespace and has no namespaceSelector"),
            (r#"{"grants": [{"namespaceSelector": {"matchLabel": {"team": "ml"}}}]}"#, "unknown field `matchLabel`"),
            (r#"{"grants": [{"namespaceSelector": {}}]}"#, "grants[0]: an empty namespaceSelector selects every"),
            (
                r#"{"grants": [{"namespaces": ["a"]}, {"namespaceSelector": {"matchExpressions": [{"key": "t", "operator": "In"}]}}]}"#,
                "grants[1]: t In needs values",
            ),
            (
                r#"{"grants": [{"namespaceSelector": {"matchExpressions": [{"key": "t", "operator": "Exists", "values": ["x"]}]}}]}"#,
                "t Exists takes no values",
            ),
            (
                r#"{"grants": [{"namespaceSelector": {"matchExpressions": [{"key": "t", "operator": "Near"}]}}]}"#,
                "unknown variant `Near`",
            ),
            (
                r#"{"grants": [{"namespaces": ["a"], "preemptable": {"partitions": ["*"]}}]}"#,
                "grants[0]: preemptable.partitions: \"*\" is no",
            ),
            (r#"{"grants": [{"namespaces": ["a"], "preemptable": {"qos": [""]}}]}"#, "preemptable.qos: \"\" is no"),
            (r#"{"default": {"preemptable": {"partitions": ["a,b"]}}}"#, "default: preemptable.partitions"),
            (
                r#"{"grants": [{"namespaces": ["a"], "preemptable": {"partition": ["batch"]}}]}"#,
                "unknown field `partition`",
            ),
        ];
        for (text, says) in cases {
            let error = Tenancy::parse(text, "t.json").expect_err(text).to_string();
            assert!(error.contains(says) && error.starts_with("t.json"), "{text}: {error}");
        }
    }

    #[test]
    fn a_namespace_not_named_gets_the_first_grant_whose_selector_its_labels_match() {
        let text = r#"{"default": {"user": 9},
            "grants": [
                {"namespaces": ["ml"], "user": 1},
                {"namespaceSelector": {"matchLabels": {"team": "ml"}}, "user": 2},
                {"namespaceSelector": {"matchExpressions": [{"key": "team", "operator": "In", "values": ["ml", "cv"]},
                                                            {"key": "frozen", "operator": "DoesNotExist"}]}, "user": 3},
                {"namespaceSelector": {"matchExpressions": [{"key": "team", "operator": "NotIn", "values": ["web"]},
                                                            {"key": "tier", "operator": "Exists"}]}, "user": 4}]}"#;
        let tenancy = Tenancy::parse(text, "t.json").expect("parses");
        assert!(tenancy.selects_by_label());
        let labels = |pairs: &[(&str, &str)]| -> BTreeMap<String, String> {
            pairs.iter().map(|(key, value)| (key.to_string(), value.to_string())).collect()
        };
        let user_of = |namespace: &str, pairs: Option<&[(&str, &str)]>| {
            let labels = pairs.map(labels);
            tenancy.grant_for(namespace, labels.as_ref()).map(|grant| grant.user)
        };
        type Labels<'a> = Option<&'a [(&'a str, &'a str)]>;
        let cases: [(&str, Labels, Option<u32>); 9] = [
            // A name wins over every selector, and needs no labels.
            ("ml", Some(&[("team", "web")]), Some(1)),
            ("ml", None, Some(1)),
            // Not named, labels unknown: which grant cannot be said.
            ("other", None, None),
            // The first matching selector, in order.
            ("other", Some(&[("team", "ml"), ("tier", "x")]), Some(2)),
            ("other", Some(&[("team", "cv")]), Some(3)),
            ("other", Some(&[("team", "cv"), ("frozen", "yes"), ("tier", "x")]), Some(4)),
            ("other", Some(&[("team", "cv"), ("frozen", "yes")]), Some(9)),
            ("other", Some(&[("tier", "x")]), Some(4)),
            ("other", Some(&[("team", "web"), ("tier", "x")]), Some(9)),
        ];
        for (namespace, pairs, user) in cases {
            assert_eq!(user_of(namespace, pairs), user, "{namespace} {pairs:?}");
        }
    }

    #[test]
    fn a_grant_is_named_as_the_document_lists_it_and_says_how_it_gives_a_uid() {
        let text = r#"{"default": {"user": 9},
            "grants": [{"namespaces": ["web"], "user": 2000},
                       {"namespaces": ["ml"], "user": 1000, "userIds": "1500-1599"}]}"#;
        let tenancy = Tenancy::parse(text, "t.json").expect("parses");
        let (name, ml) = tenancy.named_grant_for("ml", None).expect("named");
        assert_eq!(name.to_string(), "grants[1]");
        let default = tenancy.named_grant_for("other", None).map(|(name, grant)| (name.to_string(), grant.user));
        assert_eq!(default, Some(("default".to_string(), 9)));
        let range = IdRange { first: 1500, last: 1599 };
        for (uid, given) in [(1000, Some(GivenUid::User)), (1500, Some(GivenUid::UserIds(range))), (1600, None)] {
            assert_eq!(ml.gives_uid(uid), given, "{uid}");
        }
    }

    #[test]
    fn a_grant_names_preemptable_jobs_by_partition_or_qos_and_nothing_by_default() {
        let text =
            r#"{"grants": [{"namespaces": ["ml"], "preemptable": {"partitions": ["batch"], "qos": ["scavenger"]}}]}"#;
        let tenancy = Tenancy::parse(text, "t.json").expect("parses");
        let ml = &tenancy.grant_for("ml", None).expect("named").preemptable;
        let cases = [
            ("batch", "", true),
            ("urgent,batch", "normal", true),
            ("urgent", "scavenger", true),
            ("urgent", "normal", false),
        ];
        for (partition, qos, named) in cases {
            assert_eq!(ml.names(partition, qos), named, "{partition} {qos}");
        }
        let nothing = &tenancy.grant_for("web", None).expect("default").preemptable;
        assert!(!nothing.names("batch", "scavenger") && !nothing.names("", ""));
    }

    #[test]
    fn id_ranges_read_as_written() {
        assert_eq!("7".parse::<IdRange>(), Ok(IdRange { first: 7, last: 7 }));
        assert_eq!("1000-1999".parse::<IdRange>().map(|r| r.to_string()), Ok("1000-1999".into()));
        assert!("1000-1999".parse::<IdRange>().is_ok_and(|r| r.contains(1999) && !r.contains(2000)));
    }
}
