//! The receiver: connects to a bridge (TCP or UDP, [`transport`]), runs the session (stock
//! plaintext stream or the secure protocol), turns what it verifies into [`Frame`]s and publishes
//! them, its status and its diagnostics on a [`bus::Bus`] whose consumers are the outputs
//! (viewer, recorders, metrics, MCAP, Zenoh, Python, the console); reconnects (and re-handshakes)
//! by itself when the connection drops.
//!
//! | module | what |
//! |---|---|
//! | [`transport`] | the seam to the bridge: [`transport::Link`] over TCP or UDP (with its cookie registration) |
//! | [`frame`] | the delivered [`Frame`]: source, header, pixel format, shared pixels |
//! | [`bus`] | outputs as consumers with bounded mailboxes and a policy each; publishing never blocks |
//! | `station` | one bridge's connection loop: session events to frames, counters, status, diagnoses |
//! | [`outputs`] | the console, the metrics CSV and the PNG recorder as consumers |
//! | this file | settings, the sessions (stock `0xBC` stream, secure protocol), [`run`]: the wiring |

use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::{Duration, Instant};

use gap_rust_cipher_s::Sequential;
use gapstream_drone::rng::DrbgRng;
use gapstream_drone::testpattern;
use gapstream_protocol::connection::ReceiverConnection;
use gapstream_protocol::cpx::{CpxError, Function, Route};
use gapstream_protocol::handshake::Identity;
use gapstream_protocol::session::{self, ReceiverEvent};
use gapstream_protocol::suite::{KexMode, Suite};

use crate::metrics::{self, Counters};
use crate::sim::OsEntropy;

pub mod bus;
pub mod frame;
pub mod outputs;
mod station;
pub mod transport;

/// The receiver's packet path without a socket, for the fuzz targets.
#[doc(hidden)]
pub mod fuzz_entry;

pub use bus::{Bus, Policy, Subscription};
pub use frame::{Frame, Protection, Source};
pub use outputs::frame_file_name;
pub use transport::Transport;

/// What a session hands over for a verified frame; the [`station`] turns it into a [`Frame`]
/// once, and every output shares that.
#[derive(Clone, Debug)]
struct Delivered {
    seq: u64,
    /// The key epoch of the frame (secure stream).
    epoch: Option<u32>,
    capture_ns: Option<u64>,
    width: usize,
    height: usize,
    /// The authenticated pixel-format code (secure stream; None: the stock stream, whose JPEG is
    /// decoded already).
    pixel_format: Option<u8>,
    /// The payload: samples, or a coded picture (JPEG, JPEG-LS) the station decodes.
    pixels: Vec<u8>,
    /// The drone's state record from the frame's header (authenticated with it).
    state: Option<gapstream_protocol::state::StateRecord>,
}

/// Why the receiver gave up (it retries connection problems by itself; these are final).
#[derive(Debug, thiserror::Error)]
pub enum ReceiverError {
    #[error("{0}")]
    Fatal(String),
    /// An output (a recorder, the metrics CSV, a publisher) failed: a recording that cannot be
    /// written must not look complete.
    #[error("{0}")]
    Output(String),
}

/// The receiver's settings.
pub struct ReceiverConfig {
    pub bridge: std::net::SocketAddr,
    pub transport: Transport,
    pub session: SessionKind,
    /// The drone's name, carried by every frame ([`Frame::source`]).
    pub source: Source,
    /// The frames are RGGB Bayer mosaics (`--bayer`), for streams whose frames do not say so.
    pub bayer: bool,
    pub stop: Arc<AtomicBool>,
    pub duration: Option<Duration>,
    /// Stop after this many delivered frames.
    pub max_frames: Option<u64>,
    /// Seconds of silence after which the connection is considered dead and re-established.
    pub idle_timeout: Duration,
    /// Over UDP: ask the bridge for forward error correction ([`crate::fec_rx`]).
    pub fec: bool,
}

impl ReceiverConfig {
    /// Settings with the CLI's defaults: source `aideck`, grey frames, no time limit, 3 s idle
    /// timeout.
    pub fn new(bridge: std::net::SocketAddr, transport: Transport, session: SessionKind) -> Self {
        ReceiverConfig {
            bridge,
            transport,
            session,
            source: Arc::from(frame::DEFAULT_SOURCE),
            bayer: false,
            stop: Arc::new(AtomicBool::new(false)),
            duration: None,
            max_frames: None,
            idle_timeout: Duration::from_secs(3),
            fec: false,
        }
    }
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
    /// Ask the drone for this JPEG quality (SET_QUALITY) once the session holds its group key,
    /// after every (re)handshake.
    pub quality: Option<u8>,
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

