//! Upstream over a child process's stdio: one process per session.
//!
//! stdout carries protocol only; stderr is logged line by line. The child
//! gets only the environment decided at start ([`super::child_env`]), never
//! the facade's own. It runs in its own process group so that wrappers like `npx` or `uv run` are
//! killed together with what they started.

use std::ffi::OsString;
use std::process::Stdio;

use futures::StreamExt;
use nix::sys::signal::{killpg, Signal};
use nix::unistd::Pid;
use tokio::process::Command;
use tokio::sync::mpsc;
use tokio_util::codec::{FramedRead, LinesCodec};

use super::{framed, Link, LinkEvent, LinkLimits, UpstreamError};

/// Kills the child's process group when the link is dropped.
struct GroupKiller(Option<u32>);

impl Drop for GroupKiller {
    fn drop(&mut self) {
        if let Some(pid) = self.0 {
            let _ = killpg(Pid::from_raw(pid as i32), Signal::SIGKILL);
        }
    }
}

pub fn spawn(
    program: &str,
    args: &[String],
    env: &[(OsString, OsString)],
    limits: &LinkLimits,
) -> Result<(Link, mpsc::Receiver<LinkEvent>), UpstreamError> {
    let mut child = Command::new(program)
        .args(args)
        .env_clear()
        .envs(env.iter().map(|(k, v)| (k, v)))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .kill_on_drop(true)
        .spawn()
        .map_err(|source| UpstreamError::Spawn {
            program: program.to_string(),
            source,
        })?;
    let pid = child.id();
    let stdin = child.stdin.take().expect("stdin is piped");
    let stdout = child.stdout.take().expect("stdout is piped");
    let stderr = child.stderr.take().expect("stderr is piped");

    let (events_tx, events_rx) = mpsc::channel(limits.queue_depth);
    let (tx, reader) = framed::start(stdout, stdin, limits, events_tx.clone());

    let name = program.rsplit('/').next().unwrap_or(program).to_string();
    tokio::spawn(async move {
        let mut lines = FramedRead::new(stderr, LinesCodec::new_with_max_length(64 * 1024));
        while let Some(line) = lines.next().await {
            match line {
                Ok(line) => {
                    tracing::info!(target: "upstream_stderr", server = %name, pid, "{line}")
                }
                Err(_) => continue,
            }
        }
    });

    tokio::spawn(async move {
        let why = reader
            .await
            .unwrap_or_else(|e| format!("reader failed: {e}"));
        // The output closed: the process is exiting or gone. Give it a moment
        // to report how it ended; a wedged child is killed by the guard.
        let status = tokio::time::timeout(std::time::Duration::from_secs(2), child.wait()).await;
        let reason = match status {
            Ok(Ok(status)) => format!("the MCP server process exited ({status})"),
            _ => format!("the MCP server stopped responding ({why})"),
        };
        let _ = events_tx.send(LinkEvent::Closed { reason }).await;
    });

    Ok((
        Link::framed(tx, Some(Box::new(GroupKiller(pid)))),
        events_rx,
    ))
}
