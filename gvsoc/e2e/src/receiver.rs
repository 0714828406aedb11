//! The receiver of the end-to-end run: connects to the ESP32 stand-in's WiFi side (TCP, like a
//! deck's port 5000), runs `gapstream_protocol`'s `ReceiverConnection` — the protocol code the
//! `gapstream` receiver runs — and collects the verified frames.
//!
//! Why not `gapstream record`: the simulator runs some twenty times slower than real time, and
//! the `gapstream` receiver, made for real decks, re-sends its HELLO after 2 s and reconnects
//! after 3 s without data (wall-clock). Each new HELLO costs the simulated drone a whole
//! handshake (~19 M instructions), so it would never catch up. This receiver waits as long as the
//! run lasts; everything else (handshake, suites, frame opening, replay window) is the same code.

use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use gap_rust_cipher_s::Sequential;
use gapstream_drone::rng::DrbgRng;
use gapstream_drone::{Entropy, EntropyError};
use gapstream_protocol::connection::{Incoming, ReceiverConnection};
use gapstream_protocol::cpx::{
    GAPSTREAM_FUNCTION, LastFlag, Packetizer, Route, Target, WIRE_OVERHEAD,
};
use gapstream_protocol::handshake::Identity;
use gapstream_protocol::session::{ReceiverConfig, ReceiverEvent};
use gapstream_protocol::suite::{KexMode, Suite};
use gapstream_protocol::wire::{self, HandshakeHeader, MsgType};

/// The host's random numbers.
struct OsEntropy;

impl Entropy for OsEntropy {
    fn fill(&mut self, dest: &mut [u8]) -> Result<(), EntropyError> {
        getrandom::fill(dest).map_err(|_| EntropyError)
    }
}

fn unix_ns() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
}

/// A frame the receiver verified.
#[derive(Clone, Debug)]
pub struct Received {
    pub seq: u64,
    pub width: u16,
    pub height: u16,
    pub authenticated: bool,
    pub pixels: Vec<u8>,
    /// The header's PADDED flag: the payload was padded inside the AEAD (length-hiding padding;
    /// `pixels` is the payload with the padding taken off).
    pub padded: bool,
    /// The header's pixel format code (`wire::PixelFormat::code`: 0 grey, 3 JPEG, 4 JPEG-LS).
    pub pixel_format: u8,
    /// Bytes read from the stand-in's WiFi side up to this frame (all messages, CPX framing).
    pub wire_bytes: u64,
    /// The drone's state record from the frame's header (authenticated with it); None without
    /// one (or one this build cannot read).
    pub state: Option<gapstream_protocol::state::StateRecord>,
}

/// Mean bytes received per frame over the steady state (from the first frame's end to the last's):
/// the frame messages and what came between them. `None` below two frames.
pub fn bytes_per_frame(frames: &[Received]) -> Option<f64> {
    let (first, last) = (frames.first()?, frames.last()?);
    let n = frames.len().checked_sub(1).filter(|n| *n > 0)?;
    Some((last.wire_bytes - first.wire_bytes) as f64 / n as f64)
}

/// What the receiver saw.
#[derive(Clone, Debug, Default)]
pub struct RxResult {
    pub frames: Vec<Received>,
    pub handshake: Option<String>,
    /// The drone's boot counter, authenticated in its ACCEPT.
    pub drone_boot: Option<u32>,
    pub tag_failures: u64,
    pub replays: u64,
    pub lost: u64,
    pub rejected: u64,
    /// What the replay of an earlier session ([`RxConfig::replay`]) got.
    pub replay: Option<ReplayOutcome>,
    /// SET_QUALITY went out after this many verified frames ([`RxConfig::set_quality`]).
    pub quality_requested_after: Option<usize>,
}

/// The messages of a session that an attacker on the WiFi side could record: the receiver's HELLO
/// and its first KEY_ACK, and the drone's ACCEPT. Kept as `name hex` lines.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Recorded {
    pub hello: Vec<u8>,
    pub accept: Vec<u8>,
    pub key_ack: Vec<u8>,
}

