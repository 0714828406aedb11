//! `gapstream ground`: one ground station for a swarm. It receives N drones at once, from a fleet
//! file ([`Fleet`]): each drone gets its own receiver ([`crate::receiver::run_shared`]: its own
//! connection, session, handshake, reconnects, rekeys and counters) on a thread of its own, and
//! all of them publish on one bus whose consumers (viewer grid, metrics CSV per drone, MCAP with
//! topics per drone, Zenoh keys per drone, Python) keep their bounded queues per drone.
//!
//! Why a thread per drone and not tokio tasks: the receive path is blocking code (a socket read
//! with a short timeout, then the session's CPU work: AEAD over ~79 KB a frame), so a task per
//! drone would need `spawn_blocking` for the very part that costs; a thread per drone lets the
//! kernel's scheduler share the cores between drones, and whatever one drone's thread meets — a
//! bridge that stalls, resets, sends garbage, a drone that reboots — blocks or busies that thread
//! only. 32 threads that sleep in `recv` most of the time cost a few MiB of stack and nothing of
//! the CPU (`make bench-swarm` measures the process).
//!
//! Fleet file (TOML), paths relative to the file:
//!
//! ```toml
//! [[drone]]
//! name = "alpha"                      # letters, digits, '-', '_': frames, tiles, topics, files
//! address = "192.168.1.31:5000"       # its bridge, or:
//! # id = "A1B2C3D4E5F6"               # found by mDNS (--discover): the deck's MAC (TXT id) or aideck-D4E5F6
//! receiver_key = "keys/alpha/receiver.key"    # this station's key file for it (gapstream pair)
//! drone_public_key = "5f3a..."        # optional: the drone's public key, checked against the key file
//! # stock = true                      # a deck running Bitcraze's stock (plaintext) streamer: no keys
//! ```

use std::collections::BTreeMap;
use std::net::{SocketAddr, ToSocketAddrs};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use gapstream_protocol::handshake::{Identity, Role};

use crate::metrics::Counters;
use crate::receiver::bus::{Consumer, Counts, Note, OutputReport, Policy, Status};
use crate::receiver::{self, Bus, Frame, ReceiverConfig, SessionKind, Summary, Transport};
use crate::run::{self, RunError, Security};

/// Most drones in one fleet.
pub const MAX_DRONES: usize = 64;

/// Where a fleet member's bridge is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Target {
    /// `host:port`.
    Address(String),
    /// Found by mDNS: the deck's MAC as its TXT `id` says it (12 hex digits) or its host name
    /// `aideck-XXXXXX`.
    Discovered(String),
}

/// One `[[drone]]` of a fleet file.
#[derive(Clone, Debug)]
pub struct FleetEntry {
    pub name: String,
    pub target: Target,
    /// The receiver's key file for this drone (None: the stock plaintext stream).
    pub receiver_key: Option<PathBuf>,
    pub drone_public_key: Option<[u8; 32]>,
    pub stock: bool,
}

/// A parsed fleet file.
#[derive(Clone, Debug, Default)]
pub struct Fleet {
    pub drones: Vec<FleetEntry>,
}

/// Why a fleet file was refused: one line naming the file and the drone.
#[derive(Debug, thiserror::Error)]
#[error("fleet {file}: {why}")]
pub struct FleetError {
    pub file: String,
    pub why: String,
}

/// A drone name: 1..=32 of letters, digits, `-`, `_` (a Zenoh key chunk, an MCAP topic level, a
/// file name).
pub fn valid_name(n: &str) -> bool {
    (1..=32).contains(&n.len())
        && n.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}

fn parse_hex32(s: &str) -> Option<[u8; 32]> {
    let s = s.trim();
    if s.len() != 64 {
        return None;
    }
    let mut out = [0u8; 32];
    for (i, o) in out.iter_mut().enumerate() {
        *o = u8::from_str_radix(s.get(2 * i..2 * i + 2)?, 16).ok()?;
    }
    Some(out)
}

/// Normalises a discovered id: a MAC (with or without `:` / `-`) to 12 upper-case hex digits,
/// `aideck-xxxxxx` to `aideck-XXXXXX`.
pub fn normalize_id(id: &str) -> String {
    let t = id.trim();
    if let Some(rest) = t
        .strip_prefix("aideck-")
        .or_else(|| t.strip_prefix("AIDECK-"))
    {
        return format!(
            "aideck-{}",
            rest.trim_end_matches(".local.").to_ascii_uppercase()
        );
    }
    t.chars()
        .filter(|c| *c != ':' && *c != '-')
        .collect::<String>()
        .to_ascii_uppercase()
}

