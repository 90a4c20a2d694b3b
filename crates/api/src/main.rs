//! The `chatlab` binary: `chatlab` (or `chatlab serve`) runs the server from
//! env vars and flags (`chatlab --help` lists every setting); `chatlab
//! openapi` prints the OpenAPI document; `chatlab audit` reconciles the event
//! topic with the database; `chatlab settings` prints the settings reference;
//! `chatlab probe` checks a running server's `/readyz` (the image's healthcheck).

use std::process::ExitCode;

use clap::{Parser, Subcommand, ValueEnum};

use chatlab_api::config::{self, ConfigError, DeclaredSettings, LogFormat, Settings, reference};
use chatlab_api::startup::Application;
use chatlab_api::{openapi, telemetry};

mod probe;

#[derive(Debug, Parser)]
#[command(
    name = "chatlab",
    version,
    about = "A chat-room backend built as a laboratory for the write path"
)]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
    #[command(flatten)]
    settings: DeclaredSettings,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run the HTTP server (the default), configured by the settings below.
    Serve,
    /// Print the OpenAPI document as JSON.
    Openapi,
    /// Reconcile the event topic of KAFKA_BROKERS with the database at
    /// DATABASE_URL and the broker's receipts: events lost, phantom and
    /// duplicated, per publish mode, and per event whether the broker
    /// acknowledged it and at which offset. Exits 1 when a mode that
    /// promises no loss (outbox, in_tx_await) lost an event the broker
    /// never acknowledged (chatlab's loss), 3 when the broker lost or
    /// misplaced events it acknowledged. (With the embedded broker the
    /// events live in the server's process: ask the server, GET /audit.)
    Audit {
        /// Window start, RFC 3339 (default: the end minus CHATLAB_AUDIT_MAX_WINDOW_SECS, a day; a wider window is refused).
        #[arg(long)]
        since: Option<chrono::DateTime<chrono::Utc>>,
        /// Window end, RFC 3339, exclusive (default: now minus --settle-secs).
        #[arg(long)]
        until: Option<chrono::DateTime<chrono::Utc>>,
        /// Leave out the last seconds, whose events may still be on their way.
        #[arg(long, default_value_t = 5)]
        settle_secs: u64,
        /// Print every event's line (receipt, position on the topic,
        /// verdict), not only those with a finding.
        #[arg(long)]
        events: bool,
    },
    /// GET /readyz on the server at HTTP_ADDR (or --url) and exit 0 on a
    /// 2xx answer, 1 otherwise: the Docker image's healthcheck, which has no
    /// curl.
    Probe {
        /// The URL to GET (default: /readyz on HTTP_ADDR, loopback when
        /// HTTP_ADDR binds every address).
        #[arg(long)]
        url: Option<String>,
        /// Give up after this many milliseconds (connect and answer).
        #[arg(long, default_value_t = probe::DEFAULT_TIMEOUT.as_millis() as u64)]
        timeout_ms: u64,
    },
    /// Print a bearer token for USER_ID, signed with the server's keys
    /// (CHATLAB_JWT_SECRET, or CHATLAB_JWT_PRIVATE_KEY_FILE for EdDSA and
    /// RS256), valid CHATLAB_TOKEN_TTL_SECS: for curl, scripts and
    /// operators. Nothing is looked up; the user need not exist yet.
    Token {
        /// The user the token acts as.
        user_id: uuid::Uuid,
    },
    /// Print every setting with its default and doc: as `.env.example`
    /// (`env`), as a Markdown table (`markdown`), or a Markdown doc read
    /// from stdin with its settings table replaced (`doc`; `make
    /// settings-docs` renders `docs/operations.md` with it).
    Settings {
        /// Output format.
        #[arg(value_enum, default_value = "env")]
        format: SettingsFormat,
    },
}

#[derive(Debug, Clone, Copy, ValueEnum)]
enum SettingsFormat {
    /// `.env.example`.
    Env,
    /// The Markdown table.
    Markdown,
    /// The Markdown doc from stdin, its table regenerated.
    Doc,
}

