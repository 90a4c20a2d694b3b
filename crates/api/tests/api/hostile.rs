//! Clients that never finish their request, over real sockets: a chunked
//! body that stalls or trickles on any route, a stalled body or head on
//! the operator listener, heads too large or malformed.

use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::support::{TestApp, assert_problem, spawn_app_with};

/// The body timeout of these tests' servers.
const BODY_TIMEOUT: Duration = Duration::from_millis(1000);

/// What came back on one connection.
#[derive(Debug)]
struct Exchange {
    /// Everything the server sent.
    text: String,
    /// When the server closed the connection, from the connect; `None` if
    /// it was still open when the test stopped waiting.
    closed_after: Option<Duration>,
}

impl Exchange {
    /// The status of the answer, if one came.
    fn status(&self) -> Option<u16> {
        self.text
            .strip_prefix("HTTP/1.1 ")?
            .get(..3)
            .and_then(|s| s.parse().ok())
    }

    /// Whether the answer said `Connection: close`.
    fn says_close(&self) -> bool {
        self.text.to_ascii_lowercase().contains("connection: close")
    }
}

/// `host:port` of a base URL.
fn authority(base: &str) -> String {
    base.trim_start_matches("http://").to_owned()
}

/// Sends `request` on a new connection to `addr`, then `trickle` every
/// 200 ms (if given) for as long as the server takes it, and reads until
/// the server closes or `wait` has passed.
async fn exchange(
    addr: &str,
    request: Vec<u8>,
    trickle: Option<&'static [u8]>,
    wait: Duration,
) -> Exchange {
    let started = Instant::now();
    let stream = TcpStream::connect(addr).await.unwrap();
    let (mut read, mut write) = stream.into_split();
    let writer = tokio::spawn(async move {
        if write.write_all(&request).await.is_err() {
            return;
        }
        let Some(bytes) = trickle else {
            // Keep the write half open: a client that went quiet.
            tokio::time::sleep(wait).await;
            return;
        };
        while started.elapsed() < wait {
            tokio::time::sleep(Duration::from_millis(200)).await;
            if write.write_all(bytes).await.is_err() {
                return;
            }
        }
    });
    let deadline = tokio::time::Instant::now() + wait;
    let mut received = Vec::new();
    let mut buf = [0u8; 4096];
    let closed_after = loop {
        match tokio::time::timeout_at(deadline, read.read(&mut buf)).await {
            Ok(Ok(0)) | Ok(Err(_)) => break Some(started.elapsed()),
            Ok(Ok(n)) => received.extend_from_slice(&buf[..n]),
            Err(_) => break None,
        }
    };
    writer.abort();
    Exchange {
        text: String::from_utf8_lossy(&received).into_owned(),
        closed_after,
    }
}

/// A request head with `Transfer-Encoding: chunked` and its first chunk,
/// never finished.
fn chunked(method: &str, path: &str, extra: &str) -> Vec<u8> {
    format!(
        "{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n{extra}\
         Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n1\r\n{{\r\n"
    )
    .into_bytes()
}

/// Asserts the server answered `status` and closed the connection within
/// the body timeout and two seconds.
fn assert_answered_and_closed(what: &str, got: &Exchange, status: u16) {
    assert_eq!(got.status(), Some(status), "{what}: {got:?}");
    assert!(
        got.says_close(),
        "{what}: the answer says it closes: {got:?}"
    );
    let closed = got
        .closed_after
        .unwrap_or_else(|| panic!("{what}: still open after the wait: {got:?}"));
    assert!(
        closed <= BODY_TIMEOUT + Duration::from_secs(2),
        "{what}: closed after {closed:?}"
    );
}

async fn server() -> TestApp {
    spawn_app_with(&[
        ("HTTP_BODY_TIMEOUT_MS", "1000"),
        ("HTTP_HEADER_TIMEOUT_MS", "1000"),
    ])
    .await
}

