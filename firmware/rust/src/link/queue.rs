//! The link in a task of its own, so that frame N is sent while frame N+1 is sealed.
//!
//! Sealing a frame keeps the FC busy for milliseconds (the MAC, the cluster's ChaCha20 dispatch);
//! sending it is mostly the uDMA clocking bytes out while the FC waits. With one task the two add
//! up. Here the drone loop (the main task) only copies each CPX packet into a ring of
//! packet-sized slots ([`QueuedLink`], its `Link`), and a link task of higher priority takes the
//! slots one by one and runs the transactions ([`pump`] / [`run`]): while it waits for the ESP32's
//! ready line or for a transfer's end it sleeps, and the main task seals. When the ring is full
//! the main task sleeps until a slot is free, so the drone loop is paced by the link: the frame
//! period becomes the send time, as long as sealing a frame takes less.
//!
//! What the ESP32 sends (HELLO, KEY_ACK, ...) is read by the link task, in the transactions of
//! queued packets or in ones it runs for the ESP32's own ready-line edges, and handed to the main
//! task through a byte ring ([`QueuedLink::poll_recv`]).
//!
//! Both rings have one producer and one consumer; their indices are `AtomicU32` (plain loads and
//! stores on rv32imc, which has no atomic read-modify-write). Waking the other task goes through
//! [`Signals`]: FreeRTOS semaphores on the GAP8, a synchronous pump in the host tests.

use alloc::boxed::Box;
use alloc::vec;
use core::cell::{Cell, UnsafeCell};
use core::sync::atomic::{AtomicBool, AtomicU32, Ordering, compiler_fence};

use gapstream_drone::Link;
use gapstream_protocol::cpx;

use super::{BUFFER_LEN, CpxSpiLink, LinkError, LinkStats, SpiHw, WaitUpstream};
use crate::entropy::SharedPool;

/// The atomics of the two rings, loaded with Acquire and stored with Release ordering.
///
/// On the GAP8 the two tasks share the FC, one in-order core: they interleave and never run at
/// once, and the core sees its own stores in program order, so only the compiler must be kept from
/// moving accesses across the index updates (`compiler_fence`). No `fence` instruction is emitted
/// there: the GAP SDK's GVSOC model executes `fence` as `fence.i` (it flushes its decoded
/// instruction cache) and the firmware hung on the first one. Elsewhere (host tests, threads) the
/// real Acquire/Release operations.
trait OrderedAtomic {
    type V: Copy;
    fn load_relaxed(&self) -> Self::V;
    fn store_relaxed(&self, v: Self::V);
    fn load_acquire(&self) -> Self::V;
    fn store_release(&self, v: Self::V);
}

macro_rules! ordered_atomic {
    ($a:ty, $v:ty) => {
        impl OrderedAtomic for $a {
            type V = $v;
            fn load_relaxed(&self) -> $v {
                self.load(Ordering::Relaxed)
            }
            fn store_relaxed(&self, v: $v) {
                self.store(v, Ordering::Relaxed)
            }
            fn load_acquire(&self) -> $v {
                self.load(Ordering::Acquire)
            }
            fn store_release(&self, v: $v) {
                self.store(v, Ordering::Release)
            }
        }
    };
}
ordered_atomic!(AtomicU32, u32);
ordered_atomic!(AtomicBool, bool);

#[inline(always)]
fn acquire<A: OrderedAtomic>(a: &A) -> A::V {
    if cfg!(target_arch = "riscv32") {
        let v = a.load_relaxed();
        compiler_fence(Ordering::Acquire);
        v
    } else {
        a.load_acquire()
    }
}

#[inline(always)]
fn release<A: OrderedAtomic>(a: &A, v: A::V) {
    if cfg!(target_arch = "riscv32") {
        compiler_fence(Ordering::Release);
        a.store_relaxed(v)
    } else {
        a.store_release(v)
    }
}

