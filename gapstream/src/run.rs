//! The CLI's composite runs: `demo` (node + bridge + receiver + viewer in one process), `view`,
//! `node`, and `bench` (every suite and transport on localhost).

use std::fmt::Write as _;
use std::fs;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use esp32_bridge::fec::FecConfig;
use esp32_bridge::host::{HostBridge, HostConfig};
use esp32_bridge::netsim::{LossModel, WifiModel};
use gapstream_drone::rng::DrbgRng;
use gapstream_drone::{DroneConfig, Mode, SecureConfig};
use gapstream_protocol::handshake::{self, DroneIdentity, Identity, Role, SuiteSet};
use gapstream_protocol::session;
use gapstream_protocol::suite::{KexMode, Suite};

use crate::images::{FrameSource, SourceSpec};
use crate::receiver::bus::Policy;
use crate::receiver::outputs::{Console, MetricsCsv, PngRecorder};
use crate::receiver::{self, Bus, ReceiverConfig, SecureSettings, SessionKind, Summary, Transport};
use crate::sim::{self, EngineChoice, NodeConfig, OsEntropy};
use crate::viewer::{Viewer, ViewerOutput, ViewerState};

/// Errors of a composite run, one line each.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error("{0}")]
    Setup(String),
    #[error(transparent)]
    Receiver(#[from] receiver::ReceiverError),
    #[error("the drone node failed: {0}")]
    Node(String),
    /// No frame came; `why` is the receiver's diagnosis (the likely cause), or a hint.
    #[error("no frame was delivered in {secs:.1} s: {why}")]
    NoFrames { secs: f64, why: String },
    #[error("{0}")]
    Io(#[from] std::io::Error),
}

/// Receiver-side settings shared by `demo`, `view` and `record`.
#[derive(Clone, Debug)]
pub struct StreamSettings {
    pub transport: Transport,
    pub duration: Option<Duration>,
    pub metrics: Option<PathBuf>,
    pub viewer: Option<String>,
    /// The viewer sends JPEG frames as the receiver's decoded samples, not as their file.
    pub viewer_pixels: bool,
    pub bayer: bool,
    pub record: Option<PathBuf>,
    /// ROS 2 MCAP recording of every verified frame (see [`crate::mcap_out`]).
    pub mcap: Option<PathBuf>,
    /// The frame ids of the drone's state (MCAP's Odometry and tf).
    pub state_frames: crate::ros::StateFrames,
    /// Publish every verified frame on Zenoh (feature `zenoh`).
    pub zenoh: Option<ZenohSettings>,
    /// `demo` only: every receiver of the run appends its key-log lines to this file
    /// (docs/protocol.md §12; `view` and `record` take theirs with the session).
    pub keylog: Option<PathBuf>,
    /// The drone's name: every frame's source (`--drone`; the Zenoh key chunk too).
    pub source: String,
    /// The receiver's key file, named in the closing diagnosis when the drone refuses it.
    pub keys: Option<PathBuf>,
    /// Over UDP: ask the bridge for forward error correction.
    pub fec: bool,
}

/// What the host bridge of `gapstream demo` models: the WiFi side's rate, loss on its UDP
/// output, and the FEC it grants (`docs/stream.md`).
#[derive(Clone, Debug)]
pub struct BridgeSettings {
    pub wifi: Option<WifiModel>,
    /// A swarm's bridges (`demo --drones N`, `swarm`) under the WiFi model: the rate in Mbit/s
    /// of the one access point's channel they share (None: each bridge has a channel of its
    /// own). A single drone's bridge ignores it.
    pub channel_mbps: Option<f64>,
    pub udp_loss: Option<LossModel>,
    pub fec: FecConfig,
}

impl Default for BridgeSettings {
    /// As fast as the sockets go, no loss, FEC on request with the defaults.
    fn default() -> Self {
        BridgeSettings {
            wifi: None,
            channel_mbps: None,
            udp_loss: None,
            fec: FecConfig::default(),
        }
    }
}

impl BridgeSettings {
    /// One line for the demo's banner.
    pub fn describe(&self) -> String {
        let wifi = match self.wifi {
            Some(w) => format!(
                "WiFi {} Mbit/s shared by all receivers (queue {} KiB, then the SPI side waits)",
                w.mbps,
                w.queue_bytes / 1024
            ),
            None => "WiFi unpaced".into(),
        };
        let loss = match self.udp_loss {
            Some(m) if m.burst > 1.0 => format!(
                ", UDP loss {} % in bursts of {} (seed {})",
                m.percent, m.burst, m.seed
            ),
            Some(m) => format!(", UDP loss {} % independent (seed {})", m.percent, m.seed),
            None => String::new(),
        };
        let f = &self.fec;
        let fec = if f.enabled {
            format!(
                ", FEC k = {}, n = {}{} for UDP receivers that ask",
                f.k,
                f.k as u16 + f.parity as u16,
                match f.adaptive {
                    Some((lo, hi)) => format!(" (adaptive, {lo}..={hi} parity per {})", f.k),
                    None => String::new(),
                }
            )
        } else {
            ", FEC off".into()
        };
        format!("{wifi}{loss}{fec}")
    }

    /// The WiFi model of a swarm's `n` bridges, one line for the banner.
    pub fn describe_swarm(&self, n: usize) -> String {
        match (self.wifi, self.channel_mbps) {
            (None, _) => "WiFi unpaced (--wifi-mbps 0)".into(),
            (Some(w), Some(c)) => format!(
                "WiFi {} Mbit/s per bridge, the {n} bridges on one {c} Mbit/s channel (one access point: {:.2} Mbit/s each when all send; queue {} KiB, then the SPI side waits)",
                w.mbps,
                (c / n as f64).min(w.mbps),
                w.queue_bytes / 1024
            ),
            (Some(w), None) => format!(
                "WiFi {} Mbit/s per bridge, each on a channel of its own (queue {} KiB, then the SPI side waits)",
                w.mbps,
                w.queue_bytes / 1024
            ),
        }
    }
}

/// Where `--zenoh` publishes.
#[derive(Clone, Debug)]
pub struct ZenohSettings {
    /// Connect to this Zenoh endpoint (`tcp/HOST:PORT`); None: a peer with Zenoh's defaults.
    pub endpoint: Option<String>,
    /// The `<drone>` chunk of `gapstream/<drone>/image`.
    pub drone: String,
}

/// What protects the stream.
#[derive(Clone, Debug)]
pub enum Security {
    /// The stock `0xBC` stream in clear (what an unmodified AI-deck sends).
    StockPlaintext,
    /// gapstream's protocol with this suite and key-establishment mode (`Suite::None` = encryption
    /// off, still with the handshake and sequence numbers, for A/B latency measurements).
    Secure { suite: Suite, kex: KexMode },
}

impl Security {
    pub fn name(&self) -> String {
        match self {
            Security::StockPlaintext => "stock-plaintext".into(),
            Security::Secure { suite, .. } => suite.name().into(),
        }
    }
}

/// A fresh pairing (drone identity, receiver identity) from the OS RNG.
pub fn fresh_pairing() -> Result<(Identity, Identity), RunError> {
    let mut rng =
        DrbgRng::from_entropy(&mut OsEntropy).map_err(|e| RunError::Setup(e.to_string()))?;
    Ok(handshake::pair(&mut rng))
}

/// A fresh pairing of a drone with `receivers` receivers (1..=8), each with its own key.
pub fn fresh_group(receivers: usize) -> Result<(DroneIdentity, Vec<Identity>), RunError> {
    let mut rng =
        DrbgRng::from_entropy(&mut OsEntropy).map_err(|e| RunError::Setup(e.to_string()))?;
    Ok(handshake::pair_group(&mut rng, receivers))
}

/// Reads a pairing file written by `gapstream pair`, checking its role.
pub fn load_identity(path: &Path, want: Role) -> Result<Identity, RunError> {
    let text = fs::read_to_string(path).map_err(|e| {
        RunError::Setup(format!(
            "cannot read the {} key file {}: {e} (`gapstream pair --dir DIR` makes the key files)",
            want.name(),
            path.display()
        ))
    })?;
    let (role, id) = match Identity::from_pairing_text(&text) {
        Ok(x) => x,
        Err(handshake::PairingError::ReceiverCount(n)) if want == Role::Receiver && n > 1 => {
            return Err(RunError::Setup(format!(
                "{}: this is the drone key file (it lists {n} receivers); the receiver needs its own (gapstream pair writes receiver.key, receiver2.key, ...)",
                path.display()
            )));
        }
        Err(e) => return Err(RunError::Setup(format!("{}: {e}", path.display()))),
    };
    if role != want {
        return Err(RunError::Setup(format!(
            "{}: this is the {} key file; the {} needs its own (gapstream pair writes both)",
            path.display(),
            role.name(),
            want.name()
        )));
    }
    Ok(id)
}

/// Reads a drone's pairing file (one or more receivers).
pub fn load_drone_identity(path: &Path) -> Result<DroneIdentity, RunError> {
    let text = fs::read_to_string(path)
        .map_err(|e| RunError::Setup(format!("{}: {e}", path.display())))?;
    DroneIdentity::from_pairing_text(&text).map_err(|e| {
        RunError::Setup(format!(
            "{}: {e}{}",
            path.display(),
            if e == handshake::PairingError::BadRole {
                " (this is not the drone key file)"
            } else {
                ""
            }
        ))
    })
}

/// The file name of receiver `i` (0-based) of a pairing: `receiver.key`, `receiver2.key`, ...
pub fn receiver_key_name(i: usize) -> String {
    if i == 0 {
        "receiver.key".into()
    } else {
        format!("receiver{}.key", i + 1)
    }
}

/// First line of the key files `gapstream demo --keys-dir` writes; the next demo run may replace
/// files that carry it, never a real pairing.
const DEMO_KEYS_MARK: &str =
    "# gapstream demo: the pairing of one demo run (the next run replaces it)";

/// Writes a demo run's pairing into `dir` (drone.key, receiver.key, receiver2.key, ...), replacing
/// an earlier demo run's files but refusing to overwrite any other file.
fn write_demo_pairing(
    dir: &Path,
    drone: &DroneIdentity,
    receivers: &[Identity],
) -> Result<(), RunError> {
    fs::create_dir_all(dir).map_err(|e| {
        RunError::Setup(format!(
            "cannot create the key folder {}: {e}",
            dir.display()
        ))
    })?;
    let mut files = vec![("drone.key".to_string(), drone.to_pairing_text())];
    for (i, r) in receivers.iter().enumerate() {
        files.push((receiver_key_name(i), r.to_pairing_text(Role::Receiver)));
    }
    for (name, _) in &files {
        let p = dir.join(name);
        if p.exists() && !fs::read_to_string(&p).is_ok_and(|t| t.starts_with(DEMO_KEYS_MARK)) {
            return Err(RunError::Setup(format!(
                "{} exists and is not a demo run's key file: give --keys-dir an empty or a demo's folder",
                p.display()
            )));
        }
    }
    for (name, text) in &files {
        write_secret(&dir.join(name), &format!("{DEMO_KEYS_MARK}\n{text}"))?;
    }
    Ok(())
}

/// `gapstream pair`: writes `drone.key` (listing every receiver) and one key file per receiver
/// (`receiver.key`, `receiver2.key`, ...) into `dir`; the last `watchers` receivers watch only
/// (the drone refuses their SET_QUALITY).
pub fn pair(dir: &Path, receivers: usize, watchers: usize, force: bool) -> Result<(), RunError> {
    if !(1..=handshake::MAX_RECEIVER_KEYS).contains(&receivers) {
        return Err(RunError::Setup(format!(
            "--receivers {receivers}: a drone can be paired with 1 to {} receivers",
            handshake::MAX_RECEIVER_KEYS
        )));
    }
    if watchers > receivers {
        return Err(RunError::Setup(format!(
            "--watchers {watchers}: at most the {receivers} receivers of --receivers"
        )));
    }
    fs::create_dir_all(dir).map_err(|e| {
        RunError::Setup(format!(
            "cannot create the key folder {}: {e}",
            dir.display()
        ))
    })?;
    let (mut d, rs) = fresh_group(receivers)?;
    d.watch_only = watch_only_bits(receivers - watchers, receivers);
    let mut files = vec![("drone.key".to_string(), d.to_pairing_text())];
    for (i, r) in rs.iter().enumerate() {
        files.push((receiver_key_name(i), r.to_pairing_text(Role::Receiver)));
    }
    for (name, _) in &files {
        let p = dir.join(name);
        if p.exists() && !force {
            return Err(RunError::Setup(format!(
                "{} exists; pass --force to replace the pairing",
                p.display()
            )));
        }
    }
    for (name, text) in &files {
        write_secret(&dir.join(name), text)?;
    }
    let fp = |k: &[u8; 32]| {
        k[..8]
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect::<String>()
    };
    let rx: Vec<String> = rs
        .iter()
        .map(|r| format!("{}..", fp(&r.local.public())))
        .collect();
    out!(
        "paired: drone public key {}.., receiver public key{} {}",
        fp(&d.local.public()),
        if receivers > 1 { "s" } else { "" },
        rx.join(", ")
    );
    let names: Vec<String> = (0..receivers)
        .map(|i| dir.join(receiver_key_name(i)).display().to_string())
        .collect();
    out!(
        "wrote {} (flash it into the drone) and {} (one per receiver, keep each on its receiver)",
        dir.join("drone.key").display(),
        names.join(", ")
    );
    if watchers > 0 {
        out!(
            "watch only (the drone refuses their SET_QUALITY): {}",
            names[receivers - watchers..].join(", ")
        );
    }
    Ok(())
}

/// [`DroneIdentity::watch_only`] for receivers `first..end`.
fn watch_only_bits(first: usize, end: usize) -> u16 {
    (first..end).fold(0, |m, i| m | 1 << i)
}

fn write_secret(p: &Path, text: &str) -> Result<(), RunError> {
    crate::secret_file::write(p, text.as_bytes(), crate::secret_file::How::Replace)
        .map_err(|e| RunError::Setup(format!("cannot write the key file {}: {e}", p.display())))
}

/// The receiver's session for `security` with `identity`.
pub fn receiver_session(
    security: &Security,
    identity: Option<Identity>,
    packet_payload: usize,
) -> Result<SessionKind, RunError> {
    match security {
        Security::StockPlaintext => Ok(SessionKind::StockPlaintext),
        Security::Secure { suite, kex } => {
            let identity = identity.ok_or_else(|| {
                RunError::Setup(
                    "the secure stream needs the receiver's key file (--keys, from gapstream pair)"
                        .into(),
                )
            })?;
            let rsa_key = if *kex == KexMode::RsaOaep2048 {
                let mut rng = DrbgRng::from_entropy(&mut OsEntropy)
                    .map_err(|e| RunError::Setup(e.to_string()))?;
                Some(
                    gapstream_protocol::rsa_oaep::Decryptor::generate(&mut rng)
                        .map_err(|e| RunError::Setup(format!("RSA key generation: {e}")))?,
                )
            } else {
                None
            };
            Ok(SessionKind::Secure(Box::new(SecureSettings {
                identity,
                suites: vec![*suite],
                modes: vec![*kex],
                packet_payload,
                rsa_key,
                keylog: None,
                quality: None,
            })))
        }
    }
}

/// The drone's mode for `security` with `identity`. The simulated drone accepts the authenticated
/// suites and the one `security` names: an unauthenticated suite only when it was asked for on this
/// end too (`--suite`), as on a real drone, whose policy accepts only the authenticated ones.
pub fn drone_mode(security: &Security, identity: Option<DroneIdentity>) -> Result<Mode, RunError> {
    drone_mode_with(security, identity, Rekey::default())
}

/// When the drone starts a new key epoch.
#[derive(Clone, Copy, Debug)]
pub struct Rekey {
    pub after_frames: u64,
    pub after: Duration,
}

impl Default for Rekey {
    fn default() -> Self {
        let d = session::DroneConfig::default();
        Rekey {
            after_frames: d.rekey_after_frames,
            after: Duration::from_nanos(d.rekey_after_ns),
        }
    }
}

/// [`drone_mode`] with a rekey policy.
pub fn drone_mode_with(
    security: &Security,
    identity: Option<DroneIdentity>,
    rekey: Rekey,
) -> Result<Mode, RunError> {
    match security {
        Security::StockPlaintext => Ok(Mode::StockPlaintext),
        Security::Secure { suite, .. } => {
            let identity = identity.ok_or_else(|| {
                RunError::Setup(
                    "the secure stream needs the drone's key file (--keys, from gapstream pair)"
                        .into(),
                )
            })?;
            let mut s = session::DroneConfig::default();
            s.policy.suites = SuiteSet::authenticated().with(*suite);
            s.max_receivers = identity.receivers.len().max(s.max_receivers);
            s.rekey_after_frames = rekey.after_frames.max(1);
            s.rekey_after_ns = rekey.after.as_nanos().min(u64::MAX as u128) as u64;
            // The simulated drone draws from the operating system's RNG; its boot counter lives in
            // RAM (every simulated drone process is boot 1). A deck keeps it in flash.
            let boot =
                gapstream_drone::Boot::advance(&mut gapstream_drone::boot::RamBootCounter::new(0))
                    .map_err(|e| RunError::Setup(e.to_string()))?;
            Ok(Mode::Secure(Box::new(SecureConfig {
                identity,
                session: s,
                boot,
            })))
        }
    }
}

/// The engine of the simulated drone: `gap_rust_wrapper`'s cluster engine on the host backend
/// with 8 cores, the GAP8 code path.
const ENGINE: EngineChoice = EngineChoice::Cluster { cores: 8 };

/// The simulated drone's settings.
#[derive(Clone, Debug)]
pub struct NodeSettings {
    pub source: SourceSpec,
    pub fps: f64,
    pub packet_payload: usize,
    pub spi_hz: Option<u64>,
    pub security: Security,
    pub rekey: Rekey,
    /// Compress, then seal: the drone's codec and JPEG quality.
    pub codec: crate::codec::Codec,
    pub quality: u8,
    /// Target-bytes mode (JPEG): the quality follows the frames' size.
    pub target_bytes: Option<usize>,
    /// Length-hiding padding of coded frames.
    pub padding: gapstream_protocol::padding::Padding,
}

/// `raw`, `jpeg quality 75`, `jpegls (lossless)`: the codec as the start-up lines show it.
pub fn codec_label(codec: crate::codec::Codec, quality: u8) -> String {
    match codec {
        crate::codec::Codec::Raw => "raw frames".into(),
        crate::codec::Codec::Jpeg => format!("JPEG quality {quality}"),
        crate::codec::Codec::Jpegls => "lossless JPEG-LS".into(),
    }
}

/// What the drone's coder did, one line (None without a coder).
pub fn coder_line(d: &gapstream_drone::DroneStats) -> Option<String> {
    if d.frames_coded == 0 && d.coder_errors == 0 {
        return None;
    }
    let n = d.frames_coded.max(1) as f64;
    Some(
        format!(
            "{} frames coded, {:.0} bytes/frame coded, coding {:.2} ms/frame on the host, {} sent raw after a coder error",
            d.frames_coded,
            d.coded_bytes as f64 / n,
            d.code_ns as f64 / n / 1e6,
            d.coder_errors
        ) + &padding_note(d),
    )
}

/// `, padded to N bytes/frame (+x.x %)` when the drone padded its coded frames.
fn padding_note(d: &gapstream_drone::DroneStats) -> String {
    if d.frames_padded == 0 {
        return String::new();
    }
    let n = d.frames_padded as f64;
    // The padded frames are the coded ones (every coded frame is padded when padding is on).
    format!(
        ", padded to {:.0} bytes/frame (+{:.1} %)",
        (d.coded_bytes + d.padding_bytes) as f64 / n,
        d.padding_bytes as f64 / d.coded_bytes.max(1) as f64 * 100.0
    )
}

/// The viewer's address unless `--viewer` says otherwise.
pub const DEFAULT_VIEWER: &str = "127.0.0.1:8080";

/// Serves the viewer on `addr` (port 0: any free port). Only the default address falls back to a
/// free port when it is taken (a second demo on this machine); an address the user gave must work.
fn start_viewer(s: &StreamSettings, addr: &str) -> Result<(Arc<ViewerState>, Viewer), RunError> {
    let state = ViewerState::new(s.bayer);
    state.set_jpeg_passthrough(!s.viewer_pixels);
    serve_viewer(addr, state)
}

/// The ground station's viewer (a tile per drone) on `addr`, by the same port rule as the single
/// viewer's.
/// A ground station's grid viewer; `pixels`: JPEG frames as decoded samples, not their file.
pub fn start_grid_viewer(
    addr: &str,
    bayer: bool,
    pixels: bool,
) -> Result<(Arc<ViewerState>, Viewer), RunError> {
    let state = ViewerState::grid(bayer);
    state.set_jpeg_passthrough(!pixels);
    serve_viewer(addr, state)
}

fn serve_viewer(
    addr: &str,
    state: Arc<ViewerState>,
) -> Result<(Arc<ViewerState>, Viewer), RunError> {
    let v = match Viewer::start(addr, state.clone()) {
        Ok(v) => v,
        Err(e) if addr == DEFAULT_VIEWER => {
            eprintln!("gapstream: {e}; using a free port instead");
            Viewer::start("127.0.0.1:0", state.clone())
                .map_err(|e| RunError::Setup(e.to_string()))?
        }
        Err(e) => return Err(RunError::Setup(e.to_string())),
    };
    Ok((state, v))
}

/// How the simulated camera's rate is announced: `at 30 fps`, or for `--fps 0` (no pacing)
/// `as fast as it can (--fps 0: no pacing)`.
pub fn camera_rate(fps: f64) -> String {
    if fps > 0.0 {
        format!("at {fps} fps")
    } else {
        "as fast as it can (--fps 0: no pacing)".into()
    }
}

/// Starts the host bridge on the stock ports (SPI side 5100, TCP/UDP 5000), or on free ports when
/// those are taken.
pub fn start_bridge(verbose: bool, b: &BridgeSettings) -> Result<HostBridge, RunError> {
    let cfg = HostConfig {
        verbose,
        // The demo's receivers all run on this machine (one source address): a UDP slot for
        // every receiver the drone serves.
        udp: esp32_bridge::cookie::GateConfig {
            clients_per_ip: handshake::MAX_RECEIVER_KEYS,
            ..esp32_bridge::cookie::GateConfig::default()
        },
        core: esp32_bridge::forward::Config {
            max_udp_clients: handshake::MAX_RECEIVER_KEYS,
            ..esp32_bridge::forward::Config::default()
        },
        fec: b.fec,
        wifi: b.wifi,
        udp_loss: b.udp_loss,
        ..HostConfig::default()
    };
    match HostBridge::start(cfg.clone()) {
        Ok(b) => Ok(b),
        Err(e) if e.kind() == std::io::ErrorKind::InvalidInput => {
            Err(RunError::Setup(format!("bridge settings: {e}")))
        }
        Err(e) => {
            eprintln!("gapstream: ports 5000/5100 unavailable ({e}); the bridge uses free ports");
            let any: SocketAddr = "127.0.0.1:0".parse().expect("static");
            HostBridge::start(HostConfig {
                spi_listen: any,
                tcp_listen: any,
                udp_listen: Some(any),
                ..cfg
            })
            .map_err(|e| RunError::Setup(format!("cannot start the bridge: {e}")))
        }
    }
}

/// The closing lines of a receiver: its outputs' closing lines and the figures on stdout, what an
/// output could not keep (shortfalls) and the diagnosis on stderr.
pub fn print_summary(who: &str, s: &Summary) {
    let c = &s.counters;
    let lat = match s.latency {
        Some(p) => format!(
            "latency p50 {:.2} ms, p95 {:.2} ms, p99 {:.2} ms",
            p.p50, p.p95, p.p99
        ),
        None => "no latency samples".into(),
    };
    for o in &s.outputs {
        if let Some(l) = &o.closing {
            out!("{who}: {l}");
        }
        if let Some(l) = &o.shortfall {
            eprintln!("{who}: {l}");
        }
    }
    let fec = if c.fec.on || c.fec.data_shards > 0 {
        format!(
            "; FEC: {} packets rebuilt, {} blocks unrecoverable, redundancy {:.0} %, {} of {} shards lost",
            c.fec.recovered,
            c.fec.unrecoverable_blocks,
            c.fec.redundancy_pct,
            c.fec.shards_lost,
            c.fec.shards_lost + c.fec.shards_received
        )
    } else {
        String::new()
    };
    out!(
        "{who}: {} frames in {:.1} s ({:.1} fps), {lat}; lost {}, tag failures {}, replays {}, malformed {}, without key {}, handshakes {}, rekeys {}, connections {}{fec}",
        c.frames,
        s.elapsed_s,
        c.frames as f64 / s.elapsed_s.max(1e-9),
        c.lost,
        c.tag_failures,
        c.replays,
        c.malformed,
        c.no_key,
        c.handshakes,
        c.rekeys,
        s.connects
    );
    if c.frames > 0
        && let Some(d) = &s.diagnosis
    {
        eprintln!("{who}: warning: {d}");
    }
}

/// The error of a run that delivered no frame: the receiver's diagnosis (naming the key file
/// when the drone refused it), else a hint.
fn no_frames(s: &Summary, keys: Option<&Path>) -> RunError {
    let why = match (&s.diagnosis, keys) {
        (Some(d), Some(k)) if d.contains("this receiver's key") => d.replace(
            "this receiver's key",
            &format!("the receiver key {}", k.display()),
        ),
        (Some(d), _) => d.clone(),
        (None, _) => "is the bridge / drone running?".into(),
    };
    RunError::NoFrames {
        secs: s.elapsed_s,
        why,
    }
}

/// The outputs of `view`, `record` and `demo` on the receiver's bus: the console, the viewer,
/// the metrics CSV, the PNG recorder, MCAP, Zenoh.
fn receiver_bus(
    viewer: &Option<(Arc<ViewerState>, Viewer)>,
    s: &StreamSettings,
) -> Result<Bus, RunError> {
    let mut bus = Bus::new();
    bus.attach(Box::new(Console::new(true, true)));
    if let Some((st, _)) = viewer {
        bus.attach(Box::new(ViewerOutput(st.clone())));
    }
    if let Some(p) = &s.metrics {
        bus.attach(Box::new(
            MetricsCsv::create(p, sim::unix_ns()).map_err(RunError::Setup)?,
        ));
    }
    if let Some(d) = &s.record {
        bus.attach(Box::new(PngRecorder::create(d).map_err(RunError::Setup)?));
    }
    if let Some(p) = &s.mcap {
        bus.attach(Box::new(
            crate::mcap_out::McapRecorder::create(p, s.bayer, s.state_frames.clone())
                .map_err(RunError::Setup)?,
        ));
    }
    if let Some(z) = &s.zenoh {
        #[cfg(feature = "zenoh")]
        {
            bus.attach(Box::new(
                crate::zenoh_out::ZenohPublisher::open(
                    z.endpoint.as_deref(),
                    &z.drone,
                    s.bayer,
                    s.state_frames.clone(),
                )
                .map_err(RunError::Setup)?,
            ));
            out!(
                "  zenoh    publishing gapstream/{}/image, frame_info, stats ({}; plaintext inside Zenoh)",
                z.drone,
                z.endpoint
                    .as_deref()
                    .map(|e| format!("connected to {e}"))
                    .unwrap_or_else(|| "peer".into())
            );
        }
        #[cfg(not(feature = "zenoh"))]
        return Err(RunError::Setup(format!(
            "--zenoh (drone {:?}): this gapstream was built without Zenoh; build it with `cargo build --release -p gapstream --features zenoh`",
            z.drone
        )));
    }
    Ok(bus)
}

/// The receiver's settings for a run of `s`.
fn receiver_config(
    bridge: SocketAddr,
    session: SessionKind,
    s: &StreamSettings,
    stop: Arc<AtomicBool>,
) -> ReceiverConfig {
    ReceiverConfig {
        source: Arc::from(s.source.as_str()),
        bayer: s.bayer,
        stop,
        duration: s.duration,
        fec: s.fec,
        ..ReceiverConfig::new(bridge, s.transport, session)
    }
}

/// Listeners of `gapstream demo`: extra receivers next to the leader (the one with the viewer),
/// a group test: each with its own key and handshake, all opening the same frames.
#[derive(Clone, Copy, Debug, Default)]
pub struct Listeners {
    /// How many (0..=7).
    pub count: usize,
    /// They leave (CLOSE) after this long; the leader's stream goes on (None: they stay).
    pub leave_after: Option<Duration>,
}

/// `gapstream demo`: pairs a simulated drone with the receiver (and the listeners) in memory,
/// starts the bridge, the drone and the viewer, and receives until Ctrl-C or the duration.
pub fn demo(
    node: NodeSettings,
    s: StreamSettings,
    bridge_settings: BridgeSettings,
    listeners: Listeners,
    keys_dir: Option<&Path>,
    stop: Arc<AtomicBool>,
) -> Result<(), RunError> {
    if listeners.count >= handshake::MAX_RECEIVER_KEYS {
        return Err(RunError::Setup(format!(
            "--listeners {}: at most {} (the drone serves {} receivers)",
            listeners.count,
            handshake::MAX_RECEIVER_KEYS - 1,
            handshake::MAX_RECEIVER_KEYS
        )));
    }
    // With a key folder the drone is paired with every receiver slot: the viewer's, the
    // listeners', and spare ones that `gapstream view` / `record` attach with.
    let receivers = if keys_dir.is_some() {
        handshake::MAX_RECEIVER_KEYS
    } else {
        1 + listeners.count
    };
    let (mut drone_id, rx_ids) = fresh_group(receivers)?;
    // The listeners watch; the leader (and a spare key that `view` / `record` attach with) may
    // change the quality.
    drone_id.watch_only = watch_only_bits(1, 1 + listeners.count);
    let spare = match keys_dir {
        Some(dir) => {
            write_demo_pairing(dir, &drone_id, &rx_ids)?;
            (1 + listeners.count..receivers)
                .map(|i| dir.join(receiver_key_name(i)))
                .collect()
        }
        None => Vec::new(),
    };
    let mut sessions = rx_ids
        .into_iter()
        .take(1 + listeners.count)
        .map(|id| {
            let mut k = receiver_session(&node.security, Some(id), node.packet_payload)?;
            if let SessionKind::Secure(sec) = &mut k {
                sec.keylog = s.keylog.clone();
            }
            Ok(k)
        })
        .collect::<Result<Vec<_>, RunError>>()?
        .into_iter();
    let session = sessions.next().expect("at least the leader");
    let mode = drone_mode_with(&node.security, Some(drone_id), node.rekey)?;
    if s.fec && s.transport != Transport::Udp {
        return Err(RunError::Setup(
            "--fec works over UDP: add --transport udp".into(),
        ));
    }
    let bridge = start_bridge(listeners.count > 0, &bridge_settings)?;
    let viewer = match &s.viewer {
        Some(a) => Some(start_viewer(&s, a)?),
        None => None,
    };
    let bus = receiver_bus(&viewer, &s)?;
    let source = FrameSource::open(&node.source).map_err(|e| RunError::Setup(e.to_string()))?;
    let (w, h) = (source.width(), source.height());
    out!("gapstream demo: simulated drone -> ESP32 bridge -> receiver, all on this machine");
    out!(
        "  bridge   SPI side {}, TCP {}, UDP {} (holds no key)",
        bridge.spi_addr,
        bridge.tcp_addr,
        bridge
            .udp_addr
            .map(|u| u.to_string())
            .unwrap_or_else(|| "off".into())
    );
    out!("           {}", bridge_settings.describe());
    out!(
        "  drone    {} {w}x{h} {}, {}, CPX packets of {} bytes, SPI {}",
        match node.source {
            SourceSpec::Synthetic { .. } => "synthetic pattern",
            SourceSpec::Folder(_) => "image folder",
            SourceSpec::Raw { .. } => "raw file",
        },
        camera_rate(node.fps),
        match node.target_bytes {
            Some(t) if node.codec == crate::codec::Codec::Jpeg => format!(
                "{} at most, quality following a target of {t} bytes per frame",
                codec_label(node.codec, node.quality)
            ),
            _ => codec_label(node.codec, node.quality),
        } + &match (node.codec, node.padding) {
            (crate::codec::Codec::Raw, _) | (_, gapstream_protocol::padding::Padding::Off) => {
                String::new()
            }
            (_, p) => format!(", length-hiding padding {}", p.name()),
        },
        node.packet_payload,
        match node.spi_hz {
            Some(hz) => format!(
                "paced like the AI-deck's link: frames at {:.1} MHz (MISO ignored), lengths and upstream at {:.2} MHz (<= 7.2 MHz MISO limit)",
                hz as f64 / 1e6,
                crate::sim::SPI_UP_HZ as f64 / 1e6
            ),
            None => "unpaced".into(),
        }
    );
    out!(
        "  session  {} over {}{} ({})",
        session.label(),
        s.transport,
        if s.fec { " with FEC" } else { "" },
        match node.security {
            Security::StockPlaintext => "no keys: the stock stream has no pairing",
            Security::Secure { .. } => "pairing made for this run",
        }
    );
    if listeners.count > 0 {
        out!(
            "  group    the receiver with the viewer (leader) + {} listener{}, each with its own key and handshake; frames sealed once under the group key{}",
            listeners.count,
            if listeners.count > 1 { "s" } else { "" },
            match listeners.leave_after {
                Some(d) => format!("; the listeners leave after {:.1} s", d.as_secs_f64()),
                None => String::new(),
            }
        );
    }
    if let Some((_, v)) = &viewer {
        out!(
            "  viewer   {}   (open it in a browser; Ctrl-C stops)",
            v.url()
        );
    }
    if let (Some(dir), Some(first)) = (keys_dir, spare.first()) {
        out!(
            "  keys     this run's pairing in {}: attach with `gapstream view --keys {}` (or `record DIR --keys ...`), {} spare receiver key{} there, one per process",
            dir.display(),
            first.display(),
            spare.len(),
            if spare.len() > 1 { "s" } else { "" }
        );
    }
    let n = sim::start_node(NodeConfig {
        source,
        fps: node.fps,
        bridge_spi: bridge.spi_addr,
        spi_hz: node.spi_hz,
        drone: DroneConfig {
            mode,
            packet_payload: node.packet_payload,
        },
        frames: None,
        engine: ENGINE,
        coder: crate::codec::HostCoder::boxed_with_target(
            node.codec,
            node.quality,
            node.target_bytes,
        )
        .map_err(RunError::Setup)?,
        padding: node.padding,
        flight: Some(crate::flight::Circle::default()),
    })
    .map_err(RunError::Node)?;
    // The receivers start once the node's SPI link is up: the bridge drops what was queued for the
    // GAP8 when its link (re)starts, so an earlier HELLO would only be answered on the retry.
    if !bridge.wait_gap8_link(Duration::from_secs(5)) {
        eprintln!(
            "gapstream: the simulated drone has not reached the bridge after 5 s; starting the receiver anyway"
        );
    }
    let bridge_addr = match s.transport {
        Transport::Tcp => bridge.tcp_addr,
        Transport::Udp => bridge
            .udp_addr
            .ok_or_else(|| RunError::Setup("the bridge has no UDP socket".into()))?,
    };
    // The listeners: receivers without viewer, each on its own thread.
    let listener_threads: Vec<_> = sessions
        .enumerate()
        .map(|(i, session)| {
            let mut cfg = receiver_config(bridge_addr, session, &s, stop.clone());
            cfg.duration = match (s.duration, listeners.leave_after) {
                (Some(d), Some(l)) => Some(d.min(l)),
                (d, l) => d.or(l),
            };
            std::thread::spawn(move || receiver::run(cfg, Bus::new()).map(|sum| (i + 1, sum)))
        })
        .collect();
    let summary = receiver::run(receiver_config(bridge_addr, session, &s, stop.clone()), bus);
    stop.store(true, Ordering::Relaxed);
    let mut listener_summaries = Vec::new();
    for t in listener_threads {
        match t.join() {
            Ok(Ok(x)) => listener_summaries.push(x),
            Ok(Err(e)) => eprintln!("gapstream: a listener failed: {e}"),
            Err(_) => eprintln!("gapstream: a listener thread panicked"),
        }
    }
    let rep = n.stop();
    bridge.stop();
    let summary = summary?;
    print_summary("gapstream", &summary);
    for (i, l) in &listener_summaries {
        print_summary(&format!("gapstream listener {i}"), l);
    }
    if let Some(l) = coder_line(&rep.drone) {
        eprintln!("gapstream: drone: {l}");
    }
    if listeners.count > 0 {
        out!(
            "gapstream: drone: {} handshakes, {} receivers left, {} group keys acknowledged",
            rep.drone.handshakes,
            rep.drone.receivers_left,
            rep.drone.rekeys_acked
        );
    }
    if let Some(e) = rep.error {
        return Err(RunError::Node(e));
    }
    if summary.counters.frames == 0 {
        return Err(no_frames(&summary, None));
    }
    Ok(())
}

/// `gapstream view` / `gapstream record`.
pub fn view(
    bridge: SocketAddr,
    session: SessionKind,
    s: StreamSettings,
    stop: Arc<AtomicBool>,
) -> Result<(), RunError> {
    let viewer = match &s.viewer {
        Some(a) => Some(start_viewer(&s, a)?),
        None => None,
    };
    let bus = receiver_bus(&viewer, &s)?;
    // `gapstream record DIR` is `view` with a recorder: it says which it is.
    let who = if s.record.is_some() || s.mcap.is_some() {
        "record"
    } else {
        "view"
    };
    if s.fec && s.transport != Transport::Udp {
        return Err(RunError::Setup(
            "--fec works over UDP: add --transport udp".into(),
        ));
    }
    out!(
        "gapstream {who}: receiving from {bridge} over {}{} ({})",
        s.transport,
        if s.fec { " with FEC" } else { "" },
        session.label()
    );
    if let Some(d) = &s.record {
        out!(
            "  record   every verified frame into {}/frame_NNNNNNNN.png (NNNNNNNN: the frame number burned into the image when it has one, else the stream's sequence number)",
            d.display()
        );
    }
    if let Some((_, v)) = &viewer {
        out!("  viewer   {}   (Ctrl-C stops)", v.url());
    }
    let summary = receiver::run(receiver_config(bridge, session, &s, stop), bus)?;
    print_summary("gapstream", &summary);
    if summary.counters.frames == 0 {
        return Err(no_frames(&summary, s.keys.as_deref()));
    }
    Ok(())
}

/// `gapstream node`: the simulated drone alone.
pub fn node_only(
    bridge_spi: SocketAddr,
    node: NodeSettings,
    identity: Option<DroneIdentity>,
    duration: Option<Duration>,
    stop: Arc<AtomicBool>,
) -> Result<(), RunError> {
    let source = FrameSource::open(&node.source).map_err(|e| RunError::Setup(e.to_string()))?;
    let mode = drone_mode_with(&node.security, identity, node.rekey)?;
    out!(
        "gapstream node: streaming into {bridge_spi}, camera {} (Ctrl-C stops)",
        camera_rate(node.fps)
    );
    let n = sim::start_node(NodeConfig {
        source,
        fps: node.fps,
        bridge_spi,
        spi_hz: node.spi_hz,
        drone: DroneConfig {
            mode,
            packet_payload: node.packet_payload,
        },
        frames: None,
        engine: ENGINE,
        coder: crate::codec::HostCoder::boxed_with_target(
            node.codec,
            node.quality,
            node.target_bytes,
        )
        .map_err(RunError::Setup)?,
        padding: node.padding,
        flight: Some(crate::flight::Circle::default()),
    })
    .map_err(RunError::Node)?;
    let t0 = Instant::now();
    while !stop.load(Ordering::Relaxed)
        && duration.is_none_or(|d| t0.elapsed() < d)
        && !n.is_finished()
    {
        std::thread::sleep(Duration::from_millis(100));
    }
    let r = n.stop();
    out!(
        "gapstream node: {} frames captured, {} sent, {} skipped (no receiver), {} bytes; {} handshakes, {} bytes dropped while the bridge was away, {} reconnects",
        r.drone.frames_captured,
        r.drone.frames_sent,
        r.drone.frames_skipped,
        r.drone.bytes_sent,
        r.drone.handshakes,
        r.link.bytes_dropped,
        r.link.reconnects
    );
    if let Some(l) = coder_line(&r.drone) {
        eprintln!("gapstream node: {l}");
    }
    match r.error {
        Some(e) => Err(RunError::Node(e)),
        None => Ok(()),
    }
}

/// The network of a bench run: transport, FEC, loss on the bridge's UDP output.
#[derive(Clone, Copy, Debug)]
pub struct BenchNet {
    pub transport: Transport,
    /// FEC asked for by the receiver, with the bridge's settings (`None`: plain stream).
    pub fec: Option<FecConfig>,
    pub loss: Option<LossModel>,
}

impl BenchNet {
    pub fn plain(transport: Transport) -> Self {
        BenchNet {
            transport,
            fec: None,
            loss: None,
        }
    }

    /// `tcp`, `udp`, `udp+fec` or `udp+fec-adaptive`.
    pub fn label(&self) -> String {
        match self.fec {
            None => self.transport.to_string(),
            Some(f) if f.adaptive.is_some() => format!("{}+fec-adaptive", self.transport),
            Some(_) => format!("{}+fec", self.transport),
        }
    }
}

/// One bench result row.
#[derive(Clone, Debug)]
pub struct BenchRow {
    pub suite: String,
    pub transport: String,
    pub frames: u64,
    pub fps: f64,
    pub goodput_mbps: f64,
    pub p50: f64,
    pub p95: f64,
    pub p99: f64,
    pub lost: u64,
    pub tag_failures: u64,
    /// Loss on the bridge's UDP output, percent, and its mean burst length (1: independent).
    pub loss_percent: f64,
    pub loss_burst: f64,
    /// Frames delivered byte-exact, in percent of the frames the drone sent (loss runs only).
    pub delivered_percent: Option<f64>,
    /// FEC bytes on the air (headers and parity) over the plain packets' bytes, in percent, from
    /// 5 s after the first frame (UDP runs).
    pub overhead_percent: Option<f64>,
    pub fec_recovered: u64,
    pub fec_unrecoverable: u64,
}

/// The bench CSV header.
pub const BENCH_HEADER: &str = "suite,transport,frames,fps,goodput_mbps,latency_p50_ms,latency_p95_ms,latency_p99_ms,lost,tag_failures,loss_percent,loss_burst,delivered_percent,overhead_percent,fec_recovered,fec_unrecoverable_blocks";

/// Distinct raw 324x244 frames for the loss runs, each carrying its index in its first 4 bytes,
/// in a file the node reads (`raw:` source): delivered frames are checked byte for byte.
struct ExactFrames {
    path: PathBuf,
    frames: Vec<Vec<u8>>,
}

impl ExactFrames {
    fn new(n: usize) -> Result<Self, RunError> {
        let mut x = 0x2545_F491_4F6C_DD1Du64;
        let mut all = Vec::with_capacity(n * 324 * 244);
        let mut frames = Vec::with_capacity(n);
        for i in 0..n {
            let mut f: Vec<u8> = (0..324 * 244)
                .map(|_| {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    x as u8
                })
                .collect();
            f[..4].copy_from_slice(&(i as u32).to_le_bytes());
            all.extend_from_slice(&f);
            frames.push(f);
        }
        let path = std::env::temp_dir().join(format!(
            "gapstream-bench-{}-{}.raw",
            std::process::id(),
            sim::unix_ns()
        ));
        fs::write(&path, all)?;
        Ok(ExactFrames { path, frames })
    }

    fn spec(&self) -> SourceSpec {
        SourceSpec::Raw {
            path: self.path.clone(),
            width: 324,
            height: 244,
        }
    }

    fn is_exact(&self, pixels: &[u8]) -> bool {
        let Some(i) = pixels.get(..4) else {
            return false;
        };
        let i = u32::from_le_bytes([i[0], i[1], i[2], i[3]]) as usize;
        self.frames.get(i).is_some_and(|f| f[..] == *pixels)
    }
}

impl Drop for ExactFrames {
    fn drop(&mut self) {
        let _ = fs::remove_file(&self.path);
    }
}

/// FEC overhead between two snapshots of the bridge's counters, in percent.
fn overhead(
    a: esp32_bridge::fec::FecClientStats,
    b: esp32_bridge::fec::FecClientStats,
) -> Option<f64> {
    let plain = b.packet_bytes.checked_sub(a.packet_bytes)?;
    let wire = b.wire_bytes.checked_sub(a.wire_bytes)?;
    (plain > 0).then(|| (wire as f64 / plain as f64 - 1.0) * 100.0)
}

/// Streams 324x244 frames through node -> bridge -> receiver on localhost and measures what the
/// receiver delivers. Without `exact`: until `frames` frames arrived (the node runs on). With
/// `exact` (the loss runs): the node sends `frames` distinct frames, and the delivered ones are
/// checked byte for byte against them.
pub fn bench_one(
    security: &Security,
    net: BenchNet,
    frames: u64,
    fps: f64,
    spi_hz: Option<u64>,
    exact: bool,
) -> Result<BenchRow, RunError> {
    let (drone_id, rx_id) = fresh_pairing()?;
    let session = receiver_session(security, Some(rx_id), 1020)?;
    let mode = drone_mode(security, Some(drone_id.into()))?;
    let any: SocketAddr = "127.0.0.1:0".parse().expect("static");
    let bridge = HostBridge::start(HostConfig {
        spi_listen: any,
        tcp_listen: any,
        udp_listen: Some(any),
        fec: net.fec.unwrap_or_default(),
        udp_loss: net.loss,
        ..HostConfig::default()
    })?;
    let mut bus = Bus::new();
    let rx = bus.subscribe("bench", Policy::Every(4096));
    let stop = Arc::new(AtomicBool::new(false));
    let transport = net.transport;
    let addr = match transport {
        Transport::Tcp => bridge.tcp_addr,
        Transport::Udp => bridge.udp_addr.expect("bound above"),
    };
    let st = stop.clone();
    let fec = net.fec.is_some();
    let recv = std::thread::spawn(move || {
        let cfg = ReceiverConfig {
            stop: st,
            fec,
            ..ReceiverConfig::new(addr, transport, session)
        };
        receiver::run(cfg, bus)
    });
    // The receiver registers with the bridge before frames flow (its HELLO then waits there for
    // the drone).
    let t0 = Instant::now();
    while bridge.with_core(|c| c.client_ids().count()) == 0 && t0.elapsed() < Duration::from_secs(5)
    {
        std::thread::sleep(Duration::from_millis(5));
    }
    let exact_frames = if exact {
        Some(ExactFrames::new(60)?)
    } else {
        None
    };
    let spec = match &exact_frames {
        Some(e) => e.spec(),
        None => SourceSpec::Synthetic {
            width: 324,
            height: 244,
            bayer: false,
        },
    };
    let source = FrameSource::open(&spec).map_err(|e| RunError::Setup(e.to_string()))?;
    // A few extra frames cover the ones captured before the handshake completed.
    let node = sim::start_node(NodeConfig {
        source,
        fps,
        bridge_spi: bridge.spi_addr,
        spi_hz,
        drone: DroneConfig {
            mode,
            packet_payload: 1020,
        },
        frames: exact.then_some(frames),
        engine: ENGINE,
        coder: None,
        padding: gapstream_protocol::padding::Padding::Off,
        flight: None,
    })
    .map_err(RunError::Node)?;
    let mut lat = Vec::new();
    let mut first: Option<Instant> = None;
    let mut last = Instant::now();
    let mut got = 0u64;
    let mut good = 0u64;
    let mut bytes = 0u64;
    let mut fec_at_5s = None;
    let mut node_done: Option<Instant> = None;
    let deadline =
        Instant::now() + Duration::from_secs_f64(frames as f64 / fps.max(1.0) * 3.0 + 10.0);
    loop {
        if Instant::now() >= deadline || (!exact && got >= frames) {
            break;
        }
        if exact {
            // The node sent its frames: what is still on the way arrives within a second.
            if node.is_finished() {
                let t = *node_done.get_or_insert_with(Instant::now);
                if t.elapsed() > Duration::from_secs(1) {
                    break;
                }
            }
        } else if node.is_finished() {
            break;
        }
        if let Some(d) = rx.frame(Duration::from_millis(100)) {
            let now = Instant::now();
            first.get_or_insert(now);
            last = now;
            got += 1;
            bytes += d.pixels.len() as u64;
            if exact_frames.as_ref().is_some_and(|e| e.is_exact(&d.pixels)) {
                good += 1;
            }
            if let Some(c) = d.capture_ns() {
                lat.push(sim::unix_ns().saturating_sub(c) as f64 / 1e6);
            }
        }
        if fec_at_5s.is_none() && first.is_some_and(|f| f.elapsed() >= Duration::from_secs(5)) {
            fec_at_5s = Some(bridge.fec_totals());
        }
    }
    let rep = node.stop();
    stop.store(true, Ordering::Relaxed);
    let summary = recv
        .join()
        .map_err(|_| RunError::Setup("receiver thread panicked".into()))??;
    let fec_end = bridge.fec_totals();
    bridge.stop();
    if let Some(e) = rep.error {
        return Err(RunError::Node(e));
    }
    let span = first
        .map(|f| last.duration_since(f).as_secs_f64())
        .unwrap_or(0.0);
    let rate = if got > 1 && span > 0.0 {
        (got - 1) as f64 / span
    } else {
        0.0
    };
    let p = crate::metrics::Percentiles::of(&mut lat).unwrap_or_default();
    let overhead_percent = match (net.transport, fec) {
        (Transport::Tcp, _) => None,
        (Transport::Udp, false) => Some(0.0),
        (Transport::Udp, true) => overhead(fec_at_5s.unwrap_or_default(), fec_end),
    };
    Ok(BenchRow {
        suite: security.name(),
        transport: net.label(),
        frames: got,
        fps: rate,
        goodput_mbps: if span > 0.0 {
            (bytes as f64) * 8.0 / span / 1e6
        } else {
            0.0
        },
        p50: p.p50,
        p95: p.p95,
        p99: p.p99,
        lost: summary.counters.lost,
        tag_failures: summary.counters.tag_failures,
        loss_percent: net.loss.map_or(0.0, |m| m.percent),
        loss_burst: net.loss.map_or(1.0, |m| m.burst.max(1.0)),
        delivered_percent: exact.then(|| 100.0 * good as f64 / rep.drone.frames_sent.max(1) as f64),
        overhead_percent,
        fec_recovered: summary.counters.fec.recovered,
        fec_unrecoverable: summary.counters.fec.unrecoverable_blocks,
    })
}

/// What `gapstream bench` runs.
#[derive(Clone, Debug)]
pub struct BenchOptions {
    /// Frames per suite and transport (the lossless rows).
    pub frames: u64,
    pub fps: f64,
    pub spi_hz: Option<u64>,
    pub csv: PathBuf,
    /// The loss rows (udp and udp+fec at 0, 1, 5 and 10 % in bursts): frames and camera rate
    /// (`frames` 0: no loss rows).
    pub loss_frames: u64,
    pub loss_fps: f64,
}

fn opt_pct(v: Option<f64>) -> String {
    v.map(|v| format!("{v:.2}")).unwrap_or_default()
}

/// The loss runs: every loss setting over plain UDP, UDP with the default FEC (k = 40, n = 50)
/// and with the adaptive FEC (parity per 40 between 2 and 40).
fn loss_cases() -> Vec<BenchNet> {
    let loss = |spec: &str| LossModel::parse(spec, 1).expect("static loss spec");
    let fixed = FecConfig::default();
    let adaptive = FecConfig {
        adaptive: Some((2, 40)),
        ..FecConfig::default()
    };
    let mut v = Vec::new();
    for l in ["0", "1", "5", "10:4"] {
        let lm = (l != "0").then(|| loss(l));
        for fec in [None, Some(fixed), Some(adaptive)] {
            v.push(BenchNet {
                transport: Transport::Udp,
                fec,
                loss: lm,
            });
        }
    }
    v
}

/// `gapstream bench`: every suite and transport, then the loss runs; prints a table and writes
/// the CSV.
pub fn bench(o: &BenchOptions) -> Result<(), RunError> {
    let (frames, fps, spi_hz) = (o.frames, o.fps, o.spi_hz);
    let mut cases: Vec<Security> = Suite::ALL
        .iter()
        .map(|&suite| Security::Secure {
            suite,
            kex: KexMode::X25519,
        })
        .collect();
    cases.push(Security::StockPlaintext);
    let mut rows = Vec::new();
    eprintln!(
        "gapstream bench: {frames} frames of 324x244 per run, camera {}, SPI {}, localhost",
        camera_rate(fps),
        match spi_hz {
            Some(hz) => format!("paced at {hz} Hz"),
            None => "unpaced (software chain only)".into(),
        }
    );
    for sec in &cases {
        for t in [Transport::Tcp, Transport::Udp] {
            let r = bench_one(sec, BenchNet::plain(t), frames, fps, spi_hz, false)?;
            eprintln!(
                "  {:<26} {t}: {} frames, {:.1} fps, p95 {:.2} ms",
                r.suite, r.frames, r.fps, r.p95
            );
            rows.push(r);
        }
    }
    if o.loss_frames > 0 {
        eprintln!(
            "gapstream bench: loss runs, {} distinct frames each, camera {}, checked byte for byte",
            o.loss_frames,
            camera_rate(o.loss_fps)
        );
        let sec = Security::Secure {
            suite: Suite::ChaCha20Poly1305,
            kex: KexMode::X25519,
        };
        for net in loss_cases() {
            let r = bench_one(&sec, net, o.loss_frames, o.loss_fps, spi_hz, true)?;
            eprintln!(
                "  {:<18} loss {:>4.1} % (burst {}): {:.2} % delivered, overhead {} %, p95 {:.2} ms",
                r.transport,
                r.loss_percent,
                r.loss_burst,
                r.delivered_percent.unwrap_or(0.0),
                opt_pct(r.overhead_percent),
                r.p95
            );
            rows.push(r);
        }
    }
    let mut out = String::new();
    writeln!(out, "{BENCH_HEADER}").expect("string");
    for r in &rows {
        writeln!(
            out,
            "{},{},{},{:.2},{:.3},{:.3},{:.3},{:.3},{},{},{},{},{},{},{},{}",
            r.suite,
            r.transport,
            r.frames,
            r.fps,
            r.goodput_mbps,
            r.p50,
            r.p95,
            r.p99,
            r.lost,
            r.tag_failures,
            r.loss_percent,
            r.loss_burst,
            opt_pct(r.delivered_percent),
            opt_pct(r.overhead_percent),
            r.fec_recovered,
            r.fec_unrecoverable
        )
        .expect("string");
    }
    if let Some(d) = o.csv.parent().filter(|d| !d.as_os_str().is_empty()) {
        fs::create_dir_all(d)?;
    }
    fs::write(&o.csv, &out)?;
    println!(
        "{:<26} {:<18} {:>6} {:>7} {:>9} {:>8} {:>8} {:>8} {:>5} {:>8} {:>6} {:>10} {:>9}",
        "suite",
        "transport",
        "frames",
        "fps",
        "Mb/s",
        "p50 ms",
        "p95 ms",
        "p99 ms",
        "lost",
        "tag-fail",
        "loss%",
        "delivered%",
        "overhead%"
    );
    for r in &rows {
        let loss = if r.loss_burst > 1.0 {
            format!("{}/b{}", r.loss_percent, r.loss_burst)
        } else {
            format!("{}", r.loss_percent)
        };
        println!(
            "{:<26} {:<18} {:>6} {:>7.1} {:>9.2} {:>8.3} {:>8.3} {:>8.3} {:>5} {:>8} {:>6} {:>10} {:>9}",
            r.suite,
            r.transport,
            r.frames,
            r.fps,
            r.goodput_mbps,
            r.p50,
            r.p95,
            r.p99,
            r.lost,
            r.tag_failures,
            loss,
            opt_pct(r.delivered_percent),
            opt_pct(r.overhead_percent)
        );
    }
    println!("wrote {}", o.csv.display());
    // FEC's added latency: p95 with FEC against the same loss without it (lossless: the same run).
    let p95 = |label: &str, loss: f64| {
        rows.iter()
            .filter(|r| r.delivered_percent.is_some())
            .find(|r| r.transport == label && r.loss_percent == loss)
            .map(|r| r.p95)
    };
    if let (Some(a), Some(b)) = (p95("udp+fec", 0.0), p95("udp", 0.0)) {
        println!(
            "fec latency: p95 {a:.2} ms with FEC, {b:.2} ms without, no loss: {:+.2} ms",
            a - b
        );
    }
    // Headroom: the default suite with the camera unpaced (frames as fast as the drone seals them;
    // the bridge drops whole frames when the receiver falls behind, counted as lost).
    for t in [Transport::Tcp, Transport::Udp] {
        let sec = Security::Secure {
            suite: Suite::ChaCha20Poly1305,
            kex: KexMode::X25519,
        };
        let r = bench_one(&sec, BenchNet::plain(t), frames, 0.0, spi_hz, false)?;
        println!(
            "headroom: {} over {t} with the camera unpaced: {:.1} fps, {:.1} Mb/s, p50 {:.2} ms, p95 {:.2} ms, lost {}",
            r.suite, r.fps, r.goodput_mbps, r.p50, r.p95, r.lost
        );
    }
    Ok(())
}
