//! The team table and the mapping from a pod to its placeholder job.

use crate::sunk::policy::job_types::{Cluster, JobRequest, Mapping, Pod, Rejection};

const TEAM_LABEL: &str = "team";
const TEAM_FIELD: &str = "metadata.labels.team";
const PARTITION_ANNOTATION: &str = "sunk.dev/partition";

/// Which Slurm account and QOS each team's pods are charged to.
#[derive(Debug, PartialEq, Eq)]
pub struct Table {
    teams: Vec<Team>,
}

#[derive(Debug, PartialEq, Eq)]
struct Team {
    name: String,
    account: String,
    qos: Option<String>,
}

impl Table {
    /// One team per line: `<team> <account> [qos]`, separated by spaces; `#` starts a comment.
    pub fn parse(text: &str) -> Result<Table, String> {
        let mut teams: Vec<Team> = Vec::new();
        for (index, line) in text.lines().enumerate() {
            let line = line.split('#').next().unwrap_or_default().trim();
            let words: Vec<&str> = line.split_whitespace().collect();
            let team = match words.as_slice() {
                [] => continue,
                [name, account] => Team { name: (*name).into(), account: (*account).into(), qos: None },
                [name, account, qos] => {
                    Team { name: (*name).into(), account: (*account).into(), qos: Some((*qos).into()) }
                }
                _ => return Err(format!("line {}: expected `<team> <account> [qos]`, got `{line}`", index + 1)),
            };
            if teams.iter().any(|known| known.name == team.name) {
                return Err(format!("line {}: team `{}` is listed twice", index + 1, team.name));
            }
            teams.push(team);
        }
        if teams.is_empty() {
            return Err("the table lists no team".into());
        }
        Ok(Table { teams })
    }

    /// The table used when the operator gives no configuration.
    pub fn built_in() -> Table {
        Table::parse("ml ml normal\nresearch research\n").expect("the built-in table parses")
    }

    fn get(&self, name: &str) -> Option<&Team> {
        self.teams.iter().find(|team| team.name == name)
    }

    fn names(&self) -> String {
        self.teams.iter().map(|team| team.name.as_str()).collect::<Vec<_>>().join(", ")
    }
}

/// What every pod gets when the configuration is broken.
pub fn bad_config(problem: &str) -> Mapping {
    Mapping::Reject(Rejection {
        field: "PolicyModule.spec.config".into(),
        message: format!("the team-accounts policy's configuration is invalid ({problem}); ask the cluster operators"),
    })
}

pub fn map_pod(table: &Table, pod: &Pod, cluster: &Cluster) -> Mapping {
    match job_request(table, pod, cluster) {
        Ok(job) => Mapping::Job(job),
        Err(rejection) => Mapping::Reject(rejection),
    }
}

fn job_request(table: &Table, pod: &Pod, cluster: &Cluster) -> Result<JobRequest, Rejection> {
    let team_name = value(&pod.labels, TEAM_LABEL)
        .ok_or_else(|| reject(TEAM_FIELD, format!("label the pod with its team (one of: {})", table.names())))?;
    let team = table
        .get(team_name)
        .ok_or_else(|| reject(TEAM_FIELD, format!("unknown team `{team_name}`; known teams: {}", table.names())))?;
    if pod.cpu_request_millis == 0 || pod.memory_request_bytes == 0 {
        return Err(reject(
            "spec.containers[*].resources.requests",
            "set cpu and memory requests so Slurm can reserve them".into(),
        ));
    }
    Ok(JobRequest {
        partition: partition(pod, cluster)?,
        account: Some(team.account.clone()),
        qos: team.qos.clone(),
        reservation: None,
        comment: Some(format!("{TEAM_LABEL}={}", team.name)),
        constraints: None,
        prefer: None,
        exclusive: None,
        excluded_nodes: Vec::new(),
        required_nodes: Vec::new(),
        priority: None,
        user_id: None,
        group_id: None,
        current_working_directory: None,
        time_limit_minutes: None,
        cpus: u32::try_from(pod.cpu_request_millis.div_ceil(1000)).map_err(|_| {
            reject("spec.containers[*].resources.requests.cpu", "more CPUs than Slurm can allocate".into())
        })?,
        memory_mib: pod.memory_request_bytes.div_ceil(1 << 20),
        tres_per_node: (pod.gpus > 0).then(|| format!("gres/gpu:{}", pod.gpus)),
    })
}

