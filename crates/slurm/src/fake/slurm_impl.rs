//! The fake answering the host's requests, as slurmrestd would.

use async_trait::async_trait;

use super::{FakeSlurm, World, refusal};
use crate::api::{JobId, Slurm};
use crate::{
    ApiVersion, Job, JobDescription, JobState, JobStatesListing, JobUpdate, JobsPage, NoValue, Node, NodeSource,
    NodeUpdate, NodesPage, Partition, PartitionPriority, PreemptionSetup, SlurmError, array_task_ids,
};

#[async_trait]
impl Slurm for FakeSlurm {
    fn api(&self) -> ApiVersion {
        ApiVersion::V0_0_44
    }

    /// As 26.05's slurmrestd, which serves v0.0.45.
    fn can_requeue(&self) -> bool {
        true
    }

    async fn submit(&self, job: &JobDescription) -> Result<u32, SlurmError> {
        self.write(format!("submit {}", job.name), |world| {
            world.refuse_unknown_nodes(job)?;
            let tasks = job.array.as_deref().map(array_task_ids).unwrap_or_default();
            if tasks.is_empty() {
                return Ok(world.record(job, true));
            }
            let array = world.next_job_id;
            for task in tasks {
                let id = world.record(job, true);
                let record = world.jobs.get_mut(&id).expect("just recorded");
                record.array_job_id = NoValue::of(u64::from(array));
                record.array_task_id = NoValue::of(u64::from(task));
            }
            Ok(array)
        })
    }

    async fn allocate(&self, job: &JobDescription) -> Result<u32, SlurmError> {
        self.write(format!("allocate {}", job.name), |world| world.allocate(job, None))
    }

    async fn allocate_as(&self, job: &JobDescription, uid: u32) -> Result<u32, SlurmError> {
        self.write(format!("allocate {} as {uid}", job.name), |world| world.allocate(job, Some(uid)))
    }

    async fn job(&self, job_id: &JobId) -> Result<Option<Job>, SlurmError> {
        self.read(|world| world.resolve(&job_id.to_string()).and_then(|id| world.jobs.get(&id).cloned()))
    }

    async fn job_records(&self, job_id: &JobId) -> Result<Vec<Job>, SlurmError> {
        let wanted = job_id.to_string();
        let id = wanted.split_once('_').map_or(wanted.as_str(), |(array, _)| array).parse::<u64>().ok();
        self.read(|world| {
            let of_it = |job: &&Job| Some(u64::from(job.job_id)) == id || job.array_job_id.get() == id;
            world.jobs.values().filter(of_it).cloned().collect()
        })
    }

    async fn cancel(&self, job_id: &JobId) -> Result<(), SlurmError> {
        self.write(format!("cancel {job_id}"), |world| {
            world.cancel(&job_id.to_string());
            Ok(())
        })
    }

    async fn requeue(&self, job_id: &JobId) -> Result<(), SlurmError> {
        self.write(format!("requeue {job_id}"), |world| {
            let job = world.resolve(&job_id.to_string()).and_then(|id| world.jobs.get_mut(&id));
            match job {
                Some(job) if job.batch_flag && job.requeue && job.state() == JobState::Running => {
                    job.job_state = vec!["PENDING".into()];
                    job.nodes.clear();
                    job.state_reason = "BeginTime".into();
                    Ok(())
                }
                _ => Err(SlurmError::Api {
                    what: "job requeue",
                    status: 500,
                    errors: vec![refusal(2039, "Requested operation is presently disabled")],
                }),
            }
        })
    }

    async fn cancel_jobs(&self, job_ids: &[String]) -> Result<Vec<(String, String)>, SlurmError> {
        self.write(format!("cancel {}", job_ids.join(",")), |world| {
            job_ids.iter().for_each(|id| world.cancel(id));
            Ok(Vec::new())
        })
    }

    async fn update_job(&self, job_id: &JobId, update: &JobUpdate) -> Result<(), SlurmError> {
        self.write(format!("update {job_id}"), |world| {
            let job_id = job_id.to_string();
            if job_id.contains('_') {
                let description =
                    "Rejecting request. Submit job update against Array Job's JobID instead of array task id.";
                return Err(SlurmError::Api {
                    what: "job update",
                    status: 422,
                    errors: vec![refusal(9000, description)],
                });
            }
            if let Some(refusal) = update.excluded_nodes.as_deref().and_then(|names| world.unknown_node(names)) {
                return Err(SlurmError::Api { what: "job update", status: 500, errors: vec![refusal] });
            }
            // The array's id names its own record (and whatever tasks still wait in it), not the
            // tasks that left it: a record of the fake's is one task, so it is one record either way.
            let Some(id) = world.resolve(&job_id) else {
                let unknown = refusal(2017, "Invalid job id specified");
                return Err(SlurmError::Api { what: "job update", status: 404, errors: vec![unknown] });
            };
            world.update(id, update);
            Ok(())
        })
    }

    async fn jobs(&self, since: Option<u64>) -> Result<JobsPage, SlurmError> {
        self.list("jobs", |world| match since {
            Some(since) if since == world.changed_at => JobsPage::Unchanged,
            _ => JobsPage::All { jobs: world.jobs.values().cloned().collect(), last_update: world.changed_at },
        })
    }

    async fn job_states(&self) -> Result<JobStatesListing, SlurmError> {
        self.list("job states", |world| JobStatesListing::of_listing(world.jobs.values()))
    }

    async fn nodes(&self, since: Option<u64>) -> Result<NodesPage, SlurmError> {
        self.list("nodes", |world| match since {
            Some(since) if since == world.changed_at => NodesPage::Unchanged,
            _ => NodesPage::All { nodes: world.nodes.values().cloned().collect(), last_update: Some(world.changed_at) },
        })
    }

