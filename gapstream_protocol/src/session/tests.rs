//! Session tests on the host: round trip, tamper, replay, reorder, truncation, wrong key,
//! downgrade, rekeying, loss, key log, nonce uniqueness over rekeys and restarts.

use super::*;
use crate::cpx::{Function, Route, StreamDecoder, Target};
use crate::handshake::{KexSet, SuiteSet, pair};
use crate::test_util::{TestRng, hex};
use crate::wire::PixelFormat;
use alloc::collections::BTreeSet;
use alloc::format;
use alloc::string::String;
use alloc::vec;
use core::cell::Cell;
use gap_rust_cipher_s::Sequential;
use proptest::prelude::*;

struct Net {
    drone: DroneSession,
    rx: ReceiverSession,
    rng: TestRng,
    now: Cell<u64>,
}

impl Net {
    fn new(dcfg: DroneConfig, rcfg: ReceiverConfig, seed: u64) -> Net {
        let mut rng = TestRng::new(seed);
        let (d, r) = pair(&mut rng);
        Net {
            drone: DroneSession::new(d, dcfg),
            rx: ReceiverSession::new(r, rcfg),
            rng,
            now: Cell::new(1_000),
        }
    }
    fn with_suite(suite: Suite, mode: KexMode) -> Net {
        let dcfg = DroneConfig {
            policy: DronePolicy {
                suites: SuiteSet::all(),
                modes: KexSet::all(),
            },
            ..DroneConfig::default()
        };
        let rcfg = ReceiverConfig {
            suites: vec![suite],
            modes: vec![mode],
            rsa_key: Some(crate::rsa_oaep::tests::test_key()),
            ..ReceiverConfig::default()
        };
        let mut n = Net::new(dcfg, rcfg, 11);
        n.handshake();
        n
    }
    fn advance(&self, ns: u64) {
        self.now.set(self.now.get() + ns);
    }
    /// Delivers everything queued on the drone to the receiver and back, until quiet.
    fn pump(&mut self) -> Vec<ReceiverEvent> {
        let mut events = Vec::new();
        loop {
            let mut moved = false;
            while let Some(m) = self.rx.poll_transmit() {
                moved = true;
                let now = self.now.get();
                let _ = self
                    .drone
                    .handle_message(&mut Sequential, &mut self.rng, &move || now, &m);
            }
            while let Some(m) = self.drone.poll_transmit() {
                moved = true;
                let now = self.now.get();
                if let Ok(Some(e)) =
                    self.rx
                        .handle_message(&mut Sequential, &mut self.rng, &move || now, m)
                {
                    events.push(e);
                }
            }
            if !moved {
                return events;
            }
        }
    }
    fn handshake(&mut self) {
        let now = self.now.get();
        self.rx.connect(&mut self.rng, &move || now).unwrap();
        let ev = self.pump();
        assert!(
            matches!(ev.last(), Some(ReceiverEvent::Established { .. })),
            "{ev:?}"
        );
        assert!(self.drone.is_established());
    }
    /// Seals a frame of `pixels` and returns the whole message.
    fn frame(&mut self, pixels: &[u8]) -> Vec<u8> {
        let meta = FrameMeta {
            pixel_format: PixelFormat::GRAY8,
            width: 8,
            height: (pixels.len() / 8) as u16,
            capture_ns: 42,
        };
        let mut p = pixels.to_vec();
        let now = self.now.get();
        let s = self
            .drone
            .seal_frame(&mut Sequential, &move || now, meta, &mut p)
            .unwrap();
        let mut m = s.header.to_vec();
        m.extend_from_slice(&p);
        m.extend_from_slice(s.tag());
        m
    }
    fn deliver(&mut self, m: Vec<u8>) -> Result<Option<ReceiverEvent>, Rejected> {
        let now = self.now.get();
        self.rx
            .handle_message(&mut Sequential, &mut self.rng, &move || now, m)
    }
    fn deliver_frame(&mut self, m: Vec<u8>) -> Result<Frame, Rejected> {
        match self.deliver(m)? {
            Some(ReceiverEvent::Frame(f)) => Ok(f),
            other => panic!("expected a frame, got {other:?}"),
        }
    }
}

fn pixels(n: usize, seed: u8) -> Vec<u8> {
    (0..n)
        .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed))
        .collect()
}

