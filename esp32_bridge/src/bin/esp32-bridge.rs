//! `esp32-bridge`: the ESP32's forwarding logic on the host. The simulated drone connects to the
//! SPI-side socket; receivers connect over TCP (port 5000, like the stock firmware) or UDP.
use std::io::Write;
use std::net::SocketAddr;
use std::process::ExitCode;
use std::time::Duration;

use clap::Parser;
use esp32_bridge::cookie::GateConfig;
use esp32_bridge::fec::FecConfig;
use esp32_bridge::forward::{Config, UpstreamPolicy};
use esp32_bridge::host::{HostBridge, HostConfig};
use esp32_bridge::netsim::{LossModel, WifiModel};

#[derive(Parser)]
#[command(
    version,
    about = "ESP32 bridge on the host: CPX between the (simulated) GAP8 and WiFi clients, no keys"
)]
struct Args {
    /// Where the simulated GAP8 connects (stands in for the SPI link).
    #[arg(long, default_value = "127.0.0.1:5100")]
    spi_listen: SocketAddr,
    /// TCP server for receivers (the stock firmware's port 5000).
    #[arg(long, default_value = "127.0.0.1:5000")]
    tcp: SocketAddr,
    /// UDP socket for receivers (one CPX packet per datagram); `none` to disable.
    #[arg(long, default_value = "127.0.0.1:5000")]
    udp: String,
    /// Raw 324x244 frames queued per client before frames are dropped for that client.
    #[arg(long, default_value_t = 4)]
    queue_frames: usize,
    /// Forward upstream messages (handshake, rekey) from the leader only; listeners just receive.
    #[arg(long)]
    leader_only: bool,
    /// Most TCP clients at once.
    #[arg(long, default_value_t = 8)]
    max_clients: usize,
    /// Most UDP clients at once (separate slots from TCP's).
    #[arg(long, default_value_t = 4)]
    max_udp_clients: usize,
    /// Most UDP clients from one source IP.
    #[arg(long, default_value_t = 2)]
    udp_clients_per_source: usize,
    /// Advertise this bridge over mDNS as the stock firmware advertises a deck with this MAC
    /// (aa:bb:cc:dd:ee:ff): host aideck-DDEEFF, service _cpx._tcp on the TCP port, TXT id = the MAC.
    #[arg(long, value_name = "MAC")]
    mdns_mac: Option<String>,
    /// Where mDNS is spoken: `all` interfaces, `lo` (this machine only), or an interface name.
    #[arg(long, default_value = "all")]
    mdns_interface: String,
    #[command(flatten)]
    fec: FecArgs,
    /// The WiFi side's rate in Mbit/s, shared by all clients, with backpressure to the SPI side
    /// (default: 10, what an AI-deck measured over its stock TCP path; Espressif's own in-air
    /// figures are 20 TCP / 30 UDP). 0: as fast as the sockets go.
    #[arg(long, default_value_t = 10.0)]
    wifi_mbps: f64,
    /// The SPI side waits while every client has this many KiB queued (the WiFi model's queue).
    #[arg(long, default_value_t = 32)]
    wifi_queue_kib: usize,
    /// Lose UDP datagrams on the way out: PERCENT (independent) or PERCENT:BURST (bursts of BURST
    /// datagrams on average, Gilbert-Elliott), e.g. 5 or 10:4.
    #[arg(long, value_name = "PERCENT[:BURST]")]
    udp_loss: Option<String>,
    /// Seed of the UDP loss (the same seed loses the same datagrams).
    #[arg(long, default_value_t = 1)]
    udp_loss_seed: u64,
}

/// Forward error correction for the UDP receivers that ask for it (docs/stream.md).
#[derive(clap::Args, Clone, Debug)]
pub struct FecArgs {
    /// Refuse FEC requests (every UDP receiver gets the plain stream).
    #[arg(long)]
    no_fec: bool,
    /// FEC data packets per block (1..=128).
    #[arg(long, default_value_t = 40)]
    fec_k: u8,
    /// FEC block size with its parity: n - k parity packets per k data packets.
    #[arg(long, default_value_t = 50)]
    fec_n: u16,
    /// A block of single-packet messages closes this long after its first packet (ms).
    #[arg(long, default_value_t = 5)]
    fec_timeout_ms: u32,
    /// Adaptive FEC: parity per k follows the receiver's loss reports between FLOOR and CEILING
    /// (e.g. 2:40; a forged report cannot leave that range).
    #[arg(long, value_name = "FLOOR:CEILING")]
    fec_adaptive: Option<String>,
}

impl FecArgs {
    fn config(&self) -> Result<FecConfig, String> {
        FecConfig::from_cli(
            !self.no_fec,
            self.fec_k,
            self.fec_n,
            self.fec_timeout_ms,
            self.fec_adaptive.as_deref(),
        )
    }
}

/// `aa:bb:cc:dd:ee:ff` (or `-`, or 12 hex digits) as 6 bytes.
fn parse_mac(s: &str) -> Option<[u8; 6]> {
    let hex: String = s.chars().filter(|c| *c != ':' && *c != '-').collect();
    if hex.len() != 12 {
        return None;
    }
    let mut m = [0u8; 6];
    for (i, b) in m.iter_mut().enumerate() {
        *b = u8::from_str_radix(hex.get(2 * i..2 * i + 2)?, 16).ok()?;
    }
    Some(m)
}

