//! The CLI's composite runs: `demo` (node + bridge + receiver + viewer in one process), `view`,
//! `node`, and `bench` (every suite and transport on localhost).

use std::fmt::Write as _;
use std::fs;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use esp32_bridge::host::{HostBridge, HostConfig};
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
    pub bayer: bool,
    pub record: Option<PathBuf>,
    /// ROS 2 MCAP recording of every verified frame (see [`crate::mcap_out`]).
    pub mcap: Option<PathBuf>,
    /// The frame ids of the drone's state (MCAP's Odometry and tf).
    pub state_frames: crate::ros::StateFrames,
    /// Publish every verified frame on Zenoh (feature `zenoh`).
    pub zenoh: Option<ZenohSettings>,
    /// The drone's name: every frame's source (`--drone`; the Zenoh key chunk too).
    pub source: String,
    /// The receiver's key file, named in the closing diagnosis when the drone refuses it.
    pub keys: Option<PathBuf>,
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
/// (`receiver.key`, `receiver2.key`, ...) into `dir`.
pub fn pair(dir: &Path, receivers: usize, force: bool) -> Result<(), RunError> {
    if !(1..=handshake::MAX_RECEIVER_KEYS).contains(&receivers) {
        return Err(RunError::Setup(format!(
            "--receivers {receivers}: a drone can be paired with 1 to {} receivers",
            handshake::MAX_RECEIVER_KEYS
        )));
    }
    fs::create_dir_all(dir).map_err(|e| {
        RunError::Setup(format!(
            "cannot create the key folder {}: {e}",
            dir.display()
        ))
    })?;
    let (d, rs) = fresh_group(receivers)?;
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
    println!(
        "paired: drone public key {}.., receiver public key{} {}",
        fp(&d.local.public()),
        if receivers > 1 { "s" } else { "" },
        rx.join(", ")
    );
    let names: Vec<String> = (0..receivers)
        .map(|i| dir.join(receiver_key_name(i)).display().to_string())
        .collect();
    println!(
        "wrote {} (flash it into the drone) and {} (one per receiver, keep each on its receiver)",
        dir.join("drone.key").display(),
        names.join(", ")
    );
    Ok(())
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
            })))
        }
    }
}

/// The drone's mode for `security` with `identity`. The simulated drone accepts every suite, so
/// the receiver's choice decides (a real drone's policy accepts only the authenticated ones).
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
        Security::Secure { .. } => {
            let identity = identity.ok_or_else(|| {
                RunError::Setup(
                    "the secure stream needs the drone's key file (--keys, from gapstream pair)"
                        .into(),
                )
            })?;
            let mut s = session::DroneConfig::default();
            s.policy.suites = SuiteSet::all();
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
}

