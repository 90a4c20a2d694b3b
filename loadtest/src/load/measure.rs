//! One load run with the servers watched, and the small pieces every
//! command that runs load shares: the closed model of one stage, the
//! override headers per strategy, a scenario's name in tables.

use std::sync::Arc;
use std::time::Duration;

use chatlab_domain::{InsertStrategy, PublishMode};

use crate::load::choice::Choice;
use crate::load::runner::{self, Model, RunOutcome};
use crate::load::scenario::{Overrides, Scenario, Workload};
use crate::load::schedule::Stage;
use crate::observe::sampler::{Sampler, ServerStats};

/// The servers under load and how to watch them.
#[derive(Debug, Clone)]
pub struct Watched {
    /// Their public URLs, where the load goes.
    pub targets: Vec<String>,
    /// Their operator URLs (`OPS_ADDR`), scraped for `/metrics`.
    pub ops: Vec<String>,
    /// Their pids, in the order of `ops`, when known (else found by port).
    pub pids: Vec<Option<u32>>,
    /// Sampling period.
    pub sample_interval: Duration,
}

/// Runs one load and watches the servers.
pub async fn measure(
    client: &reqwest::Client,
    watched: &Watched,
    work: Arc<Workload>,
    variants: Vec<Overrides>,
    model: Model,
    label: &str,
) -> (RunOutcome, ServerStats) {
    let sampler = Sampler::start(
        client.clone(),
        watched.ops.clone(),
        watched.pids.clone(),
        watched.sample_interval,
    )
    .await;
    let outcome = runner::run(
        client.clone(),
        watched.targets.clone(),
        work,
        variants,
        model,
        label,
    )
    .await;
    let stats = sampler.finish().await;
    (outcome, stats)
}

/// A one-stage closed model.
pub fn closed(vus: usize, duration: Duration, think_time: Duration) -> Model {
    Model::Closed {
        stages: vec![Stage {
            vus: vus.max(1),
            duration,
        }],
        think_time,
    }
}

/// Override headers for each strategy (or one empty set).
pub fn variants_for(
    strategies: &[Choice<InsertStrategy>],
    mode: Option<PublishMode>,
) -> Vec<Overrides> {
    if strategies.is_empty() {
        return vec![Overrides {
            strategy: None,
            publish_mode: mode,
        }];
    }
    strategies
        .iter()
        .map(|s| Overrides {
            strategy: s.named(),
            publish_mode: mode,
        })
        .collect()
}

/// The scenario's name in tables.
pub fn scenario_name(s: &Scenario) -> String {
    match s {
        Scenario::CreateChat => "create-chat".into(),
        Scenario::SendMessage => "send-message".into(),
        Scenario::ReadMessages => "read-messages".into(),
        Scenario::MyChats => "my-chats".into(),
        Scenario::Mix {
            weights: [c, s, r, 0],
        } => format!("mix:{c}:{s}:{r}"),
        Scenario::Mix {
            weights: [c, s, r, l],
        } => format!("mix:{c}:{s}:{r}:{l}"),
        Scenario::Get { path } => format!("get:{path}"),
        Scenario::Import {
            rows,
            chunk,
            parallelism,
        } => format!("import:{rows}:{chunk}:{parallelism}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn import_scenarios_are_named_by_their_figures() {
        let s: Scenario = "import:100000:1000:8".parse().unwrap();
        assert_eq!(scenario_name(&s), "import:100000:1000:8");
        assert_eq!(s.rows_per_request(), Some(100_000));
    }
}
