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
use gapstream_protocol::handshake::Identity;
use gapstream_protocol::session::{ReceiverConfig, ReceiverEvent};
use gapstream_protocol::suite::{KexMode, Suite};

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
}

/// What the receiver saw.
#[derive(Clone, Debug, Default)]
pub struct RxResult {
    pub frames: Vec<Received>,
    pub handshake: Option<String>,
    pub tag_failures: u64,
    pub replays: u64,
    pub lost: u64,
    pub rejected: u64,
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
}

/// Sends what the connection queued (HELLO, KEY_ACK, KEEPALIVE) in one write.
fn flush(sock: &mut TcpStream, conn: &mut ReceiverConnection) -> io::Result<()> {
    let mut out = Vec::new();
    while let Some(p) = conn.poll_transmit() {
        out.extend_from_slice(p);
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
    let mut conn = ReceiverConnection::new(cfg.identity, rcfg)
        .map_err(|e| RxError::Handshake(e.to_string()))?;
    let clock = unix_ns;
    let mut rng = DrbgRng::from_entropy(&mut OsEntropy).map_err(|_| RxError::Entropy)?;
    conn.connect(&mut rng, &clock)
        .map_err(|e| RxError::Handshake(format!("{e:?}")))?;
    flush(&mut sock, &mut conn)?;
    let mut out = RxResult::default();
    let mut buf = vec![0u8; 64 * 1024];
    while out.frames.len() < cfg.frames {
        if cfg.stop.load(Ordering::Relaxed) || Instant::now() > cfg.deadline {
            break;
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
        // Garbled stretches and messages that lost packets are counted as rejected.
        conn.read_stream(&buf[..n], |i| {
            if !matches!(i, Incoming::Other(_)) {
                out.rejected += 1;
            }
        });
        while conn.has_message() {
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
                    out.frames.push(Received {
                        seq,
                        width,
                        height,
                        authenticated,
                        pixels: f.into_pixels(),
                    });
                }
                Ok(_) => {}
                Err(_) => out.rejected += 1,
            }
            flush(&mut sock, &mut conn)?;
        }
    }
    let c = conn.session().counters();
    out.tag_failures = c.tag_failures;
    out.replays = c.replays;
    out.lost = c.lost_frames;
    Ok(out)
}