fn start_viewer(addr: &str, bayer: bool) -> Result<(Arc<ViewerState>, Viewer), RunError> {
    let state = ViewerState::new(bayer);
    let v = match Viewer::start(addr, state.clone()) {
        Ok(v) => v,
        Err(e) if addr.starts_with("127.0.0.1:") => {
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
pub fn start_bridge(verbose: bool) -> Result<HostBridge, RunError> {
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
        ..HostConfig::default()
    };
    match HostBridge::start(cfg.clone()) {
        Ok(b) => Ok(b),
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

fn print_summary(who: &str, s: &Summary) {
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
            eprintln!("{who}: {l}");
        }
        if let Some(l) = &o.shortfall {
            eprintln!("{who}: {l}");
        }
    }
    eprintln!(
        "{who}: {} frames in {:.1} s ({:.1} fps), {lat}; lost {}, tag failures {}, replays {}, malformed {}, without key {}, handshakes {}, rekeys {}, connections {}",
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
            eprintln!(
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
    let (drone_id, rx_ids) = fresh_group(receivers)?;
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
        .map(|id| receiver_session(&node.security, Some(id), node.packet_payload))
        .collect::<Result<Vec<_>, _>>()?
        .into_iter();
    let session = sessions.next().expect("at least the leader");
    let mode = drone_mode_with(&node.security, Some(drone_id), node.rekey)?;
    let bridge = start_bridge(listeners.count > 0)?;
    let viewer = match &s.viewer {
        Some(a) => Some(start_viewer(a, s.bayer)?),
        None => None,
    };
    let bus = receiver_bus(&viewer, &s)?;
    let source = FrameSource::open(&node.source).map_err(|e| RunError::Setup(e.to_string()))?;
    let (w, h) = (source.width(), source.height());
    eprintln!("gapstream demo: simulated drone -> ESP32 bridge -> receiver, all on this machine");
    eprintln!(
        "  bridge   SPI side {}, TCP {}, UDP {} (holds no key)",
        bridge.spi_addr,
        bridge.tcp_addr,
        bridge
            .udp_addr
            .map(|u| u.to_string())
            .unwrap_or_else(|| "off".into())
    );
    eprintln!(
        "  drone    {} {w}x{h} {}, CPX packets of {} bytes, SPI {}",
        match node.source {
            SourceSpec::Synthetic { .. } => "synthetic pattern",
            SourceSpec::Folder(_) => "image folder",
            SourceSpec::Raw { .. } => "raw file",
        },
        camera_rate(node.fps),
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
    eprintln!(
        "  session  {} over {} (pairing made for this run)",
        session.label(),
        s.transport
    );
    if listeners.count > 0 {
        eprintln!(
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
        eprintln!(
            "  viewer   {}   (open it in a browser; Ctrl-C stops)",
            v.url()
        );
    }
    if let (Some(dir), Some(first)) = (keys_dir, spare.first()) {
        eprintln!(
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
    if listeners.count > 0 {
        eprintln!(
            "gapstream: drone: {} handshakes, {} receivers left, {} group keys acknowledged",
            rep.drone.handshakes, rep.drone.receivers_left, rep.drone.rekeys_acked
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
        Some(a) => Some(start_viewer(a, s.bayer)?),
        None => None,
    };
    let bus = receiver_bus(&viewer, &s)?;
    // `gapstream record DIR` is `view` with a recorder: it says which it is.
    let who = if s.record.is_some() || s.mcap.is_some() {
        "record"
    } else {
        "view"
    };
    eprintln!(
        "gapstream {who}: receiving from {bridge} over {} ({})",
        s.transport,
        session.label()
    );
    if let Some(d) = &s.record {
        eprintln!(
            "  record   every verified frame into {}/frame_NNNNNNNN.png (NNNNNNNN: the frame number burned into the image when it has one, else the stream's sequence number)",
            d.display()
        );
    }
    if let Some((_, v)) = &viewer {
        eprintln!("  viewer   {}   (Ctrl-C stops)", v.url());
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
    eprintln!(
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
    eprintln!(
        "gapstream node: {} frames captured, {} sent, {} skipped (no receiver), {} bytes; {} handshakes, {} bytes dropped while the bridge was away, {} reconnects",
        r.drone.frames_captured,
        r.drone.frames_sent,
        r.drone.frames_skipped,
        r.drone.bytes_sent,
        r.drone.handshakes,
        r.link.bytes_dropped,
        r.link.reconnects
    );
    match r.error {
        Some(e) => Err(RunError::Node(e)),
        None => Ok(()),
    }
}

/// One bench result row.
#[derive(Clone, Debug)]
pub struct BenchRow {
    pub suite: String,
    pub transport: Transport,
    pub frames: u64,
    pub fps: f64,
    pub goodput_mbps: f64,
    pub p50: f64,
    pub p95: f64,
    pub p99: f64,
    pub lost: u64,
    pub tag_failures: u64,
}

/// The bench CSV header.
pub const BENCH_HEADER: &str = "suite,transport,frames,fps,goodput_mbps,latency_p50_ms,latency_p95_ms,latency_p99_ms,lost,tag_failures";

/// Streams `frames` frames of 324x244 through node -> bridge -> receiver on localhost and
/// measures what the receiver delivers.
pub fn bench_one(
    security: &Security,
    transport: Transport,
    frames: u64,
    fps: f64,
    spi_hz: Option<u64>,
) -> Result<BenchRow, RunError> {
    let (drone_id, rx_id) = fresh_pairing()?;
    let session = receiver_session(security, Some(rx_id), 1020)?;
    let mode = drone_mode(security, Some(drone_id.into()))?;
    let any: SocketAddr = "127.0.0.1:0".parse().expect("static");
    let bridge = HostBridge::start(HostConfig {
        spi_listen: any,
        tcp_listen: any,
        udp_listen: Some(any),
        ..HostConfig::default()
    })?;
    let mut bus = Bus::new();
    let rx = bus.subscribe("bench", Policy::Every(4096));
    let stop = Arc::new(AtomicBool::new(false));
    let addr = match transport {
        Transport::Tcp => bridge.tcp_addr,
        Transport::Udp => bridge.udp_addr.expect("bound above"),
    };
    let st = stop.clone();
    let recv = std::thread::spawn(move || {
        let cfg = ReceiverConfig {
            stop: st,
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
    let source = FrameSource::open(&SourceSpec::Synthetic {
        width: 324,
        height: 244,
        bayer: false,
    })
    .map_err(|e| RunError::Setup(e.to_string()))?;
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
        frames: None,
        engine: ENGINE,
        flight: None,
    })
    .map_err(RunError::Node)?;
    let mut lat = Vec::new();
    let mut first: Option<Instant> = None;
    let mut last = Instant::now();
    let mut got = 0u64;
    let mut bytes = 0u64;
    let deadline =
        Instant::now() + Duration::from_secs_f64(frames as f64 / fps.max(1.0) * 3.0 + 10.0);
    while got < frames && Instant::now() < deadline {
        if let Some(d) = rx.frame(Duration::from_millis(200)) {
            let now = Instant::now();
            first.get_or_insert(now);
            last = now;
            got += 1;
            bytes += d.pixels.len() as u64;
            if let Some(c) = d.capture_ns() {
                lat.push(sim::unix_ns().saturating_sub(c) as f64 / 1e6);
            }
        }
        if node.is_finished() {
            break;
        }
    }
    let rep = node.stop();
    stop.store(true, Ordering::Relaxed);
    let summary = recv
        .join()
        .map_err(|_| RunError::Setup("receiver thread panicked".into()))??;
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
    Ok(BenchRow {
        suite: security.name(),
        transport,
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
    })
}

/// `gapstream bench`: every suite and transport; prints a table and writes the CSV.
pub fn bench(frames: u64, fps: f64, spi_hz: Option<u64>, csv: &Path) -> Result<(), RunError> {
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
            let r = bench_one(sec, t, frames, fps, spi_hz)?;
            eprintln!(
                "  {:<26} {t}: {} frames, {:.1} fps, p95 {:.2} ms",
                r.suite, r.frames, r.fps, r.p95
            );
            rows.push(r);
        }
    }
    let mut out = String::new();
    writeln!(out, "{BENCH_HEADER}").expect("string");
    for r in &rows {
        writeln!(
            out,
            "{},{},{},{:.2},{:.3},{:.3},{:.3},{:.3},{},{}",
            r.suite,
            r.transport,
            r.frames,
            r.fps,
            r.goodput_mbps,
            r.p50,
            r.p95,
            r.p99,
            r.lost,
            r.tag_failures
        )
        .expect("string");
    }
    if let Some(d) = csv.parent().filter(|d| !d.as_os_str().is_empty()) {
        fs::create_dir_all(d)?;
    }
    fs::write(csv, &out)?;
    println!(
        "{:<26} {:<9} {:>6} {:>7} {:>9} {:>8} {:>8} {:>8} {:>5} {:>8}",
        "suite",
        "transport",
        "frames",
        "fps",
        "Mb/s",
        "p50 ms",
        "p95 ms",
        "p99 ms",
        "lost",
        "tag-fail"
    );
    for r in &rows {
        println!(
            "{:<26} {:<9} {:>6} {:>7.1} {:>9.2} {:>8.3} {:>8.3} {:>8.3} {:>5} {:>8}",
            r.suite,
            r.transport.to_string(),
            r.frames,
            r.fps,
            r.goodput_mbps,
            r.p50,
            r.p95,
            r.p99,
            r.lost,
            r.tag_failures
        );
    }
    println!("wrote {}", csv.display());
    // Headroom: the default suite with the camera unpaced (frames as fast as the drone seals them;
    // the bridge drops whole frames when the receiver falls behind, counted as lost).
    for t in [Transport::Tcp, Transport::Udp] {
        let sec = Security::Secure {
            suite: Suite::ChaCha20Poly1305,
            kex: KexMode::X25519,
        };
        let r = bench_one(&sec, t, frames, 0.0, spi_hz)?;
        println!(
            "headroom: {} over {t} with the camera unpaced: {:.1} fps, {:.1} Mb/s, p50 {:.2} ms, p95 {:.2} ms, lost {}",
            r.suite, r.fps, r.goodput_mbps, r.p50, r.p95, r.lost
        );
    }
    Ok(())
}