fn main() -> ExitCode {
    let a = Args::parse();
    let udp_listen = if a.udp == "none" {
        None
    } else {
        match a.udp.parse() {
            Ok(x) => Some(x),
            Err(e) => {
                eprintln!("esp32-bridge: error: --udp {}: {e}", a.udp);
                return ExitCode::FAILURE;
            }
        }
    };
    let fec = match a.fec.config() {
        Ok(f) => f,
        Err(e) => {
            eprintln!("esp32-bridge: error: {e}");
            return ExitCode::FAILURE;
        }
    };
    let udp_loss = match a
        .udp_loss
        .as_deref()
        .map(|s| LossModel::parse(s, a.udp_loss_seed))
    {
        None => None,
        Some(Ok(m)) => Some(m),
        Some(Err(e)) => {
            eprintln!("esp32-bridge: error: {e}");
            return ExitCode::FAILURE;
        }
    };
    if !(a.wifi_mbps >= 0.0 && a.wifi_mbps.is_finite()) {
        eprintln!(
            "esp32-bridge: error: --wifi-mbps {}: must be 0 or more",
            a.wifi_mbps
        );
        return ExitCode::FAILURE;
    }
    let wifi = (a.wifi_mbps > 0.0).then_some(WifiModel {
        mbps: a.wifi_mbps,
        queue_bytes: a.wifi_queue_kib.max(1) * 1024,
    });
    let cfg = HostConfig {
        fec,
        wifi,
        udp_loss,
        spi_listen: a.spi_listen,
        tcp_listen: a.tcp,
        udp_listen,
        core: Config {
            client_queue_bytes: a.queue_frames.max(1) * 82_000,
            max_clients: a.max_clients,
            max_udp_clients: a.max_udp_clients,
            upstream: if a.leader_only {
                UpstreamPolicy::LeaderOnly
            } else {
                UpstreamPolicy::All
            },
            ..Config::default()
        },
        verbose: true,
        udp: GateConfig {
            clients_per_ip: a.udp_clients_per_source,
            ..GateConfig::default()
        },
        ..HostConfig::default()
    };
    let bridge = match HostBridge::start(cfg) {
        Ok(b) => b,
        Err(e) => {
            eprintln!("esp32-bridge: error: cannot listen: {e}");
            return ExitCode::FAILURE;
        }
    };
    let _ = writeln!(
        std::io::stdout(),
        "esp32-bridge: WiFi {}; UDP loss {}; FEC {}",
        match wifi {
            Some(w) => format!("{} Mbit/s, queue {} KiB", w.mbps, w.queue_bytes / 1024),
            None => "unpaced".into(),
        },
        match udp_loss {
            Some(m) if m.burst > 1.0 =>
                format!("{} % in bursts of {} (seed {})", m.percent, m.burst, m.seed),
            Some(m) => format!("{} % independent (seed {})", m.percent, m.seed),
            None => "none".into(),
        },
        if fec.enabled {
            format!(
                "k = {}, n = {}, timeout {} ms{}",
                fec.k,
                fec.k as u16 + fec.parity as u16,
                fec.timeout_ms,
                match fec.adaptive {
                    Some((f, c)) => format!(", adaptive {f}..={c} parity per k"),
                    None => String::new(),
                }
            )
        } else {
            "off".into()
        }
    );
    let _ = writeln!(
        std::io::stdout(),
        "esp32-bridge: SPI side {}  TCP {}  UDP {}  (Ctrl-C stops)",
        bridge.spi_addr,
        bridge.tcp_addr,
        bridge
            .udp_addr
            .map(|u| u.to_string())
            .unwrap_or_else(|| "off".into())
    );
    let _advert = match &a.mdns_mac {
        None => None,
        Some(m) => {
            let (Some(mac), Ok(ifs)) = (
                parse_mac(m),
                a.mdns_interface.parse::<esp32_bridge::mdns::Interfaces>(),
            ) else {
                eprintln!(
                    "esp32-bridge: error: --mdns-mac {m} --mdns-interface {}: a MAC is 6 hex bytes (aa:bb:cc:dd:ee:ff), an interface `all`, `lo` or a name",
                    a.mdns_interface
                );
                return ExitCode::FAILURE;
            };
            match esp32_bridge::mdns::Advertisement::start(
                &mac,
                bridge.tcp_addr.ip(),
                bridge.tcp_addr.port(),
                &ifs,
            ) {
                Ok(ad) => {
                    eprintln!(
                        "esp32-bridge: mDNS: {} ({}), _cpx._tcp port {}, id {}",
                        ad.host,
                        a.mdns_interface,
                        bridge.tcp_addr.port(),
                        esp32_bridge::mdns::mac_id(&mac)
                    );
                    Some(ad)
                }
                Err(e) => {
                    eprintln!("esp32-bridge: error: {e}");
                    return ExitCode::FAILURE;
                }
            }
        }
    };
    let (tx, rx) = std::sync::mpsc::channel::<()>();
    let _ = ctrlc_wait(tx);
    let _ = rx.recv();
    let st = bridge.with_core(|c| c.stats());
    let _ = writeln!(
        std::io::stdout(),
        "esp32-bridge: stopping ({} messages from the GAP8, {} malformed)",
        st.spi_messages,
        st.spi_malformed
    );
    bridge.stop();
    std::thread::sleep(Duration::from_millis(10));
    ExitCode::SUCCESS
}

/// Sends on `tx` at Ctrl-C / SIGTERM.
fn ctrlc_wait(tx: std::sync::mpsc::Sender<()>) -> std::io::Result<()> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    std::thread::spawn(move || {
        rt.block_on(async {
            let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()).ok();
            tokio::select! {
                _ = tokio::signal::ctrl_c() => {}
                _ = async { match &mut term { Some(t) => { t.recv().await; } None => std::future::pending().await } } => {}
            }
        });
        let _ = tx.send(());
    });
    Ok(())
}
