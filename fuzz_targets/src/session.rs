//! The session targets: a drone and two receivers, each behind its role's `Connection` (deframer,
//! reassembler, session), with the fuzzer as the network between them and as the attacker on it.
//!
//! **No Diffie-Hellman per input.** The handshakes are done once per process, with fixed keys and
//! `TestRng`, into a few [`snapshots`] (a running group of two receivers under each kind of
//! suite, a receiver's reconnect half done, a rekey in flight). Every input starts from a
//! [`World::fork`] of one of them (`gapstream_protocol`'s feature `fork`) and runs a sequence of
//! [`Op`]s read with `arbitrary`'s `Unstructured`: deliver, drop, duplicate, cut into CPX packets or
//! alter the message at the head of a queue; replay any message sent so far (the snapshot's
//! HELLOs and ACCEPTs included); control messages and frames forged under the sessions' and epochs'
//! real keys (from the key logs) with the fuzzer's contents; arbitrary bytes; frames sealed;
//! timers, rekey requests, closes and the clock. A receiver never connects again in an input (that
//! would be a handshake), and every HELLO that reaches the drone is a replay or fails its MAC: the
//! targets check that the drone does no responder handshake at all, which is also what keeps them
//! fast (docs/fuzzing.md, `make fuzz`).
//!
//! * `drone_session`: the fuzzer holds what the receivers send to the drone (the drone's own
//!   messages reach both receivers as sent, so they answer and keep the group going).
//! * `receiver_session`: the fuzzer holds what the drone sends to receiver 0 (receiver 1 and
//!   everything upstream run as sent).
//!
//! Invariants, besides "no panic": no (frame key, nonce) pair sealed twice; no frame (epoch,
//! sequence) delivered twice to a receiver; a delivered frame's suite is the one its receiver
//! offered and its `authenticated` flag matches it; the drone's outbox, members and sessions stay
//! within their bounds; no responder handshake.

use std::collections::{BTreeMap, HashSet, VecDeque};
use std::sync::OnceLock;

use arbitrary::{Arbitrary, Unstructured};
use gap_rust_cipher_s::Sequential;
use gapstream_protocol::connection::{DroneConnection, ReceiverConnection};
use gapstream_protocol::cpx::{
    GAPSTREAM_FUNCTION, LastFlag, MAX_WIRE_PACKET, Packetizer, Route, Target,
};
use gapstream_protocol::frame::{self, FrameMeta};
use gapstream_protocol::handshake::{DroneIdentity, DronePolicy, Identity, KexSet, SuiteSet};
use gapstream_protocol::keys::{GroupKeys, SessionKeys};
use gapstream_protocol::session::{
    DroneConfig, MAX_OUTBOX, MAX_SESSIONS_PER_RECEIVER, ReceiverConfig, ReceiverEvent,
};
use gapstream_protocol::suite::{KexMode, Suite};
use gapstream_protocol::test_rng::TestRng;
use gapstream_protocol::wire::{self, FrameHeader, MsgType, PixelFormat, SessionId};

/// Seed of the fixed pairing (one drone, two receivers).
pub const PAIRING_SEED: u64 = 0x5EED;
/// Clock of the snapshots' start.
pub const START_NS: u64 = 1_000_000_000;
/// Most operations run per input (inputs stay quick whatever their length).
pub const MAX_OPS: usize = 512;

/// The fixed pairing: the drone's identity and its two receivers'.
pub fn pairing() -> &'static (DroneIdentity, Vec<Identity>) {
    static P: OnceLock<(DroneIdentity, Vec<Identity>)> = OnceLock::new();
    P.get_or_init(|| gapstream_protocol::pair_group(&mut TestRng::new(PAIRING_SEED), 2))
}

/// Who controls which way of the network.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Side {
    /// `drone_session`: the fuzzer holds the receivers' messages to the drone.
    Drone,
    /// `receiver_session`: the fuzzer holds the drone's messages to receiver 0.
    Receiver,
}

