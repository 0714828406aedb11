//! Both protocol connections fed untrusted bytes: [`DroneHarness`] plays the drone (what receivers
//! send comes from the fuzzer), [`ReceiverHarness`] a receiver (what the drone sends comes from the
//! fuzzer). Each is the role's `Connection` (deframer, reassembler, session), as the drone and the
//! receivers run it; whole messages go to its session directly. Everything is deterministic (fixed pairing, `TestRng`, a clock moved by the input), so
//! the seeds recorded from a real exchange ([`crate::seeds`]) replay to an established session and
//! the fuzzer mutates from there.
//!
//! Records (`ctl u8, len u16, body`, see [`crate::Input::record`]): `ctl` bits 0-2 pick the
//! operation, bits 3-6 advance the clock by `4^n * 1024` ns (n = 0: not at all; n = 15: about 18
//! minutes), bit 7 runs the session's timers after the operation.

use std::cell::Cell;
use std::collections::{HashMap, HashSet};
use std::sync::OnceLock;

use gap_rust_cipher_s::Sequential;
use gapstream_protocol::connection::{DroneConnection, ReceiverConnection};
use gapstream_protocol::frame::FrameMeta;
use gapstream_protocol::handshake::{DroneIdentity, DronePolicy, Identity, KexSet, SuiteSet};
use gapstream_protocol::rsa_oaep::Decryptor;
use gapstream_protocol::session::{DroneConfig, MAX_OUTBOX, ReceiverConfig, ReceiverEvent};
use gapstream_protocol::suite::{KexMode, Suite};
use gapstream_protocol::test_rng::TestRng;
use gapstream_protocol::wire::{self, FrameHeader, PixelFormat};

use crate::Input;

/// Seed of the fixed pairing (one drone, two receivers).
pub const PAIRING_SEED: u64 = 0x5EED;
/// Seed of the drone harness's generator.
pub const DRONE_RNG_SEED: u64 = 0xD0;
/// Seed of the receiver harness's generator.
pub const RECEIVER_RNG_SEED: u64 = 0xA0;
/// Clock at the start of every run.
pub const START_NS: u64 = 1_000_000_000;

/// Operations of a record (`ctl & 7`).
pub mod op {
    /// Drone and receiver: the body is one whole message.
    pub const MESSAGE: u8 = 0;
    /// Drone and receiver: the body is CPX wire bytes (the connection: deframer, reassembler,
    /// session).
    pub const CPX: u8 = 1;
    /// Drone: seal a frame of the body's bytes. Receiver: ask for a rekey.
    pub const SEAL_OR_REKEY: u8 = 2;
    /// Both: close the session.
    pub const CLOSE: u8 = 3;
    /// Drone: timers only. Receiver: connect again (new HELLO).
    pub const TIMERS_OR_CONNECT: u8 = 4;
    /// Receiver: timers only.
    pub const TIMERS: u8 = 5;
    /// `ctl` bit: run the timers after the operation.
    pub const THEN_TIMERS: u8 = 0x80;
    /// `ctl` for `op` after advancing the clock by `4^n * 1024` ns (n in 0..16).
    pub const fn ctl(op: u8, n: u8) -> u8 {
        op | (n & 15) << 3
    }
}

fn advance_ns(ctl: u8) -> u64 {
    match (ctl >> 3) & 15 {
        0 => 0,
        n => 1u64 << (2 * n as u32 + 10),
    }
}

/// The fixed pairing: the drone's identity and its two receivers'.
pub fn pairing() -> &'static (DroneIdentity, Vec<Identity>) {
    static P: OnceLock<(DroneIdentity, Vec<Identity>)> = OnceLock::new();
    P.get_or_init(|| gapstream_protocol::pair_group(&mut TestRng::new(PAIRING_SEED), 2))
}

