//! `chatlab-delay --upstream 127.0.0.1:5432 --rtt 1ms`: serves until
//! SIGTERM or SIGINT. It prints one line when it is ready,
//!
//! ```text
//! listening 127.0.0.1:40123 control 127.0.0.1:40124 upstream 127.0.0.1:5432 RTT 1 ms
//! ```
//!
//! and its counters (JSON) on standard error when it stops. It runs on one
//! thread: on a two-core machine shared with PostgreSQL, the server and
//! the load tool, a proxy that took a core of its own would be the
//! experiment.

use std::net::SocketAddr;
use std::process::ExitCode;

use clap::Parser;

use chatlab_delay::{Distance, Proxy, Settings};

#[derive(Debug, Parser)]
#[command(
    name = "chatlab-delay",
    version,
    about = "A TCP proxy that adds a set round-trip time, to the microsecond"
)]
struct Cli {
    /// Where to listen (port 0: any free port).
    #[arg(long, default_value = "127.0.0.1:0")]
    listen: SocketAddr,
    /// Where to connect for each client.
    #[arg(long)]
    upstream: SocketAddr,
    /// The round-trip time to add: 1ms, 200us, 0.5ms, 0.
    #[arg(long, env = "DB_RTT", default_value = "0")]
    rtt: String,
    /// How much it varies (each one-way delay ± half of it); at most --rtt.
    #[arg(long, env = "DB_JITTER", default_value = "")]
    jitter: String,
    /// Where the control port listens (`stats`, `blackhole`, `resume`).
    #[arg(long, default_value = "127.0.0.1:0")]
    control: SocketAddr,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let distance = match Distance::parse("--rtt", &cli.rtt, "--jitter", &cli.jitter) {
        Ok(d) => d,
        Err(e) => {
            eprintln!("chatlab-delay: {e}");
            return ExitCode::from(2);
        }
    };
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => {
            eprintln!("chatlab-delay: {e}");
            return ExitCode::FAILURE;
        }
    };
    runtime.block_on(serve(cli, distance))
}

async fn serve(cli: Cli, distance: Distance) -> ExitCode {
    let settings = Settings {
        listen: cli.listen,
        upstream: cli.upstream,
        distance,
        control: Some(cli.control),
    };
    let proxy = match Proxy::start(settings).await {
        Ok(p) => p,
        Err(e) => {
            eprintln!("chatlab-delay: cannot listen on {}: {e}", cli.listen);
            return ExitCode::FAILURE;
        }
    };
    println!(
        "listening {} control {} upstream {} {distance}",
        proxy.local_addr(),
        proxy
            .control_addr()
            .map_or_else(|| "-".to_owned(), |a| a.to_string()),
        cli.upstream
    );
    let stopped = async {
        use tokio::signal::unix::{SignalKind, signal};
        match (
            signal(SignalKind::terminate()),
            signal(SignalKind::interrupt()),
        ) {
            (Ok(mut term), Ok(mut int)) => {
                tokio::select! {
                    _ = term.recv() => {}
                    _ = int.recv() => {}
                }
            }
            _ => std::future::pending::<()>().await,
        }
    };
    stopped.await;
    match serde_json::to_string(&proxy.stats()) {
        Ok(json) => eprintln!("{json}"),
        Err(e) => eprintln!("chatlab-delay: {e}"),
    }
    ExitCode::SUCCESS
}