#[test]
fn round_trip_every_suite_and_mode() {
    for mode in KexMode::ALL {
        for suite in Suite::ALL {
            let mut n = Net::with_suite(suite, mode);
            assert_eq!(n.rx.suite(), Some(suite));
            for i in 0..3u8 {
                let px = pixels(64, i);
                let m = n.frame(&px);
                if suite != Suite::None {
                    assert_ne!(&m[36..100], &px[..]);
                }
                let f = n.deliver_frame(m).unwrap();
                assert_eq!(f.pixels(), &px[..], "{suite} {mode}");
                assert_eq!(f.header.sequence, i as u64);
                assert_eq!(f.authenticated, suite.is_authenticated());
                assert_eq!(f.into_pixels(), px);
            }
            let s = n.rx.handshake_stats().unwrap();
            assert_eq!((s.suite, s.mode), (suite, mode));
            assert!(s.bytes_sent > 32 && s.bytes_received > 32);
            assert_eq!(n.rx.counters().frames, 3);
        }
    }
}

#[test]
fn handshake_bytes_and_time_are_recorded() {
    let mut n = Net::new(DroneConfig::default(), ReceiverConfig::default(), 5);
    let now = n.now.get();
    n.rx.connect(&mut n.rng, &move || now).unwrap();
    let hello = n.rx.poll_transmit().unwrap();
    n.advance(3_000_000); // 3 ms to the drone
    let dclock = n.now.get();
    // The drone's clock advances by 7 ms while it computes (the closure sees a later time).
    let calls = Cell::new(0u64);
    let drone_clock = || {
        calls.set(calls.get() + 1);
        dclock + (calls.get() - 1) * 7_000_000
    };
    let ev = n
        .drone
        .handle_message(&mut Sequential, &mut n.rng, &drone_clock, &hello)
        .unwrap();
    let Some(DroneEvent::Established { stats, .. }) = ev else {
        panic!("{ev:?}")
    };
    assert_eq!(stats.duration_ns, 7_000_000);
    assert_eq!(stats.bytes_received, hello.len() as u64);
    let accept = n.drone.poll_transmit().unwrap();
    assert_eq!(stats.bytes_sent, accept.len() as u64);
    n.advance(10_000_000);
    let Some(ReceiverEvent::Established { stats: rs, .. }) = n.deliver(accept.clone()).unwrap()
    else {
        panic!()
    };
    assert_eq!(rs.duration_ns, 13_000_000);
    assert_eq!(
        (rs.bytes_sent, rs.bytes_received),
        (hello.len() as u64, accept.len() as u64)
    );
    // X25519 alone: HELLO = 14 + 32 (e) + payload (1+2 suites +1 + 3 mode) + 16 tag.
    assert_eq!(hello.len(), 14 + 32 + 7 + 16);
    assert_eq!(accept.len(), 14 + 32 + 4 + 16);
    assert_eq!(rs.wire_bytes_sent, hello.len() as u64 + 4);
    let c = n.rx.counters();
    assert_eq!(
        (
            c.handshake_bytes_sent,
            c.handshake_bytes_received,
            c.handshake_ns
        ),
        (69, 66, 13_000_000)
    );
}

#[test]
fn tamper_each_byte_of_header_payload_and_tag() {
    for suite in Suite::AUTHENTICATED {
        let mut n = Net::with_suite(suite, KexMode::X25519);
        let good = n.frame(&pixels(48, 1));
        let len = good.len();
        assert_eq!(len, 36 + 48 + 16);
        for i in 0..len {
            let mut m = good.clone();
            m[i] ^= 0x20;
            let r = n.deliver(m);
            assert!(r.is_err(), "{suite}: flipped byte {i} accepted: {r:?}");
        }
        let c = n.rx.counters();
        // Payload and tag bytes, and the authenticated header fields, are tag failures.
        assert!(c.tag_failures >= 48 + 16, "{c:?}");
        assert_eq!(c.wrong_suite, 1);
        assert_eq!(c.frames, 0);
        // The stream goes on: the untouched frame, then the next.
        assert!(n.deliver_frame(good).is_ok());
        let next = n.frame(&pixels(48, 2));
        assert!(n.deliver_frame(next).is_ok());
    }
}

