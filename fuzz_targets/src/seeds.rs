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
use crate::session::{Op, Side, run, snapshots};
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

fn seed(target: &'static str, name: impl Into<String>, bytes: Vec<u8>) -> Seed {
    Seed {
        target,
        name: name.into(),
        bytes,
    }
}

/// The session seeds and how far each gets (for the tests' depth checks).
pub struct SessionSeeds {
    pub seeds: Vec<Seed>,
    /// Per session seed (`target/name`): frames the drone sealed and frames receiver 0 got,
    /// replayed as the fuzz body runs it.
    pub frames: Vec<(String, u64, u64)>,
    seen: Seen,
}

fn ops(snapshot: usize, ops: &[Op]) -> Vec<u8> {
    let mut b = vec![snapshot as u8];
    for op in ops {
        op.encode(&mut b);
    }
    b
}

/// A clean run from a snapshot as the side's network would carry it: frames sealed at 30 per
/// second, every message delivered in order by the held way (as messages, or as CPX packets of 200
/// bytes when `cpx`), timers, a rekey request, and receiver 1 leaving.
fn clean(side: Side, cpx: bool) -> Vec<Op> {
    let (up, i) = match side {
        Side::Drone => (true, 0),
        Side::Receiver => (false, 0),
    };
    let how = if cpx { 1 | 1 << 2 } else { 0 };
    let deliver = |out: &mut Vec<Op>, n: usize| {
        for _ in 0..n {
            out.push(Op::Deliver { up, i, how });
            if side == Side::Drone {
                out.push(Op::Deliver { up, i: 1, how });
            }
        }
    };
    let mut v = Vec::new();
    deliver(&mut v, 4);
    for k in 0..12u8 {
        v.push(Op::Advance(9));
        v.push(Op::Seal(7));
        deliver(&mut v, 3);
        if k % 4 == 3 {
            v.push(Op::ReceiverTimers(0));
            v.push(Op::ReceiverTimers(1));
            v.push(Op::DroneTimers);
            deliver(&mut v, 3);
        }
        if k == 5 {
            v.push(Op::Rekey(0));
            deliver(&mut v, 3);
        }
        if k == 8 {
            v.push(Op::Close(1));
            deliver(&mut v, 3);
        }
    }
    v
}

