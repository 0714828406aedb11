//! `gapstream`: the receiver CLI (live viewer, recording, metrics, reports) and the host simulation
//! of the whole chain (`gapstream demo`). See the crate's lib.rs for the module map.

use std::net::{SocketAddr, ToSocketAddrs};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use clap::{Args, Parser, Subcommand};

use gapstream::images::SourceSpec;
use gapstream::receiver::Transport;
use gapstream::run::{self, Security, StreamSettings};
use gapstream_protocol::handshake::Role;
use gapstream_protocol::suite::{KexMode, Suite};

#[derive(Parser)]
#[command(
    name = "gapstream",
    version,
    about = "Authenticated, encrypted camera streaming for GAP8 nano-drones: receiver, viewer, metrics and the host simulation"
)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Simulated drone -> ESP32 bridge -> receiver on this machine, with the live viewer.
    Demo(DemoArgs),
    /// Receive from a bridge (a real AI-deck's ESP32, or `esp32-bridge`) and show the live viewer.
    View(ViewArgs),
    /// Receive and save every verified frame as PNG into DIR, and/or as ROS 2 MCAP with --mcap FILE.
    Record {
        /// Folder for frame_NNNNNNNN.png files (optional with --mcap).
        dir: Option<PathBuf>,
        #[command(flatten)]
        view: ViewArgs,
    },
    /// Pair a drone with its receivers: writes DIR/drone.key and DIR/receiver.key (and
    /// receiver2.key, ... with --receivers N).
    Pair {
        /// Folder for the key files.
        #[arg(long, default_value = "keys")]
        dir: PathBuf,
        /// Receivers the drone accepts (1..=8), each with its own key file; several may watch at
        /// once (a leader and listeners).
        #[arg(long, default_value_t = 1)]
        receivers: usize,
        /// The last K of the receivers watch only: they get every frame, but the drone refuses
        /// their requests to change the stream (SET_QUALITY).
        #[arg(long, value_name = "K", default_value_t = 0)]
        watchers: usize,
        /// Replace an existing pairing.
        #[arg(long)]
        force: bool,
    },
    /// Turn a metrics CSV into PNG plots (fps, goodput, latency CDF, tag failures).
    Report {
        /// A metrics CSV written with --metrics.
        csv: PathBuf,
        /// Folder for the plots (default: next to the CSV, `<stem>_plots`).
        #[arg(long)]
        out: Option<PathBuf>,
    },
    /// Run only the simulated drone node, streaming into a bridge's SPI-side socket.
    Node(NodeArgs),
    /// Measure fps, goodput and latency per suite and transport on localhost; writes a CSV.
    Bench(BenchArgs),
    /// A ground station: receive every drone of a fleet file at once (a tile per drone in the
    /// viewer, metrics / MCAP / Zenoh per drone); --discover finds decks by mDNS.
    Ground(GroundArgs),
    /// N simulated drones on this machine, each with its own bridge and keys, for a ground station
    /// in another process (writes DIR/fleet.toml).
    Swarm(SwarmArgs),
    /// The ground station measured with 1, 4, 8, 16, 32 simulated drones; writes target/bench/swarm.csv.
    BenchSwarm(BenchSwarmArgs),
}

