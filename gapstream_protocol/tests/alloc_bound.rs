//! The receive path never allocates without bound, whatever bytes arrive: a counting global
//! allocator records the peak of live heap bytes while megabytes of hostile input (random bytes,
//! packets that announce huge messages, packets that start valid messages and never end them)
//! go through `StreamDecoder` → `Assembler` → `ReceiverSession`. And the drone's session state does
//! not grow while receivers join, re-handshake and leave over and over. And in the steady state the
//! two `Connection`s allocate nothing per packet.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};

use gapstream_protocol::assembler::Assembler;
use gapstream_protocol::connection::Incoming;
use gapstream_protocol::cpx::{self, Function, Route, StreamDecoder, Target};
use gapstream_protocol::wire::{FrameHeader, PixelFormat};
use gapstream_protocol::{
    DroneConfig, DroneConnection, DroneSession, ReceiverConfig, ReceiverConnection, ReceiverEvent,
    ReceiverSession, Sequential, pair, pair_group,
};

/// The two tests measure the one global heap: they take turns.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

struct Counting;
static LIVE: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);
thread_local! {
    /// Allocation calls of this thread (a `realloc` counts as one: it allocates). Per thread: the
    /// test harness's other threads (another test ending, its output captured) allocate at any
    /// moment, which a global count would charge to the code under test on a busy machine.
    static ALLOCS: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
}

/// Allocation calls made by this thread so far.
fn allocs() -> usize {
    ALLOCS.with(|c| c.get())
}

// SAFETY: forwards to the system allocator unchanged; only counts bytes.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        let live = LIVE.fetch_add(l.size(), Ordering::SeqCst) + l.size();
        PEAK.fetch_max(live, Ordering::SeqCst);
        // A const thread-local without a destructor: no allocation, usable in here.
        let _ = ALLOCS.try_with(|c| c.set(c.get() + 1));
        // SAFETY: same layout contract as the caller's.
        unsafe { System.alloc(l) }
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        LIVE.fetch_sub(l.size(), Ordering::SeqCst);
        // SAFETY: `p` came from `alloc` with this layout.
        unsafe { System.dealloc(p, l) }
    }
}

#[global_allocator]
static A: Counting = Counting;