impl Recorded {
    pub fn to_text(&self) -> String {
        let hex = |b: &[u8]| b.iter().map(|x| format!("{x:02x}")).collect::<String>();
        format!(
            "hello {}\naccept {}\nkey_ack {}\n",
            hex(&self.hello),
            hex(&self.accept),
            hex(&self.key_ack)
        )
    }

    pub fn from_text(text: &str) -> Result<Self, String> {
        let mut r = Recorded::default();
        for line in text.lines().filter(|l| !l.trim().is_empty()) {
            let (name, hex) = line
                .split_once(' ')
                .ok_or_else(|| format!("not `name hex`: {line}"))?;
            let bytes = (0..hex.len())
                .step_by(2)
                .map(|i| {
                    hex.get(i..i + 2)
                        .and_then(|h| u8::from_str_radix(h, 16).ok())
                        .ok_or_else(|| format!("bad hex in {name}"))
                })
                .collect::<Result<Vec<u8>, String>>()?;
            match name {
                "hello" => r.hello = bytes,
                "accept" => r.accept = bytes,
                "key_ack" => r.key_ack = bytes,
                other => return Err(format!("unknown message {other}")),
            }
        }
        if r.hello.is_empty() || r.key_ack.is_empty() {
            return Err("the recording lacks the HELLO or the KEY_ACK".into());
        }
        Ok(r)
    }
}

/// How the drone answered a replayed HELLO of an earlier boot, before its KEY_ACK was replayed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ReplayOutcome {
    /// A new ACCEPT (`same`: byte for byte the recorded one, which a drone whose randomness and
    /// boot counter repeat would send).
    Accept { same: bool },
    /// An ALERT with this code.
    Alert(u8),
    /// Nothing before the wait ended.
    Nothing,
}

/// Why the receiver gave up.
#[derive(Debug, thiserror::Error)]
pub enum RxError {
    #[error("could not connect to the ESP32 stand-in at {0} before the run ended")]
    NoConnection(SocketAddr),
    #[error("connection to the ESP32 stand-in: {0}")]
    Io(#[from] io::Error),
    #[error("the handshake failed: {0}")]
    Handshake(String),
    #[error("no entropy from the operating system")]
    Entropy,
}

/// Receiver settings.
pub struct RxConfig {
    pub addr: SocketAddr,
    pub identity: Identity,
    pub suite: Suite,
    pub mode: KexMode,
    /// Stop after this many verified frames.
    pub frames: usize,
    /// Set by the caller when the simulator has exited.
    pub stop: Arc<AtomicBool>,
    pub deadline: Instant,
    /// Keep this session's HELLO, ACCEPT and first KEY_ACK here.
    pub record: Option<std::path::PathBuf>,
    /// First replay an earlier session's HELLO (waiting for the drone's answer) and KEY_ACK, as
    /// an attacker who recorded them would, then run this receiver's own session.
    pub replay: Option<Recorded>,
    /// Send SET_QUALITY (control 0x24, the second value) once this many frames were verified.
    pub set_quality: Option<(usize, u8)>,
}

/// Reads from `sock` until `want` picks one of the messages `conn` reassembles (returned; the
/// others are taken past its session too) or the run ends.
fn read_until(
    sock: &mut TcpStream,
    conn: &mut ReceiverConnection,
    cfg: &RxConfig,
    mut want: impl FnMut(&[u8]) -> bool,
) -> Result<Option<Vec<u8>>, RxError> {
    let mut buf = vec![0u8; 4096];
    loop {
        if cfg.stop.load(Ordering::Relaxed) || Instant::now() > cfg.deadline {
            return Ok(None);
        }
        let n = match sock.read(&mut buf) {
            Ok(0) => return Ok(None),
            Ok(n) => n,
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                ) =>
            {
                continue;
            }
            Err(e) => return Err(e.into()),
        };
        conn.read_stream(&buf[..n], |_| {});
        let mut found = None;
        while let Some(m) = conn.take_message() {
            if found.is_none() && want(&m) {
                found = Some(m);
            }
        }
        if found.is_some() {
            return Ok(found);
        }
    }
}

