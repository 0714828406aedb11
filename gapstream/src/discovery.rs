//! Finding decks by mDNS (`gapstream ground --discover`): browses `_cpx._tcp`, the service the
//! stock AI-deck firmware and gapstream's bridges (`esp32_bridge::mdns`, the ESP-IDF glue)
//! advertise, and reads each deck's host name (`aideck-XXXXXX`), TXT `id` (its MAC) and address.
//! A fleet names a deck by either ([`crate::ground::Target::Discovered`]); decks that are not in
//! the fleet are listed, never connected.

use std::collections::BTreeMap;
use std::net::{IpAddr, SocketAddr};
use std::time::{Duration, Instant};

use esp32_bridge::mdns::{self, Interfaces};
use mdns_sd::ServiceEvent;

use crate::ground::normalize_id;

/// One deck found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Found {
    /// The service instance's full name.
    pub instance: String,
    /// The host name without `.local.` (`aideck-D4E5F6`).
    pub host: String,
    /// The TXT `id` (the MAC, 12 upper-case hex digits), when advertised.
    pub id: Option<String>,
    /// Its CPX port on its first IPv4 address (or another address).
    pub addr: SocketAddr,
}

impl Found {
    /// The ids a fleet may name this deck by: its MAC and its host name, normalised.
    pub fn keys(&self) -> Vec<String> {
        let mut k = vec![normalize_id(&self.host)];
        if let Some(id) = &self.id {
            k.push(normalize_id(id));
        }
        k
    }
}

/// How long browsing goes on once `enough` holds: the other decks' answers to the same query
/// (responders wait 20-120 ms before a shared answer, RFC 6762 section 6) still get listed.
pub const GRACE: Duration = Duration::from_millis(500);

/// Browses `_cpx._tcp` on `ifs` for at most `wait`, or until [`GRACE`] after `enough` holds for
/// what was found; returns every deck found, sorted by host name.
pub fn browse(
    ifs: &Interfaces,
    wait: Duration,
    enough: impl Fn(&[Found]) -> bool,
) -> Result<Vec<Found>, String> {
    let d = mdns::daemon(ifs)?;
    let rx = d.browse(mdns::SERVICE).map_err(|e| format!("mDNS: {e}"))?;
    let mut end = Instant::now() + wait;
    let mut found: BTreeMap<String, Found> = BTreeMap::new();
    loop {
        let left = end.saturating_duration_since(Instant::now());
        if left.is_zero() {
            break;
        }
        match rx.recv_timeout(left.min(Duration::from_millis(200))) {
            Ok(ServiceEvent::ServiceResolved(s)) => {
                let ip: Option<IpAddr> = s
                    .get_addresses_v4()
                    .into_iter()
                    .min()
                    .map(IpAddr::V4)
                    .or_else(|| s.get_addresses().iter().next().map(|a| a.to_ip_addr()));
                let Some(ip) = ip else { continue };
                let host = s
                    .get_hostname()
                    .trim_end_matches('.')
                    .trim_end_matches(".local")
                    .to_string();
                found.insert(
                    s.get_fullname().to_string(),
                    Found {
                        instance: s.get_fullname().to_string(),
                        host,
                        id: s
                            .get_property_val_str("id")
                            .filter(|v| !v.is_empty())
                            .map(str::to_string),
                        addr: SocketAddr::new(ip, s.get_port()),
                    },
                );
                let v: Vec<Found> = found.values().cloned().collect();
                if enough(&v) {
                    end = end.min(Instant::now() + GRACE);
                }
            }
            Ok(_) => {}
            Err(_) => {}
        }
    }
    let _ = d.stop_browse(mdns::SERVICE);
    let _ = d.shutdown();
    let mut v: Vec<Found> = found.into_values().collect();
    v.sort_by(|a, b| a.host.cmp(&b.host).then(a.addr.cmp(&b.addr)));
    Ok(v)
}

/// The address of every id (MAC and host name) found.
pub fn index(found: &[Found]) -> BTreeMap<String, SocketAddr> {
    let mut m = BTreeMap::new();
    for f in found {
        for k in f.keys() {
            m.insert(k, f.addr);
        }
    }
    m
}
