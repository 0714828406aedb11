//! A drone and a receiver, each behind its [`Connection`], over a byte pipe: the handshake, the
//! group key and frames as CPX bytes at any packet sizes, cut into any chunks, with garbage
//! between packets, and as datagrams with some lost; the other CPX functions handed to the caller,
//! one report per garbled stretch, control messages ahead of the frame they key.

use alloc::vec;
use alloc::vec::Vec;
use core::cell::Cell;

use gap_rust_cipher_s::Sequential;
use proptest::prelude::*;

use super::*;
use crate::compat;
use crate::cpx::{self, Function, LastFlag, MAX_WIRE_PACKET, Packetizer, Target};
use crate::frame::FrameMeta;
use crate::handshake::{DronePolicy, KexSet, SuiteSet, pair};
use crate::session::{DroneConfig, DroneEvent, ReceiverConfig, ReceiverEvent, Rejected};
use crate::suite::{KexMode, Suite};
use crate::test_util::TestRng;
use crate::wire::{self, MsgType, PixelFormat};

struct Pipe {
    drone: DroneConnection,
    rx: ReceiverConnection,
    rng: TestRng,
    now: Cell<u64>,
    /// What the receiver reported, in order.
    events: Vec<ReceiverEvent>,
    rejected: Vec<Rejected>,
}

impl Pipe {
    fn new(suite: Suite, drone_packet: usize, rx_packet: usize, seed: u64) -> Pipe {
        let mut rng = TestRng::new(seed);
        let (d, r) = pair(&mut rng);
        let dcfg = DroneConfig {
            policy: DronePolicy {
                suites: SuiteSet::all(),
                modes: KexSet::all(),
            },
            packet_payload: drone_packet,
            ..DroneConfig::default()
        };
        let rcfg = ReceiverConfig {
            suites: vec![suite],
            modes: vec![KexMode::X25519],
            packet_payload: rx_packet,
            ..ReceiverConfig::default()
        };
        Pipe {
            drone: DroneConnection::new(d, dcfg).unwrap(),
            rx: ReceiverConnection::new(r, rcfg).unwrap(),
            rng,
            now: Cell::new(1_000),
            events: Vec::new(),
            rejected: Vec::new(),
        }
    }

    fn clock(&self) -> impl Fn() -> u64 + use<> {
        let now = self.now.get();
        move || now
    }

    /// Every packet the receiver queued, one wire packet per entry.
    fn rx_packets(&mut self) -> Vec<Vec<u8>> {
        let mut out = Vec::new();
        while let Some(p) = self.rx.poll_transmit() {
            out.push(p.to_vec());
        }
        out
    }

    fn drone_packets(&mut self) -> Vec<Vec<u8>> {
        let mut out = Vec::new();
        while let Some(p) = self.drone.poll_transmit() {
            out.push(p.to_vec());
        }
        out
    }

    fn drone_reads(&mut self, bytes: &[u8]) {
        self.drone.read_stream(bytes, clean);
        let clock = self.clock();
        while self.drone.has_message() {
            self.drone
                .process_message(&mut Sequential, &mut self.rng, &clock)
                .unwrap();
        }
    }

    fn rx_process(&mut self) {
        let clock = self.clock();
        while self.rx.has_message() {
            match self
                .rx
                .process_message(&mut Sequential, &mut self.rng, &clock)
            {
                Ok(Some(e)) => self.events.push(e),
                Ok(None) => {}
                Err(e) => self.rejected.push(e),
            }
        }
    }

    /// The handshake over clean streams, both ways.
    fn handshake(&mut self) {
        let clock = self.clock();
        self.rx.connect(&mut self.rng, &clock).unwrap();
        for _ in 0..4 {
            let up: Vec<u8> = self.rx_packets().concat();
            self.drone_reads(&up);
            let down: Vec<u8> = self.drone_packets().concat();
            self.rx.read_stream(&down, clean);
            self.rx_process();
        }
        assert!(self.drone.session().is_established(), "{:?}", self.events);
        assert!(self.rx.session().is_established());
        self.events.clear();
    }

