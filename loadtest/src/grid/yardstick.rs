//! The yardstick of a cell: pgbench on the SQL its strategy sends, at the
//! database concurrency the cell had, run in the same round right beside
//! it, so each round gives one ratio of chatlab to PostgreSQL alone on
//! the machine as it was that minute.

use std::path::PathBuf;
use std::time::Duration;

use uuid::Uuid;

use chatlab_domain::InsertStrategy;

use crate::error::LoadError;
use crate::load::yardstick_sql::{self, BaselineSpec};

/// What pgbench needs for every cell of a grid.
#[derive(Debug, Clone)]
pub struct Yardstick {
    /// Where the scripts go.
    pub work_dir: PathBuf,
}

impl Yardstick {
    /// pgbench's clients for a cell: its VUs, capped by the connections in
    /// front of PostgreSQL (a pool of 5 on each of `servers` servers, 20
    /// VUs: 5 clients per server). `pool` 0: unknown, the VUs.
    pub fn clients(vus: usize, pool: u32, servers: usize) -> usize {
        let cap = if pool > 0 {
            pool as usize * servers.max(1)
        } else {
            vus
        };
        vus.min(cap).max(1)
    }

    /// pgbench's tps on `strategy`'s SQL at `database_url` (the cell's
    /// database, through its hop when there is one) with `members` per
    /// chat (drawn from `users`) and `clients` clients, for `duration`
    /// (whole seconds, at least one). `copy` has no
    /// pgbench form (a script cannot send COPY data): `Ok(None)`.
    pub async fn measure(
        &self,
        database_url: &str,
        strategy: InsertStrategy,
        members: usize,
        clients: usize,
        users: &[Uuid],
        duration: Duration,
    ) -> Result<Option<f64>, LoadError> {
        if strategy == InsertStrategy::Copy {
            return Ok(None);
        }
        let spec = BaselineSpec {
            database_url: database_url.to_owned(),
            strategy,
            members,
            clients,
            duration,
            users: users.to_vec(),
            work_dir: self.work_dir.clone(),
        };
        let tps = tokio::task::spawn_blocking(move || yardstick_sql::run(&spec)).await??;
        eprintln!("  pgbench {strategy} m={members} clients={clients}: {tps:.0} tps");
        Ok(Some(tps))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clients_are_the_vus_capped_by_the_pools() {
        assert_eq!(Yardstick::clients(20, 5, 1), 5);
        assert_eq!(Yardstick::clients(100, 20, 3), 60);
        assert_eq!(Yardstick::clients(4, 5, 1), 4);
        assert_eq!(Yardstick::clients(20, 0, 1), 20);
        assert_eq!(Yardstick::clients(0, 5, 1), 1);
    }
}