#[test]
fn replay_is_rejected_and_counted() {
    let mut n = Net::with_suite(Suite::ChaCha20Poly1305, KexMode::X25519);
    let m = n.frame(&pixels(16, 0));
    n.deliver_frame(m.clone()).unwrap();
    assert_eq!(
        n.deliver(m.clone()).unwrap_err(),
        Rejected::Replay(ReplayError::Duplicate)
    );
    assert_eq!(
        n.deliver(m).unwrap_err(),
        Rejected::Replay(ReplayError::Duplicate)
    );
    assert_eq!(n.rx.counters().replays, 2);
}

#[test]
fn reorder_loss_and_too_old() {
    let mut n = Net::with_suite(Suite::Aes128Gcm, KexMode::X25519);
    let frames: Vec<Vec<u8>> = (0..300).map(|i| n.frame(&pixels(16, i as u8))).collect();
    // 0, 2, 1: all accepted, 1 is late.
    n.deliver_frame(frames[0].clone()).unwrap();
    n.deliver_frame(frames[2].clone()).unwrap();
    assert_eq!(n.rx.counters().lost_frames, 1);
    n.deliver_frame(frames[1].clone()).unwrap();
    let c = n.rx.counters();
    assert_eq!((c.lost_frames, c.late_frames), (0, 1));
    // Skip to 299: 3..=298 lost; 10 is now beyond the 256-frame window.
    n.deliver_frame(frames[299].clone()).unwrap();
    assert_eq!(n.rx.counters().lost_frames, 296);
    assert_eq!(
        n.deliver(frames[10].clone()).unwrap_err(),
        Rejected::Replay(ReplayError::TooOld)
    );
    n.deliver_frame(frames[200].clone()).unwrap();
    let c = n.rx.counters();
    assert_eq!((c.lost_frames, c.too_old, c.frames), (295, 1, 5));
}

#[test]
fn truncated_and_extended_frames_are_rejected() {
    let mut n = Net::with_suite(Suite::ChaCha20Poly1305, KexMode::X25519);
    let m = n.frame(&pixels(64, 0));
    for cut in [0, 3, 35, 36, 50, m.len() - 16, m.len() - 1] {
        assert!(n.deliver(m[..cut].to_vec()).is_err(), "cut at {cut}");
    }
    let mut longer = m.clone();
    longer.push(0);
    assert!(matches!(
        n.deliver(longer).unwrap_err(),
        Rejected::Length { .. }
    ));
    // Header says more than the configured maximum.
    let mut big = m.clone();
    big[32..36].copy_from_slice(&(5u32 << 20).to_le_bytes());
    assert!(matches!(
        n.deliver(big).unwrap_err(),
        Rejected::Length { .. }
    ));
    n.deliver_frame(m).unwrap();
}

#[test]
fn wrong_keys_are_refused_with_a_clear_error() {
    // The receiver is paired with another drone: the real drone cannot read its HELLO.
    let mut rng = TestRng::new(8);
    let (d, _r) = pair(&mut rng);
    let (_d2, r2) = pair(&mut rng);
    let mut drone = DroneSession::new(d.clone(), DroneConfig::default());
    let mut rx = ReceiverSession::new(r2, ReceiverConfig::default());
    let clock = || 5u64;
    rx.connect(&mut rng, &clock).unwrap();
    let hello = rx.poll_transmit().unwrap();
    let ev = drone
        .handle_message(&mut Sequential, &mut rng, &clock, &hello)
        .unwrap();
    assert_eq!(
        ev,
        Some(DroneEvent::HelloRefused(HandshakeError::Authentication))
    );
    let alert = drone.poll_transmit().unwrap();
    let ev = rx
        .handle_message(&mut Sequential, &mut rng, &clock, alert)
        .unwrap();
    let Some(ReceiverEvent::HandshakeFailed(e)) = ev else {
        panic!("{ev:?}")
    };
    assert!(
        format!("{e}").contains("paired with a different receiver key"),
        "{e}"
    );
    // A drone that has the receiver's public key but is not the paired drone: its ACCEPT fails.
    let mut rng = TestRng::new(9);
    let (d, r) = pair(&mut rng);
    let impostor = Identity {
        local: handshake::StaticSecret::generate(&mut rng),
        peer_public: d.peer_public,
    };
    let mut fake = DroneSession::new(impostor, DroneConfig::default());
    let mut rx = ReceiverSession::new(r, ReceiverConfig::default());
    rx.connect(&mut rng, &clock).unwrap();
    let hello = rx.poll_transmit().unwrap();
    // The impostor cannot even read the HELLO (encrypted to the real drone's key).
    assert!(matches!(
        fake.handle_message(&mut Sequential, &mut rng, &clock, &hello)
            .unwrap(),
        Some(DroneEvent::HelloRefused(HandshakeError::Authentication))
    ));
    // Frames sealed in another session are tag failures.
    let mut a = Net::with_suite(Suite::ChaCha20Poly1305, KexMode::X25519);
    let mut b = Net::new(DroneConfig::default(), ReceiverConfig::default(), 12);
    b.handshake();
    let foreign = b.frame(&pixels(16, 0));
    assert_eq!(a.deliver(foreign).unwrap_err(), Rejected::TagFailure);
}