    /// Seals a frame of `pixels` and returns its wire packets, after those of anything queued
    /// before it (as the drone sends them: `poll_message` until `None`, then `frame_packetizer`),
    /// cut in a buffer of the caller's.
    fn frame(&mut self, pixels: &[u8]) -> Vec<Vec<u8>> {
        let mut p = pixels.to_vec();
        let meta = FrameMeta {
            pixel_format: PixelFormat::Grey8,
            width: 8,
            height: (p.len() / 8) as u16,
            capture_ns: 42,
            state: None,
        };
        let clock = self.clock();
        let sealed = self
            .drone
            .seal_frame(&mut Sequential, &clock, meta, &mut p)
            .unwrap();
        let mut out = Vec::new();
        let mut buf = [0u8; MAX_WIRE_PACKET];
        while let Some(mut m) = self.drone.poll_message() {
            while let Some(n) = m.next_packet(&mut buf) {
                out.push(buf[..n.unwrap()].to_vec());
            }
        }
        let mut f = self.drone.frame_packetizer(&sealed, &p);
        while let Some(n) = f.next_packet(&mut buf) {
            out.push(buf[..n.unwrap()].to_vec());
        }
        out
    }

    /// The frames delivered so far: (sequence, pixels).
    fn frames(&self) -> Vec<(u64, Vec<u8>)> {
        self.events
            .iter()
            .filter_map(|e| match e {
                ReceiverEvent::Frame(f) => Some((f.header.sequence, f.pixels().to_vec())),
                _ => None,
            })
            .collect()
    }
}

/// A clean pipe: nothing but reassembled messages to report.
fn clean(i: Incoming<'_>) {
    assert!(matches!(i, Incoming::Message { .. }), "{i:?}");
}

/// Frame `k`'s pixels: 8 wide, 1 to 40 rows.
fn pixels(k: usize, rows: usize) -> Vec<u8> {
    (0..8 * rows)
        .map(|i| (i as u8).wrapping_mul(31).wrapping_add(k as u8))
        .collect()
}

/// Garbage that never looks like a packet start when at least two bytes long: every byte has bit 7
/// set, so any two of them read as a length above 1022 (the stretch is noticed at its first two
/// bytes), and while resynchronising, the last garbage byte followed by a real packet's first three
/// gives a routing header with source 0. The deframer slides over it onto the next real packet.
fn inert_garbage(n: usize, seed: u8) -> Vec<u8> {
    (0..n)
        .map(|i| 0x80 | (i as u8).wrapping_mul(37).wrapping_add(seed))
        .collect()
}

/// Cuts `bytes` into chunks of the given sizes (cycled).
fn chunked(bytes: &[u8], cuts: &[usize]) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    let mut rest = bytes;
    let mut i = 0;
    while !rest.is_empty() {
        let n = cuts[i % cuts.len()].clamp(1, rest.len());
        out.push(rest[..n].to_vec());
        rest = &rest[n..];
        i += 1;
    }
    out
}

#[test]
fn handshake_and_frames_over_one_stream() {
    let mut p = Pipe::new(Suite::ChaCha20Poly1305, 1020, 1020, 1);
    p.handshake();
    let mut wire = Vec::new();
    for k in 0..3 {
        wire.extend(p.frame(&pixels(k, 30)).concat());
    }
    p.rx.read_stream(&wire, clean);
    p.rx_process();
    let got = p.frames();
    assert_eq!(got.len(), 3);
    for (k, (seq, px)) in got.iter().enumerate() {
        assert_eq!((*seq, px), (k as u64, &pixels(k, 30)));
    }
    let c = p.rx.counters();
    assert_eq!((c.garbled, c.dropped, c.rejected), (0, 0, 0));
    // 240 + 52 = 292 bytes a frame: one packet each at 1020.
    assert_eq!(c.messages, 2 + 3, "ACCEPT, GROUP_KEY, three frames");
    assert_eq!(c.packets_in, 2 + 3);
}

