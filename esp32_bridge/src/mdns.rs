//! mDNS advertisement of a host bridge, as the stock AI-deck firmware advertises a deck
//! (Bitcraze's aideck-esp-firmware, `main/discovery.c`): host `aideck-XXXXXX` (the last three
//! bytes of the MAC), service `_cpx._tcp` on the TCP port, TXT `pname=aideck`, `pversion=1.1`,
//! `id=<MAC, 12 upper-case hex digits>`, `name`, `cpxversion=1`. A ground station
//! (`gapstream ground --discover`) finds it by that `id` or host name. The ESP-IDF glue
//! (`esp-idf/main/main.c`, Kconfig `GAPSTREAM_MDNS`) advertises the same on a deck.
//!
//! The instance name is `Crazyflie Packet eXchange aideck-XXXXXX`: the stock firmware names every
//! deck `Crazyflie Packet eXchange`, which mDNS has to rename when several decks share a network;
//! with the host name in it every bridge's instance is unique from the start.

use std::net::IpAddr;

use mdns_sd::{IfKind, ServiceDaemon, ServiceInfo};

/// The DNS-SD service type of CPX over TCP.
pub const SERVICE: &str = "_cpx._tcp.local.";

/// Which network interfaces mDNS uses.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Interfaces {
    /// Every interface (a bridge on a real network).
    All,
    /// The loopback interface only (everything on one machine: the demo, tests).
    Loopback,
    /// One interface by name (`wlan0`).
    Name(String),
}

impl std::str::FromStr for Interfaces {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        Ok(match s {
            "all" => Interfaces::All,
            "lo" | "loopback" => Interfaces::Loopback,
            "" => return Err("an interface name, `lo` or `all`".into()),
            n => Interfaces::Name(n.into()),
        })
    }
}

/// A daemon limited to `ifs`.
pub fn daemon(ifs: &Interfaces) -> Result<ServiceDaemon, String> {
    let d = ServiceDaemon::new().map_err(|e| format!("mDNS: {e}"))?;
    let r = match ifs {
        Interfaces::All => Ok(()),
        Interfaces::Loopback => d
            .disable_interface(IfKind::All)
            .and_then(|_| d.enable_interface(IfKind::LoopbackV4)),
        Interfaces::Name(n) => d
            .disable_interface(IfKind::All)
            .and_then(|_| d.enable_interface(IfKind::Name(n.clone()))),
    };
    r.map_err(|e| format!("mDNS: {e}"))?;
    Ok(d)
}

/// The stock firmware's host name for `mac`.
pub fn host_name(mac: &[u8; 6]) -> String {
    format!("aideck-{:02X}{:02X}{:02X}", mac[3], mac[4], mac[5])
}

/// The TXT `id` for `mac`: 12 upper-case hex digits.
pub fn mac_id(mac: &[u8; 6]) -> String {
    mac.iter().map(|b| format!("{b:02X}")).collect()
}

/// A running advertisement; dropped = withdrawn (goodbye packets sent).
pub struct Advertisement {
    daemon: ServiceDaemon,
    fullname: String,
    pub host: String,
}

impl Advertisement {
    /// Advertises a bridge with `mac` listening on `ip:port` over the interfaces `ifs`.
    pub fn start(mac: &[u8; 6], ip: IpAddr, port: u16, ifs: &Interfaces) -> Result<Self, String> {
        let daemon = daemon(ifs)?;
        let host = host_name(mac);
        let id = mac_id(mac);
        let props = [
            ("pname", "aideck"),
            ("pversion", "1.1"),
            ("id", id.as_str()),
            ("name", ""),
            ("cpxversion", "1"),
        ];
        let info = ServiceInfo::new(
            SERVICE,
            &format!("Crazyflie Packet eXchange {host}"),
            &format!("{host}.local."),
            ip,
            port,
            &props[..],
        )
        .map_err(|e| format!("mDNS: {e}"))?;
        let fullname = info.get_fullname().to_string();
        daemon.register(info).map_err(|e| format!("mDNS: {e}"))?;
        Ok(Advertisement {
            daemon,
            fullname,
            host,
        })
    }
}

impl Drop for Advertisement {
    fn drop(&mut self) {
        if let Ok(rx) = self.daemon.unregister(&self.fullname) {
            let _ = rx.recv_timeout(std::time::Duration::from_millis(500));
        }
        let _ = self.daemon.shutdown();
    }
}
