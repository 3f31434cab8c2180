//! A small MCP load generator over Streamable HTTP, for loopback benchmarks.
//!
//!   mcp-bench-load run --url URL -c C [--sessions S] [--requests N] [--duration SECS]
//!                      [--warmup SECS] [--tool NAME] [--arguments JSON] [--expect-text TEXT]
//!                      [--header 'K: V']... [--watch NAME=PID]... [--version V] [--modern]
//!                      [--batch N]
//!   mcp-bench-load idle --url URL --sessions N [--header 'K: V']... [--hold-secs T]
//!
//! `run`: opens S sessions (initialize + notifications/initialized; default
//! min(C, 16)), then C workers, each on its own keep-alive connection and bound
//! to session `worker % S`, send `tools/call` back to back: first for `--warmup`
//! seconds (not recorded), then until N calls were sent or `--duration`
//! seconds passed, whichever comes first. Every answer is checked (HTTP 200,
//! a JSON-RPC result with the same id, not `isError`, and the echoed text when
//! `--expect-text` is given), JSON or SSE. Sessions are deleted at the end.
//! For each `--watch` process it samples utime+stime (and that of the
//! process's descendants) around the measured phase, and VmHWM/VmRSS after it.
//! Prints one JSON object on stdout.
//!
//! `--batch N`: each POST is a JSON-RPC batch of N `tools/call` (use with
//! `--version 2025-03-26`); a POST counts as one call in the report, which
//! says `batch`, and succeeds when every element does.
//!
//! `--modern`: a 2026-07-28 client: no sessions, the version and capabilities
//! in every request's `_meta`, `Mcp-Method` and `Mcp-Name` headers.
//!
//! `idle`: opens N sessions, prints `READY <n>` and holds them until stdin
//! closes or a line arrives (at most --hold-secs, default 120), then deletes them.

use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::Full;
use hyper::client::conn::http1::SendRequest;
use hyper::Method;
use serde_json::json;
use tokio::io::AsyncBufReadExt;
use tokio::sync::Barrier;

#[path = "../load_check.rs"]
mod load_check;
#[path = "../load_client.rs"]
mod load_client;
#[path = "../load_proc.rs"]
mod load_proc;
use load_client::{close_session, connect, open_session, post, Session, Target};
use load_proc::{cpu_of, stat_fields, status_kb, Cpu, CLK_TCK};

fn die(msg: impl std::fmt::Display) -> ! {
    eprintln!("mcp-bench-load: {msg}");
    std::process::exit(2)
}

fn parse_url(url: &str) -> (String, String) {
    let rest = url
        .strip_prefix("http://")
        .unwrap_or_else(|| die("only http:// URLs"));
    let (addr, path) = match rest.find('/') {
        Some(i) => (&rest[..i], &rest[i..]),
        None => (rest, "/"),
    };
    let host = addr.rsplit_once(':').map(|(h, _)| h).unwrap_or(addr);
    if !(host == "localhost" || host.starts_with("127.") || host == "[::1]") {
        die("loopback addresses only");
    }
    (addr.to_string(), path.to_string())
}

struct Args {
    mode: String,
    url: String,
    concurrency: usize,
    sessions: Option<usize>,
    requests: u64,
    duration: f64,
    warmup: f64,
    tool: String,
    arguments: String,
    expect_text: Option<String>,
    headers: Vec<(String, String)>,
    watch: Vec<(String, u32)>,
    version: String,
    hold_secs: f64,
    modern: bool,
    batch: usize,
}

