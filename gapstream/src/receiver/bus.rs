//! The receiver's bus: every output — the web viewer, the PNG recorder, the metrics CSV, the
//! console's status line, MCAP, Zenoh, the Python binding's queue, a test's frame list — is a
//! consumer with a bounded mailbox of its own. The receiver [`Bus::publish`]es each verified
//! frame, each 0.5 s status and each diagnostic line once; publishing never blocks (it takes one
//! short lock per mailbox), so the network side never waits on a slow consumer, and a slow
//! consumer never delays another.
//!
//! What a full mailbox does depends on the consumer ([`Policy`]):
//!
//! | policy | for | when the consumer falls behind |
//! |---|---|---|
//! | [`Policy::Latest`] | a display (viewer) | the newest frame replaces the one not taken yet (`skipped`: a display shows the present) |
//! | [`Policy::Every`] | recorders (PNG, MCAP), the metrics CSV | a frame that finds the queue full is not queued and counted (`dropped`), reported when the receiver stops: never silent |
//! | [`Policy::Freshest`] | live feeds (Python, Zenoh, tests) | the oldest waiting frame is dropped and counted (`dropped`) |
//! | [`Policy::NoFrames`] | the console | statuses and notes only |
//!
//! Every bound is per drone ([`Frame::source`]): on a ground station receiving N drones a
//! mailbox holds at most its bound of each drone's frames (the viewer the newest frame of every
//! drone, a recorder up to its bound of each), so one drone's burst never pushes another drone's
//! frames out, and a slow consumer's wait is what it would be for one drone.
//!
//! Statuses are snapshots: a mailbox keeps only the newest one not taken of each drone. Notes
//! (diagnostic lines) are kept in order, at most [`NOTES`] waiting (older ones dropped and counted).
//! Consumers attached with [`Bus::attach`] run on a thread each; [`Bus::subscribe`] hands the
//! mailbox to the caller instead (Python's `next_frame`, tests).

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use super::frame::{Frame, Source};
use crate::metrics::{Counters, Row};

/// What a consumer's mailbox does when the consumer falls behind (see the module docs).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Policy {
    /// One frame waiting at most: the newest wins.
    Latest,
    /// Every frame in order, at most this many waiting; a frame that finds the queue full is
    /// counted as dropped.
    Every(usize),
    /// The freshest frames, at most this many waiting; the oldest is dropped (counted) for a new one.
    Freshest(usize),
    /// No frames: statuses and notes only.
    NoFrames,
}

/// Notes waiting in one mailbox at most.
pub const NOTES: usize = 256;

/// The receiver's state as the outputs show it: published every 0.5 s (with a new metrics row)
/// and when the connection state or the last message changes.
#[derive(Clone, Debug, Default)]
pub struct Status {
    /// The drone's name ([`super::frame::Source`]).
    pub source: String,
    /// `starting`, `connecting`, `streaming`, `reconnecting`, `bridge unreachable`, `stopped`.
    pub connection: String,
    /// The negotiated suite and key establishment (the offered ones before the handshake).
    pub suite: String,
    pub transport: String,
    /// The latest metrics row (fps, goodput, latency percentiles, counters, CPU, memory, ...).
    pub row: Row,
    /// True when this status carries a row not published before (the CSV writes it).
    pub new_row: bool,
    /// The counters now (also between rows).
    pub counters: Counters,
    /// The sequence number of the last delivered frame.
    pub seq: Option<u64>,
    /// Latency read back from the pixels (the burned-in capture time), when they carry it.
    pub image_latency_ms: Option<f64>,
    pub last_error: Option<String>,
    /// The receiver's last informational line (handshake done, a refused attempt, a retry).
    pub last_message: Option<String>,
    /// Why no frame came, when the receiver can tell (refused handshakes, ...).
    pub diagnosis: Option<String>,
    /// The drone's state with the last frame (`DroneState::line`), when the drone sends it.
    pub state: Option<String>,
}

/// A diagnostic line (one per distinct error or event; the console prints them).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Note {
    /// The drone it is about ([`super::frame::Source`]; a ground station's console names it).
    pub source: String,
    pub error: bool,
    pub text: String,
}

/// What travels on the bus.
#[derive(Clone, Debug)]
pub enum Event {
    /// A verified frame and the receiver's counters when it was delivered.
    Frame(Arc<Frame>, Arc<Counters>),
    Status(Arc<Status>),
    Note(Arc<Note>),
}

