//! A slurmrestd that answers with recorded exchanges, after checking that each request is the
//! recorded one: so a passing test says both "the host asks what Slurm was asked" and "the host reads
//! what Slurm answered".

use std::collections::{BTreeMap, VecDeque};
use std::future::Future;
use std::path::Path;
use std::sync::{Arc, Mutex};

use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

const FIXTURES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/slurmrestd");

/// The name of `GET /openapi/v3`, rebuilt from the release's `openapi-paths.json`.
pub const OPENAPI: &str = "@openapi";

/// One recorded request and its answer.
#[derive(Debug, Clone)]
pub struct Exchange {
    pub name: String,
    method: String,
    /// Without its data parser version (`/slurm/*/jobs`): answers recorded with one version can be
    /// replayed to a client that speaks another.
    path: String,
    pub query: String,
    pub request_body: Option<Value>,
    pub status: u16,
    response: Option<Value>,
    /// An answer that is not JSON: the 401's plain `Authentication failure`.
    text: Option<String>,
}

impl Exchange {
    /// One entry of `<release>/<parser>.json`, as `record.sh` assembles them.
    fn recorded(name: &str, recorded: &Value) -> Self {
        let request = &recorded["request"];
        let (path, query) = split_target(request["path"].as_str().unwrap_or_else(|| panic!("{name}: no path")));
        Self {
            name: name.to_string(),
            method: request["method"].as_str().unwrap_or_else(|| panic!("{name}: no method")).to_string(),
            path: unversioned(path),
            query: query.to_string(),
            request_body: request.get("body").cloned(),
            status: recorded["status"].as_u64().and_then(|status| status.try_into().ok()).expect("an HTTP status"),
            response: recorded.get("response").cloned(),
            text: recorded["response_text"].as_str().map(String::from),
        }
    }

    /// The recorder keeps the OpenAPI document (about 1 MB) cut down to its `info` and path list:
    /// enough for the client to choose a data parser.
    fn openapi(release: &Path) -> Self {
        let kept: Value = read_json(&release.join("openapi-paths.json"));
        let paths: serde_json::Map<String, Value> = kept["paths"]
            .as_array()
            .expect("a path list")
            .iter()
            .map(|path| (path.as_str().expect("a path").to_string(), json!({})))
            .collect();
        Self {
            name: OPENAPI.into(),
            method: "GET".into(),
            path: "/openapi/v3".into(),
            query: String::new(),
            request_body: None,
            status: 200,
            response: Some(json!({"openapi": "3.0.2", "info": kept["info"], "paths": paths})),
            text: None,
        }
    }

    pub fn json(&self) -> &Value {
        self.response.as_ref().unwrap_or_else(|| panic!("{}: the answer is not JSON", self.name))
    }

    pub fn job_id(&self) -> Option<u32> {
        self.json()["job_id"].as_u64().and_then(|id| id.try_into().ok())
    }

    pub fn error_numbers(&self) -> Vec<i64> {
        let errors = self.json()["errors"].as_array().into_iter().flatten();
        errors.map(|error| error["error_number"].as_i64().unwrap_or(0)).collect()
    }

    /// `update_time` of the recorded query.
    pub fn since(&self) -> u64 {
        let value = self.query.split('&').find_map(|pair| pair.strip_prefix("update_time="));
        value.unwrap_or_else(|| panic!("{}: no update_time in {:?}", self.name, self.query)).parse().unwrap()
    }

    /// The job or node the request was about (`/slurm/*/job/6_0` -> `6_0`).
    pub fn last_segment(&self) -> String {
        self.path.rsplit('/').next().unwrap_or_default().to_string()
    }

    /// Status, error numbers, warnings and whether a job id came back: what two recordings of an
    /// exchange the host does not decode further are compared by.
    pub fn outcome(&self) -> String {
        let Some(body) = &self.response else {
            return format!("HTTP {} {:?}", self.status, self.text.as_deref().unwrap_or_default());
        };
        let warnings = body["warnings"].as_array().map_or(0, Vec::len);
        let job_id = if body.get("job_id").is_some_and(|id| !id.is_null()) { ", a job id" } else { "" };
        format!("HTTP {}, errors {:?}, {warnings} warnings{job_id}", self.status, self.error_numbers())
    }

    /// The client sent the body Slurm was sent. Unset optional numbers the client spells out in full
    /// (`"infinite": false`) where the recording left them out.
    pub fn assert_sent(&self, sent: &Option<Value>) {
        let mut sent = sent.clone().unwrap_or(Value::Null);
        drop_false_infinite(&mut sent);
        assert_eq!(Some(&sent), self.request_body.as_ref(), "{}: the client's body is not the recorded one", self.name);
    }

    fn body(&self) -> (Vec<u8>, &'static str) {
        match (&self.response, &self.text) {
            (Some(json), _) => (serde_json::to_vec(json).expect("JSON"), "application/json"),
            (None, text) => (text.clone().unwrap_or_default().into_bytes(), "text/plain"),
        }
    }
}

fn drop_false_infinite(value: &mut Value) {
    match value {
        Value::Object(map) => {
            if map.get("infinite") == Some(&Value::Bool(false)) {
                map.remove("infinite");
            }
            map.values_mut().for_each(drop_false_infinite);
        }
        Value::Array(items) => items.iter_mut().for_each(drop_false_infinite),
        _ => {}
    }
}

fn read_json<T: serde::de::DeserializeOwned>(file: &Path) -> T {
    let text = std::fs::read(file).unwrap_or_else(|error| panic!("{}: {error}", file.display()));
    serde_json::from_slice(&text).unwrap_or_else(|error| panic!("{}: {error}", file.display()))
}

