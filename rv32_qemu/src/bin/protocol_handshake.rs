//! gapstream_protocol on rv32: full Noise_KK handshakes (drone and receiver in one program) in the
//! X25519 and P-256 modes, the group key (GROUP_KEY / KEY_ACK), one frame of every suite, every
//! message as CPX bytes from one `Connection` to the other (DroneConnection <-> ReceiverConnection),
//! tamper and replay rejection, and the drone side of the RSA-OAEP
//! mode checked byte-for-byte against the ACCEPT the host makes from the same inputs
//! (`gapstream_protocol/testdata/rv32_rsa_accept.hex`; the host test completes that handshake).
#![no_std]
#![no_main]

extern crate alloc;

use alloc::vec::Vec;
use gapstream_protocol::connection::Incoming;
use gapstream_protocol::cpx::{MAX_WIRE_PACKET, WIRE_OVERHEAD};
use gapstream_protocol::frame::FrameMeta;
use gapstream_protocol::handshake::{
    DronePolicy, HelloMacKey, KexSet, Offer, ReceiverHandshake, SuiteSet, respond,
};
use gapstream_protocol::wire::PixelFormat;
use gapstream_protocol::{
    DroneConfig, DroneConnection, DroneEvent, Identity, KexMode, ReceiverConfig,
    ReceiverConnection, ReceiverEvent, Rejected, Sequential, StaticSecret, Suite,
};
use rv32_qemu::println;

use gapstream_protocol::test_rng::TestRng;

fn identities() -> (Identity, Identity) {
    let d = StaticSecret::from_bytes([0xD1; 32]);
    let r = StaticSecret::from_bytes([0x2E; 32]);
    (
        Identity {
            peer_public: r.public(),
            local: d.clone(),
        },
        Identity {
            peer_public: d.public(),
            local: r,
        },
    )
}

fn hex(s: &str) -> Vec<u8> {
    let s = s.trim().as_bytes();
    s.chunks(2)
        .map(|c| u8::from_str_radix(core::str::from_utf8(c).unwrap(), 16).unwrap())
        .collect()
}

const RSA_TEST_N: &str = include_str!("../../../gapstream_protocol/testdata/rsa_test_n.hex");
const GOLDEN_RSA_ACCEPT: &str =
    include_str!("../../../gapstream_protocol/testdata/rv32_rsa_accept.hex");

fn now() -> u64 {
    rv32_qemu::instret()
}

/// Everything a connection queued, as CPX bytes.
fn wire_of(next: &mut dyn FnMut() -> Option<Vec<u8>>) -> Vec<u8> {
    let mut w = Vec::new();
    while let Some(p) = next() {
        w.extend_from_slice(&p);
    }
    w
}

