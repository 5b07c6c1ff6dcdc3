//! Carries out a preemption round the policy chose (`preemption::consider`): victims' pods are
//! evicted (PodDisruptionBudgets honoured), Slurm jobs are requeued or cancelled with the reason left
//! on the job, and everyone involved hears why.
//!
//! Pods go first: should a budget refuse an eviction, the round stops before any Slurm job is
//! cancelled, since the waiting pod would not fit anyway.

use crate::scheduler::watched_pod::WatchedPod;
use kube::Api;

use super::super::context::Context;
use super::super::link::linked_pods;
use super::super::metrics::PreemptionResult;
use super::super::preemption::Round;
use super::super::preemption::outcome::Outcome;
use crate::error::Error;
use crate::policy::{Candidate, PreemptMode, Victim, WorkloadKind};
use crate::slurm::{Job, JobUpdate};

/// Carries out `round` for the waiting `pod`: what happened, for its condition, looked at again soon
/// (victims are on their way out, or a budget refused an eviction for now).
pub async fn preempt(ctx: &Context, pod: &WatchedPod, round: &Round) -> Result<Outcome, Error> {
    let Round { input, decision } = round;
    let chosen: Vec<(&Victim, &Candidate)> = decision
        .victims
        .iter()
        .filter_map(|victim| input.candidates.iter().find(|c| c.job_id == victim.job_id).map(|c| (victim, c)))
        .collect();
    let preemptor = &input.preemptor;
    let by = format!("{} (priority {})", preemptor.name, preemptor.priority);
    let mut evicted = Vec::new();

    for (victim, candidate) in chosen.iter().filter(|(victim, _)| victim.mode == PreemptMode::Evict) {
        for victim_pod in pods_of(held_job(ctx, candidate.job_id).as_ref(), ctx).await? {
            if let Some(refusal) = ctx.writer.evict(&victim_pod, victim.grace_seconds).await? {
                let note = format!("cannot preempt {}: its eviction was refused ({refusal})", candidate.name);
                ctx.writer.event(pod, true, "PreemptionBlocked", "Preempt", note.clone()).await;
                ctx.metrics.preemption(PreemptionResult::blocked);
                // Pods evicted before the refusal are leaving: keep them from being chosen twice.
                if !evicted.is_empty() {
                    ctx.preemptions.record(input.preemptor.job_id.unwrap_or_default(), evicted.iter().copied());
                }
                // A budget allows evictions again as pods become ready: look again soon.
                return Ok(Outcome { note, look_again_soon: true });
            }
            let note = format!("preempted by {by}: {}", decision.reason);
            ctx.writer.event(&victim_pod, true, "Preempted", "Preempt", note).await;
        }
        evicted.push(candidate.job_id);
        ctx.metrics.victim(kind_label(candidate.kind), "evict");
    }
    for (victim, candidate) in chosen.iter().filter(|(victim, _)| victim.mode != PreemptMode::Evict) {
        let job_id = candidate.job_id;
        let held = held_job(ctx, job_id);
        // An array's task is named by its task id: the last task of an array to start runs as the
        // array's record, whose id would requeue or cancel every task of the array.
        let target = held.as_ref().map_or_else(|| job_id.to_string(), Job::target);
        // A placeholder's admin comment is its link to its pods: its pods' Events carry the reason.
        let mut admin_comment = None;
        if candidate.kind == WorkloadKind::SlurmJob
            && let Some(held) = &held
        {
            admin_comment = leave_mark(ctx, held, &format!("sunk: preempted by pod {by}")).await;
        }
        let pods = pods_of(held.as_ref(), ctx).await?;
        if victim.mode == PreemptMode::Requeue {
            // The policy world let only a batch job of a Slurm that can requeue through: no pods.
            ctx.slurm.requeue(&target).await?;
        } else {
            ctx.slurm.cancel(&target).await?;
        }
        ctx.jobs.record_cancelled(&target, admin_comment.as_deref());
        for victim_pod in pods {
            let note = format!("its Slurm job {job_id} was preempted by {by}: {}", decision.reason);
            ctx.writer.event(&victim_pod, true, "Preempted", "Preempt", note).await;
        }
        ctx.metrics.victim(kind_label(candidate.kind), mode_label(victim.mode));
    }
    ctx.preemptions.record(preemptor.job_id.unwrap_or_default(), chosen.iter().map(|(_, c)| c.job_id));
    ctx.metrics.preemption(PreemptionResult::preempted);
    let named: Vec<String> = chosen.iter().map(|(victim, candidate)| describe(victim, candidate)).collect();
    let note = format!("preempting {}: {}", named.join(", "), decision.reason);
    tracing::info!(pod = %preemptor.name, "{note}");
    ctx.writer.event(pod, false, "Preempting", "Preempt", note.clone()).await;
    Ok(Outcome { note, look_again_soon: true })
}