impl Fleet {
    /// Parses a fleet file's text; relative key paths are taken from `base`.
    pub fn parse(text: &str, base: &Path, file: &str) -> Result<Fleet, FleetError> {
        let err = |why: String| FleetError {
            file: file.into(),
            why,
        };
        let table: toml::Table = text.parse().map_err(|e: toml::de::Error| {
            err(e.to_string().lines().next().unwrap_or("").to_string())
        })?;
        for k in table.keys() {
            if k != "drone" {
                return Err(err(format!(
                    "unknown key `{k}` (a fleet is a list of [[drone]] tables)"
                )));
            }
        }
        let list = match table.get("drone") {
            Some(toml::Value::Array(a)) => a.clone(),
            Some(_) => return Err(err("`drone` must be a list of [[drone]] tables".into())),
            None => return Err(err("no [[drone]] in the fleet".into())),
        };
        if list.len() > MAX_DRONES {
            return Err(err(format!("{} drones: at most {MAX_DRONES}", list.len())));
        }
        let mut drones = Vec::new();
        for (i, v) in list.iter().enumerate() {
            let t = v
                .as_table()
                .ok_or_else(|| err(format!("drone {}: not a table", i + 1)))?;
            let name = t
                .get("name")
                .and_then(|v| v.as_str())
                .ok_or_else(|| err(format!("drone {}: no name", i + 1)))?
                .to_string();
            let at = |why: String| err(format!("drone {name:?}: {why}"));
            if !valid_name(&name) {
                return Err(at("a name is 1 to 32 letters, digits, '-' or '_'".into()));
            }
            if drones.iter().any(|d: &FleetEntry| d.name == name) {
                return Err(at("named twice".into()));
            }
            for k in t.keys() {
                if ![
                    "name",
                    "address",
                    "id",
                    "receiver_key",
                    "drone_public_key",
                    "stock",
                ]
                .contains(&k.as_str())
                {
                    return Err(at(format!(
                        "unknown key `{k}` (name, address, id, receiver_key, drone_public_key, stock)"
                    )));
                }
            }
            let s = |k: &str| -> Result<Option<String>, FleetError> {
                match t.get(k) {
                    None => Ok(None),
                    Some(toml::Value::String(s)) => Ok(Some(s.clone())),
                    Some(_) => Err(at(format!("`{k}` must be a string"))),
                }
            };
            let target = match (s("address")?, s("id")?) {
                (Some(a), None) => Target::Address(a),
                (None, Some(id)) => Target::Discovered(normalize_id(&id)),
                (Some(_), Some(_)) => {
                    return Err(at("give either `address` or `id`, not both".into()));
                }
                (None, None) => {
                    return Err(at(
                        "no `address` (host:port of its bridge) and no `id` (its MAC or aideck-XXXXXX, found by --discover)".into(),
                    ));
                }
            };
            let stock = match t.get("stock") {
                None => false,
                Some(toml::Value::Boolean(b)) => *b,
                Some(_) => return Err(at("`stock` must be true or false".into())),
            };
            let receiver_key = s("receiver_key")?.map(|p| base.join(p));
            if receiver_key.is_none() && !stock {
                return Err(at(
                    "no `receiver_key` (this station's key file for it, from gapstream pair; or stock = true for a stock deck)".into(),
                ));
            }
            let drone_public_key = match s("drone_public_key")? {
                None => None,
                Some(h) => Some(
                    parse_hex32(&h)
                        .ok_or_else(|| at("`drone_public_key` must be 64 hex digits".into()))?,
                ),
            };
            drones.push(FleetEntry {
                name,
                target,
                receiver_key,
                drone_public_key,
                stock,
            });
        }
        Ok(Fleet { drones })
    }

    /// Reads and parses a fleet file.
    pub fn load(path: &Path) -> Result<Fleet, FleetError> {
        let text = std::fs::read_to_string(path).map_err(|e| FleetError {
            file: path.display().to_string(),
            why: e.to_string(),
        })?;
        let base = path.parent().unwrap_or(Path::new("."));
        Fleet::parse(&text, base, &path.display().to_string())
    }
}

/// A drone the ground station receives: its name, its bridge, its session.
pub struct Member {
    pub name: String,
    pub bridge: SocketAddr,
    pub session: SessionKind,
    /// The key file (named in the closing diagnosis when the drone refuses it).
    pub keys: Option<PathBuf>,
}

/// The receiver's identity for `e`: the key file's secret, and the drone's public key from the
/// fleet file, which must be the one the key file was paired with.
pub fn identity_for(e: &FleetEntry) -> Result<Option<Identity>, RunError> {
    if e.stock {
        return Ok(None);
    }
    let path = e
        .receiver_key
        .as_ref()
        .ok_or_else(|| RunError::Setup(format!("drone {}: no receiver key", e.name)))?;
    let id = run::load_identity(path, Role::Receiver)
        .map_err(|x| RunError::Setup(format!("drone {}: {x}", e.name)))?;
    if let Some(k) = e.drone_public_key
        && k != id.peer_public
    {
        return Err(RunError::Setup(format!(
            "drone {}: drone_public_key {}.. is not the drone {} was paired with ({}..): wrong key file for this drone?",
            e.name,
            &crate::swarm::hex(&k)[..16],
            path.display(),
            &crate::swarm::hex(&id.peer_public)[..16]
        )));
    }
    Ok(Some(id))
}

/// The fleet's members with an address: resolved, with their sessions. `found` maps discovered
/// ids (normalised MAC and host name) to addresses; members whose id was not found are returned
/// by name in the second list.
pub fn members(
    fleet: &Fleet,
    security: &Security,
    packet_payload: usize,
    found: &BTreeMap<String, SocketAddr>,
) -> Result<(Vec<Member>, Vec<String>), RunError> {
    let mut out = Vec::new();
    let mut missing = Vec::new();
    for e in &fleet.drones {
        let bridge = match &e.target {
            Target::Address(a) => a
                .to_socket_addrs()
                .map_err(|x| RunError::Setup(format!("drone {}: {a}: {x}", e.name)))?
                .next()
                .ok_or_else(|| RunError::Setup(format!("drone {}: {a}: no address", e.name)))?,
            Target::Discovered(id) => match found.get(id) {
                Some(a) => *a,
                None => {
                    missing.push(e.name.clone());
                    continue;
                }
            },
        };
        let sec = if e.stock {
            Security::StockPlaintext
        } else {
            security.clone()
        };
        let session = run::receiver_session(&sec, identity_for(e)?, packet_payload)?;
        out.push(Member {
            name: e.name.clone(),
            bridge,
            session,
            keys: e.receiver_key.clone(),
        });
    }
    Ok((out, missing))
}

/// Every member with a secure session appends its key-log lines to `keylog` (docs/protocol.md
/// §12: one line per epoch and session, the session id telling the drones' lines apart).
pub fn set_keylog(members: &mut [Member], keylog: Option<&Path>) {
    for m in members {
        if let SessionKind::Secure(s) = &mut m.session {
            s.keylog = keylog.map(Path::to_path_buf);
        }
    }
}

/// What every drone's receiver shares.
#[derive(Clone)]
pub struct GroundConfig {
    pub transport: Transport,
    pub duration: Option<Duration>,
    pub stop: Arc<AtomicBool>,
    pub bayer: bool,
    pub idle_timeout: Duration,
}

/// How one drone's receiver ended.
pub struct DroneResult {
    pub name: String,
    pub bridge: SocketAddr,
    pub keys: Option<PathBuf>,
    pub outcome: Result<Summary, String>,
}

/// How the ground station ended: each drone, then the outputs.
pub struct GroundSummary {
    pub drones: Vec<DroneResult>,
    pub outputs: Vec<OutputReport>,
    pub elapsed_s: f64,
}

