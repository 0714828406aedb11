//! The drone's main loop: double-buffered capture, seal, send as CPX packets, answer the receiver.
//!
//! Pipelining: two frame buffers. While frame N is sealed and sent (the slow SPI transfer), the
//! camera already captures frame N+1 into the other buffer, so the frame period is bounded by the
//! slower of capture and send, not their sum (the ~8 fps of the paper, F. Barchi et al., "RUST-Encoded
//! Stream Ciphers on a RISC-V Parallel Ultra-Low-Power Processor", PARMA-DITAM 2023, came from doing
//! them in turn). NanoCockpit (E. Cereda, A. Giusti, D. Palossi, arXiv:2601.07476, 2026) pipelines
//! the AI-deck's acquisition, computation and streaming the same way.
//!
//! ```text
//! start(B)            ... capture N+1 into B runs in the background ...
//! wait() -> A  ──►  start(B)  ──►  seal A, send A  ──►  wait() -> B  ──►  start(A) ...
//! ```

use alloc::boxed::Box;
use alloc::vec;
use alloc::vec::Vec;

use gap_rust_cipher_s::KeystreamApplier;
use gapstream_protocol::compat;
use gapstream_protocol::connection::{DroneConnection, Incoming};
use gapstream_protocol::cpx::{self, Function, LastFlag, Packetizer, Route, StreamDecoder, Target};
use gapstream_protocol::frame::FrameMeta;
use gapstream_protocol::handshake::DroneIdentity;
use gapstream_protocol::padding::{self, Padding};
use gapstream_protocol::session::{self, DroneEvent, DroneSession};

use crate::boot::Boot;
use crate::rng::DrbgRng;
use crate::state::{StateConfig, StateSource, StateTracker};
use crate::traits::{
    Camera, Capture, Clock, Entropy, EntropyError, FrameCoder, FrameFormat, Link, PixelFormat,
};

/// The secure mode's settings: the pairing identity (the drone's static key and the public keys of
/// its receivers, from `gapstream pair`; an `Identity` for one receiver converts with `.into()`) and
/// the protocol's session settings (suites, receivers at once, rekey policy), and this boot's
/// value of the persistent boot counter ([`Boot::advance`]: without a stored counter there is no
/// secure stream). The boot value overrides `session.boot_counter` and is mixed into every random
/// number the drone draws.
#[derive(Clone, Debug)]
pub struct SecureConfig {
    pub identity: DroneIdentity,
    pub session: session::DroneConfig,
    pub boot: Boot,
}

/// How frames leave the drone.
#[derive(Clone, Debug)]
pub enum Mode {
    /// Bitcraze's stock image stream in clear (11-byte `0xBC` header packet, then the image in
    /// packets, `last_packet` on every packet): what a stock viewer shows. No security at all.
    /// As the stock `wifi-img-streamer`, frames are sent only while the ESP32 reports a WiFi client
    /// (WIFI_CTRL `[0x32, 1]`), always whole, so a viewer's first bytes are an image header.
    StockPlaintext,
    /// gapstream's protocol: a Noise_KK handshake with each paired receiver (up to the session's
    /// `max_receivers` at once), every frame sealed once under the group's frame key with the
    /// negotiated suite, rekeying when receivers join or leave, all through
    /// `gapstream_protocol::connection::DroneConnection` (its `DroneSession` behind CPX framing).
    Secure(Box<SecureConfig>),
}

/// Settings of the drone application.
#[derive(Clone, Debug)]
pub struct DroneConfig {
    pub mode: Mode,
    /// CPX payload bytes per packet (128, 256, 512 or 1020; the CPX maximum is 1020).
    pub packet_payload: usize,
}

impl Default for DroneConfig {
    fn default() -> Self {
        DroneConfig {
            mode: Mode::StockPlaintext,
            packet_payload: cpx::MAX_PAYLOAD,
        }
    }
}

/// Time spent per stage and what was done, for the paper-style breakdown.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DroneStats {
    pub frames_captured: u64,
    pub frames_sent: u64,
    /// Frames captured while no receiver was ready (not sent): in secure mode no session, in stock
    /// mode no WiFi client reported by the ESP32.
    pub frames_skipped: u64,
    pub bytes_sent: u64,
    pub packets_sent: u64,
    /// Time blocked waiting for the camera (capture not hidden behind the send).
    pub capture_wait_ns: u64,
    /// Time sealing (encrypt + tag).
    pub seal_ns: u64,
    /// Time in `Link::send`.
    pub send_ns: u64,
    /// Frames sent coded by the [`FrameCoder`] (compress, then seal), their coded bytes and the
    /// time coding them; frames the coder declined or failed on went out raw (`coder_errors`
    /// counts the failures).
    pub frames_coded: u64,
    pub coded_bytes: u64,
    pub code_ns: u64,
    /// Coded frames sent padded (length-hiding padding, [`Drone::set_padding`]) and the bytes the
    /// padding added (trailer included).
    pub frames_padded: u64,
    pub padding_bytes: u64,
    /// SET_QUALITY requests from receivers, and the last quality asked for.
    pub quality_requests: u64,
    pub quality: Option<u8>,
    pub coder_errors: u64,
    /// Upstream trouble: stretches of bytes that were not CPX (secure mode: one per stretch; stock
    /// mode: one per CPX error), messages that lost packets, messages the session rejected.
    pub upstream_errors: u64,
    /// Handshakes completed / HELLOs refused / group keys acknowledged (secure mode).
    pub handshakes: u64,
    pub hellos_refused: u64,
    pub rekeys_acked: u64,
    /// Receivers that left (CLOSE or silence), and receivers with a session now (secure mode).
    pub receivers_left: u64,
    pub receivers: u32,
    /// Why the session last rejected a message (a replayed or forged control message, ...) and
    /// why it last refused a HELLO: for a device's log (the counters above count them).
    pub last_rejected: Option<session::DroneError>,
    pub last_refused_hello: Option<gapstream_protocol::handshake::HandshakeError>,
}

/// Why the drone loop stopped.
#[derive(Debug)]
pub enum DroneError<CE, LE> {
    Camera(CE),
    Link(LE),
    /// The configured packet size is outside 1..=1020.
    Config(cpx::CpxError),
    /// The entropy source failed (no handshake can be answered).
    Entropy(EntropyError),
    /// A frame could not be sealed (for example the sequence numbers are used up).
    Seal(session::SealError),
}

impl<CE: core::fmt::Display, LE: core::fmt::Display> core::fmt::Display for DroneError<CE, LE> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            DroneError::Camera(e) => write!(f, "camera: {e}"),
            DroneError::Link(e) => write!(f, "link: {e}"),
            DroneError::Config(e) => write!(f, "configuration: {e}"),
            DroneError::Entropy(e) => write!(f, "{e}"),
            DroneError::Seal(e) => write!(f, "sealing a frame: {e}"),
        }
    }
}

/// The stock image header: magic, width, height, depth, type (0 = raw), size. 11 bytes, LE.
pub fn stock_header(fmt: FrameFormat) -> [u8; 11] {
    stock_header_with(fmt, 0, fmt.bytes())
}

/// The stock image header of an image of `size` bytes of type `kind` (0 raw, 1 JPEG: what
/// Bitcraze's `wifi-img-streamer` sends in its JPEG mode and its viewer decodes).
pub fn stock_header_with(fmt: FrameFormat, kind: u8, size: usize) -> [u8; 11] {
    let mut h = [0u8; 11];
    h[0] = 0xBC;
    h[1..3].copy_from_slice(&fmt.width.to_le_bytes());
    h[3..5].copy_from_slice(&fmt.height.to_le_bytes());
    h[5] = 1;
    h[6] = kind;
    h[7..11].copy_from_slice(&(size as u32).to_le_bytes());
    h
}

