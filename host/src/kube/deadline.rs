//! A deadline for every Kubernetes request but a watch. kube's client sets no read timeout, and a
//! request caught in an API server restart (its connection accepted, never answered) would hold its
//! caller until the host restarts: a pod's reconcile among them, so that pod would wait as long.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use http::Request;
use tower::{BoxError, Layer, Service};

/// How long a request that is not a watch may go unanswered: far above an answer under load (the
/// slowest the suite sees is well under a second), far below the two minutes a restart may not cost.
pub const REQUEST_DEADLINE: Duration = Duration::from_secs(15);

/// Wraps a client's service in [`Deadline`].
#[derive(Debug, Clone, Copy)]
pub struct DeadlineLayer(pub Duration);

impl<S> Layer<S> for DeadlineLayer {
    type Service = Deadline<S>;

    fn layer(&self, inner: S) -> Deadline<S> {
        Deadline { inner, limit: self.0 }
    }
}

/// A request's answer (its headers) within the limit, or an error saying there was none; a watch
/// streams for as long as it lasts (kube-runtime's watcher has its own idle timeout).
#[derive(Debug, Clone)]
pub struct Deadline<S> {
    inner: S,
    limit: Duration,
}

impl<S, B> Service<Request<B>> for Deadline<S>
where
    S: Service<Request<B>>,
    S::Error: Into<BoxError>,
    S::Future: Send + 'static,
{
    type Response = S::Response;
    type Error = BoxError;
    type Future = Pin<Box<dyn Future<Output = Result<S::Response, BoxError>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        self.inner.poll_ready(cx).map_err(Into::into)
    }

    fn call(&mut self, request: Request<B>) -> Self::Future {
        let watch = is_watch(request.uri());
        let limit = self.limit;
        let answer = self.inner.call(request);
        Box::pin(async move {
            if watch {
                return answer.await.map_err(Into::into);
            }
            match tokio::time::timeout(limit, answer).await {
                Ok(answered) => answered.map_err(Into::into),
                Err(_) => Err(format!("the API server did not answer within {} s", limit.as_secs()).into()),
            }
        })
    }
}

fn is_watch(uri: &http::Uri) -> bool {
    uri.query().is_some_and(|query| query.split('&').any(|pair| pair == "watch=true" || pair == "watch=1"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(uri: &str) -> Request<()> {
        Request::builder().uri(uri).body(()).expect("a request")
    }

    #[tokio::test]
    async fn an_unanswered_request_fails_at_its_deadline_and_a_watch_does_not() {
        let never = tower::service_fn(|_: Request<()>| futures::future::pending::<Result<(), BoxError>>());
        let mut deadline = DeadlineLayer(Duration::from_millis(20)).layer(never);
        let write = deadline.call(request("/api/v1/namespaces/ml/pods/a/status"));
        let error = write.await.expect_err("no answer, no wait for ever");
        assert!(error.to_string().contains("did not answer"), "{error}");
        let watch = deadline.call(request("/api/v1/pods?labelSelector=x&watch=true&resourceVersion=7"));
        let waited = tokio::time::timeout(Duration::from_millis(100), watch).await;
        assert!(waited.is_err(), "a watch streams for as long as it lasts");
    }

    #[test]
    fn only_watches_are_watches() {
        assert!(is_watch(&"/api/v1/pods?watch=true".parse().unwrap()));
        assert!(is_watch(&"/api/v1/pods?a=b&watch=1".parse().unwrap()));
        assert!(!is_watch(&"/api/v1/pods?watchers=true".parse().unwrap()));
        assert!(!is_watch(&"/api/v1/pods".parse().unwrap()));
    }
}