#[tokio::test]
async fn an_unfinished_chunked_body_is_answered_and_closed_on_any_route() {
    let app = server().await;
    let addr = authority(&app.address);
    let wait = BODY_TIMEOUT + Duration::from_secs(6);
    let user = uuid::Uuid::now_v7();
    let cases = [
        ("GET /healthz", chunked("GET", "/healthz", ""), 200),
        (
            "a protected GET without a token",
            chunked("GET", &format!("/v1/users/{user}"), ""),
            401,
        ),
        ("no such route", chunked("GET", "/v1/nowhere", ""), 404),
        ("POST /v1/users", chunked("POST", "/v1/users", ""), 408),
    ];
    let runs = cases.into_iter().flat_map(|(what, request, status)| {
        // Once stalled, once trickling a chunk every 200 ms.
        [None, Some(&b"1\r\n \r\n"[..])]
            .into_iter()
            .map(move |trickle| (what, request.clone(), status, trickle))
    });
    let exchanges = runs.map(|(what, request, status, trickle)| {
        let addr = addr.clone();
        async move {
            let got = exchange(&addr, request, trickle, wait).await;
            (
                format!("{what}, trickling: {}", trickle.is_some()),
                got,
                status,
            )
        }
    });
    for (what, got, status) in futures_util::future::join_all(exchanges).await {
        assert_answered_and_closed(&what, &got, status);
    }
    assert_eq!(app.row_counts().await[0], 0, "no user written");
    // A finished chunked body keeps its connection: two requests on one.
    let mut stream = TcpStream::connect(&addr).await.unwrap();
    let body = r#"{"name":"chunked"}"#;
    let request = format!(
        "POST /v1/users HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n\
         Transfer-Encoding: chunked\r\n\r\n{:x}\r\n{body}\r\n0\r\n\r\n",
        body.len()
    );
    for _ in 0..2 {
        stream.write_all(request.as_bytes()).await.unwrap();
        let mut head = Vec::new();
        let mut buf = [0u8; 4096];
        while !head.windows(4).any(|w| w == b"\r\n\r\n") {
            let n = tokio::time::timeout(Duration::from_secs(5), stream.read(&mut buf))
                .await
                .expect("an answer within 5 s")
                .unwrap();
            assert!(n > 0, "the connection was closed: {head:?}");
            head.extend_from_slice(&buf[..n]);
        }
        let head = String::from_utf8_lossy(&head);
        assert!(head.starts_with("HTTP/1.1 201"), "{head}");
        // Let the rest of the body arrive before the next request.
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test]
async fn the_operator_listener_answers_and_closes_stalled_bodies_and_heads() {
    let app = server().await;
    let addr = authority(&app.ops_address);
    let wait = BODY_TIMEOUT + Duration::from_secs(6);
    let sized = b"POST /v1/users/bulk HTTP/1.1\r\nHost: 127.0.0.1\r\n\
        Content-Type: application/json\r\nContent-Length: 100\r\n\r\n{"
        .to_vec();
    let cases = [
        ("Content-Length, stalled", sized, None),
        (
            "chunked, stalled",
            chunked("POST", "/v1/users/bulk", ""),
            None,
        ),
        (
            "chunked, trickling",
            chunked("POST", "/v1/users/bulk", ""),
            Some(&b"1\r\n \r\n"[..]),
        ),
    ];
    let exchanges = cases.into_iter().map(|(what, request, trickle)| {
        let addr = addr.clone();
        async move { (what, exchange(&addr, request, trickle, wait).await) }
    });
    for (what, got) in futures_util::future::join_all(exchanges).await {
        assert_answered_and_closed(what, &got, 408);
        assert!(
            got.text.contains("urn:chatlab:problem:request-timeout"),
            "{what}: {got:?}"
        );
    }
    assert_eq!(app.row_counts().await[0], 0, "no user seeded");
    // A head that never ends: the public listener's header timeout.
    let half = b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n".to_vec();
    let got = exchange(&addr, half, None, wait).await;
    assert_eq!(got.status(), Some(408), "{got:?}");
    let closed = got.closed_after.expect("closed");
    assert!(
        closed <= Duration::from_millis(1000) + Duration::from_secs(2),
        "a half-sent head answered after {closed:?}: HTTP_HEADER_TIMEOUT_MS is 1000"
    );
}

#[tokio::test]
async fn oversized_heads_are_problems_and_malformed_ones_are_closed() {
    let app = server().await;
    // A URI past the server's limit and below actix's own (64 KiB): 414.
    let long = format!("/v1/users/{}", "a".repeat(40 * 1024));
    let resp = app.client.get(app.url(&long)).send().await.unwrap();
    assert_problem(resp, 414, "uri-too-long").await;
    // Headers past the server's limit and below actix's own (128 KiB): 431.
    let mut request = app.client.get(app.url("/healthz"));
    for i in 0..10 {
        request = request.header(format!("x-filler-{i}"), "b".repeat(8 * 1024));
    }
    let resp = request.send().await.unwrap();
    assert_problem(resp, 431, "header-fields-too-large").await;
    // What actix refuses before any of the server's code sees it: a 400
    // (a 431 past 128 KiB of head), and the connection closed.
    let addr = authority(&app.address);
    let huge_uri = format!("GET /{} HTTP/1.1\r\nHost: x\r\n\r\n", "a".repeat(66 * 1024));
    let cases: [(&str, Vec<u8>, u16); 4] = [
        (
            "NUL in a header",
            b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-A: a\0b\r\n\r\n".to_vec(),
            400,
        ),
        (
            "Content-Length with Transfer-Encoding",
            b"POST /v1/users HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\
              Transfer-Encoding: chunked\r\n\r\n0\r\n\r\n"
                .to_vec(),
            400,
        ),
        ("a URI over 64 KiB", huge_uri.into_bytes(), 400),
        (
            "a head over 128 KiB",
            format!(
                "GET /healthz HTTP/1.1\r\nHost: x\r\nX-Big: {}\r\n\r\n",
                "c".repeat(130 * 1024)
            )
            .into_bytes(),
            431,
        ),
    ];
    for (what, raw, status) in cases {
        let got = exchange(&addr, raw, None, Duration::from_secs(5)).await;
        assert_eq!(got.status(), Some(status), "{what}: {got:?}");
        assert!(got.closed_after.is_some(), "{what}: closed: {got:?}");
    }
    assert_eq!(app.get("/healthz").await.status(), 200);
}

/// Starts `chatlab serve` on `db` with JSON logs at `warn` and returns it
/// with its public port, read from its log, and its log lines so far.
fn serve_binary(db_url: &str) -> (std::process::Child, u16, std::sync::mpsc::Receiver<String>) {
    use std::io::BufRead as _;
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_chatlab"))
        .arg("serve")
        .env_clear()
        .envs([
            ("DATABASE_URL", db_url),
            ("HTTP_ADDR", "127.0.0.1:0"),
            ("OPS_ADDR", "127.0.0.1:0"),
            ("CHATLAB_JWT_SECRET", crate::support::TEST_JWT_SECRET),
            ("HTTP_WORKERS", "1"),
            ("LOG_FORMAT", "json"),
            ("RUST_LOG", "warn,chatlab_api::startup=info"),
        ])
        .stderr(std::process::Stdio::piped())
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let stderr = child.stderr.take().unwrap();
    let (lines, received) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(stderr)
            .lines()
            .map_while(Result::ok)
        {
            if lines.send(line).is_err() {
                return;
            }
        }
    });
    let deadline = Instant::now() + Duration::from_secs(60);
    let port = loop {
        let line = received
            .recv_timeout(deadline.saturating_duration_since(Instant::now()))
            .expect("the server logs that it listens within 60 s");
        let v: serde_json::Value = serde_json::from_str(&line).unwrap_or_default();
        if v["message"] == "listening" {
            break v["port"].as_u64().unwrap() as u16;
        }
    };
    (child, port, received)
}