#[test]
fn bad_packet_sizes_are_refused() {
    let mut rng = TestRng::new(2);
    let (d, r) = pair(&mut rng);
    for bad in [0, 1021, 5000] {
        let dcfg = DroneConfig {
            packet_payload: bad,
            ..DroneConfig::default()
        };
        assert_eq!(
            DroneConnection::new(d.clone(), dcfg).err(),
            Some(CpxError::BadPacketSize(bad))
        );
        let rcfg = ReceiverConfig {
            packet_payload: bad,
            ..ReceiverConfig::default()
        };
        assert_eq!(
            ReceiverConnection::new(r.clone(), rcfg).err(),
            Some(CpxError::BadPacketSize(bad))
        );
    }
}

/// The ESP32's WIFI_CTRL status and the stock image stream on the same link reach the caller,
/// untouched and not counted as garbage; the protocol's messages still get through.
#[test]
fn other_functions_are_handed_to_the_caller() {
    let mut p = Pipe::new(Suite::Aes128Gcm, 1020, 1020, 3);
    let clock = p.clock();
    p.rx.connect(&mut p.rng, &clock).unwrap();
    let mut up = Vec::new();
    let mut out = [0u8; MAX_WIRE_PACKET];
    let n = cpx::encode_packet(
        compat::CLIENT_STATUS_ROUTE,
        &compat::client_status_payload(true),
        &mut out,
    )
    .unwrap();
    up.extend_from_slice(&out[..n]);
    up.extend(p.rx_packets().concat());
    let n = cpx::encode_packet(
        Route::new(Target::Esp32, Target::Gap8, Function::Console),
        b"hi",
        &mut out,
    )
    .unwrap();
    up.extend_from_slice(&out[..n]);
    let mut others = Vec::new();
    p.drone.read_stream(&up, |i| match i {
        Incoming::Other(pk) => others.push((pk.route, pk.payload.to_vec())),
        other => clean(other),
    });
    assert_eq!(others.len(), 2);
    assert_eq!(
        compat::parse_client_status(others[0].0, &others[0].1),
        Some(true)
    );
    assert_eq!(others[1].1, b"hi");
    assert!(p.drone.has_message());
    let clock = p.clock();
    let ev = p
        .drone
        .process_message(&mut Sequential, &mut p.rng, &clock)
        .unwrap();
    assert!(matches!(ev, Some(DroneEvent::Established { .. })), "{ev:?}");
    let c = p.drone.counters();
    assert_eq!((c.packets_in, c.other_packets, c.garbled), (3, 2, 0));
    // Read as already-deframed packets, other functions are ignored (and counted).
    assert_eq!(p.rx.read_packet(others[1].0, &others[1].1), Ok(()));
    assert_eq!(p.rx.counters().other_packets, 1);
    assert!(!p.rx.has_message());
}

/// One long stretch of random garbage (which may look like packets now and then) and two of
/// bytes that never do: every stretch of the latter is reported exactly once, with the error
/// that started it; the frames after each stretch arrive whole.
#[test]
fn garbled_stretches_are_reported_once_each() {
    let mut p = Pipe::new(Suite::ChaCha20Poly1305, 200, 1020, 4);
    p.handshake();
    let mut wire = Vec::new();
    wire.extend(inert_garbage(3000, 1));
    wire.extend(p.frame(&pixels(0, 40)).concat());
    wire.extend(inert_garbage(2, 2));
    wire.extend(p.frame(&pixels(1, 40)).concat());
    let mut reports = Vec::new();
    for chunk in chunked(&wire, &[7, 300, 1, 1500]) {
        p.rx.read_stream(&chunk, |i| {
            if !matches!(i, Incoming::Message { .. }) {
                reports.push(alloc::format!("{i:?}"))
            }
        });
    }
    p.rx_process();
    assert_eq!(reports.len(), 2, "{reports:?}");
    assert!(reports.iter().all(|r| r.starts_with("Garbled(BadLength(")));
    let c = p.rx.counters();
    assert_eq!(c.garbled, 2);
    assert_eq!(c.cpx_errors, 3002, "one per byte slid over");
    assert_eq!(p.frames().len(), 2);
}