/// Bytes of the ring towards the main task.
pub const UPSTREAM_RING: usize = 8 * 1024;

/// How the two tasks wake each other.
pub trait Signals {
    /// Main task -> link task: a packet was queued (or stop was asked).
    fn kick(&self);
    /// Link task: sleeps until kicked or the ESP32 raised its ready line, at most `timeout_us`.
    fn idle(&self, timeout_us: u32);
    /// Link task -> main task: a slot was freed.
    fn freed(&self);
    /// Main task: sleeps until a slot was freed, at most `timeout_us`.
    fn wait_freed(&self, timeout_us: u32);
    /// Link task -> main task: bytes arrived in the upstream ring.
    fn arrived(&self);
    /// Main task: sleeps until bytes arrived, at most `timeout_us`.
    fn wait_arrived(&self, timeout_us: u32);
}

/// What the two tasks share. Created by the main task, then used by both through `&'static`.
pub struct Shared<H: SpiHw, S: Signals> {
    /// The link: the link task's alone while it runs, the main task's after [`QueuedLink::stop`].
    link: UnsafeCell<CpxSpiLink<H>>,
    slots: Box<[UnsafeCell<[u8; BUFFER_LEN]>]>,
    /// Slots filled (written by the main task) / taken (written by the link task).
    head: AtomicU32,
    tail: AtomicU32,
    up: Box<[UnsafeCell<u8>]>,
    /// Upstream bytes written (link task) / read (main task).
    up_head: AtomicU32,
    up_tail: AtomicU32,
    /// First link error (a [`LinkError`] code, 0: none), reported by the next `send`.
    error: AtomicU32,
    /// The link's `send_cycles`, low 32 bits (the main task accumulates the differences).
    send_cycles: AtomicU32,
    stop: AtomicBool,
    stopped: AtomicBool,
    pub signals: S,
}

// SAFETY: the rings are single-producer single-consumer: each index is written by one task only
// and published with Release after the slot / bytes were written (read with Acquire before the
// data); `link` is touched by the link task only until `stopped` is published, then by the main
// task only. The FC is one core; the tasks interleave, they never run at once.
unsafe impl<H: SpiHw, S: Signals + Sync> Sync for Shared<H, S> {}

fn error_code(e: LinkError) -> u32 {
    match e {
        LinkError::Timeout => 1,
        LinkError::Spi => 2,
        LinkError::NotAPacket => 3,
    }
}

fn error_of(code: u32) -> Option<LinkError> {
    match code {
        1 => Some(LinkError::Timeout),
        2 => Some(LinkError::Spi),
        3 => Some(LinkError::NotAPacket),
        _ => None,
    }
}

impl<H: SpiHw, S: Signals> Shared<H, S> {
    /// `slots`: packets the ring holds (each [`BUFFER_LEN`] bytes).
    pub fn new(link: CpxSpiLink<H>, slots: usize, signals: S) -> Self {
        let slots = slots.max(2);
        Shared {
            link: UnsafeCell::new(link),
            slots: (0..slots)
                .map(|_| UnsafeCell::new([0u8; BUFFER_LEN]))
                .collect(),
            head: AtomicU32::new(0),
            tail: AtomicU32::new(0),
            up: vec![0u8; UPSTREAM_RING]
                .into_iter()
                .map(UnsafeCell::new)
                .collect(),
            up_head: AtomicU32::new(0),
            up_tail: AtomicU32::new(0),
            error: AtomicU32::new(0),
            send_cycles: AtomicU32::new(0),
            stop: AtomicBool::new(false),
            stopped: AtomicBool::new(false),
            signals,
        }
    }

    /// Packets queued and not yet taken by the link task.
    pub fn queued(&self) -> usize {
        acquire(&self.head).wrapping_sub(acquire(&self.tail)) as usize
    }

    pub fn capacity(&self) -> usize {
        self.slots.len()
    }