/// Receives every member at once, each on its own thread, all publishing on `bus`, until the
/// stop flag or the duration; then closes the bus (every output finishes).
pub fn receive(members: Vec<Member>, g: &GroundConfig, bus: Bus) -> GroundSummary {
    let t0 = Instant::now();
    let bus = Arc::new(bus);
    let mut threads = Vec::new();
    for m in members {
        let cfg = ReceiverConfig {
            source: Arc::from(m.name.as_str()),
            bayer: g.bayer,
            stop: g.stop.clone(),
            duration: g.duration,
            idle_timeout: g.idle_timeout,
            ..ReceiverConfig::new(m.bridge, g.transport, m.session)
        };
        let b = bus.clone();
        let t = std::thread::Builder::new()
            .name(format!("rx {}", m.name))
            .spawn(move || receiver::run_shared(cfg, b));
        threads.push((m.name, m.bridge, m.keys, t));
    }
    let mut drones = Vec::new();
    for (name, bridge, keys, t) in threads {
        let outcome = match t {
            Ok(t) => t
                .join()
                .unwrap_or_else(|_| {
                    Err(receiver::ReceiverError::Fatal(
                        "the receiver thread panicked".into(),
                    ))
                })
                .map_err(|e| e.to_string()),
            Err(e) => Err(format!("cannot start its thread: {e}")),
        };
        drones.push(DroneResult {
            name,
            bridge,
            keys,
            outcome,
        });
    }
    let outputs = Arc::try_unwrap(bus).map(Bus::close).unwrap_or_default();
    GroundSummary {
        drones,
        outputs,
        elapsed_s: t0.elapsed().as_secs_f64(),
    }
}

/// The ground station's console: one line a second for the whole fleet (drones streaming, the
/// slowest drone's fps, losses, tag failures, the worst p95), and each drone's diagnostic lines
/// with its name.
pub struct FleetConsole {
    drones: usize,
    status: BTreeMap<String, Arc<Status>>,
    last: Option<Instant>,
    start: Instant,
    pub notes: bool,
}

impl FleetConsole {
    pub fn new(drones: usize, notes: bool) -> Self {
        FleetConsole {
            drones,
            status: BTreeMap::new(),
            last: None,
            start: Instant::now(),
            notes,
        }
    }

    /// The fleet's line now.
    pub fn line(&self) -> String {
        let streaming = self
            .status
            .values()
            .filter(|s| s.connection == "streaming" && s.row.fps > 0.0)
            .count();
        let (mut min_fps, mut worst_p95, mut lost, mut tag) = (f64::INFINITY, 0f64, 0, 0);
        let mut slowest = String::new();
        for s in self.status.values() {
            if s.row.fps < min_fps {
                min_fps = s.row.fps;
                slowest = s.source.clone();
            }
            if let Some(p) = s.row.latency {
                worst_p95 = worst_p95.max(p.p95);
            }
            lost += s.counters.lost;
            tag += s.counters.tag_failures;
        }
        if !min_fps.is_finite() {
            min_fps = 0.0;
        }
        format!(
            "{:>7.1}s  {streaming}/{} drones streaming  slowest {slowest} {min_fps:.1} fps  worst p95 {worst_p95:.1} ms  lost {lost}  tag-fail {tag}",
            self.start.elapsed().as_secs_f64(),
            self.drones
        )
    }
}

impl Consumer for FleetConsole {
    fn name(&self) -> String {
        "console".into()
    }
    fn policy(&self) -> Policy {
        Policy::NoFrames
    }
    fn status(&mut self, s: &Status) -> Result<(), String> {
        self.status.insert(s.source.clone(), Arc::new(s.clone()));
        if s.new_row
            && self
                .last
                .is_none_or(|t| t.elapsed() >= Duration::from_secs(1))
        {
            self.last = Some(Instant::now());
            out!("{}", self.line());
        }
        Ok(())
    }
    fn note(&mut self, n: &Note) -> Result<(), String> {
        if self.notes {
            let kind = if n.error { "error: " } else { "" };
            eprintln!("gapstream {}: {kind}{}", n.source, n.text);
        }
        Ok(())
    }
}

/// The frames per drone a [`Tap`] has seen, with the latency above the link's own time.
#[derive(Clone, Debug, Default)]
pub struct TapStats {
    pub frames: u64,
    /// Delivery time of the first and last frame counted.
    pub first: Option<Instant>,
    pub last: Option<Instant>,
    /// Capture → delivered, minus the frame's time on the simulated SPI link, ms.
    pub above_link_ms: Vec<f64>,
    /// Capture time (the drone's clock) of the first and last frame counted.
    pub first_capture_ns: Option<u64>,
    pub last_capture_ns: Option<u64>,
}

impl TapStats {
    /// The frames the drone's camera skipped between the first and last frame counted: camera
    /// periods elapsed on the drone's clock minus frames delivered. A drone whose loop comes
    /// late skips a capture instead of queueing it ([`crate::sim`]), so with no frame lost a
    /// rate below the camera's is the drone's own shortfall, not the ground station's.
    pub fn camera_skipped(&self, fps: f64) -> u64 {
        match (self.first_capture_ns, self.last_capture_ns) {
            (Some(a), Some(b)) if fps > 0.0 && b >= a && self.frames > 0 => {
                let periods = ((b - a) as f64 * 1e-9 * fps).round() as u64 + 1;
                periods.saturating_sub(self.frames)
            }
            _ => 0,
        }
    }
}

/// A consumer that counts each drone's frames from `from` on (for `make bench-swarm` and the
/// tests): every frame, never waiting long (it only counts).
#[derive(Clone)]
pub struct Tap {
    pub stats: Arc<Mutex<BTreeMap<String, TapStats>>>,
    /// Frames before this instant are not counted (the warm-up).
    pub from: Arc<Mutex<Option<Instant>>>,
    /// The downstream SPI clock the drones were paced with (None: unpaced).
    pub spi_hz: Option<u64>,
    /// The drones' camera rate (for [`TapStats::camera_skipped`]; None: not counted).
    pub fps: Option<f64>,
}

impl Tap {
    pub fn new(spi_hz: Option<u64>, fps: Option<f64>) -> Self {
        Tap {
            stats: Arc::default(),
            from: Arc::default(),
            spi_hz,
            fps,
        }
    }

    /// Starts counting now (forgets what came before).
    pub fn start(&self) {
        *self.from.lock().unwrap_or_else(|e| e.into_inner()) = Some(Instant::now());
        self.stats.lock().unwrap_or_else(|e| e.into_inner()).clear();
    }

    pub fn snapshot(&self) -> BTreeMap<String, TapStats> {
        self.stats.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }
}

