//! What the load generator reads of the processes it watches, from `/proc`:
//! CPU ticks (the process's and its descendants') around the measured
//! phase, and memory high-water marks after it. Linux only, as the benches are.

use std::collections::HashMap;

/// USER_HZ on Linux x86_64/aarch64: the unit of `/proc/<pid>/stat` times.
pub const CLK_TCK: f64 = 100.0;

#[derive(Clone, Copy, Default)]
pub struct Cpu {
    pub own: u64,  // utime+stime ticks of the process (all its threads)
    pub tree: u64, // plus those of its live descendants
}

pub fn stat_fields(pid: u32) -> Option<(u32, u64)> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = &s[s.rfind(')')? + 2..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    let ppid = f.get(1)?.parse().ok()?;
    let ticks = f.get(11)?.parse::<u64>().ok()? + f.get(12)?.parse::<u64>().ok()?;
    Some((ppid, ticks))
}

pub fn cpu_of(pid: u32) -> Cpu {
    let own = stat_fields(pid).map(|(_, t)| t).unwrap_or(0);
    // Descendants: walk /proc once, then follow parent links.
    let mut parent: HashMap<u32, (u32, u64)> = HashMap::new();
    if let Ok(dir) = std::fs::read_dir("/proc") {
        for e in dir.flatten() {
            if let Some(p) = e.file_name().to_str().and_then(|n| n.parse::<u32>().ok()) {
                if let Some(v) = stat_fields(p) {
                    parent.insert(p, v);
                }
            }
        }
    }
    let mut tree = 0;
    for (&p, &(_, ticks)) in &parent {
        let mut cur = p;
        for _ in 0..64 {
            if cur == pid {
                tree += ticks;
                break;
            }
            match parent.get(&cur) {
                Some(&(pp, _)) if pp != 0 => cur = pp,
                _ => break,
            }
        }
    }
    Cpu { own, tree }
}

pub fn status_kb(pid: u32, key: &str) -> Option<u64> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    s.lines()
        .find(|l| l.starts_with(key))?
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()
}
