//! Reports on each `PolicyModule` what loading it came to: its status, and an Event when that is news.
//! The leader's alone (it writes); the loading itself is [`super::loader`]'s, on every replica.

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use kube::runtime::controller::Action;
use kube::runtime::reflector::ObjectRef;
use kube::runtime::{Controller, watcher};
use kube::{Api, Client, Resource, ResourceExt};
use tokio::sync::broadcast;

use super::loads::{Loads, Outcome};
use super::resource::PolicyModule;
use super::status::{self, Phase};
use crate::kube::EventRecorder;
use crate::policy::{Policies, Source};

/// How soon a module not yet loaded on this replica is looked at again.
const NOT_YET_LOADED: Duration = Duration::from_secs(1);

struct Context {
    client: Client,
    namespace: String,
    policies: Arc<Policies>,
    loads: Loads,
    recorder: EventRecorder,
}

/// Only a write to the API server fails a report (not [`crate::error::Error`]: no Slurm, no policy).
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(transparent)]
    Kube(#[from] kube::Error),
}

/// Reports on the PolicyModules of `namespace` until a termination signal arrives.
pub async fn run(client: Client, namespace: String, policies: Arc<Policies>, loads: Loads) {
    let api = Api::<PolicyModule>::namespaced(client.clone(), &namespace);
    crate::kube::wait_until_served(&api, "the PolicyModule CRD is not installed").await;
    let within = namespace.clone();
    let news = futures::stream::unfold(loads.subscribe(), |mut news| async move {
        loop {
            match news.recv().await {
                Ok(name) => return Some((name, news)),
                // 256 outcomes behind: some PolicyModule's status waits for its next change.
                Err(broadcast::error::RecvError::Lagged(_)) => continue,
                Err(broadcast::error::RecvError::Closed) => return None,
            }
        }
    })
    .map(move |name| ObjectRef::new(&name).within(&within));
    let recorder = EventRecorder::new(client.clone(), "sunk-policy");
    let ctx = Arc::new(Context { client, namespace, policies, loads, recorder });
    Controller::new(api, watcher::Config::default())
        .reconcile_on(news)
        .shutdown_on_signal()
        .run(report, error_policy, ctx)
        .for_each(|result| async move {
            if let Err(error) = result {
                tracing::debug!(%error, "policy module reporter");
            }
        })
        .await;
}

async fn report(module: Arc<PolicyModule>, ctx: Arc<Context>) -> Result<Action, Error> {
    let name = module.name_any();
    let Some(outcome) = ctx.loads.outcome(&name) else {
        return Ok(Action::requeue(NOT_YET_LOADED));
    };
    let pinned = module.spec.sha256.trim().to_ascii_lowercase();
    match outcome {
        Outcome::Superseded => {}
        Outcome::Live { message, news, replaced } => {
            let previous = ctx
                .policies
                .point(module.spec.decision.as_str())
                .and_then(|point| point.previous_version())
                .map(|(_, digest)| digest);
            let changed =
                status::write(&ctx.client, &module, Phase::Live, &message, Some(&pinned), previous.as_deref()).await?;
            if let (true, Some(reason)) = (changed, news) {
                publish(&ctx, &module, false, reason, message).await;
            }
            if let Some(replaced) = replaced {
                supersede(&ctx, &replaced, &name).await?;
            }
        }
        Outcome::Refused { message } => {
            if status::write(&ctx.client, &module, Phase::Refused, &message, None, None).await? {
                publish(&ctx, &module, true, "Refused", message).await;
            }
        }
    }
    Ok(Action::await_change())
}

/// Marks the PolicyModule that was live before `winner` as superseded.
async fn supersede(ctx: &Context, replaced: &Source, winner: &str) -> Result<(), Error> {
    let Source::Resource(loser) = replaced else {
        return Ok(());
    };
    if loser == winner {
        return Ok(());
    }
    let api = Api::<PolicyModule>::namespaced(ctx.client.clone(), &ctx.namespace);
    if let Some(module) = api.get_opt(loser).await? {
        let message = format!("superseded by PolicyModule {winner}");
        status::write(&ctx.client, &module, Phase::Superseded, &message, None, None).await?;
    }
    Ok(())
}

/// Records an Event on the PolicyModule; failing to is logged, never fatal.
async fn publish(ctx: &Context, module: &PolicyModule, warning: bool, reason: &str, note: String) {
    ctx.recorder.publish(&module.object_ref(&()), warning, reason, "Load", note).await;
}

fn error_policy(module: Arc<PolicyModule>, error: &Error, _ctx: Arc<Context>) -> Action {
    tracing::warn!(module = %module.name_any(), %error, "reporting on a PolicyModule failed");
    Action::requeue(Duration::from_secs(5))
}
