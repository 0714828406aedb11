//! Instructions (QEMU `-icount shift=0`, minstret) for the drone's side of the gapstream protocol:
//! answering a HELLO in each key-establishment mode (Noise_KK_25519 alone, + P-256, + RSA-OAEP-2048),
//! refusing the same HELLO replayed (MAC and freshness, before any Diffie-Hellman), making the
//! session (one X25519 per paired receiver for the HELLO MAC key),
//! the receiver's side where it builds for rv32, a group rekey with three receivers, and sealing /
//! opening one 324x244 frame per suite with the single-core `Sequential` keystream.
#![no_std]
#![no_main]

extern crate alloc;

use alloc::vec::Vec;
use gapstream_protocol::frame::FrameMeta;
use gapstream_protocol::handshake::{DronePolicy, KexSet, Offer, ReceiverHandshake, SuiteSet};
use gapstream_protocol::keys::{GroupKeys, GroupPool};
use gapstream_protocol::wire::PixelFormat;
use gapstream_protocol::{
    DroneConfig, DroneEvent, DroneSession, Identity, KexMode, ReceiverConfig, ReceiverEvent,
    ReceiverSession, Sequential, StaticSecret, Suite,
};
use rv32_qemu::{bench, count_instructions, metric, println};

use gapstream_protocol::test_rng::TestRng;

const RSA_TEST_N: &str = include_str!("../../../gapstream_protocol/testdata/rsa_test_n.hex");

fn hex(s: &str) -> Vec<u8> {
    let s = s.trim().as_bytes();
    s.chunks(2)
        .map(|c| u8::from_str_radix(core::str::from_utf8(c).unwrap(), 16).unwrap())
        .collect()
}

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

fn zero() -> u64 {
    0
}

/// The drone's work for one HELLO in `mode` (HELLO made by the receiver code outside the count).
fn drone_handshake(mode: KexMode) -> Result<(), &'static str> {
    let (d, r) = identities();
    let n: [u8; 256] = hex(RSA_TEST_N).try_into().map_err(|_| "modulus")?;
    let offer = Offer {
        suites: &[Suite::ChaCha20Poly1305],
        modes: &[mode],
        rsa_modulus: Some(&n),
    };
    let (_rh, hello) =
        ReceiverHandshake::start(&r, 1, &offer, &mut TestRng::new(1)).map_err(|_| "HELLO")?;
    let (mut drone, n) = count_instructions(|| DroneSession::new(d, DroneConfig::default()));
    if mode == KexMode::X25519 {
        metric("drone_session_new_one_receiver_instructions", n);
    }
    let mut rng = TestRng::new(2);
    let (ev, n) =
        count_instructions(|| drone.handle_message(&mut Sequential, &mut rng, &zero, &hello));
    let Ok(Some(DroneEvent::Established { stats, .. })) = ev else {
        return Err("drone refused the HELLO");
    };
    // The same HELLO again (a replay): refused after its MAC and time, no Diffie-Hellman.
    let (again, n_replay) =
        count_instructions(|| drone.handle_message(&mut Sequential, &mut rng, &zero, &hello));
    if again
        != Ok(Some(DroneEvent::HelloRefused(
            gapstream_protocol::handshake::HandshakeError::Replayed,
        )))
    {
        return Err("the replayed HELLO was not refused as a replay");
    }
    metric(
        &alloc::format!(
            "handshake_drone_{}_replayed_hello_instructions",
            mode.name()
        ),
        n_replay,
    );
    bench(
        "handshake_drone",
        mode.name(),
        (stats.bytes_sent + stats.bytes_received) as usize,
        n,
    );
    metric(
        &alloc::format!("handshake_{}_bytes_receiver_to_drone", mode.name()),
        stats.bytes_received,
    );
    metric(
        &alloc::format!("handshake_{}_bytes_drone_to_receiver", mode.name()),
        stats.bytes_sent,
    );
    Ok(())
}

/// The receiver's work (build HELLO + read ACCEPT) where it runs on rv32 (not RSA: `rsa` needs atomics).
fn receiver_handshake(mode: KexMode) -> Result<(), &'static str> {
    let (d, r) = identities();
    let mut rx = ReceiverSession::new(
        r,
        ReceiverConfig {
            suites: alloc::vec![Suite::ChaCha20Poly1305],
            modes: alloc::vec![mode],
            ..ReceiverConfig::default()
        },
    );
    let mut drone = DroneSession::new(d, DroneConfig::default());
    let mut rrng = TestRng::new(3);
    let (r1, n1) = count_instructions(|| rx.connect(&mut rrng, &zero));
    r1.map_err(|_| "connect")?;
    let hello = rx.poll_transmit().ok_or("HELLO")?;
    drone
        .handle_message(&mut Sequential, &mut TestRng::new(4), &zero, &hello)
        .map_err(|_| "drone")?;
    let accept = drone.poll_transmit().ok_or("ACCEPT")?;
    let (ev, n2) =
        count_instructions(|| rx.handle_message(&mut Sequential, &mut rrng, &zero, accept));
    if !matches!(ev, Ok(Some(ReceiverEvent::Established { .. }))) {
        return Err("receiver did not complete");
    }
    metric(
        &alloc::format!("handshake_receiver_{}_instructions", mode.name()),
        n1 + n2,
    );
    Ok(())
}