/// xorshift for the hostile bytes (not crypto).
struct X(u64);
impl X {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

/// Deterministic CryptoRng for the session (test only).
struct Rng(u64);
impl gapstream_protocol::rand_core::TryRng for Rng {
    type Error = core::convert::Infallible;
    fn try_next_u32(&mut self) -> Result<u32, Self::Error> {
        Ok(self.try_next_u64()? as u32)
    }
    fn try_next_u64(&mut self) -> Result<u64, Self::Error> {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        Ok(self.0)
    }
    fn try_fill_bytes(&mut self, dst: &mut [u8]) -> Result<(), Self::Error> {
        for b in dst {
            *b = (self.try_next_u64()? >> 56) as u8;
        }
        Ok(())
    }
}
impl gapstream_protocol::rand_core::TryCryptoRng for Rng {}

#[test]
fn hostile_input_keeps_the_heap_bounded() {
    let _turn = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let mut rng = Rng(1);
    let (_d, r) = pair(&mut rng);
    let cfg = ReceiverConfig {
        max_payload: 100_000,
        ..ReceiverConfig::default()
    };
    let max_message = cfg.max_message();
    let mut rx = ReceiverSession::new(r, cfg);
    let clock = || 0u64;
    rx.connect(&mut rng, &clock).unwrap();
    let _ = rx.poll_transmit();
    let mut dec = StreamDecoder::new();
    let mut asm = Assembler::new(max_message);
    let route = Route::new(Target::Gap8, Target::WifiHost, Function::Test);
    let mut x = X(0x9E37_79B9_7F4A_7C15);
    let mut wire = Vec::new();
    let mut out = [0u8; cpx::MAX_WIRE_PACKET];
    for i in 0..6000 {
        let len = (x.next() % 1021) as usize;
        let mut payload: Vec<u8> = (0..len).map(|_| x.next() as u8).collect();
        match i % 4 {
            // A frame header announcing up to 4 GiB.
            0 if len >= 36 => {
                let h = FrameHeader {
                    suite: 0x11,
                    pixel_format: PixelFormat::Grey8.code(),
                    width: 1,
                    height: 1,
                    epoch: 0,
                    sequence: i,
                    capture_ns: 0,
                    // Half within the limit (buffered), half far beyond (refused up front).
                    payload_len: if i % 8 == 0 {
                        (x.next() % 100_000) as u32
                    } else {
                        x.next() as u32
                    },
                    state: None,
                };
                payload[..36].copy_from_slice(&h.encode());
            }
            // A plausible start of a message, never finished.
            1 if len >= 4 => payload[..4].copy_from_slice(&[0x47, 0x53, 0x02, 0x10]),
            _ => {}
        }
        let last = x.next() % 8 == 0;
        let n = cpx::encode_packet(route.with_last(last), &payload, &mut out).unwrap();
        wire.extend_from_slice(&out[..n]);
        // Now and then raw garbage between packets (desynchronises the decoder).
        if i % 50 == 0 {
            wire.extend((0..(x.next() % 300)).map(|_| x.next() as u8));
        }
    }
    let baseline = LIVE.load(Ordering::SeqCst);
    PEAK.store(baseline, Ordering::SeqCst);
    let total = wire.len();
    for chunk in wire.chunks(1460) {
        let mut c = chunk;
        while let Some(p) = dec.decode(&mut c) {
            let Ok(p) = p else { continue };
            let _ = asm.push(p.route, p.payload);
            while let Some(m) = asm.next_message() {
                let _ = rx.handle_message(&mut Sequential, &mut rng, &clock, m);
            }
        }
    }
    let peak = PEAK.load(Ordering::SeqCst) - baseline;
    println!("{total} hostile bytes, peak extra heap {peak} bytes (max message {max_message})");
    // At most one message in progress plus one completed message and small bookkeeping.
    assert!(
        peak <= 2 * max_message + 64 * 1024,
        "peak heap {peak} > bound"
    );
}

/// A drone with three receivers that keep joining, re-handshaking and leaving, with frames sealed
/// and rekeys in between: after every round the drone's live heap is back where it was (sessions,
/// outbox and key log are bounded; nothing accumulates).
#[test]
fn drone_state_does_not_grow_with_joins_and_leaves() {
    let _turn = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let mut rng = Rng(2);
    let (d, rs) = pair_group(&mut rng, 3);
    let cfg = DroneConfig {
        rekey_after_frames: 3,
        // The clock stands still here: no rate limit on the re-handshakes.
        hello_interval_ns: 0,
        ..DroneConfig::default()
    };
    let mut drone = DroneSession::new(d, cfg);
    let mut rxs: Vec<ReceiverSession> = rs
        .into_iter()
        .map(|r| ReceiverSession::new(r, ReceiverConfig::default()))
        .collect();
    let clock = || 0u64;
    let mut payload = vec![0u8; 1024];
    let meta = gapstream_protocol::frame::FrameMeta {
        pixel_format: PixelFormat::Grey8,
        width: 32,
        height: 32,
        capture_ns: 0,
        state: None,
    };
    fn pump(drone: &mut DroneSession, rxs: &mut [ReceiverSession], rng: &mut Rng) {
        let clock = || 0u64;
        loop {
            let mut moved = false;
            for rx in rxs.iter_mut() {
                while let Some(m) = rx.poll_transmit() {
                    moved = true;
                    let _ = drone.handle_message(&mut Sequential, rng, &clock, &m);
                }
            }
            while let Some(m) = drone.poll_transmit() {
                moved = true;
                for rx in rxs.iter_mut() {
                    let _ = rx.handle_message(&mut Sequential, rng, &clock, m.clone());
                }
            }
            if !moved {
                return;
            }
        }
    }
    let mut after_round = Vec::with_capacity(40);
    for round in 0..40 {
        for i in 0..3 {
            rxs[i].connect(&mut rng, &clock).unwrap();
            pump(&mut drone, &mut rxs, &mut rng);
        }
        for _ in 0..8 {
            drone.handle_timeout(&mut Sequential, &mut rng, &clock);
            drone
                .seal_frame(&mut Sequential, &clock, meta, &mut payload)
                .unwrap();
            pump(&mut drone, &mut rxs, &mut rng);
        }
        // One re-handshakes, then everybody leaves.
        rxs[round % 3].connect(&mut rng, &clock).unwrap();
        pump(&mut drone, &mut rxs, &mut rng);
        for rx in rxs.iter_mut() {
            rx.close(&mut Sequential);
        }
        pump(&mut drone, &mut rxs, &mut rng);
        assert_eq!(drone.members(), 0);
        after_round.push(LIVE.load(Ordering::SeqCst));
    }
    let c = drone.counters();
    println!(
        "drone: {} handshakes, {} epochs, live heap after rounds 10/20/40: {} / {} / {} bytes",
        c.handshakes, c.rekeys_committed, after_round[9], after_round[19], after_round[39]
    );
    assert!(c.handshakes >= 160 && c.rekeys_committed >= 80, "{c:?}");
    // Steady state: the last rounds end where round 10 ended.
    assert!(
        after_round[10..].iter().all(|&l| l <= after_round[9]),
        "drone heap grows: {after_round:?}"
    );
}

/// The steady state through the two connections, a 324 x 244 frame in 128-byte packets (619 of
/// them): the drone seals in place and cuts the frame into its one packet buffer (as the drone
/// loop does), allocating nothing; the receiver allocates the frame's own buffer (the first
/// packet's bytes, then the whole announced length: at most two calls), however many packets it
/// comes in.
#[test]
fn connections_allocate_nothing_per_packet() {
    let _turn = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let mut rng = Rng(3);
    let (d, r) = pair(&mut rng);
    let clock = || 0u64;
    let dcfg = DroneConfig {
        packet_payload: 128,
        ..DroneConfig::default()
    };
    let mut drone = DroneConnection::new(d, dcfg).unwrap();
    let mut rx = ReceiverConnection::new(r, ReceiverConfig::default()).unwrap();
    rx.connect(&mut rng, &clock).unwrap();
    let mut wire = Vec::with_capacity(1 << 20);
    for _ in 0..4 {
        wire.clear();
        while let Some(p) = rx.poll_transmit() {
            wire.extend_from_slice(p);
        }
        drone.read_stream(&wire, |i| {
            assert!(matches!(i, Incoming::Message { .. }), "{i:?}")
        });
        while drone.has_message() {
            drone
                .process_message(&mut Sequential, &mut rng, &clock)
                .unwrap();
        }
        wire.clear();
        while let Some(p) = drone.poll_transmit() {
            wire.extend_from_slice(p);
        }
        rx.read_stream(&wire, |i| {
            assert!(matches!(i, Incoming::Message { .. }), "{i:?}")
        });
        while rx.has_message() {
            rx.process_message(&mut Sequential, &mut rng, &clock)
                .unwrap();
        }
    }
    assert!(drone.session().is_established() && rx.session().is_established());
    let meta = gapstream_protocol::frame::FrameMeta {
        pixel_format: PixelFormat::Grey8,
        width: 324,
        height: 244,
        capture_ns: 0,
        state: None,
    };
    let mut payload = vec![0u8; 324 * 244];
    let mut delivered = 0;
    let mut buf = vec![0u8; cpx::MAX_WIRE_PACKET];
    for k in 0..3u8 {
        payload.fill(k);
        wire.clear();
        let before = allocs();
        let sealed = drone
            .seal_frame(&mut Sequential, &clock, meta, &mut payload)
            .unwrap();
        let mut packets = 0;
        while let Some(mut m) = drone.poll_message() {
            while let Some(n) = m.next_packet(&mut buf) {
                wire.extend_from_slice(&buf[..n.unwrap()]);
            }
        }
        let mut f = drone.frame_packetizer(&sealed, &payload);
        while let Some(n) = f.next_packet(&mut buf) {
            wire.extend_from_slice(&buf[..n.unwrap()]);
            packets += 1;
        }
        let drone_allocs = allocs() - before;
        let before = allocs();
        rx.read_stream(&wire, |i| {
            assert!(matches!(i, Incoming::Message { .. }), "{i:?}")
        });
        let ev = rx.process_message(&mut Sequential, &mut rng, &clock);
        let rx_allocs = allocs() - before;
        let Ok(Some(ReceiverEvent::Frame(f))) = ev else {
            panic!("{ev:?}")
        };
        assert!(f.pixels().iter().all(|&b| b == k));
        delivered += 1;
        println!(
            "frame {k}: {packets} packets; allocations: drone {drone_allocs}, receiver {rx_allocs}"
        );
        assert_eq!(packets, (36 + 324 * 244 + 16usize).div_ceil(128));
        assert_eq!(drone_allocs, 0);
        assert!(rx_allocs <= 2, "{rx_allocs} allocations for one frame");
    }
    assert_eq!(delivered, 3);
}