/// The time of a sealed frame of `payload` bytes on the simulated SPI link at `hz`: its CPX
/// packets of 1020 bytes of payload (the frame header, the pixels, the tag).
pub fn frame_link_time(payload: usize, hz: u64) -> Duration {
    let wire = 36 + payload + 16;
    let full = wire / 1020;
    let rest = wire - full * 1020;
    let mut t = Duration::ZERO;
    for _ in 0..full {
        t += crate::sim::packet_time(4 + 1020, hz);
    }
    if rest > 0 {
        t += crate::sim::packet_time(4 + rest, hz);
    }
    t
}

impl Consumer for Tap {
    fn name(&self) -> String {
        "tap".into()
    }
    fn policy(&self) -> Policy {
        Policy::Every(4096)
    }
    fn frame(&mut self, f: &Arc<Frame>, _: &Counters) -> Result<(), String> {
        let now = Instant::now();
        if self
            .from
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .is_none_or(|t| now < t)
        {
            return Ok(());
        }
        let mut m = self.stats.lock().unwrap_or_else(|e| e.into_inner());
        let s = m.entry(f.source.to_string()).or_default();
        s.frames += 1;
        s.first.get_or_insert(now);
        s.last = Some(now);
        if let Some(c) = f.capture_ns() {
            s.first_capture_ns.get_or_insert(c);
            s.last_capture_ns = Some(c);
        }
        if let Some(l) = f.latency_ms {
            let link = self
                .spi_hz
                .map(|hz| frame_link_time(f.pixels.len(), hz).as_secs_f64() * 1e3)
                .unwrap_or(0.0);
            s.above_link_ms.push(l - link);
        }
        Ok(())
    }
    fn finish(&mut self, _: &Counts) -> Result<Option<String>, String> {
        Ok(None)
    }
}

/// What `gapstream ground` does besides the fleet.
pub struct GroundOpts {
    pub fleet: Option<PathBuf>,
    /// `--discover`: browse mDNS on these interfaces first.
    pub discover: Option<esp32_bridge::mdns::Interfaces>,
    pub discover_wait: Duration,
    pub security: Security,
    pub packet_payload: usize,
    pub stream: run::StreamSettings,
    /// `make bench-swarm`: write the measured row here (the ground station measures itself).
    pub bench_row: Option<PathBuf>,
    /// Frames in the first this long are not measured (handshakes, start-up).
    pub warmup: Duration,
    /// The drones' SPI clock, for the latency above the link's own time in the bench row.
    pub spi_hz: Option<u64>,
    /// The drones' camera rate, for the frames their cameras skipped in the bench row's window.
    pub fps: Option<f64>,
}

/// The bench row's columns (`make bench-swarm`, `target/bench/swarm.csv`).
pub const SWARM_HEADER: &str = "drones,min_fps,lost,tag_failures,p95_ms,cpu_percent,rss_mb";

/// Peak resident memory of this process in MiB (`VmHWM`).
pub fn peak_rss_mb() -> Option<f64> {
    let s = std::fs::read_to_string("/proc/self/status").ok()?;
    let l = s.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kib: f64 = l.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib / 1024.0)
}

/// Lists what `--discover` found, saying for each deck which fleet member it is (or that it is
/// not one and will not be connected).
fn print_found(found: &[crate::discovery::Found], fleet: &Fleet) {
    out!(
        "gapstream ground: mDNS found {} deck{} (_cpx._tcp):",
        found.len(),
        if found.len() == 1 { "" } else { "s" }
    );
    for f in found {
        let keys = f.keys();
        let member = fleet.drones.iter().find(|d| match &d.target {
            Target::Discovered(id) => keys.contains(id),
            Target::Address(_) => false,
        });
        out!(
            "  {:<16} id {:<12}  {:<21}  {}",
            f.host,
            f.id.as_deref().unwrap_or("-"),
            f.addr.to_string(),
            match member {
                Some(m) => format!("fleet member {}: connecting", m.name),
                None => "not in the fleet: listed, not connected".into(),
            }
        );
    }
}

