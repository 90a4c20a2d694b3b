//! How long a request body may take, and what becomes of a connection
//! whose body never ends.
//!
//! [`bound_body`] gives a body `HTTP_BODY_TIMEOUT_MS` from the moment its
//! headers were read; a handler reading it past that gets an error the
//! JSON readers turn into 408 (with `Connection: close`).
//!
//! The connection is the other half. actix's HTTP/1 dispatcher, answering
//! a request whose body has not all arrived, closes the connection after
//! the response when the body is still owned by someone; when the body was
//! dropped (the handler never read it, or gave up at the deadline) and is
//! chunked, it instead keeps the connection to drain the rest, with no
//! deadline at all, so a chunked body that never ends held its connection
//! forever. So [`bound_body`] keeps the body alive inside the response
//! until the response has been written: the dispatcher then always
//! answers `Connection: close` to a request whose body is unfinished,
//! lingers `client_disconnect_timeout` reading what still comes, and
//! closes. Under load it does not close every such connection (a flood of
//! 2,000 stalled chunked requests left about one in ten open), so when
//! the response has been written and the body has not all arrived, the
//! connection is marked ([`InFlight::answered_unfinished`]) and its
//! [`super::Guarded`] socket fails it one `LINGER` later. A body that
//! arrived to its end changes nothing (keep-alive as usual).

use std::cell::RefCell;
use std::io;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll};
use std::time::Duration;

use actix_web::body::{EitherBody, MessageBody};
use actix_web::dev::{Payload, ServiceRequest, ServiceResponse};
use actix_web::error::PayloadError;
use actix_web::http::header::{self, HeaderMap};
use actix_web::middleware::Next;
use actix_web::{Error, HttpMessage, web};
use bytes::Bytes;
use futures_util::Stream;
use tokio::time::{Instant, Sleep};

use super::between_requests::InFlight;
use super::holding::Holding;

/// The longest a body may take, as app data for [`bound_body`].
#[derive(Debug, Clone, Copy)]
pub struct BodyTimeout(pub Duration);

/// The message of the I/O error a late body ends with; the JSON readers
/// turn it into 408.
pub const BODY_TIMEOUT_MESSAGE: &str = "the request body did not arrive in time";

/// A request's payload, shared by the handler, which may read it, and the
/// response, which keeps it until it is written.
type SharedPayload = Rc<RefCell<Payload>>;

/// Middleware: bounds the time a request's body may take, counted from
/// the moment its headers were read, and keeps the body until the
/// response is written, so that a connection whose body is unfinished is
/// closed after its answer (see the module's documentation). Requests
/// without a body pass untouched (no timer).
pub async fn bound_body(
    mut req: ServiceRequest,
    next: Next<impl MessageBody + 'static>,
) -> Result<ServiceResponse<EitherBody<impl MessageBody, KeptBody>>, Error> {
    let limit = req.app_data::<web::Data<BodyTimeout>>().map(|t| t.0);
    let Some(limit) = limit.filter(|_| carries_body(req.headers())) else {
        return next
            .call(req)
            .await
            .map(ServiceResponse::map_into_left_body);
    };
    let payload: SharedPayload = Rc::new(RefCell::new(req.take_payload()));
    let bounded: Pin<Box<dyn Stream<Item = Result<Bytes, PayloadError>>>> = Box::pin(Deadline {
        inner: payload.clone(),
        sleep: Box::pin(tokio::time::sleep_until(Instant::now() + limit)),
        expired: false,
    });
    req.set_payload(Payload::from(bounded));
    // An error here (no middleware inside this one returns one: handlers'
    // errors are responses by now) drops the payload with it.
    let connection = req.conn_data::<Rc<InFlight>>().cloned();
    let res = next.call(req).await?;
    let kept = KeptPayload {
        payload,
        connection,
    };
    Ok(res
        .map_into_boxed_body()
        .map_body(|_, body| Holding::new(body, kept))
        .map_into_right_body())
}

/// A request's payload, kept by its response until the response has been
/// written; then, when the body has not all arrived, its connection is
/// marked to be closed (see [`InFlight::answered_unfinished`]).
pub struct KeptPayload {
    payload: SharedPayload,
    connection: Option<Rc<InFlight>>,
}

impl Drop for KeptPayload {
    fn drop(&mut self) {
        if let Some(connection) = &self.connection
            && !arrived(&self.payload)
        {
            connection.answered_unfinished();
        }
    }
}

/// Whether all of `payload` has arrived: what has is read and discarded,
/// without waiting for more.
fn arrived(payload: &SharedPayload) -> bool {
    let Ok(mut payload) = payload.try_borrow_mut() else {
        return false;
    };
    let mut cx = Context::from_waker(futures_util::task::noop_waker_ref());
    loop {
        match Pin::new(&mut *payload).poll_next(&mut cx) {
            Poll::Ready(Some(Ok(_))) => {}
            Poll::Ready(None) => return true,
            Poll::Ready(Some(Err(_))) | Poll::Pending => return false,
        }
    }
}

/// Whether a request with these headers has a body (`Transfer-Encoding`,
/// or a `Content-Length` other than 0).
pub fn carries_body(headers: &HeaderMap) -> bool {
    headers.contains_key(header::TRANSFER_ENCODING)
        || headers
            .get(header::CONTENT_LENGTH)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.trim() != "0")
}

/// A response body that owns its request's payload until it is dropped,
/// after the dispatcher has written it and decided, seeing the payload
/// still owned and unfinished, to close the connection.
pub type KeptBody = Holding<KeptPayload>;

/// A payload that fails with `TimedOut` once its deadline passes.
struct Deadline {
    inner: SharedPayload,
    sleep: Pin<Box<Sleep>>,
    expired: bool,
}

impl Stream for Deadline {
    type Item = Result<Bytes, PayloadError>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        if self.expired {
            return Poll::Ready(None);
        }
        let polled = match self.inner.try_borrow_mut() {
            Ok(mut inner) => Pin::new(&mut *inner).poll_next(cx),
            // Only this stream ever borrows it; were it borrowed, the body
            // could not be read.
            Err(_) => Poll::Ready(Some(Err(PayloadError::Io(io::Error::other(
                "the request body is being read elsewhere",
            ))))),
        };
        if let Poll::Ready(item) = polled {
            return Poll::Ready(item);
        }
        match self.sleep.as_mut().poll(cx) {
            Poll::Ready(()) => {
                self.expired = true;
                Poll::Ready(Some(Err(PayloadError::Io(io::Error::new(
                    io::ErrorKind::TimedOut,
                    BODY_TIMEOUT_MESSAGE,
                )))))
            }
            Poll::Pending => Poll::Pending,
        }
    }
}

/// Whether a payload error is [`bound_body`]'s deadline.
pub fn is_body_timeout(err: &PayloadError) -> bool {
    matches!(err, PayloadError::Io(e) if e.kind() == io::ErrorKind::TimedOut)
}