/// A consumer's counts: frames it got, frames skipped (newest wins) and dropped (counted loss).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counts {
    pub taken: u64,
    pub skipped: u64,
    pub dropped: u64,
    pub notes_dropped: u64,
}

#[derive(Default)]
struct Slot {
    queue: VecDeque<Event>,
    /// Frames in `queue`, in all and per drone (the policies' bounds are per drone).
    frames: usize,
    per_source: HashMap<Source, usize>,
    /// Statuses not taken yet: the newest of each drone, in the order they first waited.
    status: VecDeque<Arc<Status>>,
    /// The newest status ever posted (kept after it was taken: [`Subscription::status`]), and
    /// the newest of each drone ([`Subscription::statuses`]).
    last_status: Option<Arc<Status>>,
    last_by_source: BTreeMap<String, Arc<Status>>,
    closed: bool,
    counts: Counts,
}

impl Slot {
    fn waiting(&self, source: &Source) -> usize {
        self.per_source.get(source).copied().unwrap_or(0)
    }

    fn add(&mut self, source: &Source, k: isize) {
        let n = self.per_source.entry(source.clone()).or_insert(0);
        *n = n.saturating_add_signed(k);
        self.frames = self.frames.saturating_add_signed(k);
    }
}

fn same_source(e: &Event, source: &Source) -> bool {
    matches!(e, Event::Frame(f, _) if f.source == *source)
}

/// A bounded mailbox with a [`Policy`].
pub struct Mailbox {
    name: String,
    policy: Policy,
    slot: Mutex<Slot>,
    ready: Condvar,
}

/// What [`Mailbox::next`] found.
pub enum Next {
    Event(Event),
    /// Nothing within the timeout.
    Empty,
    /// The bus closed and everything was taken.
    Closed,
}

impl Mailbox {
    fn new(name: &str, policy: Policy) -> Arc<Self> {
        Arc::new(Mailbox {
            name: name.into(),
            policy,
            slot: Mutex::new(Slot::default()),
            ready: Condvar::new(),
        })
    }

    fn lock(&self) -> MutexGuard<'_, Slot> {
        self.slot.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Queues `ev` under the policy; never waits for the consumer.
    fn post(&self, ev: &Event) {
        let mut s = self.lock();
        if s.closed {
            return;
        }
        match ev {
            Event::Frame(f, _) => {
                let src = &f.source;
                match self.policy {
                    Policy::NoFrames => return,
                    Policy::Latest => {
                        let before = s.queue.len();
                        s.queue.retain(|e| !same_source(e, src));
                        let gone = before - s.queue.len();
                        s.counts.skipped += gone as u64;
                        s.add(src, -(gone as isize));
                    }
                    Policy::Every(cap) if s.waiting(src) >= cap.max(1) => {
                        s.counts.dropped += 1;
                        return;
                    }
                    Policy::Freshest(cap) if s.waiting(src) >= cap.max(1) => {
                        if let Some(i) = s.queue.iter().position(|e| same_source(e, src)) {
                            s.queue.remove(i);
                            s.add(src, -1);
                            s.counts.dropped += 1;
                        }
                    }
                    _ => {}
                }
                s.add(src, 1);
                s.queue.push_back(ev.clone());
            }
            Event::Status(st) => {
                match s.status.iter_mut().find(|w| w.source == st.source) {
                    Some(w) => *w = st.clone(),
                    None => s.status.push_back(st.clone()),
                }
                s.last_status = Some(st.clone());
                s.last_by_source.insert(st.source.clone(), st.clone());
            }
            Event::Note(_) => {
                if s.queue.len() - s.frames >= NOTES {
                    if let Some(i) = s.queue.iter().position(|e| matches!(e, Event::Note(_))) {
                        s.queue.remove(i);
                        s.counts.notes_dropped += 1;
                    }
                }
                s.queue.push_back(ev.clone());
            }
        }
        drop(s);
        self.ready.notify_one();
    }

    fn close(&self) {
        self.lock().closed = true;
        self.ready.notify_all();
    }