/// A datagram is whole packets: the end of a cut one is dropped, not completed from the next
/// datagram, which decodes on its own.
#[test]
fn datagrams_never_carry_a_partial_packet() {
    let mut p = Pipe::new(Suite::ChaCha20Poly1305, 100, 1020, 5);
    p.handshake();
    let f0 = p.frame(&pixels(0, 20));
    let f1 = p.frame(&pixels(1, 20));
    assert!(f0.len() >= 2);
    let mut reports = Vec::new();
    // Frame 0's second packet cut short: frame 0 is lost (counted), frame 1 arrives whole.
    for (i, d) in f0.iter().enumerate() {
        let d = if i == 1 { &d[..d.len() - 3] } else { &d[..] };
        p.rx.read_datagram(d, |e| {
            if !matches!(e, Incoming::Message { .. }) {
                reports.push(alloc::format!("{e:?}"))
            }
        });
    }
    for d in &f1 {
        p.rx.read_datagram(d, |e| {
            if !matches!(e, Incoming::Message { .. }) {
                reports.push(alloc::format!("{e:?}"))
            }
        });
    }
    p.rx_process();
    assert_eq!(p.frames(), vec![(1, pixels(1, 20))]);
    assert!(
        reports[0].starts_with("Garbled(Truncated { have: "),
        "{reports:?}"
    );
    assert!(
        reports[1..].iter().all(|r| r.starts_with("Dropped(")),
        "{reports:?}"
    );
    assert_eq!(p.rx.counters().garbled, 1);
}

/// Control messages queued by the drone's timers (a new epoch's GROUP_KEY), sent before the frame
/// as the drone sends them, key it: the receiver opens it at once, at the connection's packet
/// size throughout.
#[test]
fn queued_control_messages_go_before_the_frame() {
    let mut p = Pipe::new(Suite::ChaCha20Poly1305, 64, 1020, 6);
    p.handshake();
    // Ask for a rekey: the drone's next timer run draws epoch 1 and queues its GROUP_KEY.
    p.rx.request_rekey(&mut Sequential).unwrap();
    let up = p.rx_packets().concat();
    p.drone_reads(&up);
    let clock = p.clock();
    p.drone.handle_timeout(&mut Sequential, &mut p.rng, &clock);
    let packets = p.frame(&pixels(0, 10));
    // Split back into messages in order: GROUP_KEY first, then the frame.
    let mut dec = cpx::StreamDecoder::new();
    let mut asm = Assembler::new(1 << 16);
    let wire = packets.concat();
    let mut input = &wire[..];
    while let Some(r) = dec.decode(&mut input) {
        let pk = r.unwrap();
        asm.push(pk.route, pk.payload).unwrap();
    }
    let mut types = Vec::new();
    while let Some(m) = asm.next_message() {
        types.push(wire::parse_prefix(&m).unwrap());
    }
    assert_eq!(types, vec![MsgType::GroupKey, MsgType::Frame]);
    assert!(packets.iter().all(|pk| pk.len() <= WIRE_OVERHEAD + 64));
    p.rx.read_stream(&wire, clean);
    p.rx_process();
    assert!(p.events.contains(&ReceiverEvent::Rekeyed { epoch: 1 }));
    assert_eq!(p.frames().len(), 1);
}

