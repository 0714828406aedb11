//! The seed corpus, written from real messages by the protocol's own encoders and state machines:
//! a deterministic drone and receivers run the handshake, rekeys, frames and closes, and what they
//! exchange is recorded in each target's input format. `cargo run -p gapstream_fuzz_targets --bin
//! fuzz-corpus` (`make fuzz-corpus`) writes them to `fuzz/corpus/<target>/seed-*`; the stable test
//! checks that they still reach the states they were made for.

use std::collections::BTreeMap;

use gapstream_drone::testpattern::{self, Stamp};
use gapstream_protocol::compat::StockStreamer;
use gapstream_protocol::cpx::{
    CpxError, GAPSTREAM_FUNCTION, LastFlag, MAX_PAYLOAD, MAX_WIRE_PACKET, Packetizer, Route, Target,
};
use gapstream_protocol::frame::{self};
use gapstream_protocol::suite::Suite;
use gapstream_protocol::wire::{self, AlertCode, FrameHeader, MsgType, PixelFormat};

use crate::bridge;
use crate::push_record;
use crate::session::{DroneHarness, ReceiverHarness, op};
use crate::wire::fuzz_keys;
use gap_rust_cipher_s::Sequential;

/// One seed file.
#[derive(Clone, Debug)]
pub struct Seed {
    pub target: &'static str,
    /// File name (without the `seed-` prefix).
    pub name: String,
    pub bytes: Vec<u8>,
}

/// Receiver → drone.
pub const UP: Route = Route::new(Target::WifiHost, Target::Gap8, GAPSTREAM_FUNCTION);
/// Drone → receivers.
pub const DOWN: Route = Route::new(Target::Gap8, Target::WifiHost, GAPSTREAM_FUNCTION);

/// `msg` as CPX wire packets of at most `per` payload bytes, `last_packet` on the final one.
pub fn packets(msg: &[u8], per: usize, route: Route) -> Vec<u8> {
    let mut p = Packetizer::new(route, [msg, &[], &[]], per, LastFlag::Final).expect("packet size");
    let mut out = Vec::new();
    let mut buf = [0u8; MAX_WIRE_PACKET];
    while let Some(r) = p.next_packet(&mut buf) {
        let n = r.expect("buffer holds a packet");
        out.extend_from_slice(&buf[..n]);
    }
    out
}

fn pixels(n: usize, seed: u8) -> Vec<u8> {
    (0..n)
        .map(|i| (i as u8).wrapping_mul(29).wrapping_add(seed))
        .collect()
}

/// Messages seen on the wire, by type name (for the header targets).
#[derive(Default)]
struct Seen(BTreeMap<String, Vec<u8>>);

impl Seen {
    fn note(&mut self, m: &[u8]) {
        let Ok(t) = wire::parse_prefix(m) else { return };
        let name = match t {
            MsgType::Frame => match FrameHeader::decode(m)
                .ok()
                .and_then(|h| Suite::from_u8(h.suite))
            {
                Some(s) => format!("frame-{}", s.name()),
                None => "frame".into(),
            },
            t => format!("{t:?}").to_lowercase(),
        };
        self.0.entry(name).or_insert_with(|| m.to_vec());
    }
}

/// A receiver seed: the harness receiver (config `sel`) against a live drone; what the drone
/// sends becomes the records, each as one message or (`cpx`) as CPX packets of `per` bytes.
fn receiver_seed(sel: u8, cpx: Option<usize>, seen: &mut Seen) -> (Vec<u8>, ReceiverHarness) {
    let mut rx = ReceiverHarness::new(sel, true);
    let mut drone = DroneHarness::new(0);
    drone.keep_output = true;
    let mut rec = vec![sel];
    let pump =
        |rx: &mut ReceiverHarness, drone: &mut DroneHarness, rec: &mut Vec<u8>, seen: &mut Seen| {
            for _ in 0..8 {
                let up = rx.take_output();
                for m in &up {
                    seen.note(m);
                    drone.step(op::MESSAGE, m);
                }
                let down = std::mem::take(&mut drone.output);
                for m in &down {
                    seen.note(m);
                    let (ctl, body) = match cpx {
                        Some(per) => (op::CPX, packets(m, per, DOWN)),
                        None => (op::MESSAGE, m.clone()),
                    };
                    push_record(rec, ctl, &body);
                    rx.step(ctl, &body);
                }
                if up.is_empty() && down.is_empty() {
                    return;
                }
            }
        };
    // Both clocks move together: the drone's in its own steps, the receiver's in the records.
    let tick = |rx: &mut ReceiverHarness, drone: &mut DroneHarness, rec: &mut Vec<u8>, n: u8| {
        push_record(rec, op::ctl(op::TIMERS, n), &[]);
        rx.step(op::ctl(op::TIMERS, n), &[]);
        drone.step(op::ctl(op::TIMERS_OR_CONNECT, n), &[]);
        assert_eq!(rx.now(), drone.now());
    };
    pump(&mut rx, &mut drone, &mut rec, seen);
    for k in 0..3u8 {
        tick(&mut rx, &mut drone, &mut rec, 5);
        drone.step(op::SEAL_OR_REKEY, &pixels(64, k));
        pump(&mut rx, &mut drone, &mut rec, seen);
    }
    // The receiver asks for a rekey; frames of the new epoch follow.
    push_record(&mut rec, op::SEAL_OR_REKEY, &[]);
    rx.step(op::SEAL_OR_REKEY, &[]);
    pump(&mut rx, &mut drone, &mut rec, seen);
    for k in 3..5u8 {
        tick(&mut rx, &mut drone, &mut rec, 10);
        drone.step(op::SEAL_OR_REKEY, &pixels(40, k));
        pump(&mut rx, &mut drone, &mut rec, seen);
    }
    // A second of silence: keepalives both ways.
    tick(&mut rx, &mut drone, &mut rec, 10);
    pump(&mut rx, &mut drone, &mut rec, seen);
    (rec, rx)
}