/// One step of an input.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Op {
    /// The clock moves `4^(n % 16) * 1024` ns (n % 16 = 0: not at all; 15: about 18 minutes).
    Advance(u8),
    /// The drone's timers (member timeouts, rekey policy, GROUP_KEY resends).
    DroneTimers,
    /// Receiver `i`'s timers (KEEPALIVE, grace windows, session timeout).
    ReceiverTimers(u8),
    /// The drone's timers, then a frame of `8 × (len % 16 + 1)` bytes (8 to 128) sealed and sent:
    /// small, as the session logic does not depend on the size and the ciphers' work on large
    /// payloads was most of an input's time.
    Seal(u8),
    /// Receiver `i` asks for a rekey.
    Rekey(u8),
    /// Receiver `i` closes its session.
    Close(u8),
    /// The drone closes every session.
    DroneClose,
    /// The message at the head of a queue the fuzzer holds (`up`: receiver `i` → drone; else drone
    /// → receiver `i`), `how & 3`: 0 delivered as a message, 1 as CPX bytes (packets of 1020, 200,
    /// 64 or 17 bytes by `how >> 2 & 3`; as datagrams when `how & 16`), 2 dropped, 3 delivered twice.
    Deliver { up: bool, i: u8, how: u8 },
    /// The head message with byte `pos % len` XORed with `xor`, delivered as a message.
    Mutate { up: bool, i: u8, pos: u16, xor: u8 },
    /// A message sent earlier (setup included), delivered again as a message.
    Replay { up: bool, i: u8, idx: u16 },
    /// A control message of receiver `i`'s session sealed under its real key of that direction,
    /// with the fuzzer's type (`ty % 5`: GROUP_KEY, KEY_ACK, REKEY_REQUEST, KEEPALIVE, CLOSE),
    /// sequence number and body (at most 64 bytes).
    ForgeControl {
        up: bool,
        i: u8,
        ty: u8,
        seq: u64,
        body: Vec<u8>,
    },
    /// A frame to receiver `i` sealed under a real epoch key (`epoch`-th known), with the fuzzer's
    /// sequence number, suite byte and length: what a group member could send.
    ForgeFrame {
        i: u8,
        epoch: u8,
        seq: u64,
        suite: u8,
        len: u8,
    },
    /// Bytes of the fuzzer's, as a message or (`cpx`) as CPX stream bytes.
    Raw {
        up: bool,
        i: u8,
        cpx: bool,
        bytes: Vec<u8>,
    },
    /// Everything queued delivered in order, both ways, until quiet (a clean network).
    Pump,
}

impl Op {
    const KINDS: u8 = 14;
}

fn take_bytes(u: &mut Unstructured<'_>, max: usize) -> arbitrary::Result<Vec<u8>> {
    let n = usize::from(u.arbitrary::<u8>()?).min(max).min(u.len());
    Ok(u.bytes(n)?.to_vec())
}

impl<'a> Arbitrary<'a> for Op {
    fn arbitrary(u: &mut Unstructured<'a>) -> arbitrary::Result<Self> {
        let tag = u.arbitrary::<u8>()? % Op::KINDS;
        let b = |u: &mut Unstructured<'a>| u.arbitrary::<u8>();
        Ok(match tag {
            0 => Op::Advance(b(u)?),
            1 => Op::DroneTimers,
            2 => Op::ReceiverTimers(b(u)?),
            3 => Op::Seal(b(u)?),
            4 => Op::Rekey(b(u)?),
            5 => Op::Close(b(u)?),
            6 => Op::DroneClose,
            7 => Op::Deliver {
                up: u.arbitrary()?,
                i: b(u)?,
                how: b(u)?,
            },
            8 => Op::Mutate {
                up: u.arbitrary()?,
                i: b(u)?,
                pos: u.arbitrary()?,
                xor: b(u)?,
            },
            9 => Op::Replay {
                up: u.arbitrary()?,
                i: b(u)?,
                idx: u.arbitrary()?,
            },
            10 => Op::ForgeControl {
                up: u.arbitrary()?,
                i: b(u)?,
                ty: b(u)?,
                seq: u.arbitrary()?,
                body: take_bytes(u, wire::MAX_CONTROL_BODY)?,
            },
            11 => Op::ForgeFrame {
                i: b(u)?,
                epoch: b(u)?,
                seq: u.arbitrary()?,
                suite: b(u)?,
                len: b(u)?,
            },
            12 => Op::Raw {
                up: u.arbitrary()?,
                i: b(u)?,
                cpx: u.arbitrary()?,
                bytes: take_bytes(u, 255)?,
            },
            _ => Op::Pump,
        })
    }
}