/// Handshake + one 324x244 frame, every message as CPX packets of `packet` bytes between a
/// drone connection and a receiver connection.
fn session(suite: Suite, mode: KexMode, packet: usize, seed: u64) -> Result<(), &'static str> {
    let (d, r) = identities();
    let mut rng = TestRng::new(seed);
    let dcfg = DroneConfig {
        policy: DronePolicy {
            suites: SuiteSet::all(),
            modes: KexSet::all(),
        },
        packet_payload: packet,
        ..DroneConfig::default()
    };
    let mut drone = DroneConnection::new(d, dcfg).map_err(|_| "drone packet size")?;
    let rcfg = ReceiverConfig {
        suites: alloc::vec![suite],
        modes: alloc::vec![mode],
        packet_payload: packet,
        ..ReceiverConfig::default()
    };
    let mut rx = ReceiverConnection::new(r, rcfg).map_err(|_| "receiver packet size")?;
    let k = &mut Sequential;
    // Anything but the protocol's own packets on these clean pipes is a failure.
    let mut stray = 0;
    rx.connect(&mut rng, &now).map_err(|_| "connect failed")?;
    let hello = wire_of(&mut || rx.poll_transmit().map(<[u8]>::to_vec));
    drone.read_stream(&hello, |i| {
        stray += usize::from(!matches!(i, Incoming::Message { .. }))
    });
    let ev = drone
        .process_message(k, &mut rng, &now)
        .map_err(|_| "drone rejected HELLO")?;
    let Some(DroneEvent::Established { stats: ds, .. }) = ev else {
        return Err("drone not established");
    };
    // ACCEPT, then the group key; the receiver acknowledges it and frames can flow.
    let down = wire_of(&mut || drone.poll_transmit().map(<[u8]>::to_vec));
    rx.read_stream(&down, |i| {
        stray += usize::from(!matches!(i, Incoming::Message { .. }))
    });
    let ev = rx
        .process_message(k, &mut rng, &now)
        .map_err(|_| "receiver rejected ACCEPT")?;
    let Some(ReceiverEvent::Established { stats: rs, .. }) = ev else {
        return Err("receiver not established");
    };
    if (rs.suite, rs.mode) != (suite, mode) {
        return Err("negotiated the wrong suite or mode");
    }
    if !matches!(
        rx.process_message(k, &mut rng, &now),
        Ok(Some(ReceiverEvent::Rekeyed { epoch: 0 }))
    ) {
        return Err("receiver rejected GROUP_KEY");
    }
    let ack = wire_of(&mut || rx.poll_transmit().map(<[u8]>::to_vec));
    drone.read_stream(&ack, |i| {
        stray += usize::from(!matches!(i, Incoming::Message { .. }))
    });
    drone
        .process_message(k, &mut rng, &now)
        .map_err(|_| "drone rejected KEY_ACK")?;
    if !drone.session().is_established() {
        return Err("drone did not start epoch 0");
    }
    // One frame through CPX.
    let pixels: Vec<u8> = (0..324 * 244u32)
        .map(|i| (i * 13 + seed as u32) as u8)
        .collect();
    let mut payload = pixels.clone();
    let meta = FrameMeta {
        pixel_format: PixelFormat::Grey8,
        width: 324,
        height: 244,
        capture_ns: 5,
        state: None,
    };
    let sealed = drone
        .seal_frame(k, &now, meta, &mut payload)
        .map_err(|_| "seal failed")?;
    if suite != Suite::None && payload == pixels {
        return Err("payload not encrypted");
    }
    // What the session queued first (nothing here), then the frame, cut in our own buffer.
    let mut wire = Vec::new();
    let mut buf = [0u8; MAX_WIRE_PACKET];
    while let Some(mut m) = drone.poll_message() {
        while let Some(n) = m.next_packet(&mut buf) {
            wire.extend_from_slice(&buf[..n.map_err(|_| "packet")?]);
        }
    }
    let mut f = drone.frame_packetizer(&sealed, &payload);
    while let Some(n) = f.next_packet(&mut buf) {
        wire.extend_from_slice(&buf[..n.map_err(|_| "packet")?]);
    }
    // Tamper: a flipped payload byte (message byte 1000, in its packet) is a tag failure for the
    // AEAD suites.
    if suite.is_authenticated() {
        let mut bad = wire.clone();
        bad[1000 / packet * (WIRE_OVERHEAD + packet) + WIRE_OVERHEAD + 1000 % packet] ^= 1;
        rx.read_stream(&bad, |i| {
            stray += usize::from(!matches!(i, Incoming::Message { .. }))
        });
        if rx.process_message(k, &mut rng, &now) != Err(Rejected::TagFailure) {
            return Err("tampered frame not rejected");
        }
    }
    rx.read_stream(&wire, |i| {
        stray += usize::from(!matches!(i, Incoming::Message { .. }))
    });
    let Ok(Some(ReceiverEvent::Frame(f))) = rx.process_message(k, &mut rng, &now) else {
        return Err("frame not delivered");
    };
    if f.pixels() != &pixels[..] {
        return Err("frame differs after the round trip");
    }
    rx.read_stream(&wire, |i| {
        stray += usize::from(!matches!(i, Incoming::Message { .. }))
    });
    if !matches!(
        rx.process_message(k, &mut rng, &now),
        Err(Rejected::Replay(_))
    ) {
        return Err("replay not rejected");
    }
    if stray != 0 || rx.has_message() || drone.has_message() {
        return Err("unexpected packets or messages on the pipes");
    }
    println!(
        "protocol {:>26} {:>6} packet={:>4}: ok  hello={} accept={} bytes (wire {} / {}), drone handshake {} instructions",
        suite.name(),
        mode.name(),
        packet,
        rs.bytes_sent,
        rs.bytes_received,
        rs.wire_bytes_sent,
        rs.wire_bytes_received,
        ds.duration_ns
    );
    Ok(())
}