#[tokio::main]
async fn main() -> ExitCode {
    let cli: Cli = match config::parse(std::env::args_os(), &config::process_vars()) {
        Ok(cli) => cli,
        Err(ConfigError::Usage(e)) => e.exit(),
        Err(e) => {
            eprintln!("chatlab: invalid configuration: {e}");
            return ExitCode::from(2);
        }
    };
    let settings = || Settings::from_declared(cli.settings.clone());
    match cli.command.unwrap_or(Command::Serve) {
        Command::Settings { format } => {
            match format {
                SettingsFormat::Env => print!("{}", reference::env_example()),
                SettingsFormat::Markdown => print!("{}", reference::markdown_table()),
                SettingsFormat::Doc => {
                    let mut doc = String::new();
                    let spliced = std::io::Read::read_to_string(&mut std::io::stdin(), &mut doc)
                        .ok()
                        .and_then(|_| reference::with_table(&doc));
                    let Some(spliced) = spliced else {
                        eprintln!(
                            "chatlab settings doc: stdin has no {} ... {} markers",
                            reference::TABLE_BEGIN,
                            reference::TABLE_END
                        );
                        return ExitCode::FAILURE;
                    };
                    print!("{spliced}");
                }
            }
            ExitCode::SUCCESS
        }
        Command::Openapi => match openapi::document_json() {
            Ok(json) => {
                print!("{json}");
                ExitCode::SUCCESS
            }
            Err(e) => {
                eprintln!("chatlab: cannot render the OpenAPI document: {e}");
                ExitCode::FAILURE
            }
        },
        Command::Serve => serve(settings()).await,
        Command::Token { user_id } => token(settings(), user_id),
        Command::Probe { url, timeout_ms } => {
            let url = url.unwrap_or_else(|| probe::readyz_url(cli.settings.http_addr));
            probe::run(&url, std::time::Duration::from_millis(timeout_ms)).await
        }
        Command::Audit {
            since,
            until,
            settle_secs,
            events,
        } => audit(settings(), since, until, settle_secs, events).await,
    }
}

async fn audit(
    settings: Result<Settings, ConfigError>,
    since: Option<chrono::DateTime<chrono::Utc>>,
    until: Option<chrono::DateTime<chrono::Utc>>,
    settle_secs: u64,
    every_event: bool,
) -> ExitCode {
    // Quieter than the server by default; RUST_LOG still applies.
    telemetry::init(
        LogFormat::Pretty,
        &std::env::var("RUST_LOG").unwrap_or_else(|_| "warn".to_owned()),
    );
    let settings = match settings {
        Ok(s) => s,
        Err(e) => {
            eprintln!("chatlab audit: invalid configuration: {e}");
            return ExitCode::from(2);
        }
    };
    let Some(bootstrap) = settings.kafka.brokers.clone() else {
        eprintln!(
            "chatlab audit: KAFKA_BROKERS is not set. The embedded broker's events live in the \
             server's process; ask the running server's operator listener instead: \
             curl 'http://127.0.0.1:9464/audit' (OPS_ADDR)"
        );
        return ExitCode::from(2);
    };
    let source = chatlab_api::audit::AuditSource::new(
        &settings,
        bootstrap,
        chrono::DateTime::<chrono::Utc>::UNIX_EPOCH,
    );
    let settle = chrono::Duration::seconds(settle_secs.min(86_400) as i64);
    let (since, until) = match source.window(since, until, settle) {
        Ok(window) => window,
        Err(e) => {
            eprintln!("chatlab audit: {e}");
            return ExitCode::from(2);
        }
    };
    match source.run(since, until).await {
        Ok(report) => {
            println!(
                "event audit of topic {} from {since} to {until}\n",
                settings.kafka.topic
            );
            print!("{}", report.to_table());
            if every_event {
                println!("\nevery event:\n");
                print!("{}", report.lines_table());
            }
            if report.failed() {
                eprintln!(
                    "\nFAIL: a publish mode that promises no loss lost events the broker never acknowledged"
                );
                ExitCode::FAILURE
            } else if report.broker_failed() {
                eprintln!("\nBROKER: the broker lost or misplaced events it acknowledged");
                ExitCode::from(3)
            } else {
                ExitCode::SUCCESS
            }
        }
        Err(e) => {
            eprintln!("chatlab audit: {}", error_chain(&e));
            ExitCode::from(2)
        }
    }
}

