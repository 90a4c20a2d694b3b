//! A response body that keeps something of its request alive until the
//! body is dropped, which actix does once it has written it (or given up
//! on it): the request's payload ([`super::bound_body`]), its place among
//! the connection's requests in flight ([`super::count_in_flight`]).

use std::pin::Pin;
use std::task::{Context, Poll};

use actix_web::body::{BodySize, BoxBody, MessageBody};
use bytes::Bytes;

/// `body`, holding `held` for as long as it lives.
pub struct Holding<T> {
    body: BoxBody,
    _held: T,
}

impl<T> Holding<T> {
    /// `body`, holding `held`.
    pub fn new(body: BoxBody, held: T) -> Self {
        Self { body, _held: held }
    }
}

impl<T: Unpin> MessageBody for Holding<T> {
    type Error = <BoxBody as MessageBody>::Error;

    fn size(&self) -> BodySize {
        self.body.size()
    }

    fn poll_next(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Bytes, Self::Error>>> {
        Pin::new(&mut self.get_mut().body).poll_next(cx)
    }
}
