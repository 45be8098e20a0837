//! The HTTP listener under axum's router: plain TCP or TLS (rustls), HTTP/1.1, with a cap on
//! open connections and timeouts that keep a slow or hostile client from holding the server.
//!
//! `axum::serve` has neither a header-read timeout nor a connection cap, so the accept loop is
//! this module's, driving each connection with hyper directly:
//!
//! - **Connection cap**: a connection is accepted only with one of `max_connections` permits in
//!   hand; past the cap, new connections wait in the kernel's backlog until one closes.
//! - **Header read**: a request's head must arrive whole within `header_read_timeout` of its
//!   first byte (of the connection's opening, for the first request, TLS handshake included).
//!   A client that trickles a header a byte at a time is cut off there (slowloris).
//! - **Body read**: a request's body must arrive whole within `body_read_timeout` of its head;
//!   past it the handler sees a failed body (408).
//! - **Idle**: a kept-alive connection waiting for its next request is closed after
//!   `idle_timeout`; so is one whose client stops reading a response (a write blocked that
//!   long). A handler that is working (a log being followed) is never cut off.
//!
//! Each connection has a [`Clock`]: the I/O wrapper ([`Watched`]) notes the first byte of a
//! request and blocked writes, the service notes when a request is being served and when its
//! response has been sent, and a small timer per connection closes it once its phase has lasted
//! too long. Handlers see the peer address as axum's `ConnectInfo<SocketAddr>`, as with
//! `axum::serve`.

use std::convert::Infallible;
use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use axum::body::{Body, Bytes};
use axum::extract::ConnectInfo;
use http_body::{Body as HttpBody, Frame, SizeHint};
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{watch, Semaphore};
use tokio_rustls::TlsAcceptor;
use tower::ServiceExt;

use crate::config::{HttpSettings, Stop};

/// Serves `app` on `listener` until `stop` leaves `Running`; then stops accepting, asks open
/// connections to close once their current request is answered, and waits for them (each is
/// bounded by its timeouts).
pub(crate) async fn serve(
    listener: TcpListener,
    tls: Option<TlsAcceptor>,
    settings: HttpSettings,
    app: axum::Router,
    mut stop: watch::Receiver<Stop>,
) {
    let cap = settings.max_connections.clamp(1, Semaphore::MAX_PERMITS) as u32;
    let permits = Arc::new(Semaphore::new(cap as usize));
    let (closing, closing_rx) = watch::channel(false);
    let settings = Arc::new(settings);
    loop {
        let permit = tokio::select! {
            p = permits.clone().acquire_owned() => match p {
                Ok(p) => p,
                Err(_) => break,
            },
            _ = stopped(&mut stop) => break,
        };
        let (stream, peer) = tokio::select! {
            r = listener.accept() => match r {
                Ok(x) => x,
                Err(e) => {
                    // Out of file descriptors and the like: wait a little rather than spin.
                    if !is_per_connection(&e) {
                        eprintln!("weir serve: cannot accept a connection: {e}");
                        tokio::time::sleep(Duration::from_millis(100)).await;
                    }
                    continue;
                }
            },
            _ = stopped(&mut stop) => break,
        };
        let _ = stream.set_nodelay(true);
        let (tls, settings, app, closing) = (tls.clone(), settings.clone(), app.clone(), closing_rx.clone());
        tokio::spawn(async move {
            connection(stream, peer, tls, &settings, app, closing).await;
            drop(permit);
        });
    }
    drop(listener);
    let _ = closing.send(true);
    let _ = permits.acquire_many(cap).await;
}

async fn stopped(rx: &mut watch::Receiver<Stop>) {
    while *rx.borrow_and_update() == Stop::Running {
        if rx.changed().await.is_err() {
            // The server is gone without saying how: stop too.
            return;
        }
    }
}

fn is_per_connection(e: &std::io::Error) -> bool {
    use std::io::ErrorKind::*;
    matches!(e.kind(), ConnectionRefused | ConnectionAborted | ConnectionReset)
}

async fn connection(
    stream: TcpStream,
    peer: SocketAddr,
    tls: Option<TlsAcceptor>,
    settings: &HttpSettings,
    app: axum::Router,
    closing: watch::Receiver<bool>,
) {
    let clock = Arc::new(Clock::new());
    match tls {
        None => {
            drive(Watched { io: stream, clock: clock.clone() }, peer, settings, app, clock, closing).await
        }
        Some(acceptor) => {
            // The handshake counts against the first request's header time. A failed or too
            // slow handshake: the client learns it from the closed socket.
            let handshake = tokio::time::timeout(settings.header_read_timeout, acceptor.accept(stream));
            if let Ok(Ok(stream)) = handshake.await {
                drive(Watched { io: stream, clock: clock.clone() }, peer, settings, app, clock, closing).await
            }
        }
    }
}

