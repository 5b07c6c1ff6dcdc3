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
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("a loopback port");
    let address = listener.local_addr().expect("its address");
    tokio::spawn(async move {
        while let Ok((mut stream, _)) = listener.accept().await {
            let mut request = vec![0u8; 16 << 10];
            let read = stream.read(&mut request).await.unwrap_or_default();
            let head = String::from_utf8_lossy(&request[..read]).lines().next().unwrap_or_default().to_owned();
            tokio::spawn(answer(stream, head));
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
