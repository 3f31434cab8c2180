//! The tasks callers created through this replica (the tasks extension of
//! 2026-07-28), by the nonce their sealed task id carries.
//!
//! Where it sits: the tools/call step adds a task when the server answers a
//! call with a task handle ([`crate::session::steps::task::adopt`]), or
//! holds a call a person must approve as a task of its own
//! ([`crate::session::steps::held`]: the only content the table keeps, a
//! held call's arguments and its filtered result, bounded); the
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

/// One task, as the facade keeps it (never a server task's content).
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
    /// A task of the facade's own, made for a call awaiting a person's
    /// approval; `None` once the approved call follows a server task.
    pub held: Option<Held>,
    /// The keys of the server's latest `roots/list` questions (its
    /// `inputRequests`), which the facade answers on the client's update.
    pub roots_asked: Vec<String>,
}

/// A call the facade holds as a task of its own while a person is asked to
/// approve it: the server has not heard of it. Once approved, the call runs
/// and its answer (a direct result, already through the tool's output
/// filter) is kept here until the task expires; a server task instead
/// replaces the hold.
#[derive(Clone, Debug)]
pub struct Held {
    /// The call's `name` and `arguments`, exactly as approved: an answer
    /// cannot change them.
    pub call: serde_json::Value,
    /// The approval's elicitation (`inputRequests`).
    pub question: serde_json::Value,
    /// Past this the approval can no longer be answered.
    pub answer_by: Instant,
    /// When the task was made (RFC 3339) and its time to live.
    pub created_at: String,
    pub ttl_ms: u64,
    /// How the task ended: `{"result": …}` or `{"error": …}`.
    pub outcome: Option<serde_json::Value>,
    /// The size of a kept result (counted against [`HELD_BYTES`]).
    pub bytes: usize,
}

/// The most result bytes the facade keeps for its own tasks on a replica;
/// a result past it ends its task `failed` instead of being kept.
pub const HELD_BYTES: usize = 32 * 1024 * 1024;

/// The most of [`HELD_BYTES`] one caller's results may take (a quarter, as
/// for the approval queue): a few callers cannot fill it for the rest.
pub const HELD_BYTES_PER_CALLER: usize = HELD_BYTES / 4;

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

    /// The server's latest `roots/list` questions for the task under `key`.
    pub fn ask_roots(&self, key: &str, roots_asked: Vec<String>) {
        if let Some(e) = self.live.lock().unwrap().get_mut(key) {
            e.roots_asked = roots_asked;
        }
    }

    /// How many tasks the caller `caller` has that have not ended, and
    /// ended ones whose result the facade keeps (they hold memory).
    pub fn running_for(&self, caller: &str) -> usize {
        let mut live = self.live.lock().unwrap();
        sweep(&mut live);
        live.values()
            .filter(|e| e.caller == caller && (!e.is_terminal() || e.holds_result()))
            .count()
    }

    /// The held call of the task under `key`, once: its approval is being
    /// answered, so it moves on (`working`); a second answer finds nothing.
    pub fn answer(&self, key: &str) -> Option<Held> {
        let mut live = self.live.lock().unwrap();
        let e = live.get_mut(key)?;
        if e.status != "input_required" {
            return None;
        }
        let held = e.held.clone()?;
        e.status = "working".into();
        Some(held)
    }

    /// The approved call became the server's task `upstream_id`: the task
    /// follows it from now on.
    pub fn bind(&self, key: &str, upstream_id: &str, status: &str) {
        if let Some(e) = self.live.lock().unwrap().get_mut(key) {
            e.upstream_id = upstream_id.to_string();
            e.held = None;
            if !e.is_terminal() {
                e.status = status.to_string();
            }
        }
    }

    /// End a held task with `outcome` (`{"result": …}` or `{"error": …}`),
    /// `status` its final status. A result that would take the replica's
    /// kept results past [`HELD_BYTES`], or its caller's past
    /// [`HELD_BYTES_PER_CALLER`], is dropped and the task fails.
    /// `Some` when this ended it, as [`Tasks::update`]: the task as it was,
    /// and the status it ended with.
    pub fn settle(
        &self,
        key: &str,
        status: &str,
        outcome: serde_json::Value,
    ) -> Option<(TaskEntry, String)> {
        let mut live = self.live.lock().unwrap();
        sweep(&mut live);
        let caller = live.get(key)?.caller.clone();
        let (kept, kept_by_caller) = live
            .values()
            .filter_map(|e| e.held.as_ref().map(|h| (e, h.bytes)))
            .fold((0, 0), |(all, own), (e, bytes)| {
                (
                    all + bytes,
                    own + if e.caller == caller { bytes } else { 0 },
                )
            });
        let e = live.get_mut(key)?;
        if e.is_terminal() {
            return None;
        }
        let before = e.clone();
        let held = e.held.as_mut()?;
        let bytes = if outcome.get("result").is_some() {
            outcome.to_string().len()
        } else {
            0
        };
        let (status, outcome, bytes) =
            if kept + bytes > HELD_BYTES || kept_by_caller + bytes > HELD_BYTES_PER_CALLER {
                let error = serde_json::json!({"error": {
                    "code": -32603,
                    "message": "the task's result is too large for the facade to keep",
                }});
                ("failed", error, 0)
            } else {
                (status, outcome, bytes)
            };
        held.outcome = Some(outcome);
        held.bytes = bytes;
        e.status = status.to_string();
        Some((before, status.to_string()))
    }
}

