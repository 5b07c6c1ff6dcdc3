//! Which Slurm the host talks to, and which REST API version it speaks with it.
//!
//! slurmrestd serves several data parser versions side by side (Slurm 24.11.5: v0.0.40 to v0.0.42;
//! 26.05.5: v0.0.42 to v0.0.45). The client's model is written for the versions in [`SPEAKS`]; it
//! speaks the newest of those that slurmrestd offers, and refuses to go on when none is, naming both
//! lists. v0.0.45 is spoken for one call only, the requeue it adds. The choice is made again after
//! every reconnect, since the Slurm behind the URL may have been upgraded meanwhile.

use std::fmt;
use std::str::FromStr;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;
use serde::Deserialize;

/// A slurmrestd data parser version, `v0.0.42`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ApiVersion {
    pub major: u16,
    pub minor: u16,
    pub patch: u16,
}

impl ApiVersion {
    pub const V0_0_42: Self = Self::patch(42);
    pub const V0_0_43: Self = Self::patch(43);
    pub const V0_0_44: Self = Self::patch(44);
    /// Spoken only to requeue a job: the first parser with a requeue operation.
    pub const V0_0_45: Self = Self::patch(45);

    const fn patch(patch: u16) -> Self {
        Self { major: 0, minor: 0, patch }
    }

    /// Whether jobs without a script (`EXTERNAL_JOB`) can be submitted in this version.
    pub fn has_external_jobs(self) -> bool {
        self >= Self::V0_0_43
    }
}

/// The data parser versions the client's model is written for, newest first. What the host reads
/// decodes alike in all three (the contract tests compare them on 26.05.5).
pub const SPEAKS: &[ApiVersion] = &[ApiVersion::V0_0_44, ApiVersion::V0_0_43, ApiVersion::V0_0_42];

impl fmt::Display for ApiVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "v{}.{}.{}", self.major, self.minor, self.patch)
    }
}

impl FromStr for ApiVersion {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let bad = || format!("{text:?} is not a data parser version like v0.0.42");
        let numbers = text.strip_prefix('v').ok_or_else(bad)?;
        let mut parts = numbers.split('.').map(|part| part.parse::<u16>().map_err(|_| bad()));
        let version = Self {
            major: parts.next().ok_or_else(bad)??,
            minor: parts.next().ok_or_else(bad)??,
            patch: parts.next().ok_or_else(bad)??,
        };
        if parts.next().is_some() {
            return Err(bad());
        }
        Ok(version)
    }
}

/// What the host learnt about the Slurm behind its slurmrestd URL.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SlurmInfo {
    /// Slurm's release as slurmrestd reports it (`26.05.5`); "unknown" when it does not say.
    pub release: String,
    /// The data parser version the host speaks from now on.
    pub api: ApiVersion,
    /// Every data parser version slurmrestd serves, oldest first.
    pub offered: Vec<ApiVersion>,
}

impl fmt::Display for SlurmInfo {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Slurm {}, speaking REST API {} (slurmrestd offers {})", self.release, self.api, list(&self.offered))
    }
}

/// Nothing slurmrestd offers is a version the host speaks.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "slurmrestd serves the data parsers {}, and sunk speaks {}: run a Slurm whose slurmrestd serves one of \
     sunk's (24.11 through 26.05 do), or a sunk that speaks one of Slurm's",
    list(.offered),
    list(.speaks)
)]
pub struct NoCommonApi {
    pub speaks: Vec<ApiVersion>,
    pub offered: Vec<ApiVersion>,
}

fn list(versions: &[ApiVersion]) -> String {
    if versions.is_empty() {
        return "none".to_string();
    }
    versions.iter().map(ToString::to_string).collect::<Vec<_>>().join(", ")
}

/// The newest version in `speaks` that is `offered`.
pub fn choose(speaks: &[ApiVersion], offered: &[ApiVersion]) -> Result<ApiVersion, NoCommonApi> {
    speaks
        .iter()
        .filter(|version| offered.contains(version))
        .max()
        .copied()
        .ok_or_else(|| NoCommonApi { speaks: speaks.to_vec(), offered: offered.to_vec() })
}

/// slurmrestd's OpenAPI document, reduced to what tells its versions: the paths it serves.
#[derive(Debug, Deserialize)]
pub(super) struct OpenApiPaths {
    /// Only the keys are read: each path's schema (most of the ~1 MB document) is skipped unparsed.
    #[serde(default)]
    paths: std::collections::BTreeMap<String, serde::de::IgnoredAny>,
    /// Never there in a document; there when slurmrestd answers with an error instead.
    #[serde(flatten)]
    pub(super) envelope: super::model::Envelope,
}