/// Feeding already-deframed packets (`read_packet`) is the same as feeding the bytes.
#[test]
fn read_packet_matches_read_stream() {
    let mut p = Pipe::new(Suite::Aes128Gcm, 300, 1020, 7);
    p.handshake();
    let wire = p.frame(&pixels(0, 60)).concat();
    let mut dec = cpx::StreamDecoder::new();
    let mut input = &wire[..];
    while let Some(r) = dec.decode(&mut input) {
        let pk = r.unwrap();
        p.rx.read_packet(pk.route, pk.payload).unwrap();
    }
    p.rx_process();
    assert_eq!(p.frames(), vec![(0, pixels(0, 60))]);
    // A continuation packet with no message started is a typed drop.
    let stray = Route::new(Target::Gap8, Target::WifiHost, GAPSTREAM_FUNCTION).with_last(false);
    assert_eq!(
        p.rx.read_packet(stray, &[1, 2, 3]),
        Err(AssemblyError::Stray)
    );
    assert_eq!(p.rx.counters().dropped, 1);
}

/// Each reassembled message is reported with what its packets took on the wire, in the order the
/// messages wait; a caller can look at the next one before the session gets it, or take it past
/// the session.
#[test]
fn peek_and_take_messages() {
    let mut p = Pipe::new(Suite::ChaCha20Poly1305, 100, 1020, 10);
    p.handshake();
    let f0 = p.frame(&pixels(0, 30));
    let f1 = p.frame(&pixels(1, 30));
    let wire: Vec<u8> = f0.iter().chain(&f1).flatten().copied().collect();
    let mut wire_lens = Vec::new();
    for chunk in chunked(&wire, &[37, 250]) {
        p.rx.read_stream(&chunk, |i| match i {
            Incoming::Message { wire_len } => wire_lens.push(wire_len),
            other => panic!("{other:?}"),
        });
    }
    let sum = |f: &[Vec<u8>]| f.iter().map(Vec::len).sum::<usize>();
    assert_eq!(wire_lens, vec![sum(&f0), sum(&f1)]);
    let m = p.rx.peek_message().unwrap();
    assert_eq!(wire_lens[0], cpx::wire_len(m.len(), 100));
    assert_eq!(wire::parse_prefix(m), Ok(MsgType::Frame));
    // Taken past the session: the session never sees frame 0.
    let taken = p.rx.take_message().unwrap();
    assert_eq!(taken.len(), 36 + 240 + 16);
    p.rx_process();
    assert_eq!(p.frames(), vec![(1, pixels(1, 30))]);
    assert!(p.rx.peek_message().is_none() && p.rx.take_message().is_none());
}

/// A message queued while an earlier one is half sent (the caller stopped polling mid-message)
/// follows it whole: messages never interleave.
#[test]
fn messages_leave_whole_and_in_order() {
    let mut p = Pipe::new(Suite::ChaCha20Poly1305, 1020, 16, 8);
    let clock = p.clock();
    p.rx.connect(&mut p.rng, &clock).unwrap();
    let mut wire = p.rx.poll_transmit().unwrap().to_vec();
    assert_eq!(wire.len(), WIRE_OVERHEAD + 16);
    // A second HELLO (a restart) is queued while the first is half sent.
    p.rx.connect(&mut p.rng, &clock).unwrap();
    wire.extend(p.rx_packets().concat());
    let mut dec = cpx::StreamDecoder::new();
    let mut asm = Assembler::new(4096);
    let mut input = &wire[..];
    while let Some(r) = dec.decode(&mut input) {
        let pk = r.unwrap();
        assert_eq!(pk.route.source, Target::WifiHost as u8);
        assert!(pk.payload.len() <= 16);
        asm.push(pk.route, pk.payload).unwrap();
    }
    let mut hellos = Vec::new();
    while let Some(m) = asm.next_message() {
        assert_eq!(wire::parse_prefix(&m), Ok(MsgType::Hello));
        hellos.push(m);
    }
    assert_eq!(hellos.len(), 2);
    assert_ne!(hellos[0], hellos[1]);
    assert!(p.rx.poll_transmit().is_none());
}

