//! The receiver: connects to the bridge (TCP or UDP), runs the session (stock plaintext stream or
//! the secure protocol), verifies and delivers frames to the viewer, the recorder, the metrics and
//! the caller; reconnects (and re-handshakes) by itself when the connection drops.

use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpStream, UdpSocket};
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use esp32_bridge::cookie;
use gap_rust_cipher_s::Sequential;
use gapstream_drone::rng::DrbgRng;
use gapstream_drone::testpattern;
use gapstream_protocol::assembler::Assembler;
use gapstream_protocol::cpx::{
    Function, GAPSTREAM_FUNCTION, LastFlag, Packetizer, Route, StreamDecoder, Target,
};
use gapstream_protocol::handshake::Identity;
use gapstream_protocol::session::{self, ReceiverEvent, ReceiverSession};
use gapstream_protocol::suite::{KexMode, Suite};

use crate::fec_rx::{FecCounters, FecRx};
use crate::images;
use crate::metrics::{self, Counters, MetricsLog};
use crate::sim::{OsEntropy, unix_ns};
use crate::viewer::{Frame, ViewerState};

/// The receiver's packet path without a socket, for the fuzz targets.
#[doc(hidden)]
pub mod fuzz_entry;

/// How the receiver reaches the bridge.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Transport {
    Tcp,
    Udp,
}

impl std::fmt::Display for Transport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Transport::Tcp => "tcp",
            Transport::Udp => "udp",
        })
    }
}

/// A verified frame handed to the caller.
#[derive(Clone, Debug)]
pub struct Delivered {
    pub seq: u64,
    /// The key epoch of the frame (secure stream).
    pub epoch: Option<u32>,
    pub capture_ns: Option<u64>,
    pub width: usize,
    pub height: usize,
    pub pixels: Vec<u8>,
}