fn parse_args() -> Args {
    let mut it = std::env::args().skip(1);
    let mode = it
        .next()
        .unwrap_or_else(|| die("usage: mcp-bench-load run|idle --url URL ..."));
    let mut a = Args {
        mode,
        url: String::new(),
        concurrency: 1,
        sessions: None,
        requests: 10_000,
        duration: 3.0,
        warmup: 0.5,
        tool: "echo".into(),
        arguments: r#"{"message":"hello"}"#.into(),
        expect_text: None,
        headers: Vec::new(),
        watch: Vec::new(),
        version: "2025-06-18".into(),
        hold_secs: 120.0,
        modern: false,
        batch: 1,
    };
    while let Some(flag) = it.next() {
        let mut val = || {
            it.next()
                .unwrap_or_else(|| die(format!("{flag} needs a value")))
        };
        match flag.as_str() {
            "--url" => a.url = val(),
            "-c" | "--concurrency" => a.concurrency = val().parse().unwrap_or_else(|_| die("-c")),
            "--sessions" => a.sessions = Some(val().parse().unwrap_or_else(|_| die("--sessions"))),
            "--modern" => a.modern = true,
            "--batch" => a.batch = val().parse().unwrap_or_else(|_| die("--batch")),
            "-n" | "--requests" => a.requests = val().parse().unwrap_or_else(|_| die("-n")),
            "-d" | "--duration" => a.duration = val().parse().unwrap_or_else(|_| die("-d")),
            "--warmup" => a.warmup = val().parse().unwrap_or_else(|_| die("--warmup")),
            "--tool" => a.tool = val(),
            "--arguments" => a.arguments = val(),
            "--expect-text" => a.expect_text = Some(val()),
            "--version" => a.version = val(),
            "--hold-secs" => a.hold_secs = val().parse().unwrap_or_else(|_| die("--hold-secs")),
            "-H" | "--header" => {
                let h = val();
                let (k, v) = h.split_once(':').unwrap_or_else(|| die("--header 'K: V'"));
                a.headers.push((k.trim().to_string(), v.trim().to_string()));
            }
            "--watch" => {
                let w = val();
                let (n, p) = w.split_once('=').unwrap_or_else(|| die("--watch NAME=PID"));
                a.watch.push((
                    n.to_string(),
                    p.parse().unwrap_or_else(|_| die("--watch pid")),
                ));
            }
            other => die(format!("unknown flag {other}")),
        }
    }
    if a.url.is_empty() {
        die("--url is required");
    }
    // Bounded: at most 10 minutes and 10 million calls per invocation.
    a.duration = a.duration.clamp(0.1, 600.0);
    a.warmup = a.warmup.clamp(0.0, 60.0);
    a.requests = a.requests.clamp(1, 10_000_000);
    a.concurrency = a.concurrency.clamp(1, 4096);
    a.hold_secs = a.hold_secs.clamp(0.0, 600.0);
    a.batch = a.batch.clamp(1, 10_000);
    a
}

#[derive(Default)]
struct WorkerOut {
    lat_ns: Vec<u64>,
    errors: u64,
    samples: Vec<String>,
    warm_calls: u64,
}