    /// Main task: copies one whole CPX wire packet into a free slot, if there is one.
    fn try_push(&self, p: &[u8]) -> bool {
        let head = self.head.load(Ordering::Relaxed);
        let tail = acquire(&self.tail);
        if head.wrapping_sub(tail) as usize >= self.slots.len() {
            return false;
        }
        let slot = &self.slots[head as usize % self.slots.len()];
        // SAFETY: slot `head` is not visible to the link task until `head + 1` is published, and
        // the link task released it (tail moved past it) before: only this task touches it now.
        unsafe { (&mut *slot.get())[..p.len()].copy_from_slice(p) };
        release(&self.head, head.wrapping_add(1));
        true
    }

    /// Link task: moves what the link received into the upstream ring (as much as fits; the rest
    /// stays in the link's inbox).
    fn move_upstream(&self, link: &mut CpxSpiLink<H>) -> bool {
        let head = self.up_head.load(Ordering::Relaxed);
        let tail = acquire(&self.up_tail);
        let free = UPSTREAM_RING - head.wrapping_sub(tail) as usize;
        let n = free.min(link.received_len());
        if n == 0 {
            return false;
        }
        let mut buf = [0u8; 256];
        let mut done = 0;
        while done < n {
            let k = link.take_received(&mut buf[..(n - done).min(256)]);
            for (i, b) in buf[..k].iter().enumerate() {
                let at = head.wrapping_add((done + i) as u32) as usize % UPSTREAM_RING;
                // SAFETY: bytes between up_head and up_tail + UPSTREAM_RING belong to this task
                // until up_head is published.
                unsafe { *self.up[at].get() = *b };
            }
            done += k;
        }
        release(&self.up_head, head.wrapping_add(n as u32));
        true
    }

    /// Main task: reads upstream bytes.
    fn pop_upstream(&self, buf: &mut [u8]) -> usize {
        let tail = self.up_tail.load(Ordering::Relaxed);
        let head = acquire(&self.up_head);
        let n = buf.len().min(head.wrapping_sub(tail) as usize);
        for (i, d) in buf[..n].iter_mut().enumerate() {
            let at = tail.wrapping_add(i as u32) as usize % UPSTREAM_RING;
            // SAFETY: published by the link task (Acquire above); it does not write these bytes
            // again until up_tail moved past them.
            *d = unsafe { *self.up[at].get() };
        }
        release(&self.up_tail, tail.wrapping_add(n as u32));
        n
    }

    fn upstream_pending(&self) -> bool {
        acquire(&self.up_head) != self.up_tail.load(Ordering::Relaxed)
    }
}

/// The link task's step: sends the oldest queued packet, or serves a transaction the ESP32 armed
/// for a packet of its own; hands what arrived to the main task. Returns whether it did anything.
/// Only the link task calls it (or a host test, in place of the task).
pub fn pump<H: SpiHw, S: Signals>(sh: &Shared<H, S>) -> bool {
    // SAFETY: only the link task runs `pump`, and only before it published `stopped`.
    let link = unsafe { &mut *sh.link.get() };
    let tail = sh.tail.load(Ordering::Relaxed);
    let worked = if acquire(&sh.head) != tail {
        let slot = &sh.slots[tail as usize % sh.slots.len()];
        // SAFETY: slot `tail` was published by the main task (Acquire above) and is not written
        // again until tail moves past it.
        let bytes = unsafe { &*slot.get() };
        let r = link.send_padded(bytes);
        release(&sh.tail, tail.wrapping_add(1));
        release(&sh.send_cycles, link.stats().send_cycles as u32);
        sh.signals.freed();
        if let Err(e) = r {
            if sh.error.load(Ordering::Relaxed) == 0 {
                release(&sh.error, error_code(e));
            }
        }
        true
    } else {
        match link.serve_esp() {
            Ok(served) => served,
            Err(e) => {
                release(&sh.error, error_code(e));
                true
            }
        }
    };
    if sh.move_upstream(link) {
        sh.signals.arrived();
    }
    worked
}