#[derive(Args, Clone)]
struct GroundArgs {
    /// The fleet file (TOML, one [[drone]] per deck: name, address or id, receiver_key,
    /// drone_public_key).
    #[arg(long)]
    fleet: Option<PathBuf>,
    /// Find decks by mDNS first (_cpx._tcp, as the stock firmware and gapstream's bridges
    /// announce them): every deck found is listed, only the fleet's members are connected.
    #[arg(long)]
    discover: bool,
    /// How long --discover listens at most (it stops half a second after every member named by id is found).
    #[arg(long, default_value_t = 3.0, value_parser = seconds_above_zero)]
    discover_secs: f64,
    /// Where mDNS is spoken: `all` interfaces, `lo` (decks on this machine only), or an interface name.
    #[arg(long, default_value = "all")]
    mdns_interface: String,
    /// CPX payload bytes per packet for what the receivers send.
    #[arg(long, value_parser = ["128", "256", "512", "1020"], default_value = "1020")]
    packet_size: String,
    #[command(flatten)]
    security: SecurityOpts,
    /// Transport between the bridges and the ground station.
    #[arg(long, value_parser = ["tcp", "udp"], default_value = "tcp")]
    transport: String,
    /// Stop after this many seconds (default: until Ctrl-C).
    #[arg(long, value_parser = seconds_above_zero)]
    duration: Option<f64>,
    /// Metrics CSV per drone: FILE with -<drone> before the extension (run.csv: run-alpha.csv, ...).
    #[arg(long)]
    metrics: Option<PathBuf>,
    /// Where the viewer (a grid of tiles) listens (`none` to disable).
    #[arg(long, default_value = "127.0.0.1:8080")]
    viewer: String,
    /// The viewer sends JPEG frames as the receivers' decoded samples (half size in the tiles)
    /// instead of the verified JPEG files that the page decodes itself.
    #[arg(long)]
    viewer_pixels: bool,
    /// Debugging aid, off by default: every drone's receiver appends one line per key epoch
    /// (frame key and iv, control keys; its session id tells the drones apart) to FILE, like
    /// TLS's SSLKEYLOGFILE, so an independent tool can open a capture (see docs/protocol.md §12).
    /// Whoever reads the file reads every drone's stream.
    #[arg(long, value_name = "FILE", env = "GAPSTREAM_KEYLOGFILE")]
    keylog: Option<PathBuf>,
    /// The cameras are colour HM01B0s (RGGB mosaics).
    #[arg(long)]
    bayer: bool,
    /// Record every drone's verified frames into one ROS 2 MCAP file, on /<drone>/image and
    /// /<drone>/frame_info.
    #[arg(long, value_name = "FILE")]
    mcap: Option<PathBuf>,
    /// Publish every drone's verified frames on Zenoh under gapstream/<drone>/ (feature `zenoh`).
    #[arg(long, value_name = "ENDPOINT", num_args = 0..=1, default_missing_value = "")]
    zenoh: Option<String>,
    /// (make bench-swarm) write the measured row to FILE.
    #[arg(long, hide = true)]
    bench_row: Option<PathBuf>,
    /// (make bench-swarm) seconds not measured at the start.
    #[arg(long, hide = true, default_value_t = 0.0)]
    warmup: f64,
    /// (make bench-swarm) the drones' SPI clock, for the latency above the link's own time.
    #[arg(long, hide = true)]
    spi_hz: Option<u64>,
    /// (make bench-swarm) the drones' camera rate, for the frames their cameras skipped.
    #[arg(long, hide = true)]
    camera_fps: Option<f64>,
}

#[derive(Args, Clone)]
struct SwarmArgs {
    /// How many simulated drones (each with its own bridge and pairing).
    #[arg(long, default_value_t = 4)]
    drones: usize,
    /// Where the fleet file and the pairings go (DIR/fleet.toml, DIR/keys/<drone>/).
    #[arg(long, default_value = "target/swarm")]
    dir: PathBuf,
    #[command(flatten)]
    source: SourceOpts,
    #[command(flatten)]
    security: SecurityOpts,
    /// The fleet file lists the bridges' UDP addresses instead of TCP.
    #[arg(long)]
    udp: bool,
    /// Announce every bridge over mDNS like a stock deck (aideck-XXXXXX) on these interfaces
    /// (`lo`: this machine only; `all`; or an interface name).
    #[arg(long, value_name = "INTERFACES")]
    mdns: Option<String>,
    /// Stop after this many seconds (default: until Ctrl-C).
    #[arg(long, value_parser = seconds_above_zero)]
    duration: Option<f64>,
    #[command(flatten)]
    bridge: BridgeOpts,
}

#[derive(Args, Clone)]
struct BenchSwarmArgs {
    /// Drone counts, one row each.
    #[arg(long, default_value = "1,4,8,16,32", value_delimiter = ',')]
    counts: Vec<usize>,
    /// Seconds measured per count.
    #[arg(long, default_value_t = 10.0, value_parser = seconds_above_zero)]
    seconds: f64,
    /// Seconds of warm-up (handshakes) before measuring.
    #[arg(long, default_value_t = 4.0, value_parser = seconds_above_zero)]
    warmup: f64,
    /// Camera frame rate of every drone.
    #[arg(long, default_value_t = 30.0, value_parser = frame_rate)]
    fps: f64,
    /// The drones' SPI clock in Hz (the AI-deck's link, as the demo).
    #[arg(long, default_value_t = gapstream::sim::SPI_HZ)]
    spi_hz: u64,
    /// Output CSV.
    #[arg(long, default_value = "target/bench/swarm.csv")]
    csv: PathBuf,
}

#[derive(Args, Clone)]
struct SecurityOpts {
    /// Frame suite (`none` = encryption off, for A/B latency; the unauthenticated ones detect NO tampering).
    #[arg(long, default_value = "chacha20poly1305", value_parser = ["chacha20poly1305", "aes128gcm", "chacha20", "aes128ctr", "none"])]
    suite: String,
    /// Encryption off (same as --suite none).
    #[arg(long)]
    no_encryption: bool,
    /// Key establishment inside the Noise_KK handshake.
    #[arg(long, default_value = "x25519", value_parser = ["x25519", "p256", "rsa2048"])]
    kex: String,
    /// Bitcraze's stock plaintext 0xBC stream instead of gapstream's protocol (no security at all;
    /// for a deck running the stock firmware).
    #[arg(long)]
    stock: bool,
}

impl SecurityOpts {
    fn security(&self) -> Result<Security, String> {
        if self.stock {
            return Ok(Security::StockPlaintext);
        }
        let suite = if self.no_encryption {
            Suite::None
        } else {
            Suite::from_name(&self.suite).ok_or("unknown suite")?
        };
        let kex = KexMode::from_name(&self.kex).ok_or("unknown key-establishment mode")?;
        Ok(Security::Secure { suite, kex })
    }
}

