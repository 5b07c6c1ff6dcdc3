//! The real client against a slurmrestd that answers garbage: every answer is a failed read (an
//! error the host fails closed on), never a listing, and never a panic.

use std::future::Future;
use std::time::Duration;

use sunk_slurm::{JobsPage, NodeUpdate, SlurmClient, SlurmError, TokenSigner};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// How a hostile slurmrestd answers every request.
#[derive(Debug, Clone, Copy)]
enum Garbage {
    Html,
    Truncated,
    ServerError,
    OkWithErrors,
    OkWithoutJobs,
    HugeContentLength,
    Reset,
}

impl Garbage {
    fn response(self) -> Option<String> {
        let http = |status: &str, body: &str| {
            format!(
                "HTTP/1.1 {status}\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{body}",
                body.len()
            )
        };
        Some(match self {
            Garbage::Html => http("200 OK", "<html><body><h1>502 Bad Gateway</h1></body></html>"),
            Garbage::Truncated => http("200 OK", r#"{"jobs": [{"job_id": 1, "job_state": ["RUN"#),
            Garbage::ServerError => http("500 Internal Server Error", "oops"),
            Garbage::OkWithErrors => http(
                "200 OK",
                r#"{"jobs": [], "errors": [{"error": "Unable to contact slurmctld", "error_number": 1007}]}"#,
            ),
            Garbage::OkWithoutJobs => http("200 OK", r#"{"meta": {}, "errors": [], "warnings": []}"#),
            // Says a 200 MB body follows, then sends a little and hangs up.
            Garbage::HugeContentLength => {
                "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 200000000\r\n\r\n{\"jobs\": ["
                    .into()
            }
            Garbage::Reset => return None,
        })
    }
}

/// A slurmrestd on loopback that reads each request and answers it with `garbage`.
async fn hostile(garbage: Garbage) -> SlurmClient {
    on_loopback(move |mut stream, _| async move {
        match garbage.response() {
            Some(response) => _ = stream.write_all(response.as_bytes()).await,
            // Dropped unanswered: the client sees the connection closed.
            None => drop(stream),
        }
    })
    .await
}

/// A slurmrestd on loopback whose `answer` gets each connection once its request is read, with the
/// request's first line (`GET /slurm/v0.0.42/jobs HTTP/1.1`); a client of it.
async fn on_loopback<F, Answered>(answer: F) -> SlurmClient
where
    F: Fn(TcpStream, String) -> Answered + Send + 'static,
    Answered: Future<Output = ()> + Send + 'static,
{
    on_loopback_reading(move |stream, request| answer(stream, request.lines().next().unwrap_or_default().to_owned()))
        .await
}

/// [`on_loopback`], with the request as read (its first 16 KiB: the head, its headers included).
async fn on_loopback_reading<F, Answered>(answer: F) -> SlurmClient
where
    F: Fn(TcpStream, String) -> Answered + Send + 'static,
    Answered: Future<Output = ()> + Send + 'static,
{
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("a loopback port");
    let address = listener.local_addr().expect("its address");
    tokio::spawn(async move {
        while let Ok((mut stream, _)) = listener.accept().await {
            let mut request = vec![0u8; 16 << 10];
            let read = stream.read(&mut request).await.unwrap_or_default();
            tokio::spawn(answer(stream, String::from_utf8_lossy(&request[..read]).into_owned()));
        }
    });
    let signer = TokenSigner::new(b"0123456789abcdef0123456789abcdef", "root", Duration::from_secs(60));
    SlurmClient::new(&format!("http://{address}"), signer).expect("a client")
}

#[tokio::test]
async fn every_garbled_answer_is_a_failed_read_never_a_listing() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let cases = [
        (Garbage::Html, "unreadable answer"),
        (Garbage::Truncated, "unreadable answer"),
        (Garbage::ServerError, "HTTP 500"),
        (Garbage::OkWithErrors, "Unable to contact slurmctld"),
        (Garbage::OkWithoutJobs, "missing field `jobs`"),
        // Refused on what the header says, before reading (not at the 30 s request timeout).
        (Garbage::HugeContentLength, "longer than"),
        (Garbage::Reset, ""),
    ];
    for (garbage, says) in cases {
        let slurm = hostile(garbage).await;
        let answer: Result<JobsPage, SlurmError> = slurm.jobs(None).await;
        let error = answer.expect_err(&format!("{garbage:?} is not a listing"));
        assert!(error.to_string().contains(says), "{garbage:?}: {error}");
        assert!(slurm.nodes(None).await.is_err(), "{garbage:?}: a node listing");
    }
}

#[tokio::test]
async fn a_node_listing_is_read_no_further_than_its_cap() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    // No Content-Length: a body that ends when the connection does, twice the cap long.
    let slurm = on_loopback(|mut stream, _| async move {
        let head = "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\nconnection: close\r\n\r\n{\"nodes\": [";
        let _ = stream.write_all(head.as_bytes()).await;
        let chunk = vec![b' '; 1 << 20];
        for _ in 0..2 * sunk_slurm::MAX_NODES_ANSWER_BYTES / chunk.len() {
            if stream.write_all(&chunk).await.is_err() {
                break; // the client stopped reading, as it should
            }
        }
    })
    .await;
    let error = slurm.nodes(None).await.expect_err("an endless node listing is not a listing");
    assert!(error.to_string().contains(&format!("longer than {}", sunk_slurm::MAX_NODES_ANSWER_BYTES)), "{error}");
}

