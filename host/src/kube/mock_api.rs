//! A mocked API server for the act layers' tests (kube's `tower-test`, as kube-rs's controller-rs
//! does): a [`Client`] whose every request is checked against a script of expected calls, each
//! answered with a status and a JSON body. A call the script does not expect fails the test.

use http::{Request, Response};
use kube::Client;
use kube::client::Body;
use tower_test::mock::{self, Handle};

/// One expected call: method, path (with its query, if any), and the answer.
pub struct Expect {
    pub method: &'static str,
    pub path: String,
    pub status: u16,
    pub answer: serde_json::Value,
}

impl Expect {
    pub fn call(method: &'static str, path: impl Into<String>, status: u16, answer: serde_json::Value) -> Self {
        Self { method, path: path.into(), status, answer }
    }
}

/// A client of the mocked API server, and the task that plays `script`; awaiting the task returns
/// the request bodies received, in order, once every expected call has come. Drop every holder of
/// the client before awaiting it: a call missing then fails the test instead of waiting for ever.
pub fn serve(script: Vec<Expect>) -> (Client, tokio::task::JoinHandle<Vec<serde_json::Value>>) {
    let (service, handle) = mock::pair::<Request<Body>, Response<Body>>();
    let client = Client::new(service, "default");
    (client, tokio::spawn(play(handle, script)))
}

async fn play(mut handle: Handle<Request<Body>, Response<Body>>, script: Vec<Expect>) -> Vec<serde_json::Value> {
    let mut bodies = Vec::new();
    for expected in script {
        let (request, respond) = handle.next_request().await.expect("the client sent the expected request");
        let path = request.uri().path_and_query().map(ToString::to_string).unwrap_or_default();
        assert_eq!((request.method().as_str(), path.as_str()), (expected.method, expected.path.as_str()));
        let bytes = request.into_body().collect_bytes().await.expect("a request body");
        bodies.push(serde_json::from_slice(&bytes).unwrap_or(serde_json::Value::Null));
        let answer = serde_json::to_vec(&expected.answer).expect("JSON");
        let response = Response::builder().status(expected.status).body(Body::from(answer)).expect("a response");
        respond.send_response(response);
    }
    bodies
}