/// `poll_message` hands the rest of a message `poll_transmit` began, then the next ones whole; its
/// packets are `poll_transmit`'s, byte for byte.
#[test]
fn poll_message_continues_what_poll_transmit_began() {
    let mut a = Pipe::new(Suite::ChaCha20Poly1305, 1020, 16, 11);
    let mut b = Pipe::new(Suite::ChaCha20Poly1305, 1020, 16, 11);
    let clock = a.clock();
    for p in [&mut a, &mut b] {
        p.rx.connect(&mut p.rng, &clock).unwrap();
        p.rx.connect(&mut p.rng, &clock).unwrap();
    }
    let want = a.rx_packets().concat();
    let mut got = b.rx.poll_transmit().unwrap().to_vec();
    let mut buf = [0u8; MAX_WIRE_PACKET];
    let mut messages = 0;
    while let Some(mut m) = b.rx.poll_message() {
        messages += 1;
        while let Some(n) = m.next_packet(&mut buf) {
            got.extend_from_slice(&buf[..n.unwrap()]);
        }
    }
    assert_eq!(messages, 2, "the rest of the first HELLO, then the second");
    assert_eq!(got, want);
    assert!(b.rx.poll_message().is_none() && b.rx.poll_transmit().is_none());
}

/// Packetizes a message the way the old hand-written glue did, for the cross-check below.
fn packetize(msg: &[u8], route: Route, size: usize) -> Vec<u8> {
    let mut pk = Packetizer::new(route, [msg, &[], &[]], size, LastFlag::Final).unwrap();
    let mut out = Vec::new();
    let mut buf = [0u8; MAX_WIRE_PACKET];
    while let Some(n) = pk.next_packet(&mut buf) {
        out.extend_from_slice(&buf[..n.unwrap()]);
    }
    out
}