/// Why the receiver gave up (it retries connection problems by itself; these are final).
#[derive(Debug, thiserror::Error)]
pub enum ReceiverError {
    #[error("{0}")]
    Fatal(String),
    #[error("metrics: {0}")]
    Metrics(#[from] io::Error),
    #[error("recording: {0}")]
    Record(#[from] images::ImageError),
    /// A per-frame output ([`crate::tap::FrameTap`]) failed.
    #[error("{0}")]
    Tap(String),
}

/// What the receiver does with what it gets.
pub struct Sinks {
    pub viewer: Option<Arc<ViewerState>>,
    pub metrics_csv: Option<PathBuf>,
    pub record_dir: Option<PathBuf>,
    pub frames: Option<mpsc::Sender<Delivered>>,
    /// Print a status line on stderr every 0.5 s.
    pub status_line: bool,
    /// Print one line per error / reconnect on stderr.
    pub log_errors: bool,
    /// Per-frame outputs (MCAP, Zenoh, ...), each given every verified frame with its metadata.
    pub taps: Vec<Box<dyn crate::tap::FrameTap>>,
}

impl Default for Sinks {
    /// No output at all; set the fields wanted.
    fn default() -> Self {
        Sinks {
            viewer: None,
            metrics_csv: None,
            record_dir: None,
            frames: None,
            status_line: false,
            log_errors: false,
            taps: Vec::new(),
        }
    }
}

/// The receiver's settings.
pub struct ReceiverConfig {
    pub bridge: SocketAddr,
    pub transport: Transport,
    pub session: SessionKind,
    pub stop: Arc<AtomicBool>,
    pub duration: Option<Duration>,
    /// Stop after this many delivered frames.
    pub max_frames: Option<u64>,
    /// Seconds of silence after which the connection is considered dead and re-established.
    pub idle_timeout: Duration,
    /// Over UDP: ask the bridge for forward error correction (`crate::fec_rx`).
    pub fec: bool,
}

/// Which protocol the stream speaks.
#[derive(Clone, Debug)]
pub enum SessionKind {
    /// Bitcraze's stock `0xBC` image stream, in clear (what an unmodified AI-deck sends).
    StockPlaintext,
    /// gapstream's authenticated protocol with the paired drone.
    Secure(Box<SecureSettings>),
}

/// The receiver's side of the secure protocol.
#[derive(Clone, Debug)]
pub struct SecureSettings {
    /// This receiver's static key and the paired drone's public key.
    pub identity: Identity,
    /// Suites offered, preferred first.
    pub suites: Vec<Suite>,
    /// Key-establishment modes offered, preferred first.
    pub modes: Vec<KexMode>,
    /// CPX payload bytes per packet for what the receiver sends.
    pub packet_payload: usize,
    /// The receiver's RSA-2048 key (only for the RSA-OAEP mode).
    pub rsa_key: Option<gapstream_protocol::rsa_oaep::Decryptor>,
    /// Key log: one line per key epoch appended to this file (debugging aid, off by default).
    pub keylog: Option<std::path::PathBuf>,
}

impl SessionKind {
    pub fn label(&self) -> String {
        match self {
            SessionKind::StockPlaintext => "stock plaintext (no security)".into(),
            SessionKind::Secure(s) => {
                let names: Vec<&str> = s.suites.iter().map(|x| x.name()).collect();
                let modes: Vec<&str> = s.modes.iter().map(|x| x.name()).collect();
                let warn = if s.suites.iter().all(|x| !x.is_authenticated()) {
                    " (detects NO tampering)"
                } else {
                    ""
                };
                format!("{} / {}{warn}", names.join(","), modes.join(","))
            }
        }
    }
}

/// Result of a run.
#[derive(Clone, Debug, Default)]
pub struct Summary {
    pub counters: Counters,
    pub latency: Option<metrics::Percentiles>,
    pub elapsed_s: f64,
    pub connects: u64,
}

/// Events a session reports for one packet.
enum Event {
    Frame(Delivered),
    Malformed(String),
    Lost(u64),
    /// A rejected message (counted by the session); one line on stderr.
    Rejected(String),
    /// Something worth one line (handshake done, retry).
    Info(String),
    /// The session ended (the drone closed it): reconnect and handshake again.
    Restart(String),
    /// Cannot go on (wrong pairing keys, no common suite).
    Fatal(String),
}

/// Per-connection protocol state.
trait Session {
    /// Bytes (CPX packets) to send when the connection opens (the handshake's first message).
    fn opening(&mut self) -> Result<Vec<u8>, String>;
    /// Bytes to send when the receiver stops (the secure session's CLOSE, so the drone rekeys the
    /// group without this receiver at once instead of after its member timeout).
    fn closing(&mut self) -> Vec<u8> {
        Vec::new()
    }
    /// One CPX packet from the bridge.
    fn packet(
        &mut self,
        route: Route,
        payload: &[u8],
        events: &mut Vec<Event>,
        reply: &mut Vec<u8>,
    );
    /// Timers (handshake retry, end of the rekey grace window); called about every 100 ms.
    fn tick(&mut self, _events: &mut Vec<Event>, _reply: &mut Vec<u8>) {}
    /// Adds the session's counters into the metrics counters.
    fn counters(&self, _c: &mut Counters) {}
    /// The negotiated suite, for the viewer.
    fn suite_label(&self) -> Option<String> {
        None
    }
    /// The protocol session's own counters (to carry them over a reconnect).
    fn raw_counters(&self) -> Option<session::ReceiverCounters> {
        None
    }
}

/// The stock image stream: an 11-byte `0xBC` header packet, then the image in packets; the image
/// is raw 8-bit pixels (type 0) or a JPEG file (type 1, what the stock streamer sends in its JPEG
/// mode), decoded here to 8-bit grey.
struct StockSession {
    image: Option<StockImage>,
    next_seq: u64,
    last_stamp: Option<u32>,
}

/// A stock image being collected.
struct StockImage {
    width: u16,
    height: u16,
    jpeg: bool,
    size: usize,
    buf: Vec<u8>,
}

/// Largest stock image accepted (raw or JPEG bytes).
const STOCK_MAX_IMAGE: usize = 4 << 20;

/// Decodes a stock JPEG image to 8-bit grey: width, height, pixels (colour images as luma,
/// ITU-R BT.601 weights).
pub fn decode_stock_jpeg(data: &[u8]) -> Result<(usize, usize, Vec<u8>), String> {
    let mut d = jpeg_decoder::Decoder::new(data);
    let px = d.decode().map_err(|e| format!("stock JPEG image: {e}"))?;
    let info = d.info().ok_or("stock JPEG image: no frame header")?;
    let (w, h) = (info.width as usize, info.height as usize);
    let grey: Vec<u8> = match info.pixel_format {
        jpeg_decoder::PixelFormat::L8 => px,
        jpeg_decoder::PixelFormat::L16 => px.chunks_exact(2).map(|c| c[0]).collect(),
        jpeg_decoder::PixelFormat::RGB24 => px
            .chunks_exact(3)
            .map(|c| ((299 * c[0] as u32 + 587 * c[1] as u32 + 114 * c[2] as u32) / 1000) as u8)
            .collect(),
        jpeg_decoder::PixelFormat::CMYK32 => px
            .chunks_exact(4)
            .map(|c| (255 - c[3] as u32 * (255 - c[0].min(c[1]).min(c[2]) as u32) / 255) as u8)
            .collect(),
    };
    if grey.len() != w * h {
        return Err(format!(
            "stock JPEG image: {} pixels decoded for {w}x{h}",
            grey.len()
        ));
    }
    Ok((w, h, grey))
}

impl Session for StockSession {
    fn opening(&mut self) -> Result<Vec<u8>, String> {
        Ok(Vec::new())
    }
    fn packet(
        &mut self,
        route: Route,
        payload: &[u8],
        events: &mut Vec<Event>,
        _reply: &mut Vec<u8>,
    ) {
        if route.function != Function::App as u8 {
            return;
        }
        if payload.len() == 11 && payload[0] == 0xBC {
            if let Some(partial) = self.image.take()
                && !partial.buf.is_empty()
            {
                events.push(Event::Malformed(
                    "stock image cut short by the next header".into(),
                ));
            }
            let w = u16::from_le_bytes([payload[1], payload[2]]);
            let h = u16::from_le_bytes([payload[3], payload[4]]);
            let size =
                u32::from_le_bytes([payload[7], payload[8], payload[9], payload[10]]) as usize;
            let ok = match payload[6] {
                0 => size == w as usize * h as usize,
                1 => true,
                _ => false,
            };
            if !ok || size == 0 || size > STOCK_MAX_IMAGE {
                events.push(Event::Malformed(format!(
                    "unsupported stock image header ({w}x{h}, {size} bytes, type {})",
                    payload[6]
                )));
                return;
            }
            self.image = Some(StockImage {
                width: w,
                height: h,
                jpeg: payload[6] == 1,
                size,
                buf: Vec::with_capacity(size),
            });
            return;
        }
        let Some(img) = &mut self.image else {
            return;
        };
        img.buf.extend_from_slice(payload);
        if img.buf.len() < img.size {
            return;
        }
        let img = self.image.take().expect("checked above");
        if img.buf.len() > img.size {
            events.push(Event::Malformed(
                "stock image longer than its header said".into(),
            ));
            return;
        }
        let (w, h, pixels) = if img.jpeg {
            match decode_stock_jpeg(&img.buf) {
                Ok((w, h, p)) => (w, h, p),
                Err(e) => {
                    events.push(Event::Malformed(e));
                    return;
                }
            }
        } else {
            (img.width as usize, img.height as usize, img.buf)
        };
        let stamp = testpattern::decode(&pixels, w, h);
        let seq = match stamp {
            Some(s) => {
                if let Some(prev) = self.last_stamp {
                    let gap = s.frame.wrapping_sub(prev).wrapping_sub(1);
                    if gap > 0 && gap < 1 << 20 {
                        events.push(Event::Lost(gap as u64));
                    }
                }
                self.last_stamp = Some(s.frame);
                s.frame as u64
            }
            None => self.next_seq,
        };
        self.next_seq = seq + 1;
        events.push(Event::Frame(Delivered {
            seq,
            epoch: None,
            capture_ns: stamp.map(|s| s.capture_ns),
            width: w,
            height: h,
            pixels,
        }));
    }
}

/// The console line of a completed handshake. Two byte counts, said which is which: the handshake
/// messages themselves (HELLO, ACCEPT) and the same on the wire with their CPX headers (4 bytes per
/// packet), which is what the metrics CSV's `handshake_tx_bytes` / `handshake_rx_bytes` hold.
fn handshake_line(suite: Suite, mode: KexMode, stats: &session::HandshakeStats) -> String {
    format!(
        "handshake with the drone done: suite {suite}, key establishment {mode}, {:.2} ms, {} bytes sent, {} received ({} / {} on the wire with CPX headers)",
        stats.duration_ns as f64 / 1e6,
        stats.bytes_sent,
        stats.bytes_received,
        stats.wire_bytes_sent,
        stats.wire_bytes_received
    )
}

/// The secure protocol through `gapstream_protocol::session::ReceiverSession`.
struct SecureSession {
    rs: ReceiverSession,
    asm: Assembler,
    packet_payload: usize,
    /// Counters of earlier connections (each connection has a new session).
    base: session::ReceiverCounters,
    keylog: Option<std::path::PathBuf>,
}

/// A generator seeded from the OS for one call into the session.
fn rng() -> Result<DrbgRng, String> {
    DrbgRng::from_entropy(&mut OsEntropy).map_err(|e| e.to_string())
}

/// The protocol's clock (`session::Clock` promises monotonic time: timeouts, backoff, grace
/// windows): nanoseconds since the first call in this process, from `Instant`. Wall time may jump
/// (NTP, a user setting the clock), which would end or stretch sessions at random.
fn proto_clock() -> u64 {
    static START: std::sync::OnceLock<Instant> = std::sync::OnceLock::new();
    let start = *START.get_or_init(Instant::now);
    u64::try_from(start.elapsed().as_nanos()).unwrap_or(u64::MAX)
}

impl SecureSession {
    fn new(s: &SecureSettings, base: session::ReceiverCounters) -> Self {
        let cfg = session::ReceiverConfig {
            suites: s.suites.clone(),
            modes: s.modes.clone(),
            rsa_key: s.rsa_key.clone(),
            packet_payload: s.packet_payload,
            keylog: s.keylog.is_some(),
            ..session::ReceiverConfig::default()
        };
        let asm = Assembler::new(cfg.max_message());
        SecureSession {
            rs: ReceiverSession::new(s.identity.clone(), cfg),
            asm,
            packet_payload: s.packet_payload,
            base,
            keylog: s.keylog.clone(),
        }
    }

    /// Appends the key-log lines the session produced (mode 0600, `secret_file`).
    fn write_keylog(&mut self, events: &mut Vec<Event>) {
        let Some(path) = &self.keylog else { return };
        let mut text = String::new();
        while let Some(line) = self.rs.drain_keylog() {
            text.push_str(&format!("{line}\n"));
        }
        if text.is_empty() {
            return;
        }
        let r = crate::secret_file::write(path, text.as_bytes(), crate::secret_file::How::Append);
        if let Err(e) = r {
            events.push(Event::Info(format!(
                "cannot write the key log {}: {e}",
                path.display()
            )));
        }
    }

    fn flush(&mut self, reply: &mut Vec<u8>) {
        let route = Route::new(Target::WifiHost, Target::Gap8, GAPSTREAM_FUNCTION);
        let mut buf = vec![0u8; 4 + self.packet_payload];
        while let Some(m) = self.rs.poll_transmit() {
            if let Ok(mut p) =
                Packetizer::new(route, [&m, &[], &[]], self.packet_payload, LastFlag::Final)
            {
                while let Some(Ok(n)) = p.next_packet(&mut buf) {
                    reply.extend_from_slice(&buf[..n]);
                }
            }
        }
    }

    fn event(&mut self, ev: ReceiverEvent, events: &mut Vec<Event>) {
        match ev {
            ReceiverEvent::Established { suite, mode, stats } => {
                events.push(Event::Info(handshake_line(suite, mode, &stats)))
            }
            ReceiverEvent::HandshakeFailed(e) => {
                events.push(Event::Fatal(format!("cannot start the handshake: {e}")))
            }
            // A remote cause (an unauthenticated ALERT, an ACCEPT that does not authenticate):
            // counted; the session retries after the backoff, the receiver never exits for it.
            ReceiverEvent::AttemptFailed { error, retry_in_ns } => {
                events.push(Event::Info(format!(
                    "handshake attempt failed: {error}; trying again in {:.2} s",
                    retry_in_ns as f64 / 1e9
                )))
            }
            ReceiverEvent::HandshakeRetry { attempt } => events.push(Event::Info(format!(
                "no answer from the drone yet; HELLO attempt {attempt}"
            ))),
            ReceiverEvent::Frame(f) => {
                let h = f.header;
                events.push(Event::Frame(Delivered {
                    seq: h.sequence,
                    epoch: Some(h.epoch),
                    capture_ns: Some(h.capture_ns),
                    width: h.width as usize,
                    height: h.height as usize,
                    pixels: f.into_pixels(),
                }))
            }
            ReceiverEvent::Rekeyed { .. } => {}
            ReceiverEvent::Closed => {
                events.push(Event::Restart("the drone closed the session".into()))
            }
            ReceiverEvent::SessionLost => events.push(Event::Restart(
                "nothing authenticated from the drone for 5 s (did it restart?)".into(),
            )),
        }
    }
}

impl Session for SecureSession {
    fn opening(&mut self) -> Result<Vec<u8>, String> {
        self.rs
            .connect(&mut rng()?, &proto_clock)
            .map_err(|e| format!("cannot start the handshake: {e}"))?;
        let mut out = Vec::new();
        self.flush(&mut out);
        Ok(out)
    }

    fn closing(&mut self) -> Vec<u8> {
        let mut out = Vec::new();
        if self.rs.is_established() {
            self.rs.close(&mut Sequential);
            self.flush(&mut out);
        }
        out
    }

    fn packet(
        &mut self,
        route: Route,
        payload: &[u8],
        events: &mut Vec<Event>,
        reply: &mut Vec<u8>,
    ) {
        if let Err(e) = self.asm.push(route, payload) {
            events.push(Event::Rejected(format!("CPX message dropped: {e}")));
        }
        while let Some(msg) = self.asm.next_message() {
            let mut r = match rng() {
                Ok(r) => r,
                Err(e) => return events.push(Event::Fatal(e)),
            };
            match self
                .rs
                .handle_message(&mut Sequential, &mut r, &proto_clock, msg)
            {
                Ok(Some(ev)) => self.event(ev, events),
                Ok(None) => {}
                // Frames of an epoch whose key has not arrived yet (just after joining a running
                // group) are counted, not reported line by line.
                Err(session::Rejected::NoKey { .. }) => {}
                Err(e) => events.push(Event::Rejected(format!("message rejected: {e}"))),
            }
        }
        self.write_keylog(events);
        self.flush(reply);
    }

    fn tick(&mut self, events: &mut Vec<Event>, reply: &mut Vec<u8>) {
        let Ok(mut r) = rng() else { return };
        if let Some(ev) = self
            .rs
            .handle_timeout(&mut Sequential, &mut r, &proto_clock)
        {
            self.event(ev, events);
        }
        self.write_keylog(events);
        self.flush(reply);
    }

    fn counters(&self, c: &mut Counters) {
        let s = self.rs.counters();
        let b = &self.base;
        c.tag_failures = b.tag_failures + s.tag_failures;
        c.replays = b.replays + s.replays + b.too_old + s.too_old;
        c.lost = b.lost_frames + s.lost_frames;
        c.no_key = b.no_key + s.no_key;
        c.handshakes = b.handshakes + s.handshakes;
        c.rekeys = b.rekeys + s.rekeys;
        c.malformed += b.malformed
            + s.malformed
            + b.bad_epoch
            + s.bad_epoch
            + b.wrong_suite
            + s.wrong_suite
            + b.control_rejected
            + s.control_rejected;
        if let Some(h) = self.rs.handshake_stats() {
            c.handshake_ms = h.duration_ns as f64 / 1e6;
            c.handshake_tx_bytes = h.wire_bytes_sent;
            c.handshake_rx_bytes = h.wire_bytes_received;
        }
        if let Some(e) = self.rs.epoch() {
            c.key_epoch = e as u64;
        }
    }

    fn suite_label(&self) -> Option<String> {
        let h = self.rs.handshake_stats()?;
        let warn = if h.suite.is_authenticated() {
            ""
        } else {
            " (detects NO tampering)"
        };
        Some(format!("{} / {}{warn}", h.suite, h.mode))
    }

    fn raw_counters(&self) -> Option<session::ReceiverCounters> {
        Some(self.rs.counters())
    }
}

/// Sums the counters of a finished session into `base`.
fn accumulate(base: &mut session::ReceiverCounters, s: &session::ReceiverCounters) {
    base.tag_failures += s.tag_failures;
    base.replays += s.replays;
    base.too_old += s.too_old;
    base.lost_frames += s.lost_frames;
    base.handshakes += s.handshakes;
    base.rekeys += s.rekeys;
    base.malformed += s.malformed;
    base.bad_epoch += s.bad_epoch;
    base.wrong_suite += s.wrong_suite;
    base.control_rejected += s.control_rejected;
    base.no_key += s.no_key;
}

fn new_session(kind: &SessionKind, base: session::ReceiverCounters) -> Box<dyn Session> {
    match kind {
        SessionKind::StockPlaintext => Box::new(StockSession {
            image: None,
            next_seq: 0,
            last_stamp: None,
        }),
        SessionKind::Secure(s) => Box::new(SecureSession::new(s, base)),
    }
}

enum Conn {
    Tcp(TcpStream),
    /// The socket, the last keep-alive, and the FEC state when FEC was asked for.
    Udp(UdpSocket, Instant, Option<Box<FecRx>>),
}

impl Conn {
    /// FEC counters of this connection (with the earlier ones), when it asked for FEC.
    fn fec_counters(&self) -> Option<FecCounters> {
        match self {
            Conn::Udp(_, _, Some(f)) => Some(f.counters()),
            _ => None,
        }
    }

    fn open(t: Transport, addr: SocketAddr, fec: Option<FecCounters>) -> io::Result<Conn> {
        match t {
            Transport::Tcp => {
                let s = TcpStream::connect_timeout(&addr, Duration::from_secs(1))?;
                s.set_nodelay(true)?;
                s.set_read_timeout(Some(Duration::from_millis(100)))?;
                Ok(Conn::Tcp(s))
            }
            Transport::Udp => {
                let bind: SocketAddr = if addr.is_ipv4() {
                    "0.0.0.0:0"
                } else {
                    "[::]:0"
                }
                .parse()
                .expect("static");
                let s = UdpSocket::bind(bind)?;
                // A frame arrives as a burst of ~80 datagrams (~100 with FEC) while the previous
                // one is verified: room for a few frames (best effort: the kernel caps it at
                // net.core.rmem_max).
                let _ = socket2::SockRef::from(&s).set_recv_buffer_size(2 << 20);
                s.connect(addr)?;
                s.set_read_timeout(Some(Duration::from_millis(100)))?;
                udp_register(&s)?;
                let fec = fec.map(|base| Box::new(FecRx::new(base)));
                if let Some(f) = &fec {
                    // Ask at once; the keep-alives repeat the request until shards arrive.
                    if let Some(req) = f.request() {
                        s.send(&req)?;
                    }
                }
                Ok(Conn::Udp(s, Instant::now(), fec))
            }
        }
    }

    fn send(&mut self, bytes: &[u8]) -> io::Result<()> {
        match self {
            Conn::Tcp(s) => s.write_all(bytes),
            Conn::Udp(s, _, _) => {
                // One CPX packet per datagram.
                let mut rest = bytes;
                while rest.len() >= 2 {
                    let n = 2 + u16::from_le_bytes([rest[0], rest[1]]) as usize;
                    let n = n.min(rest.len());
                    s.send(&rest[..n])?;
                    rest = &rest[n..];
                }
                Ok(())
            }
        }
    }

    /// Ends the connection cleanly: for TCP, says so (FIN) and discards what is still in flight
    /// until the bridge closes too (at most 300 ms), so the bridge sees a close, not a reset.
    fn finish(&mut self) {
        if let Conn::Tcp(s) = self {
            let _ = s.shutdown(std::net::Shutdown::Write);
            let t0 = Instant::now();
            let mut buf = [0u8; 16 * 1024];
            while t0.elapsed() < Duration::from_millis(300) {
                match s.read(&mut buf) {
                    Ok(0) => return,
                    Ok(_) => {}
                    Err(e)
                        if matches!(
                            e.kind(),
                            io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                        ) => {}
                    Err(_) => return,
                }
            }
        }
    }

    /// `Ok(0)` on timeout (nothing arrived) or when a signal interrupted the wait (a socket with a
    /// receive timeout is never restarted after a signal handler: Ctrl-C must not look like a lost
    /// connection), `Err` when the connection is gone.
    fn recv(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let r = match self {
            Conn::Tcp(s) => match s.read(buf) {
                Ok(0) => Err(io::Error::new(
                    io::ErrorKind::ConnectionAborted,
                    "bridge closed the connection",
                )),
                r => r,
            },
            Conn::Udp(s, keepalive, fec) => {
                let due = keepalive.elapsed() > Duration::from_secs(1);
                match fec {
                    Some(f) => return udp_fec_recv(s, keepalive, f, due, buf),
                    None if due => {
                        *keepalive = Instant::now();
                        s.send(&[])?;
                    }
                    None => {}
                }
                match s.recv(buf) {
                    // A repeated cookie or welcome (its datagram crossed a retry): not CPX.
                    Ok(n) if cookie::Control::parse(&buf[..n]).is_some() => Ok(0),
                    r => r,
                }
            }
        };
        match r {
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock
                        | io::ErrorKind::TimedOut
                        | io::ErrorKind::Interrupted
                ) =>
            {
                Ok(0)
            }
            r => r,
        }
    }
}

/// Receives over UDP with FEC: the next CPX packet that can go on (rebuilt ones included) into
/// `buf`, `Ok(0)` when none is ready yet. In place of the empty keep-alive the receiver sends the
/// FEC request (until shards arrive), then its loss report every 500 ms.
fn udp_fec_recv(
    s: &UdpSocket,
    keepalive: &mut Instant,
    f: &mut FecRx,
    due: bool,
    buf: &mut [u8],
) -> io::Result<usize> {
    if let Some(out) = f.outgoing(due) {
        *keepalive = Instant::now();
        s.send(&out)?;
    } else if due {
        *keepalive = Instant::now();
        s.send(&[])?;
    }
    if f.ready() == 0 {
        match s.recv(buf) {
            Ok(n) if cookie::Control::parse(&buf[..n]).is_some() => {}
            Ok(n) => {
                let d = buf[..n].to_vec();
                f.datagram(&d);
            }
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock
                        | io::ErrorKind::TimedOut
                        | io::ErrorKind::Interrupted
                ) =>
            {
                f.poll()
            }
            Err(e) => return Err(e),
        }
    }
    match f.next_packet() {
        Some(p) if p.len() <= buf.len() => {
            buf[..p.len()].copy_from_slice(&p);
            Ok(p.len())
        }
        _ => Ok(0),
    }
}

