//! The end-to-end suite, one module per area, in one test binary: each of the fifteen linked the whole
//! host on its own, which cost a link (and a few hundred MB of disk) apiece on a cold build.

mod affinity;
mod bursts;
mod chart;
mod chart_accounting;
mod chart_backup;
mod chart_confinement;
mod chart_login;
mod chart_rbac;
mod chart_release;
mod chart_render;
mod chart_scope;
mod chart_slurm;
mod chart_user;
mod device_confinement;
mod fast_path;
mod gang;
mod ha;
mod hostile_slurmrestd;
mod kubelet;
mod nodeset;
mod placement;
mod policy;
mod policy_failures;
mod pool;
mod preemption;
mod scheduler;
mod scheduler_conditions;
mod scheduler_scope;
mod sharing;
mod syncer;
mod tenancy;
mod volumes;