impl Op {
    /// The bytes [`Op::arbitrary`] reads back as this operation (the seed generator writes them).
    pub fn encode(&self, out: &mut Vec<u8>) {
        let bytes = |out: &mut Vec<u8>, b: &[u8]| {
            out.push(b.len() as u8);
            out.extend_from_slice(b);
        };
        match self {
            Op::Advance(n) => out.extend([0, *n]),
            Op::DroneTimers => out.push(1),
            Op::ReceiverTimers(i) => out.extend([2, *i]),
            Op::Seal(n) => out.extend([3, *n]),
            Op::Rekey(i) => out.extend([4, *i]),
            Op::Close(i) => out.extend([5, *i]),
            Op::DroneClose => out.push(6),
            Op::Deliver { up, i, how } => out.extend([7, *up as u8, *i, *how]),
            Op::Mutate { up, i, pos, xor } => {
                out.extend([8, *up as u8, *i]);
                out.extend(pos.to_le_bytes());
                out.push(*xor);
            }
            Op::Replay { up, i, idx } => {
                out.extend([9, *up as u8, *i]);
                out.extend(idx.to_le_bytes());
            }
            Op::ForgeControl {
                up,
                i,
                ty,
                seq,
                body,
            } => {
                out.extend([10, *up as u8, *i, *ty]);
                out.extend(seq.to_le_bytes());
                bytes(out, body);
            }
            Op::ForgeFrame {
                i,
                epoch,
                seq,
                suite,
                len,
            } => {
                out.extend([11, *i, *epoch]);
                out.extend(seq.to_le_bytes());
                out.extend([*suite, *len]);
            }
            Op::Raw {
                up,
                i,
                cpx,
                bytes: b,
            } => {
                out.extend([12, *up as u8, *i, *cpx as u8]);
                bytes(out, b);
            }
            Op::Pump => out.push(13),
        }
    }
}

/// A snapshot's receivers' configurations: what each offers.
fn receiver_configs(suites: [&[Suite]; 2]) -> [ReceiverConfig; 2] {
    suites.map(|s| ReceiverConfig {
        suites: s.to_vec(),
        modes: vec![KexMode::X25519],
        keylog: true,
        ..ReceiverConfig::default()
    })
}

fn drone_config() -> DroneConfig {
    DroneConfig {
        policy: DronePolicy {
            suites: SuiteSet::all(),
            modes: KexSet::all(),
        },
        rekey_after_frames: 6,
        keylog: true,
        ..DroneConfig::default()
    }
}

const UP: Route = Route::new(Target::WifiHost, Target::Gap8, GAPSTREAM_FUNCTION);
const DOWN: Route = Route::new(Target::Gap8, Target::WifiHost, GAPSTREAM_FUNCTION);

/// `msg` as CPX wire packets of at most `per` payload bytes.
fn packets(msg: &[u8], per: usize, route: Route) -> Vec<Vec<u8>> {
    let mut p = Packetizer::new(route, [msg, &[], &[]], per, LastFlag::Final).expect("packet size");
    let mut out = Vec::new();
    let mut buf = [0u8; MAX_WIRE_PACKET];
    while let Some(r) = p.next_packet(&mut buf) {
        out.push(buf[..r.expect("fits")].to_vec());
    }
    out
}