/// The drone's answer to the HELLO `hello_id`: its ACCEPT or ALERT.
fn answers(msg: &[u8], hello_id: [u8; 8]) -> bool {
    match wire::parse_prefix(msg) {
        Ok(MsgType::Accept) => {
            HandshakeHeader::decode(msg).is_ok_and(|(h, _)| h.hello_id == hello_id)
        }
        Ok(MsgType::Alert) => wire::decode_alert(msg).is_ok_and(|(id, _)| id == hello_id),
        _ => false,
    }
}

/// Replays `rec` (HELLO, the drone's answer awaited, KEY_ACK) on `sock`, as an attacker would:
/// recorded bytes sent as they are, the answer read from the connection's deframer past its
/// session.
fn replay(
    sock: &mut TcpStream,
    conn: &mut ReceiverConnection,
    cfg: &RxConfig,
    rec: &Recorded,
) -> Result<ReplayOutcome, RxError> {
    let (hello, _) = HandshakeHeader::decode(&rec.hello)
        .map_err(|e| RxError::Handshake(format!("the recorded HELLO: {e}")))?;
    send_recorded(sock, &rec.hello)?;
    let answer = read_until(sock, conn, cfg, |m| answers(m, hello.hello_id))?;
    let outcome = match answer {
        None => ReplayOutcome::Nothing,
        Some(m) if wire::parse_prefix(&m) == Ok(MsgType::Alert) => {
            ReplayOutcome::Alert(wire::decode_alert(&m).map_or(0, |(_, c)| c))
        }
        Some(m) => ReplayOutcome::Accept {
            same: m == rec.accept,
        },
    };
    send_recorded(sock, &rec.key_ack)?;
    Ok(outcome)
}

/// Sends a recorded message as it is (the attacker's replay: no session sends it).
fn send_recorded(sock: &mut TcpStream, msg: &[u8]) -> io::Result<()> {
    let route = Route::new(Target::WifiHost, Target::Gap8, GAPSTREAM_FUNCTION);
    let mut p = Packetizer::new(route, [msg, &[], &[]], 1020, LastFlag::Final)
        .map_err(|e| io::Error::other(e.to_string()))?;
    let mut buf = [0u8; 1024];
    let mut out = Vec::new();
    while let Some(n) = p.next_packet(&mut buf) {
        let n = n.map_err(|e| io::Error::other(e.to_string()))?;
        out.extend_from_slice(&buf[..n]);
    }
    sock.write_all(&out)
}

/// What an attacker on the WiFi side records of this receiver's traffic: its packets, back into
/// messages (a connection sends one message at a time, its packets in order).
#[derive(Default)]
struct Tap(Vec<u8>);

impl Tap {
    /// One packet sent; the message when it was the last of one.
    fn packet(&mut self, p: &[u8]) -> Option<Vec<u8>> {
        let route = Route::from_bytes([*p.get(2)?, *p.get(3)?]).ok()?;
        self.0.extend_from_slice(p.get(WIRE_OVERHEAD..)?);
        route.last_packet.then(|| std::mem::take(&mut self.0))
    }
}

/// Sends what the connection queued (HELLO, KEY_ACK, KEEPALIVE) in one write, keeping the first
/// HELLO and KEY_ACK in `rec`.
fn flush(
    sock: &mut TcpStream,
    conn: &mut ReceiverConnection,
    tap: &mut Tap,
    rec: &mut Recorded,
) -> io::Result<()> {
    let mut out = Vec::new();
    while let Some(p) = conn.poll_transmit() {
        out.extend_from_slice(p);
        match tap.packet(p).map(|m| (wire::parse_prefix(&m), m)) {
            Some((Ok(MsgType::Hello), m)) if rec.hello.is_empty() => rec.hello = m,
            Some((Ok(MsgType::KeyAck), m)) if rec.key_ack.is_empty() => rec.key_ack = m,
            _ => {}
        }
    }
    if out.is_empty() {
        return Ok(());
    }
    sock.write_all(&out)
}

