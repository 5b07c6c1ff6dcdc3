use super::*;

fn node(cpu: &str, memory: &str, gpus: u32) -> Node {
    serde_json::from_value(serde_json::json!({
        "metadata": {"name": "kube-1"},
        "status": {"allocatable": {"cpu": cpu, "memory": memory, "nvidia.com/gpu": gpus.to_string()}}
    }))
    .unwrap()
}

/// A Slurm node of `cpus`, `mib` and `gpus`, its jobs holding `held` (CPUs, MiB, GPUs).
fn slurm_node(cpus: u64, mib: u64, gpus: u64, held: (u64, u64, u64)) -> slurm::Node {
    serde_json::from_value(serde_json::json!({
        "name": "slurm-1", "cpus": cpus, "real_memory": mib, "gres": format!("gpu:{gpus}"),
        "alloc_cpus": held.0, "alloc_memory": held.1, "gres_used": format!("gpu:{}(IDX:0)", held.2)
    }))
    .unwrap()
}

/// A pod on `node` asking for `cpu`, `memory` and `gpus`; `scheduler` names who binds it.
fn pod(name: &str, node: &str, scheduler: &str, cpu: &str, memory: &str, gpus: u32) -> WatchedPod {
    serde_json::from_value(serde_json::json!({
        "metadata": {"name": name, "namespace": "ns", "uid": name},
        "spec": {"nodeName": node, "schedulerName": scheduler, "containers": [{"name": "c", "resources": {
            "requests": {"cpu": cpu, "memory": memory}, "limits": {"nvidia.com/gpu": gpus}}}]},
        "status": {"phase": "Running"}
    }))
    .unwrap()
}

fn finished(mut pod: WatchedPod) -> WatchedPod {
    pod.status.as_mut().unwrap().phase = Some("Succeeded".into());
    pod
}

fn is_sunk(pod: &WatchedPod) -> bool {
    pod.spec.as_ref().and_then(|spec| spec.scheduler_name.as_deref()) == Some("sunk")
}

#[test]
fn slurms_offer_and_the_pods_outside_it_must_fit_the_node() {
    let gib = 1024;
    let host = pod("host", "kube-1", "default-scheduler", "50m", "64Mi", 0);
    let bypass = pod("bypass", "kube-1", "default-scheduler", "0", "0", 2);
    let sunk = pod("sunk-pod", "kube-1", "sunk", "1", "1Gi", 1);
    let elsewhere = pod("elsewhere", "kube-2", "default-scheduler", "2", "1Gi", 2);
    let done = finished(pod("done", "kube-1", "default-scheduler", "2", "1Gi", 2));
    let idle = (0, 0, 0);
    // (what, Slurm's node, pods, finding)
    let cases: Vec<(&str, slurm::Node, Vec<&WatchedPod>, Finding)> = vec![
        ("nothing outside Slurm", slurm_node(2, 8 * gib, 2, idle), vec![&sunk, &elsewhere, &done], Finding::HeldOnce),
        (
            "a 50m pod beside a node Slurm offers whole",
            slurm_node(2, 8 * gib, 2, idle),
            vec![&host],
            Finding::Overcommitted { over: vec![(Resource::Cpu, 50), (Resource::Memory, 64 * MIB)], colliding: false },
        ),
        ("Slurm told only what is left", slurm_node(1, 7 * gib, 2, idle), vec![&host], Finding::HeldOnce),
        (
            "a pod that bypassed sunk holding both GPUs",
            slurm_node(2, 8 * gib, 2, idle),
            vec![&bypass, &sunk],
            Finding::Overcommitted { over: vec![(Resource::Gpu, 2)], colliding: false },
        ),
        (
            "... while a Slurm job holds one",
            slurm_node(2, 8 * gib, 2, (1, gib, 1)),
            vec![&bypass],
            Finding::Overcommitted { over: vec![(Resource::Gpu, 2)], colliding: true },
        ),
    ];
    for (what, slurm_node, pods, expected) in cases {
        let ledger = NodeLedger::of(&node("2", "8Gi", 2), &slurm_node, &pods, is_sunk).expect("a ledger");
        assert_eq!(ledger.finding(), expected, "{what}");
    }
}

#[test]
fn the_finding_names_the_pods_outside_slurm_largest_first() {
    let pods = [
        pod("small", "kube-1", "default-scheduler", "100m", "0", 0),
        pod("bypass", "kube-1", "default-scheduler", "0", "0", 2),
    ];
    let pods: Vec<&WatchedPod> = pods.iter().collect();
    let ledger = NodeLedger::of(&node("2", "8Gi", 2), &slurm_node(2, 8192, 2, (0, 0, 0)), &pods, is_sunk).unwrap();
    let names: Vec<&str> = ledger.outside.iter().map(|pod| pod.pod.as_str()).collect();
    assert_eq!(names, ["ns/bypass", "ns/small"]);
    let said = ledger.describe(&ledger.finding());
    assert!(said.contains("ns/bypass (2 GPUs), ns/small (100m CPU)"), "{said}");
    assert!(said.contains("Slurm may give away 100m CPU, 2 GPUs they use"), "{said}");
    assert!(said.contains("offers 2 CPUs, 8192 MiB, 2 GPUs of the Node's 2 CPUs, 8192 MiB, 2 GPUs"), "{said}");
}

#[test]
fn a_node_that_does_not_say_what_it_offers_has_no_ledger() {
    let node: Node = serde_json::from_value(serde_json::json!({"metadata": {"name": "kube-1"}})).unwrap();
    assert_eq!(NodeLedger::of(&node, &slurm_node(2, 1, 0, (0, 0, 0)), &[], is_sunk), None);
}

#[test]
fn a_request_of_zero_is_a_request_and_a_lone_limit_is_one_too() {
    let with = |resources: serde_json::Value| -> WatchedPod {
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": "slurmd", "namespace": "ns", "uid": "u"},
            "spec": {"nodeName": "kube-1", "containers": [{"name": "c", "resources": resources}]},
            "status": {"phase": "Running"}
        }))
        .unwrap()
    };
    let zero =
        with(serde_json::json!({"requests": {"cpu": "0", "memory": "0"}, "limits": {"cpu": "1", "memory": "1Gi"}}));
    assert_eq!(kubelet_counts(&zero), (0, 0, 0), "the NodeSet's slurmd container asks for nothing");
    let limited = with(serde_json::json!({"limits": {"cpu": "1", "memory": "1Gi"}}));
    assert_eq!(kubelet_counts(&limited), (1000, 1024 * MIB, 0));
}
