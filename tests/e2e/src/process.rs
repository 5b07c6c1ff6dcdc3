//! What a process of this machine uses, read from /proc: the chart's host runs in a pod, but its
//! process is one of this machine's (the local cluster's kubelets run containers here).

use std::path::PathBuf;

/// The `sunk` process that runs as pod `pod` (its environment names the pod), if one does.
pub fn host_process(pod: &str) -> Option<u32> {
    let wanted = format!("POD_NAME={pod}");
    std::fs::read_dir("/proc").ok()?.flatten().find_map(|entry| {
        let pid: u32 = entry.file_name().to_str()?.parse().ok()?;
        let comm = std::fs::read_to_string(entry.path().join("comm")).ok()?;
        if comm.trim() != "sunk" {
            return None;
        }
        let environ = std::fs::read(entry.path().join("environ")).ok()?;
        environ.split(|byte| *byte == 0).any(|variable| variable == wanted.as_bytes()).then_some(pid)
    })
}

/// One reading of a process.
#[derive(Debug, Clone, Copy, Default)]
pub struct Usage {
    /// Resident memory (`VmRSS`).
    pub rss_mib: f64,
    pub threads: u64,
    pub open_files: u64,
    /// User + system CPU time since it started.
    pub cpu_seconds: f64,
}

impl Usage {
    /// Reads process `pid`; `None` once it is gone.
    pub fn of(pid: u32) -> Option<Self> {
        let dir = PathBuf::from(format!("/proc/{pid}"));
        let status = std::fs::read_to_string(dir.join("status")).ok()?;
        let stat = std::fs::read_to_string(dir.join("stat")).ok()?;
        // The fields after the command's closing parenthesis; utime and stime are the 12th and 13th.
        let fields: Vec<&str> = stat.rsplit_once(')')?.1.split_whitespace().collect();
        let ticks = fields.get(11)?.parse::<f64>().ok()? + fields.get(12)?.parse::<f64>().ok()?;
        Some(Self {
            rss_mib: status_field(&status, "VmRSS:") as f64 / 1024.0,
            threads: status_field(&status, "Threads:"),
            open_files: std::fs::read_dir(dir.join("fd")).map_or(0, |fds| fds.count() as u64),
            // USER_HZ is 100 on every Linux this runs on.
            cpu_seconds: ticks / 100.0,
        })
    }
}

/// A number field of /proc/<pid>/status (`VmRSS:  1234 kB` -> 1234).
fn status_field(status: &str, name: &str) -> u64 {
    status
        .lines()
        .find_map(|line| line.strip_prefix(name))
        .and_then(|rest| rest.split_whitespace().next()?.parse().ok())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_this_process() {
        let usage = Usage::of(std::process::id()).expect("this process is running");
        assert!(usage.rss_mib > 0.0 && usage.threads >= 1 && usage.open_files >= 1, "{usage:?}");
    }
}