#[tokio::test]
async fn a_write_is_sent_while_listings_hang_in_every_other_slot() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    // Listings are never answered (a slurmctld busy with 10,000 jobs); a node update is at once.
    let slurm = on_loopback(|stream, head| async move {
        if head.starts_with("GET") {
            std::future::pending::<()>().await;
        }
        answer_and_keep_open(stream, r#"{"meta": {}, "errors": [], "warnings": []}"#).await;
    })
    .await;
    assert_eq!(sunk_slurm::DEFAULT_MAX_IN_FLIGHT, 2);
    let (jobs, nodes) = (slurm.clone(), slurm.clone());
    let listings = [
        tokio::spawn(async move { jobs.jobs(None).await.map(drop) }),
        tokio::spawn(async move { nodes.nodes(None).await.map(drop) }),
    ];
    tokio::task::yield_now().await;
    let drain = NodeUpdate::drain("test");
    let drained = tokio::time::timeout(Duration::from_secs(20), slurm.update_node("n1", &drain));
    drained.await.expect("a write does not wait behind listings").expect("the update is answered");
    assert!(listings.iter().all(|listing| !listing.is_finished()), "the listings still hang");
}

#[tokio::test]
async fn a_node_listing_is_sent_while_a_job_listing_hangs() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    // The job listing is never answered (10,000 jobs on a busy slurmrestd); a node listing is at once.
    let slurm = on_loopback(|stream, head| async move {
        if head.contains("/jobs") {
            std::future::pending::<()>().await;
        }
        let empty = r#"{"nodes": [], "last_update": {"set": true, "infinite": false, "number": 5}, "meta": {}, "errors": [], "warnings": []}"#;
        answer_and_keep_open(stream, empty).await;
    })
    .await;
    let jobs = slurm.clone();
    let listing = tokio::spawn(async move { jobs.jobs(None).await.map(drop) });
    tokio::task::yield_now().await;
    let listed = tokio::time::timeout(Duration::from_secs(20), slurm.nodes(None));
    listed.await.expect("a node listing does not wait behind a job listing").expect("the nodes are listed");
    assert!(!listing.is_finished(), "the job listing still hangs");
}

/// Answers 200 with the JSON `body`, then keeps the connection open, as slurmrestd keeps them alive.
async fn answer_and_keep_open(mut stream: TcpStream, body: &str) {
    let answer =
        format!("HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{body}", body.len());
    let _ = stream.write_all(answer.as_bytes()).await;
    std::future::pending::<()>().await;
}