#[test]
fn downgrade_attempts_are_detected() {
    // (1) The attacker rewrites a ChaCha20-Poly1305 frame as a `none` frame (suite byte changed,
    // tag stripped): refused because the session's suite is fixed by the handshake.
    let mut n = Net::with_suite(Suite::ChaCha20Poly1305, KexMode::X25519);
    let mut m = n.frame(&pixels(32, 0));
    m[4] = Suite::None as u8;
    m.truncate(m.len() - 16);
    assert_eq!(
        n.deliver(m).unwrap_err(),
        Rejected::WrongSuite {
            got: 0,
            negotiated: Suite::ChaCha20Poly1305
        }
    );
    // An injected plaintext frame is refused the same way.
    let fake = FrameHeader {
        suite: 0,
        pixel_format: PixelFormat::GRAY8,
        width: 1,
        height: 1,
        epoch: 0,
        sequence: 77,
        capture_ns: 0,
        payload_len: 1,
    };
    let mut m = fake.encode().to_vec();
    m.push(0xFF);
    assert!(matches!(
        n.deliver(m).unwrap_err(),
        Rejected::WrongSuite { .. }
    ));
    assert_eq!(n.rx.counters().wrong_suite, 2);

    // (2) The attacker strips the strong suites and modes from the HELLO (it cannot read the
    // encrypted offer, so it can only change bytes): the drone cannot authenticate the HELLO.
    let dcfg = DroneConfig {
        policy: DronePolicy {
            suites: SuiteSet::all(),
            modes: KexSet::all(),
        },
        ..DroneConfig::default()
    };
    let rcfg = ReceiverConfig {
        suites: vec![Suite::ChaCha20Poly1305, Suite::None],
        modes: vec![KexMode::P256, KexMode::X25519],
        ..ReceiverConfig::default()
    };
    let mut n = Net::new(dcfg, rcfg, 13);
    let clock = || 1u64;
    n.rx.connect(&mut n.rng, &clock).unwrap();
    let hello = n.rx.poll_transmit().unwrap();
    // The offer sits at the start of the encrypted payload after the 32-byte ephemeral: try
    // values of the byte that counts the suites and of the first suite byte (among them every
    // suite value and the counts that would drop or add suites).
    for pos in [14 + 32, 14 + 33] {
        for v in [0u8, 1, 2, 3, 8, 0x01, 0x02, 0x10, 0x11, 0x12, 0x80, 0xFF] {
            if v == hello[pos] {
                continue;
            }
            let mut h = hello.clone();
            h[pos] = v;
            let ev = n
                .drone
                .handle_message(&mut Sequential, &mut n.rng, &clock, &h)
                .unwrap();
            assert_eq!(
                ev,
                Some(DroneEvent::HelloRefused(HandshakeError::Authentication))
            );
        }
    }
    // (3) The same for the drone's choice in the ACCEPT: the receiver refuses it.
    let hello2 = hello.clone();
    let _ = n
        .drone
        .handle_message(&mut Sequential, &mut n.rng, &clock, &hello2)
        .unwrap();
    let mut accept = None;
    while let Some(m) = n.drone.poll_transmit() {
        if m[3] == MsgType::Accept as u8 {
            accept = Some(m);
        }
    }
    let mut accept = accept.unwrap();
    accept[14 + 32] ^= Suite::ChaCha20Poly1305 as u8 ^ Suite::None as u8;
    let ev =
        n.rx.handle_message(&mut Sequential, &mut n.rng, &clock, accept)
            .unwrap();
    assert_eq!(
        ev,
        Some(ReceiverEvent::HandshakeFailed(
            HandshakeError::Authentication
        ))
    );
}

