//! A user of the chart's whole cluster: their SSH key, a session on the login pod through the login
//! Service (trusting only the release's host key), and the values of a cluster that knows them.

use std::path::PathBuf;
use std::process::Command;

use serde_json::json;
use sunk_e2e::{kubectl, wait_for};

use super::chart_release::*;

/// The user the tests log in as.
pub(crate) const USER: &str = "alice";
/// The claim the chart makes for the shared home (release `sunk`).
pub(crate) const HOME_CLAIM: &str = "sunk-home";

/// A user's SSH key pair and the login Service's host key, in a directory of their own.
pub(crate) struct SshClient {
    dir: PathBuf,
    address: String,
}

impl SshClient {
    /// A new key pair (`id_ed25519`).
    pub(crate) fn new(release: &Release) -> anyhow::Result<Self> {
        let dir = std::env::temp_dir().join(format!("{}-ssh", release.namespace()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir)?;
        let key = dir.join("id_ed25519");
        run(Command::new("ssh-keygen").args(["-q", "-t", "ed25519", "-N", "", "-C", USER, "-f"]).arg(&key))?;
        Ok(Self { dir, address: String::new() })
    }

    pub(crate) fn public_key(&self) -> anyhow::Result<String> {
        Ok(std::fs::read_to_string(self.dir.join("id_ed25519.pub"))?.trim().to_string())
    }

    /// Connects to the release's login Service, trusting only the host key in the release's Secret: a
    /// login pod showing any other fails `ssh`.
    pub(crate) fn trust_login_of(&mut self, release: &Release) -> anyhow::Result<()> {
        let service = format!("{}-login", release.name);
        let address = run(&mut kubectl(&[
            "-n",
            release.namespace(),
            "get",
            "service",
            &service,
            "-o",
            "jsonpath={.spec.clusterIP}",
        ]))?;
        self.address = address.trim().to_string();
        let secret = format!("{}-login-host-key", release.name);
        let template = r#"go-template={{index .data "ssh_host_ecdsa_key" | base64decode}}"#;
        let key = run(&mut kubectl(&["-n", release.namespace(), "get", "secret", &secret, "-o", template]))?;
        let private = self.dir.join("host_key");
        std::fs::write(&private, key)?;
        std::fs::set_permissions(&private, std::os::unix::fs::PermissionsExt::from_mode(0o600))?;
        let public = run(Command::new("ssh-keygen").arg("-y").arg("-f").arg(&private))?;
        std::fs::write(self.dir.join("known_hosts"), format!("{} {}", self.address, public.trim()))?;
        Ok(())
    }

    /// `command` run by the user on the login pod; its standard output.
    pub(crate) fn run(&self, command: &str) -> anyhow::Result<String> {
        run(Command::new("ssh")
            .args(["-o", "BatchMode=yes", "-o", "ConnectTimeout=10", "-o", "StrictHostKeyChecking=yes"])
            .arg("-o")
            .arg(format!("UserKnownHostsFile={}", self.dir.join("known_hosts").display()))
            .arg("-i")
            .arg(self.dir.join("id_ed25519"))
            .arg(format!("{USER}@{}", self.address))
            .arg(command))
    }

    /// Waits until the user can log in (the Service has a Ready login pod).
    pub(crate) async fn wait_login(&self) -> anyhow::Result<()> {
        let mut last = String::new();
        wait_for("the user to log in", READY, || {
            let outcome = self.run("id -un");
            if let Err(error) = &outcome {
                last = error.to_string();
            }
            async move { outcome.ok().filter(|name| name.trim() == USER) }
        })
        .await
        .map_err(|error| error.context(last))?;
        Ok(())
    }
}

impl Drop for SshClient {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

pub(crate) fn run(command: &mut Command) -> anyhow::Result<String> {
    let output = command.output()?;
    anyhow::ensure!(
        output.status.success(),
        "{command:?}: {}{}",
        String::from_utf8_lossy(&output.stderr),
        String::from_utf8_lossy(&output.stdout)
    );
    Ok(String::from_utf8_lossy(&output.stdout).into_owned())
}

/// The values of a whole cluster: one user with `public_key`, a shared home, a login node, and
/// accounting that knows the user under account `ml`, which the test's namespace is granted too.
pub(crate) fn whole_cluster_values(release: &Release, public_key: &str) -> Vec<String> {
    let identity = json!({
        "users": [{"name": USER, "uid": 1000, "gid": 1000, "sshAuthorizedKeys": [public_key]}],
        "groups": [{"name": USER, "gid": 1000}],
    });
    let accounting = json!({
        "enabled": true,
        "enforce": ["associations"],
        "accounts": [{"name": "ml", "description": "machine learning"}],
        "users": [{"name": USER, "accounts": ["ml"], "defaultAccount": "ml"}],
        "database": {"persistence": {"enabled": false}},
    });
    let grants = json!([{"namespaces": [release.namespace()], "user": 1000, "group": 1000, "accounts": ["ml"]}]);
    let mut values = Vec::new();
    for (key, value) in [
        ("slurmCluster.identity", identity),
        ("slurmCluster.accounting", accounting),
        ("tenancy.grants", grants),
        ("slurmCluster.home", json!({"enabled": true, "size": "1Gi"})),
        ("slurmCluster.login", json!({"enabled": true, "test": {"user": USER}})),
    ] {
        values.extend(["--set-json".to_string(), format!("{key}={value}")]);
    }
    values
}

/// A release installed with the user logged in on its login pod. Fields drop in order: the session,
/// the release (uninstalled), then the home's volume.
pub(crate) struct LoggedIn {
    pub(crate) ssh: SshClient,
    pub(crate) release: Release,
    _home: StaticVolume,
}

/// Installs the whole cluster ([`whole_cluster_values`]) for test `test` and logs the user in.
pub(crate) async fn logged_in_to_whole_cluster(test: &str) -> anyhow::Result<LoggedIn> {
    logged_in(test, whole_cluster_values, &[("login", 1), ("slurmdbd", 1), ("mariadb", 1)]).await
}

/// Installs the chart for test `test` with a shared home and the values `values` gives for the release
/// and the user's public key, waits for `components`' pods, and logs the user in.
pub(crate) async fn logged_in(
    test: &str,
    values: impl FnOnce(&Release, &str) -> Vec<String>,
    components: &[(&str, usize)],
) -> anyhow::Result<LoggedIn> {
    // Declared first, dropped last: after the release is uninstalled.
    let home: StaticVolume;
    let release = Release::new(test).await?;
    home = StaticVolume::bound_to(release.namespace(), HOME_CLAIM, "ReadWriteMany")?;
    let mut ssh = SshClient::new(&release)?;
    let values = values(&release, &ssh.public_key()?);
    release.install_with(&values, components).await?;
    ssh.trust_login_of(&release)?;
    ssh.wait_login().await?;
    Ok(LoggedIn { ssh, release, _home: home })
}
