//! A hostile slurmrestd: a proxy on loopback in front of the real one that passes each request on, or,
//! when told, answers it with garbage of one kind (or hides every change to the nodes from listings).
//! Every connection carries one request and is closed after its answer, so that a change of answer
//! reaches a client that pools its connections at once.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::Context as _;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;

/// How the proxy answers a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Answer {
    /// Passed on to the real slurmrestd.
    Forward,
    /// An HTML error page with status 200, as a misconfigured ingress serves.
    Html,
    /// The real answer cut in half, framed as if whole.
    TruncatedJson,
    /// 500 Internal Server Error.
    ServerError,
    /// 200 with an error list and nothing else.
    ErrorList,
    /// 200 and a 100 MB body of a JSON document that never ends.
    Huge,
    /// 200 and a body that trickles a byte a second, for a minute or until the answer changes.
    Trickle,
    /// The connection reset before a byte is read.
    Reset,
    /// Node listings answered 304 Not Modified, every other request passed on: the host's view of
    /// Slurm's nodes stays as its last listing left it (as when an incremental listing misses a
    /// change made in the same second as the last), while its reads of one node and its writes
    /// reach Slurm. Not garbage: not among [`Answer::HOSTILE`].
    NodesUnchanged,
}

impl Answer {
    /// Every answer but [`Answer::Forward`].
    pub const HOSTILE: [Answer; 7] = [
        Answer::Html,
        Answer::TruncatedJson,
        Answer::ServerError,
        Answer::ErrorList,
        Answer::Huge,
        Answer::Trickle,
        Answer::Reset,
    ];
}

const HUGE_BYTES: usize = 100_000_000;
const TRICKLE_FOR: Duration = Duration::from_secs(60);

/// The proxy; it stops when dropped.
pub struct HostileProxy {
    url: String,
    answer: watch::Sender<Answer>,
    served: Arc<Mutex<Vec<Answer>>>,
    task: tokio::task::JoinHandle<()>,
}

impl HostileProxy {
    /// A proxy in front of `upstream` (`127.0.0.1:16820`), passing requests on until told otherwise.
    pub async fn start(upstream: &str) -> anyhow::Result<Self> {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let url = format!("http://{}", listener.local_addr()?);
        let (answer, answers) = watch::channel(Answer::Forward);
        let served = Arc::new(Mutex::new(Vec::new()));
        let (upstream, log) = (upstream.to_string(), served.clone());
        let task = tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                let (upstream, answers, log) = (upstream.clone(), answers.clone(), log.clone());
                tokio::spawn(async move {
                    let answer = *answers.borrow();
                    let _ = serve(client, &upstream, answer, answers, &log).await;
                });
            }
        });
        Ok(Self { url, answer, served, task })
    }

    /// The URL to give a host as `--slurm-url`.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// From now on, every request gets `answer` (a trickle in progress ends).
    pub fn answer(&self, answer: Answer) {
        self.answer.send_replace(answer);
    }

    /// How many requests got `answer` (under [`Answer::NodesUnchanged`], only the node listings).
    pub fn served(&self, answer: Answer) -> usize {
        self.served.lock().unwrap_or_else(|p| p.into_inner()).iter().filter(|a| **a == answer).count()
    }
}