async fn drive<I>(
    io: Watched<I>,
    peer: SocketAddr,
    settings: &HttpSettings,
    app: axum::Router,
    clock: Arc<Clock>,
    mut closing: watch::Receiver<bool>,
) where
    I: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let body_timeout = settings.body_read_timeout;
    let service_clock = clock.clone();
    let service = hyper::service::service_fn(move |mut req: hyper::Request<Incoming>| {
        service_clock.serving();
        req.extensions_mut().insert(ConnectInfo(peer));
        let req = req.map(|body| {
            if body.is_end_stream() {
                Body::new(body)
            } else {
                Body::new(Deadline::new(body, body_timeout))
            }
        });
        let sent = Sent(service_clock.clone());
        let app = app.clone();
        async move {
            let resp = match app.oneshot(req).await {
                Ok(r) => r,
                Err(never) => match never {},
            };
            Ok::<_, Infallible>(resp.map(|body| Body::new(Tracked { inner: body, _sent: sent })))
        }
    });
    let mut builder = hyper::server::conn::http1::Builder::new();
    // The header timeout is the clock's (from a request's first byte); hyper's own would also
    // run while a kept-alive connection waits, which is the idle timeout's business.
    builder.header_read_timeout(None);
    let conn = builder.serve_connection(TokioIo::new(io), service);
    tokio::pin!(conn);
    let tick = settings.header_read_timeout.min(settings.idle_timeout).min(settings.body_read_timeout) / 10;
    let mut ticker = tokio::time::interval(tick.clamp(Duration::from_millis(20), Duration::from_secs(1)));
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut asked_to_close = false;
    loop {
        tokio::select! {
            _ = conn.as_mut() => return,
            _ = ticker.tick() => {
                if clock.overdue(settings, Instant::now()) {
                    // Dropping the connection closes the socket.
                    return;
                }
            }
            _ = closing.changed(), if !asked_to_close => {
                asked_to_close = true;
                conn.as_mut().graceful_shutdown();
            }
        }
    }
}

/// Where a connection is in its request cycle, and since when.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Phase {
    /// Kept alive, waiting for the first byte of the next request (idle timeout).
    Waiting(Instant),
    /// A request's head is arriving (header timeout); a new connection starts here.
    Head(Instant),
    /// A request is being served: its body read (the body's own deadline), its handler run,
    /// its response written (a write blocked longer than the idle timeout ends it).
    Serving,
}

#[derive(Debug)]
struct Clock {
    phase: Mutex<Phase>,
    /// Since when a write has been waiting for the client to read.
    write_blocked: Mutex<Option<Instant>>,
}

impl Clock {
    fn new() -> Clock {
        Clock { phase: Mutex::new(Phase::Head(Instant::now())), write_blocked: Mutex::new(None) }
    }

    fn set(&self, phase: Phase) {
        if let Ok(mut p) = self.phase.lock() {
            *p = phase;
        }
    }

    fn read_some(&self) {
        if let Ok(mut p) = self.phase.lock() {
            if matches!(*p, Phase::Waiting(_)) {
                *p = Phase::Head(Instant::now());
            }
        }
    }

    fn serving(&self) {
        self.set(Phase::Serving);
    }

    fn sent(&self) {
        self.set(Phase::Waiting(Instant::now()));
    }

    fn write_blocked(&self, blocked: bool) {
        if let Ok(mut w) = self.write_blocked.lock() {
            match (blocked, *w) {
                (true, None) => *w = Some(Instant::now()),
                (false, Some(_)) => *w = None,
                _ => {}
            }
        }
    }

    /// Whether the connection has been in its phase longer than the settings allow.
    fn overdue(&self, s: &HttpSettings, now: Instant) -> bool {
        let phase = self.phase.lock().map(|p| *p).unwrap_or(Phase::Serving);
        let blocked = self.write_blocked.lock().map(|w| *w).unwrap_or(None);
        let past = |since: Instant, limit: Duration| now.saturating_duration_since(since) >= limit;
        match phase {
            Phase::Waiting(since) => past(since, s.idle_timeout),
            Phase::Head(since) => past(since, s.header_read_timeout),
            Phase::Serving => blocked.is_some_and(|since| past(since, s.idle_timeout)),
        }
    }
}

/// The connection's I/O, reporting to its [`Clock`].
struct Watched<I> {
    io: I,
    clock: Arc<Clock>,
}

