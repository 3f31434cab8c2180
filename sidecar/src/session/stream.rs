//! Downstream streams of one session: where messages for the client go.
//!
//! A stream is opened per POST that carries requests (it ends once every
//! request has its response), plus at most one standalone stream (GET) for
//! messages tied to no request. Every item gets a sequence number and is kept
//! in a bounded replay buffer, so a client that lost an SSE connection can
//! resume with `Last-Event-ID` (`<stream>-<seq>`).
//!
//! Nothing a stream owes is ever dropped: responses and server requests are
//! always delivered and never evicted from the replay buffer. Only
//! notifications are shed — live, when the client has not read `depth` items
//! yet (a flood cannot make the facade buffer without bound), and from the
//! replay buffer first when it is full.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};

use bytes::Bytes;
use tokio::sync::mpsc;

/// Items kept for replay per stream.
const REPLAY_DEPTH: usize = 1024;

/// One message on its way to the client.
#[derive(Clone, Debug)]
pub struct Out {
    pub seq: u64,
    pub bytes: Bytes,
    /// The last response this stream owes: the transport may answer with
    /// plain JSON when this is the first and only item.
    pub last: bool,
    /// A notification, which may be shed under pressure.
    droppable: bool,
}

/// The sending half: unbounded for what must arrive, with a count of what
/// the client has not read yet so notifications can be shed.
#[derive(Debug)]
pub struct Live {
    tx: mpsc::UnboundedSender<Out>,
    queued: Arc<AtomicUsize>,
    depth: usize,
}

/// The receiving half, read by the transport.
#[derive(Debug)]
pub struct StreamRx {
    rx: mpsc::UnboundedReceiver<Out>,
    queued: Arc<AtomicUsize>,
}

/// A live channel that sheds notifications beyond `depth` unread items.
pub fn channel(depth: usize) -> (Live, StreamRx) {
    let (tx, rx) = mpsc::unbounded_channel();
    let queued = Arc::new(AtomicUsize::new(0));
    (
        Live {
            tx,
            queued: queued.clone(),
            depth: depth.max(1),
        },
        StreamRx { rx, queued },
    )
}

impl StreamRx {
    pub async fn recv(&mut self) -> Option<Out> {
        let out = self.rx.recv().await;
        self.took(out.is_some());
        out
    }

    pub fn poll_recv(&mut self, cx: &mut Context<'_>) -> Poll<Option<Out>> {
        let polled = self.rx.poll_recv(cx);
        if let Poll::Ready(out) = &polled {
            self.took(out.is_some());
        }
        polled
    }

    pub fn try_recv(&mut self) -> Option<Out> {
        let out = self.rx.try_recv().ok();
        self.took(out.is_some());
        out
    }

    fn took(&self, got: bool) {
        if got {
            self.queued.fetch_sub(1, Ordering::AcqRel);
        }
    }
}

impl Live {
    /// Send unless it is a notification and the client is `depth` behind.
    /// Returns false when the receiver is gone.
    fn send(&self, out: Out) -> Result<(), Shed> {
        if out.droppable && self.queued.load(Ordering::Acquire) >= self.depth {
            return Err(Shed::Lagging);
        }
        self.queued.fetch_add(1, Ordering::AcqRel);
        self.tx.send(out).map_err(|_| Shed::Gone)
    }
}

enum Shed {
    Lagging,
    Gone,
}

#[derive(Debug)]
pub struct Stream {
    live: Option<Live>,
    replay: VecDeque<Out>,
    next_seq: u64,
    /// Responses still owed on this stream; `usize::MAX` for open-ended ones.
    pub remaining: usize,
}

impl Stream {
    pub fn new(remaining: usize, live: Live) -> Self {
        Stream {
            live: Some(live),
            replay: VecDeque::new(),
            next_seq: 1,
            remaining,
        }
    }

    pub fn finished(&self) -> bool {
        self.remaining == 0
    }

    /// A stream with no count of owed responses (GET, stdio): it ends only
    /// when its session does.
    pub fn open_ended(&self) -> bool {
        self.remaining == usize::MAX
    }

    pub fn has_live(&self) -> bool {
        self.live.as_ref().is_some_and(|l| !l.tx.is_closed())
    }