/// `gapstream ground`: receives every drone of the fleet at once.
pub fn ground(o: GroundOpts, stop: Arc<AtomicBool>) -> Result<(), RunError> {
    let fleet = match &o.fleet {
        Some(p) => Fleet::load(p).map_err(|e| RunError::Setup(e.to_string()))?,
        None if o.discover.is_some() => Fleet::default(),
        None => {
            return Err(RunError::Setup(
                "ground needs --fleet FILE (or --discover to list the decks on the network)".into(),
            ));
        }
    };
    let mut found = BTreeMap::new();
    if let Some(ifs) = &o.discover {
        let wanted: Vec<String> = fleet
            .drones
            .iter()
            .filter_map(|d| match &d.target {
                Target::Discovered(id) => Some(id.clone()),
                Target::Address(_) => None,
            })
            .collect();
        // With a fleet: until every member named by id was found and half a second more for the
        // other decks' answers (or the wait is over); a list
        // alone: the whole wait.
        let decks = crate::discovery::browse(ifs, o.discover_wait, |f| {
            !wanted.is_empty() && {
                let idx = crate::discovery::index(f);
                wanted.iter().all(|w| idx.contains_key(w))
            }
        })
        .map_err(RunError::Setup)?;
        print_found(&decks, &fleet);
        found = crate::discovery::index(&decks);
        if o.fleet.is_none() {
            return Ok(());
        }
    }
    let (mut members, missing) = members(&fleet, &o.security, o.packet_payload, &found)?;
    set_keylog(&mut members, o.stream.keylog.as_deref());
    for m in &missing {
        eprintln!(
            "gapstream ground: warning: drone {m} was not found by mDNS{}; going on without it",
            if o.discover.is_none() {
                " (its fleet entry has an id: pass --discover)"
            } else {
                ""
            }
        );
    }
    if members.is_empty() {
        return Err(RunError::Setup("no fleet member to receive".into()));
    }
    let s = &o.stream;
    let viewer = match &s.viewer {
        Some(a) => Some(run::start_grid_viewer(a, s.bayer, s.viewer_pixels)?),
        None => None,
    };
    let tap = o.bench_row.as_ref().map(|_| Tap::new(o.spi_hz, o.fps));
    let bus = fleet_bus(&viewer, s, members.len(), tap.as_ref())?;
    out!(
        "gapstream ground: {} drone{} over {} ({})",
        members.len(),
        if members.len() == 1 { "" } else { "s" },
        s.transport,
        members
            .first()
            .map(|m| m.session.label())
            .unwrap_or_default()
    );
    for m in &members {
        out!("  {:<16} {}", m.name, m.bridge);
    }
    if let Some((_, v)) = &viewer {
        out!(
            "  viewer   {}   (a tile per drone; click one for full size; Ctrl-C stops)",
            v.url()
        );
    }
    let g = GroundConfig {
        transport: s.transport,
        duration: s.duration,
        stop: stop.clone(),
        bayer: s.bayer,
        idle_timeout: Duration::from_secs(3),
    };
    let n = members.len();
    // The measurement window of a bench row: from the end of the warm-up to the end.
    let window = tap.as_ref().map(|t| {
        let (t, w, st) = (t.clone(), o.warmup, stop.clone());
        std::thread::spawn(move || {
            let t0 = Instant::now();
            while t0.elapsed() < w && !st.load(Ordering::Relaxed) {
                std::thread::sleep(Duration::from_millis(50));
            }
            t.start();
            (Instant::now(), crate::metrics::ProcSampler::new())
        })
    });
    let sum = receive(members, &g, bus);
    let measured = window
        .and_then(|w| w.join().ok())
        .map(|(t0, mut cpu)| (t0.elapsed().as_secs_f64(), cpu.cpu_percent().unwrap_or(0.0)));
    print_ground_summary(&sum);
    if let (Some(path), Some(tap), Some((secs, cpu))) = (&o.bench_row, &tap, measured) {
        let snap = tap.snapshot();
        let row = bench_row(n, &sum, &snap, secs, cpu);
        let skipped: u64 = o
            .fps
            .map_or(0, |fps| snap.values().map(|t| t.camera_skipped(fps)).sum());
        // The row, then what the drones' cameras skipped (bench-swarm prints it next to the row).
        std::fs::write(
            path,
            format!("{SWARM_HEADER}\n{row}\ncamera_skipped,{skipped}\n"),
        )?;
    }
    if sum
        .drones
        .iter()
        .all(|d| d.outcome.as_ref().map_or(true, |x| x.counters.frames == 0))
    {
        let why: Vec<String> = sum
            .drones
            .iter()
            .map(|d| match &d.outcome {
                Err(e) => format!("{}: {e}", d.name),
                Ok(x) => format!(
                    "{}: {}",
                    d.name,
                    x.diagnosis
                        .clone()
                        .unwrap_or_else(|| "is its bridge / drone running?".into())
                ),
            })
            .collect();
        return Err(RunError::NoFrames {
            secs: sum.elapsed_s,
            why: why.join("; "),
        });
    }
    Ok(())
}

/// One row of `target/bench/swarm.csv` from what the ground station saw in its window.
fn bench_row(
    n: usize,
    sum: &GroundSummary,
    tap: &BTreeMap<String, TapStats>,
    secs: f64,
    cpu: f64,
) -> String {
    let mut min_fps = f64::INFINITY;
    let mut all: Vec<f64> = Vec::new();
    for d in &sum.drones {
        let fps = tap
            .get(&d.name)
            .map(|t| t.frames as f64 / secs.max(1e-9))
            .unwrap_or(0.0);
        min_fps = min_fps.min(fps);
        if let Some(t) = tap.get(&d.name) {
            all.extend_from_slice(&t.above_link_ms);
        }
    }
    let (mut lost, mut tag) = (0, 0);
    for d in &sum.drones {
        if let Ok(x) = &d.outcome {
            lost += x.counters.lost;
            tag += x.counters.tag_failures;
        }
    }
    let p95 = crate::metrics::Percentiles::of(&mut all).map_or(f64::NAN, |p| p.p95);
    format!(
        "{n},{:.2},{lost},{tag},{p95:.2},{cpu:.1},{:.1}",
        if min_fps.is_finite() { min_fps } else { 0.0 },
        peak_rss_mb().unwrap_or(0.0)
    )
}

/// The closing lines: one per drone, the outputs' own lines.
pub fn print_ground_summary(sum: &GroundSummary) {
    for o in &sum.outputs {
        if let Some(l) = &o.closing {
            out!("gapstream ground: {l}");
        }
        if let Some(l) = &o.shortfall {
            out!("gapstream ground: {l}");
        }
    }
    for d in &sum.drones {
        match &d.outcome {
            Ok(x) => {
                run::print_summary(&format!("gapstream {}", d.name), x);
                if x.counters.frames == 0
                    && let Some(why) = &x.diagnosis
                {
                    let why = match &d.keys {
                        Some(k) => why.replace(
                            "this receiver's key",
                            &format!("the receiver key {}", k.display()),
                        ),
                        None => why.clone(),
                    };
                    eprintln!("gapstream {}: warning: no frame: {why}", d.name);
                }
            }
            Err(e) => eprintln!("gapstream {}: error: {e}", d.name),
        }
    }
}

/// The ground station's outputs: the fleet console, the viewer grid, metrics CSV per drone,
/// MCAP with topics per drone, Zenoh keys per drone, the bench tap.
fn fleet_bus(
    viewer: &Option<(Arc<crate::viewer::ViewerState>, crate::viewer::Viewer)>,
    s: &run::StreamSettings,
    drones: usize,
    tap: Option<&Tap>,
) -> Result<Bus, RunError> {
    let mut bus = Bus::new();
    bus.attach(Box::new(FleetConsole::new(drones, true)));
    if let Some((st, _)) = viewer {
        bus.attach(Box::new(crate::viewer::ViewerOutput(st.clone())));
    }
    if let Some(p) = &s.metrics {
        bus.attach(Box::new(
            crate::receiver::outputs::MetricsCsv::per_drone(p, crate::sim::unix_ns())
                .map_err(RunError::Setup)?,
        ));
    }
    if let Some(p) = &s.mcap {
        bus.attach(Box::new(
            crate::mcap_out::McapRecorder::create_fleet(p, s.bayer).map_err(RunError::Setup)?,
        ));
    }
    if let Some(z) = &s.zenoh {
        #[cfg(feature = "zenoh")]
        {
            bus.attach(Box::new(
                crate::zenoh_out::ZenohPublisher::open_fleet(z.endpoint.as_deref(), s.bayer)
                    .map_err(RunError::Setup)?,
            ));
            out!(
                "  zenoh    publishing gapstream/<drone>/image, frame_info, stats for every drone ({}; plaintext inside Zenoh)",
                z.endpoint
                    .as_deref()
                    .map(|e| format!("connected to {e}"))
                    .unwrap_or_else(|| "peer".into())
            );
        }
        #[cfg(not(feature = "zenoh"))]
        return Err(RunError::Setup(format!(
            "--zenoh ({:?}): this gapstream was built without Zenoh; build it with `cargo build --release -p gapstream --features zenoh`",
            z.endpoint
        )));
    }
    if let Some(t) = tap {
        bus.attach(Box::new(t.clone()));
    }
    Ok(bus)
}

