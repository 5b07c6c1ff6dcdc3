//! Where the host's log lines go and how they look: stderr, filtered by `RUST_LOG`, as text or JSON.
//!
//! INFO says what changed (a drain written, a pod bound, a module live); what every pass decides is at
//! DEBUG, so that a quiet cluster logs little at any size.

/// How each log line is written.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum LogFormat {
    /// One human-readable line per event.
    #[default]
    Text,
    /// One JSON object per line (`timestamp`, `level`, `target`, `fields` with `message`), for a log
    /// pipeline to index.
    Json,
}

/// The filter when `RUST_LOG` is unset: kube-runtime's watcher retries are noise at INFO.
const DEFAULT_FILTER: &str = "info,kube_runtime=warn";

pub fn init(format: LogFormat) {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| DEFAULT_FILTER.into());
    let builder = tracing_subscriber::fmt().with_env_filter(filter).with_writer(std::io::stderr);
    match format {
        LogFormat::Text => builder.init(),
        LogFormat::Json => builder.json().init(),
    }
}