    /// Queue a message; `response` marks one of the responses this stream
    /// owes, `droppable` a notification. Returns false if a notification was
    /// shed because the client is not reading.
    pub fn push(&mut self, bytes: Bytes, response: bool, droppable: bool) -> bool {
        if response && self.remaining != usize::MAX {
            self.remaining = self.remaining.saturating_sub(1);
        }
        let out = Out {
            seq: self.next_seq,
            bytes,
            last: self.finished(),
            droppable,
        };
        self.next_seq += 1;
        if self.replay.len() == REPLAY_DEPTH {
            match self.replay.iter().position(|o| o.droppable) {
                Some(i) => {
                    self.replay.remove(i);
                }
                None => {
                    self.replay.pop_front();
                }
            }
        }
        self.replay.push_back(out.clone());
        let mut delivered = true;
        if let Some(live) = &self.live {
            match live.send(out) {
                Ok(()) => {}
                Err(Shed::Lagging) => delivered = false,
                Err(Shed::Gone) => self.live = None,
            }
        }
        if self.finished() {
            self.live = None;
        }
        delivered
    }

    /// One owed response will never come (the client cancelled the request).
    pub fn forgo_response(&mut self) {
        if self.remaining != usize::MAX {
            self.remaining = self.remaining.saturating_sub(1);
        }
        if self.finished() {
            self.live = None;
        }
    }

    /// Attach a new live connection after `after_seq`: replays what is still
    /// buffered (only notifications can have been evicted).
    pub fn resume(&mut self, after_seq: u64, live: Live) -> bool {
        if after_seq >= self.next_seq {
            return false; // an id this stream never sent
        }
        for out in self.replay.iter().filter(|o| o.seq > after_seq) {
            if live.tx.send(out.clone()).is_err() {
                return false;
            }
            live.queued.fetch_add(1, Ordering::AcqRel);
        }
        if !self.finished() {
            self.live = Some(live);
        }
        true
    }

    /// End the live connection (session closing).
    pub fn detach(&mut self) {
        self.live = None;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ends_after_the_owed_responses_and_marks_the_last() {
        let (tx, mut rx) = channel(8);
        let mut s = Stream::new(1, tx);
        s.push(Bytes::from_static(b"progress"), false, true);
        s.push(Bytes::from_static(b"answer"), true, false);
        assert!(s.finished());
        assert!(!rx.try_recv().unwrap().last);
        assert!(rx.try_recv().unwrap().last);
        assert!(
            rx.try_recv().is_none(),
            "the live channel is closed once finished"
        );
    }

    #[test]
    fn resume_replays_only_what_was_missed() {
        let (tx, rx) = channel(8);
        let mut s = Stream::new(1, tx);
        drop(rx);
        s.push(Bytes::from_static(b"a"), false, false);
        s.push(Bytes::from_static(b"b"), false, false);
        let (tx2, mut rx2) = channel(8);
        assert!(s.resume(1, tx2));
        assert_eq!(&rx2.try_recv().unwrap().bytes[..], b"b");
        s.push(Bytes::from_static(b"c"), true, false);
        assert_eq!(&rx2.try_recv().unwrap().bytes[..], b"c");
    }

    #[test]
    fn a_flood_of_notifications_never_costs_the_answer() {
        let (tx, mut rx) = channel(4);
        let mut s = Stream::new(1, tx);
        let shed = (0..10_000)
            .filter(|_| !s.push(Bytes::from_static(b"note"), false, true))
            .count();
        assert_eq!(shed, 10_000 - 4, "only `depth` notifications wait unread");
        s.push(Bytes::from_static(b"answer"), true, false);
        let mut got = Vec::new();
        while let Some(out) = rx.try_recv() {
            got.push(out);
        }
        assert_eq!(got.len(), 5);
        assert!(got.last().unwrap().last && &got.last().unwrap().bytes[..] == b"answer");
        // The replay buffer kept the answer too, though notifications overflowed it.
        let (tx2, mut rx2) = channel(4);
        assert!(!s.resume(20_000, tx2), "an id the stream never sent");
        let (tx3, mut rx3) = channel(4);
        assert!(s.resume(9_990, tx3));
        let mut replayed = Vec::new();
        while let Some(out) = rx3.try_recv() {
            replayed.push(out);
        }
        assert_eq!(&replayed.last().unwrap().bytes[..], b"answer");
        assert!(rx2.try_recv().is_none());
    }
}
