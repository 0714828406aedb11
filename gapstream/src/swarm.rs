//! A simulated swarm: N drones on this machine, each with its own ESP32 bridge (its own ports),
//! its own pairing and its name burned into its pictures, for `gapstream demo --drones N`,
//! `gapstream swarm` (the drones alone, in their own process, for a ground station in another)
//! and `make bench-swarm`.
//!
//! Each drone is the simulated GAP8 of `gapstream demo` ([`crate::sim`]: the synthetic camera,
//! `gapstream_drone::Drone`, the SPI link paced like the AI-deck's) with one difference: frames are
//! sealed by the single-core kernels on the drone's own thread ([`EngineChoice::Sequential`])
//! instead of the 8-thread host model of the GAP8 cluster, which for N drones would be 8N busy
//! threads on the machine that also runs the ground station. The bytes on the wire are the same.
//!
//! The bridges model the WiFi as the single drone's does ([`Swarm::start_with`],
//! [`crate::run::BridgeSettings`]): each its own deck's rate and queue, with backpressure to its
//! drone, and all of them on one access point's channel ([`esp32_bridge::netsim::Channel`]):
//! the decks share its airtime, so N of them together get what the channel carries, not N times
//! a deck's rate (`docs/stream.md`, "The WiFi model and lossy UDP").

use std::fmt::Write as _;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use std::sync::Arc;

use esp32_bridge::host::{HostBridge, HostConfig};
use esp32_bridge::netsim::Channel;
use gapstream_drone::DroneConfig;
use gapstream_protocol::handshake::{DroneIdentity, Identity, Role};

use crate::images::FrameSource;
use crate::run::{self, NodeSettings, RunError};
use crate::sim::{self, EngineChoice, NodeConfig};

/// The name of drone `i` (0-based) of a simulated swarm: `drone-01`, `drone-02`, ...
pub fn drone_name(i: usize) -> String {
    format!("drone-{:02}", i + 1)
}

/// The made-up MAC of simulated drone `i`'s bridge (locally administered, `02:67:73:D0:..`): its
/// mDNS host name is `aideck-` and the last three bytes, like a stock deck's (`drone-01` is
/// `aideck-D00001`).
pub fn drone_mac(i: usize) -> [u8; 6] {
    let n = (i + 1) as u16;
    [0x02, 0x67, 0x73, 0xD0, (n >> 8) as u8, n as u8]
}

/// One simulated drone with its bridge.
pub struct SimDrone {
    pub name: String,
    pub mac: [u8; 6],
    /// The receiver's side of this drone's pairing.
    pub receiver: Identity,
    drone: DroneIdentity,
    bridge_cfg: HostConfig,
    bridge: Option<HostBridge>,
    node: Option<sim::Node>,
    settings: NodeSettings,
    /// The bridge's TCP address (what a receiver connects to).
    pub tcp_addr: SocketAddr,
    pub udp_addr: Option<SocketAddr>,
}

impl SimDrone {
    /// The drone's public key (what a fleet file may name).
    pub fn drone_public(&self) -> [u8; 32] {
        self.drone.local.public()
    }

    /// The bridge is running.
    pub fn bridge_up(&self) -> bool {
        self.bridge.is_some()
    }

    /// Pulls the bridge's power: every socket closes (the drone's SPI link and the receivers'
    /// connections); the drone goes on capturing and reconnects by itself once it is back.
    pub fn kill_bridge(&mut self) {
        if let Some(b) = self.bridge.take() {
            b.stop();
        }
    }

    /// Starts the bridge again on the same ports.
    pub fn restart_bridge(&mut self) -> Result<(), RunError> {
        if self.bridge.is_none() {
            self.bridge = Some(start_bridge_at(&self.bridge_cfg)?);
        }
        Ok(())
    }

    /// Stops the drone (its process would have been killed): nothing reaches the bridge.
    pub fn kill_drone(&mut self) -> Option<sim::NodeReport> {
        self.node.take().map(|n| n.stop())
    }

    /// Starts the drone again (boot counter and keys as before: a rebooted deck).
    pub fn restart_drone(&mut self) -> Result<(), RunError> {
        if self.node.is_none() {
            self.node = Some(start_drone(
                &self.name,
                &self.settings,
                self.drone.clone(),
                self.bridge_cfg.spi_listen,
            )?);
        }
        Ok(())
    }