fn split_target(target: &str) -> (&str, &str) {
    target.split_once('?').unwrap_or((target, ""))
}

fn unversioned(path: &str) -> String {
    match path.strip_prefix("/slurm/v").and_then(|rest| rest.split_once('/')) {
        Some((_, rest)) => format!("/slurm/*/{rest}"),
        None => path.to_string(),
    }
}

/// A slurmrestd that answers with one recording's exchanges, in the order it is told.
pub struct Replay {
    /// `<release>/<parser>`, for messages.
    recording: String,
    pub url: String,
    exchanges: BTreeMap<String, Exchange>,
    state: Arc<Mutex<ReplayState>>,
}

#[derive(Default)]
struct ReplayState {
    queue: VecDeque<Exchange>,
    /// Per request answered: what was wrong with it, and the body the client sent.
    served: Vec<(Option<String>, Option<Value>)>,
}

impl Replay {
    pub async fn start(release: &str, parser: &str) -> Self {
        let dir = Path::new(FIXTURES).join(release);
        let recorded: BTreeMap<String, Value> = read_json(&dir.join(format!("{parser}.json")));
        let mut exchanges: BTreeMap<String, Exchange> =
            recorded.iter().map(|(name, exchange)| (name.clone(), Exchange::recorded(name, exchange))).collect();
        exchanges.insert(OPENAPI.into(), Exchange::openapi(&dir));

        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let state = Arc::new(Mutex::new(ReplayState::default()));
        let shared = state.clone();
        tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                tokio::spawn(answer(stream, shared.clone()));
            }
        });
        Self { recording: format!("{release}/{parser}"), url, exchanges, state }
    }

    pub fn fixture(&self, name: &str) -> &Exchange {
        self.exchanges.get(name).unwrap_or_else(|| panic!("{}: no exchange {name}", self.recording))
    }

    pub fn has(&self, name: &str) -> bool {
        self.exchanges.contains_key(name)
    }

    /// The exchanges recorded, by name.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.exchanges.keys().map(String::as_str).filter(|name| *name != OPENAPI)
    }

    /// Runs `call` with these recorded exchanges as slurmrestd's next answers; checks that each was
    /// asked for as recorded and none is left over. Returns the call's result and the bodies sent.
    pub async fn serve<T>(&self, names: &[&str], call: impl Future<Output = T>) -> (T, Vec<Option<Value>>) {
        {
            let mut state = self.state.lock().unwrap();
            state.queue = names.iter().map(|name| self.fixture(name).clone()).collect();
            state.served.clear();
        }
        let result = call.await;
        let mut state = self.state.lock().unwrap();
        let left: Vec<&str> = state.queue.iter().map(|exchange| exchange.name.as_str()).collect();
        assert!(left.is_empty(), "{}: never asked for {left:?}", self.recording);
        let problems: Vec<&String> = state.served.iter().filter_map(|(problem, _)| problem.as_ref()).collect();
        assert!(problems.is_empty(), "{}: {problems:?}", self.recording);
        (result, state.served.drain(..).map(|(_, body)| body).collect())
    }
}

/// Reads one HTTP/1.1 request, answers it with the next recorded exchange and closes the connection.
async fn answer(mut stream: TcpStream, state: Arc<Mutex<ReplayState>>) -> std::io::Result<()> {
    let mut buffer = Vec::new();
    let mut chunk = [0u8; 8192];
    let head_end = loop {
        if let Some(at) = buffer.windows(4).position(|window| window == b"\r\n\r\n") {
            break at + 4;
        }
        let read = stream.read(&mut chunk).await?;
        if read == 0 {
            return Ok(());
        }
        buffer.extend_from_slice(&chunk[..read]);
    };
    let head = String::from_utf8_lossy(&buffer[..head_end]).into_owned();
    let mut lines = head.split("\r\n");
    let mut request_line = lines.next().unwrap_or_default().split(' ');
    let (method, target) = (request_line.next().unwrap_or_default(), request_line.next().unwrap_or_default());
    let (mut length, mut token) = (0, false);
    for (name, value) in lines.filter_map(|line| line.split_once(':')) {
        match name.trim().to_ascii_lowercase().as_str() {
            "content-length" => length = value.trim().parse().unwrap_or(0),
            "x-slurm-user-token" => token = !value.trim().is_empty(),
            _ => {}
        }
    }
    while buffer.len() < head_end + length {
        let read = stream.read(&mut chunk).await?;
        if read == 0 {
            break;
        }
        buffer.extend_from_slice(&chunk[..read]);
    }
    let sent = serde_json::from_slice::<Value>(&buffer[head_end..]).ok();
    let (path, query) = split_target(target);

    let next = state.lock().unwrap().queue.pop_front();
    let (status, (body, kind), problem) = match next {
        None => (
            500,
            (b"nothing recorded for this request".to_vec(), "text/plain"),
            Some(format!("unexpected {method} {target}")),
        ),
        Some(exchange) => {
            let asked = (method, unversioned(path), query);
            let recorded = (exchange.method.as_str(), exchange.path.clone(), exchange.query.as_str());
            let problem = if asked != recorded {
                Some(format!("{}: asked {asked:?}, recorded {recorded:?}", exchange.name))
            } else if !token {
                Some(format!("{}: no X-SLURM-USER-TOKEN", exchange.name))
            } else {
                None
            };
            (exchange.status, exchange.body(), problem)
        }
    };
    state.lock().unwrap().served.push((problem, sent));

    let body = if status == 304 { Vec::new() } else { body };
    let head = format!(
        "HTTP/1.1 {status} Replayed\r\ncontent-type: {kind}\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
        body.len()
    );
    stream.write_all(head.as_bytes()).await?;
    stream.write_all(&body).await?;
    stream.shutdown().await
}