#[derive(Args, Clone)]
struct StreamOpts {
    /// Transport between bridge and receiver.
    #[arg(long, value_parser = ["tcp", "udp"], default_value = "tcp")]
    transport: String,
    /// Stop after this many seconds (default: until Ctrl-C).
    #[arg(long, value_parser = seconds_above_zero, allow_negative_numbers = true)]
    duration: Option<f64>,
    /// Metrics CSV written every 0.5 s (a per-frame log `<stem>.frames.csv` goes next to it).
    #[arg(long)]
    metrics: Option<PathBuf>,
    /// Where the live viewer listens: HOST:PORT, port 0 for any free port, or `none` (no viewer).
    /// When the default 127.0.0.1:8080 is taken a free port is used instead (and printed); any
    /// other address that cannot be served is an error.
    #[arg(long, default_value = run::DEFAULT_VIEWER, value_parser = viewer_address)]
    viewer: String,
    /// The viewer sends JPEG frames as the receiver's decoded samples (as JPEG-LS and raw frames)
    /// instead of the verified JPEG file that the page decodes itself.
    #[arg(long)]
    viewer_pixels: bool,
    /// The camera is the colour HM01B0: demosaic its RGGB frames in the viewer and recordings.
    #[arg(long)]
    bayer: bool,
    /// Record every verified frame into FILE as ROS 2 MCAP (sensor_msgs/msg/Image on
    /// /gapstream/image, gapstream_msgs/msg/FrameInfo on /gapstream/frame_info, and the drone's
    /// state as nav_msgs/msg/Odometry on /gapstream/odometry and tf2_msgs/msg/TFMessage on /tf):
    /// Foxglove opens it, `ros2 bag play` replays it.
    #[arg(long, value_name = "FILE")]
    mcap: Option<PathBuf>,
    /// The fixed frame of the drone's pose (Odometry header.frame_id, the tf parent).
    #[arg(long, default_value = "world")]
    world_frame: String,
    /// The drone's body frame (Odometry child_frame_id, the tf child).
    #[arg(long, default_value = "crazyflie")]
    body_frame: String,
    /// Publish every verified frame on Zenoh (gapstream/<drone>/image as a CDR sensor_msgs/msg/Image,
    /// .../frame_info, .../stats): as a peer, or connecting to ENDPOINT (tcp/HOST:PORT). The stream
    /// is plaintext inside Zenoh: beyond one machine use Zenoh's TLS and access control. Needs a
    /// gapstream built with `--features zenoh`.
    #[arg(long, value_name = "ENDPOINT", num_args = 0..=1, default_missing_value = "")]
    zenoh: Option<String>,
    /// The drone's name: the source every frame carries, and the <drone> part of the Zenoh key
    /// expressions.
    #[arg(long, default_value = "aideck")]
    drone: String,
    /// Over UDP: ask the bridge for forward error correction (parity packets that rebuild lost
    /// ones; docs/stream.md). A bridge without it sends the plain stream.
    #[arg(long)]
    fec: bool,
}

/// What the host bridges of `demo` and `swarm` model (docs/stream.md, "The WiFi model and lossy UDP").
#[derive(Args, Clone)]
struct BridgeOpts {
    /// The bridge's WiFi side in Mbit/s, shared by all receivers, with backpressure to the SPI
    /// side: 10, what an AI-deck measured over its stock TCP path (Espressif's in-air best cases:
    /// 20 TCP, 30 UDP). 0: as fast as the sockets go.
    #[arg(long, default_value_t = 10.0, value_parser = mbps)]
    wifi_mbps: f64,
    /// The SPI side waits while every receiver has this many KiB queued.
    #[arg(long, default_value_t = 32)]
    wifi_queue_kib: usize,
    /// A swarm (--drones N, gapstream swarm): the bridges are on one access point and share its
    /// channel's airtime, this many Mbit/s for all of them together: 20, Espressif's in-air TCP
    /// figure for one ESP32 (30 for UDP). 0: each bridge on a channel of its own.
    #[arg(long, default_value_t = esp32_bridge::netsim::CHANNEL_MBPS, value_parser = mbps)]
    wifi_channel_mbps: f64,
    /// Lose UDP datagrams on the bridge's way out: PERCENT (independent) or PERCENT:BURST (bursts
    /// of BURST datagrams on average, Gilbert-Elliott), e.g. 5 or 10:4.
    #[arg(long, value_name = "PERCENT[:BURST]")]
    udp_loss: Option<String>,
    /// Seed of the UDP loss (the same seed loses the same datagrams).
    #[arg(long, default_value_t = 1)]
    udp_loss_seed: u64,
    /// FEC data packets per block.
    #[arg(long, default_value_t = 40)]
    fec_k: u8,
    /// FEC block size with parity: n - k parity packets per k data packets.
    #[arg(long, default_value_t = 50)]
    fec_n: u16,
    /// A FEC block of single-packet messages closes this long after its first packet (ms).
    #[arg(long, default_value_t = 5)]
    fec_timeout_ms: u32,
    /// Adaptive FEC: parity per k follows the receiver's loss reports between FLOOR and CEILING,
    /// e.g. 2:40.
    #[arg(long, value_name = "FLOOR:CEILING")]
    fec_adaptive: Option<String>,
}

