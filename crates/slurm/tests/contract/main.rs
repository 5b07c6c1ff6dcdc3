//! Contract tests: the host's real `SlurmClient` against slurmrestd answers recorded from real Slurm
//! by `tests/contract/record.sh` (fixtures in `tests/fixtures/slurmrestd/<release>/<parser>.json`),
//! replayed by [`replay`], which checks every request against the recorded one.
//!
//! One test per Slurm release: a new release is a fixture directory, a [`Release`] and one test here.
//! [`compare`] holds what differs between releases and between data parsers.

mod compare;
mod hostile;
mod jobs;
mod nodes;
mod replay;
mod submissions;

use std::fmt::Debug;
use std::future::Future;
use std::time::Duration;

use serde_json::json;
use sunk_slurm::{ApiVersion, SlurmClient, SlurmError, TokenSigner};

use replay::{OPENAPI, Replay};

/// What differs between one Slurm release and another in the answers the host reads.
struct Release {
    dir: &'static str,
    /// The data parsers its slurmrestd serves.
    offered: &'static [&'static str],
    /// The one the host speaks with it.
    speaks: ApiVersion,
    /// The HTTP status of Slurm's refusals (an unknown partition, an impossible node state change).
    refusal_status: u16,
    /// What a RESUME of a node that is not drained fails with.
    resume_not_drained: i64,
    /// Whether `GET nodes?update_time=` fails with "Unable to query partitions" after a node changed
    /// but no partition did, instead of listing the nodes.
    changed_nodes_fail: bool,
}

const SLURM_24_11_5: Release = Release {
    dir: "24.11.5",
    offered: &["v0.0.40", "v0.0.41", "v0.0.42"],
    speaks: ApiVersion::V0_0_42,
    refusal_status: 500,
    resume_not_drained: 2028,
    changed_nodes_fail: true,
};

const SLURM_26_05_5: Release = Release {
    dir: "26.05.5",
    offered: &["v0.0.42", "v0.0.43", "v0.0.44", "v0.0.45"],
    speaks: ApiVersion::V0_0_44,
    refusal_status: 422,
    resume_not_drained: 2180,
    changed_nodes_fail: false,
};

#[tokio::test]
async fn slurm_24_11_5() {
    contract(&SLURM_24_11_5).await;
}

#[tokio::test]
async fn slurm_26_05_5() {
    contract(&SLURM_26_05_5).await;
}

/// Jobs without a script exist from data parser v0.0.43 on; requeueing from v0.0.45.
#[tokio::test]
async fn slurm_26_05_5_external_jobs() {
    for parser in ["v0.0.43", "v0.0.44"] {
        submissions::external_jobs(parser).await;
    }
}

/// Everything the host asks slurmrestd, in the version it speaks with the release.
async fn contract(release: &Release) {
    let replay = Replay::start(release.dir, &release.speaks.to_string()).await;
    let slurm = client(&replay);
    discovery(&replay, &slurm, release).await;
    authentication(&replay, &slurm).await;
    nodes::listings(&replay, &slurm, release).await;
    nodes::updates(&replay, &slurm, release).await;
    jobs::listings(&replay, &slurm).await;
    jobs::lookups(&replay, &slurm).await;
    submissions::submissions(&replay, &slurm, release).await;
    submissions::updates_and_cancels(&replay, &slurm).await;
}

fn client(replay: &Replay) -> SlurmClient {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let signer = TokenSigner::new(b"contract-test-key-0123456789abcdef", "root", Duration::from_secs(60));
    SlurmClient::new(&replay.url, signer).expect("a valid URL")
}

/// How a call ended, in the words the tests compare: `ok`, `token refused (HTTP 511)`,
/// `job/submit: HTTP 422, errors [2000]`.
fn outcome<T: Debug>(answer: &Result<T, SlurmError>) -> String {
    match answer {
        Ok(_) => "ok".into(),
        Err(SlurmError::Unauthorized(status)) => format!("token refused (HTTP {status})"),
        Err(SlurmError::Api { what, status, errors }) => {
            // Error 0 is none of Slurm's: the client's own words (a ping no slurmctld answered).
            let numbers: Vec<i64> =
                errors.iter().map(|error| error.error_number).filter(|number| *number != 0).collect();
            format!("{what}: HTTP {status}, errors {numbers:?}")
        }
        Err(other) => other.to_string(),
    }
}

/// The [`outcome`] of `call` when slurmrestd answers with these exchanges.
async fn ends<T: Debug>(replay: &Replay, names: &[&str], call: impl Future<Output = Result<T, SlurmError>>) -> String {
    outcome(&replay.serve(names, call).await.0)
}

async fn discovery(replay: &Replay, slurm: &SlurmClient, release: &Release) {
    let (info, _) = replay.serve(&[OPENAPI, "ping"], slurm.discover()).await;
    let info = info.expect("discovery");
    assert_eq!(info.api, release.speaks);
    assert_eq!(info.release, release.dir);
    let offered: Vec<ApiVersion> = release.offered.iter().map(|version| version.parse().unwrap()).collect();
    assert_eq!(info.offered, offered);
    assert_eq!(slurm.api(), release.speaks);
    assert_eq!(slurm.can_requeue(), release.offered.contains(&"v0.0.45"));
}

async fn authentication(replay: &Replay, slurm: &SlurmClient) {
    // slurmrestd answers a ping with a badly signed token HTTP 200 and no error: only `responding`
    // tells. Every other request with that token gets 511.
    assert_eq!(replay.fixture("ping").json()["pings"][0]["responding"], json!(true));
    assert_eq!(replay.fixture("ping-bad-token").status, 200);
    assert_eq!(replay.fixture("ping-bad-token").json()["pings"][0]["responding"], json!(false));

    assert_eq!(ends(replay, &["ping"], slurm.ping()).await, "ok");
    assert_eq!(ends(replay, &["ping-no-token"], slurm.ping()).await, "token refused (HTTP 401)");
    assert_eq!(ends(replay, &["ping-bad-token"], slurm.ping()).await, "ping: HTTP 200, errors []");
    assert_eq!(ends(replay, &[OPENAPI, "ping-bad-token"], slurm.discover()).await, "ping: HTTP 200, errors []");
    assert_eq!(ends(replay, &["jobs-bad-token"], slurm.jobs(None)).await, "token refused (HTTP 511)");
    assert_eq!(ends(replay, &["nodes-bad-token"], slurm.nodes(None)).await, "token refused (HTTP 511)");
}
