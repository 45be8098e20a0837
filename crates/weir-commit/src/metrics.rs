//! Counters of the store's requests and of the failures its client retries.
//!
//! object_store's S3 client retries 5xx (503 SlowDown among them), 429 and timeouts with
//! exponential backoff and decorrelated jitter, bounded by `RetrySettings`. It offers no hook
//! to count them, so the store's HTTP service is wrapped: every response and transport error
//! passes here before the client decides to retry. The server exports these in /metrics.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use object_store::client::{
    HttpClient, HttpConnector, HttpError, HttpErrorKind, HttpRequest, HttpResponse, HttpService,
};
use object_store::ClientOptions;

/// Live counters, shared by every clone of a [`crate::Store`].
#[derive(Debug, Default)]
pub struct StoreMetrics {
    requests: AtomicU64,
    slowdown: AtomicU64,
    server_errors: AtomicU64,
    throttled: AtomicU64,
    timeouts: AtomicU64,
    connect_errors: AtomicU64,
}

/// A snapshot of [`StoreMetrics`]. Each failure counted here is retried by the store client
/// unless its retry bound is reached (then the operation fails with the last error).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StoreCounts {
    /// HTTP requests sent to the store (every try, retries included).
    pub requests: u64,
    /// 503 answers (S3's SlowDown: the request rate of a prefix is too high).
    pub slowdown: u64,
    /// Other 5xx answers.
    pub server_errors: u64,
    /// 429 answers.
    pub throttled: u64,
    /// Requests that timed out or were interrupted.
    pub timeouts: u64,
    /// Connections that could not be made.
    pub connect_errors: u64,
}

impl StoreCounts {
    /// Every counted failure: the retries the client made or tried to make.
    pub fn retryable_failures(&self) -> u64 {
        self.slowdown + self.server_errors + self.throttled + self.timeouts + self.connect_errors
    }
}

impl StoreMetrics {
    pub fn snapshot(&self) -> StoreCounts {
        let get = |c: &AtomicU64| c.load(Ordering::Relaxed);
        StoreCounts {
            requests: get(&self.requests),
            slowdown: get(&self.slowdown),
            server_errors: get(&self.server_errors),
            throttled: get(&self.throttled),
            timeouts: get(&self.timeouts),
            connect_errors: get(&self.connect_errors),
        }
    }

    pub(crate) fn on_response(&self, status: u16) {
        self.requests.fetch_add(1, Ordering::Relaxed);
        let counter = match status {
            503 => &self.slowdown,
            429 => &self.throttled,
            500..=599 => &self.server_errors,
            _ => return,
        };
        counter.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn on_transport_error(&self, kind: HttpErrorKind) {
        self.requests.fetch_add(1, Ordering::Relaxed);
        match kind {
            HttpErrorKind::Timeout | HttpErrorKind::Interrupted => {
                self.timeouts.fetch_add(1, Ordering::Relaxed);
            }
            HttpErrorKind::Connect | HttpErrorKind::Request => {
                self.connect_errors.fetch_add(1, Ordering::Relaxed);
            }
            _ => {}
        }
    }
}

/// The store's HTTP service: reqwest, with every answer counted.
#[derive(Debug)]
struct CountingService {
    inner: reqwest::Client,
    metrics: Arc<StoreMetrics>,
}

#[async_trait::async_trait]
impl HttpService for CountingService {
    async fn call(&self, req: HttpRequest) -> Result<HttpResponse, HttpError> {
        let result = self.inner.call(req).await;
        match &result {
            Ok(resp) => self.metrics.on_response(resp.status().as_u16()),
            Err(e) => self.metrics.on_transport_error(e.kind()),
        }
        result
    }
}

/// Builds the counting service for object_store's S3 client. The reqwest client carries the
/// timeouts (object_store's `ClientOptions` are not used with a custom connector).
#[derive(Debug)]
pub(crate) struct CountingConnector {
    http: reqwest::Client,
    metrics: Arc<StoreMetrics>,
}

impl CountingConnector {
    pub(crate) fn new(http: reqwest::Client, metrics: Arc<StoreMetrics>) -> Self {
        CountingConnector { http, metrics }
    }
}

impl HttpConnector for CountingConnector {
    fn connect(&self, _options: &ClientOptions) -> object_store::Result<HttpClient> {
        Ok(HttpClient::new(CountingService { inner: self.http.clone(), metrics: self.metrics.clone() }))
    }
}