/// `gapstream swarm`: `n` simulated drones, each with its own bridge and keys, until stopped; the
/// fleet file for a ground station in another process goes to `dir/fleet.toml`. With
/// `advertise`, each bridge is announced over mDNS like a stock deck (`aideck-XXXXXX`).
#[allow(clippy::too_many_arguments)]
pub fn swarm_cmd(
    n: usize,
    node: run::NodeSettings,
    bridge: &run::BridgeSettings,
    dir: &Path,
    udp: bool,
    advertise: Option<esp32_bridge::mdns::Interfaces>,
    duration: Option<Duration>,
    stop: Arc<AtomicBool>,
) -> Result<(), RunError> {
    check_drones(n)?;
    let swarm = crate::swarm::Swarm::start_with(n, &node, bridge)?;
    let ads = advertise_swarm(&swarm, advertise.as_ref())?;
    let late = swarm.wait_links(Duration::from_secs(5));
    if !late.is_empty() {
        eprintln!(
            "gapstream swarm: not linked to their bridges after 5 s: {}",
            late.join(", ")
        );
    }
    let fleet = swarm.write_fleet(dir, udp)?;
    out!(
        "gapstream swarm: {n} simulated drone{} {}, each with its own bridge and keys; fleet in {} (Ctrl-C stops)",
        if n == 1 { "" } else { "s" },
        run::camera_rate(node.fps),
        fleet.display()
    );
    out!("  {}", bridge.describe_swarm(n));
    for (d, ad) in swarm
        .drones
        .iter()
        .zip(ads.iter().map(Some).chain(std::iter::repeat(None)))
    {
        out!(
            "  {:<10} bridge TCP {}{}",
            d.name,
            d.tcp_addr,
            ad.map(|a| format!(", mDNS {} id {}", a.host, crate::swarm::mac_id(&d.mac)))
                .unwrap_or_default()
        );
    }
    let t0 = Instant::now();
    while !stop.load(Ordering::Relaxed) && duration.is_none_or(|d| t0.elapsed() < d) {
        std::thread::sleep(Duration::from_millis(100));
    }
    drop(ads);
    let dropped = bridge_drops(&swarm);
    let reports = swarm.stop();
    let sent: u64 = reports
        .iter()
        .filter_map(|(_, r)| r.as_ref())
        .map(|r| r.drone.frames_sent)
        .sum();
    out!("gapstream swarm: stopped; {sent} frames sent in all");
    print_drone_reports("gapstream swarm", &reports, &dropped);
    Ok(())
}

/// Frames each drone's bridge dropped for its slow receivers so far, by drone.
fn bridge_drops(swarm: &crate::swarm::Swarm) -> Vec<u64> {
    swarm
        .drones
        .iter()
        .map(|d| d.bridge_stats().map_or(0, |s| s.frames_dropped))
        .collect()
}

/// One line per simulated drone: frames sent, the captures its camera skipped (the drone was late
/// for them: its link held back, under the WiFi model by its bridge's full queue, or short of
/// CPU) and the frames its bridge dropped.
fn print_drone_reports(
    who: &str,
    reports: &[(String, Option<crate::sim::NodeReport>)],
    dropped: &[u64],
) {
    for ((name, r), dropped) in reports.iter().zip(dropped) {
        if let Some(r) = r {
            out!(
                "{who}: {name} sent {} frames, its camera skipped {} captures (late for them: its link held back, or the CPU busy), its bridge dropped {dropped} for slow receivers",
                r.drone.frames_sent,
                r.camera_skipped
            );
        }
    }
}

fn check_drones(n: usize) -> Result<(), RunError> {
    if !(1..=MAX_DRONES).contains(&n) {
        return Err(RunError::Setup(format!("--drones {n}: 1 to {MAX_DRONES}")));
    }
    Ok(())
}

fn advertise_swarm(
    swarm: &crate::swarm::Swarm,
    ifs: Option<&esp32_bridge::mdns::Interfaces>,
) -> Result<Vec<esp32_bridge::mdns::Advertisement>, RunError> {
    let Some(ifs) = ifs else {
        return Ok(Vec::new());
    };
    swarm
        .drones
        .iter()
        .map(|d| {
            esp32_bridge::mdns::Advertisement::start(
                &d.mac,
                d.tcp_addr.ip(),
                d.tcp_addr.port(),
                ifs,
            )
            .map_err(RunError::Setup)
        })
        .collect()
}

