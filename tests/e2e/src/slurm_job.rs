//! Slurm jobs submitted by hand with `sbatch`, as an HPC user on a login node would.

use crate::in_slurm_root;

/// A job submitted with sbatch, cancelled when dropped.
pub struct SlurmJob(pub String);

impl SlurmJob {
    /// `sbatch --parsable <args>`.
    pub fn submit(args: &[&str]) -> anyhow::Result<Self> {
        let mut all = vec!["sbatch", "--parsable"];
        all.extend_from_slice(args);
        Ok(Self(in_slurm_root(&all)?.trim().to_string()))
    }

    pub fn id(&self) -> u32 {
        self.0.parse().unwrap_or_default()
    }
}

impl Drop for SlurmJob {
    fn drop(&mut self) {
        let _ = in_slurm_root(&["scancel", &self.0]);
    }
}