    async fn node(&self, name: &str) -> Result<Option<Node>, SlurmError> {
        self.read(|world| world.nodes.get(name).cloned())
    }

    async fn update_node(&self, name: &str, update: &NodeUpdate) -> Result<(), SlurmError> {
        let verb = update.state.first().map_or("comment", |state| if state == "DRAIN" { "drain" } else { "undrain" });
        self.write(format!("{verb} {name}"), |world| {
            let node = world.nodes.get_mut(name).ok_or_else(|| SlurmError::Api {
                what: "node update",
                status: 500,
                errors: vec![refusal(2018, "Invalid node name specified")],
            })?;
            match verb {
                "drain" => {
                    node.state.retain(|flag| flag != "DRAIN");
                    node.state.push("DRAIN".into());
                    node.reason = update.reason.clone().unwrap_or_default();
                }
                "undrain" => {
                    node.state.retain(|flag| flag != "DRAIN");
                    node.reason.clear();
                }
                _ => node.comment = update.comment.clone().unwrap_or_default(),
            }
            Ok(())
        })
    }

    async fn delete_node(&self, name: &str) -> Result<(), SlurmError> {
        self.write(format!("delete {name}"), |world| {
            if world.nodes.get(name).is_some_and(|node| node.flags().is_busy()) {
                return Err(SlurmError::Api {
                    what: "node delete",
                    status: 500,
                    errors: vec![refusal(2050, "Node has jobs")],
                });
            }
            world.nodes.remove(name);
            Ok(())
        })
    }

    /// What [`FakeSlurm::set_preemption`] set; else a Slurm 24.11 without accounting: every
    /// partition of a node at tier 1, nothing more said.
    async fn preemption_setup(&self) -> Result<PreemptionSetup, SlurmError> {
        self.read(|world| {
            world.preemption.clone().unwrap_or_else(|| {
                let names: std::collections::BTreeSet<&String> =
                    world.nodes.values().flat_map(|node| &node.partitions).collect();
                let partitions = names
                    .into_iter()
                    .map(|name| Partition {
                        name: name.clone(),
                        priority: PartitionPriority { tier: 1 },
                        ..Default::default()
                    })
                    .collect();
                PreemptionSetup { conf: None, partitions, qos: None }
            })
        })
    }
}

impl NodeSource for FakeSlurm {
    async fn list_nodes(&self, since: Option<u64>) -> Result<NodesPage, SlurmError> {
        Slurm::nodes(self, since).await
    }
}

impl World {
    /// An allocation, as `uid` if named: as slurmctld, a user it cannot resolve runs as its nobody
    /// (99), and an administrator's field is refused.
    fn allocate(&mut self, job: &JobDescription, uid: Option<u32>) -> Result<u32, SlurmError> {
        if uid.is_some() && job.admin_comment.is_some() {
            return Err(SlurmError::NotSubmitted(vec![refusal(2002, "Access/permission denied")]));
        }
        self.refuse_unknown_nodes(job)?;
        let id = self.record(job, false);
        if let (Some(uid), Some(record)) = (uid, self.jobs.get_mut(&id)) {
            let resolved = if self.unknown_users.contains(&uid) { 99 } else { uid };
            (record.user_id, record.group_id) = (Some(resolved), Some(resolved));
        }
        if job.immediate == Some(true) && !self.fits_now(id) {
            // Slurm keeps the refused attempt's record, ended.
            self.end(id, "CANCELLED");
            return Err(SlurmError::NotSubmitted(vec![refusal(
                2015,
                "Unable to allocate resources: Requested nodes are busy",
            )]));
        }
        if std::mem::take(&mut self.lose_next_allocation) {
            self.start_what_fits();
            let given = self.jobs[&id].nodes.clone();
            self.end(id, "FAILED");
            let killed = self.jobs.get_mut(&id).expect("just recorded");
            (killed.nodes, killed.state_reason) = (given, "RaisedSignal".into());
            return Err(SlurmError::NoAnswer("the fake slurmrestd (restarted mid-answer)", std::time::Duration::ZERO));
        }
        Ok(id)
    }

    fn cancel(&mut self, job_id: &str) {
        // An array's id alone names all of its tasks.
        let tasks: Vec<u32> = match job_id.parse::<u64>() {
            Ok(array) => {
                self.jobs.values().filter(|job| job.array_job_id.get() == Some(array)).map(|job| job.job_id).collect()
            }
            Err(_) => Vec::new(),
        };
        for id in tasks.into_iter().chain(self.resolve(job_id)) {
            self.end(id, "CANCELLED");
        }
    }

    fn update(&mut self, id: u32, update: &JobUpdate) {
        let job = self.jobs.get_mut(&id).expect("named by the update");
        if let Some(comment) = &update.admin_comment {
            job.admin_comment = comment.as_str().into();
        }
        if let Some(comment) = &update.comment {
            job.comment = comment.clone();
        }
        if let Some(excluded) = &update.excluded_nodes {
            job.excluded_nodes = excluded.join(",");
            if let Some(demand) = self.demands.get_mut(&id) {
                demand.excluded = super::node_names(excluded);
            }
        }
    }

    fn refuse_unknown_nodes(&self, job: &JobDescription) -> Result<(), SlurmError> {
        match self.unknown_node(&job.required_nodes).or_else(|| self.unknown_node(&job.excluded_nodes)) {
            Some(refusal) => Err(SlurmError::NotSubmitted(vec![refusal])),
            None => Ok(()),
        }
    }
}
