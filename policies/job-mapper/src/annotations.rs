//! The SUNK annotation table: pod annotations that set options of the placeholder Slurm job.
//!
//! Every key is accepted under both [`PREFIXES`]; `sunk.dev/` wins when a pod carries both. A value that
//! does not parse rejects the pod, naming the annotation and quoting the value.

use crate::sunk::policy::job_types::{Exclusive, KeyValue, Rejection};

/// Annotation prefixes, in order of precedence. `sunk.coreweave.com/` is accepted for drop-in migration.
pub const PREFIXES: [&str; 2] = ["sunk.dev/", "sunk.coreweave.com/"];

/// The options the annotations set; `None` / empty where the pod says nothing.
#[derive(Debug, Default, PartialEq)]
pub struct Table {
    pub account: Option<String>,
    pub comment: Option<String>,
    pub constraints: Option<String>,
    pub exclusive: Option<Exclusive>,
    pub excluded_nodes: Vec<String>,
    pub required_nodes: Vec<String>,
    pub partition: Option<String>,
    pub prefer: Option<String>,
    pub priority: Option<u32>,
    pub qos: Option<String>,
    pub reservation: Option<String>,
    pub user_id: Option<u32>,
    pub group_id: Option<u32>,
    pub current_working_dir: Option<String>,
    pub timeout_minutes: Option<u32>,
}

/// Reads the table from a pod's annotations. `partitions` are the cluster's partitions: when non-empty,
/// the partition annotation must name one of them.
pub fn parse(annotations: &[KeyValue], partitions: &[String]) -> Result<Table, Rejection> {
    let a = Annotations(annotations);
    let user_id = a.get("user-id", id)?;
    let excluded_nodes = a.get("excluded-nodes", host_list)?.unwrap_or_default();
    let required_nodes = a.get("required-nodes", host_list)?.unwrap_or_default();
    within_host_budget(&a, &[("excluded-nodes", &excluded_nodes), ("required-nodes", &required_nodes)])?;
    Ok(Table {
        account: a.get("account", slurm_name)?,
        comment: a.get("comment", text)?,
        constraints: a.get("constraints", features)?,
        exclusive: a.get("exclusive", exclusive)?,
        excluded_nodes,
        required_nodes,
        partition: a.get("partition", |v| partition(v, partitions))?,
        prefer: a.get("prefer", features)?,
        priority: a.get("priority", non_negative)?,
        qos: a.get("qos", slurm_name)?,
        reservation: a.get("reservation", slurm_name)?,
        user_id,
        group_id: a.get("group-id", id)?.or(user_id),
        current_working_dir: a.get("current-working-dir", absolute_path)?,
        timeout_minutes: a.get("timeout", minutes)?,
    })
}

/// A pod's annotations, looked up by name under either prefix.
struct Annotations<'a>(&'a [KeyValue]);

impl<'a> Annotations<'a> {
    /// The full key and value of the annotation `name` under the first prefix that has it.
    fn find(&self, name: &str) -> Option<&'a KeyValue> {
        PREFIXES.iter().find_map(|prefix| self.0.iter().find(|kv| kv.key.strip_prefix(prefix) == Some(name)))
    }

    /// The parsed value of the annotation `name`, `None` when absent, a rejection when malformed.
    /// `parse` turns the (trimmed) value into `T`, or says what it accepts.
    fn get<T>(&self, name: &str, parse: impl Fn(&str) -> Result<T, String>) -> Result<Option<T>, Rejection> {
        let Some(kv) = self.find(name) else {
            return Ok(None);
        };
        parse(kv.value.trim()).map(Some).map_err(|accepted| malformed(kv, &accepted))
    }
}

fn malformed(kv: &KeyValue, accepted: &str) -> Rejection {
    Rejection { field: kv.key.clone(), message: format!("annotation {} is {:?}: {accepted}", kv.key, kv.value) }
}

/// Account, partition, QOS, reservation: one Slurm name.
fn slurm_name(value: &str) -> Result<String, String> {
    let ok = !value.is_empty() && !value.chars().any(|c| c.is_whitespace() || c.is_control() || c == ',');
    ok.then(|| value.to_owned()).ok_or_else(|| "it must be one Slurm name, without spaces or commas".to_owned())
}

/// A partition name; one of `partitions` unless that list is empty.
fn partition(value: &str, partitions: &[String]) -> Result<String, String> {
    let name = slurm_name(value)?;
    if partitions.is_empty() || partitions.contains(&name) {
        Ok(name)
    } else {
        Err(format!("it must name one of the cluster's partitions: {}", partitions.join(", ")))
    }
}

