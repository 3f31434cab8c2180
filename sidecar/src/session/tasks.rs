//! The tasks callers created through this replica (the tasks extension of
//! 2026-07-28), by the nonce their sealed task id carries.
//!
//! Where it sits: the tools/call step adds a task when the server answers a
//! call with a task handle ([`crate::session::steps::task::adopt`]); the
//! `tasks/*` step finds it again by the id the client sends back, after the
//! seal proved the id is the facade's and the caller's. A task the table
//! does not hold (its time to live passed, or the replica restarted) is
//! refused: a sealed id alone never reaches the server.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Who created a task, as its audit lines name them.
#[derive(Clone, Debug, Default)]
pub struct Creator {
    pub issuer: Option<String>,
    pub subject: Option<String>,
    pub auth: &'static str,
    pub role: Option<&'static str>,
    /// The creating request's session (hashed) and call id.
    pub session: String,
    pub call_id: String,
}

/// One task, as the facade keeps it (never its content).
#[derive(Clone, Debug)]
pub struct TaskEntry {
    /// The creator's identity hash (issuer-qualified).
    pub caller: String,
    pub creator: Creator,
    /// The server's own task id.
    pub upstream_id: String,
    /// The tool, as the client named it, and as the server knows it.
    pub tool: String,
    pub upstream_tool: String,
    pub created: Instant,
    /// Past this the task is forgotten (its `ttlMs`, capped).
    pub expires: Instant,
    /// The last status the facade saw.
    pub status: String,
}

impl TaskEntry {
    pub fn is_terminal(&self) -> bool {
        is_terminal(&self.status)
    }
}

/// Whether a task status is final.
pub fn is_terminal(status: &str) -> bool {
    matches!(status, "completed" | "failed" | "cancelled")
}

#[derive(Default)]
pub struct Tasks {
    live: Mutex<HashMap<String, TaskEntry>>,
}

impl Tasks {
    /// Keep `entry` under `key` (the nonce of its sealed id).
    pub fn insert(&self, key: String, entry: TaskEntry) {
        let mut live = self.live.lock().unwrap();
        sweep(&mut live);
        live.insert(key, entry);
    }

    /// The task under `key`, unless it expired.
    pub fn get(&self, key: &str) -> Option<TaskEntry> {
        let mut live = self.live.lock().unwrap();
        sweep(&mut live);
        live.get(key).cloned()
    }

    /// Record the status the server last reported for the task under `key`.
    /// `Some` (the task as it was) exactly once: when this status ends it,
    /// so whoever sees the end first (a client's `tasks/get`, the facade's
    /// own poll, its wall-time cancel) writes the one completion record.
    pub fn update(&self, key: &str, status: &str) -> Option<TaskEntry> {
        let mut live = self.live.lock().unwrap();
        let e = live.get_mut(key)?;
        let ends = is_terminal(status) && !e.is_terminal();
        let before = ends.then(|| e.clone());
        if !e.is_terminal() {
            e.status = status.to_string();
        }
        before
    }

    /// How many tasks the caller `caller` has that have not ended.
    pub fn running_for(&self, caller: &str) -> usize {
        let mut live = self.live.lock().unwrap();
        sweep(&mut live);
        live.values()
            .filter(|e| e.caller == caller && !e.is_terminal())
            .count()
    }
}

fn sweep(live: &mut HashMap<String, TaskEntry>) {
    let now = Instant::now();
    live.retain(|_, e| e.expires > now);
}

/// How long the facade keeps a task the server gave `ttl_ms` (`None`: the
/// server set none): at most `cap`.
pub fn kept_for(ttl_ms: Option<u64>, cap: Duration) -> Duration {
    ttl_ms.map_or(cap, |ms| Duration::from_millis(ms).min(cap))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(caller: &str, status: &str, for_ms: u64) -> TaskEntry {
        TaskEntry {
            caller: caller.into(),
            creator: Creator::default(),
            upstream_id: "u".into(),
            tool: "t".into(),
            upstream_tool: "t".into(),
            created: Instant::now(),
            expires: Instant::now() + Duration::from_millis(for_ms),
            status: status.into(),
        }
    }

    #[test]
    fn an_expired_task_is_forgotten() {
        let tasks = Tasks::default();
        tasks.insert("a".into(), entry("alice", "working", 0));
        tasks.insert("b".into(), entry("alice", "working", 60_000));
        assert!(tasks.get("a").is_none());
        assert!(tasks.get("b").is_some());
    }

    #[test]
    fn only_a_callers_running_tasks_count() {
        let tasks = Tasks::default();
        tasks.insert("a".into(), entry("alice", "working", 60_000));
        tasks.insert("b".into(), entry("alice", "completed", 60_000));
        tasks.insert("c".into(), entry("bob", "input_required", 60_000));
        assert_eq!(tasks.running_for("alice"), 1);
        assert!(tasks.update("a", "working").is_none());
        assert!(tasks.update("a", "cancelled").is_some());
        assert_eq!(tasks.running_for("alice"), 0);
        // The end is reported once, and a final status stays final.
        assert!(tasks.update("a", "completed").is_none());
        assert_eq!(tasks.get("a").unwrap().status, "cancelled");
        assert_eq!(tasks.running_for("bob"), 1);
    }

    #[test]
    fn a_task_is_kept_at_most_the_cap() {
        let cap = Duration::from_secs(3600);
        assert_eq!(kept_for(Some(1000), cap), Duration::from_secs(1));
        assert_eq!(kept_for(Some(u64::MAX), cap), cap);
        assert_eq!(kept_for(None, cap), cap);
    }
}