impl BridgeOpts {
    fn settings(&self) -> Result<run::BridgeSettings, String> {
        let udp_loss = self
            .udp_loss
            .as_deref()
            .map(|s| esp32_bridge::netsim::LossModel::parse(s, self.udp_loss_seed))
            .transpose()?;
        Ok(run::BridgeSettings {
            wifi: (self.wifi_mbps > 0.0).then_some(esp32_bridge::netsim::WifiModel {
                mbps: self.wifi_mbps,
                queue_bytes: self.wifi_queue_kib.max(1) * 1024,
            }),
            channel_mbps: (self.wifi_channel_mbps > 0.0).then_some(self.wifi_channel_mbps),
            udp_loss,
            fec: esp32_bridge::fec::FecConfig::from_cli(
                true,
                self.fec_k,
                self.fec_n,
                self.fec_timeout_ms,
                self.fec_adaptive.as_deref(),
            )?,
        })
    }
}

/// Mbit/s: 0 (unpaced) or a positive rate.
fn mbps(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(v) if v.is_finite() && (0.0..=100_000.0).contains(&v) => Ok(v),
        _ => Err("must be a rate in Mbit/s (0: unpaced)".into()),
    }
}

#[derive(Args, Clone)]
struct ViewArgs {
    /// The bridge: a real AI-deck (192.168.4.1:5000) or `esp32-bridge`.
    #[arg(long, default_value = "127.0.0.1:5000")]
    connect: String,
    /// The receiver's key file from `gapstream pair`.
    #[arg(long, default_value = "keys/receiver.key")]
    keys: PathBuf,
    /// CPX payload bytes per packet for what the receiver sends.
    #[arg(long, value_parser = ["128", "256", "512", "1020"], default_value = "1020")]
    packet_size: String,
    /// Debugging aid, off by default: append one line per key epoch (frame key and iv, control
    /// keys) to FILE, like TLS's SSLKEYLOGFILE, so an independent tool can open a capture (see
    /// docs/protocol.md §12). Whoever reads the file reads the stream.
    #[arg(long, value_name = "FILE", env = "GAPSTREAM_KEYLOGFILE")]
    keylog: Option<PathBuf>,
    /// Ask the drone to code its JPEG frames at this quality (1..=100), over the session's
    /// authenticated control channel, from the next frame on (again after every re-handshake).
    #[arg(long, value_parser = clap::value_parser!(u8).range(1..=100))]
    quality: Option<u8>,
    #[command(flatten)]
    security: SecurityOpts,
    #[command(flatten)]
    stream: StreamOpts,
}

#[derive(Args, Clone)]
struct SourceOpts {
    /// Frames per second of the simulated camera (0: as fast as possible).
    #[arg(long, default_value_t = 30.0, value_parser = frame_rate, allow_negative_numbers = true)]
    fps: f64,
    /// Frame source: `synthetic`, a folder of PGM/PNG images, or `raw:FILE:WIDTHxHEIGHT`.
    #[arg(long, default_value = "synthetic")]
    source: String,
    /// CPX payload bytes per packet.
    #[arg(long, value_parser = ["128", "256", "512", "1020"], default_value = "1020")]
    packet_size: String,
    /// Downstream SPI clock of the GAP8 -> ESP32 link in Hz, frames with MISO ignored (0: no
    /// pacing, measures the software chain). The lengths of each transaction and what the ESP32
    /// sends go at 7.06 MHz, under the AI-deck's 7.2 MHz MISO limit, as in the firmware.
    #[arg(long, default_value_t = gapstream::sim::SPI_HZ)]
    spi_hz: u64,
    /// The drone starts a new key epoch after this many frames...
    #[arg(long, default_value_t = 10_000)]
    rekey_frames: u64,
    /// ...or after this many seconds, whichever comes first.
    #[arg(long, default_value_t = 60.0, value_parser = seconds_above_zero, allow_negative_numbers = true)]
    rekey_secs: f64,
    /// Compress, then seal: how the drone codes each frame before sealing it (`jpeg`: baseline
    /// greyscale JPEG at --quality; `jpegls`: lossless JPEG-LS, grey or Bayer).
    #[arg(long, value_enum, default_value_t = gapstream::codec::Codec::Raw)]
    codec: gapstream::codec::Codec,
    /// JPEG quality 1..=100 (IJG scale) for `--codec jpeg`.
    #[arg(long, default_value_t = gapstream::codec::DEFAULT_QUALITY, value_parser = clap::value_parser!(u8).range(1..=100))]
    quality: u8,
    /// Target-bytes mode (`--codec jpeg`): the drone picks each next frame's quality (5 up to
    /// --quality) so that frames stay near this many bytes, and a busy scene keeps the frame rate.
    #[arg(long, value_name = "BYTES", value_parser = clap::value_parser!(u64).range(256..=1_000_000))]
    target_bytes: Option<u64>,
    /// Length-hiding padding of coded frames (inside the AEAD; raw frames are never padded):
    /// `padme` (default: under 6.25 % more bytes), `pow2`, `max` (the raw frame's length), `off`.
    #[arg(long, value_enum, default_value_t = gapstream::codec::Pad::default())]
    pad: gapstream::codec::Pad,
}