/// The drone, two receivers, the network between them and what the harness learned.
pub struct World {
    pub drone: DroneConnection,
    pub rxs: Vec<ReceiverConnection>,
    offered: Vec<Vec<Suite>>,
    rng: TestRng,
    now: u64,
    /// Messages on their way: drone → receiver `i`, receiver `i` → drone.
    down: Vec<VecDeque<Vec<u8>>>,
    up: Vec<VecDeque<Vec<u8>>>,
    /// Every message sent so far (for replays; the snapshot's HELLOs and ACCEPTs among them).
    pub recorded: Vec<Vec<u8>>,
    /// Control keys by session id, from the receivers' key logs.
    session_keys: BTreeMap<SessionId, SessionKeys>,
    /// The frame keys of every epoch, from the drone's key log.
    epoch_keys: BTreeMap<u32, GroupKeys>,
    nonces: HashSet<(Vec<u8>, [u8; 12])>,
    delivered: Vec<HashSet<(u32, u64)>>,
    /// Responder handshakes the drone did before the input: none may follow (`None` while a
    /// snapshot is made).
    handshakes_before: Option<u64>,
    pub frames_sealed: u64,
    pub frames_delivered: Vec<u64>,
}

impl World {
    /// A copy for one input.
    pub fn fork(&self) -> World {
        World {
            drone: self.drone.fork(),
            rxs: self
                .rxs
                .iter()
                .map(|r| {
                    r.fork()
                        .expect("the snapshots' receivers are not handshaking")
                })
                .collect(),
            offered: self.offered.clone(),
            rng: TestRng::new(self.now),
            now: self.now,
            down: self.down.clone(),
            up: self.up.clone(),
            recorded: self.recorded.clone(),
            session_keys: self.session_keys.clone(),
            epoch_keys: self.epoch_keys.clone(),
            nonces: self.nonces.clone(),
            delivered: self.delivered.clone(),
            handshakes_before: Some(self.drone.session().counters().responder_handshakes),
            frames_sealed: self.frames_sealed,
            frames_delivered: self.frames_delivered.clone(),
        }
    }

    /// A drone and two receivers that handshake (real X25519, once per process), stream and
    /// stop wherever `script` leaves them.
    fn new(suites: [&[Suite]; 2]) -> World {
        let (d, rs) = pairing();
        let cfgs = receiver_configs(suites);
        let mut w = World {
            drone: DroneConnection::new(d.clone(), drone_config()).expect("packet size"),
            rxs: rs
                .iter()
                .zip(cfgs.iter())
                .map(|(r, c)| ReceiverConnection::new(r.clone(), c.clone()).expect("size"))
                .collect(),
            offered: cfgs.iter().map(|c| c.suites.clone()).collect(),
            rng: TestRng::new(0xD0),
            now: START_NS,
            down: vec![VecDeque::new(); 2],
            up: vec![VecDeque::new(); 2],
            recorded: Vec::new(),
            session_keys: BTreeMap::new(),
            epoch_keys: BTreeMap::new(),
            nonces: HashSet::new(),
            delivered: vec![HashSet::new(); 2],
            handshakes_before: None,
            frames_sealed: 0,
            frames_delivered: vec![0; 2],
        };
        for i in 0..2 {
            w.connect(i);
            w.pump();
        }
        w
    }

    fn clock(&self) -> impl Fn() -> u64 + use<> {
        let now = self.now;
        move || now
    }

    /// Receiver `i` connects (a handshake: snapshots only).
    fn connect(&mut self, i: usize) {
        let c = self.clock();
        self.rxs[i].connect(&mut self.rng, &c).expect("connect");
        self.collect();
    }