    /// The drone's counters so far.
    pub fn report(&self) -> Option<sim::NodeReport> {
        self.node
            .as_ref()
            .map(|n| n.report.lock().unwrap_or_else(|e| e.into_inner()).clone())
    }

    /// The bridge's counters (frames dropped for slow clients, ...).
    pub fn bridge_stats(&self) -> Option<esp32_bridge::forward::BridgeStats> {
        self.bridge.as_ref().map(|b| b.with_core(|c| c.stats()))
    }

    /// The bridge, while it runs.
    pub fn bridge(&self) -> Option<&HostBridge> {
        self.bridge.as_ref()
    }
}

/// N simulated drones, each with its own bridge.
pub struct Swarm {
    pub drones: Vec<SimDrone>,
    /// The channel the bridges share under the WiFi model.
    pub channel: Option<Arc<Channel>>,
}

fn start_bridge_at(cfg: &HostConfig) -> Result<HostBridge, RunError> {
    HostBridge::start(cfg.clone()).map_err(|e| {
        RunError::Setup(format!(
            "cannot start a bridge on {} / {}: {e}",
            cfg.spi_listen, cfg.tcp_listen
        ))
    })
}

fn start_drone(
    name: &str,
    node: &NodeSettings,
    identity: DroneIdentity,
    spi: SocketAddr,
) -> Result<sim::Node, RunError> {
    let source = FrameSource::open(&node.source)
        .map_err(|e| RunError::Setup(e.to_string()))?
        .with_label(name);
    let mode = run::drone_mode_with(&node.security, Some(identity), node.rekey)?;
    sim::start_node(NodeConfig {
        source,
        fps: node.fps,
        bridge_spi: spi,
        spi_hz: node.spi_hz,
        drone: DroneConfig {
            mode,
            packet_payload: node.packet_payload,
        },
        frames: None,
        engine: EngineChoice::Sequential,
        flight: Some(crate::flight::Circle::default()),
        coder: crate::codec::HostCoder::boxed_with_target(
            node.codec,
            node.quality,
            node.target_bytes,
        )
        .map_err(RunError::Setup)?,
        padding: node.padding,
    })
    .map_err(RunError::Node)
}

impl Swarm {
    /// Starts `n` drones (`drone-01`, ...), each paired afresh with one receiver key, each with its
    /// own bridge on free ports of 127.0.0.1, forwarding as fast as the sockets go (no WiFi
    /// model).
    pub fn start(n: usize, node: &NodeSettings) -> Result<Self, RunError> {
        Self::start_with(n, node, &run::BridgeSettings::default())
    }

    /// [`Swarm::start`] with the bridges modelling `bridge`: the WiFi model (each bridge its
    /// deck's rate and queue; all of them on one channel of `bridge.channel_mbps`), UDP loss, FEC.
    pub fn start_with(
        n: usize,
        node: &NodeSettings,
        bridge: &run::BridgeSettings,
    ) -> Result<Self, RunError> {
        let channel = bridge.wifi.and(bridge.channel_mbps).map(Channel::new);
        let mut drones = Vec::with_capacity(n);
        for i in 0..n {
            let name = drone_name(i);
            let (d, r) = run::fresh_pairing()?;
            let drone: DroneIdentity = d.into();
            let any: SocketAddr = "127.0.0.1:0".parse().expect("static");
            let cfg = HostConfig {
                spi_listen: any,
                tcp_listen: any,
                udp_listen: Some(any),
                wifi: bridge.wifi,
                channel: channel.clone(),
                udp_loss: bridge.udp_loss,
                fec: bridge.fec,
                ..HostConfig::default()
            };
            let bridge = start_bridge_at(&cfg)?;
            // Restarts use the same ports (a rebooted ESP32 keeps its address).
            let bridge_cfg = HostConfig {
                spi_listen: bridge.spi_addr,
                tcp_listen: bridge.tcp_addr,
                udp_listen: bridge.udp_addr,
                ..cfg
            };
            let node_handle = start_drone(&name, node, drone.clone(), bridge.spi_addr)?;
            drones.push(SimDrone {
                mac: drone_mac(i),
                receiver: r,
                drone,
                tcp_addr: bridge.tcp_addr,
                udp_addr: bridge.udp_addr,
                bridge_cfg,
                bridge: Some(bridge),
                node: Some(node_handle),
                settings: node.clone(),
                name,
            });
        }
        Ok(Swarm { drones, channel })
    }