fn rekey_net(every: u64) -> Net {
    let dcfg = DroneConfig {
        rekey_after_frames: every,
        ..DroneConfig::default()
    };
    let mut n = Net::new(dcfg, ReceiverConfig::default(), 21);
    n.handshake();
    n
}

#[test]
fn rekey_every_n_frames_with_ack() {
    let mut n = rekey_net(5);
    for i in 0..23u64 {
        let m = n.frame(&pixels(16, i as u8));
        let f = n.deliver_frame(m).unwrap();
        assert_eq!(f.header.epoch as u64, i / 5);
        n.pump();
    }
    assert_eq!(n.rx.epoch(), Some(4));
    assert_eq!(n.drone.counters().rekeys_acked, 4);
    assert_eq!(n.rx.counters().rekeys, 4);
}

#[test]
fn rekey_every_t_seconds_and_on_request() {
    let dcfg = DroneConfig {
        rekey_after_ns: 1_000_000_000,
        ..DroneConfig::default()
    };
    let mut n = Net::new(dcfg, ReceiverConfig::default(), 22);
    n.handshake();
    let m = n.frame(&pixels(8, 0));
    n.deliver_frame(m).unwrap();
    n.advance(1_000_000_000);
    let m = n.frame(&pixels(8, 0));
    assert_eq!(n.deliver_frame(m).unwrap().header.epoch, 1);
    n.pump();
    // Receiver-requested rekey.
    n.rx.request_rekey(&mut Sequential).unwrap();
    n.pump();
    let m = n.frame(&pixels(8, 0));
    assert_eq!(n.deliver_frame(m).unwrap().header.epoch, 2);
}

#[test]
fn lost_rekey_message_and_lost_ack() {
    let mut n = rekey_net(2);
    for i in 0..2 {
        let m = n.frame(&pixels(8, i));
        n.deliver_frame(m).unwrap();
    }
    // Frame 2 triggers the rekey; the REKEY message is lost.
    let m = n.frame(&pixels(8, 2));
    let lost = n.drone.poll_transmit().unwrap();
    assert_eq!(lost[3], MsgType::Rekey as u8);
    // The receiver follows the drone from the authenticated frame alone and acknowledges.
    assert_eq!(n.deliver_frame(m).unwrap().header.epoch, 1);
    assert_eq!(n.rx.epoch(), Some(1));
    // That ACK is lost too: the drone retransmits REKEY, the receiver ACKs again.
    let ack = n.rx.poll_transmit().unwrap();
    assert_eq!(ack[3], MsgType::RekeyAck as u8);
    n.advance(300_000_000);
    let now = n.now.get();
    n.drone.handle_timeout(&mut Sequential, &move || now);
    assert_eq!(n.drone.counters().rekey_retransmits, 1);
    n.pump();
    assert_eq!(n.drone.counters().rekeys_acked, 1);
    // A late ACK (the lost one) is now a replay.
    let now = n.now.get();
    assert!(
        n.drone
            .handle_message(&mut Sequential, &mut n.rng, &move || now, &ack)
            .is_err()
    );
}

#[test]
fn previous_epoch_only_within_grace() {
    let rcfg = ReceiverConfig {
        grace_ns: 100_000_000,
        ..ReceiverConfig::default()
    };
    let dcfg = DroneConfig {
        rekey_after_frames: 2,
        ..DroneConfig::default()
    };
    let mut n = Net::new(dcfg, rcfg, 23);
    n.handshake();
    let e0: Vec<Vec<u8>> = (0..2).map(|i| n.frame(&pixels(8, i))).collect();
    let e1 = n.frame(&pixels(8, 9));
    n.pump();
    assert_eq!(n.rx.epoch(), Some(1));
    // Epoch 0 frame arriving late, within grace: accepted.
    n.deliver_frame(e0[0].clone()).unwrap();
    // After the grace window the epoch-0 keys are wiped: refused.
    n.advance(200_000_000);
    let now = n.now.get();
    n.rx.handle_timeout(&mut n.rng, &move || now);
    assert!(matches!(
        n.deliver(e0[1].clone()).unwrap_err(),
        Rejected::BadEpoch {
            epoch: 0,
            current: 1
        }
    ));
    n.deliver_frame(e1).unwrap();
}