/// Free text (the job comment) on one line: a newline or other control character would forge lines
/// in what squeue, sacct and the logs print.
fn text(value: &str) -> Result<String, String> {
    if value.is_empty() {
        return Err("it must not be empty; remove the annotation instead".to_owned());
    }
    if value.chars().any(char::is_control) {
        return Err("it must be one line of text without control characters".to_owned());
    }
    Ok(value.to_owned())
}

/// A node feature expression (`--constraint`, `--prefer`): no spaces, balanced brackets.
fn features(value: &str) -> Result<String, String> {
    let ok = !value.is_empty() && !value.chars().any(|c| c.is_whitespace() || c.is_control()) && balanced(value);
    ok.then(|| value.to_owned()).ok_or_else(|| {
        "it must be a Slurm feature expression without spaces, such as \"a100&ib\" or \"[rack1|rack2]\"".to_owned()
    })
}

/// The SUNK annotation's vocabulary: `none` shares the node with nobody, `ok` with anyone; the
/// legacy `true` is sbatch's `--exclusive` (a whole node), `false` its default.
fn exclusive(value: &str) -> Result<Exclusive, String> {
    match value.to_ascii_lowercase().as_str() {
        "none" | "true" => Ok(Exclusive::None),
        "ok" | "false" => Ok(Exclusive::Ok),
        "user" => Ok(Exclusive::User),
        "mcs" => Ok(Exclusive::Mcs),
        "topo" => Ok(Exclusive::Topo),
        _ => Err("it must be one of none, ok, user, mcs, topo (or the legacy true / false)".to_owned()),
    }
}

/// The most node names a pod's host lists may name together: what one host list may expand to in the
/// host, which would otherwise spend a core for a minute on 7,200 ranges of 65,536 names each.
pub const MOST_HOST_NAMES: u64 = 65_536;

/// The host lists' names, counted without expanding them, within [`MOST_HOST_NAMES`] in all; beyond,
/// the annotation that passes it is refused.
fn within_host_budget(a: &Annotations, lists: &[(&str, &Vec<String>)]) -> Result<(), Rejection> {
    let mut total = 0u64;
    for (name, items) in lists {
        total = items.iter().fold(total, |sum, item| sum.saturating_add(names_in(item)));
        if total > MOST_HOST_NAMES
            && let Some(kv) = a.find(name)
        {
            let message = format!(
                "annotation {} names {total} nodes with the host lists before it; a pod's host lists may name at \
                 most {MOST_HOST_NAMES} in all",
                kv.key
            );
            return Err(Rejection { field: kv.key.clone(), message });
        }
    }
    Ok(())
}

/// How many names one host list item stands for: the product of its bracket groups' sizes
/// (`r[1-2]n[1-3,7]` is 8). A bound that is not a number counts as one name: Slurm judges it.
fn names_in(item: &str) -> u64 {
    let mut count = 1u64;
    let mut rest = item;
    while let Some(open) = rest.find('[') {
        let Some(close) = rest[open..].find(']').map(|at| open + at) else { break };
        let group: u64 = rest[open + 1..close]
            .split(',')
            .map(|range| {
                let (from, to) = range.split_once('-').unwrap_or((range, range));
                match (from.parse::<u64>(), to.parse::<u64>()) {
                    (Ok(from), Ok(to)) if to >= from => (to - from).saturating_add(1),
                    _ => 1,
                }
            })
            .fold(0u64, u64::saturating_add);
        count = count.saturating_mul(group.max(1));
        rest = &rest[close + 1..];
    }
    count
}