/// The link task's body: pumps until asked to stop, sleeping when there is nothing to do.
pub fn run<H: SpiHw, S: Signals>(sh: &Shared<H, S>) {
    while !acquire(&sh.stop) {
        if !pump(sh) {
            sh.signals.idle(10_000);
        }
    }
    release(&sh.stopped, true);
    sh.signals.freed();
}

/// The main task's end of the link: `gapstream_drone::Link` through the rings.
pub struct QueuedLink<'a, H: SpiHw, S: Signals> {
    sh: &'a Shared<H, S>,
    deferred: bool,
    /// Accumulated `send_cycles` of the link task, and its last low-32-bit value seen.
    send_total: Cell<u64>,
    send_last: Cell<u32>,
    /// Most packets ever waiting in the ring.
    pub high_water: usize,
    /// The entropy pool and a free-running timer: the time upstream bytes were seen goes into
    /// the pool (the link task itself stays away from the pool's `RefCell`).
    pub timing: Option<(SharedPool, fn() -> u32)>,
}

impl<'a, H: SpiHw, S: Signals> QueuedLink<'a, H, S> {
    pub fn new(sh: &'a Shared<H, S>) -> Self {
        QueuedLink {
            sh,
            deferred: false,
            send_total: Cell::new(0),
            send_last: Cell::new(0),
            high_water: 0,
            timing: None,
        }
    }

    pub fn shared(&self) -> &'a Shared<H, S> {
        self.sh
    }

    fn check_error(&self) -> Result<(), LinkError> {
        match error_of(acquire(&self.sh.error)) {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }

    /// Waits until every queued packet was sent (at most `timeout_us` in steps of 1 ms).
    pub fn flush(&mut self, timeout_us: u32) -> Result<(), LinkError> {
        let mut waited = 0u32;
        while self.sh.queued() > 0 {
            self.check_error()?;
            if waited >= timeout_us {
                return Err(LinkError::Timeout);
            }
            self.sh.signals.wait_freed(1_000);
            waited = waited.saturating_add(1_000);
        }
        self.check_error()
    }

    /// Stops the link task (after it finished the packet at hand) and returns its counters.
    pub fn stop(&mut self, timeout_us: u32) -> LinkStats {
        release(&self.sh.stop, true);
        let mut waited = 0u32;
        while !acquire(&self.sh.stopped) && waited < timeout_us {
            self.sh.signals.kick();
            self.sh.signals.wait_freed(1_000);
            waited = waited.saturating_add(1_000);
        }
        if acquire(&self.sh.stopped) {
            // SAFETY: the link task published `stopped` and touches the link no more.
            unsafe { (*self.sh.link.get()).stats() }
        } else {
            LinkStats::default()
        }
    }
}

impl<H: SpiHw, S: Signals> Link for QueuedLink<'_, H, S> {
    type Error = LinkError;

    fn send(&mut self, packets: &[u8]) -> Result<(), LinkError> {
        let mut rest = packets;
        while !rest.is_empty() {
            self.check_error()?;
            let n = match cpx::packet_len(rest) {
                Ok(Some(n)) if n <= rest.len() => n,
                _ => return Err(LinkError::NotAPacket),
            };
            let (p, r) = rest.split_at(n);
            while !self.sh.try_push(p) {
                self.check_error()?;
                self.sh.signals.wait_freed(10_000);
            }
            self.high_water = self.high_water.max(self.sh.queued());
            self.sh.signals.kick();
            rest = r;
        }
        Ok(())
    }

    fn poll_recv(&mut self, buf: &mut [u8]) -> Result<usize, LinkError> {
        if self.deferred {
            return Ok(0);
        }
        Ok(self.sh.pop_upstream(buf))
    }
}

