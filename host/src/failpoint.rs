//! Crash points for restart tests: `SUNK_FAILPOINTS=after-submit` makes the host abort right
//! after the named step (`after-submit`: Slurm has a job for the pod, queued or allocated at once,
//! and the pod is not bound; `after-allocate`: a tenant's allocation is made and its admin link not
//! written), as a SIGKILL would, so tests can prove a restart recovers from it.

/// Aborts the process when `name` is listed in `SUNK_FAILPOINTS` (comma separated).
pub fn hit(name: &str) {
    if std::env::var("SUNK_FAILPOINTS").is_ok_and(|list| list.split(',').any(|point| point.trim() == name)) {
        eprintln!("failpoint {name}: aborting");
        std::process::abort();
    }
}