/// A drone seed: the harness drone against live receivers (paired receiver `i` with config
/// `sels[i]`); what they send becomes the records (one message each, or CPX packets of `per`).
fn drone_seed(
    dsel: u8,
    sels: &[u8],
    cpx: Option<usize>,
    seen: &mut Seen,
) -> (Vec<u8>, DroneHarness, Vec<ReceiverHarness>) {
    let mut drone = DroneHarness::new(dsel);
    drone.keep_output = true;
    let mut rxs: Vec<ReceiverHarness> = sels
        .iter()
        .enumerate()
        .map(|(i, &s)| ReceiverHarness::with_rng_seed(s, true, 0x100 + i as u64))
        .collect();
    let mut rec = vec![dsel];
    fn pump(
        drone: &mut DroneHarness,
        rxs: &mut [ReceiverHarness],
        rec: &mut Vec<u8>,
        cpx: Option<usize>,
        seen: &mut Seen,
    ) {
        for _ in 0..8 {
            let mut moved = false;
            for rx in rxs.iter_mut() {
                for m in rx.take_output() {
                    moved = true;
                    seen.note(&m);
                    let (ctl, body) = match cpx {
                        Some(per) => (op::CPX, packets(&m, per, UP)),
                        None => (op::MESSAGE, m),
                    };
                    push_record(rec, ctl, &body);
                    drone.step(ctl, &body);
                }
            }
            let down = std::mem::take(&mut drone.output);
            for m in &down {
                moved = true;
                seen.note(m);
                for rx in rxs.iter_mut() {
                    rx.step(op::MESSAGE, m);
                }
            }
            if !moved {
                return;
            }
        }
    }
    let tick = |drone: &mut DroneHarness, rxs: &mut [ReceiverHarness], rec: &mut Vec<u8>, n: u8| {
        push_record(rec, op::ctl(op::TIMERS_OR_CONNECT, n), &[]);
        drone.step(op::ctl(op::TIMERS_OR_CONNECT, n), &[]);
        for rx in rxs.iter_mut() {
            rx.step(op::ctl(op::TIMERS, n), &[]);
        }
    };
    pump(&mut drone, &mut rxs, &mut rec, cpx, seen);
    for k in 0..4u8 {
        tick(&mut drone, &mut rxs, &mut rec, 5);
        pump(&mut drone, &mut rxs, &mut rec, cpx, seen);
        let body = pixels(48, k);
        push_record(&mut rec, op::SEAL_OR_REKEY, &body);
        drone.step(op::SEAL_OR_REKEY, &body);
        pump(&mut drone, &mut rxs, &mut rec, cpx, seen);
    }
    rxs[0].step(op::SEAL_OR_REKEY, &[]);
    pump(&mut drone, &mut rxs, &mut rec, cpx, seen);
    tick(&mut drone, &mut rxs, &mut rec, 10);
    pump(&mut drone, &mut rxs, &mut rec, cpx, seen);
    let body = pixels(48, 9);
    push_record(&mut rec, op::SEAL_OR_REKEY, &body);
    drone.step(op::SEAL_OR_REKEY, &body);
    pump(&mut drone, &mut rxs, &mut rec, cpx, seen);
    // The last receiver leaves.
    let last = rxs.len() - 1;
    rxs[last].step(op::CLOSE, &[]);
    pump(&mut drone, &mut rxs, &mut rec, cpx, seen);
    (rec, drone, rxs)
}