impl<H: SpiHw, S: Signals> WaitUpstream for QueuedLink<'_, H, S> {
    fn wait_upstream_us(&mut self, timeout_us: u32) -> bool {
        if !self.sh.upstream_pending() {
            self.sh.signals.wait_arrived(timeout_us);
        }
        let pending = self.sh.upstream_pending();
        if pending {
            if let Some((pool, stamp)) = &self.timing {
                pool.borrow_mut().absorb_timing(stamp());
            }
        }
        pending
    }
    fn defer_upstream(&mut self, on: bool) {
        self.deferred = on;
    }
    fn link_send_cycles(&self) -> Option<u64> {
        let now = acquire(&self.sh.send_cycles);
        let d = now.wrapping_sub(self.send_last.get());
        self.send_last.set(now);
        self.send_total.set(self.send_total.get() + d as u64);
        Some(self.send_total.get())
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::link::tests::EspModel;
    use esp32_bridge::forward::{Bridge, Transport};
    use gapstream_protocol::cpx::{self, Route, Target};
    use std::cell::RefCell;
    use std::rc::Rc;

    /// The link task run in place: whenever the main task would sleep, the link task's steps run
    /// (`kick` runs none, so packets pile up in the ring as they do while the FC seals).
    pub struct Inline {
        pub pump: RefCell<Option<Box<dyn Fn() -> bool>>>,
    }

    impl Inline {
        fn step(&self, all: bool) {
            if let Some(p) = self.pump.borrow().as_ref() {
                while p() && all {}
            }
        }
    }

    impl Signals for Inline {
        fn kick(&self) {}
        fn idle(&self, _: u32) {}
        fn freed(&self) {}
        fn wait_freed(&self, _: u32) {
            self.step(false)
        }
        fn arrived(&self) {}
        fn wait_arrived(&self, _: u32) {
            self.step(true)
        }
    }

    /// A queued link over the ESP32 model, with its pump wired in (the `Shared` is leaked, as in
    /// the firmware).
    pub fn queued(esp: EspModel, slots: usize) -> &'static Shared<EspModel, Inline> {
        let sh: &'static Shared<EspModel, Inline> = Box::leak(Box::new(Shared::new(
            CpxSpiLink::new(esp, 1000, None),
            slots,
            Inline {
                pump: RefCell::new(None),
            },
        )));
        *sh.signals.pump.borrow_mut() = Some(Box::new(move || pump(sh)));
        sh
    }

    #[allow(clippy::mut_from_ref)]
    pub fn esp(sh: &Shared<EspModel, Inline>) -> &mut EspModel {
        // SAFETY: single-threaded test; no pump runs while this borrow is used.
        unsafe { (*sh.link.get()).hw_mut() }
    }

    fn packets(route: Route, msg: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        let mut p =
            cpx::Packetizer::new(route, [msg, &[], &[]], 1020, cpx::LastFlag::Final).unwrap();
        let mut buf = [0u8; 1100];
        while let Some(n) = p.next_packet(&mut buf) {
            out.extend_from_slice(&buf[..n.unwrap()]);
        }
        out
    }

    /// A frame's worth of packets queued while the receiver's messages come in mid-frame: every
    /// upstream message arrives whole, the frame too, and no byte from the ESP32 is ever clocked
    /// at the downstream clock (the model flags any).
    #[test]
    fn upstream_during_a_frame_is_read_at_the_slow_clock_and_nothing_is_lost() {
        let sh = queued(EspModel::new(), 16);
        let client = esp(sh).bridge.add_client(Transport::Tcp).unwrap();
        let up = Route::new(Target::WifiHost, Target::Gap8, cpx::GAPSTREAM_FUNCTION);
        // The receiver sends a message every 7 transactions (KEY_ACK, keepalives, ...).
        let sent_up = Rc::new(RefCell::new(Vec::new()));
        let s2 = sent_up.clone();
        let count = Rc::new(RefCell::new(0u32));
        esp(sh).wifi = Some(Box::new(move |b: &mut Bridge| {
            let mut c = count.borrow_mut();
            *c += 1;
            if *c % 7 == 3 && *c < 200 {
                let msg: Vec<u8> = (0..(*c as usize * 13 % 1500 + 1))
                    .map(|i| (i as u32 * 31 + *c) as u8)
                    .collect();
                let w = packets(up, &msg);
                b.client_received(client, &w).unwrap();
                s2.borrow_mut().extend_from_slice(&w);
            }
        }));
        let mut link = QueuedLink::new(sh);
        let down = Route::new(Target::Gap8, Target::WifiHost, cpx::GAPSTREAM_FUNCTION);
        let frame: Vec<u8> = (0..79_120u32).map(|i| (i * 7 + 1) as u8).collect();
        let wire = packets(down, &frame);
        let mut got_up = Vec::new();
        let mut buf = vec![0u8; 4096];
        for _ in 0..3 {
            link.send(&wire).unwrap();
            assert!(link.high_water <= 16);
            loop {
                let n = link.poll_recv(&mut buf).unwrap();
                if n == 0 {
                    break;
                }
                got_up.extend_from_slice(&buf[..n]);
            }
        }
        link.flush(1_000_000).unwrap();
        // The rest of what the ESP32 holds for the GAP8.
        while link.wait_upstream_us(1000) {
            let n = link.poll_recv(&mut buf).unwrap();
            got_up.extend_from_slice(&buf[..n]);
        }
        // The link task ends when asked (here run in place).
        release(&sh.stop, true);
        run(sh);
        let stats = link.stop(1000);
        let m = esp(sh);
        assert!(m.violations.is_empty(), "{:?}", m.violations);
        assert!(!sent_up.borrow().is_empty());
        // The receiver's packets, in order (the bridge also reports client connections to the
        // GAP8 with packets of its own, from the ESP32).
        let from_receiver = |b: &[u8]| {
            let mut d = cpx::StreamDecoder::new();
            let mut input = b;
            let mut out = Vec::new();
            while let Some(p) = d.decode(&mut input) {
                let p = p.unwrap();
                if p.route.source == Target::WifiHost as u8 {
                    out.push(p.payload.to_vec());
                }
            }
            out
        };
        assert_eq!(
            from_receiver(&got_up),
            from_receiver(&sent_up.borrow()),
            "every upstream packet arrives"
        );
        let mut got_down = Vec::new();
        while let Some((b, r)) = m.bridge.next_for_client(client) {
            got_down.extend_from_slice(&b[r.clone()]);
            m.bridge.client_sent(client, r.len());
        }
        assert_eq!(got_down.len(), 3 * wire.len());
        assert_eq!(stats.packets_sent as usize, 3 * wire.len().div_ceil(1024));
        // Most bytes went at the fast clock; the upstream ones and the lengths at the slow one.
        assert!(stats.bytes_down_clock > 2 * 79_000, "{stats:?}");
        assert!(stats.bytes_up_clock >= got_up.len() as u64, "{stats:?}");
        assert!(m.fast.iter().any(|&f| f) && m.fast.iter().any(|&f| !f));
    }

    #[test]
    fn a_silent_esp32_is_reported_by_the_next_send() {
        let mut m = EspModel::new();
        m.dead = true;
        let sh = queued(m, 4);
        let mut link = QueuedLink::new(sh);
        let down = Route::new(Target::Gap8, Target::WifiHost, cpx::GAPSTREAM_FUNCTION);
        let wire = packets(down, &[1u8; 6000]);
        assert_eq!(link.send(&wire), Err(LinkError::Timeout));
        assert_eq!(link.send(&[5]), Err(LinkError::Timeout));
    }

    #[test]
    fn partial_packets_are_refused() {
        let sh = queued(EspModel::new(), 4);
        let mut link = QueuedLink::new(sh);
        assert_eq!(link.send(&[5]), Err(LinkError::NotAPacket));
        assert_eq!(link.send(&[10, 0, 1, 2]), Err(LinkError::NotAPacket));
        assert_eq!(sh.queued(), 0);
    }
}