/// Connects (retrying until the stand-in listens), shakes hands and collects frames until
/// `cfg.frames` were verified, the simulator stopped, or the deadline passed.
pub fn receive(cfg: RxConfig) -> Result<RxResult, RxError> {
    let mut sock = loop {
        match TcpStream::connect_timeout(&cfg.addr, Duration::from_millis(500)) {
            Ok(s) => break s,
            Err(_) => {
                if cfg.stop.load(Ordering::Relaxed) || Instant::now() > cfg.deadline {
                    return Err(RxError::NoConnection(cfg.addr));
                }
                std::thread::sleep(Duration::from_millis(200));
            }
        }
    };
    sock.set_nodelay(true)?;
    sock.set_read_timeout(Some(Duration::from_millis(200)))?;
    // The RSA-OAEP mode needs a fresh receiver key pair (as `gapstream` makes one per run).
    let rsa_key = if cfg.mode == KexMode::RsaOaep2048 {
        let mut rng = DrbgRng::from_entropy(&mut OsEntropy).map_err(|_| RxError::Entropy)?;
        Some(
            gapstream_protocol::rsa_oaep::Decryptor::generate(&mut rng)
                .map_err(|e| RxError::Handshake(format!("RSA key generation: {e:?}")))?,
        )
    } else {
        None
    };
    let rcfg = ReceiverConfig {
        suites: vec![cfg.suite],
        modes: vec![cfg.mode],
        rsa_key,
        // The simulated drone is slow: never give up on the HELLO while the run lasts.
        handshake_timeout_ns: 3_600 * 1_000_000_000,
        ..ReceiverConfig::default()
    };
    let mut conn = ReceiverConnection::new(cfg.identity.clone(), rcfg)
        .map_err(|e| RxError::Handshake(e.to_string()))?;
    let mut out = RxResult::default();
    if let Some(rec) = &cfg.replay {
        out.replay = Some(replay(&mut sock, &mut conn, &cfg, rec)?);
    }
    let clock = unix_ns;
    let mut rng = DrbgRng::from_entropy(&mut OsEntropy).map_err(|_| RxError::Entropy)?;
    conn.connect(&mut rng, &clock)
        .map_err(|e| RxError::Handshake(format!("{e:?}")))?;
    let mut recorded = Recorded::default();
    let mut tap = Tap::default();
    flush(&mut sock, &mut conn, &mut tap, &mut recorded)?;
    let mut buf = vec![0u8; 64 * 1024];
    let mut wire_bytes = 0u64;
    while out.frames.len() < cfg.frames {
        if cfg.stop.load(Ordering::Relaxed) || Instant::now() > cfg.deadline {
            break;
        }
        // Until the session is up, the session's timers run: a HELLO that the drone answered
        // with an ALERT (Busy: its one responder handshake per receiver key and second was taken,
        // for example by a replayed HELLO just before) is sent again after the backoff. Only an
        // ALERT schedules that (the plain timeout is the run's length); once established, no
        // timers run, so no KEEPALIVE changes what the run measures.
        if !conn.session().is_established() {
            let mut rng = DrbgRng::from_entropy(&mut OsEntropy).map_err(|_| RxError::Entropy)?;
            if let Some(ReceiverEvent::HandshakeFailed(e)) =
                conn.handle_timeout(&mut Sequential, &mut rng, &clock)
            {
                return Err(RxError::Handshake(format!("{e}")));
            }
            flush(&mut sock, &mut conn, &mut tap, &mut recorded)?;
        }
        let n = match sock.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                ) =>
            {
                continue;
            }
            Err(e) => return Err(e.into()),
        };
        // Garbled stretches and messages that lost packets are counted as rejected; each message
        // is noted with the bytes its packets took, in the order they wait.
        let mut wire_lens = std::collections::VecDeque::new();
        conn.read_stream(&buf[..n], |i| match i {
            Incoming::Message { wire_len } => wire_lens.push_back(wire_len as u64),
            Incoming::Other(_) => {}
            Incoming::Garbled(_) | Incoming::Dropped(_) => out.rejected += 1,
        });
        while let Some(msg) = conn.peek_message() {
            // Each message with the bytes read up to its last packet.
            wire_bytes += wire_lens.pop_front().unwrap_or(0);
            if recorded.accept.is_empty()
                && HandshakeHeader::decode(&recorded.hello)
                    .is_ok_and(|(h, _)| answers(msg, h.hello_id))
            {
                recorded.accept = msg.to_vec();
            }
            let mut rng = DrbgRng::from_entropy(&mut OsEntropy).map_err(|_| RxError::Entropy)?;
            match conn.process_message(&mut Sequential, &mut rng, &clock) {
                Ok(Some(ReceiverEvent::Established { suite, mode, stats })) => {
                    out.handshake = Some(format!(
                        "{} / {}: {} bytes to the drone, {} bytes back",
                        suite.name(),
                        mode.name(),
                        stats.bytes_sent,
                        stats.bytes_received
                    ));
                }
                Ok(Some(ReceiverEvent::HandshakeFailed(e))) => {
                    return Err(RxError::Handshake(format!("{e}")));
                }
                Ok(Some(ReceiverEvent::Frame(f))) => {
                    let (seq, width, height, authenticated) = (
                        f.header.sequence,
                        f.header.width,
                        f.header.height,
                        f.authenticated,
                    );
                    let state = f.state().and_then(|r| r.ok());
                    let padded = f.header.padded;
                    let pixel_format = f.header.pixel_format;
                    out.frames.push(Received {
                        seq,
                        width,
                        height,
                        authenticated,
                        pixels: f.into_pixels(),
                        padded,
                        pixel_format,
                        wire_bytes,
                        state,
                    });
                    if let Some((after, q)) = cfg.set_quality
                        && out.frames.len() == after
                    {
                        // Over the authenticated control channel; queued, sent by the flush below.
                        conn.request_quality(&mut Sequential, q)
                            .map_err(|e| RxError::Handshake(format!("SET_QUALITY: {e}")))?;
                        out.quality_requested_after = Some(out.frames.len());
                    }
                }
                Ok(_) => {}
                Err(_) => out.rejected += 1,
            }
            flush(&mut sock, &mut conn, &mut tap, &mut recorded)?;
        }
    }
    if let Some(path) = &cfg.record {
        std::fs::write(path, recorded.to_text())?;
    }
    out.drone_boot = conn.session().drone_boot();
    let c = conn.session().counters();
    out.tag_failures = c.tag_failures;
    out.replays = c.replays;
    out.lost = c.lost_frames;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(wire_bytes: u64) -> Received {
        Received {
            seq: 0,
            width: 1,
            height: 1,
            authenticated: true,
            pixels: vec![0],
            padded: false,
            pixel_format: 0,
            wire_bytes,
            state: None,
        }
    }

    #[test]
    fn a_recorded_session_reads_back() {
        let r = Recorded {
            hello: vec![0x67, 0x73, 0x00, 0xff],
            accept: vec![],
            key_ack: vec![1, 2, 3],
        };
        assert_eq!(Recorded::from_text(&r.to_text()), Ok(r));
        assert!(Recorded::from_text("hello 0g\nkey_ack 00\n").is_err());
        assert!(Recorded::from_text("hello 001\nkey_ack 00\n").is_err());
        assert!(Recorded::from_text("hello 00\n").is_err(), "no KEY_ACK");
        assert!(Recorded::from_text("frame 00\n").is_err());
    }

    #[test]
    fn bytes_per_frame_is_the_steady_state_mean() {
        assert_eq!(bytes_per_frame(&[]), None);
        assert_eq!(bytes_per_frame(&[frame(500)]), None);
        // The first frame carries the handshake before it; the mean starts after it.
        let f = [
            frame(80_000),
            frame(159_420),
            frame(238_840),
            frame(318_260),
        ];
        assert_eq!(bytes_per_frame(&f), Some(79_420.0));
    }
}
