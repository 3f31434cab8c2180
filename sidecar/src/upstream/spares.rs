//! Pre-started upstream links, so a new session does not wait for a server
//! process to boot (a Node or Python MCP server takes about a second).
//!
//! A bounded pool: `size` links are kept ready; taking one starts its
//! replacement in the background. A spare that reported anything while idle
//! (it exited, or spoke before being spoken to) is discarded, not handed out.
//! HTTP upstreams connect lazily, so they keep no spares; a modern server
//! is one shared process, so it keeps none either (spares are for legacy
//! servers, which get a process per session).

use std::sync::{Arc, Mutex};

use tokio::sync::mpsc;

use super::{connect, Link, LinkEvent, LinkLimits, LinkMode, UpstreamError, UpstreamTarget};

type Spare = (Link, mpsc::Receiver<LinkEvent>);

pub struct Spares {
    target: UpstreamTarget,
    limits: LinkLimits,
    size: usize,
    ready: Mutex<Vec<Spare>>,
}

impl Spares {
    pub fn new(target: UpstreamTarget, limits: LinkLimits, size: usize) -> Arc<Spares> {
        let size = if matches!(target, UpstreamTarget::Http(_) | UpstreamTarget::Gateway(_)) {
            0
        } else {
            size
        };
        Arc::new(Spares {
            target,
            limits,
            size,
            ready: Mutex::new(Vec::new()),
        })
    }

    /// A ready link: a healthy spare if there is one, else a fresh one.
    pub async fn take(self: &Arc<Self>) -> Result<Spare, UpstreamError> {
        let spare = loop {
            let Some((link, mut events)) = self.ready.lock().unwrap().pop() else {
                break None;
            };
            if events.try_recv().is_err() {
                break Some((link, events));
            }
        };
        self.refill();
        match spare {
            Some(spare) => Ok(spare),
            None => connect(&self.target, &self.limits, &LinkMode::default()).await,
        }
    }

    /// Start spares until the pool is full.
    pub fn refill(self: &Arc<Self>) {
        let missing = self.size.saturating_sub(self.ready.lock().unwrap().len());
        for _ in 0..missing {
            let pool = self.clone();
            tokio::spawn(async move {
                if let Ok(spare) = connect(&pool.target, &pool.limits, &LinkMode::default()).await {
                    let mut ready = pool.ready.lock().unwrap();
                    if ready.len() < pool.size {
                        ready.push(spare);
                    }
                }
            });
        }
    }
}
