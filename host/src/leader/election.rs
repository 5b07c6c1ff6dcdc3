//! Waiting for the Lease, holding it, losing it, and letting it go.

use std::time::{Duration, SystemTime};

use k8s_openapi::api::coordination::v1::Lease;
use kube::{Api, Client};
use kube_lease_manager::{LeaseCreateMode, LeaseManager, LeaseManagerBuilder, LeaseManagerError, LeaseParams};
use tokio::sync::watch;
use tokio::time::Instant;

use super::fence::Fence;
use super::observer::{self, Observed};
use super::{Config, LEASE_DURATION, RENEW_BEFORE_EXPIRY, STOP_BEFORE_EXPIRY};

/// Pause after a failed Lease request before the next try. A follower doubles it on every failure
/// (while it waits), up to `FOLLOWER_RETRY_MAX`: a Lease it may not read fails until RBAC is fixed.
const RETRY: Duration = Duration::from_millis(500);
const FOLLOWER_RETRY_MAX: Duration = Duration::from_secs(8);

/// This process's candidacy: a watch on the Lease, and the means to take it.
pub struct Election {
    client: Client,
    config: Config,
    observed: watch::Receiver<Option<Observed>>,
    fence: Fence,
}

impl Election {
    /// Starts watching the Lease; nothing is taken until [`Election::acquire`]. The leadership opens
    /// `fence` while it holds the Lease and closes it when it loses it.
    pub fn start(client: Client, config: Config, fence: Fence) -> Self {
        let api = Api::<Lease>::namespaced(client.clone(), &config.namespace);
        let observed = observer::observe(api, &config.lease);
        Self { client, config, observed, fence }
    }

    /// Whether the Lease has been read, i.e. this process knows who leads (for `/readyz`).
    pub fn synced(&self) -> impl Fn() -> bool + Send + Sync + 'static {
        let observed = self.observed.clone();
        move || observed.borrow().is_some()
    }

    /// Waits until this process holds the Lease. A Lease the leader releases is taken at once; one
    /// it stopped renewing (the leader died) when it runs out.
    pub async fn acquire(&self) -> Leadership {
        let mut observed = self.observed.clone();
        let lease = format!("{}/{}", self.config.namespace, self.config.lease);
        tracing::info!(%lease, identity = %self.config.identity, "waiting for the leader Lease");
        let mut retry = RETRY;
        loop {
            // Only a release seen after the manager has read the Lease is news to it.
            observed.mark_unchanged();
            let manager = match manager(&self.client, &self.config).await {
                Ok(manager) => manager,
                Err(error) => {
                    tracing::warn!(%lease, %error, ?retry, "reading the leader Lease failed; retrying");
                    tokio::time::sleep(retry).await;
                    retry = (retry * 2).min(FOLLOWER_RETRY_MAX);
                    continue;
                }
            };
            tokio::select! {
                result = manager.changed() => match result {
                    Ok(true) => {
                        tracing::info!(%lease, identity = %self.config.identity, "took the leader Lease");
                        let acquired = Instant::now();
                        self.fence.open_until(stop_at(None, acquired));
                        let (config, fence) = (self.config.clone(), self.fence.clone());
                        return Leadership { manager, config, observed, acquired, fence };
                    }
                    Ok(false) => {}
                    Err(error) => {
                        tracing::warn!(%lease, %error, ?retry, "taking the leader Lease failed; retrying");
                        tokio::time::sleep(retry).await;
                        retry = (retry * 2).min(FOLLOWER_RETRY_MAX);
                    }
                },
                () = freed(&mut observed) => tracing::info!(%lease, "the leader Lease is free; taking it"),
            }
        }
    }
}

/// The Lease, held. Writers run only while [`Leadership::lost`] has not resolved.
pub struct Leadership {
    manager: LeaseManager,
    config: Config,
    observed: watch::Receiver<Option<Observed>>,
    acquired: Instant,
    fence: Fence,
}

impl Leadership {
    /// Keeps renewing the Lease; resolves, with the reason, as soon as this process may no longer
    /// write: another holder appeared, or the claim could not be renewed and is about to run out
    /// (`STOP_BEFORE_EXPIRY` before a follower may take it).
    /// The fence follows the claim: open until that deadline, closed once this resolves.
    pub async fn lost(&mut self) -> String {
        let reason = self.held().await;
        self.fence.close();
        reason
    }

    async fn held(&mut self) -> String {
        let Self { manager, config, observed, acquired, fence } = self;
        let manager = &*manager;
        // What the watch shows before it shows this process as the holder predates the takeover (a
        // release, the dead leader's last renewal): until then only the acquisition time counts.
        let mut confirmed: Option<SystemTime> = None;
        // Waiting for the Lease already consumed the watch's news of the takeover itself.
        let seen = observed.borrow_and_update();
        if let News::Held(expires) = news(seen.as_ref(), &config.identity, false, SystemTime::now()) {
            confirmed = expires;
        }
        drop(seen);
        let mut watching = true;
        let mut renewing = std::pin::pin!(renew(manager, Duration::ZERO));
        loop {
            let deadline = stop_at(confirmed, *acquired);
            fence.open_until(deadline);
            tokio::select! {
                result = &mut renewing => match result {
                    Ok(true) => renewing.set(renew(manager, Duration::ZERO)),
                    Ok(false) => return "another host took the Lease".into(),
                    Err(error) => {
                        tracing::warn!(lease = %config.lease, %error, "renewing the leader Lease failed; retrying");
                        renewing.set(renew(manager, RETRY));
                    }
                },
                changed = observed.changed(), if watching => {
                    watching = changed.is_ok();
                    let seen = observed.borrow_and_update().clone();
                    match news(seen.as_ref(), &config.identity, confirmed.is_some(), SystemTime::now()) {
                        News::Held(expires) => confirmed = expires.or(confirmed),
                        News::Lost(reason) => return reason,
                        News::Stale => {}
                    }
                }
                () = tokio::time::sleep_until(deadline) => {
                    return "the Lease could not be renewed before it ran out".into();
                }
            }
        }
    }
}