#[test]
fn forged_epoch_jump_does_not_ratchet() {
    let mut n = Net::with_suite(Suite::ChaCha20Poly1305, KexMode::X25519);
    let mut m = n.frame(&pixels(8, 0));
    m[12] = 1; // epoch 1, still sealed under epoch 0
    assert_eq!(n.deliver(m).unwrap_err(), Rejected::TagFailure);
    assert_eq!(n.rx.epoch(), Some(0));
    let mut m = n.frame(&pixels(8, 0));
    m[12] = 9;
    assert!(matches!(
        n.deliver(m).unwrap_err(),
        Rejected::BadEpoch { epoch: 9, .. }
    ));
}

#[test]
fn end_to_end_over_cpx_with_every_packet_size() {
    for size in [128, 256, 512, 1020] {
        let mut n = Net::with_suite(Suite::ChaCha20Poly1305, KexMode::X25519);
        let mut asm = crate::assembler::Assembler::new(n.rx.config().max_message());
        let mut dec = StreamDecoder::new();
        let route = Route::new(Target::Gap8, Target::WifiHost, Function::Test);
        let mut wire = Vec::new();
        let frames: Vec<Vec<u8>> = (0..3).map(|i| pixels(324 * 244, i)).collect();
        for px in &frames {
            let mut p = px.clone();
            let now = n.now.get();
            let meta = FrameMeta {
                pixel_format: PixelFormat::GRAY8,
                width: 324,
                height: 244,
                capture_ns: 7,
            };
            let s = n
                .drone
                .seal_frame(&mut Sequential, &move || now, meta, &mut p)
                .unwrap();
            let mut pk = s.packetizer(&p, route, size).unwrap();
            let mut out = [0u8; crate::cpx::MAX_WIRE_PACKET];
            while let Some(len) = pk.next_packet(&mut out) {
                wire.extend_from_slice(&out[..len.unwrap()]);
            }
        }
        let mut got = Vec::new();
        for chunk in wire.chunks(1460) {
            let mut c = chunk;
            while let Some(p) = dec.decode(&mut c) {
                let p = p.unwrap();
                asm.push(p.route, p.payload).unwrap();
                while let Some(m) = asm.next_message() {
                    got.push(n.deliver_frame(m).unwrap().into_pixels());
                }
            }
        }
        assert_eq!(got, frames, "packet size {size}");
    }
}

#[test]
fn close_wipes_and_reconnect_works() {
    let mut n = Net::with_suite(Suite::ChaCha20Poly1305, KexMode::X25519);
    n.rx.close(&mut Sequential);
    let m = n.rx.poll_transmit().unwrap();
    let ev = n
        .drone
        .handle_message(&mut Sequential, &mut n.rng, &|| 0u64, &m)
        .unwrap();
    assert_eq!(ev, Some(DroneEvent::Closed));
    assert!(!n.drone.is_established());
    let mut p = [0u8; 4];
    let meta = FrameMeta {
        pixel_format: PixelFormat::GRAY8,
        width: 2,
        height: 2,
        capture_ns: 0,
    };
    assert_eq!(
        n.drone
            .seal_frame(&mut Sequential, &|| 0u64, meta, &mut p)
            .unwrap_err(),
        SealError::NotEstablished
    );
    n.handshake();
    let m = n.frame(&pixels(8, 0));
    n.deliver_frame(m).unwrap();
}

#[test]
fn handshake_retry_after_timeout_and_stale_accept() {
    let mut n = Net::new(DroneConfig::default(), ReceiverConfig::default(), 31);
    let clock0 = || 0u64;
    n.rx.connect(&mut n.rng, &clock0).unwrap();
    let hello1 = n.rx.poll_transmit().unwrap();
    let late = || 3_000_000_000u64;
    assert_eq!(
        n.rx.handle_timeout(&mut n.rng, &late),
        Some(ReceiverEvent::HandshakeRetry { attempt: 2 })
    );
    let hello2 = n.rx.poll_transmit().unwrap();
    // The drone answers the first HELLO late, then the second.
    n.drone
        .handle_message(&mut Sequential, &mut n.rng, &late, &hello1)
        .unwrap();
    let stale = n.drone.poll_transmit().unwrap();
    n.drone
        .handle_message(&mut Sequential, &mut n.rng, &late, &hello2)
        .unwrap();
    let fresh = n.drone.poll_transmit().unwrap();
    assert_eq!(
        n.rx.handle_message(&mut Sequential, &mut n.rng, &late, stale)
            .unwrap_err(),
        Rejected::StaleHandshake
    );
    let ev =
        n.rx.handle_message(&mut Sequential, &mut n.rng, &late, fresh)
            .unwrap();
    let Some(ReceiverEvent::Established { stats, .. }) = ev else {
        panic!("{ev:?}")
    };
    assert_eq!(stats.attempts, 2);
}