/// What speaks to the ESP32, per mode.
// Both live inline in the drone (on the firmware's main task stack): boxing the connection would
// move it onto the L2 heap, which has about 2 KB to spare.
#[allow(clippy::large_enum_variant)]
enum Upstream {
    /// The stock stream: only the ESP32's WIFI_CTRL status comes up.
    Stock(StreamDecoder),
    /// The protocol: deframer, reassembler, session and packetizer.
    Secure(DroneConnection),
}

/// The drone application, generic over its hardware.
pub struct Drone<C: Camera, L: Link, K: Clock, E: Entropy, A: KeystreamApplier> {
    camera: C,
    link: L,
    clock: K,
    entropy: E,
    applier: A,
    upstream: Upstream,
    /// The boot counter's value (secure mode), mixed into the DRBG.
    boot: u32,
    cfg: DroneConfig,
    format: FrameFormat,
    /// The buffer not in the camera (None while it is being processed or before the first start).
    spare: Option<Vec<u8>>,
    started: bool,
    /// One packet on the link, whatever is sent (the session's messages, frames, the stock
    /// stream).
    packet: Vec<u8>,
    rx_buf: Vec<u8>,
    stats: DroneStats,
    /// The ESP32's last WIFI_CTRL client status (stock mode streams only while it is true).
    wifi_client: bool,
    /// Compress, then seal: the frame coder (None: raw frames) and its output buffer.
    coder: Option<Box<dyn FrameCoder + Send>>,
    coded: Vec<u8>,
    /// Length-hiding padding of coded frames (secure mode).
    padding: Padding,
    /// The flight controller's state messages (the firmware's UART, the simulated flight
    /// controller): every frame's header carries its record (secure mode). None: no state path,
    /// 36-byte headers. Boxed: its latch and parser (~0.5 KB) go on the heap, not on the
    /// firmware's main task stack with the drone.
    state: Option<Box<StateTracker<Box<dyn StateSource>>>>,
}

impl<C: Camera, L: Link, K: Clock, E: Entropy, A: KeystreamApplier> Drone<C, L, K, E, A> {
    // Not inlined: the connection it builds moves its kilobyte deframer through temporaries that
    // would otherwise stay in the caller's frame (the firmware's main task) for the whole run.
    #[inline(never)]
    pub fn new(
        camera: C,
        link: L,
        clock: K,
        entropy: E,
        applier: A,
        cfg: DroneConfig,
    ) -> Result<Self, DroneError<C::Error, L::Error>> {
        let format = camera.format();
        // One error path: a packet size outside 1..=1020.
        let (upstream, boot) = match &cfg.mode {
            Mode::StockPlaintext if !(1..=cpx::MAX_PAYLOAD).contains(&cfg.packet_payload) => {
                (Err(cpx::CpxError::BadPacketSize(cfg.packet_payload)), 0)
            }
            Mode::StockPlaintext => (Ok(Upstream::Stock(StreamDecoder::new())), 0),
            Mode::Secure(sc) => {
                let mut scfg = sc.session.clone();
                scfg.packet_payload = cfg.packet_payload;
                scfg.boot_counter = sc.boot.value();
                let conn = DroneConnection::new(sc.identity.clone(), scfg);
                (conn.map(Upstream::Secure), sc.boot.value())
            }
        };
        let upstream = upstream.map_err(DroneError::Config)?;
        Ok(Drone {
            upstream,
            boot,
            camera,
            link,
            clock,
            entropy,
            applier,
            format,
            spare: Some(vec![0u8; format.bytes()]),
            started: false,
            packet: vec![0u8; cpx::WIRE_OVERHEAD + cfg.packet_payload],
            cfg,
            rx_buf: vec![0u8; 2048],
            stats: DroneStats::default(),
            wifi_client: false,
            coder: None,
            coded: Vec::new(),
            padding: Padding::Off,
            state: None,
        })
    }

    /// Gives the drone its flight controller's state messages: from now on every frame's header
    /// carries the state record of the end of its exposure (`gapstream_protocol::state`; secure
    /// mode only, the stock stream has no room for it). The source is read twice per frame: when
    /// the capture is in, and before the frame's last packet goes to the link.
    pub fn set_state_source(&mut self, source: Box<dyn StateSource>, cfg: StateConfig) {
        self.state = Some(Box::new(StateTracker::new(source, cfg)));
    }

    /// The state path's parser and latch (counters, last error), when there is one.
    pub fn state_tracker(&self) -> Option<&StateTracker<Box<dyn StateSource>>> {
        self.state.as_deref()
    }

    /// Codes every frame with `coder` before sealing it (compress, then seal); `None`: raw
    /// frames. In stock mode only JPEG is sent coded (Bitcraze's image type 1); other codes go
    /// out raw there.
    pub fn set_coder(&mut self, coder: Option<Box<dyn FrameCoder + Send>>) {
        self.coder = coder;
    }

    /// Pads every coded frame, inside the AEAD, to the next of `padding`'s sizes (capped at the raw
    /// frame's length) and flags it padded (secure mode; raw frames, whose length is fixed, and the
    /// stock stream are never padded). [`Padding::Off`] (the default): no padding.
    pub fn set_padding(&mut self, padding: Padding) {
        self.padding = padding;
    }

    pub fn stats(&self) -> DroneStats {
        self.stats
    }

    pub fn link_mut(&mut self) -> &mut L {
        &mut self.link
    }

    pub fn camera_mut(&mut self) -> &mut C {
        &mut self.camera
    }

    /// Whether the ESP32 last reported a WiFi client connected (WIFI_CTRL status).
    pub fn wifi_client_connected(&self) -> bool {
        self.wifi_client
    }

    /// The protocol session (secure mode).
    pub fn session(&self) -> Option<&DroneSession> {
        self.connection().map(|c| c.session())
    }

    /// The protocol connection (secure mode): its session and CPX counters.
    pub fn connection(&self) -> Option<&DroneConnection> {
        match &self.upstream {
            Upstream::Secure(c) => Some(c),
            Upstream::Stock(_) => None,
        }
    }

    /// One frame period: wait for the capture in flight, start the next one into the other buffer,
    /// service the receiver's messages, seal and send the captured frame.
    pub fn step(&mut self) -> Result<(), DroneError<C::Error, L::Error>> {
        // A camera that captures only when waited for (`captures_ahead` false) gets the one
        // buffer back before every capture: the drone holds a single frame buffer.
        let ahead = self.camera.captures_ahead();
        if !self.started || !ahead {
            let b = self
                .spare
                .take()
                .unwrap_or_else(|| vec![0u8; self.format.bytes()]);
            self.camera.start(b).map_err(DroneError::Camera)?;
            if ahead {
                self.spare = Some(vec![0u8; self.format.bytes()]);
            }
            self.started = true;
        }
        let t0 = self.clock.now_ns();
        let cap = self.camera.wait().map_err(DroneError::Camera)?;
        let t1 = self.clock.now_ns();
        self.stats.capture_wait_ns += t1.saturating_sub(t0);
        self.stats.frames_captured += 1;
        if ahead {
            // Frame N+1 is captured while frame N is sealed and sent.
            let next = self
                .spare
                .take()
                .unwrap_or_else(|| vec![0u8; self.format.bytes()]);
            self.camera.start(next).map_err(DroneError::Camera)?;
        }
        if let Some(t) = &mut self.state {
            // Everything that came in on the UART since the last frame (the firmware's ring keeps the
            // newest 128 ms).
            t.poll();
        }
        self.service_upstream()?;
        let mut cap = cap;
        let r = self.send_frame(&mut cap);
        self.spare = Some(cap.buf);
        r
    }