    /// The next event (a waiting status first: it is a snapshot), waiting up to `timeout`
    /// (`None`: until one comes or the bus closes).
    pub fn next(&self, timeout: Option<Duration>) -> Next {
        let deadline = timeout.map(|t| Instant::now() + t);
        let mut s = self.lock();
        loop {
            if let Some(st) = s.status.pop_front() {
                return Next::Event(Event::Status(st));
            }
            if let Some(ev) = s.queue.pop_front() {
                if let Event::Frame(f, _) = &ev {
                    s.add(&f.source.clone(), -1);
                    s.counts.taken += 1;
                }
                return Next::Event(ev);
            }
            if s.closed {
                return Next::Closed;
            }
            s = match deadline {
                None => self.ready.wait(s).unwrap_or_else(|e| e.into_inner()),
                Some(d) => {
                    let left = d.saturating_duration_since(Instant::now());
                    if left.is_zero() {
                        return Next::Empty;
                    }
                    self.ready
                        .wait_timeout(s, left)
                        .unwrap_or_else(|e| e.into_inner())
                        .0
                }
            };
        }
    }

    pub fn counts(&self) -> Counts {
        self.lock().counts
    }
}

/// A mailbox the caller drains itself ([`Bus::subscribe`]).
#[derive(Clone)]
pub struct Subscription(Arc<Mailbox>);

impl Subscription {
    /// The next frame within `timeout` (statuses and notes are passed over); `None` on timeout or
    /// when the receiver stopped and every frame was taken (see [`Subscription::is_closed`]).
    pub fn frame(&self, timeout: Duration) -> Option<Arc<Frame>> {
        let deadline = Instant::now() + timeout;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.0.next(Some(left)) {
                Next::Event(Event::Frame(f, _)) => return Some(f),
                Next::Event(_) => {}
                Next::Empty | Next::Closed => return None,
            }
        }
    }

    /// The frames waiting now, without waiting.
    pub fn drain(&self) -> Vec<Arc<Frame>> {
        let mut v = Vec::new();
        while let Next::Event(e) = self.0.next(Some(Duration::ZERO)) {
            if let Event::Frame(f, _) = e {
                v.push(f);
            }
        }
        v
    }

    /// The receiver stopped and nothing is waiting any more.
    pub fn is_closed(&self) -> bool {
        let s = self.0.lock();
        s.closed && s.queue.iter().all(|e| !matches!(e, Event::Frame(..)))
    }

    /// The newest status the receiver published.
    pub fn status(&self) -> Option<Arc<Status>> {
        self.0.lock().last_status.clone()
    }

    /// The newest status of each drone, by name (a ground station's receivers each publish theirs).
    pub fn statuses(&self) -> Vec<Arc<Status>> {
        self.0.lock().last_by_source.values().cloned().collect()
    }

    pub fn counts(&self) -> Counts {
        self.0.counts()
    }

    /// The next event of any kind (for callers that want notes and statuses too).
    pub fn next(&self, timeout: Option<Duration>) -> Next {
        self.0.next(timeout)
    }
}

/// An output on its own thread.
pub trait Consumer: Send + 'static {
    /// How it is named in the closing lines (`PNG recorder`, `MCAP recording run.mcap`, ...).
    fn name(&self) -> String;
    fn policy(&self) -> Policy;
    fn frame(&mut self, _frame: &Arc<Frame>, _counters: &Counters) -> Result<(), String> {
        Ok(())
    }
    fn status(&mut self, _status: &Status) -> Result<(), String> {
        Ok(())
    }
    fn note(&mut self, _note: &Note) -> Result<(), String> {
        Ok(())
    }
    /// The receiver stopped and every waiting event was handed over: flush and close. The
    /// returned line (if any) is printed with the closing summary.
    fn finish(&mut self, _counts: &Counts) -> Result<Option<String>, String> {
        Ok(None)
    }
}

/// How an output ended.
#[derive(Clone, Debug, Default)]
pub struct OutputReport {
    pub name: String,
    pub counts: Counts,
    /// A recorder that could not keep up, in one line (frames not written).
    pub shortfall: Option<String>,
    /// The consumer's own closing line (`wrote 13 frames to demo.mcap ...`).
    pub closing: Option<String>,
    pub error: Option<String>,
}

impl OutputReport {
    fn of(name: String, policy: Policy, counts: Counts) -> Self {
        let shortfall = match policy {
            Policy::Every(_) if counts.dropped > 0 => Some(format!(
                "{name}: {} of {} frames not written: it did not keep up (counted, not hidden)",
                counts.dropped,
                counts.dropped + counts.taken
            )),
            _ => None,
        };
        OutputReport {
            name,
            counts,
            shortfall,
            closing: None,
            error: None,
        }
    }
}

