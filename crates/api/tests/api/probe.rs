//! `chatlab probe`, the image's healthcheck, run as the binary it is: 0
//! against a ready server, 1 against a closed port, a non-2xx answer, and a
//! server that never answers (within its timeout).

use std::process::Output;
use std::time::{Duration, Instant};

use crate::support::spawn_app;

/// Runs `chatlab probe ARGS` with only `vars` in its environment, off the
/// test's runtime so the server under test keeps serving meanwhile.
async fn probe(args: &[&str], vars: &[(&str, &str)]) -> Output {
    let args: Vec<String> = args.iter().map(|a| (*a).to_owned()).collect();
    let vars: Vec<(String, String)> = vars
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect();
    tokio::task::spawn_blocking(move || {
        std::process::Command::new(env!("CARGO_BIN_EXE_chatlab"))
            .arg("probe")
            .args(&args)
            .env_clear()
            .envs(vars)
            .output()
            .unwrap()
    })
    .await
    .unwrap()
}

fn describe(out: &Output) -> String {
    format!(
        "status {:?}\nstdout: {}\nstderr: {}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

#[tokio::test]
async fn probe_passes_on_a_ready_server_by_url_and_by_http_addr() {
    let app = spawn_app().await;
    let out = probe(&["--url", &app.url("/readyz")], &[]).await;
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));

    // Without --url it asks HTTP_ADDR; 0.0.0.0 means loopback.
    let port = app.address.rsplit(':').next().unwrap();
    let addr = format!("0.0.0.0:{port}");
    let out = probe(&[], &[("HTTP_ADDR", &addr)]).await;
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
}

#[tokio::test]
async fn probe_fails_on_a_non_2xx_answer() {
    let app = spawn_app().await;
    let out = probe(&["--url", &app.url("/no-such-route")], &[]).await;
    assert_eq!(out.status.code(), Some(1), "{}", describe(&out));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("404"),
        "{}",
        describe(&out)
    );
}

#[tokio::test]
async fn probe_fails_on_a_closed_port() {
    let port = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.local_addr().unwrap().port()
    };
    let url = format!("http://127.0.0.1:{port}/readyz");
    let out = probe(&["--url", &url], &[]).await;
    assert_eq!(out.status.code(), Some(1), "{}", describe(&out));
    let addr = format!("127.0.0.1:{port}");
    let out = probe(&[], &[("HTTP_ADDR", &addr)]).await;
    assert_eq!(out.status.code(), Some(1), "{}", describe(&out));
}

#[tokio::test]
async fn probe_gives_up_on_a_server_that_never_answers() {
    // The kernel completes the handshake into the listen backlog; nobody
    // ever reads the request.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/readyz", listener.local_addr().unwrap());
    let started = Instant::now();
    let out = probe(&["--url", &url, "--timeout-ms", "300"], &[]).await;
    let took = started.elapsed();
    assert_eq!(out.status.code(), Some(1), "{}", describe(&out));
    assert!(took < Duration::from_secs(4), "took {took:?}");
    drop(listener);
}
