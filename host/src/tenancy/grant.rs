//! What the operator grants a namespace's pods in Slurm, and which grant a namespace gets.
//!
//! Read from a JSON document the chart renders from its `tenancy` values (`--tenancy`). Everything a
//! grant does not name is withheld: a fresh installation runs every placeholder as `nobody` and
//! honours no annotation that asks Slurm for an identity, an account or a rank.

use std::collections::BTreeSet;
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
    pub namespaces: BTreeSet<String>,
    #[serde(flatten)]
    pub grant: Grant,
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
        Ok(tenancy)
    }

    /// The grant of `namespace`.
    pub fn grant_for(&self, namespace: &str) -> &Grant {
        self.grants
            .iter()
            .find(|entry| entry.namespaces.contains(namespace))
            .map_or(&self.default, |entry| &entry.grant)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_empty_document_grants_nothing_and_runs_as_nobody() {
        let tenancy = Tenancy::parse("{}", "t.json").expect("parses");
        assert_eq!(tenancy, Tenancy::default());
        let grant = tenancy.grant_for("anyone");
        assert_eq!((grant.user, grant.group, grant.max_priority), (NOBODY, NOBODY, 0));
        assert!(grant.user_ids.is_none() && !grant.required_nodes && !grant.working_directory);
    }

    #[test]
    fn a_namespace_gets_the_grant_that_names_it_and_others_the_default() {
        let text = r#"{"default": {"user": 2000, "group": 2000},
            "grants": [{"namespaces": ["ml", "vision"], "user": 1000, "group": 1001, "userIds": "1000-1999",
                        "accounts": ["ml"], "maxPriority": 5000, "requiredNodes": true}]}"#;
        let tenancy = Tenancy::parse(text, "t.json").expect("parses");
        let ml = tenancy.grant_for("vision");
        assert_eq!((ml.user, ml.group, ml.max_priority), (1000, 1001, 5000));
        assert_eq!(ml.user_ids, Some(IdRange { first: 1000, last: 1999 }));
        assert!(ml.accounts.contains("ml") && ml.required_nodes);
        assert_eq!(tenancy.grant_for("web").user, 2000);
        let bare = Tenancy::parse(r#"{"grants": [{"namespaces": ["ml"]}]}"#, "t.json").expect("parses");
        assert_eq!(bare.grant_for("ml"), &Grant::default(), "what a grant does not name is the default's");
    }

    #[test]
    fn a_document_that_says_something_unclear_is_refused_naming_it() {
        let cases = [
            (r#"{"grants": [{"namespaces": ["a"], "userIds": "1999-1000"}]}"#, "runs backwards"),
            (r#"{"grants": [{"namespaces": ["a"], "userIds": "many"}]}"#, "not an id range"),
            (r#"{"grants": [{"namespaces": ["a"], "acounts": ["x"]}]}"#, "unknown field `acounts`"),
            (r#"{"grants": [{"namespaces": ["a"]}, {"namespaces": ["b", "a"]}]}"#, "namespace a is named by two"),
            (r#"{"trustAnnotations": "yes"}"#, "invalid type"),
        ];
        for (text, says) in cases {
            let error = Tenancy::parse(text, "t.json").expect_err(text).to_string();
            assert!(error.contains(says) && error.starts_with("t.json"), "{text}: {error}");
        }
    }

    #[test]
    fn id_ranges_read_as_written() {
        assert_eq!("7".parse::<IdRange>(), Ok(IdRange { first: 7, last: 7 }));
        assert_eq!("1000-1999".parse::<IdRange>().map(|r| r.to_string()), Ok("1000-1999".into()));
        assert!("1000-1999".parse::<IdRange>().is_ok_and(|r| r.contains(1999) && !r.contains(2000)));
    }
}