impl SourceOpts {
    fn rekey(&self) -> run::Rekey {
        run::Rekey {
            after_frames: self.rekey_frames,
            after: Duration::from_secs_f64(self.rekey_secs.max(0.001)),
        }
    }
}

#[derive(Args, Clone)]
struct DemoArgs {
    #[command(flatten)]
    source: SourceOpts,
    #[command(flatten)]
    security: SecurityOpts,
    #[command(flatten)]
    stream: StreamOpts,
    #[command(flatten)]
    bridge: BridgeOpts,
    /// Save every verified frame as PNG into this folder.
    #[arg(long)]
    record: Option<PathBuf>,
    /// Listeners next to the receiver with the viewer (0..=7): more receivers of the same drone,
    /// each with its own key and handshake, all opening the same frames.
    #[arg(long, default_value_t = 0)]
    listeners: usize,
    /// Write this run's pairing into DIR (drone.key, receiver.key, receiver2.key, ... up to 8
    /// receivers), so `gapstream view --keys DIR/receiverN.key` or `gapstream record` can attach to
    /// the running demo with a spare receiver key (the demo prints which).
    #[arg(long, value_name = "DIR")]
    keys_dir: Option<PathBuf>,
    /// The listeners leave after this many seconds (the drone rekeys; the viewer's stream goes on).
    #[arg(long, value_parser = seconds_above_zero, allow_negative_numbers = true)]
    listeners_leave_after: Option<f64>,
    /// A swarm: N simulated drones (1..=64), each with its own bridge, keys and its name burned
    /// into its pictures, received by one ground station (the viewer shows a tile per drone).
    #[arg(long, default_value_t = 0)]
    drones: usize,
    /// Debugging aid, off by default: every receiver of the run appends one line per key epoch
    /// (frame key and iv, control keys) to FILE, like TLS's SSLKEYLOGFILE, so an independent tool
    /// can open a capture (see docs/protocol.md §12). Whoever reads the file reads the stream.
    #[arg(long, value_name = "FILE", env = "GAPSTREAM_KEYLOGFILE")]
    keylog: Option<PathBuf>,
}

#[derive(Args, Clone)]
struct NodeArgs {
    /// The bridge's SPI-side socket.
    #[arg(long, default_value = "127.0.0.1:5100")]
    bridge: String,
    /// The drone's key file from `gapstream pair`.
    #[arg(long, default_value = "keys/drone.key")]
    keys: PathBuf,
    #[command(flatten)]
    security: SecurityOpts,
    #[command(flatten)]
    source: SourceOpts,
    /// Stop after this many seconds.
    #[arg(long, value_parser = seconds_above_zero, allow_negative_numbers = true)]
    duration: Option<f64>,
}

#[derive(Args, Clone)]
struct BenchArgs {
    /// Frames per suite and transport.
    #[arg(long, default_value_t = 300)]
    frames: u64,
    /// Camera frame rate of the runs (0: as fast as possible).
    #[arg(long, default_value_t = 60.0, value_parser = frame_rate, allow_negative_numbers = true)]
    fps: f64,
    /// SPI clock in Hz (0, the default: unpaced, the software chain is measured).
    #[arg(long, default_value_t = 0)]
    spi_hz: u64,
    /// Output CSV.
    #[arg(long, default_value = "target/bench/stream.csv")]
    csv: PathBuf,
    /// Frames of each loss run (udp, udp+fec and udp+fec-adaptive at 0, 1, 5 and 10 % loss, the
    /// 10 % in bursts of 4), distinct and checked byte for byte; 0: no loss runs.
    #[arg(long, default_value_t = 1800)]
    loss_frames: u64,
    /// Camera frame rate of the loss runs.
    #[arg(long, default_value_t = 30.0, value_parser = frame_rate)]
    loss_fps: f64,
}

/// A number of seconds above 0 (a duration of 0 would stop before anything ran; leave the option
/// out to run until Ctrl-C).
fn seconds_above_zero(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(v) if v.is_finite() && v > 0.0 && v < 1e9 => Ok(v),
        Ok(_) => {
            Err("must be a number of seconds above 0 (leave it out to run until Ctrl-C)".into())
        }
        Err(_) => Err("not a number of seconds".into()),
    }
}