fn seed(target: &'static str, name: impl Into<String>, bytes: Vec<u8>) -> Seed {
    Seed {
        target,
        name: name.into(),
        bytes,
    }
}

/// The session seeds with the harnesses they ended in (for the tests' depth checks).
pub struct SessionSeeds {
    pub seeds: Vec<Seed>,
    /// Frames the receiver harness delivered, per receiver seed.
    pub receiver_frames: Vec<(String, u64)>,
    /// Frames the drone harness sealed and the live receivers delivered, per drone seed.
    pub drone_frames: Vec<(String, u64, u64)>,
    seen: Seen,
}

/// The seeds of `drone_session` and `receiver_session`.
pub fn session_seeds() -> SessionSeeds {
    let mut seen = Seen::default();
    let mut seeds = Vec::new();
    let mut receiver_frames = Vec::new();
    let mut drone_frames = Vec::new();
    let names = [
        "chacha20poly1305-x25519",
        "aes128gcm-p256",
        "unauthenticated-x25519",
        "chacha20poly1305-rsa",
    ];
    for (sel, name) in names.iter().enumerate() {
        let (bytes, rx) = receiver_seed(sel as u8, None, &mut seen);
        receiver_frames.push((name.to_string(), rx.frames));
        seeds.push(seed("receiver_session", *name, bytes));
    }
    // Regression: under an unauthenticated suite anyone can send a frame with any sequence number;
    // sequence u64::MAX once made the replay window's `top = seq + 1` wrap (a panic in debug
    // builds). After the seed's frames: u64::MAX - 1 (accepted), then u64::MAX twice (refused).
    let (mut bytes, mut rx) = receiver_seed(2, None, &mut seen);
    let frame = {
        let mut i = crate::Input::new(&bytes[1..]);
        let mut last = None;
        while let Some((ctl, body)) = i.record() {
            if ctl & 7 == op::MESSAGE && FrameHeader::decode(body).is_ok() {
                last = Some(body.to_vec());
            }
        }
        last.expect("the seed has frames")
    };
    for seq in [u64::MAX - 1, u64::MAX, u64::MAX] {
        let mut f = frame.clone();
        f[16..24].copy_from_slice(&seq.to_le_bytes());
        push_record(&mut bytes, op::MESSAGE, &f);
        rx.step(op::MESSAGE, &f);
    }
    receiver_frames.push(("unauthenticated-sequence-max".into(), rx.frames));
    seeds.push(seed(
        "receiver_session",
        "unauthenticated-sequence-max",
        bytes,
    ));

    let (bytes, rx) = receiver_seed(0, Some(100), &mut seen);
    receiver_frames.push(("cpx-100".into(), rx.frames));
    seeds.push(seed("receiver_session", "cpx-100", bytes));

    for (sel, name) in names.iter().enumerate() {
        let (bytes, d, rxs) = drone_seed(0, &[sel as u8], None, &mut seen);
        drone_frames.push((name.to_string(), d.frames_sealed, rxs[0].frames));
        seeds.push(seed("drone_session", *name, bytes));
    }
    let (bytes, d, rxs) = drone_seed(1, &[0, 4], Some(200), &mut seen);
    let delivered = rxs.iter().map(|r| r.frames).min().unwrap_or(0);
    drone_frames.push(("group-rekey3-cpx-200".into(), d.frames_sealed, delivered));
    seeds.push(seed("drone_session", "group-rekey3-cpx-200", bytes));
    SessionSeeds {
        seeds,
        receiver_frames,
        drone_frames,
        seen,
    }
}

