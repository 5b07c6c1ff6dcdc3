//! The `PolicyModule` custom resource: a policy module delivered through the cluster.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// A WebAssembly policy module for one decision point. Its bytes live in a ConfigMap (`binaryData`)
/// or Secret of the same namespace and go live only if their sha256 matches `spec.sha256`.
#[derive(CustomResource, Deserialize, Serialize, Clone, Debug, JsonSchema)]
#[kube(
    group = "sunk.dev",
    version = "v1alpha1",
    kind = "PolicyModule",
    namespaced,
    status = "PolicyModuleStatus",
    shortname = "pm",
    printcolumn = r#"{"name":"Decision","type":"string","jsonPath":".spec.decision"}"#,
    printcolumn = r#"{"name":"Phase","type":"string","jsonPath":".status.phase"}"#,
    printcolumn = r#"{"name":"Live","type":"string","jsonPath":".status.liveDigest"}"#,
    printcolumn = r#"{"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp"}"#
)]
#[serde(rename_all = "camelCase")]
pub struct PolicyModuleSpec {
    /// The decision point the module serves.
    pub decision: Decision,
    /// sha256 of the module's bytes (64 hex digits). Bytes that do not match are refused.
    pub sha256: String,
    /// Where the module's bytes are.
    pub source: ModuleSource,
    /// Text the module's `config()` import returns (often YAML or JSON).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config: Option<String>,
}

/// A decision point (one WIT world).
#[derive(Deserialize, Serialize, Clone, Copy, Debug, PartialEq, Eq, Hash, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum Decision {
    JobMapper,
    Preemption,
    Drain,
}

impl Decision {
    pub const ALL: [Decision; 3] = [Decision::JobMapper, Decision::Preemption, Decision::Drain];

    /// The WIT world's name.
    pub fn as_str(self) -> &'static str {
        match self {
            Decision::JobMapper => "job-mapper",
            Decision::Preemption => "preemption",
            Decision::Drain => "drain",
        }
    }
}

impl std::str::FromStr for Decision {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, String> {
        Decision::ALL
            .into_iter()
            .find(|d| d.as_str() == text)
            .ok_or_else(|| format!("unknown decision point {text:?}; expected one of job-mapper, preemption, drain"))
    }
}

/// Exactly one of `configMap` and `secret`.
#[derive(Deserialize, Serialize, Clone, Debug, Default, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ModuleSource {
    /// A ConfigMap key in `binaryData`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config_map: Option<KeyRef>,
    /// A Secret key in `data`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secret: Option<KeyRef>,
}

/// One key of a ConfigMap or Secret in the PolicyModule's namespace.
#[derive(Deserialize, Serialize, Clone, Debug, JsonSchema)]
pub struct KeyRef {
    pub name: String,
    pub key: String,
}

/// What the host made of the module.
#[derive(Deserialize, Serialize, Clone, Debug, Default, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PolicyModuleStatus {
    /// `Live`, `Refused` (see `message`), or `Superseded` (another PolicyModule went live after it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<String>,
    /// sha256 of the module this resource made live.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub live_digest: Option<String>,
    /// sha256 of the module it replaced, kept in memory for rollback (`sunk policy rollback`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub previous_digest: Option<String>,
    /// Why it was refused or superseded, or how it went live.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// The `metadata.generation` this status describes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// `Ready`: True when the module is live.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decisions_parse_by_their_world_names() {
        for decision in Decision::ALL {
            assert_eq!(decision.as_str().parse::<Decision>(), Ok(decision));
        }
        assert!("job_mapper".parse::<Decision>().unwrap_err().contains("job-mapper, preemption, drain"));
    }
}
