//! What the host reads of nodes, and how it drains, resumes and deletes them.

use sunk_slurm::{Node, NodeUpdate, NodesPage, SlurmClient, SlurmError};

use crate::replay::Replay;
use crate::{Release, ends, outcome};

pub async fn listings(replay: &Replay, slurm: &SlurmClient, release: &Release) {
    let (partitions, _) = replay.serve(&["partitions"], slurm.partitions()).await;
    assert_eq!(partitions.unwrap(), ["batch", "urgent"]);

    let (idle, _) = listed(replay, slurm, "nodes-idle").await;
    assert_eq!(idle.iter().map(|node| node.name.as_str()).collect::<Vec<_>>(), ["r1", "r2", "dyn1"]);
    for node in &idle[..2] {
        assert_eq!(node.flags().base(), "IDLE");
        assert!(node.flags().is_responsive() && !node.flags().is_busy() && !node.flags().is_dynamic());
        assert_eq!((node.cpus, node.real_memory, node.alloc_cpus), (2, 2000, 0));
        assert_eq!(node.partitions, ["batch", "urgent"]);
        assert_eq!(node.address, "127.0.0.1");
        assert!(node.features.is_empty() && node.gres.is_empty());
    }
    assert!(idle[2].flags().is_dynamic(), "{:?}", idle[2].state);
    assert!(idle[2].partitions.is_empty());

    // r1 and r2 with one 1-CPU job across both, then with a CPU more taken on each.
    for (fixture, base, cpus, memory) in [("nodes-mixed", "MIXED", 1, 100), ("nodes-allocated", "ALLOCATED", 2, 200)] {
        for node in &listed(replay, slurm, fixture).await.0[..2] {
            assert_eq!(node.flags().base(), base, "{fixture}");
            assert!(node.flags().is_busy(), "{fixture}");
            assert_eq!((node.alloc_cpus, node.alloc_memory), (cpus, memory), "{fixture} {}", node.name);
        }
    }

    // The host passes the last_update of its previous listing: 304 when nothing changed since.
    let (_, since) = listed(replay, slurm, "nodes").await;
    assert_eq!(replay.fixture("nodes-unchanged").status, 304);
    let (page, _) = replay.serve(&["nodes-unchanged"], slurm.nodes(Some(since))).await;
    assert_eq!(page.unwrap(), NodesPage::Unchanged);

    // After a drain (a node changed, no partition did).
    let (page, _) = replay.serve(&["nodes-changed"], slurm.nodes(Some(since))).await;
    if release.changed_nodes_fail {
        assert!(page.as_ref().is_err_and(SlurmError::is_partitions_unchanged), "{page:?}");
    } else {
        let Ok(NodesPage::All { nodes, .. }) = page else { panic!("{page:?}") };
        assert!(nodes.iter().any(|node| node.name == "r1" && node.flags().is_draining()));
    }

    let (nodes, _) = listed(replay, slurm, "nodes-drained-down").await;
    let r1 = &nodes[0];
    assert!(r1.flags().is_draining() && !r1.flags().is_drained(), "draining under its jobs: {:?}", r1.state);
    assert_eq!((r1.reason.as_str(), r1.reason_set_by_user.as_str()), ("k8s: cordoned by contract test", "root"));
    let dyn1 = &nodes[2];
    assert_eq!(dyn1.flags().base(), "DOWN");
    assert!(dyn1.flags().is_drained() && !dyn1.flags().is_responsive() && dyn1.flags().is_dynamic());
    assert_eq!(dyn1.reason, "k8s: node gone");
}

/// A full listing: its nodes, and the last_update to pass next time.
async fn listed(replay: &Replay, slurm: &SlurmClient, fixture: &str) -> (Vec<Node>, u64) {
    match replay.serve(&[fixture], slurm.nodes(None)).await.0 {
        Ok(NodesPage::All { nodes, last_update: Some(last_update) }) if last_update > 0 => (nodes, last_update),
        other => panic!("{fixture}: {other:?}"),
    }
}

pub async fn updates(replay: &Replay, slurm: &SlurmClient, release: &Release) {
    let refused = format!("node update: HTTP {}, errors [{}]", release.refusal_status, release.resume_not_drained);
    let resume = NodeUpdate { state: vec!["RESUME".into()], ..Default::default() };
    let down = NodeUpdate { state: vec!["DOWN".into()], reason: Some("k8s: node gone".into()), comment: None };
    let cases = [
        ("node-drain", "r1", NodeUpdate::drain("k8s: cordoned by contract test"), "ok"),
        ("node-resume-not-drained", "r2", resume, refused.as_str()),
        ("node-dyn1-drain", "dyn1", NodeUpdate::drain("k8s: node going away"), "ok"),
        ("node-dyn1-down", "dyn1", down, "ok"),
        ("node-undrain", "r1", NodeUpdate::undrain(), "ok"),
        ("node-undrain-again", "r1", NodeUpdate::undrain(), "ok"),
    ];
    for (fixture, node, update, expected) in cases {
        let (answer, sent) = replay.serve(&[fixture], slurm.update_node(node, &update)).await;
        replay.fixture(fixture).assert_sent(&sent[0]);
        assert_eq!(outcome(&answer), expected, "{fixture}");
    }
    // Deleting a node that is not there (Slurm: error 2018) is not a failure.
    for (fixture, node) in [("node-delete", "dyn1"), ("node-delete-unknown", "nosuchnode")] {
        assert_eq!(ends(replay, &[fixture], slurm.delete_node(node)).await, "ok", "{fixture}");
    }
}