/// `--viewer`: `none`, or an address to listen on (HOST:PORT, resolved now so that a typo is an
/// error before anything starts, for `demo`, `view` and `record` alike).
fn viewer_address(s: &str) -> Result<String, String> {
    if s == "none" {
        return Ok(s.into());
    }
    let why = match s.to_socket_addrs().map(|mut a| a.next()) {
        Ok(Some(_)) => return Ok(s.into()),
        Ok(None) => "no address".to_string(),
        Err(e) => e.to_string(),
    };
    Err(format!(
        "{why}: give HOST:PORT (e.g. 127.0.0.1:8080; port 0: any free port) or `none`"
    ))
}

/// Frames per second: above 0, or 0 for "as fast as possible".
fn frame_rate(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(v) if v.is_finite() && (0.0..=10_000.0).contains(&v) => Ok(v),
        Ok(_) => Err("must be between 0 (as fast as possible) and 10000 frames per second".into()),
        Err(_) => Err("not a number of frames per second".into()),
    }
}

/// The simulated drone's settings from the CLI's options.
fn node_settings(
    src: &SourceOpts,
    sec: &SecurityOpts,
    bayer: bool,
) -> Result<run::NodeSettings, String> {
    Ok(run::NodeSettings {
        source: source_spec(&src.source, bayer)?,
        fps: src.fps,
        packet_payload: src.packet_size.parse().map_err(|_| "bad packet size")?,
        spi_hz: (src.spi_hz > 0).then_some(src.spi_hz),
        security: sec.security()?,
        rekey: src.rekey(),
        codec: src.codec,
        quality: src.quality,
        target_bytes: src.target_bytes.map(|t| t as usize),
        padding: src.pad.padding(),
    })
}

fn resolve(s: &str) -> Result<SocketAddr, String> {
    s.to_socket_addrs()
        .map_err(|e| format!("{s}: {e}"))?
        .next()
        .ok_or_else(|| format!("{s}: no address"))
}

fn source_spec(s: &str, bayer: bool) -> Result<SourceSpec, String> {
    if s == "synthetic" {
        return Ok(SourceSpec::Synthetic {
            width: 324,
            height: 244,
            bayer,
        });
    }
    if let Some(rest) = s.strip_prefix("raw:") {
        let (file, dims) = rest
            .rsplit_once(':')
            .ok_or("raw source is raw:FILE:WIDTHxHEIGHT")?;
        let (w, h) = dims
            .split_once('x')
            .ok_or("raw source is raw:FILE:WIDTHxHEIGHT")?;
        let w = w.parse().map_err(|_| format!("bad width {w:?}"))?;
        let h = h.parse().map_err(|_| format!("bad height {h:?}"))?;
        return Ok(SourceSpec::Raw {
            path: file.into(),
            width: w,
            height: h,
        });
    }
    Ok(SourceSpec::Folder(s.into()))
}

fn settings(stream: &StreamOpts) -> Result<StreamSettings, String> {
    Ok(StreamSettings {
        transport: if stream.transport == "udp" {
            Transport::Udp
        } else {
            Transport::Tcp
        },
        duration: stream.duration.map(Duration::from_secs_f64),
        metrics: stream.metrics.clone(),
        viewer: (stream.viewer != "none").then(|| stream.viewer.clone()),
        viewer_pixels: stream.viewer_pixels,
        bayer: stream.bayer,
        record: None,
        mcap: stream.mcap.clone(),
        state_frames: gapstream::ros::StateFrames {
            world: stream.world_frame.clone(),
            body: stream.body_frame.clone(),
        },
        zenoh: stream.zenoh.as_ref().map(|e| run::ZenohSettings {
            endpoint: (!e.is_empty()).then(|| e.clone()),
            drone: stream.drone.clone(),
        }),
        keylog: None,
        source: stream.drone.clone(),
        keys: None,
        fec: stream.fec,
    })
}

/// The key log's warning, on standard error when a receiver starts with one (not into the file).
fn warn_keylog(f: &std::path::Path) {
    eprintln!(
        "gapstream: key log ON: every epoch's keys go to {} (a debugging aid: whoever reads it reads the stream)",
        f.display()
    );
}

fn view_session(a: &ViewArgs) -> Result<gapstream::receiver::SessionKind, String> {
    let security = a.security.security()?;
    let id = match security {
        Security::StockPlaintext => None,
        _ => Some(run::load_identity(&a.keys, Role::Receiver).map_err(|e| e.to_string())?),
    };
    let packet: usize = a.packet_size.parse().map_err(|_| "bad packet size")?;
    let mut session = run::receiver_session(&security, id, packet).map_err(|e| e.to_string())?;
    if let (gapstream::receiver::SessionKind::Secure(s), Some(f)) = (&mut session, &a.keylog) {
        warn_keylog(f);
        s.keylog = Some(f.clone());
    }
    match (&mut session, a.quality) {
        (gapstream::receiver::SessionKind::Secure(s), q) => s.quality = q,
        (_, Some(_)) => return Err("--quality needs the secure stream (not --stock)".into()),
        _ => {}
    }
    Ok(session)
}