    /// Reads and handles whatever the receiver sent (handshake, rekey); never blocks.
    pub fn service_upstream(&mut self) -> Result<(), DroneError<C::Error, L::Error>> {
        loop {
            let n = self
                .link
                .poll_recv(&mut self.rx_buf)
                .map_err(DroneError::Link)?;
            if n == 0 {
                return Ok(());
            }
            let (wifi, errors) = (&mut self.wifi_client, &mut self.stats.upstream_errors);
            let conn = match &mut self.upstream {
                // Stock mode has no upstream protocol: only the ESP32's client status matters.
                Upstream::Stock(rx) => {
                    rx.decode_all(&self.rx_buf[..n], &mut |r| match r {
                        Ok(p) => {
                            if let Some(c) = compat::parse_client_status(p.route, p.payload) {
                                *wifi = c;
                            }
                        }
                        Err(_) => *errors += 1,
                    });
                    continue;
                }
                Upstream::Secure(conn) => conn,
            };
            // gapstream packets are grouped into messages (lost or garbled packets cost only
            // their message); the ESP32's client status comes through as another function.
            conn.read_stream(&self.rx_buf[..n], |i| match i {
                Incoming::Other(p) => {
                    if let Some(c) = compat::parse_client_status(p.route, p.payload) {
                        *wifi = c;
                    }
                }
                Incoming::Garbled(_) | Incoming::Dropped(_) => *errors += 1,
                Incoming::Message { .. } => {}
            });
            while conn.has_message() {
                // A fresh generator per message, seeded from the entropy source (messages are
                // rare: HELLO, KEY_ACK, REKEY_REQUEST, KEEPALIVE, CLOSE).
                let mut rng = DrbgRng::from_entropy_at_boot(&mut self.entropy, self.boot)
                    .map_err(DroneError::Entropy)?;
                let st = &mut self.stats;
                match conn.process_message(&mut self.applier, &mut rng, &self.clock) {
                    Ok(Some(DroneEvent::Established { .. })) => st.handshakes += 1,
                    Ok(Some(DroneEvent::HelloRefused(e))) => {
                        st.hellos_refused += 1;
                        st.last_refused_hello = Some(e);
                    }
                    Ok(Some(DroneEvent::KeyAcked { .. })) => st.rekeys_acked += 1,
                    Ok(Some(DroneEvent::QualityRequested { quality, .. })) => {
                        // From the next frame on (this runs before the frame is coded).
                        if let Some(c) = self.coder.as_mut() {
                            c.set_quality(quality);
                        }
                        st.quality_requests += 1;
                        st.quality = Some(quality);
                    }
                    Ok(Some(DroneEvent::Left { .. })) => st.receivers_left += 1,
                    Ok(_) => {}
                    Err(e) => {
                        st.upstream_errors += 1;
                        st.last_rejected = Some(e);
                    }
                }
                st.receivers = conn.session().members() as u32;
                send_queued(conn, &mut self.packet, &mut self.link, st)?;
            }
        }
    }

    fn send_frame(&mut self, cap: &mut Capture) -> Result<(), DroneError<C::Error, L::Error>> {
        let conn = match &mut self.upstream {
            Upstream::Stock(_) => {
                if !self.wifi_client {
                    self.stats.frames_skipped += 1;
                    return Ok(());
                }
                let route = Route::new(Target::Gap8, Target::WifiHost, Function::App);
                let coded = code_frame(
                    &mut self.coder,
                    self.format,
                    &cap.buf,
                    &mut self.coded,
                    &self.clock,
                    &mut self.stats,
                );
                let (image, kind) = match coded {
                    Some(PixelFormat::Jpeg) => (&self.coded[..], 1),
                    _ => (&cap.buf[..], 0),
                };
                let header = stock_header_with(self.format, kind, image.len());
                let t0 = self.clock.now_ns();
                let size = self.cfg.packet_payload;
                for part in [&header[..], image] {
                    // `last_packet` on every packet, as the stock GAP8 firmware does.
                    let p = Packetizer::new(route, [part, &[], &[]], size, LastFlag::Every)
                        .map_err(DroneError::Config)?;
                    send_message(p, &mut self.packet, &mut self.link, &mut self.stats)?;
                }
                self.stats.send_ns += self.clock.now_ns().saturating_sub(t0);
                self.stats.frames_sent += 1;
                return Ok(());
            }
            Upstream::Secure(conn) => conn,
        };
        if conn.session().members() > 0 {
            // Timers: a receiver silent too long has left, the rekey policy (frames, time, joins
            // and leaves), GROUP_KEY resends. A new epoch needs fresh randomness.
            let mut rng = DrbgRng::from_entropy_at_boot(&mut self.entropy, self.boot)
                .map_err(DroneError::Entropy)?;
            let left = conn.handle_timeout(&mut self.applier, &mut rng, &self.clock);
            self.stats.receivers_left += left as u64;
            self.stats.receivers = conn.session().members() as u32;
        }
        if !conn.session().is_established() {
            self.stats.frames_skipped += 1;
            return send_queued(conn, &mut self.packet, &mut self.link, &mut self.stats);
        }
        let coded = code_frame(
            &mut self.coder,
            self.format,
            &cap.buf,
            &mut self.coded,
            &self.clock,
            &mut self.stats,
        );
        let mut padded = false;
        if coded.is_some() {
            let n = self.coded.len();
            if padding::pad(&mut self.coded, self.padding, self.format.bytes()) {
                padded = true;
                self.stats.frames_padded += 1;
                self.stats.padding_bytes += (self.coded.len() - n) as u64;
            }
        }
        let (pixel_format, payload) = match coded {
            Some(f) => (f, &mut self.coded),
            None => (self.format.pixel, &mut cap.buf),
        };
        let meta = FrameMeta {
            padded,
            pixel_format,
            width: self.format.width,
            height: self.format.height,
            capture_ns: cap.capture_ns,
            // The newest sample that had arrived when the exposure ended (the capture time).
            state: self.state.as_ref().map(|t| t.record(cap.capture_ns)),
        };
        let t0 = self.clock.now_ns();
        let sealed = conn
            .seal_frame(&mut self.applier, &self.clock, meta, payload)
            .map_err(DroneError::Seal)?;
        let t1 = self.clock.now_ns();
        self.stats.seal_ns += t1.saturating_sub(t0);
        // GROUP_KEYs queued by the timers go out before this frame.
        send_queued(conn, &mut self.packet, &mut self.link, &mut self.stats)?;
        let p = conn.frame_packetizer(&sealed, payload);
        let state = &mut self.state;
        send_message_with(
            p,
            &mut self.packet,
            &mut self.link,
            &mut self.stats,
            |left| {
                if let (1, Some(t)) = (left, state.as_mut()) {
                    // The state messages that came in while the frame was sealed and queued, read
                    // before its last packet: with the firmware's link task the ring is full then (a
                    // raw frame has more packets than its slots) and the loop would wait for a slot
                    // anyway, so this costs no link time; the next step, whose work up to its first
                    // packet is what the ring must cover, reads only the bytes since. The records stay
                    // the same: a frame takes the newest sample that had arrived when its capture
                    // completed.
                    t.poll();
                }
            },
        )?;
        self.stats.send_ns += self.clock.now_ns().saturating_sub(t1);
        self.stats.frames_sent += 1;
        Ok(())
    }
}

/// Codes the frame with the coder, if any: `Some(format)` when `out` holds the coded frame,
/// `None` to send it raw (no coder, declined, or failed: counted).
fn code_frame<K: Clock>(
    coder: &mut Option<Box<dyn FrameCoder + Send>>,
    format: FrameFormat,
    frame: &[u8],
    out: &mut Vec<u8>,
    clock: &K,
    stats: &mut DroneStats,
) -> Option<PixelFormat> {
    let coder = coder.as_mut()?;
    let t0 = clock.now_ns();
    let r = coder.code(format, frame, out);
    stats.code_ns += clock.now_ns().saturating_sub(t0);
    match r {
        Ok(Some(f)) => {
            stats.frames_coded += 1;
            stats.coded_bytes += out.len() as u64;
            Some(f)
        }
        Ok(None) => None,
        Err(_) => {
            stats.coder_errors += 1;
            None
        }
    }
}