/// The file a recorded frame goes to: `frame_NNNNNNNN.png`, numbered with the frame number burned
/// into the image (the synthetic source, a test-pattern stock stream) so files and pixels agree,
/// else with the stream's sequence number (which in the secure stream starts at the handshake,
/// not at the drone's first frame).
pub fn frame_file_name(f: &Delivered) -> String {
    let n = testpattern::decode(&f.pixels, f.width, f.height).map_or(f.seq, |s| s.frame as u64);
    format!("frame_{n:08}.png")
}

/// Registers with the bridge over UDP: it sends nothing larger than what it got to an address
/// that has not shown that it receives there, so the receiver asks for a cookie (a 20-byte
/// request), echoes it, and waits for the welcome (`esp32_bridge::cookie`). Lost datagrams are
/// sent again every 250 ms, for at most 2 s.
fn udp_register(s: &UdpSocket) -> io::Result<()> {
    let start = Instant::now();
    let mut next = cookie::Control::Request;
    let mut sent: Option<Instant> = None;
    let mut buf = [0u8; 2048];
    while start.elapsed() < Duration::from_secs(2) {
        if sent.is_none_or(|t| t.elapsed() >= Duration::from_millis(250)) {
            let (b, n) = next.encode();
            s.send(&b[..n])?;
            sent = Some(Instant::now());
        }
        match s.recv(&mut buf) {
            Ok(n) => match cookie::Control::parse(&buf[..n]) {
                Some(cookie::Control::Cookie(c)) if next == cookie::Control::Request => {
                    next = cookie::Control::Echo(c);
                    sent = None;
                }
                Some(cookie::Control::Welcome) => return Ok(()),
                _ => {}
            },
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock
                        | io::ErrorKind::TimedOut
                        | io::ErrorKind::Interrupted
                ) => {}
            Err(e) => return Err(e),
        }
    }
    Err(io::Error::new(
        io::ErrorKind::TimedOut,
        "no answer to the UDP registration (cookie request) within 2 s",
    ))
}

