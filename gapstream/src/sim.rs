//! The host simulation of the drone node: std implementations of `gapstream_drone`'s traits
//! (camera from a [`FrameSource`] at a configurable frame rate, a TCP socket to the bridge's SPI
//! side paced like the AI-deck's SPI link as the firmware runs it, the system clock, the OS RNG)
//! running the very `gapstream_drone::Drone` loop the GAP8 firmware runs.

use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use gapstream_drone::{
    Camera, Capture, Clock, Entropy, EntropyError, FrameFormat, Link, PixelFormat,
};

use crate::images::{FrameSource, ImageError};

/// Nanoseconds since the UNIX epoch: the drone's and the receiver's clocks agree on one machine,
/// even across processes, so latency is capture → verified on one time base.
pub fn unix_ns() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0)
}

/// The system clock.
#[derive(Clone, Copy, Debug, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now_ns(&self) -> u64 {
        unix_ns()
    }
}

/// The operating system's RNG.
#[derive(Clone, Copy, Debug, Default)]
pub struct OsEntropy;

impl Entropy for OsEntropy {
    fn fill(&mut self, dest: &mut [u8]) -> Result<(), EntropyError> {
        getrandom::fill(dest).map_err(|_| EntropyError)
    }
}

/// A camera reading a [`FrameSource`], one frame every `1 / fps` seconds (like the HM01B0's frame
/// clock: a frame the application is too late for is skipped, not queued). `fps = 0`: no pacing.
pub struct SimCamera {
    source: FrameSource,
    format: FrameFormat,
    period: Option<Duration>,
    next_due: Option<Instant>,
    in_flight: Option<Vec<u8>>,
    index: u64,
    /// Frames skipped because the loop was late.
    pub skipped: u64,
}

impl SimCamera {
    pub fn new(source: FrameSource, fps: f64) -> Result<Self, ImageError> {
        let format = FrameFormat {
            width: source.width() as u16,
            height: source.height() as u16,
            pixel: if source.bayer() {
                PixelFormat::BayerRggb8
            } else {
                PixelFormat::Grey8
            },
        };
        let period = (fps > 0.0).then(|| Duration::from_secs_f64(1.0 / fps));
        Ok(SimCamera {
            source,
            format,
            period,
            next_due: None,
            in_flight: None,
            index: 0,
            skipped: 0,
        })
    }
}

impl Camera for SimCamera {
    type Error = ImageError;
    fn format(&self) -> FrameFormat {
        self.format
    }
    fn start(&mut self, buf: Vec<u8>) -> Result<(), ImageError> {
        self.in_flight = Some(buf);
        Ok(())
    }
    fn wait(&mut self) -> Result<Capture, ImageError> {
        let mut buf = self
            .in_flight
            .take()
            .unwrap_or_else(|| vec![0; self.format.bytes()]);
        if let Some(p) = self.period {
            let now = Instant::now();
            let due = *self.next_due.get_or_insert(now);
            if due > now {
                thread::sleep(due - now);
            }
            // Late by more than a period: those frames were never read out.
            let mut next = due + p;
            let now = Instant::now();
            while next + p <= now {
                next += p;
                self.skipped += 1;
            }
            self.next_due = Some(next);
        }
        let capture_ns = unix_ns();
        buf.resize(self.format.bytes(), 0);
        self.source.fill(self.index, capture_ns, &mut buf)?;
        self.index += 1;
        Ok(Capture { buf, capture_ns })
    }
}

/// Downstream SPI clock of the firmware (GAP8 -> ESP32, transmit only, MISO ignored): 30 MHz, what
/// the GAP8 driver sets at a 240 MHz FC clock (E. Cereda, A. Giusti, D. Palossi, "NanoCockpit",
/// arXiv 2601.07476, 2026: the AI-deck runs GAP8 -> ESP32 alone at 30 MHz).
pub const SPI_HZ: u64 = 30_000_000;

/// Upstream SPI clock: every transfer that reads MISO (the two lengths that open each
/// transaction, packets from the ESP32) runs at most at 7.2 MHz, the AI-deck's MISO limit; the GAP8
/// driver's divider gives 7.06 MHz at 240 MHz.
pub const SPI_UP_HZ: u64 = 7_058_823;

/// Per-packet time outside the clocked bytes: the ready-line handshake (the ESP32 arming its
/// slave transaction) and the two driver calls, as the GVSOC stand-in models it.
pub const SPI_PACKET_OVERHEAD: Duration = Duration::from_micros(20);