fn partition(pod: &Pod, cluster: &Cluster) -> Result<Option<String>, Rejection> {
    let Some(asked) = value(&pod.annotations, PARTITION_ANNOTATION) else {
        return Ok(None);
    };
    if cluster.partitions.iter().any(|known| known == asked) {
        return Ok(Some(asked.to_owned()));
    }
    let field = format!("metadata.annotations[{PARTITION_ANNOTATION}]");
    Err(reject(&field, format!("no partition `{asked}`; partitions: {}", cluster.partitions.join(", "))))
}

fn value<'a>(pairs: &'a [crate::sunk::policy::common::KeyValue], key: &str) -> Option<&'a str> {
    pairs.iter().find(|pair| pair.key == key).map(|pair| pair.value.as_str())
}

fn reject(field: &str, message: String) -> Rejection {
    Rejection { field: field.to_owned(), message }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sunk::policy::common::KeyValue;

    fn pod(team: Option<&str>) -> Pod {
        Pod {
            namespace: "default".into(),
            name: "p".into(),
            uid: "u".into(),
            labels: team.map(|t| KeyValue { key: "team".into(), value: t.into() }).into_iter().collect(),
            annotations: vec![],
            cpu_request_millis: 1500,
            memory_request_bytes: (1 << 30) + 1,
            cpu_limit_millis: 0,
            memory_limit_bytes: 0,
            gpus: 2,
            node_selector: vec![],
            required_node_affinity: vec![],
            tolerations: vec![],
            priority: None,
            termination_grace_seconds: 30,
        }
    }

    fn cluster() -> Cluster {
        Cluster {
            partitions: vec!["batch".into(), "gpu".into()],
            default_partition: Some("batch".into()),
            default_account: None,
            kill_wait_seconds: 30,
        }
    }

    #[test]
    fn a_known_team_gets_its_account_and_qos() {
        let Mapping::Job(job) = map_pod(&Table::built_in(), &pod(Some("ml")), &cluster()) else { panic!() };
        assert_eq!((job.account.as_deref(), job.qos.as_deref()), (Some("ml"), Some("normal")));
        assert_eq!(job.comment.as_deref(), Some("team=ml"));
        assert_eq!((job.cpus, job.memory_mib), (2, 1025));
        assert_eq!(job.tres_per_node.as_deref(), Some("gres/gpu:2"));
    }

    #[test]
    fn missing_and_unknown_teams_are_rejected_naming_the_label() {
        for team in [None, Some("sales")] {
            let Mapping::Reject(r) = map_pod(&Table::built_in(), &pod(team), &cluster()) else { panic!() };
            assert_eq!(r.field, "metadata.labels.team");
            assert!(r.message.contains("ml, research"), "{}", r.message);
        }
    }

    #[test]
    fn the_table_parses_comments_and_refuses_duplicates() {
        let table = Table::parse("# team account qos\nml  gpu-ml  high  # the ML team\n\nops ops\n").unwrap();
        assert_eq!(table.names(), "ml, ops");
        assert!(Table::parse("ml a\nml b\n").unwrap_err().contains("line 2"));
        assert!(Table::parse("ml\n").unwrap_err().contains("line 1"));
        assert!(Table::parse("# nothing\n").is_err());
    }

    #[test]
    fn an_unknown_partition_is_rejected_naming_the_annotation() {
        let mut asked = pod(Some("ml"));
        asked.annotations.push(KeyValue { key: PARTITION_ANNOTATION.into(), value: "huge".into() });
        let Mapping::Reject(r) = map_pod(&Table::built_in(), &asked, &cluster()) else { panic!() };
        assert_eq!(r.field, "metadata.annotations[sunk.dev/partition]");
    }
}