/// The job as the host last listed it, if it holds a node still.
fn held_job(ctx: &Context, job_id: u32) -> Option<Job> {
    ctx.jobs.holding().iter().find(|job| job.job_id == job_id).cloned()
}

/// The pods a held job stands for that still exist (none for a job no longer held).
async fn pods_of(job: Option<&Job>, ctx: &Context) -> Result<Vec<WatchedPod>, Error> {
    let Some(job) = job else { return Ok(Vec::new()) };
    let mut pods = Vec::new();
    for key in linked_pods(job) {
        let api: Api<WatchedPod> = Api::namespaced(ctx.client.clone(), &key.namespace);
        if let Some(pod) = api.get_opt(&key.name).await?
            && pod.metadata.uid.as_deref() == Some(key.uid.as_str())
        {
            pods.push(pod);
        }
    }
    Ok(pods)
}

/// Adds the preemption's reason to the job's admin comment (an administrator's comment is kept);
/// returns the comment the job then has. Best effort: the cancellation is what makes room, and the
/// last task of an array to start cannot be updated alone (see `Job::update_id`).
async fn leave_mark(ctx: &Context, job: &Job, mark: &str) -> Option<String> {
    let marked = match job.admin_comment.as_str() {
        "" => mark.to_owned(),
        current => format!("{current}; {mark}"),
    };
    let Some(own_id) = job.update_id() else {
        tracing::debug!(job = %job.target(), "the preemption's reason is not left on an array's record");
        return None;
    };
    let update = JobUpdate { admin_comment: Some(marked.clone()), ..Default::default() };
    match ctx.slurm.update_job(&own_id, &update).await {
        Ok(()) => Some(marked),
        Err(error) => {
            tracing::warn!(job = own_id, %error, "could not leave the preemption's reason on the job");
            None
        }
    }
}

fn describe(victim: &Victim, candidate: &Candidate) -> String {
    let how = match victim.mode {
        PreemptMode::Evict => "evicted",
        PreemptMode::Requeue => "requeued",
        PreemptMode::Cancel => "cancelled",
    };
    match candidate.kind {
        WorkloadKind::Pod => {
            format!("pod {} (Slurm job {}, priority {}, {how})", candidate.name, candidate.job_id, candidate.priority)
        }
        WorkloadKind::SlurmJob => format!(
            "Slurm job {} ({}, user {}, account {}, priority {}, {how})",
            candidate.job_id, candidate.name, candidate.user, candidate.account, candidate.priority
        ),
    }
}

fn mode_label(mode: PreemptMode) -> &'static str {
    match mode {
        PreemptMode::Evict => "evict",
        PreemptMode::Requeue => "requeue",
        PreemptMode::Cancel => "cancel",
    }
}

fn kind_label(kind: WorkloadKind) -> &'static str {
    match kind {
        WorkloadKind::Pod => "pod",
        WorkloadKind::SlurmJob => "slurm_job",
    }
}
