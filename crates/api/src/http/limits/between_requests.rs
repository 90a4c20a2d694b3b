//! A request head that stalls after the first request of a connection.
//!
//! actix's head deadline (`client_request_timeout`) covers a connection's
//! first request only, and its keep-alive timer stops at the first byte of
//! the next request: a client that sent a request, read its answer, then
//! sent part of another head and nothing more held its connection forever.
//! So each connection's socket is [`Guarded`]: a head that begins while no
//! request of the connection is in flight (the middleware
//! [`count_in_flight`] counts them) has `HTTP_HEADER_TIMEOUT_MS` to become
//! a request; past that the connection is answered 408, as a problem, and
//! closed. A first request meets actix's own deadline first.

use std::cell::Cell;
use std::io;
use std::pin::Pin;
use std::rc::Rc;
use std::sync::OnceLock;
use std::task::{Context, Poll};
use std::time::Duration;

use actix_web::Error;
use actix_web::body::MessageBody;
use actix_web::dev::{ServiceRequest, ServiceResponse};
use actix_web::middleware::Next;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::time::Sleep;

use super::holding::Holding;
use crate::http::listener::LINGER;
use crate::problem::ApiError;

/// The requests of one connection in flight: from the moment the app
/// receives one until its response has been written or dropped. Shared by
/// the connection's [`Guarded`] socket and [`count_in_flight`] (as
/// connection data).
#[derive(Debug, Default)]
pub struct InFlight {
    /// Requests in flight now.
    now: Cell<usize>,
    /// Requests the connection has started, ever: a head that became a
    /// request moved it on.
    started: Cell<u64>,
    /// Whether a request was answered before its body had all arrived.
    answered_unfinished: Cell<bool>,
}

impl InFlight {
    /// Marks the connection as answered before its request's body had all
    /// arrived: actix answers it `Connection: close`, and [`Guarded`]
    /// closes it [`LINGER`] after that answer, whatever the client still
    /// sends (actix's own linger does not close every such connection
    /// under load).
    pub fn answered_unfinished(&self) {
        self.answered_unfinished.set(true);
    }
}

/// A connection's socket, failing its reads (after a last 408) once a
/// request head has begun and not become a request within the deadline.
#[derive(Debug)]
pub struct Guarded<T> {
    io: T,
    in_flight: Rc<InFlight>,
    head_timeout: Duration,
    /// Armed when bytes arrive while no request is in flight.
    deadline: Option<Pin<Box<Sleep>>>,
    /// The connection's started requests when the deadline was armed: once
    /// a request starts after that, the head it guarded has arrived.
    armed_at: u64,
    /// Armed once the connection was answered with its request's body
    /// unfinished and nothing is in flight: past it, reads and flushes
    /// fail, and actix drops the connection.
    closing: Option<Pin<Box<Sleep>>>,
}

impl<T> Guarded<T> {
    /// `io`, whose heads between requests get `head_timeout` each.
    pub fn new(io: T, head_timeout: Duration) -> Self {
        Self {
            io,
            in_flight: Rc::default(),
            head_timeout,
            deadline: None,
            armed_at: 0,
            closing: None,
        }
    }

    /// Whether the connection, answered with its request's body
    /// unfinished, is past its [`LINGER`]; arms that deadline the first
    /// time it is asked once nothing is in flight.
    fn past_linger(&mut self, cx: &mut Context<'_>) -> bool {
        if self.closing.is_none()
            && self.in_flight.answered_unfinished.get()
            && self.in_flight.now.get() == 0
        {
            self.closing = Some(Box::pin(tokio::time::sleep(LINGER)));
        }
        self.closing
            .as_mut()
            .is_some_and(|closing| closing.as_mut().poll(cx).is_ready())
    }

    /// The count [`count_in_flight`] keeps for this connection.
    pub fn in_flight(&self) -> Rc<InFlight> {
        self.in_flight.clone()
    }
}

/// The error that ends a connection kept past its [`LINGER`].
fn lingered() -> io::Error {
    io::Error::new(
        io::ErrorKind::ConnectionAborted,
        "answered before its request body arrived, and lingered",
    )
}