/// An RSA-2048 key for the RSA-OAEP mode: the protocol crate's test key (made with
/// `openssl genrsa 2048` for tests; e = 65537), never a real key.
pub fn rsa_key() -> &'static Decryptor {
    const P: &str = "b7fae7de7508b9f611a7c00cf74c71035746a51368f562481c50f1d76b6785c751e5a57131a106b7f4625109e6004858\
         1f00fbb9ec304e09e107b42e46a9ef802e0edd1762f6680f3acbf089690b04b1ac5573b4fb2dcb499ebf37f2e4dfd7b4\
         5ac3bfdabf8b1371dd7a31757537d4bc6469b3fef22cfd089277b5726a14f699";
    const Q: &str = "b6a4d27964d822ab3a95adbe5d8451c591ed8f9072e72b574be6e7fc6e62b423c7a2ed453981ef2e21413269dd53fa83\
         f7bfd850deb46c3dfe8b77ab266c547279816bfaf1724552ac9719b78d3a6a9ecf4f4ddf976ec8026a1d9c474f4afe12\
         63da98a6b9bb4b7ba543be7f1f182f13573e1fe35d3a705776e5328514e54803";
    fn unhex(s: &str) -> Vec<u8> {
        (0..s.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&s[i..i + 2], 16).expect("hex"))
            .collect()
    }
    static K: OnceLock<Decryptor> = OnceLock::new();
    K.get_or_init(|| Decryptor::from_primes(&unhex(P), &unhex(Q)).expect("test RSA key"))
}

/// The drone configuration for the selector byte: bit 0 rekeys every 3 frames, bit 1 serves a
/// single receiver. Every suite and mode is allowed (the receivers' seeds pick one), key log on.
pub fn drone_config(sel: u8) -> DroneConfig {
    let d = DroneConfig::default();
    DroneConfig {
        policy: DronePolicy {
            suites: SuiteSet::all(),
            modes: KexSet::all(),
        },
        rekey_after_frames: if sel & 1 != 0 {
            3
        } else {
            d.rekey_after_frames
        },
        max_receivers: if sel & 2 != 0 { 1 } else { d.max_receivers },
        keylog: true,
        ..d
    }
}

/// The receiver configuration for the selector byte (bits 0-1), and which paired receiver it is
/// (bit 2).
pub fn receiver_config(sel: u8) -> (ReceiverConfig, usize) {
    let (suites, modes) = match sel & 3 {
        0 => (
            vec![Suite::ChaCha20Poly1305, Suite::Aes128Gcm],
            vec![KexMode::X25519],
        ),
        1 => (vec![Suite::Aes128Gcm], vec![KexMode::P256]),
        2 => (
            vec![
                Suite::ChaCha20Unauthenticated,
                Suite::Aes128CtrUnauthenticated,
                Suite::None,
            ],
            vec![KexMode::X25519],
        ),
        _ => (vec![Suite::ChaCha20Poly1305], vec![KexMode::RsaOaep2048]),
    };
    let rsa_key = modes
        .contains(&KexMode::RsaOaep2048)
        .then(|| rsa_key().clone());
    let cfg = ReceiverConfig {
        suites,
        modes,
        rsa_key,
        ..ReceiverConfig::default()
    };
    (cfg, usize::from(sel & 4 != 0))
}

/// The drone side.
pub struct DroneHarness {
    pub conn: DroneConnection,
    rng: TestRng,
    now: Cell<u64>,
    /// Group frame key and IV per epoch, from the key log.
    epoch_keys: HashMap<u32, (Vec<u8>, [u8; 12])>,
    /// (frame key, nonce) of every frame sealed.
    nonces: HashSet<(Vec<u8>, [u8; 12])>,
    /// Keep what the drone sends (the seed generator reads it).
    pub keep_output: bool,
    pub output: Vec<Vec<u8>>,
    pub frames_sealed: u64,
}

impl DroneHarness {
    pub fn new(sel: u8) -> Self {
        DroneHarness {
            conn: DroneConnection::new(pairing().0.clone(), drone_config(sel))
                .expect("the default packet size"),
            rng: TestRng::new(DRONE_RNG_SEED),
            now: Cell::new(START_NS),
            epoch_keys: HashMap::new(),
            nonces: HashSet::new(),
            keep_output: false,
            output: Vec::new(),
            frames_sealed: 0,
        }
    }