/// Ctrl-C / SIGTERM set the flag; everything then winds down and the summary is printed. The
/// signals are handled on one thread only: every other thread (the receiver's socket reads, the
/// bridge, the drone) has them blocked, so no system call elsewhere is cut short by one. A second
/// Ctrl-C, or a stop that takes longer than [`STOP_GRACE`], ends the process at once (status 130).
fn stop_on_signal(stop: Arc<AtomicBool>) {
    std::thread::spawn(move || {
        let Ok(rt) = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
        else {
            return;
        };
        rt.block_on(async {
            use tokio::signal::unix::{SignalKind, signal};
            let mut int = signal(SignalKind::interrupt()).ok();
            let mut term = signal(SignalKind::terminate()).ok();
            next_signal(&mut int, &mut term).await;
            stop.store(true, Ordering::Relaxed);
            let why = tokio::select! {
                _ = next_signal(&mut int, &mut term) => "second signal".to_string(),
                _ = tokio::time::sleep(STOP_GRACE) => {
                    format!("still stopping after {} s", STOP_GRACE.as_secs())
                }
            };
            eprintln!("gapstream: {why}: exiting at once");
            std::process::exit(130);
        });
    });
    block_stop_signals_here();
}

/// The next SIGINT or SIGTERM (a signal that could not be registered never comes).
async fn next_signal(
    int: &mut Option<tokio::signal::unix::Signal>,
    term: &mut Option<tokio::signal::unix::Signal>,
) {
    async fn one(s: &mut Option<tokio::signal::unix::Signal>) {
        match s {
            Some(s) => {
                s.recv().await;
            }
            None => std::future::pending().await,
        }
    }
    tokio::select! {
        _ = one(int) => {}
        _ = one(term) => {}
    }
}

/// How long a stop may take before the process exits anyway.
const STOP_GRACE: Duration = Duration::from_secs(5);