async fn serve(settings: Result<Settings, ConfigError>) -> ExitCode {
    let settings = match settings {
        Ok(settings) => settings,
        Err(e) => {
            telemetry::init(LogFormat::Pretty, "info");
            tracing::error!("invalid configuration: {e}");
            eprintln!("chatlab: invalid configuration: {e}");
            return ExitCode::from(2);
        }
    };
    let tracer = match telemetry::otlp::provider_from_env() {
        Ok(tracer) => tracer,
        Err(e) => {
            telemetry::init(LogFormat::Pretty, "info");
            tracing::error!("invalid configuration: {}", error_chain(&e));
            eprintln!("chatlab: invalid configuration: {}", error_chain(&e));
            return ExitCode::from(2);
        }
    };
    telemetry::install(settings.log_format, &settings.log_filter, tracer.as_ref());
    if tracer.is_some() {
        tracing::info!("exporting traces over OTLP (OTEL_EXPORTER_OTLP_ENDPOINT)");
    }
    let code = serve_traced(settings).await;
    if let Some(tracer) = tracer {
        // The batch processor's shutdown blocks until its last export.
        let _ = tokio::task::spawn_blocking(move || tracer.shutdown()).await;
    }
    code
}

async fn serve_traced(settings: Settings) -> ExitCode {
    let app = match Application::build(settings).await {
        Ok(app) => app,
        Err(e) => {
            // Always on stderr, whatever RUST_LOG lets through.
            if tracing::enabled!(tracing::Level::ERROR) {
                tracing::error!(error = %error_chain(&e), "startup failed");
            } else {
                eprintln!("chatlab: startup failed: {}", error_chain(&e));
            }
            return ExitCode::FAILURE;
        }
    };
    match app.run_until_stopped().await {
        Ok(()) => {
            tracing::info!("stopped");
            ExitCode::SUCCESS
        }
        Err(e) => {
            tracing::error!(error = %e, "server failed");
            ExitCode::FAILURE
        }
    }
}

fn error_chain(e: &dyn std::error::Error) -> String {
    let mut out = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        out.push_str(": ");
        out.push_str(&s.to_string());
        source = s.source();
    }
    out
}

/// `chatlab token USER_ID`: signs with the configured keys. Refuses to
/// sign with a random secret, which no server would accept.
fn token(settings: Result<Settings, ConfigError>, user_id: uuid::Uuid) -> ExitCode {
    let settings = match settings {
        Ok(s) => s,
        Err(e) => {
            eprintln!("chatlab token: invalid configuration: {e}");
            return ExitCode::from(2);
        }
    };
    let a = &settings.auth;
    if a.secret.is_none() && a.private_key_file.is_none() {
        eprintln!(
            "chatlab token: set CHATLAB_JWT_SECRET (HS256) or CHATLAB_JWT_PRIVATE_KEY_FILE \
             (EdDSA, RS256) to the server's; a random secret would sign tokens no server accepts"
        );
        return ExitCode::from(2);
    }
    let issued = chatlab_api::auth::keys::from_settings(a)
        .map_err(|e| e.to_string())
        .and_then(|keys| {
            keys.issue(chatlab_domain::UserId::from_uuid(user_id))
                .map_err(|e| e.to_string())
        });
    match issued {
        Ok(t) => {
            println!("{}", t.token);
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("chatlab token: {e}");
            ExitCode::FAILURE
        }
    }
}
