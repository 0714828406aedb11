//! Session tests on the host: round trip, tamper, replay, reorder, truncation, wrong key,
//! downgrade, rekeying, loss, key log, nonce uniqueness over rekeys, restarts, joins and leaves;
//! several receivers (the group tests at the end).

use super::*;
use alloc::vec::Vec;

use crate::cpx::{Function, Route, StreamDecoder, Target};
use crate::frame::FrameMeta;
use crate::handshake::{self, DronePolicy, HandshakeError, Identity};
use crate::handshake::{KexSet, SuiteSet, pair, pair_group};
use crate::replay::ReplayError;
use crate::suite::{KexMode, Suite};
use crate::test_util::{TestRng, hex};
use crate::wire::PixelFormat;
use crate::wire::{self, AlertCode, FrameHeader, MsgType, SessionId};
use alloc::collections::BTreeSet;
use alloc::format;
use alloc::string::String;
use alloc::vec;
use core::cell::Cell;
use gap_rust_cipher_s::Sequential;
use proptest::prelude::*;

mod attacks;

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
            ev.iter()
                .any(|e| matches!(e, ReceiverEvent::Established { .. })),
            "{ev:?}"
        );
        // The group key followed the ACCEPT and was acknowledged: frames can flow.
        assert!(
            ev.iter()
                .any(|e| matches!(e, ReceiverEvent::Rekeyed { .. })),
            "{ev:?}"
        );
        assert!(self.drone.is_established());
    }
    /// The drone loop's order: timers (rekey policy, resends), then seal a frame of `pixels`;
    /// returns the whole message (what the timers queued stays for `pump`).
    fn frame(&mut self, pixels: &[u8]) -> Vec<u8> {
        self.frame_with_state(pixels, None)
    }
    /// [`Self::frame`] with the drone's state record in the header.
    fn frame_with_state(
        &mut self,
        pixels: &[u8],
        state: Option<crate::state::StateRecord>,
    ) -> Vec<u8> {
        self.seal(
            PixelFormat::Grey8,
            8,
            (pixels.len() / 8) as u16,
            pixels,
            state,
            false,
        )
    }
    /// A frame of any format: `payload` is what is sealed (a coded picture for JPEG / JPEG-LS).
    fn frame_as(
        &mut self,
        format: PixelFormat,
        width: u16,
        height: u16,
        payload: &[u8],
    ) -> Vec<u8> {
        self.seal(format, width, height, payload, None, false)
    }
    /// A frame of `payload` with the drone's state record `state`, and `padded` (the padded
    /// flag: `payload` is then a padded payload).
    fn seal(
        &mut self,
        format: PixelFormat,
        width: u16,
        height: u16,
        payload: &[u8],
        state: Option<crate::state::StateRecord>,
        padded: bool,
    ) -> Vec<u8> {
        let now = self.now.get();
        self.drone
            .handle_timeout(&mut Sequential, &mut self.rng, &move || now);
        let meta = FrameMeta {
            padded,
            pixel_format: format,
            width,
            height,
            capture_ns: 42,
            state,
        };
        let mut p = payload.to_vec();
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
    // X25519 alone: HELLO = 26 (header, time) + 32 (e) + payload (1+2 suites +1 + 3 mode) + 16
    // tag + 16 MAC.
    assert_eq!(hello.len(), 26 + 32 + 7 + 16 + 16);
    // ACCEPT = 18 + 32 (e) + choice (suite, mode, boot counter u32, share length) + 16 tag.
    assert_eq!(accept.len(), 18 + 32 + 8 + 16);
    assert_eq!(rs.wire_bytes_sent, hello.len() as u64 + 4);
    let c = n.rx.counters();
    assert_eq!(
        (
            c.handshake_bytes_sent,
            c.handshake_bytes_received,
            c.handshake_ns
        ),
        (97, 74, 13_000_000)
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

/// A 64 x 48 picture with edges and texture (so its coded length depends on `seed`).
fn picture(seed: u8) -> Vec<u8> {
    (0..64 * 48)
        .map(|i| {
            let (x, y) = (i % 64, i / 64);
            let v = (x * 3 + y * 5) as u8 ^ if (x / 8 + y / 8) % 2 == 0 { seed } else { 0 };
            v.wrapping_add(((x * y) as u8).wrapping_mul(seed) >> 4)
        })
        .collect()
}

/// The picture coded as baseline JPEG (quality 75, 2 bands) and as JPEG-LS (2 bands).
fn coded(seed: u8) -> [(PixelFormat, Vec<u8>); 2] {
    let px = picture(seed);
    let spec = gapstream_jpeg::FrameSpec {
        width: 64,
        height: 48,
        quality: 75,
        bands: 2,
    };
    let mut jpeg = vec![0u8; spec.layout().unwrap().max_len()];
    let n = gapstream_jpeg::encode::<gapstream_jpeg::Portable>(&spec, &px, &mut jpeg).unwrap();
    jpeg.truncate(n);
    let plan = gapstream_jpegls::Plan::new(64, 48, gapstream_jpegls::Layout::Grey, 2).unwrap();
    let jls = gapstream_jpegls::encode_to_vec(&plan, &px).unwrap();
    [(PixelFormat::Jpeg, jpeg), (PixelFormat::JpegLs, jls)]
}

/// Compress, then seal: a coded frame goes through with its format and its own length (no
/// `width × height` assumption), the JPEG-LS one decodes bit-exact after opening.
#[test]
fn coded_frames_round_trip_with_their_format_and_length() {
    let mut n = Net::with_suite(Suite::ChaCha20Poly1305, KexMode::X25519);
    let mut lengths = Vec::new();
    for seed in [0u8, 7, 200] {
        for (format, payload) in coded(seed) {
            assert_ne!(payload.len(), 64 * 48);
            let m = n.frame_as(format, 64, 48, &payload);
            assert_eq!(m.len(), 36 + payload.len() + 16);
            let f = n.deliver_frame(m).unwrap();
            assert_eq!(PixelFormat::try_from(f.header.pixel_format), Ok(format));
            assert_eq!(f.header.payload_len as usize, payload.len());
            assert_eq!((f.header.width, f.header.height), (64, 48));
            assert_eq!(f.pixels(), &payload[..]);
            if format == PixelFormat::JpegLs {
                let img = gapstream_jpegls::decode(f.pixels()).unwrap();
                assert_eq!(img.samples, picture(seed));
            }
            lengths.push(payload.len());
        }
    }
    lengths.sort_unstable();
    lengths.dedup();
    assert!(lengths.len() >= 4, "variable lengths expected: {lengths:?}");
}

/// Every byte of a sealed JPEG and JPEG-LS frame flipped (header with its pixel format and
/// payload length, coded bytes, tag): each is refused and counted, the stream goes on.
#[test]
fn tamper_each_byte_of_coded_frames() {
    for suite in Suite::AUTHENTICATED {
        let mut n = Net::with_suite(suite, KexMode::X25519);
        for (format, payload) in coded(3) {
            let good = n.frame_as(format, 64, 48, &payload);
            let before = n.rx.counters();
            for i in 0..good.len() {
                let mut m = good.clone();
                m[i] ^= 0x01;
                let r = n.deliver(m);
                assert!(
                    r.is_err(),
                    "{suite} {format:?}: flipped byte {i} accepted: {r:?}"
                );
            }
            // A coded frame relabelled as another format (JPEG <-> JPEG-LS, or raw GRAY8) is a
            // tag failure: the format is authenticated.
            for other in [PixelFormat::Grey8, PixelFormat::Jpeg, PixelFormat::JpegLs] {
                if other != format {
                    let mut m = good.clone();
                    m[5] = other.code();
                    assert!(
                        matches!(n.deliver(m), Err(Rejected::TagFailure)),
                        "{format:?}"
                    );
                }
            }
            let c = n.rx.counters();
            assert!(c.tag_failures - before.tag_failures >= payload.len() as u64 + 16);
            assert_eq!(c.frames, before.frames);
            let f = n.deliver_frame(good).unwrap();
            assert_eq!(f.pixels(), &payload[..]);
        }
    }
}

/// A coded frame replayed is refused as a duplicate, also after later frames arrived.
#[test]
fn coded_frame_replay_is_rejected_and_counted() {
    let mut n = Net::with_suite(Suite::Aes128Gcm, KexMode::X25519);
    let [(jf, jpeg), (lf, jls)] = coded(9);
    let a = n.frame_as(jf, 64, 48, &jpeg);
    let b = n.frame_as(lf, 64, 48, &jls);
    n.deliver_frame(a.clone()).unwrap();
    assert_eq!(
        n.deliver(a.clone()).unwrap_err(),
        Rejected::Replay(ReplayError::Duplicate)
    );
    n.deliver_frame(b.clone()).unwrap();
    for m in [a, b] {
        assert_eq!(
            n.deliver(m).unwrap_err(),
            Rejected::Replay(ReplayError::Duplicate)
        );
    }
    assert_eq!(n.rx.counters().replays, 3);
    assert_eq!(n.rx.counters().frames, 2);
}

fn a_state_record() -> crate::state::StateRecord {
    use crate::state::{StateRecord, StateSample, quat};
    let sample = StateSample {
        stm32_us: 4_000_123,
        position_mm: [1500, -250, 1000],
        velocity_mm_s: [-120, 700, 3],
        accel_mm_s2: [-90, -15, 0],
        quat: quat::compress([0.0, 0.0, 0.38268343, 0.9238795]),
        rates_mrad_s: [1, -2, 785],
    };
    StateRecord::new(Some((sample, 41_990)), 42_000, 50_000)
}

/// The state record rides in the header, inside the associated data: delivered exactly as the
/// drone sealed it.
#[test]
fn state_record_is_delivered_with_its_frame() {
    for suite in Suite::ALL {
        let mut n = Net::with_suite(suite, KexMode::X25519);
        let rec = a_state_record();
        let px = pixels(48, 3);
        let m = n.frame_with_state(&px, Some(rec));
        assert_eq!(m.len(), 88 + 48 + suite.tag_len());
        assert_eq!(&m[10..12], &[1, 0], "flags: the state record follows");
        let f = n.deliver_frame(m).unwrap();
        assert_eq!(f.state(), Some(Ok(rec)), "{suite}");
        assert_eq!(f.pixels(), &px[..]);
        assert_eq!(f.clone().into_pixels(), px);
        // A frame without one still goes through, the record says nothing.
        let m = n.frame(&px);
        assert_eq!(m.len(), 36 + 48 + suite.tag_len());
        let f = n.deliver_frame(m).unwrap();
        assert_eq!(f.state(), None);
        assert_eq!(f.pixels(), &px[..]);
    }
}

/// Flipping any bit pattern of any byte of the state record in flight: the frame is refused by
/// its tag (the record is associated data), counted as a tag failure, and the stream goes on.
#[test]
fn a_flipped_byte_in_the_state_record_is_refused_by_the_tag() {
    for suite in Suite::AUTHENTICATED {
        let mut n = Net::with_suite(suite, KexMode::X25519);
        let rec = a_state_record();
        let good = n.frame_with_state(&pixels(48, 1), Some(rec));
        let mut refused = 0u64;
        for i in 36..88 {
            for flip in [0x01u8, 0x80, 0xFF] {
                let mut m = good.clone();
                m[i] ^= flip;
                let before = n.rx.counters().tag_failures;
                assert_eq!(
                    n.deliver(m).unwrap_err(),
                    Rejected::TagFailure,
                    "{suite}: state byte {} ^ {flip:#04x}",
                    i - 36
                );
                assert_eq!(n.rx.counters().tag_failures, before + 1);
                refused += 1;
            }
        }
        assert_eq!(refused, 52 * 3);
        assert_eq!(n.rx.counters().frames, 0);
        // Clearing the flag (cutting the record out) or setting it on a frame without one:
        // refused too, never delivered with a different state.
        let mut cut = good[..36].to_vec();
        cut[10] = 0;
        cut.extend_from_slice(&good[88..]);
        assert!(n.deliver(cut).is_err());
        // The untouched frame is delivered with its state; the next one too.
        assert_eq!(n.deliver_frame(good).unwrap().state(), Some(Ok(rec)));
        let next = n.frame_with_state(&pixels(48, 2), Some(rec));
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
    let Some(ReceiverEvent::AttemptFailed { error: e, .. }) = ev else {
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
        padded: false,
        suite: 0,
        pixel_format: PixelFormat::Grey8.code(),
        width: 1,
        height: 1,
        epoch: 0,
        sequence: 77,
        capture_ns: 0,
        payload_len: 1,
        state: None,
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
    for pos in [wire::HELLO_HEADER_LEN + 32, wire::HELLO_HEADER_LEN + 33] {
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
    let accept = accept.unwrap();
    let mut changed = accept.clone();
    changed[18 + 32] ^= Suite::ChaCha20Poly1305 as u8 ^ Suite::None as u8;
    assert_eq!(
        n.rx.handle_message(&mut Sequential, &mut n.rng, &clock, changed)
            .unwrap_err(),
        Rejected::BadAccept
    );
    assert_eq!(n.rx.counters().bad_accepts, 1);
    // Dropped: the drone's own ACCEPT still completes the handshake, with the suite it chose.
    assert!(matches!(
        n.rx.handle_message(&mut Sequential, &mut n.rng, &clock, accept)
            .unwrap(),
        Some(ReceiverEvent::Established {
            suite: Suite::ChaCha20Poly1305,
            ..
        })
    ));
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
        // The 5th frame of an epoch starts the next one (GROUP_KEY out); frames switch once the
        // receiver acknowledged it, so with the acknowledgement back before the next frame an
        // epoch carries 6 frames and no frame is lost.
        assert_eq!(f.header.epoch as u64, i / 6, "frame {i}");
        n.pump();
    }
    assert_eq!(n.rx.epoch(), Some(3));
    assert_eq!(
        n.drone.counters().rekeys_committed,
        4,
        "epoch 0 and three rekeys"
    );
    assert_eq!(n.rx.counters().rekeys, 3);
    assert_eq!(n.rx.counters().keys_received, 4);
    assert_eq!(n.rx.counters().lost_frames, 0);
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
    // Due: the next epoch's key goes out, this frame still uses epoch 0 ...
    let m = n.frame(&pixels(8, 0));
    assert_eq!(n.deliver_frame(m).unwrap().header.epoch, 0);
    n.pump();
    // ... and the next one the new epoch.
    let m = n.frame(&pixels(8, 0));
    assert_eq!(n.deliver_frame(m).unwrap().header.epoch, 1);
    // Receiver-requested rekey: starts at once.
    n.rx.request_rekey(&mut Sequential).unwrap();
    n.pump();
    let m = n.frame(&pixels(8, 0));
    assert_eq!(n.deliver_frame(m).unwrap().header.epoch, 2);
}

#[test]
fn lost_group_key_and_lost_ack_cost_no_frame() {
    let mut n = rekey_net(2);
    for i in 0..2 {
        let m = n.frame(&pixels(8, i));
        n.deliver_frame(m).unwrap();
    }
    // Frame 2 starts epoch 1; its GROUP_KEY is lost.
    let m = n.frame(&pixels(8, 2));
    let lost = n.drone.poll_transmit().unwrap();
    assert_eq!(lost[3], MsgType::GroupKey as u8);
    assert!(n.drone.poll_transmit().is_none());
    // Frames stay on epoch 0 until the receiver acknowledged epoch 1: nothing is lost.
    assert_eq!(n.deliver_frame(m).unwrap().header.epoch, 0);
    let m = n.frame(&pixels(8, 3));
    assert_eq!(n.deliver_frame(m).unwrap().header.epoch, 0);
    // The drone resends; this time the KEY_ACK is lost.
    n.advance(300_000_000);
    let m = n.frame(&pixels(8, 4));
    assert_eq!(n.drone.counters().key_retransmits, 1);
    let resent = n.drone.poll_transmit().unwrap();
    assert_eq!(
        n.deliver(resent).unwrap(),
        Some(ReceiverEvent::Rekeyed { epoch: 1 })
    );
    let ack = n.rx.poll_transmit().unwrap();
    assert_eq!(ack[3], MsgType::KeyAck as u8);
    assert_eq!(n.deliver_frame(m).unwrap().header.epoch, 0);
    // Resent again; the receiver acknowledges again; frames switch.
    n.advance(300_000_000);
    let m = n.frame(&pixels(8, 5));
    assert_eq!(n.deliver_frame(m).unwrap().header.epoch, 0);
    n.pump();
    assert_eq!(n.drone.counters().key_retransmits, 2);
    assert_eq!(n.drone.epoch(), Some(1));
    let m = n.frame(&pixels(8, 6));
    assert_eq!(n.deliver_frame(m).unwrap().header.epoch, 1);
    assert_eq!(n.rx.counters().lost_frames, 0);
    // The lost ACK, arriving late, is a replay.
    let now = n.now.get();
    assert_eq!(
        n.drone
            .handle_message(&mut Sequential, &mut n.rng, &move || now, &ack),
        Err(DroneError::ControlReplay)
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
    let e0: Vec<Vec<u8>> = (0..3).map(|i| n.frame(&pixels(8, i))).collect();
    n.pump();
    let e1 = n.frame(&pixels(8, 9));
    assert_eq!(FrameHeader::decode(&e1).unwrap().epoch, 1);
    n.deliver_frame(e1).unwrap();
    assert_eq!(n.rx.epoch(), Some(1));
    // Epoch 0 frames arriving late, within grace: accepted.
    n.deliver_frame(e0[0].clone()).unwrap();
    // After the grace window the epoch-0 key is wiped: refused.
    n.advance(200_000_000);
    let now = n.now.get();
    n.rx.handle_timeout(&mut Sequential, &mut n.rng, &move || now);
    assert!(matches!(
        n.deliver(e0[1].clone()).unwrap_err(),
        Rejected::BadEpoch {
            epoch: 0,
            current: 1
        }
    ));
}

#[test]
fn forged_epoch_numbers_are_refused() {
    let mut n = Net::with_suite(Suite::ChaCha20Poly1305, KexMode::X25519);
    let m = n.frame(&pixels(8, 0));
    n.deliver_frame(m).unwrap();
    for e in [1u8, 9] {
        let mut m = n.frame(&pixels(8, 0));
        m[12] = e; // an epoch whose group key the receiver was never given
        assert_eq!(
            n.deliver(m).unwrap_err(),
            Rejected::NoKey { epoch: e as u32 }
        );
    }
    assert_eq!(n.rx.epoch(), Some(0));
    assert_eq!(n.rx.counters().no_key, 2);
    let m = n.frame(&pixels(8, 0));
    n.deliver_frame(m).unwrap();
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
                padded: false,
                pixel_format: PixelFormat::Grey8,
                width: 324,
                height: 244,
                capture_ns: 7,
                state: None,
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
    assert!(matches!(
        ev,
        Some(DroneEvent::Left {
            reason: LeaveReason::Closed,
            ..
        })
    ));
    assert!(!n.drone.is_established());
    assert_eq!(n.drone.members(), 0);
    let mut p = [0u8; 4];
    let meta = FrameMeta {
        padded: false,
        pixel_format: PixelFormat::Grey8,
        width: 2,
        height: 2,
        capture_ns: 0,
        state: None,
    };
    assert_eq!(
        n.drone
            .seal_frame(&mut Sequential, &|| 0u64, meta, &mut p)
            .unwrap_err(),
        SealError::NotEstablished
    );
    n.advance(1_000_000_000);
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
        n.rx.handle_timeout(&mut Sequential, &mut n.rng, &late),
        Some(ReceiverEvent::HandshakeRetry { attempt: 2 })
    );
    let hello2 = n.rx.poll_transmit().unwrap();
    // The drone answers the first HELLO late, then the second (which replaces the first session,
    // never used, of the same receiver).
    let accept_of = |d: &mut DroneSession| {
        let mut a = None;
        while let Some(m) = d.poll_transmit() {
            if m[3] == MsgType::Accept as u8 {
                a = Some(m);
            }
        }
        a.unwrap()
    };
    n.drone
        .handle_message(&mut Sequential, &mut n.rng, &late, &hello1)
        .unwrap();
    let stale = accept_of(&mut n.drone);
    // A second later (one responder handshake per receiver and second).
    let later = || 4_000_000_000u64;
    let ev = n
        .drone
        .handle_message(&mut Sequential, &mut n.rng, &later, &hello2)
        .unwrap();
    assert!(matches!(
        ev,
        Some(DroneEvent::Established { rejoined: true, .. })
    ));
    // The first session stays a candidate until the receiver uses one of them.
    assert_eq!(n.drone.sessions().count(), 2);
    let fresh = accept_of(&mut n.drone);
    assert_eq!(
        n.rx.handle_message(&mut Sequential, &mut n.rng, &later, stale)
            .unwrap_err(),
        Rejected::StaleHandshake
    );
    let ev =
        n.rx.handle_message(&mut Sequential, &mut n.rng, &later, fresh)
            .unwrap();
    let Some(ReceiverEvent::Established { stats, .. }) = ev else {
        panic!("{ev:?}")
    };
    // Its KEEPALIVE confirms the second session: the first one goes.
    let ka_at = || 5_000_000_000u64;
    n.rx.handle_timeout(&mut Sequential, &mut n.rng, &ka_at);
    let ka = n.rx.poll_transmit().unwrap();
    n.drone
        .handle_message(&mut Sequential, &mut n.rng, &ka_at, &ka)
        .unwrap();
    assert_eq!(n.drone.sessions().count(), 1);
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
        // Epoch 1 was started (and logged) at frame 2; frames stay on epoch 0 until the receiver
        // acknowledges it (nothing was delivered yet).
        assert_eq!(lines.len(), 2, "epochs 0 and 1");
        assert!(msgs.iter().all(|m| m[12] == 0));
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

/// Frame (key, nonce) pairs from the drone's key log: every frame's key is looked up by its
/// epoch in the lines logged so far.
fn frame_key_nonce(lines: &[String], header: &[u8]) -> (Vec<u8>, [u8; 12]) {
    let h = FrameHeader::decode(header).unwrap();
    let line = lines
        .iter()
        .rev()
        .find(|l| l.split(' ').nth(2) == Some(&format!("{}", h.epoch)))
        .expect("a key-log line for the frame's epoch");
    let f: Vec<&str> = line.split(' ').collect();
    let mut nonce: [u8; 12] = hex(f[5]).try_into().unwrap();
    for (d, s) in nonce[4..].iter_mut().zip(h.sequence.to_be_bytes()) {
        *d ^= s;
    }
    (hex(f[4]), nonce)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 16, ..ProptestConfig::default() })]
    /// No (key, nonce) pair is ever used twice for frames, over rekeys, receivers joining and
    /// leaving, new handshakes and drone restarts — a restarted drone even replays its own random
    /// numbers: the group pool absorbs every handshake (whose hash covers the receivers' fresh
    /// ephemeral keys), so every group secret is new.
    #[test]
    fn nonces_never_repeat(steps in proptest::collection::vec((1u64..10, 1u64..6, any::<bool>(), 0u8..6), 1..6),
                           seed in any::<u64>()) {
        let mut used = BTreeSet::new();
        let mut rx_rng = TestRng::new(seed);
        let (d, rs) = pair_group(&mut rx_rng, 3);
        let mut rxs: Vec<ReceiverSession> = rs.into_iter().map(|r| ReceiverSession::new(r, ReceiverConfig::default())).collect();
        let mut drone: Option<(DroneSession, TestRng)> = None;
        let mut lines: Vec<String> = Vec::new();
        let clock = || 0u64;
        for (frames, every, restart, op) in steps {
            if restart || drone.is_none() {
                // The drone's randomness restarts from the same seed on every restart.
                let cfg = DroneConfig { keylog: true, rekey_after_frames: every, ..DroneConfig::default() };
                drone = Some((DroneSession::new(d.clone(), cfg), TestRng::new(7)));
                for rx in rxs.iter_mut() { rx.close(&mut Sequential); while rx.poll_transmit().is_some() {} }
            }
            let (drone, d_rng) = drone.as_mut().unwrap();
            // Membership: receiver op % 3 joins (or re-handshakes), or leaves (CLOSE).
            let who = (op % 3) as usize;
            if op < 3 || !rxs[who].is_established() {
                rxs[who].connect(&mut rx_rng, &clock).unwrap();
            } else {
                rxs[who].close(&mut Sequential);
            }
            // Moves every message until quiet (the bridge gives every drone message to everyone).
            let pump = |drone: &mut DroneSession, d_rng: &mut TestRng, rxs: &mut Vec<ReceiverSession>, rx_rng: &mut TestRng| loop {
                let mut moved = false;
                for rx in rxs.iter_mut() {
                    while let Some(m) = rx.poll_transmit() {
                        moved = true;
                        let _ = drone.handle_message(&mut Sequential, d_rng, &clock, &m);
                    }
                }
                while let Some(m) = drone.poll_transmit() {
                    moved = true;
                    for rx in rxs.iter_mut() {
                        let _ = rx.handle_message(&mut Sequential, rx_rng, &clock, m.clone());
                    }
                }
                if !moved { break; }
            };
            pump(drone, d_rng, &mut rxs, &mut rx_rng);
            for i in 0..frames {
                drone.handle_timeout(&mut Sequential, d_rng, &clock);
                while let Some(l) = drone.drain_keylog() { lines.push(format!("{l}")); }
                let mut p = pixels(8, i as u8);
                let meta = FrameMeta { pixel_format: PixelFormat::Grey8, width: 8, height: 1, capture_ns: 0, state: None, padded: false };
                match drone.seal_frame(&mut Sequential, &clock, meta, &mut p) {
                    Ok(s) => {
                        prop_assert!(drone.members() > 0);
                        prop_assert!(used.insert(frame_key_nonce(&lines, &s.header)), "key/nonce reused");
                    }
                    Err(e) => prop_assert_eq!((e, drone.members()), (SealError::NotEstablished, 0)),
                }
                pump(drone, d_rng, &mut rxs, &mut rx_rng);
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
                2 => { let mut b = vec![0x47, 0x53, 0x02, [0x01u8, 0x02, 0x03, 0x10, 0x20, 0x21, 0x22, 0x23, 0x30][pos % 9]]; b.extend(bytes); b }
                _ => real[..pos % (real.len() + 1)].to_vec(),
            };
            let _ = n.rx.handle_message(&mut Sequential, &mut n.rng, &clock, m.clone());
            m.truncate(300);
            let _ = n.drone.handle_message(&mut Sequential, &mut n.rng, &clock, &m);
        }
        // No valid HELLO or control message can be forged, so the drone still serves the receiver
        // and the stream goes on.
        prop_assert!(n.drone.is_established());
        let next = n.frame(&pixels(32, 1));
        prop_assert!(n.deliver_frame(next).is_ok());
    }
}

// ---------------------------------------------------------------------------------------------
// Several receivers: one drone paired with three receivers, the bridge giving every drone message
// to every receiver.

struct Group {
    drone: DroneSession,
    /// The drone's pairing (to restart it).
    drone_id: handshake::DroneIdentity,
    rxs: Vec<ReceiverSession>,
    /// Receivers whose messages reach the drone (a receiver that vanished stops talking).
    talking: Vec<bool>,
    /// Receivers that hear the drone (a departed receiver may go on listening to the broadcast).
    listening: Vec<bool>,
    rng: TestRng,
    now: Cell<u64>,
}

impl Group {
    fn new(n: usize, dcfg: DroneConfig, seed: u64) -> Group {
        let mut rng = TestRng::new(seed);
        let (d, rs) = pair_group(&mut rng, n);
        Group {
            drone: DroneSession::new(d.clone(), dcfg),
            drone_id: d,
            rxs: rs
                .into_iter()
                .map(|r| ReceiverSession::new(r, ReceiverConfig::default()))
                .collect(),
            talking: vec![true; n],
            listening: vec![true; n],
            rng,
            now: Cell::new(1_000),
        }
    }
    fn drone_identity(&self) -> handshake::DroneIdentity {
        self.drone_id.clone()
    }
    fn clock(&self) -> impl Fn() -> u64 + use<> {
        let now = self.now.get();
        move || now
    }
    /// Moves every queued message until quiet; returns what each receiver reported (and errors).
    #[allow(clippy::type_complexity)]
    fn pump(&mut self) -> Vec<(usize, Result<Option<ReceiverEvent>, Rejected>)> {
        let mut out = Vec::new();
        loop {
            let mut moved = false;
            for i in 0..self.rxs.len() {
                while let Some(m) = self.rxs[i].poll_transmit() {
                    moved = true;
                    if self.talking[i] {
                        let c = self.clock();
                        let _ = self
                            .drone
                            .handle_message(&mut Sequential, &mut self.rng, &c, &m);
                    }
                }
            }
            while let Some(m) = self.drone.poll_transmit() {
                moved = true;
                for i in 0..self.rxs.len() {
                    if self.listening[i] {
                        let c = self.clock();
                        let r = self.rxs[i].handle_message(
                            &mut Sequential,
                            &mut self.rng,
                            &c,
                            m.clone(),
                        );
                        out.push((i, r));
                    }
                }
            }
            if !moved {
                return out;
            }
        }
    }
    fn connect(&mut self, i: usize) {
        let c = self.clock();
        self.rxs[i].connect(&mut self.rng, &c).unwrap();
        let ev = self.pump();
        assert!(
            ev.iter()
                .any(|(j, e)| *j == i && matches!(e, Ok(Some(ReceiverEvent::Established { .. })))),
            "{ev:?}"
        );
        // Nobody gets an error from the others' handshake traffic.
        assert!(ev.iter().all(|(_, e)| e.is_ok()), "{ev:?}");
    }
    /// Drone timers, then a sealed frame (or the reason why not).
    fn frame(&mut self, px: &[u8]) -> Result<Vec<u8>, SealError> {
        let c = self.clock();
        self.drone
            .handle_timeout(&mut Sequential, &mut self.rng, &c);
        let meta = FrameMeta {
            padded: false,
            pixel_format: PixelFormat::Grey8,
            width: 8,
            height: (px.len() / 8) as u16,
            capture_ns: 42,
            state: None,
        };
        let mut p = px.to_vec();
        let s = self.drone.seal_frame(&mut Sequential, &c, meta, &mut p)?;
        let mut m = s.header.to_vec();
        m.extend_from_slice(&p);
        m.extend_from_slice(s.tag());
        Ok(m)
    }
    fn deliver(&mut self, i: usize, m: Vec<u8>) -> Result<Option<ReceiverEvent>, Rejected> {
        let c = self.clock();
        self.rxs[i].handle_message(&mut Sequential, &mut self.rng, &c, m)
    }
    /// Pixels receiver `i` got from `m`, or why not.
    fn open(&mut self, i: usize, m: &[u8]) -> Result<Vec<u8>, Rejected> {
        match self.deliver(i, m.to_vec())? {
            Some(ReceiverEvent::Frame(f)) => Ok(f.into_pixels()),
            other => panic!("expected a frame, got {other:?}"),
        }
    }
    /// Advances the time and runs every timer (talking receivers' keepalives included).
    fn tick(&mut self, ns: u64) {
        self.now.set(self.now.get() + ns);
        let c = self.clock();
        for i in 0..self.rxs.len() {
            if self.talking[i] {
                let _ = self.rxs[i].handle_timeout(&mut Sequential, &mut self.rng, &c);
            }
        }
        self.drone
            .handle_timeout(&mut Sequential, &mut self.rng, &c);
        self.pump();
    }
}

fn group3(dcfg: DroneConfig, seed: u64) -> Group {
    let mut g = Group::new(3, dcfg, seed);
    for i in 0..3 {
        g.connect(i);
    }
    assert_eq!(g.drone.members(), 3);
    g
}

#[test]
fn three_receivers_decrypt_the_same_frames() {
    for suite in [Suite::ChaCha20Poly1305, Suite::Aes128Gcm] {
        let mut g = Group::new(3, DroneConfig::default(), 51);
        for rx in &mut g.rxs {
            *rx = ReceiverSession::new(
                rx_identity(rx),
                ReceiverConfig {
                    suites: vec![suite],
                    ..ReceiverConfig::default()
                },
            );
        }
        for i in 0..3 {
            g.connect(i);
        }
        let sealed_before = g.drone.counters().frames_sealed;
        for k in 0..10u8 {
            let px = pixels(64, k);
            let m = g.frame(&px).unwrap();
            for i in 0..3 {
                assert_eq!(
                    g.open(i, &m).unwrap(),
                    px,
                    "{suite}: receiver {i}, frame {k}"
                );
            }
            g.pump();
        }
        // Sealed once per frame, for all three.
        assert_eq!(g.drone.counters().frames_sealed - sealed_before, 10);
        for rx in &g.rxs {
            let c = rx.counters();
            assert_eq!((c.frames, c.lost_frames, c.tag_failures), (10, 0, 0));
            assert_eq!(rx.suite(), Some(suite));
        }
    }
}

/// The identity of a receiver session (tests rebuild sessions with other configurations).
fn rx_identity(rx: &ReceiverSession) -> Identity {
    rx.id.clone()
}

#[test]
fn one_receiver_leaves_mid_run_the_others_continue_without_a_gap() {
    let mut g = group3(DroneConfig::default(), 52);
    let mut got: Vec<Vec<Vec<u8>>> = vec![Vec::new(); 3];
    let mut sent = Vec::new();
    for k in 0..30u8 {
        if k == 12 {
            // Receiver 2 leaves: its CLOSE makes the drone start a new epoch without it.
            g.rxs[2].close(&mut Sequential);
        }
        let px = pixels(32, k);
        let m = g.frame(&px).unwrap();
        sent.push(px);
        for (i, got) in got.iter_mut().enumerate() {
            if let Ok(p) = g.open(i, &m) {
                got.push(p);
            }
        }
        g.pump();
    }
    // The two that stayed got every frame, byte for byte, across the rekey.
    for (i, got) in got[..2].iter().enumerate() {
        assert_eq!(*got, sent, "receiver {i}");
        let c = g.rxs[i].counters();
        assert_eq!(
            (c.lost_frames, c.no_key, c.tag_failures),
            (0, 0, 0),
            "{c:?}"
        );
        assert_eq!(c.rekeys, 1);
    }
    assert_eq!(got[2].len(), 12);
    assert_eq!(g.drone.members(), 2);
    assert_eq!(
        g.drone.epoch(),
        Some(1 + 2),
        "epoch 0 + two joins + the leave"
    );
    assert_eq!(g.drone.counters().members_left, 1);
}

/// A departed receiver that keeps its keys and keeps listening to the broadcast (the worst case:
/// it left without CLOSE and is malicious) reads the current epoch until the rekey lands, and
/// nothing after.
#[test]
fn a_receiver_that_left_cannot_open_frames_of_the_next_epoch() {
    let dcfg = DroneConfig {
        member_timeout_ns: 3_000_000_000,
        ..DroneConfig::default()
    };
    let mut g = group3(dcfg, 53);
    let m = g.frame(&pixels(16, 0)).unwrap();
    for i in 0..3 {
        g.open(i, &m).unwrap();
    }
    // Receiver 2 stops talking (no KEEPALIVE, no CLOSE) but still hears everything.
    g.talking[2] = false;
    let mut before_rekey = 0;
    let mut t = 0;
    while g.drone.members() == 3 {
        g.tick(500_000_000);
        t += 1;
        assert!(t < 20, "the silent receiver was never dropped");
        // Until the drone notices, frames stay in the epoch receiver 2 holds: it reads them.
        let m = g.frame(&pixels(16, t)).unwrap();
        if g.open(2, &m).is_ok() {
            before_rekey += 1;
        }
        g.open(0, &m).unwrap();
        g.open(1, &m).unwrap();
    }
    assert!(before_rekey >= 4, "{before_rekey}");
    assert_eq!(g.drone.counters().members_timed_out, 1);
    // The rekey lands (receivers 0 and 1 acknowledge); from then on receiver 2 has no key.
    g.pump();
    let e = g.drone.epoch().unwrap();
    for k in 0..5 {
        let px = pixels(16, 100 + k);
        let m = g.frame(&px).unwrap();
        assert_eq!(FrameHeader::decode(&m).unwrap().epoch, e);
        assert_eq!(g.open(0, &m).unwrap(), px);
        assert_eq!(g.open(1, &m).unwrap(), px);
        assert_eq!(g.open(2, &m).unwrap_err(), Rejected::NoKey { epoch: e });
        g.pump();
    }
    // The new epoch's GROUP_KEYs went to the other two sessions only: receiver 2 ignored them.
    assert!(g.rxs[2].counters().not_for_us >= 2);
    assert_eq!(g.rxs[2].epoch(), Some(e - 1));
}

#[test]
fn a_message_addressed_to_receiver_a_is_ignored_by_b() {
    let mut g = Group::new(2, DroneConfig::default(), 54);
    g.connect(0);
    // (A reconnects below: at most one responder handshake per receiver and second.)
    g.tick(1_000_000_000);
    // B is handshaking while A's traffic goes by.
    let c = g.clock();
    g.rxs[1].connect(&mut g.rng, &c).unwrap();
    let hello_b = g.rxs[1].poll_transmit().unwrap();
    // A's ACCEPT (for A's HELLO) and an ALERT for A's hello id reach B: ignored, no error.
    let c = g.clock();
    g.rxs[0].connect(&mut g.rng, &c).unwrap();
    let hello_a = g.rxs[0].poll_transmit().unwrap();
    g.drone
        .handle_message(&mut Sequential, &mut g.rng, &c, &hello_a)
        .unwrap();
    let mut for_a = Vec::new();
    while let Some(m) = g.drone.poll_transmit() {
        for_a.push(m);
    }
    assert_eq!(for_a[0][3], MsgType::Accept as u8);
    let alert_a = wire::encode_alert(hello_a[4..12].try_into().unwrap(), AlertCode::BadHello);
    let nfu = g.rxs[1].counters().not_for_us;
    for m in for_a.iter().cloned().chain([alert_a.to_vec()]) {
        assert_eq!(g.deliver(1, m), Ok(None));
    }
    assert_eq!(g.rxs[1].counters().not_for_us - nfu, for_a.len() as u64 + 1);
    // B's own handshake is undisturbed.
    g.drone
        .handle_message(&mut Sequential, &mut g.rng, &c, &hello_b)
        .unwrap();
    for m in &for_a {
        g.deliver(0, m.clone()).unwrap();
    }
    g.pump();
    assert!(g.rxs[0].is_established() && g.rxs[1].is_established());
    // A's control messages (a GROUP_KEY resend, a KEEPALIVE answer) reach B: ignored too.
    let nfu = g.rxs[1].counters().not_for_us;
    g.tick(1_000_000_000); // keepalives out, answers back to everyone
    let c1 = g.rxs[1].counters();
    assert!(c1.not_for_us > nfu, "{c1:?}");
    assert_eq!(
        (c1.malformed, c1.control_rejected, c1.tag_failures),
        (0, 0, 0),
        "{c1:?}"
    );
    // And a CLOSE sealed for A does not close B.
    g.drone.close(&mut Sequential);
    let closes: Vec<Vec<u8>> = core::iter::from_fn(|| g.drone.poll_transmit()).collect();
    let session_a = g.rxs[0].session_id().unwrap();
    let close_a = closes
        .iter()
        .find(|m| wire::control_session(m) == Some(session_a))
        .unwrap()
        .clone();
    assert_eq!(g.deliver(1, close_a.clone()), Ok(None));
    assert!(g.rxs[1].is_established());
    assert_eq!(g.deliver(0, close_a), Ok(Some(ReceiverEvent::Closed)));
}

#[test]
fn a_new_hello_from_the_same_receiver_replaces_only_its_session() {
    let mut g = group3(DroneConfig::default(), 55);
    let epoch = g.drone.epoch();
    let rekeys = g.drone.counters().rekeys_started;
    let old_a = g.rxs[0].session_id().unwrap();
    // Receiver 0 reconnects (for example after a bridge restart): a new handshake (a second
    // later: one responder handshake per receiver and second).
    g.tick(1_000_000_000);
    g.connect(0);
    let new_a = g.rxs[0].session_id().unwrap();
    assert_ne!(old_a, new_a);
    // Same receiver: no rekey, the others are untouched, and the reconnected receiver reads the
    // current epoch at once.
    assert_eq!(g.drone.epoch(), epoch);
    assert_eq!(g.drone.counters().rekeys_started, rekeys);
    assert_eq!(g.drone.members(), 3);
    let px = pixels(24, 1);
    let m = g.frame(&px).unwrap();
    for i in 0..3 {
        assert_eq!(g.open(i, &m).unwrap(), px);
    }
    // Its new session is in use (the KEY_ACK confirmed it): the old one is gone.
    let ids: Vec<SessionId> = g.drone.sessions().map(|s| s.session).collect();
    assert!(ids.contains(&new_a) && !ids.contains(&old_a));
    assert_eq!(g.drone.counters().sessions_replaced, 1);
}

#[test]
fn joining_starts_a_new_epoch_the_newcomer_cannot_read_earlier_frames() {
    let mut g = Group::new(2, DroneConfig::default(), 56);
    g.connect(0);
    let early = g.frame(&pixels(16, 0)).unwrap();
    g.open(0, &early).unwrap();
    g.connect(1);
    // The newcomer holds only the new epoch's key; and the early frame was sealed before its
    // session began, which its GROUP_KEY's first sequence number tells it (refused before any key
    // is looked up).
    assert!(matches!(
        g.open(1, &early),
        Err(Rejected::Replay(ReplayError::BeforeSession))
    ));
    let mut relabelled = early.clone();
    relabelled[16..24].copy_from_slice(&1000u64.to_le_bytes());
    assert!(matches!(
        g.open(1, &relabelled),
        Err(Rejected::NoKey { epoch: 0 })
    ));
    let late = g.frame(&pixels(16, 1)).unwrap();
    assert!(FrameHeader::decode(&late).unwrap().epoch > FrameHeader::decode(&early).unwrap().epoch);
    g.open(0, &late).unwrap();
    g.open(1, &late).unwrap();
    assert!(matches!(
        g.open(1, &relabelled),
        Err(Rejected::BadEpoch { epoch: 0, .. })
    ));
}

#[test]
fn a_full_group_refuses_one_more_receiver_with_an_alert() {
    let dcfg = DroneConfig {
        max_receivers: 2,
        ..DroneConfig::default()
    };
    let mut g = Group::new(3, dcfg, 57);
    g.connect(0);
    g.connect(1);
    let c = g.clock();
    g.rxs[2].connect(&mut g.rng, &c).unwrap();
    let ev = g.pump();
    let refused = ev
        .iter()
        .find_map(|(i, e)| match e {
            Ok(Some(ReceiverEvent::AttemptFailed { error, .. })) if *i == 2 => Some(*error),
            _ => None,
        })
        .unwrap();
    assert_eq!(refused, HandshakeError::Refused(AlertCode::GroupFull as u8));
    assert!(format!("{refused}").contains("slot"), "{refused}");
    // A member leaving frees a slot.
    g.rxs[1].close(&mut Sequential);
    g.pump();
    g.connect(2);
    assert_eq!(g.drone.members(), 2);
}

/// A receiver that never acknowledges holds the switch back only for the commit timeout; the
/// others lose nothing.
#[test]
fn a_silent_receiver_delays_a_rekey_only_until_the_commit_timeout() {
    let dcfg = DroneConfig {
        rekey_after_frames: 3,
        rekey_retransmit_ns: 10_000_000_000,
        ..DroneConfig::default()
    };
    let mut g = group3(dcfg, 58);
    let e0 = g.drone.epoch().unwrap();
    g.talking[2] = false; // its KEY_ACKs never arrive
    for k in 0..4 {
        let m = g.frame(&pixels(8, k)).unwrap();
        for i in 0..3 {
            g.open(i, &m).unwrap();
        }
        g.pump();
    }
    assert_eq!(g.drone.pending_epoch(), Some(e0 + 1));
    assert_eq!(g.drone.epoch(), Some(e0));
    g.now.set(g.now.get() + 600_000_000);
    let m = g.frame(&pixels(8, 9)).unwrap();
    assert_eq!(FrameHeader::decode(&m).unwrap().epoch, e0 + 1);
    for i in 0..3 {
        g.open(i, &m).unwrap(); // receiver 2 got the key; only its ACK was lost
    }
    assert_eq!(g.rxs[0].counters().lost_frames, 0);
}

/// A replayed HELLO gets an ACCEPT and a group key nobody can read, but it never makes the drone
/// seal a frame: after a restart that replays the drone's randomness, the replayed HELLO alone
/// yields no frame (no receiver acknowledges), and next to a live receiver it disturbs nothing.
#[test]
fn a_replayed_hello_never_gets_a_frame_sealed_or_evicts_the_receiver() {
    let mut rng = TestRng::new(59);
    let (d, rs) = pair_group(&mut rng, 1);
    let mut rx = ReceiverSession::new(rs[0].clone(), ReceiverConfig::default());
    let clock = || 5u64;
    rx.connect(&mut rng, &clock).unwrap();
    let hello = rx.poll_transmit().unwrap();
    let run = |hello: &[u8]| {
        let mut drone = DroneSession::new(d.clone(), DroneConfig::default());
        let mut d_rng = TestRng::new(7); // the same "random" numbers on every boot
        drone
            .handle_message(&mut Sequential, &mut d_rng, &clock, hello)
            .unwrap();
        (drone, d_rng)
    };
    // Boot 1: the receiver completes the handshake and frames flow.
    let (mut drone, mut d_rng) = run(&hello);
    while let Some(m) = drone.poll_transmit() {
        rx.handle_message(&mut Sequential, &mut rng, &clock, m)
            .unwrap();
    }
    while let Some(m) = rx.poll_transmit() {
        drone
            .handle_message(&mut Sequential, &mut d_rng, &clock, &m)
            .unwrap();
    }
    assert!(drone.is_established());
    // Boot 2, same randomness, the attacker replays the HELLO: no frame is ever sealed.
    let (mut replayed, mut r_rng) = run(&hello);
    let meta = FrameMeta {
        padded: false,
        pixel_format: PixelFormat::Grey8,
        width: 1,
        height: 1,
        capture_ns: 0,
        state: None,
    };
    for _ in 0..3 {
        replayed.handle_timeout(&mut Sequential, &mut r_rng, &|| 10_000_000_000u64);
        assert_eq!(
            replayed
                .seal_frame(&mut Sequential, &clock, meta, &mut [0u8])
                .unwrap_err(),
            SealError::NotEstablished
        );
    }
    // Next to the live receiver (boot 1): the replay is refused (not newer than the HELLO the
    // drone accepted from that receiver), before any Diffie-Hellman.
    assert_eq!(
        drone
            .handle_message(&mut Sequential, &mut d_rng, &clock, &hello)
            .unwrap(),
        Some(DroneEvent::HelloRefused(HandshakeError::Replayed))
    );
    assert_eq!(drone.counters().responder_handshakes, 1);
    assert_eq!(drone.sessions().count(), 1);
}

/// An older HELLO of a live receiver, replayed after its newer one: refused before any
/// Diffie-Hellman (not newer than the HELLO accepted); the live session keeps working. (Replayed
/// to a restarted drone, which remembers no HELLO, it would make a candidate that never confirms:
/// `attack5_a_replayed_hello_cannot_give_the_group_an_unauthenticated_suite`.)
#[test]
fn a_replayed_older_hello_leaves_the_live_session_alone() {
    let mut g = Group::new(1, DroneConfig::default(), 60);
    let c = g.clock();
    g.rxs[0].connect(&mut g.rng, &c).unwrap();
    let old_hello = g.rxs[0].poll_transmit().unwrap();
    g.rxs[0].connect(&mut g.rng, &c).unwrap(); // a retry: the first HELLO is now stale
    g.pump();
    assert!(g.rxs[0].is_established());
    assert_eq!(
        g.drone
            .handle_message(&mut Sequential, &mut g.rng, &c, &old_hello)
            .unwrap(),
        Some(DroneEvent::HelloRefused(HandshakeError::Replayed))
    );
    g.pump();
    assert_eq!(g.drone.sessions().count(), 1);
    assert_eq!(g.drone.counters().hellos_replayed, 1);
    for k in 0..3 {
        let px = pixels(8, k);
        let m = g.frame(&px).unwrap();
        assert_eq!(g.open(0, &m).unwrap(), px);
    }
    // The candidate never confirms and is dropped after the member timeout; the receiver stays.
    for _ in 0..6 {
        g.tick(1_000_000_000);
    }
    assert_eq!(g.drone.sessions().count(), 1);
    assert_eq!(g.drone.counters().members_left, 0);
    let px = pixels(8, 9);
    let m = g.frame(&px).unwrap();
    assert_eq!(g.open(0, &m).unwrap(), px);
}

#[test]
fn keepalives_keep_both_ends_and_silence_ends_them() {
    let mut g = Group::new(1, DroneConfig::default(), 61);
    g.connect(0);
    for _ in 0..20 {
        g.tick(1_000_000_000);
    }
    assert!(g.rxs[0].is_established());
    assert_eq!(g.drone.members(), 1);
    // The drone goes away: the receiver gives the session up.
    g.listening[0] = false;
    g.talking[0] = false;
    let mut lost = false;
    for _ in 0..6 {
        g.now.set(g.now.get() + 1_000_000_000);
        let c = g.clock();
        lost |= g.rxs[0].handle_timeout(&mut Sequential, &mut g.rng, &c)
            == Some(ReceiverEvent::SessionLost);
    }
    assert!(lost && !g.rxs[0].is_established());
    // And the drone dropped the silent receiver: no group key is left.
    g.tick(0);
    assert_eq!(g.drone.members(), 0);
    assert!(!g.drone.is_established());
}

/// A KEEPALIVE carries the receiver's clock; the drone's answer echoes it and adds its own
/// clock: a two-way sample (ClockSample) on which the receiver puts the frames' capture times.
#[test]
fn a_keepalive_answer_is_a_two_way_clock_sample() {
    let mut n = Net::with_suite(Suite::ChaCha20Poly1305, KexMode::X25519);
    const DRONE_OFFSET: u64 = 5_000_000_000;
    n.advance(1_000_000_000);
    let t1 = n.now.get();
    let ev =
        n.rx.handle_timeout(&mut Sequential, &mut n.rng, &move || t1);
    assert_eq!(ev, None);
    let ka = n.rx.poll_transmit().expect("a KEEPALIVE is due");
    assert_eq!(ka[3], MsgType::Keepalive as u8);
    assert_eq!(ka.len(), 22 + 8 + 16, "its body is the receiver's time");
    // 3 ms on the way up, read on the drone's clock (5 s ahead), 4 ms back.
    n.advance(3_000_000);
    let at_drone = n.now.get() + DRONE_OFFSET;
    n.drone
        .handle_message(&mut Sequential, &mut n.rng, &move || at_drone, &ka)
        .unwrap();
    let answer = n.drone.poll_transmit().expect("the drone answers");
    assert_eq!(answer.len(), 22 + 16 + 16);
    n.advance(4_000_000);
    let t4 = n.now.get();
    let ev =
        n.rx.handle_message(&mut Sequential, &mut n.rng, &move || t4, answer.clone());
    assert_eq!(
        ev,
        Ok(Some(ReceiverEvent::ClockSample {
            sent_ns: t1,
            drone_ns: t1 + 3_000_000 + DRONE_OFFSET,
            received_ns: t1 + 7_000_000,
        }))
    );
    // Replayed, it is refused like every control message.
    assert_eq!(
        n.rx.handle_message(&mut Sequential, &mut n.rng, &move || t4, answer),
        Err(Rejected::ControlReplay)
    );
}

#[test]
fn a_newcomer_must_use_the_group_suite() {
    let mut g = Group::new(2, DroneConfig::default(), 62);
    g.connect(0); // ChaCha20-Poly1305
    let id = rx_identity(&g.rxs[1]);
    g.rxs[1] = ReceiverSession::new(
        id,
        ReceiverConfig {
            suites: vec![Suite::Aes128Gcm],
            ..ReceiverConfig::default()
        },
    );
    let c = g.clock();
    g.rxs[1].connect(&mut g.rng, &c).unwrap();
    let ev = g.pump();
    assert!(ev.iter().any(|(i, e)| *i == 1
        && matches!(
            e,
            Ok(Some(ReceiverEvent::AttemptFailed {
                error: HandshakeError::Refused(c),
                ..
            })) if *c == AlertCode::NoCommonSuite as u8
        )));
    assert_eq!(g.drone.members(), 1);
}

// ---------------------------------------------------------------------------------------------
// The findings of the security review, one test each (see docs/protocol.md, "Threat model and
// what is guaranteed").

/// Finding 1: frames recorded before a receiver's reconnect are replayed after it (the bridge only
/// has to close the receiver's connection; the new session starts with an empty replay window, and
/// the drone hands it the current epoch's key again). They must be rejected and counted, for a
/// reconnect of the same receiver process and for a restarted receiver process alike.
#[test]
fn finding1_replay_across_reconnect() {
    for restart_process in [false, true] {
        let mut g = Group::new(2, DroneConfig::default(), 70);
        g.connect(0);
        g.connect(1);
        let mut recorded = Vec::new();
        for k in 0..6 {
            let px = pixels(8, k);
            let m = g.frame(&px).unwrap();
            assert_eq!(g.open(0, &m).unwrap(), px);
            recorded.push(m);
        }
        let epoch = g.drone.epoch();
        g.tick(1_000_000_000);
        // Forced reconnect: a new HELLO of receiver 0 (its old link is gone).
        if restart_process {
            let id = rx_identity(&g.rxs[0]);
            g.rxs[0] = ReceiverSession::new(id, ReceiverConfig::default());
        }
        g.connect(0);
        g.tick(0);
        // The reconnect does not start a new epoch: the replays are of the current one.
        assert_eq!(g.drone.epoch(), epoch);
        let before = g.rxs[0].counters();
        for m in &recorded {
            let r = g.deliver(0, m.clone());
            assert!(
                matches!(r, Err(Rejected::Replay(_))),
                "restart {restart_process}: replayed frame accepted: {r:?}"
            );
        }
        let c = g.rxs[0].counters();
        assert_eq!(
            (c.replays + c.too_old) - (before.replays + before.too_old),
            recorded.len() as u64
        );
        assert_eq!(c.frames, before.frames);
        // The stream goes on for it and for the other receiver.
        let px = pixels(8, 99);
        let m = g.frame(&px).unwrap();
        assert_eq!(g.open(0, &m).unwrap(), px);
        assert_eq!(g.open(1, &m).unwrap(), px);
    }
}

/// Finding 2: a restarted drone whose randomness repeats exactly (always so on GVSOC; possible on
/// a deck), an attacker replaying the receiver's recorded HELLO *and* its recorded KEY_ACK. With
/// the boot counter advanced, the KEY_ACK does not open (the counter is in the authenticated
/// ACCEPT, hence in every session key, and in the ephemeral's seed): no frame is sealed, so no
/// key and nonce are used twice. The same replay against a drone whose counter did not advance
/// does get a frame sealed (what the counter prevents; the drone application refuses to stream
/// when it cannot advance it).
#[test]
fn finding2_restart_with_identical_randomness_and_replayed_hello_and_key_ack_seals_nothing() {
    let mut rng = TestRng::new(80);
    let (d, rs) = pair_group(&mut rng, 1);
    let mut rx = ReceiverSession::new(rs[0].clone(), ReceiverConfig::default());
    let clock = || 5u64;
    rx.connect(&mut rng, &clock).unwrap();
    let hello = rx.poll_transmit().unwrap();
    let boot = |n: u32| {
        let cfg = DroneConfig {
            boot_counter: n,
            ..DroneConfig::default()
        };
        // The same "random" numbers on every boot.
        (DroneSession::new(d.clone(), cfg), TestRng::new(7))
    };
    let meta = FrameMeta {
        padded: false,
        pixel_format: PixelFormat::Grey8,
        width: 1,
        height: 1,
        capture_ns: 0,
        state: None,
    };
    // Boot 1: the receiver handshakes; the attacker records the HELLO, ACCEPT and KEY_ACK.
    let (mut drone, mut d_rng) = boot(1);
    drone
        .handle_message(&mut Sequential, &mut d_rng, &clock, &hello)
        .unwrap();
    let accept1 = drone.poll_transmit().unwrap();
    rx.handle_message(&mut Sequential, &mut rng, &clock, accept1.clone())
        .unwrap();
    while let Some(m) = drone.poll_transmit() {
        rx.handle_message(&mut Sequential, &mut rng, &clock, m)
            .unwrap();
    }
    assert_eq!(rx.drone_boot(), Some(1));
    let key_ack = rx.poll_transmit().unwrap();
    drone
        .handle_message(&mut Sequential, &mut d_rng, &clock, &key_ack)
        .unwrap();
    assert!(drone.is_established());
    drone
        .seal_frame(&mut Sequential, &clock, meta, &mut [0u8])
        .unwrap();
    // Boot 2, identical randomness, counter advanced: the replayed HELLO opens (Noise message 1
    // is replayable) but the ACCEPT differs, and the replayed KEY_ACK does not open.
    let (mut again, mut a_rng) = boot(2);
    assert!(matches!(
        again.handle_message(&mut Sequential, &mut a_rng, &clock, &hello),
        Ok(Some(DroneEvent::Established { .. }))
    ));
    let accept2 = again.poll_transmit().unwrap();
    assert_ne!(accept2[18..50], accept1[18..50], "same drone ephemeral");
    assert!(matches!(
        again.handle_message(&mut Sequential, &mut a_rng, &clock, &key_ack),
        Err(DroneError::Control(_))
    ));
    for t in [10u64, 10_000_000_000] {
        again.handle_timeout(&mut Sequential, &mut a_rng, &|| t);
        assert_eq!(
            again
                .seal_frame(&mut Sequential, &|| t, meta, &mut [0u8])
                .unwrap_err(),
            SealError::NotEstablished
        );
    }
    assert_eq!(again.counters().frames_sealed, 0);
    // Without the advance (the same counter again) the replay would get a frame sealed under
    // boot 1's key and nonce: this is what the counter prevents.
    let (mut stale, mut s_rng) = boot(1);
    stale
        .handle_message(&mut Sequential, &mut s_rng, &clock, &hello)
        .unwrap();
    assert_eq!(stale.poll_transmit().unwrap(), accept1);
    stale
        .handle_message(&mut Sequential, &mut s_rng, &clock, &key_ack)
        .unwrap();
    assert!(
        stale
            .seal_frame(&mut Sequential, &clock, meta, &mut [0u8])
            .is_ok()
    );
}

/// Finding 4: an unauthenticated ALERT ends only that attempt: it is counted, the receiver retries
/// with a growing backoff, and it never gives up (no `HandshakeFailed`) for a remote cause; a
/// forged ALERT followed by the drone's real ACCEPT still completes the attempt. An ACCEPT with one
/// flipped bit does not even end the attempt (attack 2 of the second review): it is dropped and
/// counted, and the drone's real ACCEPT completes it.
#[test]
fn finding4_forged_alert_ends_only_the_attempt_and_a_bad_accept_nothing() {
    let mut n = Net::new(DroneConfig::default(), ReceiverConfig::default(), 90);
    let t0 = n.now.get();
    n.rx.connect(&mut n.rng, &move || t0).unwrap();
    let hello = n.rx.poll_transmit().unwrap();
    let hello_id: [u8; 8] = hello[4..12].try_into().unwrap();
    // The attacker answers first with a forged ALERT.
    let forged = wire::encode_alert(hello_id, AlertCode::AuthenticationFailed).to_vec();
    let ev = n.deliver(forged).unwrap();
    assert!(
        matches!(
            ev,
            Some(ReceiverEvent::AttemptFailed {
                error: HandshakeError::Refused(1),
                retry_in_ns: 250_000_000
            })
        ),
        "{ev:?}"
    );
    assert_eq!(n.rx.counters().handshake_failures, 1);
    // The drone's real ACCEPT (and group key) still complete that attempt.
    let now = n.now.get();
    n.drone
        .handle_message(&mut Sequential, &mut n.rng, &move || now, &hello)
        .unwrap();
    let ev = n.pump();
    assert!(
        ev.iter()
            .any(|e| matches!(e, ReceiverEvent::Established { .. })),
        "{ev:?}"
    );
    let m = n.frame(&pixels(8, 1));
    n.deliver_frame(m).unwrap();

    // A new receiver whose HELLOs all meet a forged ALERT: every attempt is counted and retried
    // after 250 ms, 500 ms, 1 s, ... (at most 8 s); never a final failure.
    let mut n = Net::new(DroneConfig::default(), ReceiverConfig::default(), 91);
    let t0 = n.now.get();
    n.rx.connect(&mut n.rng, &move || t0).unwrap();
    let mut backoffs = Vec::new();
    for attempt in 1..=7u32 {
        let hello = n.rx.poll_transmit().expect("a HELLO per attempt");
        let forged = wire::encode_alert(hello[4..12].try_into().unwrap(), AlertCode::BadHello);
        match n.deliver(forged.to_vec()).unwrap() {
            Some(ReceiverEvent::AttemptFailed {
                error: HandshakeError::Refused(4),
                retry_in_ns,
            }) => backoffs.push(retry_in_ns),
            other => panic!("attempt {attempt}: {other:?}"),
        }
        assert!(!n.rx.is_established() && !n.rx.is_closed());
        assert_eq!(n.rx.counters().handshake_failures, attempt as u64);
        // Nothing goes out before the backoff is over; then a fresh HELLO.
        let wait = *backoffs.last().unwrap();
        n.advance(wait - 1);
        let now = n.now.get();
        assert_eq!(
            n.rx.handle_timeout(&mut Sequential, &mut n.rng, &move || now),
            None
        );
        assert!(n.rx.poll_transmit().is_none());
        n.advance(1);
        let now = n.now.get();
        assert_eq!(
            n.rx.handle_timeout(&mut Sequential, &mut n.rng, &move || now),
            Some(ReceiverEvent::HandshakeRetry {
                attempt: attempt + 1
            })
        );
    }
    assert_eq!(
        backoffs,
        [
            250_000_000,
            500_000_000,
            1_000_000_000,
            2_000_000_000,
            4_000_000_000,
            8_000_000_000,
            8_000_000_000
        ]
    );
    // The drone's ACCEPT, after an altered copy of it: the altered one is dropped (counted, the
    // attempt untouched), the real one completes the handshake.
    let hello = n.rx.poll_transmit().unwrap();
    let id = n.rx.session_id();
    let now = n.now.get();
    n.drone
        .handle_message(&mut Sequential, &mut n.rng, &move || now, &hello)
        .unwrap();
    let accept = n.drone.poll_transmit().unwrap();
    for i in [20, 40, accept.len() - 1] {
        let mut altered = accept.clone();
        altered[i] ^= 0x01;
        assert_eq!(n.deliver(altered).unwrap_err(), Rejected::BadAccept);
        assert_eq!(n.rx.session_id(), id);
    }
    assert_eq!(n.rx.counters().bad_accepts, 3);
    assert_eq!(n.rx.counters().handshake_failures, 7);
    assert!(matches!(
        n.deliver(accept).unwrap(),
        Some(ReceiverEvent::Established { .. })
    ));
    n.pump();
    let m = n.frame(&pixels(8, 2));
    n.deliver_frame(m).unwrap();
}

/// Finding 6: the receiver's control-message replay check had no test (removing it broke
/// nothing). A replayed GROUP_KEY and replayed KEEPALIVEs of the drone are refused and counted,
/// and replaying the drone's KEEPALIVE does not keep a session alive whose drone is gone.
#[test]
fn finding6_receiver_refuses_replayed_control_messages() {
    let mut n = Net::new(DroneConfig::default(), ReceiverConfig::default(), 95);
    let now = n.now.get();
    n.rx.connect(&mut n.rng, &move || now).unwrap();
    let hello = n.rx.poll_transmit().unwrap();
    n.drone
        .handle_message(&mut Sequential, &mut n.rng, &move || now, &hello)
        .unwrap();
    let accept = n.drone.poll_transmit().unwrap();
    let group_key = n.drone.poll_transmit().unwrap();
    n.deliver(accept).unwrap();
    assert_eq!(
        n.deliver(group_key.clone()).unwrap(),
        Some(ReceiverEvent::Rekeyed { epoch: 0 })
    );
    n.pump();
    assert!(n.drone.is_established());
    assert_eq!(n.deliver(group_key).unwrap_err(), Rejected::ControlReplay);
    assert_eq!(n.rx.counters().control_rejected, 1);
    // One KEEPALIVE round trip; the attacker records the drone's answer.
    n.advance(1_000_000_000);
    let now = n.now.get();
    n.rx.handle_timeout(&mut Sequential, &mut n.rng, &move || now);
    let ka = n.rx.poll_transmit().unwrap();
    n.drone
        .handle_message(&mut Sequential, &mut n.rng, &move || now, &ka)
        .unwrap();
    let answer = n.drone.poll_transmit().unwrap();
    assert!(matches!(
        n.deliver(answer.clone()).unwrap(),
        Some(ReceiverEvent::ClockSample { .. })
    ));
    // The drone goes away; the attacker replays its KEEPALIVE every second.
    let mut replays = 0;
    while n.rx.is_established() {
        assert!(replays < 6, "replayed KEEPALIVEs kept a dead session alive");
        n.advance(1_000_000_000);
        assert_eq!(
            n.deliver(answer.clone()).unwrap_err(),
            Rejected::ControlReplay
        );
        replays += 1;
        let now = n.now.get();
        let _ =
            n.rx.handle_timeout(&mut Sequential, &mut n.rng, &move || now);
        while n.rx.poll_transmit().is_some() {}
    }
    // Silent for the session timeout (5 s after the last real message): lost.
    assert_eq!(replays, 5);
    assert_eq!(n.rx.counters().sessions_lost, 1);
    assert_eq!(n.rx.counters().control_rejected, 1 + replays);
}

/// Length-hiding padding: a padded frame opens to exactly the coded bytes; one whose padding is
/// malformed (sealed so by a faulty drone under an AEAD suite, or a flipped bit under an
/// unauthenticated suite) is refused as `Rejected::Padding`, counted as malformed, with no panic,
/// and the stream goes on.
#[test]
fn padded_frames_open_to_the_coded_bytes_and_bad_padding_is_refused() {
    use crate::padding::{self, Padding, PaddingError};
    for suite in Suite::ALL {
        let mut n = Net::with_suite(suite, KexMode::X25519);
        let coded = pixels(1000, 3);
        let mut p = coded.clone();
        assert!(padding::pad(&mut p, Padding::Padme, 324 * 244));
        assert_eq!(p.len(), 1024);
        let m = n.seal(PixelFormat::Jpeg, 324, 244, &p, None, true);
        assert_eq!(m.len(), 36 + 1024 + suite.tag_len());
        let f = n.deliver_frame(m).unwrap();
        assert_eq!(f.pixels(), &coded[..]);
        assert!(f.header.padded);
        assert_eq!(f.header.payload_len, 1000);

        // A faulty sealer: well-sealed payloads whose padding is wrong.
        let mut nonzero = p.clone();
        nonzero[1010] = 9;
        let mut long = p.clone();
        long[1020..].copy_from_slice(&1021u32.to_le_bytes());
        let cases = [
            (nonzero, PaddingError::NonZero { at: 1010 }),
            (
                long,
                PaddingError::LengthOutOfRange {
                    claimed: 1021,
                    max: 1020,
                },
            ),
            (vec![1, 2, 3], PaddingError::TooShort { len: 3 }),
        ];
        for (bad, e) in cases {
            let before = n.rx.counters().malformed;
            let m = n.seal(PixelFormat::Jpeg, 324, 244, &bad, None, true);
            assert_eq!(n.deliver(m).unwrap_err(), Rejected::Padding(e), "{suite}");
            assert_eq!(n.rx.counters().malformed, before + 1);
        }
        // On the wire: a flipped bit in the padding is caught by the tag, or (unauthenticated
        // suites) by the padding check.
        let mut m = n.seal(PixelFormat::Jpeg, 324, 244, &p, None, true);
        m[36 + 1005] ^= 0x40;
        let e = n.deliver(m).unwrap_err();
        if suite.is_authenticated() {
            assert_eq!(e, Rejected::TagFailure);
        } else {
            assert_eq!(e, Rejected::Padding(PaddingError::NonZero { at: 1005 }));
        }
        // An unpadded frame of the same bytes keeps them all; the stream goes on.
        let m = n.frame_as(PixelFormat::Jpeg, 324, 244, &p);
        let f = n.deliver_frame(m).unwrap();
        assert_eq!(f.pixels(), &p[..]);
        let m = n.seal(PixelFormat::Jpeg, 324, 244, &p, None, true);
        let f = n.deliver_frame(m).unwrap();
        assert_eq!(f.pixels(), &coded[..]);
        // With the drone's state record too (an 88-byte header): the padding still comes off.
        let rec = crate::state::StateRecord::new(
            Some((
                crate::state::StateSample {
                    stm32_us: 1,
                    ..Default::default()
                },
                10,
            )),
            20,
            50_000,
        );
        let m = n.seal(PixelFormat::Jpeg, 324, 244, &p, Some(rec), true);
        assert_eq!(&m[10..12], &[3, 0]);
        let f = n.deliver_frame(m).unwrap();
        assert_eq!(f.pixels(), &coded[..]);
        assert_eq!(f.header.state_record(), Some(Ok(rec)));
    }
}

/// SET_QUALITY: the receiver's request reaches the drone as `QualityRequested` on the
/// authenticated control channel; a quality outside 1..=100 is refused by both ends (the drone
/// counts it and goes on), a replayed request is refused, a tampered one fails its tag.
#[test]
fn set_quality_reaches_the_drone_and_bad_or_replayed_requests_are_refused() {
    let mut n = Net::with_suite(Suite::ChaCha20Poly1305, KexMode::X25519);
    let now = n.now.get();
    assert!(n.rx.request_quality(&mut Sequential, 0).is_err());
    assert!(n.rx.request_quality(&mut Sequential, 101).is_err());
    n.rx.request_quality(&mut Sequential, 40).unwrap();
    let m = n.rx.poll_transmit().unwrap();
    assert_eq!(&m[..4], &[0x47, 0x53, 0x03, 0x24]);
    let ev = n
        .drone
        .handle_message(&mut Sequential, &mut n.rng, &move || now, &m)
        .unwrap();
    let session = match ev {
        Some(DroneEvent::QualityRequested { session, quality }) => {
            assert_eq!(quality, 40);
            session
        }
        other => panic!("{other:?}"),
    };
    // The same message again: a replay.
    assert!(
        n.drone
            .handle_message(&mut Sequential, &mut n.rng, &move || now, &m)
            .is_err()
    );
    // A flipped body byte: the tag fails.
    n.rx.request_quality(&mut Sequential, 90).unwrap();
    let mut t = n.rx.poll_transmit().unwrap();
    t[22] ^= 1;
    assert!(
        n.drone
            .handle_message(&mut Sequential, &mut n.rng, &move || now, &t)
            .is_err()
    );
    // Quality 0 and a two-byte body, well sealed under the session's key (a faulty receiver):
    // refused as BadControl and counted; the next good request still works.
    let keys = n.rx.r2d_control_key().unwrap();
    use super::common::control;
    let mut seq = 10;
    for body in [&[0u8][..], &[50, 50][..]] {
        let m = control(
            &mut Sequential,
            &keys,
            MsgType::SetQuality,
            session,
            &mut seq,
            body,
        )
        .unwrap();
        let before = n.drone.counters().messages_rejected;
        assert_eq!(
            n.drone
                .handle_message(&mut Sequential, &mut n.rng, &move || now, &m)
                .unwrap_err(),
            DroneError::BadControl
        );
        assert_eq!(n.drone.counters().messages_rejected, before + 1);
    }
    let m = control(
        &mut Sequential,
        &keys,
        MsgType::SetQuality,
        session,
        &mut seq,
        &[100],
    )
    .unwrap();
    assert_eq!(
        n.drone
            .handle_message(&mut Sequential, &mut n.rng, &move || now, &m)
            .unwrap(),
        Some(DroneEvent::QualityRequested {
            session,
            quality: 100
        })
    );
}

/// A receiver paired to watch only (`watcher_public=`) gets the group key and the frames like
/// the others, but the drone refuses its SET_QUALITY (named, counted, its session goes on); the
/// leader's request still reaches the drone.
#[test]
fn a_watch_only_receiver_cannot_set_the_quality() {
    let mut g = Group::new(2, DroneConfig::default(), 58);
    g.drone_id.watch_only = 0b10;
    let text = g.drone_id.to_pairing_text();
    assert_eq!(text.matches("watcher_public=").count(), 1, "{text}");
    let reread = handshake::DroneIdentity::from_pairing_text(&text).unwrap();
    assert_eq!((reread.watch_only, reread.receivers.len()), (0b10, 2));
    g.drone = DroneSession::new(reread, DroneConfig::default());
    g.connect(0);
    g.connect(1);
    g.rxs[1].request_quality(&mut Sequential, 30).unwrap();
    let m = g.rxs[1].poll_transmit().unwrap();
    let before = g.drone.counters().messages_rejected;
    let c = g.clock();
    let r = g.drone.handle_message(&mut Sequential, &mut g.rng, &c, &m);
    assert_eq!(r, Err(DroneError::NotPermitted(MsgType::SetQuality)));
    assert!(alloc::format!("{}", r.unwrap_err()).contains("watch only"));
    assert_eq!(g.drone.counters().messages_rejected, before + 1);
    g.rxs[0].request_quality(&mut Sequential, 60).unwrap();
    let m = g.rxs[0].poll_transmit().unwrap();
    assert!(matches!(
        g.drone.handle_message(&mut Sequential, &mut g.rng, &c, &m),
        Ok(Some(DroneEvent::QualityRequested { quality: 60, .. }))
    ));
    assert_eq!(g.drone.members(), 2);
    let f = g.frame(&[7; 64]).unwrap();
    assert_eq!(g.open(0, &f).unwrap(), vec![7; 64]);
    assert_eq!(g.open(1, &f).unwrap(), vec![7; 64]);
}
