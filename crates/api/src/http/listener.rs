//! How a listener is bound and served: a socket with the backlog the
//! settings ask for, then actix's HTTP/1 service, as actix-web's
//! `HttpServer` assembles it, on each connection's [`Guarded`] socket, so
//! that a request head that stalls between two requests of a connection
//! meets a deadline too (see [`crate::http::limits`]).

use std::fmt;
use std::net::{SocketAddr, TcpListener};
use std::time::Duration;

use actix_http::{HttpService, Protocol, Request, Response};
use actix_server::ServerBuilder;
use actix_service::{IntoServiceFactory, ServiceFactoryExt as _, map_config};
use actix_web::body::MessageBody;
use actix_web::dev::{AppConfig, Server, Service, ServiceFactory, fn_service};
use actix_web::rt::net::TcpStream;

use crate::http::limits::Guarded;

/// How long a connection that is closing after its answer (its request's
/// body unfinished, or a deadline passed) may still send before it is
/// dropped (actix's `client_disconnect_timeout`): the client has the
/// answer by then, and the socket is not held longer.
pub const LINGER: Duration = Duration::from_millis(500);

/// How long an idle connection is kept between requests (actix's default,
/// made explicit): a request head that begins after it has the head
/// timeout to arrive.
pub const KEEP_ALIVE: Duration = Duration::from_secs(5);

/// A listening socket on `addr` (port 0 picks one) whose kernel queue
/// holds `backlog` connections until the accept loop takes them.
///
/// `std`'s `TcpListener::bind` asks for 128, which a burst of connects
/// overflows before actix's one accept thread drains it: the kernel then
/// drops a handshake, and that client (a normal one among the burst's)
/// waits for its retransmission a second later. Address reuse is set as
/// actix-server sets it, so a restart binds while old sockets linger in
/// TIME_WAIT.
pub fn bind(addr: SocketAddr, backlog: u32) -> std::io::Result<TcpListener> {
    use socket2::{Domain, Protocol, Socket, Type};
    let socket = Socket::new(Domain::for_address(addr), Type::STREAM, Some(Protocol::TCP))?;
    #[cfg(unix)]
    socket.set_reuse_address(true)?;
    socket.bind(&addr.into())?;
    // The setting's range (1..=65535) fits an i32.
    socket.listen(i32::try_from(backlog).unwrap_or(i32::MAX))?;
    Ok(socket.into())
}

/// The kernel's cap on any listener's backlog (`net.core.somaxconn`),
/// where the system says; a larger backlog is silently cut to it.
pub fn somaxconn() -> Option<u32> {
    std::fs::read_to_string("/proc/sys/net/core/somaxconn")
        .ok()
        .and_then(|s| s.trim().parse().ok())
}

/// What a listener's workers take and how long they wait.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// Worker threads.
    pub workers: usize,
    /// Most connections per worker; the rest wait in the kernel's backlog.
    pub max_connections_per_worker: usize,
    /// How long a request head may take (`HTTP_HEADER_TIMEOUT_MS`).
    pub header_timeout: Duration,
    /// How long in-flight requests get on a graceful stop, in seconds.
    pub shutdown_timeout_secs: u64,
}

/// Serves `listener` with the app `factory` builds (once per worker),
/// within `limits`, until its handle stops it. It handles no signals.
pub fn serve<F, I, S, B>(
    name: &str,
    listener: TcpListener,
    limits: Limits,
    factory: F,
) -> std::io::Result<Server>
where
    F: Fn() -> I + Send + Clone + 'static,
    I: IntoServiceFactory<S, Request>,
    S: ServiceFactory<Request, Config = AppConfig> + 'static,
    S::Error: Into<actix_web::Error> + 'static,
    S::InitError: fmt::Debug,
    S::Response: Into<Response<B>> + 'static,
    <S::Service as Service<Request>>::Future: 'static,
    S::Service: 'static,
    B: MessageBody + 'static,
{
    let builder = ServerBuilder::default()
        .workers(limits.workers)
        .max_concurrent_connections(limits.max_connections_per_worker)
        .shutdown_timeout(limits.shutdown_timeout_secs)
        .disable_signals();
    // What a graceful stop tells each connection: finish the request in
    // hand, then close (idle keep-alive connections close at once).
    let draining = builder.graceful_shutdown_signal();
    let addr = listener.local_addr()?;
    let header_timeout = limits.header_timeout;
    let builder = builder.listen(name, listener, move || {
        let draining = draining.clone();
        let http = HttpService::<Guarded<TcpStream>, _, _>::build()
            .graceful_shutdown_signal(move || {
                let signal = draining.clone();
                async move { signal.notified().await }
            })
            .keep_alive(KEEP_ALIVE)
            .client_request_timeout(header_timeout)
            .client_disconnect_timeout(LINGER)
            .local_addr(addr)
            .on_connect_ext(|io: &Guarded<TcpStream>, data| {
                data.insert(io.in_flight());
            });
        let app = factory()
            .into_factory()
            .map_err(|err| err.into().error_response());
        let http = http.finish(map_config(app, |_| AppConfig::default()));
        fn_service(move |io: TcpStream| async move {
            let peer = io.peer_addr().ok();
            Ok::<_, actix_http::error::DispatchError>((
                Guarded::new(io, header_timeout),
                Protocol::Http1,
                peer,
            ))
        })
        .and_then(http)
    })?;
    Ok(builder.run())
}

#[cfg(test)]
mod tests {
    use std::net::{Ipv4Addr, TcpStream};
    use std::time::Duration;

    use super::*;

    /// Connections past `std`'s backlog of 128 are queued, not dropped,
    /// while nothing accepts: each completes its handshake at once. With
    /// `TcpListener::bind` the 130th waited for a retransmission.
    #[test]
    fn the_kernel_queues_the_backlog_asked_for() {
        // Linux holds backlog + 1 and caps the backlog at somaxconn.
        let queued = somaxconn().map_or(300, |cap| 300.min(cap as usize));
        let listener = bind((Ipv4Addr::LOCALHOST, 0).into(), 300).expect("bind");
        let addr = listener.local_addr().expect("address");
        let connected: Vec<TcpStream> = (0..queued)
            .map(|i| {
                TcpStream::connect_timeout(&addr, Duration::from_millis(500))
                    .unwrap_or_else(|e| panic!("connection {i} of {queued} not queued: {e}"))
            })
            .collect();
        assert_eq!(connected.len(), queued);
        // And they are there to accept, in order, once the server gets to them.
        listener.set_nonblocking(true).expect("nonblocking");
        let accepted = std::iter::from_fn(|| listener.accept().ok()).count();
        assert_eq!(accepted, queued);
    }
}
