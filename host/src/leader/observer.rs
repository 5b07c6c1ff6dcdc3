//! Watches the leader Lease: who holds it and until when, as the API server has it.
//!
//! kube-lease-manager only re-reads the Lease when its own idea of the expiry has passed, so on its
//! own a follower would notice a released Lease up to a lease duration late. The watch tells it at
//! once, and tells the leader when its claim was taken or not renewed in time.

use std::time::{Duration, SystemTime};

use futures::StreamExt;
use k8s_openapi::api::coordination::v1::Lease;
use kube::Api;
use kube::runtime::{WatchStreamExt, watcher};
use tokio::sync::watch;

/// The Lease as last seen.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Observed {
    /// `spec.holderIdentity`; `None` when nobody holds it (never taken, released, or deleted).
    pub holder: Option<String>,
    /// When the holder's claim runs out: `renewTime + leaseDurationSeconds`.
    pub expires: Option<SystemTime>,
}

impl Observed {
    pub fn of(lease: &Lease) -> Self {
        let Some(spec) = &lease.spec else {
            return Self::default();
        };
        let renewed = spec.renew_time.as_ref().map(|time| SystemTime::from(time.0));
        let duration = spec.lease_duration_seconds.and_then(|seconds| u64::try_from(seconds).ok());
        let expires = renewed.zip(duration).map(|(renewed, seconds)| renewed + Duration::from_secs(seconds));
        Self { holder: spec.holder_identity.clone(), expires }
    }

    pub fn is_free(&self) -> bool {
        self.holder.is_none()
    }

    pub fn is_held_by(&self, identity: &str) -> bool {
        self.holder.as_deref() == Some(identity)
    }
}

/// Starts watching the Lease `name`; the receiver holds `None` until the first listing is complete.
/// The watch ends when every receiver is dropped.
pub fn observe(api: Api<Lease>, name: &str) -> watch::Receiver<Option<Observed>> {
    let (sender, receiver) = watch::channel(None);
    let config = watcher::Config::default().fields(&format!("metadata.name={name}"));
    tokio::spawn(async move {
        let mut events = std::pin::pin!(watcher(api, config).default_backoff());
        // A (re)listing reports the Lease between Init and InitDone; publish it whole, so that
        // "not listed yet" never reads as "free".
        let mut listing: Option<Observed> = None;
        while let Some(event) = events.next().await {
            let seen = match event {
                Ok(watcher::Event::Init) => {
                    listing = Some(Observed::default());
                    None
                }
                Ok(watcher::Event::InitApply(lease)) => {
                    listing = Some(Observed::of(&lease));
                    None
                }
                Ok(watcher::Event::InitDone) => listing.take(),
                Ok(watcher::Event::Apply(lease)) => Some(Observed::of(&lease)),
                Ok(watcher::Event::Delete(_)) => Some(Observed::default()),
                Err(error) => {
                    tracing::debug!(%error, "watching the leader Lease");
                    None
                }
            };
            if let Some(seen) = seen
                && sender.send(Some(seen)).is_err()
            {
                return;
            }
        }
    });
    receiver
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::coordination::v1::LeaseSpec;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
    use k8s_openapi::jiff::Timestamp;

    fn lease(holder: Option<&str>, renewed: Option<Timestamp>, seconds: Option<i32>) -> Lease {
        Lease {
            spec: Some(LeaseSpec {
                holder_identity: holder.map(str::to_owned),
                renew_time: renewed.map(MicroTime),
                lease_duration_seconds: seconds,
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    #[test]
    fn a_held_lease_expires_its_duration_after_the_last_renewal() {
        let renewed = Timestamp::from_second(1_000_000).unwrap();
        let seen = Observed::of(&lease(Some("a"), Some(renewed), Some(10)));
        assert!(seen.is_held_by("a") && !seen.is_held_by("b") && !seen.is_free());
        assert_eq!(seen.expires, Some(SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_010)));
    }

    #[test]
    fn a_released_or_empty_lease_is_free_and_never_expires() {
        for released in [lease(None, None, None), Lease::default()] {
            let seen = Observed::of(&released);
            assert!(seen.is_free(), "{released:?}");
            assert_eq!(seen.expires, None);
        }
    }
}
