//! The `status` of a PolicyModule: written only when it says something new, so that writing it does
//! not wake the controller into writing it again.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use k8s_openapi::jiff::Timestamp;
use kube::Client;
use kube::ResourceExt;
use kube::api::{Api, Patch, PatchParams};
use serde_json::json;

use super::resource::{PolicyModule, PolicyModuleStatus};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    Live,
    Refused,
    Superseded,
}

impl Phase {
    fn as_str(self) -> &'static str {
        match self {
            Phase::Live => "Live",
            Phase::Refused => "Refused",
            Phase::Superseded => "Superseded",
        }
    }
}

/// Whether another PolicyModule took over after this one went live, and this one is unchanged since.
pub fn is_superseded(module: &PolicyModule) -> bool {
    module.status.as_ref().is_some_and(|status| {
        status.phase.as_deref() == Some(Phase::Superseded.as_str())
            && status.observed_generation == module.metadata.generation
    })
}

/// Sets the status, its message on one line; returns whether it changed. `live_digest` and
/// `previous_digest` are kept from the current status when `None` and the phase is not `Live` (a
/// refused update leaves the old module live).
pub async fn write(
    client: &Client,
    module: &PolicyModule,
    phase: Phase,
    message: &str,
    live_digest: Option<&str>,
    previous_digest: Option<&str>,
) -> kube::Result<bool> {
    let message = crate::kube::one_line(message);
    let current = module.status.clone().unwrap_or_default();
    let keep = |new: Option<&str>, old: &Option<String>| new.map(str::to_owned).or_else(|| old.clone());
    let live_digest = match phase {
        Phase::Live => live_digest.map(str::to_owned),
        Phase::Refused => keep(live_digest, &current.live_digest),
        Phase::Superseded => None,
    };
    let previous_digest = keep(previous_digest, &current.previous_digest);
    let ready = phase == Phase::Live;
    let unchanged = current.phase.as_deref() == Some(phase.as_str())
        && current.message.as_ref() == Some(&message)
        && current.live_digest == live_digest
        && current.previous_digest == previous_digest
        && current.observed_generation == module.metadata.generation;
    if unchanged {
        return Ok(false);
    }
    let was_ready = current.conditions.iter().find(|c| c.type_ == "Ready").map(|c| c.status == "True");
    let last_transition_time = match current.conditions.iter().find(|c| c.type_ == "Ready") {
        Some(condition) if was_ready == Some(ready) => condition.last_transition_time.clone(),
        _ => Time(Timestamp::now()),
    };
    let status = PolicyModuleStatus {
        phase: Some(phase.as_str().to_owned()),
        live_digest,
        previous_digest,
        message: Some(message.clone()),
        observed_generation: module.metadata.generation,
        conditions: vec![Condition {
            type_: "Ready".into(),
            status: if ready { "True" } else { "False" }.into(),
            reason: phase.as_str().into(),
            message,
            last_transition_time,
            observed_generation: module.metadata.generation,
        }],
    };
    let api = Api::<PolicyModule>::namespaced(client.clone(), &module.namespace().unwrap_or_default());
    let patch = json!({ "status": status });
    api.patch_status(&module.name_any(), &PatchParams::default(), &Patch::Merge(patch)).await?;
    Ok(true)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::kube::mock_api::{Expect, serve};

    const STATUS: &str = "/apis/sunk.dev/v1alpha1/namespaces/ml/policymodules/drain/status?";

    fn module() -> PolicyModule {
        serde_json::from_value(json!({
            "apiVersion": "sunk.dev/v1alpha1", "kind": "PolicyModule",
            "metadata": {"name": "drain", "namespace": "ml", "generation": 2},
            "spec": {"decision": "drain", "sha256": "00", "source": {"configMap": {"name": "m", "key": "drain.wasm"}}}
        }))
        .unwrap()
    }

    #[tokio::test]
    async fn a_refusal_is_written_on_one_line_and_not_again_once_it_says_so() {
        let (client, api) = serve(vec![Expect::call("PATCH", STATUS, 200, serde_json::to_value(module()).unwrap())]);
        let refusal = "compiling the policy component: bad magic number - expected=[\n    0x0,\n    0x61,\n]";
        assert!(write(&client, &module(), Phase::Refused, refusal, None, None).await.unwrap());
        drop(client);
        let sent = api.await.unwrap();
        let status = &sent[0]["status"];
        let one_line = "compiling the policy component: bad magic number - expected=[ 0x0, 0x61, ]";
        assert_eq!((&status["message"], &status["conditions"][0]["message"]), (&json!(one_line), &json!(one_line)));

        let mut written = module();
        written.status = Some(serde_json::from_value(status.clone()).unwrap());
        let (client, api) = serve(vec![]);
        assert!(!write(&client, &written, Phase::Refused, refusal, None, None).await.unwrap(), "no change");
        drop(client);
        assert!(api.await.unwrap().is_empty());
    }
}