#[tokio::test]
async fn a_flood_of_malformed_heads_is_not_a_flood_of_error_lines() {
    let db = chatlab_testdb::TestDb::new().await;
    let url = db.url().to_owned();
    let (mut child, port, lines) = tokio::task::spawn_blocking(move || serve_binary(&url))
        .await
        .unwrap();
    let addr = format!("127.0.0.1:{port}");
    const MALFORMED: usize = 40;
    for i in 0..MALFORMED {
        let raw = format!("GET /healthz HTTP/1.1\r\nHost: x\r\nX-A: {i}\0\r\n\r\n").into_bytes();
        let got = exchange(&addr, raw, None, Duration::from_secs(5)).await;
        assert_eq!(got.status(), Some(400), "{got:?}");
    }
    // The server goes on serving, and its log carries the lines of that
    // moment: give them a moment to be written.
    let got = exchange(
        &addr,
        b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".to_vec(),
        None,
        Duration::from_secs(5),
    )
    .await;
    assert_eq!(got.status(), Some(200), "{got:?}");
    tokio::time::sleep(Duration::from_millis(500)).await;
    let _ = child.kill();
    let _ = child.wait();
    let logged: Vec<serde_json::Value> = lines
        .try_iter()
        .filter_map(|l| serde_json::from_str(&l).ok())
        .collect();
    let errors: Vec<&serde_json::Value> = logged.iter().filter(|v| v["level"] == "ERROR").collect();
    assert!(
        errors.len() <= 1,
        "{} ERROR lines for {MALFORMED} malformed heads: {errors:?}",
        errors.len()
    );
    let parse_errors = logged
        .iter()
        .filter(|v| {
            v["message"]
                .as_str()
                .is_some_and(|m| m.contains("parse error"))
        })
        .count();
    assert!(
        (1..MALFORMED).contains(&parse_errors),
        "the first malformed head is logged, not every one: {parse_errors} lines"
    );
}