/// The key log lets an independent implementation (the RustCrypto AEAD crates) open frames.
#[test]
fn keylog_decrypts_with_independent_implementations() {
    use aes_gcm::aead::{AeadInOut, KeyInit};
    for suite in Suite::AUTHENTICATED {
        let dcfg = DroneConfig {
            keylog: true,
            rekey_after_frames: 2,
            ..DroneConfig::default()
        };
        let rcfg = ReceiverConfig {
            suites: vec![suite],
            keylog: true,
            ..ReceiverConfig::default()
        };
        let mut n = Net::new(dcfg, rcfg, 41);
        n.handshake();
        let msgs: Vec<Vec<u8>> = (0..5).map(|i| n.frame(&pixels(40, i))).collect();
        let mut lines: Vec<String> = Vec::new();
        while let Some(l) = n.drone.drain_keylog() {
            lines.push(format!("{l}"));
        }
        // Epoch 2 waits until the receiver acknowledged epoch 1 (nothing was delivered yet).
        assert_eq!(lines.len(), 2, "epochs 0 and 1");
        for (i, m) in msgs.iter().enumerate() {
            let h = FrameHeader::decode(m).unwrap();
            let line = lines
                .iter()
                .find(|l| l.split(' ').nth(2) == Some(&format!("{}", h.epoch)))
                .unwrap();
            let f: Vec<&str> = line.split(' ').collect();
            assert_eq!(f[3], suite.name());
            let (key, iv) = (hex(f[4]), hex(f[5]));
            let mut nonce: [u8; 12] = iv.try_into().unwrap();
            for (d, s) in nonce[4..].iter_mut().zip(h.sequence.to_be_bytes()) {
                *d ^= s;
            }
            let mut ct = m[36..76].to_vec();
            let tag = &m[76..92];
            match suite {
                Suite::ChaCha20Poly1305 => {
                    let key: [u8; 32] = key.try_into().unwrap();
                    chacha20poly1305::ChaCha20Poly1305::new(&key.into())
                        .decrypt_inout_detached(
                            &nonce.into(),
                            &m[..36],
                            ct.as_mut_slice().into(),
                            tag.try_into().unwrap(),
                        )
                        .unwrap();
                }
                _ => {
                    let key: [u8; 16] = key.try_into().unwrap();
                    aes_gcm::Aes128Gcm::new(&key.into())
                        .decrypt_inout_detached(
                            &nonce.into(),
                            &m[..36],
                            ct.as_mut_slice().into(),
                            tag.try_into().unwrap(),
                        )
                        .unwrap();
                }
            }
            assert_eq!(ct, pixels(40, i as u8));
        }
        // The receiver logs the same lines once it has the epochs.
        n.pump();
        for m in msgs {
            n.deliver_frame(m).unwrap();
        }
        let mut rlines: Vec<String> = Vec::new();
        while let Some(l) = n.rx.drain_keylog() {
            rlines.push(format!("{l}"));
        }
        assert_eq!(rlines, lines);
    }
}