/// Sends what the session queued (ACCEPT, ALERT, GROUP_KEY, KEEPALIVE, CLOSE); the bridge gives
/// each message to every receiver, which skip the ones for the others.
fn send_queued<L: Link, CE>(
    conn: &mut DroneConnection,
    packet: &mut [u8],
    link: &mut L,
    stats: &mut DroneStats,
) -> Result<(), DroneError<CE, L::Error>> {
    while let Some(p) = conn.poll_message() {
        send_message(p, packet, link, stats)?;
    }
    Ok(())
}

/// Sends one message's packets (`p`: the session's, a frame's, the stock stream's) over the link,
/// cut in `packet`. One loop for everything the drone sends (the firmware's code space is tight).
fn send_message<L: Link, CE>(
    p: Packetizer<'_>,
    packet: &mut [u8],
    link: &mut L,
    stats: &mut DroneStats,
) -> Result<(), DroneError<CE, L::Error>> {
    send_message_with(p, packet, link, stats, |_| {})
}

/// [`send_message`], calling `before(left)` before each packet is handed to the link (`left`:
/// the packets still to go, this one included).
fn send_message_with<L: Link, CE>(
    mut p: Packetizer<'_>,
    packet: &mut [u8],
    link: &mut L,
    stats: &mut DroneStats,
    mut before: impl FnMut(usize),
) -> Result<(), DroneError<CE, L::Error>> {
    loop {
        let left = p.packets_left();
        let Some(r) = p.next_packet(packet) else {
            break;
        };
        let n = r.map_err(DroneError::Config)?;
        before(left);
        link.send(&packet[..n]).map_err(DroneError::Link)?;
        stats.packets_sent += 1;
        stats.bytes_sent += n as u64;
    }
    Ok(())
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::testpattern::{self, Stamp};
    use crate::traits::{EntropyError, PixelFormat};
    use alloc::collections::VecDeque;
    use core::cell::Cell;
    use gap_rust_cipher_s::Sequential;
    use gapstream_protocol::assembler::Assembler;
    use gapstream_protocol::cpx::GAPSTREAM_FUNCTION;

    /// A camera that renders the test pattern; records the order of start / wait calls.
    pub struct PatternCamera {
        pub fmt: FrameFormat,
        pub in_flight: Option<Vec<u8>>,
        pub next_index: u32,
        pub log: Vec<&'static str>,
        pub buffers_seen: Vec<*const u8>,
        /// What `captures_ahead` says (double buffering when true).
        pub ahead: bool,
    }
    impl Camera for PatternCamera {
        type Error = &'static str;
        fn format(&self) -> FrameFormat {
            self.fmt
        }
        fn captures_ahead(&self) -> bool {
            self.ahead
        }
        fn start(&mut self, buf: Vec<u8>) -> Result<(), &'static str> {
            if self.in_flight.is_some() {
                return Err("capture already in flight");
            }
            self.log.push("start");
            self.buffers_seen.push(buf.as_ptr());
            self.in_flight = Some(buf);
            Ok(())
        }
        fn wait(&mut self) -> Result<Capture, &'static str> {
            let mut buf = self.in_flight.take().ok_or("no capture in flight")?;
            self.log.push("wait");
            let (w, h) = (self.fmt.width as usize, self.fmt.height as usize);
            let stamp = Stamp {
                frame: self.next_index,
                capture_ns: 1000 * self.next_index as u64,
            };
            testpattern::render(&mut buf, w, h, stamp).map_err(|_| "render")?;
            self.next_index += 1;
            Ok(Capture {
                buf,
                capture_ns: stamp.capture_ns,
            })
        }
    }

    #[derive(Default)]
    pub struct VecLink {
        pub sent: Vec<u8>,
        pub packets: usize,
        pub inbox: VecDeque<u8>,
        /// `packets`, for a test's other parts to see while the drone owns the link.
        pub packets_seen: alloc::rc::Rc<Cell<usize>>,
    }
    impl Link for VecLink {
        type Error = &'static str;
        fn send(&mut self, p: &[u8]) -> Result<(), &'static str> {
            self.sent.extend_from_slice(p);
            self.packets += 1;
            self.packets_seen.set(self.packets);
            Ok(())
        }
        fn poll_recv(&mut self, buf: &mut [u8]) -> Result<usize, &'static str> {
            let n = buf.len().min(self.inbox.len());
            for b in buf.iter_mut().take(n) {
                *b = self.inbox.pop_front().unwrap_or(0);
            }
            Ok(n)
        }
    }

    pub struct TickClock(pub Cell<u64>);
    impl Clock for TickClock {
        fn now_ns(&self) -> u64 {
            self.0.set(self.0.get() + 10);
            self.0.get()
        }
    }
    pub struct CountingEntropy(pub u8);
    impl Entropy for CountingEntropy {
        fn fill(&mut self, d: &mut [u8]) -> Result<(), EntropyError> {
            for b in d {
                self.0 = self.0.wrapping_add(1);
                *b = self.0;
            }
            Ok(())
        }
    }

    pub fn camera() -> PatternCamera {
        PatternCamera {
            fmt: FrameFormat {
                width: 324,
                height: 244,
                pixel: PixelFormat::Grey8,
            },
            in_flight: None,
            next_index: 0,
            log: Vec::new(),
            buffers_seen: Vec::new(),
            ahead: true,
        }
    }

    pub type TestDrone<A> = Drone<PatternCamera, VecLink, TickClock, CountingEntropy, A>;
    pub type TestError = DroneError<<PatternCamera as Camera>::Error, <VecLink as Link>::Error>;

    /// The drone of these tests: pattern camera, recording link, ticking clock, counting entropy.
    pub fn test_drone<A: KeystreamApplier>(
        applier: A,
        cfg: DroneConfig,
    ) -> Result<TestDrone<A>, TestError> {
        Drone::new(
            camera(),
            VecLink::default(),
            TickClock(Cell::new(0)),
            CountingEntropy(0),
            applier,
            cfg,
        )
    }

    #[test]
    fn next_capture_starts_before_the_frame_is_sent_and_buffers_alternate() {
        let mut d = test_drone(Sequential, DroneConfig::default()).unwrap();
        tell_client_status(&mut d, true);
        for _ in 0..4 {
            let before = d.link.packets;
            d.step().unwrap();
            // After a step the next capture is in flight and the frame went out.
            assert!(d.camera.in_flight.is_some());
            assert!(d.link.packets > before);
        }
        assert_eq!(
            d.camera.log[..5],
            ["start", "wait", "start", "wait", "start"]
        );
        // Two buffers, used alternately: A B A B ...
        let seen = &d.camera.buffers_seen;
        assert_ne!(seen[0], seen[1]);
        assert_eq!(seen[0], seen[2]);
        assert_eq!(seen[1], seen[3]);
        assert_eq!(d.stats().frames_sent, 4);
    }

    /// A camera that captures only when waited for: each capture starts right before its wait,
    /// and the drone holds one frame buffer (the same one every frame).
    #[test]
    fn a_camera_that_does_not_capture_ahead_gets_one_buffer() {
        let mut d = test_drone(Sequential, DroneConfig::default()).unwrap();
        d.camera.ahead = false;
        tell_client_status(&mut d, true);
        for _ in 0..4 {
            let before = d.link.packets;
            d.step().unwrap();
            assert!(d.camera.in_flight.is_none());
            assert!(d.link.packets > before);
        }
        assert_eq!(
            d.camera.log[..],
            [
                "start", "wait", "start", "wait", "start", "wait", "start", "wait"
            ]
        );
        let seen = &d.camera.buffers_seen;
        assert!(seen.iter().all(|&p| p == seen[0]), "{seen:?}");
        assert!(d.spare.is_some());
        assert_eq!(d.stats().frames_sent, 4);
    }

    #[test]
    fn stock_stream_is_header_then_image_with_last_on_every_packet() {
        let mut d = test_drone(
            Sequential,
            DroneConfig {
                packet_payload: 512,
                ..DroneConfig::default()
            },
        )
        .unwrap();
        tell_client_status(&mut d, true);
        d.step().unwrap();
        let mut dec = StreamDecoder::new();
        let mut input = &d.link.sent[..];
        let mut payloads: Vec<Vec<u8>> = Vec::new();
        while let Some(r) = dec.decode(&mut input) {
            let p = r.unwrap();
            assert!(p.route.last_packet);
            assert_eq!(p.route.function, Function::App as u8);
            assert_eq!(
                (p.route.source, p.route.destination),
                (Target::Gap8 as u8, Target::WifiHost as u8)
            );
            payloads.push(p.payload.to_vec());
        }
        assert_eq!(
            payloads[0],
            [0xBC, 0x44, 0x01, 0xF4, 0x00, 1, 0, 0xD0, 0x34, 0x01, 0x00]
        );
        let image: Vec<u8> = payloads[1..].concat();
        assert_eq!(image.len(), 324 * 244);
        assert_eq!(payloads.len(), 1 + (324 * 244usize).div_ceil(512));
        assert_eq!(testpattern::decode(&image, 324, 244).unwrap().frame, 0);
    }

    /// The ESP32's WIFI_CTRL client status, as aideck-esp-firmware sends it.
    fn tell_client_status<C: Camera, K: Clock, E: Entropy, A: KeystreamApplier>(
        d: &mut Drone<C, VecLink, K, E, A>,
        connected: bool,
    ) {
        let mut out = [0u8; 8];
        let n = cpx::encode_packet(
            compat::CLIENT_STATUS_ROUTE,
            &compat::client_status_payload(connected),
            &mut out,
        )
        .unwrap();
        d.link.inbox.extend(&out[..n]);
    }

    /// Stock mode sends nothing until the ESP32 reports a client, then whole frames (header
    /// first), and stops again when the client left.
    #[test]
    fn stock_mode_streams_only_while_a_wifi_client_is_connected() {
        let mut d = test_drone(Sequential, DroneConfig::default()).unwrap();
        d.step().unwrap();
        d.step().unwrap();
        assert!(d.link.sent.is_empty());
        assert_eq!(d.stats().frames_skipped, 2);
        tell_client_status(&mut d, true);
        d.step().unwrap();
        assert!(d.wifi_client_connected());
        assert_eq!(d.stats().frames_sent, 1);
        assert_eq!(&d.link.sent[..5], &[13, 0, 0x63, 0x05, 0xBC]);
        let sent = d.link.sent.len();
        tell_client_status(&mut d, false);
        d.step().unwrap();
        assert_eq!(d.link.sent.len(), sent);
        assert_eq!(d.stats().frames_skipped, 3);
        // Other WIFI_CTRL commands (e.g. 0x31 "WiFi connected" with an IP) change nothing.
        let mut out = [0u8; 16];
        let n = cpx::encode_packet(compat::CLIENT_STATUS_ROUTE, &[0x31, 10, 0, 0, 1], &mut out)
            .unwrap();
        d.link.inbox.extend(&out[..n]);
        d.step().unwrap();
        assert_eq!(d.stats().frames_skipped, 4);
        assert_eq!(d.stats().upstream_errors, 0);
    }

    #[test]
    fn bad_packet_size_is_refused() {
        let r = test_drone(
            Sequential,
            DroneConfig {
                packet_payload: 1021,
                ..DroneConfig::default()
            },
        );
        assert!(matches!(
            r,
            Err(DroneError::Config(cpx::CpxError::BadPacketSize(1021)))
        ));
    }

    /// A deterministic test RNG for the receiver side.
    struct TestRng(DrbgRng);
    impl rand_core::TryRng for TestRng {
        type Error = core::convert::Infallible;
        fn try_next_u32(&mut self) -> Result<u32, Self::Error> {
            self.0.try_next_u32()
        }
        fn try_next_u64(&mut self) -> Result<u64, Self::Error> {
            self.0.try_next_u64()
        }
        fn try_fill_bytes(&mut self, d: &mut [u8]) -> Result<(), Self::Error> {
            self.0.try_fill_bytes(d)
        }
    }
    impl rand_core::TryCryptoRng for TestRng {}

    /// The frames the receiver opens from the drone's link bytes; anything else it makes of them
    /// fails the test.
    fn frames_of(
        rx: &mut gapstream_protocol::session::ReceiverSession,
        rng: &mut TestRng,
        sent: &[u8],
    ) -> Vec<gapstream_protocol::session::Frame> {
        let clock = || 0u64;
        messages(sent)
            .into_iter()
            .map(
                |m| match rx.handle_message(&mut Sequential, rng, &clock, m).unwrap() {
                    Some(gapstream_protocol::session::ReceiverEvent::Frame(f)) => f,
                    other => panic!("{other:?}"),
                },
            )
            .collect()
    }

    /// Packets -> messages on the receiver side.
    fn messages(bytes: &[u8]) -> Vec<Vec<u8>> {
        let mut dec = StreamDecoder::new();
        let mut asm = Assembler::new(1 << 20);
        let mut input = bytes;
        while let Some(r) = dec.decode(&mut input) {
            let p = r.unwrap();
            asm.push(p.route, p.payload).unwrap();
        }
        let mut out = Vec::new();
        while let Some(m) = asm.next_message() {
            out.push(m);
        }
        out
    }

    fn secure_pair_with<A: KeystreamApplier>(
        suite: gapstream_protocol::suite::Suite,
        applier: A,
    ) -> (
        Drone<PatternCamera, VecLink, TickClock, CountingEntropy, A>,
        gapstream_protocol::session::ReceiverSession,
    ) {
        use gapstream_protocol::handshake;
        use gapstream_protocol::session::{ReceiverConfig, ReceiverSession};
        let mut rng = TestRng(DrbgRng::from_entropy(&mut CountingEntropy(9)).unwrap());
        let (drone_id, rx_id) = handshake::pair(&mut rng);
        let mut scfg = session::DroneConfig::default();
        scfg.policy.suites = handshake::SuiteSet::all();
        let cfg = DroneConfig {
            mode: Mode::Secure(Box::new(SecureConfig {
                identity: drone_id.into(),
                session: scfg,
                boot: Boot::advance(&mut crate::boot::RamBootCounter::new(0)).unwrap(),
            })),
            packet_payload: 1020,
        };
        let d = test_drone(applier, cfg).unwrap();
        let rx = ReceiverSession::new(
            rx_id,
            ReceiverConfig {
                suites: vec![suite],
                ..ReceiverConfig::default()
            },
        );
        (d, rx)
    }

    /// Queues a receiver's message on the drone's link as CPX packets (what the bridge forwards).
    /// The receiver's handshake with `d` (clock 0) up to its acknowledgement of the group key:
    /// frames flow from the next step. Returns the receiver's RNG for the rest of the test.
    fn establish<A: KeystreamApplier>(
        d: &mut Drone<PatternCamera, VecLink, TickClock, CountingEntropy, A>,
        rx: &mut gapstream_protocol::session::ReceiverSession,
    ) -> TestRng {
        let mut rng = TestRng(DrbgRng::from_entropy(&mut CountingEntropy(3)).unwrap());
        let clock = || 0u64;
        rx.connect(&mut rng, &clock).unwrap();
        let hello = rx.poll_transmit().unwrap();
        to_drone(d, &hello);
        d.step().unwrap();
        for m in messages(&core::mem::take(&mut d.link.sent)) {
            rx.handle_message(&mut Sequential, &mut rng, &clock, m)
                .unwrap();
        }
        let ack = rx.poll_transmit().unwrap();
        to_drone(d, &ack);
        rng
    }

    fn to_drone<A: KeystreamApplier>(
        d: &mut Drone<PatternCamera, VecLink, TickClock, CountingEntropy, A>,
        msg: &[u8],
    ) {
        let mut p = Packetizer::new(
            Route::new(Target::WifiHost, Target::Gap8, GAPSTREAM_FUNCTION),
            [msg, &[], &[]],
            1020,
            LastFlag::Final,
        )
        .unwrap();
        let mut buf = [0u8; 1024];
        while let Some(n) = p.next_packet(&mut buf) {
            d.link.inbox.extend(&buf[..n.unwrap()]);
        }
    }

    #[test]
    fn secure_mode_handshakes_then_sends_frames_the_receiver_opens() {
        secure_mode_with(|| Sequential);
    }

    /// The same with the drone sealing on the cluster engine (host backend, 1 and 8 cores):
    /// ChaCha20-Poly1305 in its one pass (the MAC fused with the cipher), opened by the receiver
    /// with RustCrypto.
    #[test]
    fn secure_mode_on_the_cluster_engine() {
        use gap_rust_cipher_s::engine::{ClusterEngine, Config};
        let cluster = gap_rust_sdk::host::HostCluster::new();
        for cores in [1, 8] {
            secure_mode_with(|| ClusterEngine::new(&cluster, Config::new(cores, 8192)).unwrap());
        }
    }

    fn secure_mode_with<A: KeystreamApplier>(applier: impl Fn() -> A) {
        use gapstream_protocol::session::ReceiverEvent;
        use gapstream_protocol::suite::Suite;
        for suite in [Suite::ChaCha20Poly1305, Suite::Aes128Gcm, Suite::None] {
            let (mut d, mut rx) = secure_pair_with(suite, applier());
            let mut rng = TestRng(DrbgRng::from_entropy(&mut CountingEntropy(3)).unwrap());
            let clock = || 0u64;
            // Before any receiver: frames are captured but not sent.
            d.step().unwrap();
            assert_eq!((d.stats().frames_sent, d.stats().frames_skipped), (0, 1));
            // The receiver's HELLO arrives over the link as CPX packets; the drone answers with
            // ACCEPT and the group key, and waits for the KEY_ACK before sealing (frame 1 skipped).
            rx.connect(&mut rng, &clock).unwrap();
            let hello = rx.poll_transmit().unwrap();
            to_drone(&mut d, &hello);
            d.step().unwrap();
            assert_eq!(d.stats().handshakes, 1);
            assert_eq!(d.stats().frames_sent, 0);
            let mut events = Vec::new();
            let sent = core::mem::take(&mut d.link.sent);
            for m in messages(&sent) {
                events.push(
                    rx.handle_message(&mut Sequential, &mut rng, &clock, m)
                        .unwrap(),
                );
            }
            assert!(
                matches!(events[0], Some(ReceiverEvent::Established { suite: s, .. }) if s == suite)
            );
            assert_eq!(events[1], Some(ReceiverEvent::Rekeyed { epoch: 0 }));
            let ack = rx.poll_transmit().unwrap();
            to_drone(&mut d, &ack);
            d.step().unwrap();
            d.step().unwrap();
            assert_eq!(d.stats().rekeys_acked, 1);
            let frames = frames_of(&mut rx, &mut rng, &d.link.sent);
            // Frames 2 and 3 of the camera (0 and 1 were captured before the group key was held).
            assert_eq!(frames.len(), 2);
            for (k, f) in frames.iter().enumerate() {
                assert_eq!(f.header.sequence, k as u64);
                assert_eq!((f.header.width, f.header.height), (324, 244));
                let stamp = testpattern::decode(f.pixels(), 324, 244).unwrap();
                assert_eq!(stamp.frame, k as u32 + 2);
                assert_eq!(f.header.capture_ns, stamp.capture_ns);
            }
        }
    }

    /// A flight controller that delivers one `!STA` message per drone step: message `i` (sample
    /// `i`) arrives at `1000 i + 500` ns, half-way between the pattern camera's captures. The
    /// drone reads it twice per step; the second read (before the frame's last packet) finds
    /// nothing.
    struct OneMessagePerStep {
        i: u32,
        at: u64,
        pending: alloc::collections::VecDeque<u8>,
        gave: bool,
        /// The step's second read (after the frame is queued) comes next: it finds nothing new.
        second: bool,
    }
    fn fc_sample(i: u32) -> gapstream_protocol::state::StateSample {
        gapstream_protocol::state::StateSample {
            stm32_us: 7_000_000 + 10_000 * i,
            position_mm: [i as i16, -(i as i16), 1000],
            velocity_mm_s: [3, 4, 5],
            accel_mm_s2: [0, 0, -1],
            quat: 0x4000_0000 | i,
            rates_mrad_s: [1, 2, 3],
        }
    }
    impl StateSource for OneMessagePerStep {
        fn next_byte(&mut self) -> Option<(u8, u64)> {
            if self.pending.is_empty() {
                if self.gave {
                    self.gave = false;
                    return None;
                }
                if self.second {
                    self.second = false;
                    return None;
                }
                self.second = true;
                self.pending
                    .extend(crate::state::encode_state(&fc_sample(self.i)));
                self.at = 1000 * self.i as u64 + 500;
                self.i += 1;
                self.gave = true;
            }
            self.pending.pop_front().map(|b| (b, self.at))
        }
    }

    /// With a state source, every sealed frame carries the record of its exposure end: the
    /// newest sample that had arrived when the capture completed (not the one read after it),
    /// delivered authenticated with the frame.
    #[test]
    fn secure_frames_carry_the_state_of_their_exposure_end() {
        use gapstream_protocol::state::{STALE, VALID};
        use gapstream_protocol::suite::Suite;
        let (mut d, mut rx) = secure_pair_with(Suite::ChaCha20Poly1305, Sequential);
        d.set_state_source(
            Box::new(OneMessagePerStep {
                i: 0,
                at: 0,
                pending: Default::default(),
                gave: false,
                second: false,
            }),
            StateConfig::default(),
        );
        let mut rng = establish(&mut d, &mut rx);
        for _ in 0..3 {
            d.step().unwrap();
        }
        let frames = frames_of(&mut rx, &mut rng, &d.link.sent);
        assert_eq!(frames.len(), 3);
        for f in &frames {
            let k = testpattern::decode(f.pixels(), 324, 244).unwrap().frame;
            let rec = f.state().unwrap().unwrap();
            // Frame k was exposed until 1000 k ns; message k - 1 had arrived 500 ns before.
            assert_eq!(rec.sample, fc_sample(k - 1), "frame {k}");
            assert_eq!(rec.flags & (VALID | STALE), VALID);
            assert_eq!(rec.exposure_end_us, f.header.capture_ns / 1000);
            assert_eq!(rec.arrival_us, (1000 * (k as u64 - 1) + 500) / 1000);
        }
        let c = d.state_tracker().unwrap().counters();
        assert_eq!(c.states, 4, "{c:?}");
    }

    /// The drone reads its state source when the capture is in, before anything of the frame
    /// is sent, and again just before the frame's last packet goes to the link, while a link
    /// task would still have a full ring to send (the firmware's drone loop then waits anyway).
    #[test]
    fn state_is_read_after_the_capture_and_before_the_last_packet() {
        use gapstream_protocol::suite::Suite;
        struct PollLog(
            alloc::rc::Rc<Cell<usize>>,
            alloc::rc::Rc<core::cell::RefCell<Vec<usize>>>,
        );
        impl StateSource for PollLog {
            fn next_byte(&mut self) -> Option<(u8, u64)> {
                // Every call is a read that finds nothing: log the packets sent so far.
                self.1.borrow_mut().push(self.0.get());
                None
            }
        }
        let (mut d, mut rx) = secure_pair_with(Suite::ChaCha20Poly1305, Sequential);
        let log = alloc::rc::Rc::new(core::cell::RefCell::new(Vec::new()));
        d.set_state_source(
            Box::new(PollLog(d.link.packets_seen.clone(), log.clone())),
            StateConfig::default(),
        );
        let _rng = establish(&mut d, &mut rx);
        for _ in 0..3 {
            let before = d.link.packets;
            log.borrow_mut().clear();
            d.step().unwrap();
            let after = d.link.packets;
            assert!(
                after - before > 70,
                "a raw frame: {} packets",
                after - before
            );
            assert_eq!(*log.borrow(), [before, after - 1]);
        }
    }

    /// A coder for the tests: frame k is "coded" as its first 100 + k bytes under `format`,
    /// declined (raw) when k % 3 == 1, an error when k % 3 == 2.
    struct ToyCoder {
        k: usize,
        format: PixelFormat,
    }
    impl FrameCoder for ToyCoder {
        fn code(
            &mut self,
            _: FrameFormat,
            frame: &[u8],
            out: &mut Vec<u8>,
        ) -> Result<Option<PixelFormat>, crate::traits::CoderError> {
            let k = self.k;
            self.k += 1;
            out.clear();
            match k % 3 {
                0 => {
                    out.extend_from_slice(&frame[..100 + k]);
                    Ok(Some(self.format))
                }
                1 => Ok(None),
                _ => Err(crate::traits::CoderError("toy")),
            }
        }
    }

    /// Compress, then seal: the coded bytes are the sealed payload with the coder's pixel format
    /// and their own length; declined or failed frames go out raw (counted).
    #[test]
    fn coded_frames_are_sealed_with_their_format_and_length() {
        use gapstream_protocol::session::ReceiverEvent;
        use gapstream_protocol::suite::Suite;
        let (mut d, mut rx) = secure_pair_with(Suite::ChaCha20Poly1305, Sequential);
        let clock = || 0u64;
        let mut rng = establish(&mut d, &mut rx);
        d.set_coder(Some(Box::new(ToyCoder {
            k: 0,
            format: PixelFormat::JpegLs,
        })));
        for _ in 0..6 {
            d.step().unwrap();
        }
        let mut got = Vec::new();
        for m in messages(&d.link.sent) {
            if let Some(ReceiverEvent::Frame(f)) = rx
                .handle_message(&mut Sequential, &mut rng, &clock, m)
                .unwrap()
            {
                got.push((f.header.pixel_format, f.pixels().len()));
            }
        }
        let raw = (PixelFormat::Grey8.code(), 324 * 244);
        let jls = PixelFormat::JpegLs.code();
        assert_eq!(got, [(jls, 100), raw, raw, (jls, 103), raw, raw]);
        let st = d.stats();
        assert_eq!(
            (st.frames_coded, st.coded_bytes, st.coder_errors),
            (2, 203, 2)
        );
    }

    /// Length-hiding padding: coded frames go out padded (flag set, payload at the padded size),
    /// raw frames as they are; the receiver gets exactly the coded bytes back.
    #[test]
    fn coded_frames_are_padded_inside_the_aead_and_raw_ones_are_not() {
        use gapstream_protocol::session::ReceiverEvent;
        use gapstream_protocol::suite::Suite;
        use gapstream_protocol::wire::{FRAME_FLAG_PADDED, FrameHeader};
        let (mut d, mut rx) = secure_pair_with(Suite::ChaCha20Poly1305, Sequential);
        let clock = || 0u64;
        let mut rng = establish(&mut d, &mut rx);
        d.set_coder(Some(Box::new(ToyCoder {
            k: 0,
            format: PixelFormat::Jpeg,
        })));
        d.set_padding(Padding::Pow2);
        for _ in 0..6 {
            d.step().unwrap();
        }
        let (mut wire, mut got) = (Vec::new(), Vec::new());
        for m in messages(&d.link.sent) {
            let h = FrameHeader::decode(&m).ok();
            if let Some(ReceiverEvent::Frame(f)) = rx
                .handle_message(&mut Sequential, &mut rng, &clock, m)
                .unwrap()
            {
                let h = h.unwrap();
                wire.push((h.flags(), h.payload_len));
                got.push(f.pixels().to_vec());
            }
        }
        let raw = (0, 324 * 244);
        // Frames 0 and 3 coded as 100 and 103 bytes: + 4-byte trailer, next power of two.
        assert_eq!(
            wire,
            [
                (FRAME_FLAG_PADDED, 128),
                raw,
                raw,
                (FRAME_FLAG_PADDED, 128),
                raw,
                raw
            ]
        );
        assert_eq!((got[0].len(), got[3].len()), (100, 103));
        assert_eq!(got[1].len(), 324 * 244);
        let st = d.stats();
        assert_eq!((st.frames_padded, st.padding_bytes), (2, 28 + 25));
        assert_eq!(st.coded_bytes, 203);
    }

    /// A coder whose "coding" is `quality` bytes of the frame: the frame's length says which
    /// quality it was coded with.
    struct QualityCoder {
        quality: u8,
    }
    impl FrameCoder for QualityCoder {
        fn code(
            &mut self,
            _: FrameFormat,
            frame: &[u8],
            out: &mut Vec<u8>,
        ) -> Result<Option<PixelFormat>, crate::traits::CoderError> {
            out.clear();
            out.extend_from_slice(&frame[..self.quality as usize]);
            Ok(Some(PixelFormat::Jpeg))
        }
        fn set_quality(&mut self, quality: u8) {
            self.quality = quality;
        }
    }

    /// SET_QUALITY: a receiver's request over its control channel reaches the coder, and the
    /// next frame is coded at the new quality; a second request again from the next frame.
    #[test]
    fn a_receivers_quality_request_applies_from_the_next_frame() {
        use gapstream_protocol::session::ReceiverEvent;
        use gapstream_protocol::suite::Suite;
        let (mut d, mut rx) = secure_pair_with(Suite::ChaCha20Poly1305, Sequential);
        let mut rng = establish(&mut d, &mut rx);
        d.set_coder(Some(Box::new(QualityCoder { quality: 75 })));
        fn run(
            d: &mut TestDrone<Sequential>,
            rx: &mut gapstream_protocol::session::ReceiverSession,
            rng: &mut TestRng,
            steps: usize,
            lengths: &mut Vec<usize>,
        ) {
            let clock = || 0u64;
            for _ in 0..steps {
                d.step().unwrap();
            }
            for m in messages(&core::mem::take(&mut d.link.sent)) {
                if let Ok(Some(ReceiverEvent::Frame(f))) =
                    rx.handle_message(&mut Sequential, rng, &clock, m)
                {
                    lengths.push(f.pixels().len());
                }
            }
        }
        let mut lengths = Vec::new();
        run(&mut d, &mut rx, &mut rng, 2, &mut lengths);
        rx.request_quality(&mut Sequential, 40).unwrap();
        let m = rx.poll_transmit().unwrap();
        to_drone(&mut d, &m);
        run(&mut d, &mut rx, &mut rng, 2, &mut lengths);
        rx.request_quality(&mut Sequential, 90).unwrap();
        let m = rx.poll_transmit().unwrap();
        to_drone(&mut d, &m);
        run(&mut d, &mut rx, &mut rng, 1, &mut lengths);
        assert_eq!(lengths, [75, 75, 40, 40, 90]);
        let st = d.stats();
        assert_eq!((st.quality_requests, st.quality), (2, Some(90)));
    }

    /// Stock mode with a JPEG coder sends Bitcraze's image type 1 with the file's size; other
    /// codes go out raw (type 0).
    #[test]
    fn stock_mode_sends_jpeg_as_image_type_1() {
        for (format, kind) in [(PixelFormat::Jpeg, 1u8), (PixelFormat::JpegLs, 0)] {
            let mut d = test_drone(Sequential, DroneConfig::default()).unwrap();
            d.set_coder(Some(Box::new(ToyCoder { k: 0, format })));
            tell_client_status(&mut d, true);
            d.step().unwrap();
            let mut dec = StreamDecoder::new();
            let mut input = &d.link.sent[..];
            let mut payloads: Vec<Vec<u8>> = Vec::new();
            while let Some(r) = dec.decode(&mut input) {
                payloads.push(r.unwrap().payload.to_vec());
            }
            let size = if kind == 1 { 100 } else { 324 * 244 };
            let h = stock_header_with(FrameFormat::HM01B0, kind, size);
            assert_eq!(payloads[0], h);
            assert_eq!(payloads[0][6], kind);
            assert_eq!(payloads[1..].concat().len(), size);
        }
    }

    /// Finding 2 through the drone loop: the drone restarts with exactly the same entropy (a
    /// source with no state across boots, as on GVSOC), its boot counter kept in (modelled) flash;
    /// the attacker replays the receiver's HELLO and KEY_ACK of the first boot. The restarted drone
    /// answers the HELLO but never sends a frame.
    #[test]
    fn finding2_restart_with_the_same_entropy_sends_no_frame_to_replayed_messages() {
        use crate::boot::{FlashBootCounter, RamFlash};
        use gapstream_protocol::handshake;
        use gapstream_protocol::session::{ReceiverConfig, ReceiverSession};
        let mut rng = TestRng(DrbgRng::from_entropy(&mut CountingEntropy(31)).unwrap());
        let (drone_id, rx_id) = handshake::pair(&mut rng);
        let mut flash = FlashBootCounter::new(RamFlash::default());
        let boot = |flash: &mut FlashBootCounter<RamFlash>| {
            let cfg = DroneConfig {
                mode: Mode::Secure(Box::new(SecureConfig {
                    identity: drone_id.clone().into(),
                    session: session::DroneConfig::default(),
                    boot: Boot::advance(flash).unwrap(),
                })),
                packet_payload: 1020,
            };
            test_drone(Sequential, cfg).unwrap()
        };
        let clock = || 0u64;
        let mut rx = ReceiverSession::new(rx_id, ReceiverConfig::default());
        // Boot 1: a real handshake; frames flow.
        let mut d = boot(&mut flash);
        rx.connect(&mut rng, &clock).unwrap();
        let hello = rx.poll_transmit().unwrap();
        to_drone(&mut d, &hello);
        d.step().unwrap();
        for m in messages(&core::mem::take(&mut d.link.sent)) {
            rx.handle_message(&mut Sequential, &mut rng, &clock, m)
                .unwrap();
        }
        let key_ack = rx.poll_transmit().unwrap();
        to_drone(&mut d, &key_ack);
        d.step().unwrap();
        d.step().unwrap();
        assert!(d.stats().frames_sent >= 1);
        // Boot 2: the same entropy, the counter advanced; HELLO and KEY_ACK replayed.
        let mut d = boot(&mut flash);
        to_drone(&mut d, &hello);
        d.step().unwrap();
        assert_eq!(d.stats().handshakes, 1);
        to_drone(&mut d, &key_ack);
        for _ in 0..5 {
            d.step().unwrap();
        }
        assert_eq!(d.stats().rekeys_acked, 0);
        assert_eq!(d.stats().frames_sent, 0);
        assert_eq!(d.session().unwrap().counters().frames_sealed, 0);
    }

    /// Two paired receivers through the drone loop: both open the same sealed frames; the second
    /// joining starts a new epoch; one leaving (CLOSE) leaves the other's stream whole.
    #[test]
    fn two_receivers_get_the_same_frames_and_one_leaving_does_not_disturb_the_other() {
        use gapstream_protocol::handshake;
        use gapstream_protocol::session::{ReceiverConfig, ReceiverEvent, ReceiverSession};
        let mut rng = TestRng(DrbgRng::from_entropy(&mut CountingEntropy(21)).unwrap());
        let (drone_id, rids) = handshake::pair_group(&mut rng, 2);
        let cfg = DroneConfig {
            mode: Mode::Secure(Box::new(SecureConfig {
                identity: drone_id,
                session: session::DroneConfig::default(),
                boot: Boot::advance(&mut crate::boot::RamBootCounter::new(0)).unwrap(),
            })),
            packet_payload: 1020,
        };
        let mut d = test_drone(Sequential, cfg).unwrap();
        let mut rxs: Vec<ReceiverSession> = rids
            .into_iter()
            .map(|r| ReceiverSession::new(r, ReceiverConfig::default()))
            .collect();
        let clock = || 0u64;
        let mut got: Vec<Vec<(u64, Vec<u8>)>> = vec![Vec::new(), Vec::new()];
        // Every drone message to every receiver (the bridge), their answers back to the drone.
        type D = Drone<PatternCamera, VecLink, TickClock, CountingEntropy, Sequential>;
        let mut rx_rng = TestRng(DrbgRng::from_entropy(&mut CountingEntropy(22)).unwrap());
        let mut exchange = |d: &mut D, rxs: &mut Vec<ReceiverSession>| {
            let sent = core::mem::take(&mut d.link.sent);
            for m in messages(&sent) {
                for (i, rx) in rxs.iter_mut().enumerate() {
                    if let Ok(Some(ReceiverEvent::Frame(f))) =
                        rx.handle_message(&mut Sequential, &mut rx_rng, &clock, m.clone())
                    {
                        got[i].push((f.header.sequence, f.into_pixels()));
                    }
                }
            }
            for rx in rxs.iter_mut() {
                while let Some(m) = rx.poll_transmit() {
                    to_drone(d, &m);
                }
            }
        };
        for i in 0..2 {
            rxs[i].connect(&mut rng, &clock).unwrap();
            let hello = rxs[i].poll_transmit().unwrap();
            to_drone(&mut d, &hello);
            d.step().unwrap();
            exchange(&mut d, &mut rxs);
        }
        for k in 0..8 {
            if k == 4 {
                rxs[1].close(&mut Sequential);
            }
            d.step().unwrap();
            exchange(&mut d, &mut rxs);
        }
        assert_eq!(d.stats().handshakes, 2);
        assert_eq!(d.stats().receivers_left, 1);
        assert_eq!(d.stats().receivers, 1);
        // Receiver 0 got every frame sealed, in order and whole; receiver 1 the same ones until
        // it left.
        let seqs: Vec<u64> = got[0].iter().map(|(s, _)| *s).collect();
        assert_eq!(seqs, (0..seqs.len() as u64).collect::<Vec<_>>());
        assert!(seqs.len() >= 8, "{seqs:?}");
        assert!(!got[1].is_empty() && got[1].len() < got[0].len());
        for (s, px) in &got[1] {
            assert_eq!(&got[0][*s as usize].1, px);
        }
        assert_eq!(rxs[0].counters().lost_frames, 0);
        let mut stamps = got[0]
            .iter()
            .map(|(_, p)| testpattern::decode(p, 324, 244).unwrap().frame);
        let first = stamps.next().unwrap();
        assert!(
            stamps.zip(first + 1..).all(|(a, b)| a == b),
            "camera frames skipped"
        );
    }
}