/// Blocks SIGINT and SIGTERM in the calling thread and in every thread it spawns afterwards (the
/// signal thread above was spawned before, so it alone receives them).
fn block_stop_signals_here() {
    // SAFETY: `set` is a local sigset_t initialised by sigemptyset before use; pthread_sigmask
    // only changes the calling thread's mask and reads `set`; a null old-set pointer is allowed.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, libc::SIGINT);
        libc::sigaddset(&mut set, libc::SIGTERM);
        libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut());
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let stop = Arc::new(AtomicBool::new(false));
    stop_on_signal(stop.clone());
    let r = match cli.cmd {
        Cmd::Demo(a) => (|| {
            let mut s = settings(&a.stream)?;
            s.record = a.record.clone();
            let security = a.security.security()?;
            if let (Security::Secure { .. }, Some(f)) = (&security, &a.keylog) {
                warn_keylog(f);
                s.keylog = Some(f.clone());
            }
            if a.drones > 0 {
                if a.listeners > 0 || a.record.is_some() {
                    return Err("--drones: without --listeners and --record (the ground station records with --mcap / --metrics)".into());
                }
                let node = node_settings(&a.source, &a.security, a.stream.bayer)?;
                return gapstream::ground::demo_swarm(
                    a.drones,
                    node,
                    s,
                    &a.bridge.settings()?,
                    a.keys_dir.as_deref(),
                    stop,
                )
                .map_err(|e| e.to_string());
            }
            let node = run::NodeSettings {
                source: source_spec(&a.source.source, a.stream.bayer)?,
                fps: a.source.fps,
                packet_payload: a
                    .source
                    .packet_size
                    .parse()
                    .map_err(|_| "bad packet size")?,
                spi_hz: (a.source.spi_hz > 0).then_some(a.source.spi_hz),
                security,
                rekey: a.source.rekey(),
                codec: a.source.codec,
                quality: a.source.quality,
                target_bytes: a.source.target_bytes.map(|t| t as usize),
                padding: a.source.pad.padding(),
            };
            let listeners = run::Listeners {
                count: a.listeners,
                leave_after: a.listeners_leave_after.map(Duration::from_secs_f64),
            };
            let bridge = a.bridge.settings()?;
            run::demo(node, s, bridge, listeners, a.keys_dir.as_deref(), stop)
                .map_err(|e| e.to_string())
        })(),
        Cmd::View(a) => (|| {
            let mut s = settings(&a.stream)?;
            s.keys = Some(a.keys.clone());
            run::view(resolve(&a.connect)?, view_session(&a)?, s, stop).map_err(|e| e.to_string())
        })(),
        Cmd::Record { dir, view } => (|| {
            let mut s = settings(&view.stream)?;
            s.keys = Some(view.keys.clone());
            if dir.is_none() && s.mcap.is_none() {
                return Err("record needs a folder for the PNG files, --mcap FILE, or both".into());
            }
            s.record = dir.clone();
            run::view(resolve(&view.connect)?, view_session(&view)?, s, stop)
                .map_err(|e| e.to_string())
        })(),
        Cmd::Pair {
            dir,
            receivers,
            watchers,
            force,
        } => run::pair(&dir, receivers, watchers, force).map_err(|e| e.to_string()),
        Cmd::Report { csv, out } => (|| {
            let out = out.unwrap_or_else(|| {
                let stem = csv
                    .file_stem()
                    .map(|s| s.to_string_lossy().into_owned())
                    .unwrap_or_default();
                csv.with_file_name(format!("{stem}_plots"))
            });
            let w = gapstream::report::report(&csv, &out).map_err(|e| e.to_string())?;
            println!("{}", w.summary);
            for f in w.files {
                println!("wrote {}", f.display());
            }
            Ok(())
        })(),
        Cmd::Node(a) => (|| {
            let node = run::NodeSettings {
                source: source_spec(&a.source.source, false)?,
                fps: a.source.fps,
                packet_payload: a
                    .source
                    .packet_size
                    .parse()
                    .map_err(|_| "bad packet size")?,
                spi_hz: (a.source.spi_hz > 0).then_some(a.source.spi_hz),
                security: a.security.security()?,
                rekey: a.source.rekey(),
                codec: a.source.codec,
                quality: a.source.quality,
                target_bytes: a.source.target_bytes.map(|t| t as usize),
                padding: a.source.pad.padding(),
            };
            let id = match node.security {
                Security::StockPlaintext => None,
                _ => Some(run::load_drone_identity(&a.keys).map_err(|e| e.to_string())?),
            };
            run::node_only(
                resolve(&a.bridge)?,
                node,
                id,
                a.duration.map(Duration::from_secs_f64),
                stop,
            )
            .map_err(|e| e.to_string())
        })(),
        Cmd::Bench(a) => run::bench(&run::BenchOptions {
            frames: a.frames,
            fps: a.fps,
            spi_hz: (a.spi_hz > 0).then_some(a.spi_hz),
            csv: a.csv.clone(),
            loss_frames: a.loss_frames,
            loss_fps: a.loss_fps,
        })
        .map_err(|e| e.to_string()),
        Cmd::Ground(a) => (|| {
            let ifs: esp32_bridge::mdns::Interfaces = a.mdns_interface.parse()?;
            let security = a.security.security()?;
            if let (Security::Secure { .. }, Some(f)) = (&security, &a.keylog) {
                warn_keylog(f);
            }
            let opts = gapstream::ground::GroundOpts {
                fleet: a.fleet.clone(),
                discover: a.discover.then_some(ifs),
                discover_wait: Duration::from_secs_f64(a.discover_secs),
                security,
                packet_payload: a.packet_size.parse().map_err(|_| "bad packet size")?,
                stream: StreamSettings {
                    transport: if a.transport == "udp" {
                        Transport::Udp
                    } else {
                        Transport::Tcp
                    },
                    duration: a.duration.map(Duration::from_secs_f64),
                    metrics: a.metrics.clone(),
                    viewer: (a.viewer != "none").then(|| a.viewer.clone()),
                    viewer_pixels: a.viewer_pixels,
                    bayer: a.bayer,
                    record: None,
                    mcap: a.mcap.clone(),
                    zenoh: a.zenoh.as_ref().map(|e| run::ZenohSettings {
                        endpoint: (!e.is_empty()).then(|| e.clone()),
                        drone: String::new(),
                    }),
                    source: String::new(),
                    keys: None,
                    keylog: a.keylog.clone(),
                    fec: false,
                    state_frames: Default::default(),
                },
                bench_row: a.bench_row.clone(),
                warmup: Duration::from_secs_f64(a.warmup.max(0.0)),
                spi_hz: a.spi_hz.filter(|&h| h > 0),
                fps: a.camera_fps.filter(|&f| f > 0.0),
            };
            gapstream::ground::ground(opts, stop).map_err(|e| e.to_string())
        })(),
        Cmd::Swarm(a) => (|| {
            let node = node_settings(&a.source, &a.security, false)?;
            let ads = match &a.mdns {
                Some(i) => Some(i.parse::<esp32_bridge::mdns::Interfaces>()?),
                None => None,
            };
            gapstream::ground::swarm_cmd(
                a.drones,
                node,
                &a.bridge.settings()?,
                &a.dir,
                a.udp,
                ads,
                a.duration.map(Duration::from_secs_f64),
                stop,
            )
            .map_err(|e| e.to_string())
        })(),
        Cmd::BenchSwarm(a) => {
            gapstream::ground::bench_swarm(&a.counts, a.seconds, a.warmup, a.fps, a.spi_hz, &a.csv)
                .map_err(|e| e.to_string())
        }
    };
    match r {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("gapstream: error: {e}");
            ExitCode::FAILURE
        }
    }
}