/// `gapstream demo --drones N`: N simulated drones with their bridges and a ground station with
/// the grid viewer, in one process. The bridges are announced over mDNS on the loopback
/// interface, so `gapstream ground --discover --mdns-interface lo` in another terminal lists them.
pub fn demo_swarm(
    n: usize,
    node: run::NodeSettings,
    s: run::StreamSettings,
    bridge: &run::BridgeSettings,
    keys_dir: Option<&Path>,
    stop: Arc<AtomicBool>,
) -> Result<(), RunError> {
    check_drones(n)?;
    let swarm = crate::swarm::Swarm::start_with(n, &node, bridge)?;
    let ads = match advertise_swarm(&swarm, Some(&esp32_bridge::mdns::Interfaces::Loopback)) {
        Ok(a) => a,
        Err(e) => {
            eprintln!("gapstream demo: {e}; the bridges are not announced over mDNS");
            Vec::new()
        }
    };
    let late = swarm.wait_links(Duration::from_secs(5));
    if !late.is_empty() {
        eprintln!(
            "gapstream demo: not linked to their bridges after 5 s: {}",
            late.join(", ")
        );
    }
    if let Some(d) = keys_dir {
        let f = swarm.write_fleet(d, s.transport == Transport::Udp)?;
        out!(
            "  fleet    {} (the pairings under {}/keys/)",
            f.display(),
            d.display()
        );
    }
    let mut members = swarm
        .drones
        .iter()
        .map(|d| {
            Ok(Member {
                name: d.name.clone(),
                bridge: match s.transport {
                    Transport::Udp => d.udp_addr.unwrap_or(d.tcp_addr),
                    Transport::Tcp => d.tcp_addr,
                },
                session: run::receiver_session(
                    &node.security,
                    Some(d.receiver.clone()),
                    node.packet_payload,
                )?,
                keys: None,
            })
        })
        .collect::<Result<Vec<_>, RunError>>()?;
    set_keylog(&mut members, s.keylog.as_deref());
    let viewer = match &s.viewer {
        Some(a) => Some(run::start_grid_viewer(a, s.bayer, s.viewer_pixels)?),
        None => None,
    };
    let bus = fleet_bus(&viewer, &s, n, None)?;
    out!(
        "gapstream demo: {n} simulated drones, each with its own ESP32 bridge and pairing -> one ground station, all on this machine"
    );
    out!(
        "  drones   synthetic 324x244 {} with its name burned in, SPI paced like the AI-deck's link, sealed by the single-core kernels",
        run::camera_rate(node.fps)
    );
    out!("  bridges  {}", bridge.describe_swarm(n));
    if !ads.is_empty() {
        out!(
            "  mDNS     {} ... {} announced on the loopback interface (_cpx._tcp; gapstream ground --discover --mdns-interface lo)",
            ads[0].host,
            ads[ads.len() - 1].host
        );
    }
    if let Some((_, v)) = &viewer {
        out!(
            "  viewer   {}   (a tile per drone; click one for full size; Ctrl-C stops)",
            v.url()
        );
    }
    let g = GroundConfig {
        transport: s.transport,
        duration: s.duration,
        stop: stop.clone(),
        bayer: s.bayer,
        idle_timeout: Duration::from_secs(3),
    };
    let sum = receive(members, &g, bus);
    drop(ads);
    let dropped = bridge_drops(&swarm);
    let reports = swarm.stop();
    print_ground_summary(&sum);
    print_drone_reports("gapstream demo", &reports, &dropped);
    if sum
        .drones
        .iter()
        .all(|d| d.outcome.as_ref().map_or(true, |x| x.counters.frames == 0))
    {
        return Err(RunError::NoFrames {
            secs: sum.elapsed_s,
            why: "no drone delivered a frame".into(),
        });
    }
    Ok(())
}

/// CPU seconds (user + system) of process `pid` so far.
fn cpu_seconds_of(pid: u32) -> Option<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = &stat[stat.rfind(')')? + 2..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    let u: f64 = f.get(11)?.parse().ok()?;
    let s: f64 = f.get(12)?.parse().ok()?;
    Some((u + s) / 100.0)
}

/// `make bench-swarm`: for each drone count, the simulated drones in one process (`gapstream
/// swarm`) and the ground station in another (`gapstream ground`), which measures itself over
/// `secs` after `warmup`: the slowest drone's fps, frames lost, tag failures, p95 of the latency
/// above the SPI link's own time, its CPU (100 = one core) and peak memory. Writes `csv`.
pub fn bench_swarm(
    counts: &[usize],
    secs: f64,
    warmup: f64,
    fps: f64,
    spi_hz: u64,
    csv: &Path,
) -> Result<(), RunError> {
    let exe = std::env::current_exe()?;
    let tmp = std::env::temp_dir().join(format!("gapstream-bench-swarm-{}", std::process::id()));
    let mut rows = Vec::new();
    out!(
        "gapstream bench-swarm: drones {} at {fps} fps, SPI paced at {spi_hz} Hz, no WiFi model (the ground station is measured); the drones and their bridges in one process, the ground station in another; {warmup} s warm-up, {secs} s measured",
        counts
            .iter()
            .map(|n| n.to_string())
            .collect::<Vec<_>>()
            .join(", ")
    );
    for &n in counts {
        let dir = tmp.join(format!("n{n}"));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir)?;
        let total = warmup + secs;
        let mut sim = std::process::Command::new(&exe)
            .args(["swarm", "--drones", &n.to_string(), "--dir"])
            .arg(&dir)
            .args(["--fps", &fps.to_string(), "--spi-hz", &spi_hz.to_string()])
            // The ground station is measured, not the WiFi: the bridges forward as fast as the
            // sockets go (as `make bench-stream`).
            .args(["--wifi-mbps", "0"])
            .args(["--duration", &format!("{}", total + 30.0)])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()?;
        let fleet = dir.join("fleet.toml");
        let t0 = Instant::now();
        while !fleet.exists() && t0.elapsed() < Duration::from_secs(60) {
            std::thread::sleep(Duration::from_millis(100));
        }
        if !fleet.exists() {
            let _ = sim.kill();
            return Err(RunError::Setup(format!(
                "{n} drones: the swarm wrote no fleet file in 60 s"
            )));
        }
        let row = dir.join("row.csv");
        let sim_cpu0 = cpu_seconds_of(sim.id());
        let g0 = Instant::now();
        let ground = std::process::Command::new(&exe)
            .args(["ground", "--fleet"])
            .arg(&fleet)
            .args(["--viewer", "none", "--duration", &total.to_string()])
            .args([
                "--warmup",
                &warmup.to_string(),
                "--spi-hz",
                &spi_hz.to_string(),
                "--camera-fps",
                &fps.to_string(),
                "--bench-row",
            ])
            .arg(&row)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped())
            .output()?;
        let wall = g0.elapsed().as_secs_f64();
        let sim_cpu = match (sim_cpu0, cpu_seconds_of(sim.id())) {
            (Some(a), Some(b)) => (b - a) / wall * 100.0,
            _ => f64::NAN,
        };
        // SIGTERM: the swarm stops its drones and bridges.
        // SAFETY: kill(2) on the pid of a child this process spawned and has not reaped yet.
        unsafe {
            libc::kill(sim.id() as libc::pid_t, libc::SIGTERM);
        }
        let _ = sim.wait();
        let text = std::fs::read_to_string(&row).map_err(|e| {
            RunError::Setup(format!(
                "{n} drones: the ground station wrote no row ({e}); it said: {}",
                String::from_utf8_lossy(&ground.stderr)
                    .lines()
                    .rev()
                    .take(3)
                    .collect::<Vec<_>>()
                    .join(" | ")
            ))
        })?;
        let line = text.lines().nth(1).unwrap_or("").to_string();
        let skipped = text
            .lines()
            .find_map(|l| l.strip_prefix("camera_skipped,"))
            .unwrap_or("?")
            .to_string();
        out!(
            "  {n:>2} drones: {line}   (drones + bridges: {sim_cpu:.0} % CPU, their cameras skipped {skipped} frames)"
        );
        rows.push((line, sim_cpu, skipped));
    }
    let _ = std::fs::remove_dir_all(&tmp);
    if let Some(d) = csv.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(d)?;
    }
    let mut out = format!("{SWARM_HEADER}\n");
    for (l, _, _) in &rows {
        out.push_str(l);
        out.push('\n');
    }
    std::fs::write(csv, &out)?;
    println!(
        "{:>6} {:>8} {:>5} {:>8} {:>7} {:>9} {:>7}   drones+bridges cpu_%  camera_skipped",
        "drones", "min_fps", "lost", "tag_fail", "p95_ms", "cpu_%", "rss_mb",
    );
    for (l, sim, skipped) in &rows {
        let f: Vec<&str> = l.split(',').collect();
        if f.len() == 7 {
            println!(
                "{:>6} {:>8} {:>5} {:>8} {:>7} {:>9} {:>7}   {sim:>20.0}  {skipped:>14}",
                f[0], f[1], f[2], f[3], f[4], f[5], f[6]
            );
        }
    }
    println!("wrote {}", csv.display());
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const OK: &str = r#"
[[drone]]
name = "alpha"
address = "127.0.0.1:5000"
receiver_key = "keys/alpha/receiver.key"
drone_public_key = "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff"

