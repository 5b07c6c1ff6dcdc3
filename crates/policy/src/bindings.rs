//! Rust types and glue generated from `wit/policy.wit`.
//!
//! The interfaces are generated once, from the `host-side` world that imports them all; each policy
//! world reuses them (`with`), so a record has one Rust type whichever world it travels through and the
//! host interface is linked once for every world.

pub(crate) mod interfaces {
    wasmtime::component::bindgen!({
        world: "host-side",
        path: "../../wit",
        additional_derives: [PartialEq, Eq, serde::Serialize, serde::Deserialize],
    });
}

pub(crate) mod job_mapper {
    wasmtime::component::bindgen!({
        world: "job-mapper",
        path: "../../wit",
        with: {
            "sunk:policy/host": super::interfaces::sunk::policy::host,
            "sunk:policy/common": super::interfaces::sunk::policy::common,
            "sunk:policy/job-types": super::interfaces::sunk::policy::job_types,
        },
    });
}

pub(crate) mod preemption {
    wasmtime::component::bindgen!({
        world: "preemption",
        path: "../../wit",
        with: {
            "sunk:policy/host": super::interfaces::sunk::policy::host,
            "sunk:policy/preemption-types": super::interfaces::sunk::policy::preemption_types,
        },
    });
}

pub(crate) mod drain {
    wasmtime::component::bindgen!({
        world: "drain",
        path: "../../wit",
        with: {
            "sunk:policy/host": super::interfaces::sunk::policy::host,
            "sunk:policy/common": super::interfaces::sunk::policy::common,
            "sunk:policy/drain-types": super::interfaces::sunk::policy::drain_types,
        },
    });
}

pub(crate) use interfaces::HostSide;
pub(crate) use interfaces::sunk::policy::{common, drain_types, host, job_types, preemption_types};