    /// Moves what the sides queued into the network, learns the keys from the key logs, and
    /// checks the drone's bounds.
    fn collect(&mut self) {
        let drone = self.drone.session_mut();
        let mut n = 0;
        while let Some(m) = drone.poll_transmit() {
            n += 1;
            self.recorded.push(m.clone());
            for q in &mut self.down {
                q.push_back(m.clone());
            }
        }
        assert!(n <= MAX_OUTBOX, "{n} messages queued");
        while let Some(l) = drone.drain_keylog() {
            self.epoch_keys.entry(l.group.epoch).or_insert(l.group);
        }
        let max = drone.config().max_receivers;
        assert!(drone.members() <= max);
        assert!(drone.sessions().count() <= MAX_SESSIONS_PER_RECEIVER * max);
        if let Some(before) = self.handshakes_before {
            assert_eq!(
                drone.counters().responder_handshakes,
                before,
                "a responder handshake (no HELLO of an input is fresh with a good MAC)"
            );
        }
        for (i, rx) in self.rxs.iter_mut().enumerate() {
            let s = rx.session_mut();
            while let Some(m) = s.poll_transmit() {
                self.recorded.push(m.clone());
                self.up[i].push_back(m);
            }
            while let Some(l) = s.drain_keylog() {
                self.session_keys.insert(l.session, l.session_keys);
            }
        }
        // Bounded replay pool (inputs stay quick).
        if self.recorded.len() > 4096 {
            self.recorded.drain(..2048);
        }
    }

    fn on_receiver_result(
        &mut self,
        i: usize,
        r: Result<Option<ReceiverEvent>, gapstream_protocol::session::Rejected>,
    ) {
        let Ok(Some(ReceiverEvent::Frame(f))) = r else {
            return;
        };
        let h = f.header;
        assert_eq!(f.pixels().len(), h.payload_len as usize);
        let suite = Suite::from_u8(h.suite).expect("a delivered frame has a known suite");
        assert!(
            self.offered[i].contains(&suite),
            "{suite:?} was not offered"
        );
        assert_eq!(f.authenticated, suite.is_authenticated());
        assert!(
            self.delivered[i].insert((h.epoch, h.sequence)),
            "frame delivered twice to receiver {i}: epoch {} sequence {}",
            h.epoch,
            h.sequence
        );
        self.frames_delivered[i] += 1;
    }

    /// `m` to receiver `i` (`cpx`: CPX bytes in packets of `per`, as datagrams when `dgram`).
    fn deliver_to_receiver(&mut self, i: usize, m: &[u8], cpx: Option<(usize, bool)>) {
        let c = self.clock();
        let k = &mut Sequential;
        match cpx {
            None => {
                let r = self.rxs[i]
                    .session_mut()
                    .handle_message(k, &mut self.rng, &c, m.to_vec());
                self.on_receiver_result(i, r);
            }
            Some((per, dgram)) => {
                for p in packets(m, per, DOWN) {
                    if dgram {
                        self.rxs[i].read_datagram(&p, |_| {});
                    } else {
                        self.rxs[i].read_stream(&p, |_| {});
                    }
                }
                while self.rxs[i].has_message() {
                    let r = self.rxs[i].process_message(k, &mut self.rng, &c);
                    self.on_receiver_result(i, r);
                }
            }
        }
    }

    fn deliver_to_drone(&mut self, m: &[u8], cpx: Option<(usize, bool)>) {
        let c = self.clock();
        let k = &mut Sequential;
        match cpx {
            None => {
                let _ = self
                    .drone
                    .session_mut()
                    .handle_message(k, &mut self.rng, &c, m);
            }
            Some((per, dgram)) => {
                for p in packets(m, per, UP) {
                    if dgram {
                        self.drone.read_datagram(&p, |_| {});
                    } else {
                        self.drone.read_stream(&p, |_| {});
                    }
                }
                while self.drone.has_message() {
                    let _ = self.drone.process_message(k, &mut self.rng, &c);
                }
            }
        }
    }

    /// Delivers everything queued, both ways, in order, until quiet.
    pub fn pump(&mut self) {
        for _ in 0..16 {
            self.collect();
            let mut moved = false;
            for i in 0..self.rxs.len() {
                while let Some(m) = self.up[i].pop_front() {
                    moved = true;
                    self.deliver_to_drone(&m, None);
                }
            }
            self.collect();
            for i in 0..self.rxs.len() {
                while let Some(m) = self.down[i].pop_front() {
                    moved = true;
                    self.deliver_to_receiver(i, &m, None);
                }
            }
            if !moved {
                return;
            }
        }
        self.collect();
    }

