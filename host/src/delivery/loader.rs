//! Loads `PolicyModule` resources into the decision points, on every replica (followers too, so that a
//! failover never starts on the bundled defaults): fetch the pinned bytes, compile, dry-run, swap. It
//! writes nothing to the API server; what each load came to is kept in [`Loads`] for the leader's
//! [`super::reporter`].

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use kube::api::ListParams;
use kube::runtime::controller::Action;
use kube::runtime::{Controller, WatchStreamExt, watcher};
use kube::{Api, Client, ResourceExt};

use super::fetch::{self, FetchError};
use super::loads::{Loads, Outcome};
use super::resource::PolicyModule;
use super::status;
use crate::kube::one_line_within;
use crate::policy::{Policies, Source, sha256_hex};

/// The longest refusal quoted in a status message, in characters.
const REFUSAL_LIMIT: usize = 300;
/// How soon a refused module is looked at again (its bytes may not have arrived yet).
const RETRY: Duration = Duration::from_secs(20);
/// How soon the PolicyModules are listed again when they could not be (the API server away).
const LIST_AGAIN: Duration = Duration::from_secs(2);

struct Context {
    client: Client,
    namespace: String,
    policies: Arc<Policies>,
    loads: Loads,
}

/// None: a load records what went wrong as its outcome (the reporter writes it), so a pass never fails.
#[derive(Debug, thiserror::Error)]
pub enum Error {}

/// Loads the PolicyModules of `namespace` until a termination signal arrives.
pub async fn run(client: Client, namespace: String, policies: Arc<Policies>, loads: Loads) {
    let api = Api::<PolicyModule>::namespaced(client.clone(), &namespace);
    expect_those_there_now(&api, &loads).await;
    let missing = "the PolicyModule CRD is not installed (the Helm chart installs it; or `sunk crds | kubectl apply -f -`): uploaded policies are not loaded until it is fixed; the bundled and directory policies decide meanwhile";
    crate::kube::wait_until_served(&api, missing).await;
    tokio::spawn(forget_on_delete(api.clone(), policies.clone(), loads.clone()));
    let ctx = Arc::new(Context { client, namespace, policies, loads });
    Controller::new(api, watcher::Config::default())
        .shutdown_on_signal()
        .run(load, |_, error: &Error, _| match *error {}, ctx)
        .for_each(|_| async {})
        .await;
}

/// Tells `loads` which PolicyModules exist now: the writers start once each is loaded.
async fn expect_those_there_now(api: &Api<PolicyModule>, loads: &Loads) {
    for attempt in 0.. {
        match api.list(&ListParams::default()).await {
            Ok(list) => return loads.expect(list.items.iter().map(ResourceExt::name_any)),
            // No CRD, no PolicyModule: the bundled and directory policies are all there is.
            Err(error) if crate::kube::is_gone(&error) => return loads.expect([]),
            Err(error) if attempt == 0 => tracing::warn!(%error, "cannot list PolicyModules; decisions wait for them"),
            Err(error) => tracing::debug!(%error, "cannot list PolicyModules yet"),
        }
        tokio::time::sleep(LIST_AGAIN).await;
    }
}

async fn load(module: Arc<PolicyModule>, ctx: Arc<Context>) -> Result<Action, Error> {
    let name = module.name_any();
    let decision = module.spec.decision.as_str();
    let Some(point) = ctx.policies.point(decision) else {
        return Ok(Action::await_change());
    };
    if status::is_superseded(&module) {
        // Another PolicyModule went live after this one; only a change to this one brings it back.
        ctx.loads.record(&name, Outcome::Superseded);
        return Ok(Action::await_change());
    }
    let source = Source::Resource(name.clone());
    let pinned = module.spec.sha256.trim().to_ascii_lowercase();
    let (live_source, live_digest) = point.live_version();
    let outcome = if live_source == source && live_digest == pinned {
        point.release(&source);
        let message = format!("live on {decision}");
        Outcome::Live { message, news: None, replaced: None }
    } else if point.previous_version().is_some_and(|previous| previous == (source.clone(), pinned.clone())) {
        point.rollback();
        point.release(&source);
        let message = format!("rolled back on {decision} to the version kept in memory");
        Outcome::Live { message, news: Some("RolledBack"), replaced: Some(live_source) }
    } else {
        // Room is left after the refusal for what follows from it: the whole message is cut to the
        // limit of a condition's message when written, and its end says what still decides.
        match offer(&ctx, &module, &pinned, source.clone())
            .await
            .map_err(|refusal| one_line_within(&refusal, REFUSAL_LIMIT))
        {
            Ok(()) => {
                point.release(&source);
                let message = format!("live on {decision}, replacing {live_source} ({})", &live_digest[..12]);
                Outcome::Live { message, news: Some("Live"), replaced: Some(live_source) }
            }
            // An earlier version of this module, or another PolicyModule, is the operator's and may go
            // on deciding; the bundled default or a file, more permissive as a rule, may not.
            Err(refusal) if matches!(live_source, Source::Resource(_)) => {
                let message = format!("{refusal}; {decision} stays on {live_source} ({})", &live_digest[..12]);
                Outcome::Refused { message }
            }
            Err(refusal) => {
                point.withhold(source, format!("PolicyModule {name} is not live ({refusal})"));
                Outcome::Refused { message: format!("{refusal}; no {decision} decision is made until it is live") }
            }
        }
    };
    let again = matches!(outcome, Outcome::Refused { .. });
    ctx.loads.record(&name, outcome);
    Ok(if again { Action::requeue(RETRY) } else { Action::await_change() })
}

/// Fetches, checks the pin, loads, dry-runs and swaps. The error says what to fix. Bytes refused
/// once are not compiled again: only new bytes (a new pin) are.
async fn offer(ctx: &Context, module: &PolicyModule, pinned: &str, source: Source) -> Result<(), String> {
    if pinned.len() != 64 || !pinned.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(format!("spec.sha256 {:?} is not 64 hex digits", module.spec.sha256));
    }
    let name = module.name_any();
    if let Some(refusal) = ctx.loads.refused_pin(&name, pinned) {
        return Err(refusal);
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
    let offered = super::offer(ctx.policies.clone(), module.spec.decision, bytes, module.spec.config.clone(), source);
    offered.await.inspect_err(|refusal| ctx.loads.refuse_pin(&name, pinned, refusal))
}

/// The Controller only sees objects that exist: a deleted PolicyModule that was live hands its
/// decision point back to the bundled default, and one that withheld decisions no longer does.
async fn forget_on_delete(api: Api<PolicyModule>, policies: Arc<Policies>, loads: Loads) {
    let events = watcher(api, watcher::Config::default()).default_backoff();
    events
        .for_each(|event| {
            if let Ok(watcher::Event::Delete(module)) = event {
                let name = module.name_any();
                if let Some(point) = policies.point(module.spec.decision.as_str()) {
                    let source = Source::Resource(name.clone());
                    if point.live_version().0 == source {
                        tracing::info!(module = %name, "live PolicyModule deleted; back to the bundled default");
                        point.reset();
                    }
                    point.release(&source);
                }
                loads.forget(&name);
            }
            async {}
        })
        .await;
}