struct Worker {
    mailbox: Arc<Mailbox>,
    thread: JoinHandle<(Option<String>, Option<String>)>,
}

/// The receiver's bus: mailboxes of the outputs and the threads of the attached consumers.
#[derive(Default)]
pub struct Bus {
    boxes: Vec<Arc<Mailbox>>,
    workers: Vec<Worker>,
    failed: Arc<Mutex<Option<String>>>,
    any_failed: Arc<AtomicBool>,
}

impl Bus {
    pub fn new() -> Self {
        Self::default()
    }

    /// A mailbox the caller drains (frames with `policy`, statuses, notes).
    pub fn subscribe(&mut self, name: &str, policy: Policy) -> Subscription {
        let m = Mailbox::new(name, policy);
        self.boxes.push(m.clone());
        Subscription(m)
    }

    /// Runs `c` on a thread of its own, fed by its mailbox. An error of the consumer stops the
    /// receiver with that message ([`Bus::failure`]): a recording that cannot be written must
    /// not look complete.
    pub fn attach(&mut self, mut c: Box<dyn Consumer>) {
        let name = c.name();
        let m = Mailbox::new(&name, c.policy());
        let (mb, failed, any) = (m.clone(), self.failed.clone(), self.any_failed.clone());
        let thread = std::thread::Builder::new()
            .name(format!("out:{}", name.chars().take(10).collect::<String>()))
            .spawn(move || {
                let fail = |e: String| {
                    let mut f = failed.lock().unwrap_or_else(|e| e.into_inner());
                    f.get_or_insert(e.clone());
                    any.store(true, Ordering::Relaxed);
                    mb.close();
                    (None, Some(e))
                };
                loop {
                    let r = match mb.next(None) {
                        Next::Event(Event::Frame(f, c2)) => c.frame(&f, &c2),
                        Next::Event(Event::Status(s)) => c.status(&s),
                        Next::Event(Event::Note(n)) => c.note(&n),
                        Next::Empty => Ok(()),
                        Next::Closed => break,
                    };
                    if let Err(e) = r {
                        let _ = c.finish(&mb.counts());
                        return fail(e);
                    }
                }
                match c.finish(&mb.counts()) {
                    Ok(line) => (line, None),
                    Err(e) => fail(e),
                }
            })
            .expect("spawning an output thread");
        self.boxes.push(m.clone());
        self.workers.push(Worker { mailbox: m, thread });
    }

    /// Hands `ev` to every mailbox; never blocks.
    pub fn publish(&self, ev: Event) {
        for b in &self.boxes {
            b.post(&ev);
        }
    }