/// Saves delivered frames as PNG.
struct Recorder {
    dir: PathBuf,
    bayer: bool,
}

impl Recorder {
    fn save(&self, f: &Delivered) -> Result<(), images::ImageError> {
        let png = if self.bayer {
            images::encode_png(
                f.width,
                f.height,
                3,
                &images::demosaic_rggb(&f.pixels, f.width, f.height),
            )?
        } else {
            images::encode_png(f.width, f.height, 1, &f.pixels)?
        };
        let path = self.dir.join(frame_file_name(f));
        std::fs::write(&path, png).map_err(|source| images::ImageError::Io { path, source })
    }
}

/// Runs the receiver until stopped, the duration is over or `max_frames` were delivered.
pub fn run(cfg: ReceiverConfig, mut sinks: Sinks, bayer: bool) -> Result<Summary, ReceiverError> {
    let mut log = MetricsLog::new(sinks.metrics_csv.as_deref())?;
    let recorder = match &sinks.record_dir {
        Some(d) => {
            std::fs::create_dir_all(d).map_err(|source| images::ImageError::Io {
                path: d.clone(),
                source,
            })?;
            Some(Recorder {
                dir: d.clone(),
                bayer,
            })
        }
        None => None,
    };
    let mut label = cfg.session.label();
    let mut counters = Counters::default();
    let mut own_malformed = 0u64;
    let mut base = session::ReceiverCounters::default();
    let start = Instant::now();
    let mut connects = 0u64;
    let mut last_error: Option<String> = None;
    let mut buf = vec![0u8; 64 * 1024];
    let mut image_latency: Option<f64> = None;
    let set_conn = |state: &str, err: Option<&str>| {
        if let Some(v) = &sinks.viewer {
            v.update_stats(|s| {
                s.connection = state.into();
                if let Some(e) = err {
                    s.last_error = Some(e.into());
                }
            });
        }
    };
    if let Some(v) = &sinks.viewer {
        v.update_stats(|s| {
            s.suite = label.clone();
            s.transport = cfg.transport.to_string();
        });
    }
    let done = |counters: &Counters| {
        cfg.stop.load(Ordering::Relaxed)
            || cfg.duration.is_some_and(|d| start.elapsed() >= d)
            || cfg.max_frames.is_some_and(|m| counters.frames >= m)
    };
    let report_error = |last: &mut Option<String>, msg: String| {
        if sinks.log_errors && last.as_deref() != Some(msg.as_str()) {
            eprintln!("gapstream: error: {msg}");
        }
        *last = Some(msg);
    };
    'outer: while !done(&counters) {
        set_conn("connecting", None);
        let fec_base = (cfg.fec && cfg.transport == Transport::Udp).then_some(counters.fec);
        let mut conn = match Conn::open(cfg.transport, cfg.bridge, fec_base) {
            Ok(c) => c,
            Err(e) => {
                let msg = format!(
                    "cannot reach the bridge at {} ({}): {e}; retrying",
                    cfg.bridge, cfg.transport
                );
                report_error(&mut last_error, msg.clone());
                set_conn("bridge unreachable", Some(&msg));
                tick(&mut log, &counters, &sinks, &label, image_latency)?;
                std::thread::sleep(Duration::from_millis(200));
                continue;
            }
        };
        connects += 1;
        if connects > 1 && sinks.log_errors {
            eprintln!(
                "gapstream: reconnected to the bridge at {} ({})",
                cfg.bridge, cfg.transport
            );
        }
        let mut session = new_session(&cfg.session, base);
        let opening = session.opening().map_err(ReceiverError::Fatal)?;

        if !opening.is_empty()
            && let Err(e) = conn.send(&opening)
        {
            report_error(&mut last_error, format!("sending to the bridge: {e}"));
            continue;
        }
        set_conn("streaming", None);
        let mut decoder = StreamDecoder::new();
        let mut events = Vec::new();
        let mut reply = Vec::new();
        let mut last_data = Instant::now();
        let mut garbled = false;
        while !done(&counters) {
            let n = match conn.recv(&mut buf) {
                Ok(n) => n,
                Err(e) => {
                    let msg = format!("connection to the bridge lost: {e}; reconnecting");
                    report_error(&mut last_error, msg.clone());
                    set_conn("reconnecting", Some(&msg));
                    carry(&mut base, &*session);
                    continue 'outer;
                }
            };
            if n > 0 {
                last_data = Instant::now();
            } else if last_data.elapsed() > cfg.idle_timeout {
                let msg = format!(
                    "no data from the bridge for {:.1} s; reconnecting",
                    cfg.idle_timeout.as_secs_f64()
                );
                report_error(&mut last_error, msg.clone());
                set_conn("reconnecting", Some(&msg));
                continue 'outer;
            }
            if let Some(f) = conn.fec_counters() {
                counters.fec = f;
            }
            let mut input = &buf[..n];
            if let Conn::Udp(..) = conn {
                // A datagram is exactly one packet: never carry a partial one across datagrams.
                decoder.reset();
            }
            while let Some(r) = decoder.decode(&mut input) {
                match r {
                    Ok(p) => {
                        garbled = false;
                        session.packet(p.route, p.payload, &mut events, &mut reply)
                    }
                    // One line and one count per garbled stretch (the decoder slides byte by byte).
                    Err(e) if !garbled => {
                        garbled = true;
                        events.push(Event::Malformed(format!(
                            "garbled CPX from the bridge: {e}; resynchronising"
                        )))
                    }
                    Err(_) => {}
                }
            }
            session.tick(&mut events, &mut reply);
            if !reply.is_empty() {
                let r = conn.send(&reply);
                reply.clear();
                if let Err(e) = r {
                    report_error(&mut last_error, format!("sending to the bridge: {e}"));
                    carry(&mut base, &*session);
                    continue 'outer;
                }
            }
            let mut restart = None;
            for ev in events.drain(..) {
                match ev {
                    Event::Frame(f) => {
                        let now = unix_ns();
                        let lat = f.capture_ns.and_then(|c| latency_ms(now, c));
                        image_latency = testpattern::decode(&f.pixels, f.width, f.height)
                            .and_then(|s| latency_ms(now, s.capture_ns))
                            .or(image_latency);
                        counters.frames += 1;
                        counters.payload_bytes += f.pixels.len() as u64;
                        log.frame(f.seq, f.pixels.len(), lat)?;
                        if let Some(r) = &recorder {
                            r.save(&f)?;
                        }
                        if let Some(v) = &sinks.viewer {
                            let seq = f.seq;
                            v.update_stats(|s| s.seq = Some(seq));
                            v.publish_frame(Frame {
                                seq: f.seq,
                                width: f.width,
                                height: f.height,
                                pixels: Arc::new(f.pixels.clone()),
                            });
                        }
                        if !sinks.taps.is_empty() {
                            let meta = crate::tap::FrameMeta {
                                suite: &label,
                                receive_ns: now,
                                latency_ms: lat,
                                counters: &counters,
                            };
                            for t in &mut sinks.taps {
                                t.frame(&f, &meta).map_err(ReceiverError::Tap)?;
                            }
                        }
                        if let Some(tx) = &sinks.frames {
                            let _ = tx.send(f);
                        }
                    }
                    Event::Malformed(m) => {
                        own_malformed += 1;
                        report_error(&mut last_error, m);
                    }
                    Event::Lost(k) => counters.lost += k,
                    Event::Rejected(m) => report_error(&mut last_error, m),
                    Event::Info(m) => {
                        if sinks.log_errors {
                            eprintln!("gapstream: {m}");
                        }
                        if let Some(v) = &sinks.viewer {
                            v.update_stats(|s| s.last_message = Some(m.clone()));
                        }
                    }
                    Event::Restart(m) => restart = Some(m),
                    Event::Fatal(m) => {
                        set_conn("stopped", Some(&m));
                        return Err(ReceiverError::Fatal(m));
                    }
                }
            }
            counters.malformed = own_malformed;
            session.counters(&mut counters);
            if let Some(l) = session.suite_label()
                && l != label
            {
                label = l;
                if let Some(v) = &sinks.viewer {
                    v.update_stats(|s| s.suite = label.clone());
                }
            }
            tick(&mut log, &counters, &sinks, &label, image_latency)?;
            if let Some(m) = restart {
                report_error(&mut last_error, format!("{m}; reconnecting"));
                carry(&mut base, &*session);
                continue 'outer;
            }
        }
        // Stopped: leave the group properly (the drone rekeys without this receiver at once).
        let bye = session.closing();
        if !bye.is_empty() {
            let _ = conn.send(&bye);
        }
        conn.finish();
    }
    log.tick(&counters, true)?;
    for t in &mut sinks.taps {
        t.finish().map_err(ReceiverError::Tap)?;
    }
    if sinks.status_line && std::io::IsTerminal::is_terminal(&std::io::stderr()) {
        eprintln!();
    }
    let latency = metrics::Percentiles::of(&mut log.all_latencies_ms.clone());
    Ok(Summary {
        counters,
        latency,
        elapsed_s: start.elapsed().as_secs_f64(),
        connects,
    })
}