#[allow(clippy::too_many_arguments)]
async fn worker(
    t: Arc<Target>,
    s: Arc<Session>,
    tool: Arc<String>,
    arguments: Arc<String>,
    expect: Arc<Option<String>>,
    warm_until: Instant,
    start: Arc<(Barrier, Barrier)>,
    budget: Arc<AtomicI64>,
    end: Arc<AtomicU64>, // ns after `origin`: the measured phase's deadline
    origin: Instant,
    next_id: Arc<AtomicU64>,
    batch: usize,
) -> WorkerOut {
    let mut out = WorkerOut {
        lat_ns: Vec::with_capacity(4096),
        ..Default::default()
    };
    let mut tx = connect(&t).await.ok();
    let one = |tx: &mut Option<SendRequest<Full<Bytes>>>| {
        let t = t.clone();
        let s = s.clone();
        let id = next_id.fetch_add(batch.max(1) as u64, Ordering::Relaxed);
        let meta = if t.modern.is_some() {
            r#","_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{},"io.modelcontextprotocol/clientInfo":{"name":"mcp-bench-load","version":"0"}}"#
        } else {
            ""
        };
        let body = load_check::body(id, batch, &tool, &arguments, meta);
        let expect = expect.clone();
        let taken = tx.take();
        async move {
            let mut conn = match taken {
                Some(c) => c,
                None => connect(&t).await?,
            };
            let a = post(&mut conn, &t, Some(&s), Method::POST, Bytes::from(body)).await;
            let a = match a {
                Ok(a) => a,
                Err(e) => return Err(e), // drop the connection: reconnect next time
            };
            let res = load_check::check(&a, id, batch, expect.as_deref());
            Ok((conn, res))
        }
    };
    // Warm-up: not recorded.
    while Instant::now() < warm_until {
        match one(&mut tx).await {
            Ok((c, _)) => tx = Some(c),
            Err(_) => tokio::time::sleep(Duration::from_millis(5)).await,
        }
        out.warm_calls += 1;
    }
    start.0.wait().await; // everyone warmed up
    start.1.wait().await; // the main task sampled CPU: go
    let deadline = origin + Duration::from_nanos(end.load(Ordering::Relaxed));
    loop {
        if Instant::now() >= deadline || budget.fetch_sub(1, Ordering::Relaxed) <= 0 {
            break;
        }
        let t0 = Instant::now();
        match one(&mut tx).await {
            Ok((c, Ok(()))) => {
                out.lat_ns.push(t0.elapsed().as_nanos() as u64);
                tx = Some(c);
            }
            Ok((c, Err(e))) => {
                out.errors += 1;
                if out.samples.len() < 3 {
                    out.samples.push(e);
                }
                tx = Some(c);
            }
            Err(e) => {
                out.errors += 1;
                if out.samples.len() < 3 {
                    out.samples.push(e);
                }
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        }
    }
    out
}

fn pct(sorted: &[u64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1] as f64 / 1000.0
}

async fn run(a: Args) {
    let (addr, path) = parse_url(&a.url);
    let t = Arc::new(Target {
        addr,
        path,
        headers: a.headers.clone(),
        version: a.version.clone(),
        modern: a.modern.then(|| a.tool.clone()),
    });
    let n_sessions = a
        .sessions
        .unwrap_or(a.concurrency.min(16))
        .clamp(1, a.concurrency);
    let setup0 = Instant::now();
    let mut sessions = Vec::with_capacity(n_sessions);
    for i in 0..n_sessions {
        match open_session(&t, i as u64).await {
            Ok(s) => sessions.push(Arc::new(s)),
            Err(e) => die(format!("session {i}: {e}")),
        }
    }
    let setup_s = setup0.elapsed().as_secs_f64();
    let origin = Instant::now();
    let warm_until = origin + Duration::from_secs_f64(a.warmup);
    let barriers = Arc::new((
        Barrier::new(a.concurrency + 1),
        Barrier::new(a.concurrency + 1),
    ));
    let budget = Arc::new(AtomicI64::new(a.requests as i64));
    let end = Arc::new(AtomicU64::new(u64::MAX / 4));
    let next_id = Arc::new(AtomicU64::new(1));
    let tool = Arc::new(a.tool.clone());
    let arguments = Arc::new(a.arguments.clone());
    let expect = Arc::new(a.expect_text.clone());
    let mut handles = Vec::with_capacity(a.concurrency);
    for w in 0..a.concurrency {
        handles.push(tokio::spawn(worker(
            t.clone(),
            sessions[w % n_sessions].clone(),
            tool.clone(),
            arguments.clone(),
            expect.clone(),
            warm_until,
            barriers.clone(),
            budget.clone(),
            end.clone(),
            origin,
            next_id.clone(),
            a.batch,
        )));
    }
    barriers.0.wait().await;
    let cpu0: Vec<Cpu> = a.watch.iter().map(|(_, p)| cpu_of(*p)).collect();
    let me0 = stat_fields(std::process::id()).map_or(0, |(_, t)| t);
    let t0 = Instant::now();
    end.store(
        (t0 + Duration::from_secs_f64(a.duration) - origin).as_nanos() as u64,
        Ordering::Relaxed,
    );
    barriers.1.wait().await;
    let mut lat = Vec::new();
    let (mut errors, mut samples, mut warm) = (0u64, Vec::new(), 0u64);
    for h in handles {
        let o = h.await.unwrap_or_default();
        lat.extend(o.lat_ns);
        errors += o.errors;
        warm += o.warm_calls;
        for s in o.samples {
            if samples.len() < 5 && !samples.contains(&s) {
                samples.push(s);
            }
        }
    }
    let elapsed = t0.elapsed().as_secs_f64();
    let cpu1: Vec<Cpu> = a.watch.iter().map(|(_, p)| cpu_of(*p)).collect();
    let me1 = stat_fields(std::process::id()).map_or(0, |(_, t)| t);
    lat.sort_unstable();
    let ok = lat.len() as u64;
    let mean = if ok > 0 {
        lat.iter().sum::<u64>() as f64 / ok as f64 / 1000.0
    } else {
        f64::NAN
    };
    let mut watch = serde_json::Map::new();
    for (i, (name, pid)) in a.watch.iter().enumerate() {
        let own = (cpu1[i].own.saturating_sub(cpu0[i].own)) as f64 / CLK_TCK;
        let tree = (cpu1[i].tree.saturating_sub(cpu0[i].tree)) as f64 / CLK_TCK;
        let calls = (ok + errors).max(1) as f64;
        watch.insert(
            name.clone(),
            json!({
                "pid": pid,
                "cpu_s": own,
                "cpu_us_per_call": own / calls * 1e6,
                "cpu_tree_s": tree,
                "cpu_tree_us_per_call": tree / calls * 1e6,
                "vmhwm_kib": status_kb(*pid, "VmHWM:"),
                "vmrss_kib": status_kb(*pid, "VmRSS:"),
            }),
        );
    }
    for s in &sessions {
        close_session(&t, s).await;
    }
    let report = json!({
        "url": a.url,
        "concurrency": a.concurrency,
        "batch": a.batch,
        "sessions": n_sessions,
        "session_ids": sessions.iter().filter(|s| s.id.is_some()).count(),
        "protocol_version": sessions[0].version,
        "setup_s": setup_s,
        "warmup_calls": warm,
        "ok": ok,
        "errors": errors,
        "error_samples": samples,
        "elapsed_s": elapsed,
        "throughput_rps": ok as f64 / elapsed,
        "latency_us": {
            "min": pct(&lat, 0.0001),
            "p50": pct(&lat, 50.0),
            "p90": pct(&lat, 90.0),
            "p99": pct(&lat, 99.0),
            "p999": pct(&lat, 99.9),
            "max": lat.last().map(|v| *v as f64 / 1000.0),
            "mean": mean,
        },
        "watch": watch,
        // The load generator's own CPU: on a small machine it shares the cores.
        "client_cpu_us_per_call": (me1.saturating_sub(me0)) as f64 / CLK_TCK / (ok + errors).max(1) as f64 * 1e6,
    });
    println!("{report}");
}

async fn idle(a: Args) {
    let (addr, path) = parse_url(&a.url);
    let t = Arc::new(Target {
        addr,
        path,
        headers: a.headers.clone(),
        version: a.version.clone(),
        modern: a.modern.then(|| a.tool.clone()),
    });
    let n = a.sessions.unwrap_or(1000).clamp(1, 100_000);
    let t0 = Instant::now();
    // 8 openers at a time.
    let next = Arc::new(AtomicU64::new(0));
    let mut hs = Vec::new();
    for _ in 0..8 {
        let (t, next) = (t.clone(), next.clone());
        hs.push(tokio::spawn(async move {
            let mut mine = Vec::new();
            loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i >= n as u64 {
                    return Ok::<_, String>(mine);
                }
                mine.push(
                    open_session(&t, i)
                        .await
                        .map_err(|e| format!("session {i}: {e}"))?,
                );
            }
        }));
    }
    let mut sessions = Vec::with_capacity(n);
    for h in hs {
        match h.await.unwrap() {
            Ok(s) => sessions.extend(s),
            Err(e) => die(e),
        }
    }
    println!("READY {} {:.3}", sessions.len(), t0.elapsed().as_secs_f64());
    let mut line = String::new();
    let mut stdin = tokio::io::BufReader::new(tokio::io::stdin());
    let _ = tokio::time::timeout(
        Duration::from_secs_f64(a.hold_secs),
        stdin.read_line(&mut line),
    )
    .await;
    for s in &sessions {
        close_session(&t, s).await;
    }
    println!("CLOSED {}", sessions.len());
}

fn main() {
    let a = parse_args();
    // One thread: the load generator takes at most one core of the two.
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    match a.mode.as_str() {
        "run" => rt.block_on(run(a)),
        "idle" => rt.block_on(idle(a)),
        m => die(format!("unknown mode {m}")),
    }
}