/// Time of one transaction carrying a `len`-byte CPX wire packet to the ESP32 (nothing coming
/// back), as the firmware's link runs it: 4 bytes (the lengths) at the upstream clock, the rest
/// padded to a multiple of 4 at `down_hz`, plus the ready-line handshake.
pub fn packet_time(len: usize, down_hz: u64) -> Duration {
    let rest = len.saturating_sub(4).div_ceil(4).max(1) * 4;
    Duration::from_nanos(
        (4 * 8 * 1_000_000_000 / SPI_UP_HZ) + (rest as u64 * 8 * 1_000_000_000 / down_hz),
    ) + SPI_PACKET_OVERHEAD
}

/// Time of the bytes the ESP32 sends (its packets, at the upstream clock).
pub fn upstream_time(bytes: usize) -> Duration {
    Duration::from_nanos(bytes as u64 * 8 * 1_000_000_000 / SPI_UP_HZ)
}

/// How far the simulated link may run ahead of its clocks before the drone's thread sleeps: the
/// link's rate is kept on average; packets go out in bursts of up to this much link time.
pub const PACING_SLACK: Duration = Duration::from_millis(3);

/// The kernel send buffer of the simulated SPI link's socket (Linux doubles it): a few packets.
pub const SPI_SEND_BUFFER: usize = 8 * 1024;

/// Counters of the simulated SPI link.
#[derive(Clone, Copy, Debug, Default)]
pub struct LinkStats {
    pub bytes_sent: u64,
    /// Bytes dropped while the bridge was unreachable (the ESP32 was "in reset").
    pub bytes_dropped: u64,
    pub reconnects: u64,
}

/// The byte link to the bridge's SPI side, over TCP, paced like the firmware's link (`None`: as
/// fast as the socket goes): each CPX packet takes [`packet_time`] with the downstream clock `hz`,
/// and what comes back from the bridge takes [`upstream_time`] of the link at the upstream clock
/// (7.06 MHz). While the bridge is down the link drops what it is given and reconnects by itself.
pub struct SpiLink {
    addr: SocketAddr,
    hz: Option<u64>,
    stream: Option<TcpStream>,
    rx: Option<mpsc::Receiver<Vec<u8>>>,
    pending: Vec<u8>,
    next_free: Instant,
    last_attempt: Option<Instant>,
    ever_connected: bool,
    pub stats: LinkStats,
    stop: Arc<AtomicBool>,
}

impl SpiLink {
    pub fn new(addr: SocketAddr, hz: Option<u64>, stop: Arc<AtomicBool>) -> Self {
        SpiLink {
            addr,
            hz,
            stream: None,
            rx: None,
            pending: Vec::new(),
            next_free: Instant::now(),
            last_attempt: None,
            ever_connected: false,
            stats: LinkStats::default(),
            stop,
        }
    }

    /// Connected to the bridge now (tries to connect at most every 100 ms).
    fn ensure_connected(&mut self) -> bool {
        if self.stream.is_some() {
            return true;
        }
        if self
            .last_attempt
            .is_some_and(|t| t.elapsed() < Duration::from_millis(100))
        {
            return false;
        }
        self.last_attempt = Some(Instant::now());
        let Ok(s) = TcpStream::connect_timeout(&self.addr, Duration::from_millis(500)) else {
            return false;
        };
        let _ = s.set_nodelay(true);
        // The real link has no buffer (one SPI transaction at a time, the ESP32 takes it or the
        // GAP8 waits): a kernel send buffer grown to megabytes would hold seconds of frames
        // when the bridge is short of CPU, while the camera believes it is on time.
        let _ = socket2::SockRef::from(&s).set_send_buffer_size(SPI_SEND_BUFFER);
        let Ok(mut reader) = s.try_clone() else {
            return false;
        };
        let (tx, rx) = mpsc::channel();
        let stop = self.stop.clone();
        thread::spawn(move || {
            let mut buf = vec![0u8; 4096];
            let _ = reader.set_read_timeout(Some(Duration::from_millis(200)));
            while !stop.load(Ordering::Relaxed) {
                match reader.read(&mut buf) {
                    Ok(0) => return,
                    Ok(n) => {
                        if tx.send(buf[..n].to_vec()).is_err() {
                            return;
                        }
                    }
                    Err(e)
                        if matches!(
                            e.kind(),
                            io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                        ) => {}
                    Err(_) => return,
                }
            }
        });
        if self.ever_connected {
            self.stats.reconnects += 1;
        }
        self.ever_connected = true;
        self.stream = Some(s);
        self.rx = Some(rx);
        self.pending.clear();
        true
    }
}

impl Link for SpiLink {
    type Error = io::Error;