/// What the leader makes of the Lease as the watch shows it.
#[derive(Debug, PartialEq, Eq)]
enum News {
    /// Still ours, with the claim running out then.
    Held(Option<SystemTime>),
    /// No longer ours: stop writing.
    Lost(String),
    /// Seen before the watch first showed this process as the holder, so older than the takeover
    /// (a release, the dead leader's last renewal), or this process's own claim already run out (a
    /// renewal from before it was stopped, while the watch has not caught up): says nothing about
    /// the claim. Believed, such a claim would end every new term at once, and the host would take
    /// and lose the Lease in a loop, hundreds of times a second, until the watch caught up.
    Stale,
}

fn news(seen: Option<&Observed>, identity: &str, confirmed: bool, now: SystemTime) -> News {
    match seen {
        Some(seen) if seen.is_held_by(identity) => match seen.expires {
            Some(expires) if expires <= now => News::Stale,
            expires => News::Held(expires),
        },
        Some(seen) if confirmed => {
            News::Lost(format!("the Lease is now held by {}", seen.holder.as_deref().unwrap_or("nobody")))
        }
        _ => News::Stale,
    }
}

/// Lets go of the Lease if `config.identity` holds it, so that a follower takes over at once. Meant
/// for the way out, once the writers are gone, so it makes its own manager (with the same identity
/// and field manager as the one that took the Lease).
pub async fn release(client: Client, config: &Config) -> Result<(), LeaseManagerError> {
    manager(&client, config).await?.release().await
}

async fn manager(client: &Client, config: &Config) -> Result<LeaseManager, LeaseManagerError> {
    let params = LeaseParams::new(&config.identity, LEASE_DURATION.as_secs(), RENEW_BEFORE_EXPIRY.as_secs());
    LeaseManagerBuilder::new(client.clone(), &config.lease)
        .with_namespace(&config.namespace)
        .with_parameters(params)
        .with_create_mode(LeaseCreateMode::AutoCreate)
        .build()
        .await
}

/// One step of the manager's renewal loop, after a pause: it returns only when the holder changes
/// (or on an error), renewing in between.
async fn renew(manager: &LeaseManager, after: Duration) -> Result<bool, LeaseManagerError> {
    tokio::time::sleep(after).await;
    manager.changed().await
}

/// Resolves when the watch shows the Lease let go (released or deleted).
async fn freed(observed: &mut watch::Receiver<Option<Observed>>) {
    loop {
        if observed.changed().await.is_err() {
            // The watch ended: the manager alone decides, when the claim runs out.
            return std::future::pending().await;
        }
        if observed.borrow_and_update().as_ref().is_some_and(Observed::is_free) {
            return;
        }
    }
}

/// When a leader must have stopped writing: `STOP_BEFORE_EXPIRY` before its claim runs out (the
/// last renewal the watch confirmed, else the acquisition).
fn stop_at(confirmed: Option<SystemTime>, acquired: Instant) -> Instant {
    let expires = match confirmed {
        Some(expires) => instant_of(expires),
        None => acquired + LEASE_DURATION,
    };
    expires.checked_sub(STOP_BEFORE_EXPIRY).unwrap_or_else(Instant::now)
}

/// The monotonic instant of a wall-clock time (now, if it has passed).
fn instant_of(time: SystemTime) -> Instant {
    Instant::now() + time.duration_since(SystemTime::now()).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn held_by(holder: Option<&str>, expires: u64) -> Observed {
        Observed {
            holder: holder.map(str::to_owned),
            expires: Some(SystemTime::UNIX_EPOCH + Duration::from_secs(expires)),
        }
    }

    /// The wall clock of these tests: second 10.
    fn now() -> SystemTime {
        SystemTime::UNIX_EPOCH + Duration::from_secs(10)
    }

    #[test]
    fn a_leader_ignores_what_predates_its_takeover() {
        let own_run_out = Some(held_by(Some("me"), 5));
        for seen in [None, Some(held_by(None, 5)), Some(held_by(Some("dead"), 5)), own_run_out] {
            for confirmed in [false, true] {
                if confirmed && seen.as_ref().is_some_and(|seen| !seen.is_held_by("me")) {
                    continue;
                }
                assert_eq!(news(seen.as_ref(), "me", confirmed, now()), News::Stale, "{seen:?}");
            }
        }
    }

    #[test]
    fn a_leader_follows_its_renewals() {
        let expires = SystemTime::UNIX_EPOCH + Duration::from_secs(20);
        for confirmed in [false, true] {
            assert_eq!(news(Some(&held_by(Some("me"), 20)), "me", confirmed, now()), News::Held(Some(expires)));
        }
    }

    #[test]
    fn a_confirmed_leader_loses_to_another_holder_or_a_release() {
        let lost = |seen: Observed| match news(Some(&seen), "me", true, now()) {
            News::Lost(reason) => reason,
            other => panic!("{other:?}"),
        };
        assert_eq!(lost(held_by(Some("other"), 9)), "the Lease is now held by other");
        assert_eq!(lost(held_by(None, 9)), "the Lease is now held by nobody");
    }
}