/// The seeds of `drone_session` and `receiver_session`: operation sequences ([`Op`]) from each
/// snapshot ([`snapshots`]), run through the body to see how far they get.
pub fn session_seeds() -> SessionSeeds {
    let mut seen = Seen::default();
    for snap in snapshots() {
        for m in &snap.world.recorded {
            seen.note(m);
        }
    }
    let mut seeds = Vec::new();
    let mut frames = Vec::new();
    let mut add = |target: &'static str, name: String, bytes: Vec<u8>| {
        let side = if target == "drone_session" {
            Side::Drone
        } else {
            Side::Receiver
        };
        let w = run(side, &bytes);
        for m in &w.recorded {
            seen.note(m);
        }
        frames.push((
            format!("{target}/{name}"),
            w.frames_sealed,
            w.frames_delivered[0],
        ));
        seeds.push(seed(target, name, bytes));
    };
    for (k, snap) in snapshots().iter().enumerate() {
        add(
            "drone_session",
            snap.name.into(),
            ops(k, &clean(Side::Drone, false)),
        );
        add(
            "receiver_session",
            snap.name.into(),
            ops(k, &clean(Side::Receiver, false)),
        );
    }
    add(
        "drone_session",
        "chacha20poly1305-cpx-200".into(),
        ops(0, &clean(Side::Drone, true)),
    );
    add(
        "receiver_session",
        "chacha20poly1305-cpx-200".into(),
        ops(0, &clean(Side::Receiver, true)),
    );
    // Replays of every HELLO and ACCEPT of the snapshot, and forged control messages under the
    // sessions' real keys (a KEY_ACK for an epoch the drone never drew; a GROUP_KEY for a far
    // epoch), between clean steps.
    let hellos: Vec<u16> = snapshots()[1]
        .world
        .recorded
        .iter()
        .enumerate()
        .filter(|(_, m)| matches!(wire::parse_prefix(m), Ok(MsgType::Hello | MsgType::Accept)))
        .map(|(i, _)| i as u16)
        .collect();
    let mut v: Vec<Op> = hellos
        .iter()
        .map(|&idx| Op::Replay {
            up: true,
            i: 0,
            idx,
        })
        .collect();
    v.push(Op::ForgeControl {
        up: true,
        i: 1,
        ty: 1,
        seq: 1 << 20,
        body: 77u32.to_le_bytes().to_vec(),
    });
    v.extend(clean(Side::Drone, false));
    add("drone_session", "replayed-handshakes".into(), ops(1, &v));
    let mut body = 1_000u32.to_le_bytes().to_vec();
    body.extend(0u64.to_le_bytes());
    body.extend([0x42; 32]);
    let mut v = vec![Op::ForgeControl {
        up: false,
        i: 0,
        ty: 0,
        seq: 1 << 20,
        body,
    }];
    v.extend(hellos.iter().map(|&idx| Op::Replay {
        up: false,
        i: 0,
        idx,
    }));
    v.extend(clean(Side::Receiver, false));
    add("receiver_session", "forged-group-key".into(), ops(1, &v));
    // Regression: under an unauthenticated suite anyone can send a frame with any sequence
    // number; sequence u64::MAX once made the replay window's `top = seq + 1` wrap (a panic in
    // debug builds). After the clean run: u64::MAX - 1 (accepted), then u64::MAX twice (refused).
    let un = snapshots()
        .iter()
        .position(|s| s.name == "unauthenticated")
        .expect("the unauthenticated snapshot");
    let mut v = clean(Side::Receiver, false);
    // The last frame of the clean run (of its last epoch), renumbered.
    let frame = run(Side::Receiver, &ops(un, &v))
        .recorded
        .iter()
        .rev()
        .find(|m| FrameHeader::decode(m).is_ok())
        .expect("the run sealed frames")
        .clone();
    for seq in [u64::MAX - 1, u64::MAX, u64::MAX] {
        let mut f = frame.clone();
        f[16..24].copy_from_slice(&seq.to_le_bytes());
        v.push(Op::Raw {
            up: false,
            i: 0,
            cpx: false,
            bytes: f,
        });
    }
    add(
        "receiver_session",
        "unauthenticated-sequence-max".into(),
        ops(un, &v),
    );
    SessionSeeds {
        seeds,
        frames,
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
    for (name, bytes) in crate::jpeg::seeds() {
        seeds.push(seed("jpeg_decode", name, bytes));
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

    seeds.extend(fec_seeds());
    seeds
}

/// FEC: genuine blocks with losses up to their parity, a forged and a corrupted parity shard,
/// duplicates, reordering, clock jumps; and a bridge coding a stream for a client that asks for
/// FEC and reports its losses.
fn fec_seeds() -> Vec<Seed> {
    use crate::fec::{genuine_block, op};
    let mut out = Vec::new();
    for (name, decoder) in [("rse", 0u8), ("own", 1u8)] {
        let mut b = vec![decoder];
        for blk in 0..12u32 {
            let shards = genuine_block(blk);
            let m = 1 + (blk % 3) as usize;
            let ctl = op::GENUINE | ((blk as u8) << 3);
            for (i, _) in shards.iter().enumerate() {
                // Lose up to m shards of each block (data first), duplicate one.
                if (i % 3 == 1) && i / 3 < m {
                    continue;
                }
                push_record(&mut b, ctl, &[i as u8]);
            }
            push_record(&mut b, ctl, &[0]);
            push_record(&mut b, op::CLOCK, &[3]);
        }
        // A parity shard corrupted in its symbol and one in its header, then the blocks time out.
        let last = genuine_block(12);
        let k = last.len() - 1 - (12 % 3) as usize;
        for i in 1..last.len() {
            let ctl = if i == k { op::CORRUPTED } else { op::GENUINE } | (12 << 3);
            push_record(&mut b, ctl, &[i as u8, 20, 0x5A]);
        }
        push_record(&mut b, op::CORRUPTED | (13 << 3), &[0, 8, 0x01]);
        push_record(&mut b, op::POLL, &[]);
        push_record(&mut b, op::CLOCK | (31 << 3), &[]);
        push_record(&mut b, op::POLL, &[]);
        out.push(seed("fec_reassembly", format!("genuine-blocks-{name}"), b));
    }
    // The bridge's side: FEC asked for, a stream coded and received, reports, forged reports.
    let mut b = vec![0u8];
    push_record(&mut b, op::TO_BRIDGE, b"GF\x12\x00");
    for t in 0..6u8 {
        push_record(&mut b, op::BRIDGE_SENDS, &[60, t, 3 * t, 0, 0]);
        push_record(&mut b, op::CLOCK, &[10]);
        let (r, n) = gapstream_fec::wire::Control::Report(gapstream_fec::wire::Report {
            received: 40 * u32::from(t),
            lost: u32::from(t),
            unrecoverable: 0,
            worst: u16::from(t),
        })
        .encode();
        push_record(&mut b, op::TO_BRIDGE, &r[..n]);
    }
    push_record(&mut b, op::TO_BRIDGE, b"GF\x13\x00garbage");
    push_record(
        &mut b,
        op::FORGED_HEADER,
        &[0x11, 5, 0, 0, 0, 9, 3, 7, 1, 2, 3],
    );
    push_record(&mut b, op::RAW, &[0x47, 0x46, 0x10]);
    push_record(&mut b, op::POLL, &[]);
    out.push(seed("fec_reassembly", "bridge-codes-a-stream", b));
    out
}
