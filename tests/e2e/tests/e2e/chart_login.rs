//! The whole cluster a user gets, installed by the real `helm`: a user SSHes into the login pod (this
//! machine's `ssh`, through the login Service), submits a batch job that runs on a NodeSet node as
//! that user and writes its output into the user's shared home; a job run while slurmdbd is away is
//! accounted once it is back; `squeue` and `sacct` on the login pod
//! list the user's jobs beside a pod's placeholder; `helm test` logs in as the user; an upgrade that
//! replaces the login pod keeps its host key. With the users in the chart's companion LDAP directory
//! instead of files, the same user logs in and their job runs as them. Slurm node names resolve on
//! the login pod and in jobs, and an MPI program the user builds there runs a rank on each node. A
//! step runs in an OCI container from a bundle the user makes on the shared home.

use std::collections::BTreeMap;

use serde_json::json;
use sunk_e2e::{pod, wait_for};

use super::chart_release::*;
use super::chart_user::*;

/// The values of a cluster whose one user, with `public_key`, is in the companion LDAP directory
/// only (no file of any pod lists them), with a shared home and a login node.
fn directory_values(public_key: &str) -> Vec<String> {
    let identity = json!({
        "users": [{"name": USER, "uid": 1000, "gid": 1000, "sshAuthorizedKeys": [public_key]}],
        "groups": [{"name": "ml", "gid": 1000, "members": [USER]}],
        "ldap": {"enabled": true},
    });
    with_home_and_login(identity)
}

/// The values of a cluster whose one user, with `public_key`, is in files, with a shared home and a
/// login node (no accounting, no directory).
fn login_values(public_key: &str) -> Vec<String> {
    let identity = json!({
        "users": [{"name": USER, "uid": 1000, "gid": 1000, "sshAuthorizedKeys": [public_key]}],
        "groups": [{"name": USER, "gid": 1000}],
    });
    with_home_and_login(identity)
}

/// `--set-json` values of a cluster of `identity` with a shared home and a login node.
fn with_home_and_login(identity: serde_json::Value) -> Vec<String> {
    let mut values = Vec::new();
    for (key, value) in [
        ("slurmCluster.identity", identity),
        ("slurmCluster.home", json!({"enabled": true, "size": "1Gi"})),
        ("slurmCluster.login", json!({"enabled": true})),
    ] {
        values.extend(["--set-json".to_string(), format!("{key}={value}")]);
    }
    values
}

/// An MPI program: each rank prints its host, its rank, the size and a sum the ranks reduce over
/// the network (3 with two ranks).
const MPI_HELLO: &str = r#"#include <mpi.h>
#include <stdio.h>