impl OpenApiPaths {
    /// The data parser versions of the Slurm paths served (`/slurm/v0.0.42/jobs/` -> v0.0.42), oldest
    /// first. Paths of other plugins (`/slurmdb/...`) tell nothing about the job and node API.
    pub(super) fn slurm_versions(&self) -> Vec<ApiVersion> {
        let mut versions: Vec<ApiVersion> = self
            .paths
            .keys()
            .filter_map(|path| path.strip_prefix("/slurm/")?.split('/').next()?.parse().ok())
            .collect();
        versions.sort();
        versions.dedup();
        versions
    }
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct InfoLabels {
    version: String,
    api: String,
}

/// `sunk_slurm_info{version, api} 1`: the Slurm the host talks to, and the API it speaks.
#[derive(Clone, Default)]
pub struct SlurmInfoMetric {
    family: Family<InfoLabels, Gauge>,
}

impl SlurmInfoMetric {
    pub fn register(&self, registry: &mut Registry) {
        registry.register(
            "sunk_slurm_info",
            "The Slurm release slurmrestd reports and the REST API version the host speaks with it",
            self.family.clone(),
        );
    }

    pub fn set(&self, info: &SlurmInfo) {
        self.family.clear();
        let labels = InfoLabels { version: info.release.clone(), api: info.api.to_string() };
        self.family.get_or_create(&labels).set(1);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn versions(texts: &[&str]) -> Vec<ApiVersion> {
        texts.iter().map(|text| text.parse().unwrap()).collect()
    }

    #[test]
    fn external_jobs_need_v0_0_43() {
        assert!(!ApiVersion::V0_0_42.has_external_jobs());
        assert!(ApiVersion::V0_0_43.has_external_jobs());
        assert!(ApiVersion::V0_0_44.has_external_jobs());
    }

    #[test]
    fn parses_and_prints_data_parser_versions() {
        assert_eq!("v0.0.42".parse(), Ok(ApiVersion::V0_0_42));
        assert_eq!(ApiVersion::V0_0_42.to_string(), "v0.0.42");
        for bad in ["0.0.42", "v0.0", "v0.0.42.1", "v0.0.x", "", "v"] {
            assert!(bad.parse::<ApiVersion>().is_err(), "{bad:?} parsed");
        }
    }

    /// What the host speaks, what slurmrestd offers, and the version chosen (None: refused).
    type ChoiceCase<'a> = (&'a [&'a str], &'a [&'a str], Option<&'a str>);

    #[test]
    fn chooses_the_newest_version_both_sides_know() {
        let cases: &[ChoiceCase] = &[
            // Slurm 24.11.5 and 26.05.5 as they ship.
            (&["v0.0.42"], &["v0.0.40", "v0.0.41", "v0.0.42"], Some("v0.0.42")),
            (&["v0.0.42"], &["v0.0.42", "v0.0.43", "v0.0.44", "v0.0.45"], Some("v0.0.42")),
            (&["v0.0.44", "v0.0.43", "v0.0.42"], &["v0.0.42", "v0.0.43", "v0.0.44", "v0.0.45"], Some("v0.0.44")),
            (&["v0.0.44", "v0.0.43", "v0.0.42"], &["v0.0.40", "v0.0.41", "v0.0.42"], Some("v0.0.42")),
            (&["v0.0.44", "v0.0.43", "v0.0.42"], &["v0.0.43"], Some("v0.0.43")),
            // A Slurm too old, a Slurm too new, and a slurmrestd serving no Slurm paths at all.
            (&["v0.0.42"], &["v0.0.39", "v0.0.40", "v0.0.41"], None),
            (&["v0.0.42"], &["v0.0.46", "v0.0.47"], None),
            (&["v0.0.42"], &[], None),
        ];
        for (speaks, offered, expected) in cases {
            let chosen = choose(&versions(speaks), &versions(offered));
            assert_eq!(chosen.ok().map(|version| version.to_string()).as_deref(), *expected);
        }
    }

    #[test]
    fn a_refusal_names_what_is_needed_and_what_was_found() {
        let refusal = choose(SPEAKS, &versions(&["v0.0.40", "v0.0.41"])).unwrap_err().to_string();
        assert!(refusal.contains("slurmrestd serves the data parsers v0.0.40, v0.0.41"), "{refusal}");
        assert!(refusal.contains("sunk speaks v0.0.44, v0.0.43, v0.0.42"), "{refusal}");
    }

    #[test]
    fn reads_the_versions_from_the_openapi_paths() {
        let document: OpenApiPaths = serde_json::from_value(serde_json::json!({"paths": {
            "/slurm/v0.0.43/jobs/": {}, "/slurm/v0.0.42/ping/": {}, "/slurm/v0.0.42/jobs/": {},
            "/slurmdb/v0.0.44/jobs/": {}, "/openapi/v3": {}, "/slurm/latest/ping/": {}
        }}))
        .unwrap();
        assert_eq!(document.slurm_versions(), versions(&["v0.0.42", "v0.0.43"]));
    }

    #[test]
    fn the_metric_names_one_slurm_at_a_time() {
        let metric = SlurmInfoMetric::default();
        let mut registry = Registry::default();
        metric.register(&mut registry);
        let old = SlurmInfo { release: "24.11.5".into(), api: ApiVersion::V0_0_42, offered: vec![] };
        metric.set(&old);
        metric.set(&SlurmInfo { release: "26.05.5".into(), ..old });
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &registry).unwrap();
        assert!(text.contains(r#"sunk_slurm_info{version="26.05.5",api="v0.0.42"} 1"#), "{text}");
        assert!(!text.contains("24.11.5"), "{text}");
    }
}
