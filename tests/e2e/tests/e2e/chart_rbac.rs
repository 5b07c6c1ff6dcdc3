//! Least privilege, checked: every RBAC rule and binding the chart renders, with its defaults and
//! with its own Slurm cluster, is exactly the checked-in list (`tests/e2e/rbac/`). A broader grant
//! fails here until the list, and docs/security.md's table, say why it is needed.

use std::collections::BTreeSet;

use anyhow::Context as _;
use serde_json::Value;
use sunk_e2e::{BACKUP_SLURMCTLD, CHART, Cluster, repo_root};

#[tokio::test]
async fn the_charts_rbac_is_exactly_the_checked_in_list() -> anyhow::Result<()> {
    let cluster = Cluster::connect("chart-rbac").await?;
    // The host alone; the whole cluster, with a NodeSet (its cleanup hook), a Secret for modules, a
    // grant by namespace label and a backup slurmctld;
    // and the host scheduling in two namespaces only.
    let whole_cluster = [
        "--set",
        "slurmCluster.enabled=true",
        "--set-json",
        r#"slurmCluster.nodesets=[{"name":"cpu"}]"#,
        "--set",
        "policies.secretNames={modules}",
        "--set-json",
        r#"tenancy.grants=[{"namespaceSelector":{"matchLabels":{"team":"ml"}}}]"#,
    ];
    let whole_cluster = [&whole_cluster[..], &BACKUP_SLURMCTLD].concat();
    let scope_namespace = ["--set", "scope.type=namespace", "--set", "scope.namespaces={team}"];
    let renders: [(&[&str], &str); 3] =
        [(&[], "host.txt"), (&whole_cluster, "slurm-cluster.txt"), (&scope_namespace, "scope-namespace.txt")];
    for (values, list) in renders {
        let mut template = vec!["template", "r", CHART];
        template.extend_from_slice(values);
        let rendered = cluster.helm(&template)?.replace(&cluster.namespace, "<namespace>");
        let granted = rbac_lines(&rendered)?;
        let path = repo_root().join("tests/e2e/rbac").join(list);
        let text = std::fs::read_to_string(&path).with_context(|| format!("reading {}", path.display()))?;
        let listed: BTreeSet<String> = text
            .lines()
            .map(str::trim)
            .filter(|line| !line.is_empty() && !line.starts_with('#'))
            .map(String::from)
            .collect();
        let beyond: Vec<&String> = granted.difference(&listed).collect();
        let unused: Vec<&String> = listed.difference(&granted).collect();
        assert!(
            beyond.is_empty() && unused.is_empty(),
            "{list}: granted beyond the list {beyond:#?}; listed, not granted {unused:#?}"
        );
    }
    Ok(())
}

/// One line per rule of every Role and ClusterRole, and per subject of every binding.
fn rbac_lines(rendered: &str) -> anyhow::Result<BTreeSet<String>> {
    let documents: Vec<Value> = serde_saphyr::from_multiple(rendered).context("parsing the rendered chart")?;
    let mut lines = BTreeSet::new();
    for document in documents {
        let kind = document["kind"].as_str().unwrap_or_default();
        let name = document["metadata"]["name"].as_str().unwrap_or_default();
        let place =
            document["metadata"]["namespace"].as_str().map_or_else(|| "cluster".to_owned(), |ns| format!("in {ns}"));
        match kind {
            "Role" | "ClusterRole" => {
                for rule in document["rules"].as_array().into_iter().flatten() {
                    let names = match words(&rule["resourceNames"]) {
                        names if names.is_empty() => String::new(),
                        names => format!(" named {names}"),
                    };
                    let groups = words(&rule["apiGroups"]).replace("\"\"", "core");
                    lines.insert(format!(
                        "{kind} {name} {place}: {groups} {}{names}: {}",
                        words(&rule["resources"]),
                        words(&rule["verbs"])
                    ));
                }
            }
            "RoleBinding" | "ClusterRoleBinding" => {
                let role = format!(
                    "{}/{}",
                    document["roleRef"]["kind"].as_str().unwrap_or_default(),
                    document["roleRef"]["name"].as_str().unwrap_or_default()
                );
                for subject in document["subjects"].as_array().into_iter().flatten() {
                    let who = subject["name"].as_str().unwrap_or_default();
                    lines.insert(format!("{kind} {name} {place}: {role} to {who}"));
                }
            }
            _ => {}
        }
    }
    Ok(lines)
}

fn words(list: &Value) -> String {
    let words: Vec<String> = list
        .as_array()
        .into_iter()
        .flatten()
        .map(|word| {
            word.as_str().map_or_else(|| word.to_string(), |w| if w.is_empty() { "\"\"".into() } else { w.into() })
        })
        .collect();
    words.join(",")
}