    /// The drone's timers, then a frame of `n` bytes sealed and queued for both receivers.
    pub fn seal(&mut self, n: usize) {
        let c = self.clock();
        let k = &mut Sequential;
        self.drone.handle_timeout(k, &mut self.rng, &c);
        self.collect();
        let mut p: Vec<u8> = (0..n).map(|x| (x as u8).wrapping_mul(31)).collect();
        let meta = FrameMeta {
            pixel_format: PixelFormat::Grey8,
            width: 8,
            height: (n / 8) as u16,
            capture_ns: self.now,
            state: None,
        };
        let Ok(s) = self.drone.seal_frame(k, &c, meta, &mut p) else {
            return;
        };
        self.collect();
        self.frames_sealed += 1;
        let h = FrameHeader::decode(&s.header).expect("the drone's own header decodes");
        if let Some(g) = self.epoch_keys.get(&h.epoch) {
            let fresh = self.nonces.insert((
                g.frame.key.key().to_vec(),
                wire::nonce(&g.frame.iv.0, h.sequence),
            ));
            assert!(
                fresh,
                "nonce reused: epoch {} sequence {}",
                h.epoch, h.sequence
            );
        }
        let mut m = s.header.to_vec();
        m.extend_from_slice(&p);
        m.extend_from_slice(s.tag());
        self.recorded.push(m.clone());
        for q in &mut self.down {
            q.push_back(m.clone());
        }
    }

    /// The session id receiver `i` runs (or ran last).
    fn session_of(&self, i: usize) -> Option<SessionId> {
        self.rxs[i].session().session_id()
    }