/// A comma-separated list of Slurm host list expressions; commas inside brackets (`gpu[1-4,7]`) belong
/// to their expression.
fn host_list(value: &str) -> Result<Vec<String>, String> {
    let accepted =
        || "it must be a comma-separated list of node names or host lists, such as \"gpu[1-4,7],cpu3\"".to_owned();
    if !balanced(value) {
        return Err(accepted());
    }
    let mut items = Vec::new();
    let mut depth = 0usize;
    let mut start = 0;
    for (i, c) in value.char_indices() {
        match c {
            '[' => depth += 1,
            ']' => depth -= 1,
            ',' if depth == 0 => {
                items.push(&value[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    items.push(&value[start..]);
    let items: Vec<String> = items.iter().map(|item| item.trim().to_owned()).collect();
    let ok = items.iter().all(|item| !item.is_empty() && !item.chars().any(|c| c.is_whitespace() || c.is_control()));
    if ok { Ok(items) } else { Err(accepted()) }
}

fn non_negative(value: &str) -> Result<u32, String> {
    digits(value)
        .and_then(|v| v.parse().ok())
        .ok_or_else(|| format!("it must be a non-negative integer no larger than {}", u32::MAX))
}

fn id(value: &str) -> Result<u32, String> {
    digits(value)
        .and_then(|v| v.parse().ok())
        .ok_or_else(|| format!("it must be a numeric id between 0 and {}", u32::MAX))
}

fn minutes(value: &str) -> Result<u32, String> {
    digits(value)
        .and_then(|v| v.parse().ok())
        .filter(|&m: &u32| m > 0)
        .ok_or_else(|| "it must be a positive whole number of minutes, such as \"90\"".to_owned())
}

fn absolute_path(value: &str) -> Result<String, String> {
    let ok = value.starts_with('/') && !value.chars().any(char::is_control);
    ok.then(|| value.to_owned()).ok_or_else(|| "it must be an absolute path, such as \"/home/alice/work\"".to_owned())
}

/// `value` when it is all ASCII digits (no sign, no spaces).
fn digits(value: &str) -> Option<&str> {
    (!value.is_empty() && value.bytes().all(|b| b.is_ascii_digit())).then_some(value)
}

/// Whether `[]` and `()` nest properly.
fn balanced(value: &str) -> bool {
    let mut open = Vec::new();
    for c in value.chars() {
        match c {
            '[' | '(' => open.push(c),
            ']' if open.pop() != Some('[') => return false,
            ')' if open.pop() != Some('(') => return false,
            _ => {}
        }
    }
    open.is_empty()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kv(key: &str, value: &str) -> KeyValue {
        KeyValue { key: key.to_owned(), value: value.to_owned() }
    }

    fn parse_one(key: &str, value: &str) -> Result<Table, Rejection> {
        parse(&[kv(key, value)], &[])
    }

    #[test]
    fn no_annotations_is_an_empty_table() {
        assert_eq!(parse(&[], &[]).unwrap(), Table::default());
    }

    #[test]
    fn every_key_under_both_prefixes() {
        for prefix in PREFIXES {
            let annotations = [
                kv(&format!("{prefix}account"), "physics"),
                kv(&format!("{prefix}comment"), "hello world"),
                kv(&format!("{prefix}constraints"), "a100&ib"),
                kv(&format!("{prefix}exclusive"), "user"),
                kv(&format!("{prefix}excluded-nodes"), "gpu[1-4,7], cpu3"),
                kv(&format!("{prefix}required-nodes"), "gpu9"),
                kv(&format!("{prefix}partition"), "batch"),
                kv(&format!("{prefix}prefer"), "[rack1|rack2]"),
                kv(&format!("{prefix}priority"), "0"),
                kv(&format!("{prefix}qos"), "high"),
                kv(&format!("{prefix}reservation"), "maint"),
                kv(&format!("{prefix}user-id"), "1000"),
                kv(&format!("{prefix}current-working-dir"), "/home/alice"),
                kv(&format!("{prefix}timeout"), "90"),
                kv("other.io/timeout", "nonsense"),
            ];
            let table = parse(&annotations, &["batch".to_owned()]).unwrap();
            assert_eq!(
                table,
                Table {
                    account: Some("physics".into()),
                    comment: Some("hello world".into()),
                    constraints: Some("a100&ib".into()),
                    exclusive: Some(Exclusive::User),
                    excluded_nodes: vec!["gpu[1-4,7]".into(), "cpu3".into()],
                    required_nodes: vec!["gpu9".into()],
                    partition: Some("batch".into()),
                    prefer: Some("[rack1|rack2]".into()),
                    priority: Some(0),
                    qos: Some("high".into()),
                    reservation: Some("maint".into()),
                    user_id: Some(1000),
                    group_id: Some(1000),
                    current_working_dir: Some("/home/alice".into()),
                    timeout_minutes: Some(90),
                }
            );
        }
    }

    #[test]
    fn sunk_dev_wins_over_coreweave() {
        let annotations = [kv("sunk.coreweave.com/qos", "low"), kv("sunk.dev/qos", "high")];
        assert_eq!(parse(&annotations, &[]).unwrap().qos.as_deref(), Some("high"));
        // Precedence is decided before parsing: a bad legacy value is ignored when sunk.dev/ is set.
        let annotations = [kv("sunk.coreweave.com/priority", "x"), kv("sunk.dev/priority", "3")];
        assert_eq!(parse(&annotations, &[]).unwrap().priority, Some(3));
    }

    #[test]
    fn host_lists_share_one_budget_counted_without_expanding() {
        assert_eq!(
            [names_in("n1"), names_in("n[1-4,7]"), names_in("r[1-2]n[1-3,7]"), names_in("n[a-b]")],
            [1, 5, 8, 1]
        );
        let within = [kv("sunk.dev/excluded-nodes", "n[1-40000]"), kv("sunk.dev/required-nodes", "m[1-25536]")];
        assert!(parse(&within, &[]).is_ok());
        let beyond = [kv("sunk.dev/excluded-nodes", "n[1-40000]"), kv("sunk.dev/required-nodes", "m[1-25537]")];
        let refused = parse(&beyond, &[]).unwrap_err();
        assert_eq!(refused.field, "sunk.dev/required-nodes");
        assert!(refused.message.contains("names 65537 nodes"), "{}", refused.message);
        let ranges = vec!["n[0-65535]"; 7200].join(",");
        let refused = parse(&[kv("sunk.dev/excluded-nodes", &ranges)], &[]).unwrap_err();
        assert_eq!(refused.field, "sunk.dev/excluded-nodes");
    }

    #[test]
    fn exclusive_values() {
        for (value, want) in [
            ("none", Exclusive::None),
            ("ok", Exclusive::Ok),
            ("user", Exclusive::User),
            ("mcs", Exclusive::Mcs),
            ("topo", Exclusive::Topo),
            ("true", Exclusive::None),
            ("false", Exclusive::Ok),
            ("TRUE", Exclusive::None),
        ] {
            let table = parse_one("sunk.dev/exclusive", value).unwrap();
            assert_eq!(table.exclusive, Some(want), "{value}");
        }
        let err = parse_one("sunk.dev/exclusive", "yes").unwrap_err();
        assert_eq!(err.field, "sunk.dev/exclusive");
        assert!(err.message.contains("\"yes\""), "{}", err.message);
        assert!(err.message.contains("none, ok, user, mcs, topo"), "{}", err.message);
    }

    #[test]
    fn group_id_defaults_to_user_id_only_when_unset() {
        let table = parse(&[kv("sunk.dev/user-id", "5"), kv("sunk.dev/group-id", "7")], &[]).unwrap();
        assert_eq!((table.user_id, table.group_id), (Some(5), Some(7)));
        let table = parse_one("sunk.dev/group-id", "7").unwrap();
        assert_eq!((table.user_id, table.group_id), (None, Some(7)));
    }

    #[test]
    fn malformed_values_name_the_key_and_quote_the_value() {
        for (key, value) in [
            ("sunk.dev/priority", "-1"),
            ("sunk.dev/priority", "high"),
            ("sunk.dev/priority", "99999999999"),
            ("sunk.coreweave.com/user-id", "alice"),
            ("sunk.dev/group-id", "1.5"),
            ("sunk.dev/timeout", "0"),
            ("sunk.dev/timeout", "1h"),
            ("sunk.dev/current-working-dir", "relative/dir"),
            ("sunk.dev/account", "two words"),
            ("sunk.dev/qos", ""),
            ("sunk.dev/comment", "  "),
            ("sunk.dev/comment", "done\nJobState=FAILED"),
            ("sunk.dev/comment", "bell\u{7}"),
            ("sunk.dev/constraints", "[a|b"),
            ("sunk.dev/prefer", "a & b"),
            ("sunk.dev/excluded-nodes", "a,,b"),
            ("sunk.dev/required-nodes", "gpu[1-4"),
            ("sunk.dev/partition", "a,b"),
        ] {
            let err = parse_one(key, value).unwrap_err();
            assert_eq!(err.field, key);
            assert!(err.message.contains(&format!("{value:?}")), "{}", err.message);
            assert!(err.message.contains("it must"), "{}", err.message);
        }
    }

    #[test]
    fn partition_must_exist_when_the_cluster_lists_partitions() {
        let partitions = ["batch".to_owned(), "gpu".to_owned()];
        let err = parse(&[kv("sunk.dev/partition", "cpu")], &partitions).unwrap_err();
        assert_eq!(err.field, "sunk.dev/partition");
        assert!(err.message.contains("batch, gpu"), "{}", err.message);
        let table = parse(&[kv("sunk.dev/partition", "gpu")], &partitions).unwrap();
        assert_eq!(table.partition.as_deref(), Some("gpu"));
        // No partition list: anything well-formed goes.
        assert!(parse(&[kv("sunk.dev/partition", "cpu")], &[]).is_ok());
    }

    #[test]
    fn values_are_trimmed() {
        let table = parse(&[kv("sunk.dev/timeout", " 30\n"), kv("sunk.dev/account", "ops\n")], &[]).unwrap();
        assert_eq!(table.timeout_minutes, Some(30));
        assert_eq!(table.account.as_deref(), Some("ops"));
    }
}