    fn send(&mut self, packets: &[u8]) -> io::Result<()> {
        if self.stop.load(Ordering::Relaxed) {
            return Err(io::Error::new(io::ErrorKind::Interrupted, "stopped"));
        }
        if !self.ensure_connected() {
            self.stats.bytes_dropped += packets.len() as u64;
            return Ok(());
        }
        if let Some(hz) = self.hz {
            // The SPI clocks: the transaction ends packet_time after the link became free (the
            // drone sends one CPX packet per call). The thread sleeps only once it is ahead of the
            // link by PACING_SLACK: a sleep per packet (78 per frame) would make each frame pay 78
            // wake-ups, which on a busy machine cost far more than the link itself.
            let now = Instant::now();
            let start = self.next_free.max(now);
            self.next_free = start + packet_time(packets.len(), hz);
            if self.next_free > now + PACING_SLACK {
                thread::sleep(self.next_free - now);
            }
        }
        let s = self.stream.as_mut().expect("connected above");
        if s.write_all(packets).is_err() {
            // The bridge went away: the packet is lost, reconnect on the next send.
            self.stream = None;
            self.rx = None;
            self.stats.bytes_dropped += packets.len() as u64;
            return Ok(());
        }
        self.stats.bytes_sent += packets.len() as u64;
        Ok(())
    }

    fn poll_recv(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if self.pending.is_empty() {
            if !self.ensure_connected() {
                return Ok(0);
            }
            let Some(rx) = &self.rx else { return Ok(0) };
            match rx.try_recv() {
                Ok(v) => self.pending = v,
                Err(mpsc::TryRecvError::Empty) => return Ok(0),
                Err(mpsc::TryRecvError::Disconnected) => {
                    self.stream = None;
                    self.rx = None;
                    return Ok(0);
                }
            }
        }
        let n = buf.len().min(self.pending.len());
        buf[..n].copy_from_slice(&self.pending[..n]);
        self.pending.drain(..n);
        if self.hz.is_some() {
            // Read at the upstream clock: the link is busy that much longer.
            self.next_free = self.next_free.max(Instant::now()) + upstream_time(n);
        }
        Ok(n)
    }
}

/// Shared view of a running node, for the CLI and tests.
#[derive(Clone, Debug, Default)]
pub struct NodeReport {
    pub drone: gapstream_drone::DroneStats,
    pub link: LinkStats,
    pub camera_skipped: u64,
    pub error: Option<String>,
}

/// A running simulated drone (its own thread).
pub struct Node {
    stop: Arc<AtomicBool>,
    thread: Option<thread::JoinHandle<()>>,
    pub report: Arc<Mutex<NodeReport>>,
}