/// What `poll_transmit` sends is byte for byte what `Packetizer` makes of the session's message.
#[test]
fn poll_transmit_is_the_packetizer_of_the_session_message() {
    for size in [1, 7, 100, 1020] {
        let mut a = Pipe::new(Suite::ChaCha20Poly1305, 1020, size, 9);
        let mut b = Pipe::new(Suite::ChaCha20Poly1305, 1020, size, 9);
        let clock = a.clock();
        a.rx.connect(&mut a.rng, &clock).unwrap();
        b.rx.session_mut().connect(&mut b.rng, &clock).unwrap();
        let hello = b.rx.session_mut().poll_transmit().unwrap();
        let route = Route::new(Target::WifiHost, Target::Gap8, GAPSTREAM_FUNCTION);
        assert_eq!(a.rx_packets().concat(), packetize(&hello, route, size));
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    /// Handshake and frames at any packet sizes on both sides, the bytes cut into any chunks in
    /// both directions, and inert garbage between some of the drone's packets: every frame arrives
    /// whole and in order, each garbage stretch is reported once, nothing else is.
    #[test]
    fn round_trip_any_packet_size_chunking_and_garbage(
        drone_packet in 1usize..=1020,
        rx_packet in 1usize..=1020,
        rows in proptest::collection::vec(1usize..40, 1..6),
        cuts in proptest::collection::vec(1usize..900, 1..8),
        garbage_at in proptest::collection::btree_set(0usize..64, 0..4),
        garbage_len in 2usize..200,
        seed in any::<u64>(),
    ) {
        let mut p = Pipe::new(Suite::ChaCha20Poly1305, drone_packet, rx_packet, seed);
        let clock = p.clock();
        p.rx.connect(&mut p.rng, &clock).unwrap();
        // Handshake through chunked streams both ways.
        for _ in 0..4 {
            let up = p.rx_packets().concat();
            for c in chunked(&up, &cuts) {
                p.drone.read_stream(&c, clean);
            }
            let clock = p.clock();
            while p.drone.has_message() {
                p.drone.process_message(&mut Sequential, &mut p.rng, &clock).unwrap();
            }
            let down = p.drone_packets().concat();
            for c in chunked(&down, &cuts) {
                p.rx.read_stream(&c, clean);
            }
            p.rx_process();
        }
        prop_assert!(p.rx.session().is_established());
        prop_assert!(p.drone.session().is_established());
        p.events.clear();
        // Frames, with garbage before some packets (never two stretches back to back).
        let mut wire = Vec::new();
        let mut stretches = 0;
        let mut index = 0;
        for (k, r) in rows.iter().enumerate() {
            for pk in p.frame(&pixels(k, *r)) {
                if garbage_at.contains(&index) {
                    wire.extend(inert_garbage(garbage_len, index as u8));
                    stretches += 1;
                }
                wire.extend(pk);
                index += 1;
            }
        }
        let mut reports = 0;
        for c in chunked(&wire, &cuts) {
            p.rx.read_stream(&c, |i| {
                if !matches!(i, Incoming::Message { .. }) {
                    assert!(matches!(i, Incoming::Garbled(CpxError::BadLength(_))), "{i:?}");
                    reports += 1;
                }
            });
        }
        p.rx_process();
        prop_assert_eq!(reports, stretches);
        prop_assert_eq!(p.rx.counters().garbled, stretches as u64);
        prop_assert!(p.rejected.is_empty(), "{:?}", p.rejected);
        let want: Vec<(u64, Vec<u8>)> =
            rows.iter().enumerate().map(|(k, r)| (k as u64, pixels(k, *r))).collect();
        prop_assert_eq!(p.frames(), want);
        prop_assert_eq!(p.rx.session().counters().lost_frames, 0);
    }

    /// Datagrams (one packet each) with some of the frames' datagrams lost: every frame delivered
    /// is byte-exact and new; a frame whose datagrams all arrived, after a frame whose last one
    /// did, is delivered; the losses are reported as drops, never as garbage.
    #[test]
    fn datagrams_with_losses(
        packet in 16usize..=400,
        rows in proptest::collection::vec(1usize..40, 1..10),
        lose in proptest::collection::btree_set(0usize..120, 0..12),
        seed in any::<u64>(),
    ) {
        let mut p = Pipe::new(Suite::ChaCha20Poly1305, packet, 1020, seed);
        p.handshake();
        let mut index = 0;
        let mut complete = Vec::new();
        let mut prev_last_arrived = true;
        for (k, r) in rows.iter().enumerate() {
            let dgrams = p.frame(&pixels(k, *r));
            let mut all = true;
            for (i, d) in dgrams.iter().enumerate() {
                let lost = lose.contains(&index);
                index += 1;
                all &= !lost;
                if i + 1 == dgrams.len() {
                    if all && prev_last_arrived {
                        complete.push(k as u64);
                    }
                    prev_last_arrived = !lost;
                }
                if !lost {
                    p.rx.read_datagram(d, |i| {
                        assert!(
                            matches!(i, Incoming::Dropped(_) | Incoming::Message { .. }),
                            "{i:?}"
                        );
                    });
                }
            }
        }
        p.rx_process();
        let got = p.frames();
        let mut seen = alloc::collections::BTreeSet::new();
        for (seq, px) in &got {
            prop_assert_eq!(px, &pixels(*seq as usize, rows[*seq as usize]));
            prop_assert!(seen.insert(*seq));
        }
        for k in &complete {
            prop_assert!(seen.contains(k), "frame {} arrived whole but was not delivered", k);
        }
        prop_assert_eq!(p.rx.counters().garbled, 0);
        if lose.iter().all(|i| *i >= index) {
            prop_assert_eq!(got.len(), rows.len());
        }
    }
}

/// A version-2 peer (the layouts of HELLO, ACCEPT and GROUP_KEY changed in version 3) gets
/// `UnsupportedVersion(2)` for every message, not a generic error: through the connections (the
/// reassembler reads the prefix first) and through the sessions.
#[test]
fn a_version_2_peer_gets_unsupported_version() {
    let mut p = Pipe::new(Suite::ChaCha20Poly1305, 1020, 1020, 77);
    p.handshake();
    let clock = p.clock();
    // Messages as a version-2 end makes them: its HELLO (18-byte header, no time, no MAC), and
    // this drone's own ACCEPT, GROUP_KEY and FRAME with the version byte a version-2 drone puts.
    let mut v2_hello = wire::HandshakeHeader {
        msg_type: MsgType::Hello,
        hello_id: [7; 8],
        key_id: [1, 2, 3, 4],
        noise_len: 55,
    }
    .encode()
    .to_vec();
    v2_hello.extend_from_slice(&[0x5a; 55]);
    v2_hello[2] = 2;
    let mut peer = Pipe::new(Suite::ChaCha20Poly1305, 1020, 1020, 78);
    peer.rx.connect(&mut peer.rng, &clock).unwrap();
    let up = peer.rx_packets().concat();
    peer.drone.read_stream(&up, clean);
    peer.drone
        .process_message(&mut Sequential, &mut peer.rng, &clock)
        .unwrap();
    let mut down = Vec::new();
    while let Some(m) = peer.drone.session_mut().poll_transmit() {
        down.push(m);
    }
    let mut pixels = [1u8, 2, 3, 4, 5, 6, 7, 8];
    let meta = FrameMeta {
        pixel_format: PixelFormat::Grey8,
        width: 8,
        height: 1,
        capture_ns: 42,
        state: None,
    };
    let sealed = p
        .drone
        .seal_frame(&mut Sequential, &clock, meta, &mut pixels)
        .unwrap();
    let mut frame = sealed.header.to_vec();
    frame.extend_from_slice(&pixels);
    frame.extend_from_slice(sealed.tag());
    frame[2] = 2;
    let mut v2_drone: Vec<Vec<u8>> = down
        .into_iter()
        .map(|mut m| {
            m[2] = 2;
            m
        })
        .collect();
    v2_drone.push(frame);
    assert!(v2_drone.iter().any(|m| m[3] == MsgType::Accept as u8));
    assert!(v2_drone.iter().any(|m| m[3] == MsgType::GroupKey as u8));
    let v2 = wire::WireError::UnsupportedVersion(2);
    // On the drone.
    let r = p
        .drone
        .session_mut()
        .handle_message(&mut Sequential, &mut p.rng, &clock, &v2_hello);
    assert_eq!(r, Err(crate::session::DroneError::Wire(v2)));
    let mut seen = Vec::new();
    p.drone.read_stream(
        &cpx_of(
            &v2_hello,
            Route::new(Target::WifiHost, Target::Gap8, Function::Test),
        ),
        |i| {
            if let Incoming::Dropped(e) = i {
                seen.push(e)
            }
        },
    );
    assert_eq!(seen, [AssemblyError::Wire(v2)]);
    assert!(!p.drone.has_message());
    // On the receiver.
    for m in &v2_drone {
        let r =
            p.rx.session_mut()
                .handle_message(&mut Sequential, &mut p.rng, &clock, m.clone());
        assert_eq!(r, Err(Rejected::Wire(v2)), "type {:#04x}", m[3]);
        let mut seen = Vec::new();
        p.rx.read_stream(
            &cpx_of(
                m,
                Route::new(Target::Gap8, Target::WifiHost, Function::Test),
            ),
            |i| {
                if let Incoming::Dropped(e) = i {
                    seen.push(e)
                }
            },
        );
        assert_eq!(seen, [AssemblyError::Wire(v2)]);
    }
    assert!(alloc::format!("{v2}").contains("version 2 is not supported (only 3)"));
}

/// `m` as CPX wire bytes in 1020-byte packets on `route`.
fn cpx_of(m: &[u8], route: Route) -> Vec<u8> {
    let mut p = Packetizer::new(route, [m, &[], &[]], 1020, LastFlag::Final).unwrap();
    let mut out = Vec::new();
    let mut buf = [0u8; MAX_WIRE_PACKET];
    while let Some(n) = p.next_packet(&mut buf) {
        out.extend_from_slice(&buf[..n.unwrap()]);
    }
    out
}
