//! Leader election on a `coordination.k8s.io` Lease, so that of several `sunk host` replicas only
//! one writes (submits, binds, cancels, drains, NodeSet and PolicyModule updates).
//!
//! The Lease protocol is kube-lease-manager's; this module adds what a controller needs around it:
//! a follower that notices a released Lease at once (through a watch, see `observer`), a leader that
//! learns it lost the Lease, or could not renew it, before a follower may take it, and a release
//! that a fresh process can do on the way out.

mod election;
mod fence;
mod observer;

pub use election::{Election, Leadership, release};
pub use fence::{Fence, FencedSlurm, layer as fence_layer};
pub use observer::Observed;

use std::time::Duration;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

/// How long a claim lasts after its last renewal: a killed leader's Lease is free this long after
/// its last renewal at most, so a follower takes over within it (plus a second of jitter).
pub const LEASE_DURATION: Duration = Duration::from_secs(10);
/// The leader renews this long before its claim runs out (so every ~5 s).
pub const RENEW_BEFORE_EXPIRY: Duration = Duration::from_secs(5);
/// A leader that could not renew stops this long before its claim runs out, so that it has stopped
/// writing before any follower may take the Lease (it tolerates this much clock skew too).
pub const STOP_BEFORE_EXPIRY: Duration = Duration::from_secs(2);

// A leader renews before it gives up, and gives up before its claim can be taken; a killed leader's
// Lease is taken (one second of jitter later) well within the 15 s the host promises.
const _: () = assert!(STOP_BEFORE_EXPIRY.as_secs() < RENEW_BEFORE_EXPIRY.as_secs());
const _: () = assert!(RENEW_BEFORE_EXPIRY.as_secs() < LEASE_DURATION.as_secs());
const _: () = assert!(LEASE_DURATION.as_secs() + 1 < 15);

/// Which Lease, and who this process is to it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Config {
    pub namespace: String,
    pub lease: String,
    pub identity: String,
}

/// This process's name on the Lease: the pod's name (`POD_NAME`, from the downward API), else
/// `<hostname>-<pid>` so that two processes on one machine differ.
pub fn identity() -> String {
    identity_from(std::env::var("POD_NAME").ok(), hostname(), std::process::id())
}

fn identity_from(pod_name: Option<String>, hostname: Option<String>, pid: u32) -> String {
    match pod_name.filter(|name| !name.trim().is_empty()) {
        Some(name) => name.trim().to_owned(),
        None => format!("{}-{pid}", hostname.unwrap_or_else(|| "sunk".into())),
    }
}

fn hostname() -> Option<String> {
    let name = std::fs::read_to_string("/proc/sys/kernel/hostname").ok().or_else(|| std::env::var("HOSTNAME").ok())?;
    Some(name.trim().to_owned()).filter(|name| !name.is_empty())
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct LeaderLabels {
    identity: String,
}

/// `sunk_leader{identity}`: 1 while this process holds the Lease and runs the writing controllers,
/// else 0. Summed over the replicas it is 1 when the host has exactly one leader.
#[derive(Clone)]
pub struct LeaderGauge(Gauge);

impl LeaderGauge {
    pub fn register(registry: &mut Registry, identity: &str) -> Self {
        let family = Family::<LeaderLabels, Gauge>::default();
        let gauge = family.get_or_create(&LeaderLabels { identity: identity.to_owned() }).clone();
        registry.register("sunk_leader", "1 while this host holds the leader Lease and writes, else 0", family);
        Self(gauge)
    }

    pub fn set(&self, leading: bool) {
        self.0.set(i64::from(leading));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_identity_is_the_pod_name_else_hostname_and_pid() {
        assert_eq!(identity_from(Some("sunk-7d9-abc".into()), Some("node".into()), 7), "sunk-7d9-abc");
        assert_eq!(identity_from(Some(" ".into()), Some("node".into()), 7), "node-7");
        assert_eq!(identity_from(None, None, 7), "sunk-7");
    }

    #[test]
    fn the_gauge_names_the_identity() {
        let mut registry = Registry::default();
        let gauge = LeaderGauge::register(&mut registry, "host-a");
        gauge.set(true);
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &registry).unwrap();
        assert!(text.contains("sunk_leader{identity=\"host-a\"} 1"), "{text}");
        gauge.set(false);
        text.clear();
        prometheus_client::encoding::text::encode(&mut text, &registry).unwrap();
        assert!(text.contains("sunk_leader{identity=\"host-a\"} 0"), "{text}");
    }
}