#[test]
fn keylog_is_off_by_default() {
    let mut n = Net::with_suite(Suite::ChaCha20Poly1305, KexMode::X25519);
    let _ = n.frame(&pixels(8, 0));
    assert!(n.drone.drain_keylog().is_none());
    assert!(n.rx.drain_keylog().is_none());
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 16, ..ProptestConfig::default() })]
    /// No (key, nonce) pair is ever used twice for frames, over rekeys, new handshakes and drone
    /// restarts (a restarted drone even replays its own random numbers: the receiver's fresh
    /// ephemeral key still makes every session key new).
    #[test]
    fn nonces_never_repeat(sessions in proptest::collection::vec((1u64..12, 1u64..6, any::<bool>()), 1..5),
                           seed in any::<u64>()) {
        let mut used = BTreeSet::new();
        let mut rx_rng = TestRng::new(seed);
        let (d, r) = pair(&mut rx_rng);
        let mut rx = ReceiverSession::new(r, ReceiverConfig::default());
        let mut drone: Option<DroneSession> = None;
        for (frames, every, restart) in sessions {
            if restart || drone.is_none() {
                drone = Some(DroneSession::new(d.clone(), DroneConfig { keylog: true, rekey_after_frames: every, ..DroneConfig::default() }));
            }
            let drone = drone.as_mut().unwrap();
            // The drone's randomness restarts from the same seed on every restart.
            let mut d_rng = TestRng::new(7);
            let clock = || 0u64;
            rx.connect(&mut rx_rng, &clock).unwrap();
            let hello = rx.poll_transmit().unwrap();
            drone.handle_message(&mut Sequential, &mut d_rng, &clock, &hello).unwrap();
            let accept = drone.poll_transmit().unwrap();
            rx.handle_message(&mut Sequential, &mut rx_rng, &clock, accept).unwrap();
            let mut keys: Vec<String> = Vec::new();
            for i in 0..frames {
                let mut p = pixels(8, i as u8);
                let meta = FrameMeta { pixel_format: PixelFormat::GRAY8, width: 8, height: 1, capture_ns: 0 };
                let s = drone.seal_frame(&mut Sequential, &clock, meta, &mut p).unwrap();
                while let Some(l) = drone.drain_keylog() { keys.push(format!("{l}")); }
                while let Some(m) = drone.poll_transmit() {
                    // Deliver REKEYs so acks flow and epochs advance.
                    if let Ok(Some(_)) | Ok(None) = rx.handle_message(&mut Sequential, &mut rx_rng, &clock, m) {}
                    while let Some(a) = rx.poll_transmit() {
                        let _ = drone.handle_message(&mut Sequential, &mut d_rng, &clock, &a);
                    }
                }
                let h = FrameHeader::decode(&s.header).unwrap();
                let line = keys.iter().rev().find(|l| l.split(' ').nth(2) == Some(&format!("{}", h.epoch))).unwrap();
                let f: Vec<&str> = line.split(' ').collect();
                let mut nonce: [u8; 12] = hex(f[5]).try_into().unwrap();
                for (d, s) in nonce[4..].iter_mut().zip(h.sequence.to_be_bytes()) { *d ^= s; }
                prop_assert!(used.insert((hex(f[4]), nonce)), "key/nonce reused");
            }
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]
    /// Arbitrary messages (random bytes, or a real message with random bytes changed) never panic
    /// either session, and a real frame still gets through afterwards.
    #[test]
    fn sessions_total_on_arbitrary_messages(
        junk in proptest::collection::vec((proptest::collection::vec(any::<u8>(), 0..200), any::<u8>(), any::<usize>(), any::<u8>()), 1..20)
    ) {
        let mut n = Net::with_suite(Suite::ChaCha20Poly1305, KexMode::X25519);
        let real = n.frame(&pixels(32, 0));
        let clock = || 9u64;
        for (bytes, kind, pos, val) in junk {
            let mut m = match kind % 4 {
                0 => bytes,
                1 => { let mut r = real.clone(); if !r.is_empty() { let i = pos % r.len(); r[i] = val; } r }
                2 => { let mut b = vec![0x47, 0x53, 0x01, [0x01u8, 0x02, 0x03, 0x10, 0x20, 0x21, 0x22, 0x30][pos % 8]]; b.extend(bytes); b }
                _ => real[..pos % (real.len() + 1)].to_vec(),
            };
            let _ = n.rx.handle_message(&mut Sequential, &mut n.rng, &clock, m.clone());
            m.truncate(300);
            let _ = n.drone.handle_message(&mut Sequential, &mut n.rng, &clock, &m);
        }
        // The drone may have been re-handshaken by nothing (no valid HELLO can be forged), so it
        // is still established and the stream goes on.
        prop_assert!(n.drone.is_established());
        let next = n.frame(&pixels(32, 1));
        prop_assert!(n.deliver_frame(next).is_ok());
    }
}