    /// Runs one operation. `side` says which way of the network the fuzzer holds: the other one
    /// is delivered in order after every operation.
    pub fn step(&mut self, side: Side, op: &Op) {
        let n = self.rxs.len();
        let k = &mut Sequential;
        let c = self.clock();
        // Only the held way is the fuzzer's to deliver, drop or alter.
        let held = |up: bool, i: usize| match side {
            Side::Drone => up,
            Side::Receiver => !up && i == 0,
        };
        match op {
            Op::Advance(x) => {
                let s = x % 16;
                if s > 0 {
                    self.now = self.now.saturating_add(1 << (2 * u32::from(s) + 10));
                }
            }
            Op::DroneTimers => {
                self.drone.handle_timeout(k, &mut self.rng, &c);
            }
            Op::ReceiverTimers(i) => {
                let i = usize::from(*i) % n;
                let _ = self.rxs[i].handle_timeout(k, &mut self.rng, &c);
            }
            Op::Seal(len) => self.seal(8 * (usize::from(*len % 16) + 1)),
            Op::Rekey(i) => {
                let _ = self.rxs[usize::from(*i) % n].request_rekey(k);
            }
            Op::Close(i) => self.rxs[usize::from(*i) % n].close(k),
            Op::DroneClose => self.drone.close(k),
            Op::Deliver { up, i, how } => {
                let i = usize::from(*i) % n;
                if held(*up, i) {
                    let q = if *up {
                        &mut self.up[i]
                    } else {
                        &mut self.down[i]
                    };
                    if let Some(m) = q.pop_front() {
                        let per = [1020, 200, 64, 17][usize::from(how >> 2 & 3)];
                        let cpx = Some((per, how & 16 != 0));
                        let times = match how & 3 {
                            0 | 1 => 1,
                            2 => 0,
                            _ => 2,
                        };
                        for _ in 0..times {
                            let via = if how & 3 == 1 { cpx } else { None };
                            if *up {
                                self.deliver_to_drone(&m, via);
                            } else {
                                self.deliver_to_receiver(i, &m, via);
                            }
                        }
                    }
                }
            }
            Op::Mutate { up, i, pos, xor } => {
                let i = usize::from(*i) % n;
                if held(*up, i) {
                    let q = if *up {
                        &mut self.up[i]
                    } else {
                        &mut self.down[i]
                    };
                    if let Some(mut m) = q.pop_front() {
                        if !m.is_empty() {
                            let p = usize::from(*pos) % m.len();
                            m[p] ^= xor;
                        }
                        if *up {
                            self.deliver_to_drone(&m, None);
                        } else {
                            self.deliver_to_receiver(i, &m, None);
                        }
                    }
                }
            }
            Op::Replay { up, i, idx } => {
                let i = usize::from(*i) % n;
                if !self.recorded.is_empty() {
                    let m = self.recorded[usize::from(*idx) % self.recorded.len()].clone();
                    if *up {
                        self.deliver_to_drone(&m, None);
                    } else {
                        self.deliver_to_receiver(i, &m, None);
                    }
                }
            }
            Op::ForgeControl {
                up,
                i,
                ty,
                seq,
                body,
            } => {
                let i = usize::from(*i) % n;
                let keys = self
                    .session_of(i)
                    .and_then(|id| Some((id, self.session_keys.get(&id)?.clone())));
                if let Some((id, keys)) = keys {
                    let t = [
                        MsgType::GroupKey,
                        MsgType::KeyAck,
                        MsgType::RekeyRequest,
                        MsgType::Keepalive,
                        MsgType::Close,
                    ][usize::from(*ty % 5)];
                    let key = if *up {
                        &keys.r2d_control
                    } else {
                        &keys.d2r_control
                    };
                    let mut out = [0u8; 128];
                    if let Ok(len) = frame::seal_control(k, key, t, id, *seq, body, &mut out) {
                        if *up {
                            self.deliver_to_drone(&out[..len], None);
                        } else {
                            self.deliver_to_receiver(i, &out[..len], None);
                        }
                    }
                }
            }
            Op::ForgeFrame {
                i,
                epoch,
                seq,
                suite,
                len,
            } => {
                let i = usize::from(*i) % n;
                if !self.epoch_keys.is_empty() {
                    let e = usize::from(*epoch) % self.epoch_keys.len();
                    let g = self.epoch_keys.values().nth(e).expect("in range").clone();
                    let n_px = usize::from(*len);
                    let h = FrameHeader {
                        suite: *suite,
                        pixel_format: PixelFormat::Grey8.code(),
                        width: 1,
                        height: n_px as u16,
                        epoch: g.epoch,
                        sequence: *seq,
                        capture_ns: self.now,
                        payload_len: n_px as u32,
                        state: None,
                    };
                    let mut p = vec![0x5a; n_px];
                    if let Ok(s) = frame::seal_frame(k, &g.frame, &h, &mut p) {
                        let mut m = s.header.to_vec();
                        m.extend_from_slice(&p);
                        m.extend_from_slice(s.tag());
                        self.deliver_to_receiver(i, &m, None);
                    }
                }
            }
            Op::Raw { up, i, cpx, bytes } => {
                let i = usize::from(*i) % n;
                match (*up, *cpx) {
                    (true, false) => self.deliver_to_drone(bytes, None),
                    (false, false) => self.deliver_to_receiver(i, bytes, None),
                    (true, true) => {
                        self.drone.read_stream(bytes, |_| {});
                        while self.drone.has_message() {
                            let _ = self.drone.process_message(k, &mut self.rng, &c);
                        }
                    }
                    (false, true) => {
                        self.rxs[i].read_stream(bytes, |_| {});
                        while self.rxs[i].has_message() {
                            let r = self.rxs[i].process_message(k, &mut self.rng, &c);
                            self.on_receiver_result(i, r);
                        }
                    }
                }
            }
            Op::Pump => self.pump(),
        }
        self.collect();
        // The way the fuzzer does not hold runs as sent.
        match side {
            Side::Drone => {
                for i in 0..n {
                    while let Some(m) = self.down[i].pop_front() {
                        self.deliver_to_receiver(i, &m, None);
                    }
                }
            }
            Side::Receiver => {
                while let Some(m) = self.down[1].pop_front() {
                    self.deliver_to_receiver(1, &m, None);
                }
                for i in 0..n {
                    while let Some(m) = self.up[i].pop_front() {
                        self.deliver_to_drone(&m, None);
                    }
                }
            }
        }
        self.collect();
    }
}

