//! Downstream streams of one session: where messages for the client go.
//!
//! A stream is opened per POST that carries requests (it ends once every
//! request has its response), plus at most one standalone stream (GET) for
//! messages tied to no request. Every item gets a sequence number and is kept
//! in a bounded replay buffer, so a client that lost an SSE connection can
//! resume with `Last-Event-ID` (`<stream>-<seq>`) and miss nothing.

use std::collections::VecDeque;

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
}

#[derive(Debug)]
pub struct Stream {
    live: Option<mpsc::Sender<Out>>,
    replay: VecDeque<Out>,
    next_seq: u64,
    /// Responses still owed on this stream; `usize::MAX` for open-ended ones.
    pub remaining: usize,
}

impl Stream {
    pub fn new(remaining: usize, live: mpsc::Sender<Out>) -> Self {
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

    pub fn has_live(&self) -> bool {
        self.live.as_ref().is_some_and(|tx| !tx.is_closed())
    }

    /// Queue a message; `response` marks one of the responses this stream owes.
    pub fn push(&mut self, bytes: Bytes, response: bool) {
        if response && self.remaining != usize::MAX {
            self.remaining = self.remaining.saturating_sub(1);
        }
        let out = Out {
            seq: self.next_seq,
            bytes,
            last: self.finished(),
        };
        self.next_seq += 1;
        if self.replay.len() == REPLAY_DEPTH {
            self.replay.pop_front();
        }
        self.replay.push_back(out.clone());
        if let Some(tx) = &self.live {
            // A client that does not read cannot make the facade buffer
            // without bound: detach it; it can resume from the replay buffer.
            if tx.try_send(out).is_err() {
                self.live = None;
            }
        }
        if self.finished() {
            self.live = None;
        }
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

    /// Attach a new live connection after `after_seq`: replays what it missed.
    pub fn resume(&mut self, after_seq: u64, live: mpsc::Sender<Out>) -> bool {
        if self.replay.front().is_some_and(|o| o.seq > after_seq + 1) {
            return false; // what it missed is no longer buffered
        }
        for out in self.replay.iter().filter(|o| o.seq > after_seq) {
            if live.try_send(out.clone()).is_err() {
                return false;
            }
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
        let (tx, mut rx) = mpsc::channel(8);
        let mut s = Stream::new(1, tx);
        s.push(Bytes::from_static(b"progress"), false);
        s.push(Bytes::from_static(b"answer"), true);
        assert!(s.finished());
        assert!(!rx.try_recv().unwrap().last);
        assert!(rx.try_recv().unwrap().last);
        assert!(
            rx.try_recv().is_err(),
            "the live channel is closed once finished"
        );
    }

    #[test]
    fn resume_replays_only_what_was_missed() {
        let (tx, rx) = mpsc::channel(8);
        let mut s = Stream::new(1, tx);
        drop(rx);
        s.push(Bytes::from_static(b"a"), false);
        s.push(Bytes::from_static(b"b"), false);
        let (tx2, mut rx2) = mpsc::channel(8);
        assert!(s.resume(1, tx2));
        assert_eq!(&rx2.try_recv().unwrap().bytes[..], b"b");
        s.push(Bytes::from_static(b"c"), true);
        assert_eq!(&rx2.try_recv().unwrap().bytes[..], b"c");
    }

    #[test]
    fn a_slow_client_is_detached_not_buffered_live() {
        let (tx, _rx) = mpsc::channel(1);
        let mut s = Stream::new(usize::MAX, tx);
        s.push(Bytes::from_static(b"1"), false);
        s.push(Bytes::from_static(b"2"), false);
        assert!(!s.has_live());
        let (tx2, mut rx2) = mpsc::channel(8);
        assert!(s.resume(1, tx2));
        assert_eq!(&rx2.try_recv().unwrap().bytes[..], b"2");
    }
}
