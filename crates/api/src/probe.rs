//! `chatlab probe`: one `GET /readyz`, for a container's healthcheck.
//!
//! The runtime image has no curl (nor a shell worth relying on), so the
//! server binary checks itself: exit 0 when the server answers `/readyz`
//! with a 2xx status, 1 otherwise (refused, timed out, 503 because the
//! database does not answer). The target is `--url`, or `/readyz` on the
//! server's own `HTTP_ADDR`; an unspecified bind address (`0.0.0.0`, `::`)
//! becomes loopback, since a probe runs beside the server it checks.
//!
//! The HTTP client is reqwest, which the workspace already builds for its
//! tests (default features off: plain HTTP, no TLS), rather than a
//! hand-written request over a `TcpStream` that would have to parse status
//! lines and chunked bodies itself.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::process::ExitCode;
use std::time::Duration;

/// The probe's whole budget: connect, send, read the status. Longer than
/// `/readyz`'s own two-second wait for the database, so a slow database
/// shows up as its 503 rather than as a probe timeout.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(5);

/// The URL of `/readyz` on a server bound to `addr`.
pub fn readyz_url(addr: SocketAddr) -> String {
    let ip = match addr.ip() {
        IpAddr::V4(ip) if ip.is_unspecified() => IpAddr::V4(Ipv4Addr::LOCALHOST),
        IpAddr::V6(ip) if ip.is_unspecified() => IpAddr::V6(Ipv6Addr::LOCALHOST),
        ip => ip,
    };
    format!("http://{}/readyz", SocketAddr::new(ip, addr.port()))
}

/// GETs `url` within `timeout`; 0 on a 2xx answer, 1 on anything else, with
/// one line on stderr saying why.
pub async fn run(url: &str, timeout: Duration) -> ExitCode {
    match check(url, timeout).await {
        Ok(status) => {
            println!("chatlab probe: {url}: {status}");
            ExitCode::SUCCESS
        }
        Err(why) => {
            eprintln!("chatlab probe: {url}: {why}");
            ExitCode::FAILURE
        }
    }
}

async fn check(url: &str, timeout: Duration) -> Result<reqwest::StatusCode, String> {
    let client = reqwest::Client::builder()
        .timeout(timeout)
        .connect_timeout(timeout)
        // A healthcheck asks this server, never a proxy from the environment.
        .no_proxy()
        .build()
        .map_err(|e| format!("cannot build the HTTP client: {e}"))?;
    let response = client
        .get(url)
        .send()
        .await
        .map_err(|e| crate::error_chain(&e))?;
    let status = response.status();
    if status.is_success() {
        Ok(status)
    } else {
        Err(format!("answered {status}"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unspecified_bind_addresses_become_loopback() {
        let url = |s: &str| readyz_url(s.parse().unwrap());
        assert_eq!(url("0.0.0.0:8080"), "http://127.0.0.1:8080/readyz");
        assert_eq!(url("[::]:8080"), "http://[::1]:8080/readyz");
        assert_eq!(url("10.0.0.7:81"), "http://10.0.0.7:81/readyz");
    }
}