/// A named starting point of the session targets.
pub struct Snapshot {
    pub name: &'static str,
    pub world: World,
}

/// The snapshots, made once per process (the only handshakes of a fuzzing run):
///
/// 0. `chacha20poly1305`: two receivers in a ChaCha20-Poly1305 group, frames flowing, a rekey
///    done;
/// 1. `reconnect`: the same, then receiver 0 reconnected: its new session is a candidate on the
///    drone (its KEY_ACK not delivered yet), next to its confirmed one;
/// 2. `aes128gcm-rekey`: an AES-128-GCM group with a rekey in flight (GROUP_KEYs queued);
/// 3. `unauthenticated`: a ChaCha20 (unauthenticated) group, where anyone can forge frames.
pub fn snapshots() -> &'static [Snapshot] {
    static S: OnceLock<Vec<Snapshot>> = OnceLock::new();
    S.get_or_init(|| {
        let stream = |w: &mut World, frames: usize| {
            for _ in 0..frames {
                w.now += 33_000_000;
                w.seal(64);
                w.pump();
            }
        };
        let cc = [Suite::ChaCha20Poly1305];
        let mut a = World::new([&[Suite::ChaCha20Poly1305, Suite::Aes128Gcm], &cc]);
        stream(&mut a, 8);
        let mut b = a.fork();
        b.handshakes_before = None;
        b.now += 1_100_000_000;
        b.connect(0);
        // The HELLO reaches the drone; its ACCEPT and GROUP_KEY reach the receiver; the receiver's
        // KEY_ACK waits in the network.
        let hello = b.up[0].pop_front().expect("a HELLO");
        b.deliver_to_drone(&hello, None);
        b.collect();
        while let Some(m) = b.down[0].pop_front() {
            b.deliver_to_receiver(0, &m, None);
        }
        b.down[1].clear();
        b.collect();
        let gcm = [Suite::Aes128Gcm];
        let mut c = World::new([&[Suite::Aes128Gcm, Suite::ChaCha20Poly1305], &gcm]);
        stream(&mut c, 5);
        let _ = c.rxs[1].request_rekey(&mut Sequential);
        c.collect();
        let up = c.up[1].pop_front().expect("REKEY_REQUEST");
        c.deliver_to_drone(&up, None);
        c.collect();
        let un = [Suite::ChaCha20Unauthenticated];
        let mut d = World::new([&un, &un]);
        stream(&mut d, 4);
        vec![
            Snapshot {
                name: "chacha20poly1305",
                world: a,
            },
            Snapshot {
                name: "reconnect",
                world: b,
            },
            Snapshot {
                name: "aes128gcm-rekey",
                world: c,
            },
            Snapshot {
                name: "unauthenticated",
                world: d,
            },
        ]
    })
}

/// Runs an input: `snapshot u8`, then operations ([`Op`]) until the input ends or [`MAX_OPS`].
pub fn run(side: Side, data: &[u8]) -> World {
    let mut u = Unstructured::new(data);
    let snaps = snapshots();
    let pick = usize::from(u.arbitrary::<u8>().unwrap_or(0)) % snaps.len();
    let mut w = snaps[pick].world.fork();
    for _ in 0..MAX_OPS {
        if u.is_empty() {
            break;
        }
        let Ok(op) = Op::arbitrary(&mut u) else { break };
        w.step(side, &op);
    }
    w
}

/// `drone_session`: the fuzzer holds what the receivers send the drone.
pub fn drone_session(data: &[u8]) {
    run(Side::Drone, data);
}

/// `receiver_session`: the fuzzer holds what the drone sends receiver 0.
pub fn receiver_session(data: &[u8]) {
    run(Side::Receiver, data);
}