    pub fn now(&self) -> u64 {
        self.now.get()
    }

    fn handle(&mut self, msg: &[u8]) {
        let now = self.now.get();
        let _ = self.conn.session_mut().handle_message(
            &mut Sequential,
            &mut self.rng,
            &move || now,
            msg,
        );
    }

    /// Runs one record.
    pub fn step(&mut self, ctl: u8, body: &[u8]) {
        self.now.set(self.now.get().saturating_add(advance_ns(ctl)));
        let now = self.now.get();
        match ctl & 7 {
            op::CPX => {
                self.conn.read_stream(body, |_| {});
                while self.conn.has_message() {
                    let _ = self
                        .conn
                        .process_message(&mut Sequential, &mut self.rng, &move || now);
                }
            }
            op::SEAL_OR_REKEY => self.seal(body),
            op::CLOSE => self.conn.close(&mut Sequential),
            op::TIMERS_OR_CONNECT => {}
            _ => self.handle(body),
        }
        if ctl & op::THEN_TIMERS != 0 || ctl & 7 == op::TIMERS_OR_CONNECT {
            self.conn
                .handle_timeout(&mut Sequential, &mut self.rng, &move || now);
        }
        self.drain();
    }

    /// What the drone sends, as whole messages (the seed generator records them).
    fn drain(&mut self) {
        let drone = self.conn.session_mut();
        while let Some(line) = drone.drain_keylog() {
            let f = &line.group.frame;
            self.epoch_keys
                .insert(line.group.epoch, (f.key.key().to_vec(), f.iv.0));
        }
        let mut n = 0;
        while let Some(m) = drone.poll_transmit() {
            n += 1;
            if self.keep_output {
                self.output.push(m);
            }
        }
        assert!(n <= MAX_OUTBOX, "{n} messages queued");
        assert!(drone.members() <= drone.config().max_receivers);
    }

    /// Seals `pixels` (at most 4 KiB) as one frame. Invariant: no (key, nonce) pair is ever used
    /// twice.
    fn seal(&mut self, pixels: &[u8]) {
        self.drain();
        let mut p = pixels[..pixels.len().min(4096)].to_vec();
        let meta = FrameMeta {
            pixel_format: PixelFormat::Grey8,
            width: 8,
            height: (p.len() / 8) as u16,
            capture_ns: self.now.get(),
            state: None,
        };
        let now = self.now.get();
        let Ok(s) = self
            .conn
            .seal_frame(&mut Sequential, &move || now, meta, &mut p)
        else {
            return;
        };
        self.frames_sealed += 1;
        let h = FrameHeader::decode(&s.header).expect("the drone's own header decodes");
        self.drain();
        if let Some((key, iv)) = self.epoch_keys.get(&h.epoch) {
            let fresh = self
                .nonces
                .insert((key.clone(), wire::nonce(iv, h.sequence)));
            assert!(
                fresh,
                "nonce reused: epoch {} sequence {}",
                h.epoch, h.sequence
            );
        }
        if self.keep_output {
            let mut m = s.header.to_vec();
            m.extend_from_slice(&p);
            m.extend_from_slice(s.tag());
            self.output.push(m);
        }
    }
}

/// `drone_session`: input `config selector u8` ([`drone_config`]), then records.
pub fn drone_session(data: &[u8]) {
    let mut i = Input::new(data);
    let mut h = DroneHarness::new(i.byte());
    while let Some((ctl, body)) = i.record() {
        h.step(ctl, body);
    }
}

/// The receiver side.
pub struct ReceiverHarness {
    pub conn: ReceiverConnection,
    suites: Vec<Suite>,
    rng: TestRng,
    now: Cell<u64>,
    /// (epoch, sequence) of every frame delivered.
    delivered: HashSet<(u32, u64)>,
    pub keep_output: bool,
    pub output: Vec<Vec<u8>>,
    pub events: Vec<ReceiverEvent>,
    pub frames: u64,
}

impl ReceiverHarness {
    /// A receiver that has just queued its first HELLO (in `output` when `keep_output`).
    pub fn new(sel: u8, keep_output: bool) -> Self {
        Self::with_rng_seed(sel, keep_output, RECEIVER_RNG_SEED)
    }