/// A kept-alive connection that goes quiet after its answer is not a
/// stalled head: nothing is sent on it, and its next request, past
/// HTTP_HEADER_TIMEOUT_MS but inside keep-alive, is answered. (The deadline
/// armed by the first request's head fired on the idle connection: a 408
/// nobody asked for, which the load tool's scrapes then read as their
/// answer.)
#[tokio::test]
async fn a_quiet_kept_alive_connection_gets_no_408_and_its_next_request_an_answer() {
    let app = server().await;
    for base in [&app.address, &app.ops_address] {
        let addr = authority(base);
        let mut stream = TcpStream::connect(&addr).await.unwrap();
        let mut buf = [0u8; 4096];
        for round in 0..2 {
            stream
                .write_all(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
                .await
                .unwrap();
            let n = tokio::time::timeout(Duration::from_secs(5), stream.read(&mut buf))
                .await
                .expect("an answer")
                .unwrap();
            let answer = String::from_utf8_lossy(&buf[..n]);
            assert!(
                answer.starts_with("HTTP/1.1 200"),
                "{base} #{round}: {answer}"
            );
            // Quiet for twice the head timeout, well inside keep-alive (5 s).
            let quiet =
                tokio::time::timeout(Duration::from_millis(2000), stream.read(&mut buf)).await;
            match quiet {
                Err(_) => {}
                Ok(Ok(n)) => panic!(
                    "{base} #{round}: sent on a quiet connection: {:?}",
                    String::from_utf8_lossy(&buf[..n])
                ),
                Ok(Err(e)) => panic!("{base} #{round}: {e}"),
            }
        }
    }
}

#[tokio::test]
async fn a_head_that_stalls_after_an_answer_is_answered_and_closed_on_both_listeners() {
    let app = server().await;
    for base in [&app.address, &app.ops_address] {
        let addr = authority(base);
        let mut stream = TcpStream::connect(&addr).await.unwrap();
        stream
            .write_all(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
            .await
            .unwrap();
        let mut buf = [0u8; 4096];
        let n = tokio::time::timeout(Duration::from_secs(5), stream.read(&mut buf))
            .await
            .expect("an answer")
            .unwrap();
        let first = String::from_utf8_lossy(&buf[..n]);
        assert!(first.starts_with("HTTP/1.1 200"), "{first}");
        // Half of a second head on the kept-alive connection, then nothing.
        stream
            .write_all(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n")
            .await
            .unwrap();
        let started = Instant::now();
        let mut rest = Vec::new();
        let closed = loop {
            match tokio::time::timeout(Duration::from_secs(8), stream.read(&mut buf)).await {
                Ok(Ok(0)) | Ok(Err(_)) => break Some(started.elapsed()),
                Ok(Ok(n)) => rest.extend_from_slice(&buf[..n]),
                Err(_) => break None,
            }
        };
        let rest = String::from_utf8_lossy(&rest);
        let closed = closed.unwrap_or_else(|| panic!("{base}: still open after 8 s: {rest:?}"));
        assert!(
            closed <= Duration::from_millis(1000) + Duration::from_secs(2),
            "{base}: closed after {closed:?} (HTTP_HEADER_TIMEOUT_MS is 1000)"
        );
        assert!(rest.starts_with("HTTP/1.1 408"), "{base}: {rest:?}");
        assert!(
            rest.contains("urn:chatlab:problem:request-timeout"),
            "{base}: {rest:?}"
        );
    }
}
