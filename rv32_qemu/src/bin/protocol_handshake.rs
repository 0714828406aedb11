//! gapstream_protocol on rv32: full Noise_KK handshakes (drone and receiver in one program) in the
//! X25519 and P-256 modes, the group key (GROUP_KEY / KEY_ACK), one frame of every suite through
//! DroneSession -> CPX packets ->
//! Assembler -> ReceiverSession, tamper and replay rejection, and the drone side of the RSA-OAEP
//! mode checked byte-for-byte against the ACCEPT the host makes from the same inputs
//! (`gapstream_protocol/testdata/rv32_rsa_accept.hex`; the host test completes that handshake).
#![no_std]
#![no_main]

extern crate alloc;

use alloc::vec::Vec;
use gapstream_protocol::cpx::{Function, MAX_WIRE_PACKET, Route, StreamDecoder, Target};
use gapstream_protocol::frame::FrameMeta;
use gapstream_protocol::handshake::{
    DronePolicy, KexSet, Offer, ReceiverHandshake, SuiteSet, respond,
};
use gapstream_protocol::wire::PixelFormat;
use gapstream_protocol::{
    DroneConfig, DroneEvent, DroneSession, Identity, KexMode, ReceiverConfig, ReceiverEvent,
    ReceiverSession, Rejected, Sequential, StaticSecret, Suite,
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

/// Handshake + one 324x244 frame through CPX packets of `packet` bytes.
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
    let mut drone = DroneSession::new(d, dcfg);
    let rcfg = ReceiverConfig {
        suites: alloc::vec![suite],
        modes: alloc::vec![mode],
        packet_payload: packet,
        ..ReceiverConfig::default()
    };
    let mut rx = ReceiverSession::new(r, rcfg);
    let k = &mut Sequential;
    rx.connect(&mut rng, &now).map_err(|_| "connect failed")?;
    let hello = rx.poll_transmit().ok_or("no HELLO")?;
    let ev = drone
        .handle_message(k, &mut rng, &now, &hello)
        .map_err(|_| "drone rejected HELLO")?;
    let Some(DroneEvent::Established { stats: ds, .. }) = ev else {
        return Err("drone not established");
    };
    let accept = drone.poll_transmit().ok_or("no ACCEPT")?;
    let ev = rx
        .handle_message(k, &mut rng, &now, accept)
        .map_err(|_| "receiver rejected ACCEPT")?;
    let Some(ReceiverEvent::Established { stats: rs, .. }) = ev else {
        return Err("receiver not established");
    };
    if (rs.suite, rs.mode) != (suite, mode) {
        return Err("negotiated the wrong suite or mode");
    }
    // The group key follows the ACCEPT; the receiver acknowledges it and frames can flow.
    let group_key = drone.poll_transmit().ok_or("no GROUP_KEY")?;
    if !matches!(
        rx.handle_message(k, &mut rng, &now, group_key),
        Ok(Some(ReceiverEvent::Rekeyed { epoch: 0 }))
    ) {
        return Err("receiver rejected GROUP_KEY");
    }
    let ack = rx.poll_transmit().ok_or("no KEY_ACK")?;
    drone
        .handle_message(k, &mut rng, &now, &ack)
        .map_err(|_| "drone rejected KEY_ACK")?;
    if !drone.is_established() {
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
    };
    let sealed = drone
        .seal_frame(k, &now, meta, &mut payload)
        .map_err(|_| "seal failed")?;
    if suite != Suite::None && payload == pixels {
        return Err("payload not encrypted");
    }
    let route = Route::new(Target::Gap8, Target::WifiHost, Function::Test);
    let mut pk = sealed
        .packetizer(&payload, route, packet)
        .map_err(|_| "packetizer")?;
    let mut wire = Vec::new();
    let mut out = [0u8; MAX_WIRE_PACKET];
    while let Some(n) = pk.next_packet(&mut out) {
        wire.extend_from_slice(&out[..n.map_err(|_| "packet")?]);
    }
    let mut dec = StreamDecoder::new();
    let mut asm = gapstream_protocol::assembler::Assembler::new(rx.config().max_message());
    let mut msgs = Vec::new();
    let mut w: &[u8] = &wire;
    while let Some(p) = dec.decode(&mut w) {
        let p = p.map_err(|_| "CPX decode")?;
        asm.push(p.route, p.payload).map_err(|_| "assembly")?;
        while let Some(m) = asm.next_message() {
            msgs.push(m);
        }
    }
    let [msg] = <[Vec<u8>; 1]>::try_from(msgs).map_err(|_| "expected one message")?;
    // Tamper: a flipped payload byte is a tag failure for the AEAD suites.
    if suite.is_authenticated() {
        let mut bad = msg.clone();
        bad[1000] ^= 1;
        if rx.handle_message(k, &mut rng, &now, bad) != Err(Rejected::TagFailure) {
            return Err("tampered frame not rejected");
        }
    }
    let Ok(Some(ReceiverEvent::Frame(f))) = rx.handle_message(k, &mut rng, &now, msg.clone())
    else {
        return Err("frame not delivered");
    };
    if f.pixels() != &pixels[..] {
        return Err("frame differs after the round trip");
    }
    if !matches!(
        rx.handle_message(k, &mut rng, &now, msg),
        Err(Rejected::Replay(_))
    ) {
        return Err("replay not rejected");
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
    let (_rh, hello) =
        ReceiverHandshake::start(&r, &offer, &mut TestRng::new(100)).map_err(|_| "HELLO")?;
    let (res, n) = rv32_qemu::count_instructions(|| {
        respond(
            &d,
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