/// Adds a finished connection's session counters to the running totals.
fn carry(base: &mut session::ReceiverCounters, s: &dyn Session) {
    if let Some(c) = s.raw_counters() {
        // `new_session` started from `base`, but the session's own counters start at 0.
        accumulate(base, &c);
    }
}

/// Latency in ms when the capture time is plausible on this clock (within an hour before now).
fn latency_ms(now_ns: u64, capture_ns: u64) -> Option<f64> {
    let d = now_ns.checked_sub(capture_ns)?;
    (d < 3_600_000_000_000).then(|| d as f64 / 1e6)
}

fn tick(
    log: &mut MetricsLog,
    c: &Counters,
    sinks: &Sinks,
    label: &str,
    image_latency: Option<f64>,
) -> Result<(), ReceiverError> {
    if let Some(row) = log.tick(c, false)? {
        if sinks.status_line {
            // On a terminal one line rewritten in place; in a log one line per interval.
            if std::io::IsTerminal::is_terminal(&std::io::stderr()) {
                eprint!("\r{}\x1b[K", metrics::status_line(&row, label));
            } else {
                eprintln!("{}", metrics::status_line(&row, label));
            }
        }
        if let Some(v) = &sinks.viewer {
            v.update_stats(|s| {
                s.fps = row.fps;
                s.goodput_mbps = row.goodput_mbps;
                s.latency_p50_ms = row.latency.map(|p| p.p50);
                s.latency_p95_ms = row.latency.map(|p| p.p95);
                s.image_latency_ms = image_latency;
                s.frames = c.frames;
                s.lost = c.lost;
                s.tag_failures = c.tag_failures;
                s.replays = c.replays;
                s.handshakes = c.handshakes;
                s.rekeys = c.rekeys;
                s.key_epoch = c.key_epoch;
                s.fec_on = c.fec.on;
                s.fec_recovered = c.fec.recovered;
                s.fec_unrecoverable_blocks = c.fec.unrecoverable_blocks;
                s.fec_redundancy_pct = c.fec.redundancy_pct;
            });
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Finding 6: the receiver's protocol clock was wall time (`unix_ns`), which jumps when the
    /// system clock is set, although `session::Clock` promises monotonic time. It is `Instant`
    /// based now: time since the process first asked (not since 1970), never going back.
    #[test]
    fn finding6_the_receiver_protocol_clock_is_monotonic() {
        let a = proto_clock();
        assert!(a < 3_600_000_000_000, "{a} ns: wall time?");
        let mut last = a;
        for _ in 0..10_000 {
            let t = proto_clock();
            assert!(t >= last);
            last = t;
        }
        std::thread::sleep(Duration::from_millis(20));
        assert!(proto_clock() - a >= 20_000_000);
    }

    /// The console line gives both counts and says which one the metrics CSV holds.
    #[test]
    fn handshake_line_says_which_count_has_the_cpx_headers() {
        let stats = session::HandshakeStats {
            suite: Suite::ChaCha20Poly1305,
            mode: KexMode::X25519,
            bytes_sent: 72,
            bytes_received: 70,
            wire_bytes_sent: 76,
            wire_bytes_received: 74,
            duration_ns: 29_330_000,
            attempts: 1,
        };
        let l = handshake_line(Suite::ChaCha20Poly1305, KexMode::X25519, &stats);
        assert!(
            l.ends_with(
                "29.33 ms, 72 bytes sent, 70 received (76 / 74 on the wire with CPX headers)"
            ),
            "{l}"
        );
    }
}