impl Node {
    /// Stops the node and waits for its thread.
    pub fn stop(mut self) -> NodeReport {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        self.report
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    pub fn is_finished(&self) -> bool {
        self.thread.as_ref().is_none_or(|t| t.is_finished())
    }
}

impl Drop for Node {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Which keystream engine seals the frames.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EngineChoice {
    /// `gap_rust_wrapper`'s cluster engine on `gap_rust_sdk`'s host backend (threads as cluster
    /// cores, a 64 KiB L1 arena, DMA rounds): the code path of the GAP8 cluster.
    Cluster { cores: usize },
    /// The single-core kernels of `gap_rust_cipher_s` on the calling thread.
    Sequential,
}

impl Default for EngineChoice {
    fn default() -> Self {
        EngineChoice::Cluster { cores: 8 }
    }
}

/// What the node runs.
pub struct NodeConfig {
    pub source: FrameSource,
    pub fps: f64,
    pub bridge_spi: SocketAddr,
    /// Downstream SPI clock (`None`: unpaced, for measuring the software chain); the upstream
    /// clock is [`SPI_UP_HZ`].
    pub spi_hz: Option<u64>,
    pub drone: gapstream_drone::DroneConfig,
    /// Stop after this many frames (None: until stopped).
    pub frames: Option<u64>,
    pub engine: EngineChoice,
    /// Compress, then seal: the frame coder (`crate::codec::HostCoder`; None: raw frames).
    pub coder: Option<Box<dyn gapstream_drone::FrameCoder + Send>>,
    /// The simulated flight controller's trajectory: its `!STA` messages reach the drone at
    /// 100 Hz with UART byte timing (`crate::flight`) and every frame carries the state record.
    /// None: no state path (36-byte headers).
    pub flight: Option<crate::flight::Circle>,
}

/// L1 buffer per engine round on the host cluster (three of them must fit the 64 KiB L1).
pub const ENGINE_BUFFER: usize = 16 * 1024;

/// Starts the simulated drone on its own thread.
pub fn start_node(cfg: NodeConfig) -> Result<Node, String> {
    let stop = Arc::new(AtomicBool::new(false));
    let report = Arc::new(Mutex::new(NodeReport::default()));
    let camera = SimCamera::new(cfg.source, cfg.fps).map_err(|e| e.to_string())?;
    let link = SpiLink::new(cfg.bridge_spi, cfg.spi_hz, stop.clone());
    // Checked here so a bad configuration is an error of this call, not of the thread.
    if !(1..=gapstream_protocol::cpx::MAX_PAYLOAD).contains(&cfg.drone.packet_payload) {
        return Err(format!(
            "CPX packet payload size {} outside 1..=1020",
            cfg.drone.packet_payload
        ));
    }
    let (st, rep) = (stop.clone(), report.clone());
    let (drone_cfg, frames, engine, coder, flight) =
        (cfg.drone, cfg.frames, cfg.engine, cfg.coder, cfg.flight);
    let thread = thread::Builder::new()
        .name("drone".into())
        .spawn(move || match engine {
            EngineChoice::Cluster { cores } => {
                let cluster = gap_rust_sdk::host::HostCluster::new();
                match gap_rust_cipher_s::engine::ClusterEngine::new(
                    &cluster,
                    gap_rust_cipher_s::engine::Config::new(cores.clamp(1, 8), ENGINE_BUFFER),
                ) {
                    Ok(eng) => drive(
                        camera, link, eng, drone_cfg, coder, frames, flight, &st, &rep,
                    ),
                    Err(e) => {
                        rep.lock().unwrap_or_else(|e| e.into_inner()).error =
                            Some(format!("cluster engine: {e:?}"))
                    }
                }
            }
            EngineChoice::Sequential => drive(
                camera,
                link,
                gap_rust_cipher_s::Sequential,
                drone_cfg,
                coder,
                frames,
                flight,
                &st,
                &rep,
            ),
        })
        .map_err(|e| e.to_string())?;
    Ok(Node {
        stop,
        thread: Some(thread),
        report,
    })
}

/// The drone loop with one engine.
#[allow(clippy::too_many_arguments)]
fn drive<A: gap_rust_cipher_s::KeystreamApplier>(
    camera: SimCamera,
    link: SpiLink,
    engine: A,
    cfg: gapstream_drone::DroneConfig,
    coder: Option<Box<dyn gapstream_drone::FrameCoder + Send>>,
    frames: Option<u64>,
    flight: Option<crate::flight::Circle>,
    st: &AtomicBool,
    rep: &Mutex<NodeReport>,
) {
    let mut drone =
        match gapstream_drone::Drone::new(camera, link, SystemClock, OsEntropy, engine, cfg) {
            Ok(d) => d,
            Err(e) => {
                rep.lock().unwrap_or_else(|e| e.into_inner()).error = Some(e.to_string());
                return;
            }
        };
    drone.set_coder(coder);
    if let Some(path) = flight {
        drone.set_state_source(
            Box::new(crate::flight::SimFlightController::new(
                unix_ns,
                path,
                crate::flight::STATE_RATE_HZ,
                crate::flight::STM32_START_US,
            )),
            gapstream_drone::state::StateConfig::default(),
        );
    }
    let publish =
        |drone: &mut gapstream_drone::Drone<SimCamera, SpiLink, SystemClock, OsEntropy, A>| {
            let mut r = rep.lock().unwrap_or_else(|e| e.into_inner());
            r.drone = drone.stats();
            r.link = drone.link_mut().stats;
            r.camera_skipped = drone.camera_mut().skipped;
        };
    let mut n = 0u64;
    while !st.load(Ordering::Relaxed) && frames.is_none_or(|f| n < f) {
        if let Err(e) = drone.step() {
            if !st.load(Ordering::Relaxed) {
                rep.lock().unwrap_or_else(|e| e.into_inner()).error = Some(e.to_string());
            }
            break;
        }
        n += 1;
        if n % 8 == 0 {
            publish(&mut drone);
        }
    }
    publish(&mut drone);
}

#[cfg(test)]
mod link_model_tests {
    use super::*;

    /// A 324 x 244 ChaCha20-Poly1305 frame: 78 packets; at 30 MHz about 23.6 ms on the wire.
    #[test]
    fn a_frame_costs_what_the_firmware_link_costs() {
        let frame = 36 + 324 * 244 + 16;
        let full = frame / 1020;
        let last = frame - full * 1020;
        let t: Duration = (0..full)
            .map(|_| packet_time(1024, SPI_HZ))
            .sum::<Duration>()
            + packet_time(4 + last, SPI_HZ);
        assert_eq!(full + 1, 78);
        let ms = t.as_secs_f64() * 1e3;
        assert!((23.0..24.5).contains(&ms), "{ms} ms");
        // The lengths go at the upstream clock: 4 bytes at 7.06 MHz = 4.5 us.
        assert_eq!(
            packet_time(8, SPI_HZ) - SPI_PACKET_OVERHEAD,
            Duration::from_nanos(4_533 + 1_066)
        );
        assert_eq!(upstream_time(1024), Duration::from_nanos(1_160_533));
    }
}