/// A slurmrestd that redirects every request to another listener on loopback (another origin, so
/// reqwest would keep `X-SLURM-USER-TOKEN` on it, stripping only `Authorization`): the client reports
/// the redirect and never connects to where it points.
#[tokio::test]
async fn a_redirect_is_never_followed_with_the_token() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let elsewhere = TcpListener::bind("127.0.0.1:0").await.expect("a loopback port");
    let location = format!("http://{}/slurm/v0.0.42/nodes", elsewhere.local_addr().expect("its address"));
    let (tokens, mut asked) = tokio::sync::mpsc::unbounded_channel();
    let slurm = on_loopback_reading(move |mut stream, request| {
        let (tokens, location) = (tokens.clone(), location.clone());
        async move {
            _ = tokens.send(token_of(&request));
            let redirect = format!("HTTP/1.1 302 Found\r\nlocation: {location}\r\ncontent-length: 0\r\n\r\n");
            _ = stream.write_all(redirect.as_bytes()).await;
            std::future::pending::<()>().await;
        }
    })
    .await;
    let error = slurm.nodes(None).await.expect_err("a redirect is no listing");
    assert!(error.to_string().contains("302"), "{error}");
    assert!(asked.recv().await.flatten().is_some(), "slurmrestd got the token");
    // Following the redirect would have connected (and sent the request) before the answer came back.
    let followed = tokio::time::timeout(Duration::from_millis(200), elsewhere.accept()).await;
    assert!(followed.is_err(), "the client connected to the redirect's target");
}

/// HTTP_PROXY, HTTPS_PROXY and ALL_PROXY are ignored: requests go to slurmrestd's URL and nowhere
/// else. The variables are the process's, read when the client is built, and setting them would
/// race every other test of this binary, so the test runs itself again in a child process with a
/// proxy listener's address in them; that child's client must reach slurmrestd directly, and the
/// proxy must never see a connection.
#[test]
fn proxy_settings_are_ignored() {
    const CHILD: &str = "SUNK_TEST_PROXY_CHILD";
    if std::env::var_os(CHILD).is_some() {
        return proxy_settings_are_ignored_in_the_child();
    }
    let proxy = std::net::TcpListener::bind("127.0.0.1:0").expect("a loopback port");
    let proxy_url = format!("http://{}", proxy.local_addr().expect("its address"));
    let mut child = std::process::Command::new(std::env::current_exe().expect("this test binary"));
    child.args(["--exact", "hostile::proxy_settings_are_ignored", "--nocapture"]).env(CHILD, "1");
    for name in ["HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"] {
        child.env(name, &proxy_url);
    }
    child.env_remove("NO_PROXY").env_remove("no_proxy");
    let output = child.output().expect("the child test runs");
    let (said, complained) = (String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr));
    assert!(output.status.success() && said.contains("1 passed"), "the child test:\n{said}\n{complained}");
    proxy.set_nonblocking(true).expect("a non-blocking listener");
    let connection = proxy.accept();
    assert!(connection.is_err(), "the proxy got a connection: {connection:?}");
}

#[tokio::main(flavor = "current_thread")]
async fn proxy_settings_are_ignored_in_the_child() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    assert!(std::env::var_os("HTTP_PROXY").is_some(), "the parent names a proxy");
    let slurm =
        on_loopback(|stream, _| answer_and_keep_open(stream, r#"{"meta": {}, "errors": [], "warnings": []}"#)).await;
    let drain = NodeUpdate::drain("test");
    let updated = tokio::time::timeout(Duration::from_secs(10), slurm.update_node("n1", &drain));
    updated.await.expect("answered directly, not left waiting on the proxy").expect("the update is answered");
}

/// The `X-SLURM-USER-TOKEN` header of a request's head, if it has one.
fn token_of(request: &str) -> Option<String> {
    request.lines().find_map(|line| {
        let (name, value) = line.split_once(':')?;
        name.eq_ignore_ascii_case("x-slurm-user-token").then(|| value.trim().to_owned())
    })
}