/// Every seed of every target.
pub fn all() -> Vec<Seed> {
    let s = session_seeds();
    let mut seeds = s.seeds;
    for (name, bytes) in crate::jpegls::seeds() {
        seeds.push(seed("jpegls_decode", name, bytes));
    }
    for (name, bytes) in crate::stm32::seeds() {
        seeds.push(seed("stm32_uart", name, bytes));
    }
    let mut seen = s.seen.0;
    seen.insert(
        "alert".into(),
        wire::encode_alert([7; 8], AlertCode::AuthenticationFailed).to_vec(),
    );

    // Header decoders: every message type seen, under the suite it was sealed with.
    for (name, m) in &seen {
        let suite = FrameHeader::decode(m)
            .ok()
            .and_then(|h| Suite::ALL.iter().position(|s| *s as u8 == h.suite))
            .unwrap_or(0) as u8;
        let mut b = vec![suite];
        b.extend_from_slice(m);
        seeds.push(seed("wire_decode", name.clone(), b));
    }

    // CPX decoder: real messages as packets, in pieces; a garbled length; a packet of version 1.
    let hello = seen.get("hello").expect("a HELLO was sent").clone();
    let frame = seen
        .get("frame-chacha20poly1305")
        .expect("a frame was sent")
        .clone();
    let mut b = vec![31];
    b.extend(packets(&hello, MAX_PAYLOAD, UP));
    seeds.push(seed("cpx_decoder", "hello", b));
    let mut b = vec![0];
    b.extend(packets(&frame, 30, DOWN));
    seeds.push(seed("cpx_decoder", "frame-30", b));
    let mut garbled = packets(&frame, 40, DOWN);
    garbled[45] = 0xFF;
    garbled[46] = 0x7F;
    garbled.insert(0, 200);
    seeds.push(seed("cpx_decoder", "garbled-length", garbled));
    let mut v1 = packets(&hello[..20], 20, UP);
    v1[3] |= 0x40;
    v1.extend(packets(&hello, 64, UP));
    v1.insert(0, 7);
    seeds.push(seed("cpx_decoder", "version1-then-hello", v1));

    // Reassembler: packets as records (route, len, payload).
    let as_records = |msg: &[u8], per: usize, route: Route, max_sel: u8| {
        let mut out = vec![max_sel];
        let wire = packets(msg, per, route);
        let mut d = gapstream_protocol::cpx::StreamDecoder::new();
        let mut input = &wire[..];
        while let Some(Ok(p)) = d.decode(&mut input) {
            out.extend_from_slice(&p.route.to_bytes());
            out.extend_from_slice(&(p.payload.len() as u16).to_le_bytes());
            out.extend_from_slice(p.payload);
        }
        out
    };
    seeds.push(seed(
        "cpx_assembler",
        "frame-50",
        as_records(&frame, 50, DOWN, 2),
    ));
    seeds.push(seed(
        "cpx_assembler",
        "hello-1020",
        as_records(&hello, MAX_PAYLOAD, UP, 1),
    ));
    let mut lost = as_records(&frame, 50, DOWN, 2);
    lost.extend(as_records(&frame, 50, DOWN, 0)[1 + 54..].iter());
    seeds.push(seed("cpx_assembler", "frame-then-lost-start", lost));

    // Sealed messages under the fixed fuzz keys, every suite, and a control message.
    for (i, (suite, key)) in fuzz_keys().iter().enumerate() {
        let mut p = pixels(48, i as u8);
        let h = FrameHeader {
            suite: *suite as u8,
            pixel_format: PixelFormat::Grey8.code(),
            width: 8,
            height: 6,
            epoch: 7,
            sequence: 100 + i as u64,
            capture_ns: 1,
            payload_len: 48,
            state: None,
        };
        let s = frame::seal_frame(&mut Sequential, key, &h, &mut p).expect("seals");
        let mut b = vec![i as u8, 0x34, 0x12];
        b.extend_from_slice(&s.header);
        b.extend_from_slice(&p);
        b.extend_from_slice(s.tag());
        seeds.push(seed("frame_open", format!("frame-{}", suite.name()), b));
    }
    let mut out = [0u8; 64];
    let n = frame::seal_control(
        &mut Sequential,
        &fuzz_keys()[0].1,
        MsgType::KeyAck,
        [1; 8],
        4,
        &7u32.to_le_bytes(),
        &mut out,
    )
    .expect("seals");
    let mut b = vec![8, 0x05, 0x00];
    b.extend_from_slice(&out[..n]);
    seeds.push(seed("frame_open", "control-key-ack", b));
    let mut b = vec![16 | 1, 0, 0];
    b.extend(pixels(100, 3));
    seeds.push(seed("frame_open", "round-trip-aes128gcm", b));

    // Stock stream: a small raw image, and a test-pattern frame the receiver decodes.
    let stock = |img: &[u8], w: u16, h: u16, per: usize| -> Result<Vec<u8>, CpxError> {
        let mut s = StockStreamer::raw(img, w, h, per)?;
        let mut out = Vec::new();
        let mut buf = [0u8; MAX_WIRE_PACKET];
        while let Some(r) = s.next_packet(&mut buf) {
            out.extend_from_slice(&buf[..r?]);
        }
        Ok(out)
    };
    let mut b = vec![2];
    b.extend(stock(&pixels(20 * 10, 1), 20, 10, 64).expect("stock stream"));
    seeds.push(seed("stock_stream", "raw-20x10", b));
    let (w, h) = (testpattern::MIN_WIDTH, testpattern::MIN_HEIGHT);
    let mut img = vec![0u8; w * h];
    testpattern::render(
        &mut img,
        w,
        h,
        Stamp {
            frame: 3,
            capture_ns: 5,
        },
    )
    .expect("renders");
    let mut b = vec![3 | 14 << 2];
    b.extend(stock(&img, w as u16, h as u16, MAX_PAYLOAD).expect("stock stream"));
    seeds.push(seed("stock_stream", "testpattern-300x48", b));

    // Bridge: a TCP and a UDP client handshake through it while the GAP8 streams.
    let mut b = vec![0];
    push_record(&mut b, bridge::op::ADD_TCP, &[]);
    push_record(&mut b, bridge::op::ADD_UDP, &[]);
    push_record(&mut b, bridge::op::TCP_BYTES, &packets(&hello, 100, UP));
    for p in packets(&hello, 100, UP).chunks(104) {
        push_record(&mut b, bridge::op::DATAGRAM | 1 << 3, p);
    }
    push_record(&mut b, bridge::op::DATAGRAM | 1 << 3, &[]);
    push_record(&mut b, bridge::op::WRITE_SPI, &[]);
    push_record(&mut b, bridge::op::FROM_GAP8, &packets(&frame, 200, DOWN));
    push_record(&mut b, bridge::op::WRITE_CLIENT, &[]);
    push_record(&mut b, bridge::op::WRITE_CLIENT | 1 << 3, &[]);
    push_record(&mut b, bridge::op::REMOVE, &[]);
    seeds.push(seed("bridge_client", "tcp-udp-hello-frame", b));
    let mut b = vec![1 | 2 | 4];
    push_record(&mut b, bridge::op::ADD_TCP, &[]);
    push_record(&mut b, bridge::op::ADD_TCP, &[]);
    push_record(&mut b, bridge::op::ADD_TCP, &[]);
    let two = [packets(&hello, 60, UP), packets(&frame, 60, UP)].concat();
    push_record(&mut b, bridge::op::TCP_BYTES | 1 << 3, &two[..150]);
    push_record(&mut b, bridge::op::TCP_BYTES, &two);
    push_record(&mut b, bridge::op::TCP_BYTES | 1 << 3, &two[150..]);
    push_record(&mut b, bridge::op::WRITE_SPI, &[10, 0]);
    push_record(&mut b, bridge::op::WRITE_SPI, &[]);
    // The GAP8 side one SPI transaction (one packet) at a time.
    for p in packets(&frame, 60, DOWN).chunks(64) {
        push_record(&mut b, bridge::op::FROM_GAP8 | 0x40, p);
    }
    push_record(&mut b, bridge::op::WRITE_CLIENT, &[7, 0]);
    push_record(&mut b, bridge::op::WRITE_CLIENT, &[]);
    seeds.push(seed("bridge_client", "small-leader-only-interleaved", b));
    // UDP clients through the registration gate: a request (answered with a cookie), the echo of
    // the cookie for that address (registered: the first record runs at RECORD_MS, the second at
    // 2 * RECORD_MS), the same echo from another address (refused), an empty datagram, then the
    // client's datagrams.
    let mut b = vec![0];
    let jar = esp32_bridge::cookie::CookieJar::new(bridge::GATE_SECRET, 0);
    let via_gate = |p: u8| bridge::op::ADD_UDP | bridge::op::VIA_GATE | p << 3;
    let req = esp32_bridge::cookie::Control::Request.encode();
    push_record(&mut b, via_gate(3), &req);
    let (peer, n) = esp32_bridge::cookie::peer_bytes(bridge::gate_peer(3));
    let cookie = jar.token(
        esp32_bridge::cookie::LABEL_COOKIE,
        bridge::RECORD_MS as u32,
        &peer[..n],
    );
    let echo = esp32_bridge::cookie::Control::Echo(cookie).encode();
    push_record(&mut b, via_gate(3), &echo);
    push_record(&mut b, via_gate(4), &echo);
    push_record(&mut b, via_gate(5), &[]);
    for p in packets(&hello, 100, UP).chunks(104) {
        push_record(&mut b, bridge::op::DATAGRAM, p);
    }
    push_record(&mut b, bridge::op::WRITE_SPI, &[]);
    push_record(&mut b, bridge::op::FROM_GAP8, &packets(&frame, 100, DOWN));
    push_record(&mut b, bridge::op::WRITE_CLIENT, &[]);
    seeds.push(seed("bridge_client", "udp-cookie-exchange", b));

    seeds
}