impl<I: AsyncRead + Unpin> AsyncRead for Watched<I> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let before = buf.filled().len();
        let r = Pin::new(&mut self.io).poll_read(cx, buf);
        if matches!(r, Poll::Ready(Ok(()))) && buf.filled().len() > before {
            self.clock.read_some();
        }
        r
    }
}

impl<I: AsyncWrite + Unpin> AsyncWrite for Watched<I> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        let r = Pin::new(&mut self.io).poll_write(cx, buf);
        self.clock.write_blocked(r.is_pending());
        r
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        let r = Pin::new(&mut self.io).poll_write_vectored(cx, bufs);
        self.clock.write_blocked(r.is_pending());
        r
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        let r = Pin::new(&mut self.io).poll_flush(cx);
        self.clock.write_blocked(r.is_pending());
        r
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.io).poll_shutdown(cx)
    }
}

/// The request body did not arrive within the body-read timeout.
#[derive(Debug)]
pub(crate) struct BodyTimeout(pub Duration);

impl std::fmt::Display for BodyTimeout {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "the request body did not arrive within {} s", self.0.as_secs_f64())
    }
}

impl std::error::Error for BodyTimeout {}

/// A request body that fails once its deadline passes. The timer is set only when the body
/// first has to be waited for: a small body usually arrives with its head and never needs one.
struct Deadline {
    inner: Incoming,
    limit: Duration,
    until: tokio::time::Instant,
    sleep: Option<Pin<Box<tokio::time::Sleep>>>,
}

impl Deadline {
    fn new(inner: Incoming, limit: Duration) -> Deadline {
        Deadline { inner, limit, until: tokio::time::Instant::now() + limit, sleep: None }
    }
}

impl HttpBody for Deadline {
    type Data = Bytes;
    type Error = axum::BoxError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        match Pin::new(&mut self.inner).poll_frame(cx) {
            Poll::Ready(frame) => Poll::Ready(frame.map(|f| f.map_err(Into::into))),
            Poll::Pending => {
                let until = self.until;
                let sleep = self.sleep.get_or_insert_with(|| Box::pin(tokio::time::sleep_until(until)));
                match sleep.as_mut().poll(cx) {
                    Poll::Ready(()) => Poll::Ready(Some(Err(Box::new(BodyTimeout(self.limit))))),
                    Poll::Pending => Poll::Pending,
                }
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

/// Tells the clock when the response has been sent (hyper drops the body then).
struct Sent(Arc<Clock>);

impl Drop for Sent {
    fn drop(&mut self) {
        self.0.sent();
    }
}

struct Tracked {
    inner: Body,
    _sent: Sent,
}

impl HttpBody for Tracked {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        Pin::new(&mut self.inner).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

/// Whether a body-read failure was the body-read timeout.
pub(crate) fn is_body_timeout(e: &(dyn std::error::Error + 'static)) -> bool {
    let mut cur = Some(e);
    while let Some(e) = cur {
        if e.downcast_ref::<BodyTimeout>().is_some() {
            return true;
        }
        cur = e.source();
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings() -> HttpSettings {
        HttpSettings {
            header_read_timeout: Duration::from_secs(10),
            body_read_timeout: Duration::from_secs(30),
            idle_timeout: Duration::from_secs(60),
            max_connections: 4,
        }
    }

    #[test]
    fn each_phase_has_its_own_limit() {
        let (s, t0) = (settings(), Instant::now());
        let c = Clock::new();
        c.set(Phase::Head(t0));
        assert!(!c.overdue(&s, t0 + Duration::from_secs(9)));
        assert!(c.overdue(&s, t0 + Duration::from_secs(10)));
        c.set(Phase::Waiting(t0));
        assert!(!c.overdue(&s, t0 + Duration::from_secs(59)));
        assert!(c.overdue(&s, t0 + Duration::from_secs(60)));
        // A byte of the next request starts its header time; serving has no limit of its own
        // unless a write is blocked.
        c.read_some();
        assert!(matches!(*c.phase.lock().expect("phase"), Phase::Head(_)));
        c.serving();
        assert!(!c.overdue(&s, t0 + Duration::from_secs(3600)));
        c.write_blocked(true);
        assert!(c.overdue(&s, Instant::now() + Duration::from_secs(61)));
        c.write_blocked(false);
        assert!(!c.overdue(&s, Instant::now() + Duration::from_secs(61)));
        c.sent();
        assert!(matches!(*c.phase.lock().expect("phase"), Phase::Waiting(_)));
    }
}
