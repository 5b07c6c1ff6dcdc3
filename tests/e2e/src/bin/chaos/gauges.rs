//! What the run samples of the system besides the invariants, for the soak: each host replica's
//! resident memory, threads and open files, Slurm's job count, and the API server's request rate.
//! Written as CSV (one row per sample) and drawn as an SVG, one small chart per series.

use std::fmt::Write as _;
use std::time::Instant;

use sunk_e2e::process::{Usage, host_process};

use crate::world::World;

/// One sample of the gauges.
pub struct Reading {
    pub seconds: f64,
    /// Summed over the host's replicas (the one that holds the Lease does the work).
    pub host_rss_mib: f64,
    pub host_threads: u64,
    pub host_open_files: u64,
    pub slurm_jobs: u64,
    /// API server requests per second since the last sample.
    pub apiserver_rps: f64,
}

pub struct Gauges {
    began: Instant,
    readings: Vec<Reading>,
    last_requests: Option<(Instant, f64)>,
}

impl Gauges {
    pub fn new() -> Self {
        Self { began: Instant::now(), readings: Vec::new(), last_requests: None }
    }

    pub async fn read(&mut self, world: &World, slurm_jobs: Option<u64>) {
        let hosts = world.host_pods().await;
        let (mut rss, mut threads, mut files) = (0.0, 0, 0);
        for pod in &hosts {
            let Some(usage) = host_process(pod).and_then(Usage::of) else { continue };
            rss += usage.rss_mib;
            threads += usage.threads;
            files += usage.open_files;
        }
        let rps = match (requests_total(world).await, self.last_requests) {
            // A restarted API server starts its counters again: that reading has no rate.
            (Some(total), Some((_, before))) if total < before => {
                self.last_requests = Some((Instant::now(), total));
                return;
            }
            (Some(total), Some((at, before))) => {
                let rate = (total - before) / at.elapsed().as_secs_f64();
                self.last_requests = Some((Instant::now(), total));
                rate
            }
            (Some(total), None) => {
                self.last_requests = Some((Instant::now(), total));
                return;
            }
            (None, _) => return,
        };
        self.readings.push(Reading {
            seconds: self.began.elapsed().as_secs_f64(),
            host_rss_mib: rss,
            host_threads: threads,
            host_open_files: files,
            slurm_jobs: slurm_jobs.unwrap_or_default(),
            apiserver_rps: rps,
        });
    }
}

/// The API server's `apiserver_request_total`, summed over every label set.
async fn requests_total(world: &World) -> Option<f64> {
    let request = http::Request::get("/metrics").body(Vec::new()).ok()?;
    let text = world.cluster.kube.request_text(request).await.ok()?;
    Some(
        text.lines()
            .filter(|line| line.starts_with("apiserver_request_total{"))
            .filter_map(|line| line.rsplit_once(' ')?.1.parse::<f64>().ok())
            .sum(),
    )
}

/// The series a soak is judged by: name, unit, and how to read it from a [`Reading`].
type Series = (&'static str, &'static str, fn(&Reading) -> f64);
const SERIES: [Series; 5] = [
    ("host RSS (both replicas)", "MiB", |r| r.host_rss_mib),
    ("host threads", "", |r| r.host_threads as f64),
    ("host open files", "", |r| r.host_open_files as f64),
    ("Slurm jobs listed", "", |r| r.slurm_jobs as f64),
    ("API server requests", "/s", |r| r.apiserver_rps),
];

impl Gauges {
    /// Per series: the mean of the first and of the last tenth of the run, and the highest reading.
    pub fn summary(&self) -> String {
        if self.readings.len() < 2 {
            return "gauges: too few readings".into();
        }
        let tenth = (self.readings.len() / 10).max(1);
        let mean = |readings: &[Reading], read: fn(&Reading) -> f64| {
            readings.iter().map(read).sum::<f64>() / readings.len() as f64
        };
        let mut text = String::from("| gauge | first tenth | last tenth | highest |\n|---|---:|---:|---:|\n");
        for (name, unit, read) in SERIES {
            let first = mean(&self.readings[..tenth], read);
            let last = mean(&self.readings[self.readings.len() - tenth..], read);
            let highest = self.readings.iter().map(read).fold(f64::MIN, f64::max);
            let _ = writeln!(text, "| {name} | {first:.1}{unit} | {last:.1}{unit} | {highest:.1}{unit} |");
        }
        text
    }

    /// Writes the readings as CSV to `path`, and their plot beside it (`.svg`).
    pub fn write(&self, path: &std::path::Path) -> anyhow::Result<()> {
        let mut csv = String::from("seconds,host_rss_mib,host_threads,host_open_files,slurm_jobs,apiserver_rps\n");
        for r in &self.readings {
            let _ = writeln!(
                csv,
                "{:.0},{:.1},{},{},{},{:.1}",
                r.seconds, r.host_rss_mib, r.host_threads, r.host_open_files, r.slurm_jobs, r.apiserver_rps
            );
        }
        std::fs::write(path, csv)?;
        std::fs::write(path.with_extension("svg"), self.plot())?;
        Ok(())
    }

    /// One small line chart per series, stacked, minutes across.
    fn plot(&self) -> String {
        const WIDTH: f64 = 640.0;
        const HEIGHT: f64 = 110.0;
        const LEFT: f64 = 60.0;
        let total = self.readings.last().map_or(1.0, |r| r.seconds.max(1.0));
        let mut svg = format!(
            "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{}\" height=\"{}\" font-family=\"sans-serif\" font-size=\"11\">\n",
            WIDTH + LEFT + 10.0,
            HEIGHT * SERIES.len() as f64 + 20.0
        );
        for (index, (name, unit, read)) in SERIES.iter().enumerate() {
            let top = index as f64 * HEIGHT + 15.0;
            let highest = self.readings.iter().map(read).fold(0.0, f64::max).max(1.0) * 1.1;
            let points: Vec<String> = self
                .readings
                .iter()
                .map(|r| {
                    let x = LEFT + r.seconds / total * WIDTH;
                    let y = top + (HEIGHT - 30.0) * (1.0 - read(r) / highest);
                    format!("{x:.1},{y:.1}")
                })
                .collect();
            let bottom = top + HEIGHT - 30.0;
            let _ =
                writeln!(svg, "<text x=\"{LEFT}\" y=\"{:.0}\">{name} ({:.0}{unit} at top)</text>", top - 2.0, highest);
            let _ = writeln!(
                svg,
                "<line x1=\"{LEFT}\" y1=\"{bottom:.0}\" x2=\"{:.0}\" y2=\"{bottom:.0}\" stroke=\"#999\"/>",
                LEFT + WIDTH
            );
            let _ = writeln!(
                svg,
                "<text x=\"{:.0}\" y=\"{:.0}\" text-anchor=\"end\">{:.0} min</text>",
                LEFT + WIDTH,
                bottom + 12.0,
                total / 60.0
            );
            let _ = writeln!(svg, "<polyline fill=\"none\" stroke=\"#1f77b4\" points=\"{}\"/>", points.join(" "));
        }
        svg.push_str("</svg>\n");
        svg
    }
}