fn frames() -> Result<(), &'static str> {
    let mut pool = GroupPool::new();
    let pixels: Vec<u8> = (0..324 * 244u32).map(|i| (i * 29) as u8).collect();
    for suite in Suite::ALL {
        let (keys, n) = count_instructions(|| {
            let g = pool.draw(&[0x33; 32], 0);
            GroupKeys::derive(&mut Sequential, &g, 0, suite)
        });
        let keys = keys.map_err(|_| "derive")?;
        if suite == Suite::ChaCha20Poly1305 {
            metric("group_epoch_draw_and_derive_instructions", n);
        }
        let h = gapstream_protocol::wire::FrameHeader {
            suite: suite as u8,
            pixel_format: PixelFormat::Grey8.code(),
            width: 324,
            height: 244,
            epoch: 0,
            sequence: 9,
            capture_ns: 0,
            payload_len: pixels.len() as u32,
            state: None,
        };
        let mut buf = pixels.clone();
        let (sealed, n) = count_instructions(|| {
            gapstream_protocol::frame::seal_frame(&mut Sequential, &keys.frame, &h, &mut buf)
        });
        let sealed = sealed.map_err(|_| "seal")?;
        bench("seal_frame", suite.name(), pixels.len(), n);
        let mut msg = sealed.header.to_vec();
        msg.extend_from_slice(&buf);
        msg.extend_from_slice(sealed.tag());
        let (r, n) = count_instructions(|| {
            gapstream_protocol::frame::open_frame(&mut Sequential, &keys.frame, &mut msg)
        });
        r.map_err(|_| "open")?;
        if msg[36..36 + pixels.len()] != pixels[..] {
            return Err("frame round trip");
        }
        bench("open_frame", suite.name(), pixels.len(), n);
    }
    Ok(())
}

fn main() -> Result<(), &'static str> {
    let (_, n) = count_instructions(|| gapstream_protocol::noise::x25519_public(&[0x42; 32]));
    metric("x25519_base_mult_instructions", n);
    for mode in KexMode::ALL {
        drone_handshake(mode)?;
    }
    receiver_handshake(KexMode::X25519)?;
    receiver_handshake(KexMode::P256)?;
    // A session seals through DroneSession the same way (its extra bookkeeping is measured here),
    // and a rekey of a group of three receivers (draw + one GROUP_KEY per receiver) is measured.
    let mut rng = TestRng::new(5);
    let (d, rs) = gapstream_protocol::pair_group(&mut rng, 3);
    let mut drone = DroneSession::new(
        d,
        DroneConfig {
            policy: DronePolicy {
                suites: SuiteSet::all(),
                modes: KexSet::all(),
            },
            rekey_after_frames: 1,
            ..DroneConfig::default()
        },
    );
    let mut rxs: Vec<ReceiverSession> = rs
        .into_iter()
        .map(|r| ReceiverSession::new(r, ReceiverConfig::default()))
        .collect();
    for i in 0..rxs.len() {
        rxs[i].connect(&mut rng, &zero).map_err(|_| "connect")?;
        // Every message to the drone, every drone message to every receiver, until quiet.
        loop {
            let mut moved = false;
            for rx in rxs.iter_mut() {
                while let Some(m) = rx.poll_transmit() {
                    moved = true;
                    drone
                        .handle_message(&mut Sequential, &mut rng, &zero, &m)
                        .map_err(|_| "drone rejected a message")?;
                }
            }
            while let Some(m) = drone.poll_transmit() {
                moved = true;
                for rx in rxs.iter_mut() {
                    rx.handle_message(&mut Sequential, &mut rng, &zero, m.clone())
                        .map_err(|_| "receiver rejected a message")?;
                }
            }
            if !moved {
                break;
            }
        }
    }
    if drone.members() != 3 || !drone.is_established() {
        return Err("group of three not established");
    }
    let mut p = alloc::vec![0u8; 324 * 244];
    let meta = FrameMeta {
        pixel_format: PixelFormat::Grey8,
        width: 324,
        height: 244,
        capture_ns: 0,
        state: None,
    };
    let (s, n) = count_instructions(|| drone.seal_frame(&mut Sequential, &zero, meta, &mut p));
    s.map_err(|_| "session seal")?;
    bench("session_seal_frame", "chacha20poly1305", p.len(), n);
    // One frame sealed: the policy (rekey_after_frames = 1) makes the next timer call rekey.
    let ((), n) = count_instructions(|| {
        drone.handle_timeout(&mut Sequential, &mut rng, &zero);
    });
    if drone.pending_epoch().is_none() {
        return Err("no rekey started");
    }
    metric("group_rekey_3_receivers_instructions", n);
    frames()?;
    println!("bench_protocol: done");
    Ok(())
}
rv32_qemu::entry!(main);