    /// How far the receiver checks the frames of this session.
    pub fn protection(&self) -> Protection {
        match self {
            SessionKind::StockPlaintext => Protection::Plaintext,
            SessionKind::Secure(s) if s.suites.iter().all(|x| x.is_authenticated()) => {
                Protection::Authenticated
            }
            SessionKind::Secure(_) => Protection::Unauthenticated,
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
    /// Why no frame came, or what went wrong while frames came, when the receiver can tell
    /// (handshakes refused while the bridge was up: the key; a session taken over again and
    /// again: the same key in another receiver).
    pub diagnosis: Option<String>,
    /// How each output ended (frames it could not keep up with, its closing line).
    pub outputs: Vec<bus::OutputReport>,
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
    /// The drone answered a KEEPALIVE: its clock read `drone_ns` after `sent_ns` and before
    /// `received_ns` (this machine's clock, Unix ns: the session's monotonic clock carried to the
    /// wall clock, so a receiver that handles the event late does not move the exchange).
    ClockSample {
        sent_ns: u64,
        drone_ns: u64,
        received_ns: u64,
    },
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
/// ITU-R BT.601 weights). Anyone on the deck's network can send a stock stream: a file whose frame
/// header claims more than [`crate::codec::MAX_SAMPLES`] pixels is refused from its header, before
/// any decoding (`jpeg-decoder` checks its own limit only once the picture is decoded), and a
/// panic of the decoder, if any input still finds one, is caught and reported.
pub fn decode_stock_jpeg(data: &[u8]) -> Result<(usize, usize, Vec<u8>), String> {
    std::panic::catch_unwind(|| decode_stock_jpeg_inner(data))
        .unwrap_or_else(|_| Err("stock JPEG image: the decoder panicked".into()))
}

fn decode_stock_jpeg_inner(data: &[u8]) -> Result<(usize, usize, Vec<u8>), String> {
    let max = crate::codec::MAX_SAMPLES;
    let mut d = jpeg_decoder::Decoder::new(data);
    d.set_max_decoding_buffer_size(4 * max);
    d.read_info()
        .map_err(|e| format!("stock JPEG image: {e}"))?;
    let info = d.info().ok_or("stock JPEG image: no frame header")?;
    if info.width as usize * info.height as usize > max {
        return Err(format!(
            "stock JPEG image: {}x{} picture, more than {max} pixels",
            info.width, info.height
        ));
    }
    let px = d.decode().map_err(|e| format!("stock JPEG image: {e}"))?;
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
            pixel_format: None,
            pixels,
            state: None,
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

/// The secure protocol through `gapstream_protocol::connection::ReceiverConnection` (its
/// reassembler, `ReceiverSession` and packetizer; the packets come from the station's CPX decoder,
/// which the stock stream shares).
struct SecureSession {
    /// The connection, or why the settings make none (a packet size outside 1..=1020), which
    /// `opening` reports.
    conn: Result<ReceiverConnection, CpxError>,
    /// Counters of earlier connections (each connection has a new session).
    base: session::ReceiverCounters,
    keylog: Option<std::path::PathBuf>,
    /// The quality to ask for, and whether this session still has to ask.
    quality: Option<u8>,
    quality_due: bool,
}

/// A generator seeded from the OS for one call into the session.
fn rng() -> Result<DrbgRng, String> {
    DrbgRng::from_entropy(&mut OsEntropy).map_err(|e| e.to_string())
}

/// The protocol's clock (`session::Clock` promises monotonic time: timeouts, backoff, grace
/// windows): nanoseconds since the first call in this process, from `Instant`. Wall time may jump
/// (NTP, a user setting the clock), which would end or stretch sessions at random.
fn proto_clock() -> u64 {
    u64::try_from(clock_start().0.elapsed().as_nanos()).unwrap_or(u64::MAX)
}

/// The protocol clock's readings on the system clock as it is now (`sim::unix_ns`, the base of
/// frame arrival times), so that the two kinds of times compare even if the system clock was set
/// since the protocol clock started.
fn proto_to_unix() -> impl Fn(u64) -> u64 {
    let proto = proto_clock();
    let unix = crate::sim::unix_ns();
    move |t| (t as i128 + unix as i128 - proto as i128).clamp(0, u64::MAX as i128) as u64
}

/// When the protocol clock read 0: the `Instant`, and the wall-clock time then (ns since the Unix
/// epoch; 0 if the system clock is before it). A HELLO's time is the second plus the protocol
/// clock (`ReceiverConfig::wall_clock_origin_ns`): it follows the system clock across restarts of
/// this program and never goes back within one run.
fn clock_start() -> (Instant, u64) {
    static START: std::sync::OnceLock<(Instant, u64)> = std::sync::OnceLock::new();
    *START.get_or_init(|| {
        let wall = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
            .unwrap_or(0);
        (Instant::now(), wall)
    })
}

impl SecureSession {
    fn new(s: &SecureSettings, base: session::ReceiverCounters) -> Self {
        let cfg = session::ReceiverConfig {
            suites: s.suites.clone(),
            modes: s.modes.clone(),
            rsa_key: s.rsa_key.clone(),
            packet_payload: s.packet_payload,
            keylog: s.keylog.is_some(),
            wall_clock_origin_ns: clock_start().1,
            ..session::ReceiverConfig::default()
        };
        SecureSession {
            conn: ReceiverConnection::new(s.identity.clone(), cfg),
            base,
            keylog: s.keylog.clone(),
            quality: s.quality,
            quality_due: false,
        }
    }

    /// Appends the key-log lines the session produced (mode 0600, `secret_file`).
    fn write_keylog(&mut self, events: &mut Vec<Event>) {
        let (Some(path), Ok(conn)) = (&self.keylog, &mut self.conn) else {
            return;
        };
        let mut text = String::new();
        while let Some(line) = conn.session_mut().drain_keylog() {
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

    /// Appends what the session queued, as CPX packets.
    fn flush(&mut self, reply: &mut Vec<u8>) {
        if let Ok(conn) = &mut self.conn {
            while let Some(p) = conn.poll_transmit() {
                reply.extend_from_slice(p);
            }
        }
    }

    fn event(ev: ReceiverEvent, events: &mut Vec<Event>) {
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
                let state = match f.state() {
                    None => None,
                    Some(Ok(r)) => Some(r),
                    // Authentic, but a record this build cannot read (a newer drone): the frame
                    // goes on without it.
                    Some(Err(e)) => {
                        events.push(Event::Info(format!("frame {}: {e}", h.sequence)));
                        None
                    }
                };
                events.push(Event::Frame(Delivered {
                    seq: h.sequence,
                    epoch: Some(h.epoch),
                    capture_ns: Some(h.capture_ns),
                    width: h.width as usize,
                    height: h.height as usize,
                    pixel_format: Some(h.pixel_format),
                    pixels: f.into_pixels(),
                    state,
                }))
            }
            ReceiverEvent::Rekeyed { .. } => {}
            ReceiverEvent::ClockSample {
                sent_ns,
                drone_ns,
                received_ns,
            } => {
                let wall = proto_to_unix();
                events.push(Event::ClockSample {
                    sent_ns: wall(sent_ns),
                    drone_ns,
                    received_ns: wall(received_ns),
                })
            }
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
        let conn = self
            .conn
            .as_mut()
            .map_err(|e| format!("cannot start the handshake: {e}"))?;
        conn.connect(&mut rng()?, &proto_clock)
            .map_err(|e| format!("cannot start the handshake: {e}"))?;
        let mut out = Vec::new();
        self.flush(&mut out);
        Ok(out)
    }

    fn closing(&mut self) -> Vec<u8> {
        let mut out = Vec::new();
        if let Ok(conn) = &mut self.conn
            && conn.session().is_established()
        {
            conn.close(&mut Sequential);
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
        let Ok(conn) = &mut self.conn else { return };
        if let Err(e) = conn.read_packet(route, payload) {
            events.push(Event::Rejected(format!("CPX message dropped: {e}")));
        }
        while conn.has_message() {
            let mut r = match rng() {
                Ok(r) => r,
                Err(e) => return events.push(Event::Fatal(e)),
            };
            match conn.process_message(&mut Sequential, &mut r, &proto_clock) {
                Ok(Some(ev)) => {
                    // SET_QUALITY once the group key is held (its KEY_ACK is queued first, so
                    // the drone has confirmed the session when the request arrives).
                    match (&ev, self.quality) {
                        (ReceiverEvent::Established { .. }, Some(_)) => self.quality_due = true,
                        (ReceiverEvent::Rekeyed { .. }, Some(q)) if self.quality_due => {
                            self.quality_due = false;
                            match conn.request_quality(&mut Sequential, q) {
                                Ok(()) => events.push(Event::Info(format!(
                                    "asked the drone for JPEG quality {q}"
                                ))),
                                Err(e) => events.push(Event::Info(format!(
                                    "cannot ask the drone for quality {q}: {e}"
                                ))),
                            }
                        }
                        _ => {}
                    }
                    Self::event(ev, events)
                }
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
        let Ok(conn) = &mut self.conn else { return };
        let Ok(mut r) = rng() else { return };
        if let Some(ev) = conn.handle_timeout(&mut Sequential, &mut r, &proto_clock) {
            Self::event(ev, events);
        }
        self.write_keylog(events);
        self.flush(reply);
    }

    fn counters(&self, c: &mut Counters) {
        let Ok(conn) = &self.conn else { return };
        let rs = conn.session();
        let s = rs.counters();
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
            + s.control_rejected
            + b.bad_accepts
            + s.bad_accepts;
        if let Some(h) = rs.handshake_stats() {
            c.handshake_ms = h.duration_ns as f64 / 1e6;
            c.handshake_tx_bytes = h.wire_bytes_sent;
            c.handshake_rx_bytes = h.wire_bytes_received;
        }
        if let Some(e) = rs.epoch() {
            c.key_epoch = e as u64;
        }
    }

    fn suite_label(&self) -> Option<String> {
        let h = self.conn.as_ref().ok()?.session().handshake_stats()?;
        let warn = if h.suite.is_authenticated() {
            ""
        } else {
            " (detects NO tampering)"
        };
        Some(format!("{} / {}{warn}", h.suite, h.mode))
    }

    fn raw_counters(&self) -> Option<session::ReceiverCounters> {
        Some(self.conn.as_ref().ok()?.session().counters())
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

/// Runs the receiver until stopped, the duration is over, `max_frames` were delivered or an
/// output failed; then closes the bus (every output finishes) and sums up.
pub fn run(cfg: ReceiverConfig, bus: Bus) -> Result<Summary, ReceiverError> {
    run_shared(cfg, Arc::new(bus))
}

/// [`run`] on a bus shared with other receivers (a ground station's drones): the bus is closed
/// (its outputs finish, [`Summary::outputs`]) only when this receiver holds it last; otherwise
/// its owner closes it once every receiver returned.
pub fn run_shared(cfg: ReceiverConfig, bus: Arc<Bus>) -> Result<Summary, ReceiverError> {
    let mut st = station::Station::new(&cfg, bus);
    let mut outcome = Ok(());
    while outcome.is_ok() && !st.done() {
        let Some(mut link) = st.connect() else {
            continue;
        };
        let mut session = new_session(&cfg.session, st.base());
        outcome = st.stream(&mut *link, &mut *session);
        st.carry(&*session);
    }
    st.finish(outcome)
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

    /// A packet size the connection cannot send is a clear error when the session opens (it used
    /// to leave the HELLO unsent and the handshake waiting for ever); a valid one opens with a
    /// HELLO in packets of that size.
    #[test]
    fn secure_session_refuses_a_bad_packet_size_at_the_opening() {
        let (_drone, rx) = crate::run::fresh_pairing().unwrap();
        let settings = |packet_payload| SecureSettings {
            identity: rx.clone(),
            suites: vec![Suite::ChaCha20Poly1305],
            modes: vec![KexMode::X25519],
            packet_payload,
            rsa_key: None,
            keylog: None,
            quality: None,
        };
        for bad in [0, 1021] {
            let mut s = SecureSession::new(&settings(bad), Default::default());
            let e = s.opening().unwrap_err();
            assert!(
                e.contains(&format!("CPX packet payload size {bad} outside 1..=1020")),
                "{e}"
            );
        }
        let mut s = SecureSession::new(&settings(16), Default::default());
        let hello = s.opening().unwrap();
        let mut rest = &hello[..];
        let mut payloads = Vec::new();
        while let Ok(Some(n)) = gapstream_protocol::cpx::packet_len(rest) {
            payloads.push(n - 4);
            rest = &rest[n..];
        }
        assert!(rest.is_empty());
        assert!(
            payloads.len() >= 4 && payloads.iter().all(|&n| n <= 16),
            "{payloads:?}"
        );
    }
}