[[drone]]
name = "bravo_2"
id = "a1:b2:c3:d4:e5:f6"
receiver_key = "/abs/receiver.key"

[[drone]]
name = "stocky"
id = "aideck-d4e5f6"
stock = true
"#;

    #[test]
    fn a_fleet_file_is_read() {
        let f = Fleet::parse(OK, Path::new("/base"), "f.toml").unwrap();
        assert_eq!(f.drones.len(), 3);
        let a = &f.drones[0];
        assert_eq!(a.target, Target::Address("127.0.0.1:5000".into()));
        assert_eq!(
            a.receiver_key.as_deref(),
            Some(Path::new("/base/keys/alpha/receiver.key"))
        );
        assert_eq!(a.drone_public_key.unwrap()[1], 0x11);
        assert_eq!(
            f.drones[1].target,
            Target::Discovered("A1B2C3D4E5F6".into())
        );
        assert_eq!(
            f.drones[1].receiver_key.as_deref(),
            Some(Path::new("/abs/receiver.key"))
        );
        assert_eq!(
            f.drones[2].target,
            Target::Discovered("aideck-D4E5F6".into())
        );
        assert!(f.drones[2].stock && f.drones[2].receiver_key.is_none());
    }

    #[test]
    fn mistakes_are_named_with_the_drone() {
        let cases = [
            ("[[drone]]\nname='a'\naddress='x:1'\n", "no `receiver_key`"),
            ("[[drone]]\nname='a'\nreceiver_key='k'\n", "no `address`"),
            (
                "[[drone]]\nname='a'\naddress='x:1'\nid='y'\nreceiver_key='k'\n",
                "either `address` or `id`",
            ),
            (
                "[[drone]]\nname='a b'\naddress='x:1'\nreceiver_key='k'\n",
                "a name is",
            ),
            (
                "[[drone]]\nname='a'\naddres='x:1'\nreceiver_key='k'\n",
                "unknown key `addres`",
            ),
            (
                "[[drone]]\nname='a'\naddress='x:1'\nreceiver_key='k'\n[[drone]]\nname='a'\naddress='x:2'\nreceiver_key='k'\n",
                "named twice",
            ),
            (
                "[[drone]]\nname='a'\naddress='x:1'\nreceiver_key='k'\ndrone_public_key='12'\n",
                "64 hex digits",
            ),
            ("[drone]\nname='a'\n", "list of [[drone]]"),
            ("", "no [[drone]]"),
            ("[[drone]\n", "fleet f.toml"),
        ];
        for (text, want) in cases {
            let e = Fleet::parse(text, Path::new("."), "f.toml").unwrap_err();
            let m = e.to_string();
            assert!(
                m.contains(want) && m.starts_with("fleet f.toml: "),
                "{text:?}: {m}"
            );
            if want != "fleet f.toml" && want != "no [[drone]]" && want != "list of [[drone]]" {
                assert!(m.contains("drone \"a"), "{m}");
            }
        }
    }

    #[test]
    fn ids_are_normalised() {
        assert_eq!(normalize_id("a1-b2-c3-d4-e5-f6"), "A1B2C3D4E5F6");
        assert_eq!(normalize_id("aideck-0a0b0c.local."), "aideck-0A0B0C");
    }

    /// Camera periods on the drone's clock minus frames delivered.
    #[test]
    fn camera_skips_are_counted_from_capture_times() {
        let p = 1_000_000_000 / 30;
        let t = |frames, first: u64, last: u64| TapStats {
            frames,
            first_capture_ns: Some(first),
            last_capture_ns: Some(last),
            ..TapStats::default()
        };
        // 301 frames 10 s apart at 30 fps: none skipped.
        assert_eq!(t(301, 5, 5 + 300 * p).camera_skipped(30.0), 0);
        // 290 of those delivered (no loss): the camera skipped 11.
        assert_eq!(t(290, 5, 5 + 300 * p).camera_skipped(30.0), 11);
        // Capture jitter of a third of a period changes nothing.
        assert_eq!(t(301, 5, 5 + 300 * p + p / 3).camera_skipped(30.0), 0);
        assert_eq!(TapStats::default().camera_skipped(30.0), 0);
        assert_eq!(t(1, 7, 7).camera_skipped(30.0), 0);
    }

    /// A 324 x 244 frame sealed with a 16-byte tag: 78 packets, about 23.6 ms at 30 MHz.
    #[test]
    fn the_link_time_of_a_frame_is_the_simulated_links() {
        let t = frame_link_time(324 * 244, crate::sim::SPI_HZ).as_secs_f64() * 1e3;
        assert!((23.0..24.5).contains(&t), "{t}");
    }
}
