//! A hostile job-mapper for the host's abuse suite. What it does is chosen by the text its `config()`
//! import returns: `ok` (or nothing), `loop`, `memory-bomb`, `recursion`, `panic`, `huge-output`,
//! `many-logs`, `invalid`, and `panic-when-labelled` (panics on a pod labelled `abuse`, so it passes the
//! dry run on the world's samples and fails on a chosen pod).

wit_bindgen::generate!({
    world: "job-mapper",
    path: "../../../wit",
});

use std::hint::black_box;

use sunk::policy::host::{self, LogLevel};
use sunk::policy::job_types::{JobRequest, Rejection};

struct Policy;

impl Guest for Policy {
    fn map_pod(pod: Pod, _cluster: Cluster) -> Mapping {
        match host::config().as_deref().unwrap_or("ok") {
            "loop" => loop {
                black_box(());
            },
            "memory-bomb" => {
                let mut hoard: Vec<Vec<u8>> = Vec::new();
                loop {
                    hoard.push(black_box(vec![1u8; 1 << 20]));
                }
            }
            "recursion" => Mapping::Job(job(black_box(recurse(black_box(1))))),
            "panic" => {
                host::log(LogLevel::Error, "abuse: asked to panic");
                panic!("abuse: asked to panic")
            }
            "panic-when-labelled" if pod.labels.iter().any(|label| label.key == "abuse") => {
                panic!("abuse: asked to panic on a labelled pod")
            }
            "huge-output" => Mapping::Reject(Rejection { field: "x".into(), message: "x".repeat(16 << 20) }),
            "many-logs" => {
                for line in 0..10_000 {
                    host::log(LogLevel::Info, &format!("abuse: line {line}"));
                }
                Mapping::Job(job(1))
            }
            "invalid" => Mapping::Job(job(0)),
            _ => Mapping::Job(job(1)),
        }
    }
}

export!(Policy);

/// Never returns: every frame is kept alive by `black_box`, so it cannot become a loop.
#[allow(unconditional_recursion)] // the point of the fixture
fn recurse(depth: u32) -> u32 {
    let mut frame = [depth; 64];
    black_box(&mut frame);
    recurse(black_box(frame[depth as usize % 64]).wrapping_add(1)).wrapping_add(frame[0])
}

fn job(cpus: u32) -> JobRequest {
    JobRequest {
        partition: None,
        account: None,
        qos: None,
        reservation: None,
        comment: None,
        constraints: None,
        prefer: None,
        exclusive: None,
        excluded_nodes: vec![],
        required_nodes: vec![],
        priority: None,
        user_id: None,
        group_id: None,
        current_working_directory: None,
        time_limit_minutes: None,
        cpus,
        memory_mib: 1,
        tres_per_node: None,
    }
}