int main(int argc, char **argv) {
    int rank, size, len, sum = 0;
    char host[MPI_MAX_PROCESSOR_NAME];
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Get_processor_name(host, &len);
    int mine = rank + 1;
    MPI_Allreduce(&mine, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    printf("%s rank %d of %d sum %d\n", host, rank, size, sum);
    MPI_Finalize();
    return 0;
}
"#;

/// The job's accounting line `user|account|state` on the login pod, once it has one.
async fn wait_accounted(ssh: &SshClient, job: &str, state: &str) -> anyhow::Result<String> {
    wait_for(&format!("sacct on the login pod to list job {job} {state}"), READY, || async {
        let line = ssh.run(&format!("sacct -n -X -P -o User,Account,State -j {job}")).ok()?;
        let line = line.trim().to_string();
        line.ends_with(state).then_some(line)
    })
    .await
}

#[tokio::test]
async fn a_user_logs_in_submits_a_job_that_runs_as_them_and_sees_it_beside_the_pods() -> anyhow::Result<()> {
    let LoggedIn { ssh, release, .. } = &logged_in_to_whole_cluster("chart-login").await?;
    // `helm test` checks the host key and logs in as the user to run a job (its pod is gone once it
    // succeeds, and its logs with it: the job is what it leaves).
    release.cluster.helm(&["test", &release.name, "--timeout", "120s"])?;
    let tested = ssh.run("sacct -n -X -P --name helm-test -o User,Account,State")?;
    assert_eq!(tested.trim(), format!("{USER}|ml|COMPLETED"), "helm test's job");

    // The user's batch job runs on a NodeSet node as the user, from and into the shared home.
    let job = ssh.run("sbatch --parsable --mem=100 --wrap 'id -un; hostname; pwd'")?.trim().to_string();
    let accounted = wait_accounted(ssh, &job, "COMPLETED").await?;
    assert_eq!(accounted, format!("{USER}|ml|COMPLETED"), "sacct on the login pod");
    let output = ssh.run(&format!("cat slurm-{job}.out"))?;
    let lines: Vec<&str> = output.lines().collect();
    assert_eq!(lines.first(), Some(&USER), "the job ran as its user: {output}");
    assert!(
        lines.get(1).is_some_and(|host| NODES.iter().any(|node| host.contains(node))),
        "on a NodeSet node: {output}"
    );
    assert_eq!(lines.get(2), Some(&format!("/home/{USER}").as_str()), "in the user's home: {output}");

    // slurmdbd away while jobs run: a job that runs meanwhile is accounted once slurmdbd is back.
    let sleeping = ssh.run("sbatch --parsable --mem=100 --wrap 'sleep 600'")?.trim().to_string();
    release.scale("slurmdbd", 0)?;
    wait_for("slurmdbd's pod to be gone", READY, || async {
        release.pods_of("slurmdbd").await.ok()?.is_empty().then_some(())
    })
    .await?;
    let unrecorded = ssh.run("sbatch --parsable --mem=100 --wrap true")?.trim().to_string();
    wait_for(&format!("job {unrecorded} to complete without slurmdbd"), READY, || async {
        let state = ssh.run(&format!("squeue -h -t all -j {unrecorded} -o %T")).ok()?;
        (state.trim() == "COMPLETED").then_some(())
    })
    .await?;
    release.scale("slurmdbd", 1)?;
    let caught_up = wait_accounted(ssh, &unrecorded, "COMPLETED").await?;
    assert_eq!(caught_up, format!("{USER}|ml|COMPLETED"), "the job run without slurmdbd, accounted");
    assert_eq!(wait_accounted(ssh, &sleeping, "RUNNING").await?, format!("{USER}|ml|RUNNING"));

    // One pool: the user's running job and a pod's placeholder, side by side in squeue.
    let mut serving = pod("serving", "500m", "128Mi");
    serving["spec"]["schedulerName"] = release.scheduler_name().into();
    release.cluster.create_pod(serving).await?;
    let queue =
        wait_for("squeue on the login pod to list the job and the pod's placeholder running", READY, || async {
            let queue = ssh.run("squeue -h -t RUNNING -o '%i|%u|%a|%j'").ok()?;
            let has_job = queue.lines().any(|line| line.starts_with(&format!("{sleeping}|{USER}|ml|")));
            let has_pod = queue.lines().any(|line| line.contains(&format!("|{USER}|ml|")) && line.contains("serving"));
            (has_job && has_pod).then_some(queue)
        })
        .await?;
    println!("squeue on the login pod:\n{queue}");

    // An upgrade that replaces the login pod: the same host key (ssh checks it strictly), the same home.
    let before = release.pods_of("login").await?;
    let mut upgraded = whole_cluster_values(release, &ssh.public_key()?);
    upgraded.extend(["--set".to_string(), "slurmCluster.login.sshdConfig=ClientAliveInterval 60".to_string()]);
    let mut args = super::chart_release::values(release.namespace(), 30, "1");
    args.extend(upgraded);
    helm_deploy(release, "upgrade", &args)?;
    wait_for("the login pod to be replaced and Ready", READY, || async {
        let pods = release.pods_of("login").await.ok()?;
        let replaced = pods.iter().all(|pod| before.iter().all(|old| old.metadata.uid != pod.metadata.uid));
        (replaced && pods.len() == 1 && pods.iter().all(is_ready)).then_some(())
    })
    .await?;
    ssh.wait_login().await?;
    assert!(ssh.run(&format!("test -s slurm-{job}.out && echo kept"))?.contains("kept"), "the home is kept");
    // Leaves the nodes idle, so the uninstall need not wait for them.
    ssh.run(&format!("scancel {sleeping}"))?;
    release.cluster.delete_pod("serving").await?;
    wait_for("the pod's placeholder to end", READY, || async {
        let queue = ssh.run("squeue -h -o %i").ok()?;
        queue.trim().is_empty().then_some(())
    })
    .await?;
    Ok(())
}

#[tokio::test]
async fn a_user_of_the_companion_directory_logs_in_and_their_job_runs_as_them() -> anyhow::Result<()> {
    let _home: StaticVolume;
    let release = Release::new("chart-ldap").await?;
    _home = StaticVolume::bound_to(release.namespace(), HOME_CLAIM, "ReadWriteMany")?;
    let mut ssh = SshClient::new(&release)?;
    release.install_with(&directory_values(&ssh.public_key()?), &[("login", 1), ("ldap", 1)]).await?;
    ssh.trust_login_of(&release)?;
    // sshd finds the user only through the pod's nslcd and the directory.
    ssh.wait_login().await?;
    let resolved = ssh.run(&format!("grep -c '^{USER}:' /etc/passwd || true; getent passwd {USER}; id -Gn"))?;
    let lines: Vec<&str> = resolved.lines().collect();
    assert_eq!(lines.first(), Some(&"0"), "no file lists the user: {resolved}");
    assert_eq!(lines.get(1), Some(&format!("{USER}:*:1000:1000:{USER}:/home/{USER}:/bin/bash").as_str()), "{resolved}");
    assert_eq!(lines.get(2), Some(&"ml"), "the directory's group: {resolved}");

    // slurmd resolves the job's user the same way: the job runs as them, in their home.
    let job = ssh.run("sbatch --parsable --mem=100 --wrap 'id -un; id -gn; pwd'")?.trim().to_string();
    let output = wait_for(&format!("job {job}'s output in the user's home"), READY, || async {
        let output = ssh.run(&format!("cat slurm-{job}.out 2>/dev/null")).ok()?;
        (output.lines().count() >= 3).then_some(output)
    })
    .await?;
    assert_eq!(output, format!("{USER}\nml\n/home/{USER}\n"), "the job's identity, from the directory");
    let user = ssh.run(&format!("squeue -h -t all -j {job} -o %u"))?;
    assert_eq!(user.trim(), USER, "slurmctld names the job's user from the directory too");
    Ok(())
}

#[tokio::test]
async fn slurm_node_names_resolve_on_the_login_pod_and_in_jobs_and_an_mpi_job_spans_both_nodes() -> anyhow::Result<()> {
    let LoggedIn { ssh, release, .. } = &logged_in("chart-dns", |_, key| login_values(key), &[("login", 1)]).await?;
    // What each Slurm node's name must resolve to: its slurmd pod's address.
    let mut addresses = BTreeMap::new();
    for node in *NODES {
        let pod = slurmd_on(release, node).await?.ok_or_else(|| anyhow::anyhow!("no slurmd pod on {node}"))?;
        addresses.insert(node, pod.status.and_then(|status| status.pod_ip).unwrap_or_default());
    }
    let mut nodes = NODES.to_vec();
    nodes.sort_unstable();

    // A step on both nodes: each slurmd pod's host name is its Slurm node's.
    let hosts = ssh.run("srun -N2 --ntasks-per-node=1 --mem=100 hostname")?;
    let mut hosts: Vec<&str> = hosts.lines().map(str::trim).collect();
    hosts.sort_unstable();
    assert_eq!(hosts, nodes, "srun -N2 hostname on the login pod");

    // Each node's bare name resolves to its pod on the login pod, and in a job on the other node
    // (through the search path; the headless Service's records may take a moment to appear).
    let lookups = [(None, NODES[0]), (None, NODES[1]), (Some(NODES[0]), NODES[1]), (Some(NODES[1]), NODES[0])];
    for (from, to) in lookups {
        let lookup = match from {
            None => format!("getent hosts {to}"),
            Some(node) => format!("srun -N1 -w {node} --mem=100 getent hosts {to}"),
        };
        let resolved = wait_for(&format!("`{lookup}` to answer"), READY, || async {
            let answer = ssh.run(&lookup).ok()?;
            answer.split_whitespace().next().map(str::to_string)
        })
        .await?;
        assert_eq!(resolved, addresses[to], "`{lookup}`: {to}'s slurmd pod is at {}", addresses[to]);
    }

    // An MPI program built with mpicc on the login pod, in the shared home, runs a rank on each node
    // (PMI-2 through slurmstepd); the ranks reduce a sum across the two pods.
    ssh.run(&format!("cat > mpi-hello.c <<'EOF'\n{MPI_HELLO}EOF\nmpicc -o mpi-hello mpi-hello.c"))?;
    let output = ssh.run("srun --mpi=pmi2 -N2 --ntasks-per-node=1 --mem=100 ./mpi-hello")?;
    let mut ranks: Vec<(String, String)> = output
        .lines()
        .filter_map(|line| line.trim().split_once(' '))
        .map(|(host, rest)| (host.to_string(), rest.to_string()))
        .collect();
    ranks.sort_unstable();
    let ran_on: Vec<&str> = ranks.iter().map(|(host, _)| host.as_str()).collect();
    assert_eq!(ran_on, nodes, "a rank on each node: {output}");
    let mut said: Vec<&str> = ranks.iter().map(|(_, rest)| rest.as_str()).collect();
    said.sort_unstable();
    assert_eq!(said, ["rank 0 of 2 sum 3", "rank 1 of 2 sum 3"], "{output}");
    Ok(())
}

/// A container job through Slurm's own OCI support (the chart's oci.conf, runc in the slurmd image):
/// the user makes a bundle on the shared home from the login pod (a busybox root file system and
/// `runc spec --rootless`), and a step run with `srun --container` sees that root file system, not
/// its node's, as the user's own processes.
#[tokio::test]
async fn a_users_step_runs_in_an_oci_container_from_a_bundle_on_the_shared_home() -> anyhow::Result<()> {
    let LoggedIn { ssh, .. } = &logged_in("chart-oci", |_, key| login_values(key), &[("login", 1)]).await?;

    ssh.run(
        "rm -rf bundle && mkdir -p bundle/rootfs/usr/bin && cp /bin/busybox bundle/rootfs/usr/bin/ \
         && for tool in sh cat dd; do ln -s busybox bundle/rootfs/usr/bin/$tool; done && ln -s usr/bin bundle/rootfs/bin \
         && echo inside-the-bundle >bundle/rootfs/marker && cd bundle && runc spec --rootless",
    )?;
    let started = std::time::Instant::now();
    let seen = ssh.run("srun --container=$HOME/bundle --mem=100 cat /marker")?;
    println!("container: a step ran in {:.1} s", started.elapsed().as_secs_f64());
    assert_eq!(seen.trim(), "inside-the-bundle", "the step's root file system is the bundle's");
    // srun names the program by its path on the login pod (/usr/bin/cat), which the bundle has too.
    // The node's own root has no /marker: a step without --container fails to read it.
    assert!(ssh.run("srun --mem=100 cat /marker").is_err(), "a step without --container saw /marker");
    // Outside the user namespace the container's processes are the user's own.
    let owner = ssh.run("srun --container=$HOME/bundle --mem=100 sh -c 'cat /proc/self/uid_map'")?;
    let outside: Vec<&str> = owner.split_whitespace().collect();
    assert_eq!(outside.get(1).copied(), Some("1000"), "the container's uid map: {owner}");
    // The container's processes are the step's: held to its --mem by the job's cgroup.
    // dd fills a 200 MB buffer at once.
    let hog = "srun --container=$HOME/bundle --mem=64 dd if=/dev/zero of=/dev/null bs=200M count=1";
    let started = std::time::Instant::now();
    let refused = ssh.run(hog).expect_err("a container step grew past its --mem");
    println!("container: a step past its --mem ended after {:.1} s", started.elapsed().as_secs_f64());
    assert!(refused.to_string().to_lowercase().contains("oom"), "the step past its --mem: {refused}");
    Ok(())
}