    /// Waits until every drone's link reached its bridge (at most `timeout`); the names of the
    /// ones that did not.
    pub fn wait_links(&self, timeout: Duration) -> Vec<String> {
        let end = std::time::Instant::now() + timeout;
        self.drones
            .iter()
            .filter(|d| {
                let left = end.saturating_duration_since(std::time::Instant::now());
                d.bridge.as_ref().is_some_and(|b| !b.wait_gap8_link(left))
            })
            .map(|d| d.name.clone())
            .collect()
    }

    /// Writes every drone's pairing into `dir/keys/<name>/` (`drone.key`, `receiver.key`) and the
    /// fleet file `dir/fleet.toml` naming them; returns the fleet file's path.
    pub fn write_fleet(&self, dir: &Path, transport_udp: bool) -> Result<PathBuf, RunError> {
        let mut fleet = String::from(
            "# A gapstream fleet: one [[drone]] per deck (gapstream swarm wrote this one for its simulated drones).\n\
             # name: the drone's name (frames, tiles, topics, files); address: its bridge (or id: its MAC / aideck-XXXXXX, found by --discover);\n\
             # receiver_key: this ground station's key file for it (gapstream pair); drone_public_key: the drone's public key, checked against the key file.\n",
        );
        for d in &self.drones {
            let kdir = dir.join("keys").join(&d.name);
            std::fs::create_dir_all(&kdir)
                .map_err(|e| RunError::Setup(format!("{}: {e}", kdir.display())))?;
            let w = |p: PathBuf, text: String| {
                crate::secret_file::write(&p, text.as_bytes(), crate::secret_file::How::Replace)
                    .map_err(|e| RunError::Setup(format!("{}: {e}", p.display())))
            };
            w(kdir.join("drone.key"), self::pairing_text_drone(&d.drone))?;
            w(
                kdir.join("receiver.key"),
                d.receiver.to_pairing_text(Role::Receiver),
            )?;
            let addr = if transport_udp {
                d.udp_addr.unwrap_or(d.tcp_addr)
            } else {
                d.tcp_addr
            };
            let _ = write!(
                fleet,
                "\n[[drone]]\nname = \"{}\"\naddress = \"{}\"\n# id = \"{}\"\nreceiver_key = \"keys/{}/receiver.key\"\ndrone_public_key = \"{}\"\n",
                d.name,
                addr,
                mac_id(&d.mac),
                d.name,
                hex(&d.drone_public()),
            );
        }
        let p = dir.join("fleet.toml");
        // Written whole under another name first: a ground station polling for it never reads
        // half a file.
        let tmp = dir.join(".fleet.toml.part");
        std::fs::write(&tmp, fleet)
            .map_err(|e| RunError::Setup(format!("{}: {e}", tmp.display())))?;
        std::fs::rename(&tmp, &p).map_err(|e| RunError::Setup(format!("{}: {e}", p.display())))?;
        Ok(p)
    }

    /// Stops every drone and bridge; the drones' reports, by name.
    pub fn stop(self) -> Vec<(String, Option<sim::NodeReport>)> {
        let mut out = Vec::new();
        for mut d in self.drones {
            let r = d.kill_drone();
            d.kill_bridge();
            out.push((d.name, r));
        }
        out
    }
}

fn pairing_text_drone(d: &DroneIdentity) -> String {
    d.to_pairing_text()
}

/// A MAC as the stock firmware's TXT `id` writes it: 12 upper-case hex digits.
pub fn mac_id(mac: &[u8; 6]) -> String {
    mac.iter().map(|b| format!("{b:02X}")).collect()
}

/// The stock firmware's mDNS host name for `mac`: `aideck-` and the last three bytes.
pub fn mac_host(mac: &[u8; 6]) -> String {
    format!("aideck-{:02X}{:02X}{:02X}", mac[3], mac[4], mac[5])
}

pub(crate) fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_macs_and_hosts_look_like_the_stock_firmwares() {
        assert_eq!(drone_name(0), "drone-01");
        assert_eq!(drone_name(31), "drone-32");
        let m = drone_mac(0x01aa);
        assert_eq!(mac_id(&m), "026773D001AB");
        assert_eq!(mac_host(&m), "aideck-D001AB");
        assert_eq!(mac_host(&drone_mac(0)), "aideck-D00001");
        assert_eq!(mac_host(&m), esp32_bridge::mdns::host_name(&m));
    }
}