fn rsa_drone_side() -> Result<(), &'static str> {
    let (d, r) = identities();
    let n: [u8; 256] = hex(RSA_TEST_N).try_into().map_err(|_| "modulus")?;
    let offer = Offer {
        suites: &[Suite::ChaCha20Poly1305],
        modes: &[KexMode::RsaOaep2048],
        rsa_modulus: Some(&n),
    };
    // The host test's HELLO time (gapstream_protocol's rv32_golden).
    let (_rh, hello) = ReceiverHandshake::start(
        &r,
        1_700_000_000_000_000_000,
        &offer,
        &mut TestRng::new(100),
    )
    .map_err(|_| "HELLO")?;
    let mac = HelloMacKey::derive(&d.local, &d.peer_public);
    let (res, n) = rv32_qemu::count_instructions(|| {
        respond(
            &d,
            &mac,
            &DronePolicy::default(),
            3,
            &mut TestRng::new(200),
            &hello,
        )
    });
    let (_, accept) = res.map_err(|_| "drone refused the RSA-mode HELLO")?;
    if accept != hex(GOLDEN_RSA_ACCEPT) {
        return Err("RSA-mode ACCEPT differs from the host's golden bytes");
    }
    println!(
        "protocol rsa2048 drone side: ACCEPT ({} bytes) = host golden; {} instructions",
        accept.len(),
        n
    );
    Ok(())
}

/// On this 32-bit target, `36 + payload_len + tag` must not wrap: a 36-byte message announcing
/// `2^32 - 16` payload bytes once matched its own wrapped "length" (36), and opening it then
/// indexed far past the buffer.
fn lengths_do_not_wrap() -> Result<(), &'static str> {
    use gapstream_protocol::frame::frame_layout;
    use gapstream_protocol::wire::{FrameHeader, message_len};
    let h = FrameHeader {
        suite: Suite::ChaCha20Poly1305 as u8,
        pixel_format: PixelFormat::Grey8.code(),
        width: 1,
        height: 1,
        epoch: 0,
        sequence: 0,
        capture_ns: 0,
        payload_len: u32::MAX - 15,
        state: None,
    };
    let b = h.encode();
    if message_len(&b).is_ok() {
        return Err("message_len wrapped on a 32-bit usize");
    }
    if frame_layout(&b, Suite::ChaCha20Poly1305).is_ok() {
        return Err("frame_layout accepted a wrapped length");
    }
    println!("protocol lengths: no usize wrap on rv32 (payload length 2^32 - 16 refused)");
    Ok(())
}

fn main() -> Result<(), &'static str> {
    lengths_do_not_wrap()?;
    for (i, suite) in Suite::ALL.into_iter().enumerate() {
        session(suite, KexMode::X25519, 1020, i as u64 + 1)?;
    }
    session(Suite::ChaCha20Poly1305, KexMode::X25519, 128, 9)?;
    session(Suite::Aes128Gcm, KexMode::P256, 512, 10)?;
    rsa_drone_side()
}
rv32_qemu::entry!(main);