impl Tasks {
    /// A kept result was delivered: the facade lets go of it (it no longer
    /// counts against the caller's live tasks or [`HELD_BYTES`]).
    pub fn release(&self, key: &str) {
        let mut live = self.live.lock().unwrap();
        if let Some(held) = live.get_mut(key).and_then(|e| e.held.as_mut()) {
            if held.bytes > 0 {
                held.bytes = 0;
                held.outcome = Some(serde_json::json!({
                    "statusMessage": "the result was delivered and is no longer kept",
                }));
            }
        }
    }
}

impl TaskEntry {
    /// Whether the facade keeps this task's result in memory.
    pub fn holds_result(&self) -> bool {
        self.held.as_ref().is_some_and(|h| h.bytes > 0)
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
            held: None,
            roots_asked: Vec::new(),
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

    fn held(caller: &str) -> TaskEntry {
        TaskEntry {
            held: Some(Held {
                call: serde_json::json!({"name": "t", "arguments": {}}),
                question: serde_json::json!({}),
                answer_by: Instant::now() + Duration::from_secs(60),
                outcome: None,
                bytes: 0,
                created_at: String::new(),
                ttl_ms: 60_000,
            }),
            ..entry(caller, "input_required", 60_000)
        }
    }

    #[test]
    fn a_held_call_is_answered_once() {
        let tasks = Tasks::default();
        tasks.insert("h".into(), held("alice"));
        assert!(tasks.answer("h").is_some());
        assert!(tasks.answer("h").is_none());
        assert_eq!(tasks.get("h").unwrap().status, "working");
    }

    #[test]
    fn a_kept_result_counts_until_delivered_and_the_cap_bounds_them() {
        let tasks = Tasks::default();
        tasks.insert("h".into(), held("alice"));
        tasks.answer("h");
        let result = serde_json::json!({"result": {"content": []}});
        let (_, status) = tasks.settle("h", "completed", result.clone()).unwrap();
        assert_eq!(status, "completed");
        // Ended once; a kept result still counts as a live task.
        assert!(tasks.settle("h", "failed", result).is_none());
        assert_eq!(tasks.running_for("alice"), 1);
        tasks.release("h");
        assert_eq!(tasks.running_for("alice"), 0);
        // Past the replica's cap a result is not kept: the task fails.
        tasks.insert("big".into(), held("bob"));
        let big = "x".repeat(HELD_BYTES);
        let (_, status) = tasks
            .settle("big", "completed", serde_json::json!({"result": big}))
            .unwrap();
        assert_eq!(status, "failed");
        let kept = tasks.get("big").unwrap().held.unwrap();
        assert_eq!(kept.bytes, 0);
        assert!(kept.outcome.unwrap().get("error").is_some());
    }

    #[test]
    fn one_caller_keeps_at_most_its_share_and_others_still_get_theirs() {
        let tasks = Tasks::default();
        let result = |n: usize| serde_json::json!({"result": "x".repeat(n)});
        let settle = |key: &str, caller: &str, n: usize| {
            tasks.insert(key.into(), held(caller));
            tasks.answer(key);
            tasks.settle(key, "completed", result(n)).unwrap().1
        };
        let third = HELD_BYTES_PER_CALLER / 3;
        assert_eq!(settle("m1", "mallory", third), "completed");
        assert_eq!(settle("m2", "mallory", third), "completed");
        assert_eq!(settle("m3", "mallory", third), "failed");
        assert_eq!(settle("a1", "alice", third), "completed");
        // Delivered, a result no longer counts against the share.
        tasks.release("m1");
        assert_eq!(settle("m4", "mallory", third), "completed");
    }

    #[test]
    fn a_task_is_kept_at_most_the_cap() {
        let cap = Duration::from_secs(3600);
        assert_eq!(kept_for(Some(1000), cap), Duration::from_secs(1));
        assert_eq!(kept_for(Some(u64::MAX), cap), cap);
        assert_eq!(kept_for(None, cap), cap);
    }
}