    /// The same with another generator (the seed generator's live receivers).
    pub fn with_rng_seed(sel: u8, keep_output: bool, seed: u64) -> Self {
        let (cfg, index) = receiver_config(sel);
        let suites = cfg.suites.clone();
        let mut h = ReceiverHarness {
            conn: ReceiverConnection::new(pairing().1[index].clone(), cfg)
                .expect("the default packet size"),
            suites,
            rng: TestRng::new(seed),
            now: Cell::new(START_NS),
            delivered: HashSet::new(),
            keep_output,
            output: Vec::new(),
            events: Vec::new(),
            frames: 0,
        };
        h.connect();
        h
    }

    pub fn now(&self) -> u64 {
        self.now.get()
    }

    fn connect(&mut self) {
        let now = self.now.get();
        let _ = self.conn.connect(&mut self.rng, &move || now);
        self.drain();
    }

    /// Hands the messages the receiver sent so far to the generator (they are kept only when
    /// `keep_output` is set).
    pub fn take_output(&mut self) -> Vec<Vec<u8>> {
        std::mem::take(&mut self.output)
    }

    /// A whole message (`None`: the next one the connection reassembled).
    fn handle(&mut self, msg: Option<Vec<u8>>) {
        let now = self.now.get();
        let (k, rng, clock) = (&mut Sequential, &mut self.rng, &move || now);
        let r = match msg {
            Some(m) => self.conn.session_mut().handle_message(k, rng, clock, m),
            None => self.conn.process_message(k, rng, clock),
        };
        let Ok(Some(ev)) = r else { return };
        if let ReceiverEvent::Frame(f) = &ev {
            let h = f.header;
            assert_eq!(f.pixels().len(), h.payload_len as usize);
            let suite = Suite::from_u8(h.suite).expect("a delivered frame has a known suite");
            assert!(self.suites.contains(&suite), "{suite:?} was not offered");
            assert_eq!(f.authenticated, suite.is_authenticated());
            let fresh = self.delivered.insert((h.epoch, h.sequence));
            assert!(
                fresh,
                "frame delivered twice: epoch {} sequence {}",
                h.epoch, h.sequence
            );
            self.frames += 1;
        }
        if self.keep_output {
            self.events.push(ev);
        }
    }

    /// Runs one record.
    pub fn step(&mut self, ctl: u8, body: &[u8]) {
        self.now.set(self.now.get().saturating_add(advance_ns(ctl)));
        let now = self.now.get();
        match ctl & 7 {
            op::CPX => {
                self.conn.read_stream(body, |_| {});
                while self.conn.has_message() {
                    self.handle(None);
                }
            }
            op::SEAL_OR_REKEY => {
                let _ = self.conn.request_rekey(&mut Sequential);
            }
            op::CLOSE => self.conn.close(&mut Sequential),
            op::TIMERS_OR_CONNECT => self.connect(),
            op::TIMERS => {}
            _ => self.handle(Some(body.to_vec())),
        }
        if ctl & op::THEN_TIMERS != 0 || ctl & 7 == op::TIMERS {
            let ev = self
                .conn
                .handle_timeout(&mut Sequential, &mut self.rng, &move || now);
            if let (Some(ev), true) = (ev, self.keep_output) {
                self.events.push(ev);
            }
        }
        self.drain();
    }

    /// What the receiver sends, as whole messages (the seed generator records them).
    fn drain(&mut self) {
        let rx = self.conn.session_mut();
        while let Some(m) = rx.poll_transmit() {
            if self.keep_output {
                self.output.push(m);
            }
        }
        while rx.drain_keylog().is_some() {}
    }
}

/// `receiver_session`: input `config selector u8` ([`receiver_config`]), then records.
pub fn receiver_session(data: &[u8]) {
    let mut i = Input::new(data);
    let mut h = ReceiverHarness::new(i.byte(), false);
    while let Some((ctl, body)) = i.record() {
        h.step(ctl, body);
    }
}