/// What a connection whose head did not arrive in time is sent before it
/// is closed.
fn late_head_answer() -> &'static [u8] {
    static ANSWER: OnceLock<Vec<u8>> = OnceLock::new();
    ANSWER.get_or_init(|| {
        let problem = ApiError::RequestTimeout(
            "the request head did not arrive within HTTP_HEADER_TIMEOUT_MS".to_owned(),
        )
        .problem();
        let body = serde_json::to_vec(&problem).unwrap_or_default();
        let mut answer = format!(
            "HTTP/1.1 408 Request Timeout\r\ncontent-type: {}\r\ncontent-length: {}\r\n\
             connection: close\r\n\r\n",
            crate::problem::PROBLEM_JSON,
            body.len()
        )
        .into_bytes();
        answer.extend_from_slice(&body);
        answer
    })
}

impl<T: AsyncRead + AsyncWrite + Unpin> AsyncRead for Guarded<T> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        if this.past_linger(cx) {
            return Poll::Ready(Err(lingered()));
        }
        let idle = this.in_flight.now.get() == 0;
        // The head the deadline guarded became a request (actix need not
        // read while that request is served, so it may be over already):
        // an idle connection after its answer has no head pending.
        if !idle || this.in_flight.started.get() != this.armed_at {
            this.deadline = None;
        }
        let before = buf.filled().len();
        let read = Pin::new(&mut this.io).poll_read(cx, buf);
        match &read {
            Poll::Ready(Ok(())) if idle && buf.filled().len() > before => {
                if this.deadline.is_none() {
                    this.deadline = Some(Box::pin(tokio::time::sleep(this.head_timeout)));
                    this.armed_at = this.in_flight.started.get();
                }
            }
            Poll::Pending => {
                if let Some(deadline) = this.deadline.as_mut()
                    && deadline.as_mut().poll(cx).is_ready()
                {
                    this.deadline = None;
                    // Best effort: the socket has room for this much, or the
                    // client is not reading anyway.
                    let _ = Pin::new(&mut this.io).poll_write(cx, late_head_answer());
                    return Poll::Ready(Err(io::Error::new(
                        io::ErrorKind::TimedOut,
                        "a request head did not arrive within HTTP_HEADER_TIMEOUT_MS",
                    )));
                }
            }
            Poll::Ready(_) => {}
        }
        read
    }
}

impl<T: AsyncWrite + Unpin> AsyncWrite for Guarded<T> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().io).poll_write(cx, buf)
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        if this.past_linger(cx) {
            return Poll::Ready(Err(lingered()));
        }
        Pin::new(&mut this.io).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().io).poll_shutdown(cx)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().io).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }
}

/// One request in flight on its connection, for as long as it lives.
struct Ticket(Rc<InFlight>);

impl Ticket {
    fn take(in_flight: &Rc<InFlight>) -> Self {
        in_flight.now.set(in_flight.now.get().saturating_add(1));
        in_flight
            .started
            .set(in_flight.started.get().wrapping_add(1));
        Self(in_flight.clone())
    }
}

impl Drop for Ticket {
    fn drop(&mut self) {
        self.0.now.set(self.0.now.get().saturating_sub(1));
    }
}

/// Middleware, outermost: counts the request as in flight on its
/// connection until its response is written or dropped. A request of a
/// connection that is not [`Guarded`] passes uncounted.
pub async fn count_in_flight(
    req: ServiceRequest,
    next: Next<impl MessageBody + 'static>,
) -> Result<ServiceResponse<impl MessageBody>, Error> {
    let ticket = req.conn_data::<Rc<InFlight>>().map(Ticket::take);
    let res = next.call(req).await?;
    Ok(res
        .map_into_boxed_body()
        .map_body(|_, body| Holding::new(body, ticket)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_late_head_answer_is_a_408_problem() {
        let text = String::from_utf8_lossy(late_head_answer()).into_owned();
        assert!(
            text.starts_with("HTTP/1.1 408 Request Timeout\r\n"),
            "{text}"
        );
        assert!(text.contains("content-type: application/problem+json\r\n"));
        let (_, body) = text.split_once("\r\n\r\n").unwrap();
        let problem: serde_json::Value = serde_json::from_str(body).unwrap();
        assert_eq!(problem["type"], "urn:chatlab:problem:request-timeout");
        assert!(text.contains(&format!("content-length: {}\r\n", body.len())));
    }
}
