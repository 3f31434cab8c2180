//! The table of live sessions: creation under a cap (in all, and per
//! caller), lookup by `Mcp-Session-Id`, the idle reaper, and shutdown.

use std::collections::HashMap;
use std::sync::{Arc, RwLock};
use std::time::Duration;

use crate::auth::identity::Identity;
use crate::session::channel::Channel;
use crate::session::context::Context;
use crate::session::Session;

#[derive(Debug, thiserror::Error)]
pub enum CreateError {
    #[error("the facade is at its limit of {0} sessions; retry later or end unused sessions")]
    TooMany(usize),
    /// One caller may not take every slot: each identity (each address, for
    /// anonymous callers) has its own share.
    #[error("you have {0} busy sessions, the most one caller may hold; wait for one to finish, or end one (DELETE)")]
    TooManyForCaller(usize),
}

#[derive(Default)]
pub struct Sessions {
    map: RwLock<HashMap<Arc<str>, Arc<Session>>>,
}

impl Sessions {
    pub fn get(&self, id: &str) -> Option<Arc<Session>> {
        self.map
            .read()
            .unwrap()
            .get(id)
            .filter(|s| !s.is_closed())
            .cloned()
    }

    pub fn len(&self) -> usize {
        self.map.read().unwrap().len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Start a new (legacy) session with a fresh, unguessable id, if the
    /// facade and the caller (counted by `quota_key`) each have a slot left.
    /// The server's era must be known (see `Context::upstream_info`).
    ///
    /// A caller at its share gets room by ending its own session that has
    /// been idle longest (clients often leave without DELETE; that one is
    /// answered 404 if it comes back, and re-initializes). Only when every
    /// one of its sessions is busy (a call in flight, a stream open) is it
    /// refused: so one caller never holds more than its share, and an
    /// abandoned session never locks its owner out.
    pub fn create(
        &self,
        app: &Arc<Context>,
        hub: Option<&Arc<Channel>>,
        owner: Arc<Identity>,
        quota_key: String,
    ) -> Result<Arc<Session>, CreateError> {
        let mut map = self.map.write().unwrap();
        let per_caller = app.limits.max_sessions_per_identity;
        let theirs: Vec<&Arc<Session>> = map
            .values()
            .filter(|s| s.quota_key == quota_key && !s.is_closed())
            .collect();
        if theirs.len() >= per_caller {
            let idlest = theirs
                .iter()
                .filter_map(|s| s.idle_for().map(|idle| (idle, s.id.clone())))
                .max_by_key(|(idle, _)| *idle);
            let Some((_, evict)) = idlest else {
                return Err(CreateError::TooManyForCaller(per_caller));
            };
            if let Some(old) = map.remove(&evict) {
                old.close("the client opened more sessions than it may hold; this one, idle the longest, has ended");
            }
        }
        if map.len() >= app.limits.max_sessions {
            return Err(CreateError::TooMany(app.limits.max_sessions));
        }
        let id: Arc<str> = app.session_ids.mint().into();
        // A modern server serves every session from its one channel (the
        // facade makes the handshake); a legacy one gets a channel (a
        // process, an upstream session) per session.
        let session = match hub {
            Some(hub) => Session::on_channel(
                app.clone(),
                id.clone(),
                owner,
                quota_key,
                hub.clone(),
                crate::session::channel::Era::Legacy,
            ),
            None => Session::start(app.clone(), id.clone(), owner, quota_key),
        };
        map.insert(id, session.clone());
        app.metrics.sessions_active.set(map.len() as i64);
        Ok(session)
    }

    /// End a session and forget it.
    pub fn remove(&self, app: &Context, id: &str, reason: &str) -> bool {
        let removed = self.map.write().unwrap().remove(id);
        app.metrics.sessions_active.set(self.len() as i64);
        match removed {
            Some(session) => {
                session.close(reason);
                true
            }
            None => false,
        }
    }

    /// Client requests in flight across all sessions.
    pub fn in_flight(&self) -> usize {
        self.map
            .read()
            .unwrap()
            .values()
            .map(|s| s.in_flight())
            .sum()
    }

    /// Close every session (shutdown).
    pub fn close_all(&self, reason: &str) {
        let all: Vec<_> = self.map.write().unwrap().drain().collect();
        for (_, s) in all {
            s.close(reason);
        }
    }

    /// The sessions for which `pred` holds, taken out of the map's lock.
    fn matching(&self, pred: impl Fn(&Session) -> bool) -> Vec<(Arc<str>, Arc<Session>)> {
        self.map
            .read()
            .unwrap()
            .iter()
            .filter(|(_, s)| pred(s))
            .map(|(id, s)| (id.clone(), s.clone()))
            .collect()
    }

    /// Periodically end sessions idle past the limit, and forget closed ones
    /// (and the bridges and parked calls idle as long).
    pub async fn reap(router: Arc<super::Router>, app: Arc<Context>) {
        let every = (app.limits.idle_timeout / 4)
            .clamp(Duration::from_millis(100), Duration::from_secs(30));
        loop {
            tokio::time::sleep(every).await;
            router.reap_bridges(&app);
            app.sweep_parked();
            let expired = router.sessions.matching(|s| {
                s.is_closed()
                    || s.idle_for()
                        .is_some_and(|idle| idle > app.limits.idle_timeout)
            });
            for (id, _) in expired {
                tracing::info!(session = %id, "ending idle session");
                router.sessions.remove(
                    &app,
                    &id,
                    "the session was idle too long and has ended; start a new one",
                );
            }
        }
    }
}
