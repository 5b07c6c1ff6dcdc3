//! Reconciles `PolicyModule` resources: fetch the pinned bytes, load, dry-run, swap; report in status.

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use kube::runtime::controller::Action;
use kube::runtime::{Controller, WatchStreamExt, watcher};
use kube::{Api, Client, Resource, ResourceExt};

use super::fetch::{self, FetchError};
use super::resource::PolicyModule;
use super::status::{self, Phase};
use crate::kube::EventRecorder;
use crate::policy::{Policies, Source, sha256_hex};

/// How soon a refused module is looked at again (its bytes may not have arrived yet).
const RETRY: Duration = Duration::from_secs(20);

pub struct Context {
    pub client: Client,
    pub namespace: String,
    pub policies: Arc<Policies>,
    recorder: EventRecorder,
}

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(transparent)]
    Kube(#[from] kube::Error),
}

/// Watches the PolicyModules of `namespace` until a termination signal arrives.
pub async fn run(client: Client, namespace: String, policies: Arc<Policies>) {
    let api = Api::<PolicyModule>::namespaced(client.clone(), &namespace);
    let missing = "the PolicyModule CRD is not installed (the Helm chart installs it; or `sunk crds | kubectl apply -f -`): uploaded policies are not loaded until it is fixed; the bundled and directory policies decide meanwhile";
    crate::kube::wait_until_served(&api, missing).await;
    tokio::spawn(reset_on_delete(api.clone(), policies.clone()));
    let recorder = EventRecorder::new(client.clone(), "sunk-policy");
    let ctx = Arc::new(Context { client, namespace, policies, recorder });
    Controller::new(api, watcher::Config::default())
        .shutdown_on_signal()
        .run(reconcile, error_policy, ctx)
        .for_each(|result| async move {
            if let Err(error) = result {
                tracing::debug!(%error, "policy module controller");
            }
        })
        .await;
}

async fn reconcile(module: Arc<PolicyModule>, ctx: Arc<Context>) -> Result<Action, Error> {
    let name = module.name_any();
    let decision = module.spec.decision.as_str();
    let Some(point) = ctx.policies.point(decision) else {
        return Ok(Action::await_change());
    };
    let source = Source::Resource(name.clone());
    let pinned = module.spec.sha256.trim().to_ascii_lowercase();
    let (live_source, live_digest) = point.live_version();
    if status::is_superseded(&module) {
        // Another PolicyModule went live after this one; only a change to this one brings it back.
        return Ok(Action::await_change());
    }
    if live_source == source && live_digest == pinned {
        point.release(&source);
        let previous = point.previous_version().map(|(_, digest)| digest);
        let message = format!("live on {decision}");
        status::write(&ctx.client, &module, Phase::Live, &message, Some(&pinned), previous.as_deref()).await?;
        return Ok(Action::await_change());
    }
    if let Some((previous_source, previous_digest)) = point.previous_version()
        && previous_source == source
        && previous_digest == pinned
    {
        point.rollback();
        point.release(&source);
        let message = format!("rolled back on {decision} to the version kept in memory");
        status::write(&ctx.client, &module, Phase::Live, &message, Some(&pinned), Some(&live_digest)).await?;
        publish(&ctx, &module, false, "RolledBack", message).await;
        supersede(&ctx, &live_source, &name).await?;
        return Ok(Action::await_change());
    }
    match offer(&ctx, &module, &pinned, source.clone()).await {
        Ok(()) => {
            point.release(&source);
            let message = format!("live on {decision}, replacing {live_source} ({})", &live_digest[..12]);
            status::write(&ctx.client, &module, Phase::Live, &message, Some(&pinned), Some(&live_digest)).await?;
            publish(&ctx, &module, false, "Live", message).await;
            supersede(&ctx, &live_source, &name).await?;
            Ok(Action::await_change())
        }
        Err(refusal) => {
            // An earlier version of this module, or another PolicyModule, is the operator's and may
            // go on deciding; the bundled default or a file, more permissive as a rule, may not.
            let message = if matches!(live_source, Source::Resource(_)) {
                format!("{refusal}; {decision} stays on {live_source} ({})", &live_digest[..12])
            } else {
                let why = format!("PolicyModule {name} is not live ({refusal})");
                point.withhold(source.clone(), why);
                format!("{refusal}; no {decision} decision is made until it is live")
            };
            if status::write(&ctx.client, &module, Phase::Refused, &message, None, None).await? {
                publish(&ctx, &module, true, "Refused", message).await;
            }
            Ok(Action::requeue(RETRY))
        }
    }
}

/// Fetches, checks the pin, loads, dry-runs and swaps. The error says what to fix.
async fn offer(ctx: &Context, module: &PolicyModule, pinned: &str, source: Source) -> Result<(), String> {
    if pinned.len() != 64 || !pinned.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(format!("spec.sha256 {:?} is not 64 hex digits", module.spec.sha256));
    }
    let bytes =
        fetch::module_bytes(&ctx.client, &ctx.namespace, &module.spec.source).await.map_err(|error| match error {
            FetchError::Kube(error) => format!("spec.source: {error}"),
            other => format!("spec.source: {other}"),
        })?;
    let digest = sha256_hex(&bytes);
    if digest != pinned {
        return Err(format!("spec.sha256 pins {pinned} but spec.source holds bytes with sha256 {digest}"));
    }
    super::offer(ctx.policies.clone(), module.spec.decision, bytes, module.spec.config.clone(), source).await
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
    tracing::warn!(module = %module.name_any(), %error, "reconciling a PolicyModule failed");
    Action::requeue(Duration::from_secs(5))
}

/// The Controller only sees objects that exist: a deleted PolicyModule that was live hands its
/// decision point back to the bundled default, and one that withheld decisions no longer does.
async fn reset_on_delete(api: Api<PolicyModule>, policies: Arc<Policies>) {
    let events = watcher(api, watcher::Config::default()).default_backoff();
    events
        .for_each(|event| {
            if let Ok(watcher::Event::Delete(module)) = event
                && let Some(point) = policies.point(module.spec.decision.as_str())
            {
                let source = Source::Resource(module.name_any());
                if point.live_version().0 == source {
                    tracing::info!(module = %module.name_any(), "live PolicyModule deleted; back to the bundled default");
                    point.reset();
                }
                point.release(&source);
            }
            async {}
        })
        .await;
}