impl Drop for HostileProxy {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Answers one request as `answer` says, noting in `served` what it got.
async fn serve(
    mut client: TcpStream,
    upstream: &str,
    answer: Answer,
    answers: watch::Receiver<Answer>,
    served: &Mutex<Vec<Answer>>,
) -> anyhow::Result<()> {
    let note = |answer| served.lock().unwrap_or_else(|p| p.into_inner()).push(answer);
    if answer == Answer::Reset {
        note(answer);
        // Linger 0: closing sends RST instead of FIN. (Deprecated because a nonzero linger blocks the
        // thread on drop; a zero one never waits.)
        #[allow(deprecated)]
        client.set_linger(Some(Duration::ZERO))?;
        return Ok(());
    }
    let request = read_request(&mut client).await?;
    let answer = match answer {
        Answer::NodesUnchanged if !is_node_listing(&request) => Answer::Forward,
        answer => answer,
    };
    note(answer);
    match answer {
        Answer::Forward => client.write_all(&forward(upstream, &request).await?).await?,
        Answer::NodesUnchanged => client.write_all(&respond("304 Not Modified", "application/json", b"")).await?,
        Answer::TruncatedJson => {
            let real = forward(upstream, &request).await?;
            let body = split_body(&real).map_or(&real[..], |(_, body)| body);
            let cut = &body[..body.len() / 2];
            client.write_all(&respond("200 OK", "application/json", cut)).await?;
        }
        Answer::Html => {
            let page = b"<html><head><title>502 Bad Gateway</title></head><body>nginx</body></html>";
            client.write_all(&respond("200 OK", "text/html", page)).await?;
        }
        Answer::ServerError => client.write_all(&respond("500 Internal Server Error", "text/plain", b"oops")).await?,
        Answer::ErrorList => {
            let body = br#"{"errors":[{"description":"hostile","error_number":9,"error":"Unspecified error","source":"proxy"}],"warnings":[]}"#;
            client.write_all(&respond("200 OK", "application/json", body)).await?;
        }
        Answer::Huge => {
            // No Content-Length: the body ends when the connection does.
            client
                .write_all(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nConnection: close\r\n\r\n{\"jobs\":[")
                .await?;
            let chunk = "0,".repeat(32 * 1024);
            for _ in 0..HUGE_BYTES / chunk.len() {
                client.write_all(chunk.as_bytes()).await?;
            }
        }
        Answer::Trickle => trickle(&mut client, answers).await?,
        Answer::Reset => unreachable!("answered above"),
    }
    client.shutdown().await?;
    Ok(())
}

/// A byte a second of a body that claims a megabyte, until a minute passed or the answer changed.
async fn trickle(client: &mut TcpStream, mut answers: watch::Receiver<Answer>) -> anyhow::Result<()> {
    client.write_all(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 1000000\r\n\r\n").await?;
    let until = tokio::time::Instant::now() + TRICKLE_FOR;
    while tokio::time::Instant::now() < until && *answers.borrow_and_update() == Answer::Trickle {
        client.write_all(b" ").await?;
        tokio::select! {
            _ = tokio::time::sleep(Duration::from_secs(1)) => {}
            _ = answers.changed() => {}
        }
    }
    Ok(())
}

fn respond(status: &str, content_type: &str, body: &[u8]) -> Vec<u8> {
    let head = format!(
        "HTTP/1.1 {status}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    [head.as_bytes(), body].concat()
}

/// One request, head and body (by its Content-Length), as the client sent it.
async fn read_request(client: &mut TcpStream) -> anyhow::Result<Vec<u8>> {
    let mut request = Vec::new();
    let mut buffer = [0u8; 16 * 1024];
    loop {
        if let Some((head, body)) = split_body(&request) {
            let wanted = content_length(head);
            if body.len() >= wanted {
                return Ok(request);
            }
        }
        let read = client.read(&mut buffer).await?;
        anyhow::ensure!(read > 0, "the client closed the connection mid-request");
        request.extend_from_slice(&buffer[..read]);
    }
}

/// The request passed on over a connection of its own, and the whole answer.
async fn forward(upstream: &str, request: &[u8]) -> anyhow::Result<Vec<u8>> {
    let (head, body) = split_body(request).context("a request without a head")?;
    let head = String::from_utf8_lossy(head);
    let mut lines: Vec<&str> =
        head.split("\r\n").filter(|line| !line.to_ascii_lowercase().starts_with("connection:")).collect();
    lines.push("Connection: close");
    let mut upstream = TcpStream::connect(upstream).await?;
    upstream.write_all(format!("{}\r\n\r\n", lines.join("\r\n")).as_bytes()).await?;
    upstream.write_all(body).await?;
    let mut answer = Vec::new();
    upstream.read_to_end(&mut answer).await?;
    Ok(answer)
}

/// `GET /slurm/<parser>/nodes`, with or without `?update_time=`.
fn is_node_listing(request: &[u8]) -> bool {
    let head = String::from_utf8_lossy(split_body(request).map_or(request, |(head, _)| head));
    let mut words = head.lines().next().unwrap_or_default().split(' ');
    let (method, target) = (words.next(), words.next().unwrap_or_default());
    let path = target.split('?').next().unwrap_or_default().trim_end_matches('/');
    method == Some("GET") && path.starts_with("/slurm/") && path.ends_with("/nodes")
}

fn split_body(message: &[u8]) -> Option<(&[u8], &[u8])> {
    let end = message.windows(4).position(|window| window == b"\r\n\r\n")?;
    Some((&message[..end], &message[end + 4..]))
}

fn content_length(head: &[u8]) -> usize {
    String::from_utf8_lossy(head)
        .split("\r\n")
        .filter_map(|line| line.split_once(':'))
        .find(|(name, _)| name.trim().eq_ignore_ascii_case("content-length"))
        .and_then(|(_, value)| value.trim().parse().ok())
        .unwrap_or(0)
}
