//! `mcp-warden-sidecar bridge --socket PATH -- CMD…`: runs inside the server
//! container and serves a stdio MCP server on a unix socket shared with the
//! facade container.
//!
//! Each connection gets its own server process (the facade opens one per
//! session), wired byte for byte: the bridge never parses, buffers or
//! restarts anything. A process that exits closes its connection; a closed
//! connection ends its process (the whole process group). The facade decides
//! about restarts. The bridge itself runs until SIGTERM/SIGINT, then ends
//! every process and removes the socket.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use nix::sys::signal::{killpg, Signal};
use nix::unistd::Pid;
use tokio::io::AsyncWriteExt;
use tokio::net::{UnixListener, UnixStream};
use tokio::process::Command;
use tokio::signal::unix::{signal, SignalKind};

pub async fn run(socket: PathBuf, program: String, args: Vec<String>) -> anyhow::Result<()> {
    if socket.exists() {
        std::fs::remove_file(&socket)?;
    }
    if let Some(dir) = socket.parent() {
        std::fs::create_dir_all(dir)?;
    }
    let listener = UnixListener::bind(&socket)?;
    tracing::info!(socket = %socket.display(), %program, "bridge listening");
    let mut term = signal(SignalKind::terminate())?;
    let mut int = signal(SignalKind::interrupt())?;
    let mut children = tokio::task::JoinSet::new();
    loop {
        tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((conn, _)) => { children.spawn(serve(conn, program.clone(), args.clone())); }
                Err(e) => tracing::warn!(error = %e, "accept failed"),
            },
            _ = term.recv() => break,
            _ = int.recv() => break,
            Some(_) = children.join_next(), if !children.is_empty() => {}
        }
    }
    children.shutdown().await;
    remove(&socket);
    Ok(())
}

/// Copy the running executable to `dest`, executable by everyone (the
/// server container may run as another user).
pub fn install(dest: &Path) -> anyhow::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    let me = std::env::current_exe()?;
    if let Some(dir) = dest.parent() {
        std::fs::create_dir_all(dir)?;
    }
    let partial = dest.with_extension("partial");
    std::fs::copy(&me, &partial)?;
    std::fs::set_permissions(&partial, std::fs::Permissions::from_mode(0o755))?;
    std::fs::rename(&partial, dest)?;
    eprintln!("installed {} -> {}", me.display(), dest.display());
    Ok(())
}

fn remove(socket: &Path) {
    let _ = std::fs::remove_file(socket);
}

struct Group(u32);

impl Drop for Group {
    fn drop(&mut self) {
        let _ = killpg(Pid::from_raw(self.0 as i32), Signal::SIGKILL);
    }
}

async fn serve(conn: UnixStream, program: String, args: Vec<String>) {
    let spawned = Command::new(&program)
        .args(&args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .process_group(0)
        .kill_on_drop(true)
        .spawn();
    let mut child = match spawned {
        Ok(child) => child,
        Err(e) => {
            tracing::error!(%program, error = %e, "cannot start the MCP server");
            return;
        }
    };
    let _group = child.id().map(Group);
    let mut stdin = child.stdin.take().expect("piped");
    let mut stdout = child.stdout.take().expect("piped");
    let (mut from_facade, mut to_facade) = conn.into_split();
    let inbound = async {
        let _ = tokio::io::copy(&mut from_facade, &mut stdin).await;
        let _ = stdin.shutdown().await;
    };
    let outbound = async {
        let _ = tokio::io::copy(&mut stdout, &mut to_facade).await;
        let _ = to_facade.shutdown().await;
    };
    tokio::pin!(inbound, outbound);
    tokio::select! {
        // The server ended its output (it exited): the connection ends.
        _ = &mut outbound => {}
        // The facade hung up: the server gets EOF and a moment to exit.
        _ = &mut inbound => {
            let _ = tokio::time::timeout(Duration::from_secs(2), &mut outbound).await;
        }
    }
    match tokio::time::timeout(Duration::from_secs(2), child.wait()).await {
        Ok(Ok(status)) => tracing::info!(%program, %status, "MCP server process ended"),
        _ => tracing::info!(%program, "MCP server process killed"),
    }
}
