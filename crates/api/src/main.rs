//! The `chatlab` binary: `chatlab` (or `chatlab serve`) runs the server from
//! env vars; `chatlab openapi` prints the OpenAPI document.

use std::process::ExitCode;

use clap::{Parser, Subcommand};

use chatlab_api::config::{LogFormat, Settings};
use chatlab_api::startup::Application;
use chatlab_api::{openapi, telemetry};

#[derive(Debug, Parser)]
#[command(
    name = "chatlab",
    version,
    about = "A chat-room backend built as a laboratory for the write path"
)]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run the HTTP server (the default). Configured by env vars; see the README.
    Serve,
    /// Print the OpenAPI document as JSON.
    Openapi,
}

#[tokio::main]
async fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.command.unwrap_or(Command::Serve) {
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
        Command::Serve => serve().await,
    }
}

async fn serve() -> ExitCode {
    let settings = match Settings::from_env() {
        Ok(settings) => settings,
        Err(e) => {
            telemetry::init(LogFormat::Pretty, "info");
            tracing::error!("invalid configuration: {e}");
            eprintln!("chatlab: invalid configuration: {e}");
            return ExitCode::from(2);
        }
    };
    telemetry::init(settings.log_format, "info");
    let app = match Application::build(settings).await {
        Ok(app) => app,
        Err(e) => {
            tracing::error!(error = %error_chain(&e), "startup failed");
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