    /// The first error of an attached consumer, once one failed.
    pub fn failure(&self) -> Option<String> {
        if !self.any_failed.load(Ordering::Relaxed) {
            return None;
        }
        self.failed
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Closes every mailbox, lets each attached consumer take what is waiting and finish, and
    /// reports how each output ended (subscriptions included: what their owner did not take).
    pub fn close(mut self) -> Vec<OutputReport> {
        for b in &self.boxes {
            b.close();
        }
        let mut reports = Vec::new();
        for w in std::mem::take(&mut self.workers) {
            let (closing, error) = w
                .thread
                .join()
                .unwrap_or_else(|_| (None, Some("an output thread panicked".into())));
            let mut r =
                OutputReport::of(w.mailbox.name.clone(), w.mailbox.policy, w.mailbox.counts());
            r.closing = closing;
            r.error = error;
            reports.push(r);
        }
        reports
    }
}

impl Drop for Bus {
    /// A bus dropped without [`Bus::close`] (a set-up error after some outputs were attached)
    /// still lets its consumers' threads end.
    fn drop(&mut self) {
        for b in &self.boxes {
            b.close();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::receiver::frame::test_frame;
    use proptest::prelude::*;

    fn frame(seq: u64) -> Event {
        Event::Frame(
            Arc::new(test_frame(seq, 2, 1, vec![seq as u8, 0])),
            Arc::new(Counters::default()),
        )
    }

    fn frame_of(source: &str, seq: u64) -> Event {
        let mut f = test_frame(seq, 2, 1, vec![seq as u8, 0]);
        f.source = Arc::from(source);
        Event::Frame(Arc::new(f), Arc::new(Counters::default()))
    }

    /// (source, seq) of every frame waiting, in order.
    fn taken(m: &Mailbox) -> Vec<(String, u64)> {
        let mut v = Vec::new();
        while let Next::Event(e) = m.next(Some(Duration::ZERO)) {
            if let Event::Frame(f, _) = e {
                v.push((f.source.to_string(), f.seq()));
            }
        }
        v
    }

    /// A ground station: one drone's burst (or a flood of garbage that still makes frames) never
    /// pushes another drone's frames out of a mailbox: every bound is per drone.
    #[test]
    fn bounds_are_per_drone() {
        for policy in [Policy::Latest, Policy::Every(3), Policy::Freshest(3)] {
            let m = Mailbox::new("out", policy);
            m.post(&frame_of("quiet", 0));
            for s in 0..1000 {
                m.post(&frame_of("loud", s));
            }
            m.post(&frame_of("quiet", 1));
            let got = taken(&m);
            let quiet: Vec<u64> = got
                .iter()
                .filter(|(n, _)| n == "quiet")
                .map(|x| x.1)
                .collect();
            let loud: Vec<u64> = got
                .iter()
                .filter(|(n, _)| n == "loud")
                .map(|x| x.1)
                .collect();
            match policy {
                Policy::Latest => {
                    assert_eq!((quiet, loud), (vec![1], vec![999]), "{policy:?}")
                }
                Policy::Every(_) => {
                    assert_eq!((quiet, loud), (vec![0, 1], vec![0, 1, 2]), "{policy:?}")
                }
                _ => assert_eq!(
                    (quiet, loud),
                    (vec![0, 1], vec![997, 998, 999]),
                    "{policy:?}"
                ),
            }
        }
    }

    /// Each drone's newest status waits until taken; one drone's statuses never hide another's.
    #[test]
    fn statuses_are_kept_per_drone() {
        let m = Mailbox::new("console", Policy::NoFrames);
        for (src, seq) in [("a", 1), ("b", 1), ("a", 2), ("a", 3)] {
            m.post(&Event::Status(Arc::new(Status {
                source: src.into(),
                seq: Some(seq),
                ..Status::default()
            })));
        }
        let mut got = Vec::new();
        while let Next::Event(Event::Status(s)) = m.next(Some(Duration::ZERO)) {
            got.push((s.source.clone(), s.seq.unwrap()));
        }
        assert_eq!(got, [("a".to_string(), 3), ("b".to_string(), 1)]);
        let sub = Subscription(m);
        let all: Vec<_> = sub.statuses().iter().map(|s| s.source.clone()).collect();
        assert_eq!(all, ["a", "b"]);
    }

    fn seqs(m: &Mailbox) -> Vec<u64> {
        let mut v = Vec::new();
        while let Next::Event(e) = m.next(Some(Duration::ZERO)) {
            if let Event::Frame(f, _) = e {
                v.push(f.seq());
            }
        }
        v
    }

    #[test]
    fn latest_keeps_only_the_newest_frame() {
        let m = Mailbox::new("viewer", Policy::Latest);
        for s in 0..5 {
            m.post(&frame(s));
        }
        assert_eq!(seqs(&m), vec![4]);
        assert_eq!(m.counts().skipped, 4);
    }

    #[test]
    fn every_counts_what_it_could_not_queue() {
        let m = Mailbox::new("recorder", Policy::Every(3));
        for s in 0..5 {
            m.post(&frame(s));
        }
        assert_eq!(seqs(&m), vec![0, 1, 2]);
        assert_eq!((m.counts().taken, m.counts().dropped), (3, 2));
        let r = OutputReport::of("PNG recorder".into(), Policy::Every(3), m.counts());
        assert!(r.shortfall.unwrap().contains("2 of 5 frames not written"));
    }

    #[test]
    fn freshest_drops_the_oldest() {
        let m = Mailbox::new("python", Policy::Freshest(2));
        for s in 0..5 {
            m.post(&frame(s));
        }
        assert_eq!(seqs(&m), vec![3, 4]);
        assert_eq!(m.counts().dropped, 3);
    }

    #[test]
    fn statuses_are_snapshots_and_notes_keep_their_order() {
        let m = Mailbox::new("console", Policy::NoFrames);
        m.post(&frame(1));
        for i in 0..3 {
            m.post(&Event::Status(Arc::new(Status {
                seq: Some(i),
                ..Status::default()
            })));
            m.post(&Event::Note(Arc::new(Note {
                source: String::new(),
                error: false,
                text: format!("n{i}"),
            })));
        }
        let mut got = Vec::new();
        while let Next::Event(e) = m.next(Some(Duration::ZERO)) {
            got.push(match e {
                Event::Status(s) => format!("s{}", s.seq.unwrap()),
                Event::Note(n) => n.text.clone(),
                Event::Frame(..) => "frame".into(),
            });
        }
        assert_eq!(got, ["s2", "n0", "n1", "n2"]);
    }

    #[test]
    fn publishing_never_waits_for_a_stuck_consumer() {
        struct Stuck(Arc<AtomicBool>);
        impl Consumer for Stuck {
            fn name(&self) -> String {
                "stuck".into()
            }
            fn policy(&self) -> Policy {
                Policy::Every(4)
            }
            fn frame(&mut self, _: &Arc<Frame>, _: &Counters) -> Result<(), String> {
                while !self.0.load(Ordering::Relaxed) {
                    std::thread::sleep(Duration::from_millis(1));
                }
                Ok(())
            }
        }
        let go = Arc::new(AtomicBool::new(false));
        let mut bus = Bus::new();
        bus.attach(Box::new(Stuck(go.clone())));
        let fast = bus.subscribe("fast", Policy::Every(1000));
        for s in 0..1000 {
            bus.publish(frame(s));
        }
        // Every one of the 1000 frames reached the other mailbox while the stuck one held one.
        assert_eq!(fast.drain().len(), 1000);
        go.store(true, Ordering::Relaxed);
        let r = bus.close();
        assert_eq!(r[0].counts.taken + r[0].counts.dropped, 1000);
        assert!(r[0].counts.dropped >= 1000 - 5, "{:?}", r[0].counts);
        assert!(r[0].shortfall.is_some());
    }

    #[test]
    fn a_failing_consumer_is_reported() {
        struct Broken;
        impl Consumer for Broken {
            fn name(&self) -> String {
                "broken".into()
            }
            fn policy(&self) -> Policy {
                Policy::Every(4)
            }
            fn frame(&mut self, _: &Arc<Frame>, _: &Counters) -> Result<(), String> {
                Err("disk full".into())
            }
        }
        let mut bus = Bus::new();
        bus.attach(Box::new(Broken));
        bus.publish(frame(0));
        let t0 = Instant::now();
        while bus.failure().is_none() && t0.elapsed() < Duration::from_secs(10) {
            std::thread::sleep(Duration::from_millis(1));
        }
        assert_eq!(bus.failure().as_deref(), Some("disk full"));
        assert_eq!(bus.close()[0].error.as_deref(), Some("disk full"));
    }

    proptest! {
        /// Whatever the interleaving of posts and takes, a mailbox never holds more frames than
        /// its bound, and every frame is taken, skipped or dropped: none vanishes uncounted.
        #[test]
        fn bounded_and_every_frame_accounted(
            cap in 1usize..6,
            which in 0usize..3,
            ops in proptest::collection::vec((any::<bool>(), 0usize..3), 0..200),
        ) {
            let policy = [Policy::Latest, Policy::Every(cap), Policy::Freshest(cap)][which];
            let bound = if policy == Policy::Latest { 1 } else { cap };
            let m = Mailbox::new("p", policy);
            let names = ["d0", "d1", "d2"];
            let mut posted = 0u64;
            let mut taken: Vec<(String, u64)> = Vec::new();
            for (post, drone) in ops {
                if post {
                    m.post(&frame_of(names[drone], posted));
                    posted += 1;
                } else if let Next::Event(Event::Frame(f, _)) = m.next(Some(Duration::ZERO)) {
                    taken.push((f.source.to_string(), f.seq()));
                }
                let s = m.lock();
                for n in names {
                    let waiting = s.queue.iter().filter(|e| same_source(e, &Arc::from(n))).count();
                    prop_assert!(waiting <= bound);
                    prop_assert_eq!(waiting, s.waiting(&Arc::from(n)));
                }
                prop_assert_eq!(s.frames, s.queue.len());
            }
            taken.extend(super::tests::taken(&m));
            let c = m.counts();
            prop_assert_eq!(c.taken, taken.len() as u64);
            prop_assert_eq!(c.taken + c.skipped + c.dropped, posted);
            // In order, whatever was dropped (each drone's frames and all of them).
            prop_assert!(taken.windows(2).all(|w| w[0].1 < w[1].1));
        }
    }
}
