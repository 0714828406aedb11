//! mDNS on the loopback interface only (nothing leaves the machine): bridges announced as stock
//! decks are found by `gapstream::discovery` with their host name, TXT id and address; a fleet
//! connects its members only, and a deck outside the fleet is listed, not connected.
//!
//! Where the loopback interface cannot carry multicast (some containers), the test says so in one
//! line and checks nothing else. Other programs on this machine may announce decks on the loopback
//! interface too (`gapstream demo --drones N` does): the test's decks have MACs made from its
//! process id, and it checks those only.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;

use esp32_bridge::mdns::{Advertisement, Interfaces};
use gapstream::discovery;
use gapstream::ground::{self, Fleet};
use gapstream::run::Security;
use gapstream_protocol::suite::{KexMode, Suite};

#[test]
fn decks_are_found_by_mac_and_host_name_and_only_fleet_members_connect() {
    let pid = std::process::id();
    let (hi, lo) = ((pid >> 8) as u8, pid as u8);
    let mac = |i: u8| [0x02, 0x74, 0x65, i, hi, lo];
    let id = |m: [u8; 6]| m.iter().map(|b| format!("{b:02X}")).collect::<String>();
    let host = |m: [u8; 6]| format!("aideck-{:02X}{:02X}{:02X}", m[3], m[4], m[5]);
    let decks = [(mac(1), 47001u16), (mac(2), 47002), (mac(3), 47003)];
    let ours: Vec<String> = decks.iter().map(|(m, _)| id(*m)).collect();
    let is_ours = |f: &discovery::Found| f.id.as_ref().is_some_and(|i| ours.contains(i));
    let ads: Vec<Advertisement> = decks
        .iter()
        .map(|(mac, port)| {
            Advertisement::start(
                mac,
                "127.0.0.1".parse().unwrap(),
                *port,
                &Interfaces::Loopback,
            )
            .unwrap()
        })
        .collect();
    let found: Vec<discovery::Found> =
        discovery::browse(&Interfaces::Loopback, Duration::from_secs(8), |f| {
            f.iter().filter(|x| is_ours(x)).count() >= 3
        })
        .unwrap()
        .into_iter()
        .filter(|f| is_ours(f))
        .collect();
    if found.is_empty() {
        eprintln!(
            "skipped: mDNS found nothing on the loopback interface (no multicast on lo here); nothing checked"
        );
        return;
    }
    let hosts: Vec<(String, Option<String>, SocketAddr)> = found
        .iter()
        .map(|f| (f.host.clone(), f.id.clone(), f.addr))
        .collect();
    let want: Vec<(String, Option<String>, SocketAddr)> = decks
        .iter()
        .map(|(m, port)| {
            (
                host(*m),
                Some(id(*m)),
                SocketAddr::from(([127, 0, 0, 1], *port)),
            )
        })
        .collect();
    assert_eq!(hosts, want);
    let idx = discovery::index(&found);
    // A fleet naming one deck by MAC and one by host name; the third deck is not in it.
    let d = tempfile::tempdir().unwrap();
    let pair = |name: &str| {
        let (_, rx) = gapstream::run::fresh_pairing().unwrap();
        let p = d.path().join(format!("{name}.key"));
        std::fs::write(
            &p,
            rx.to_pairing_text(gapstream_protocol::handshake::Role::Receiver),
        )
        .unwrap();
        p
    };
    let (ka, kb) = (pair("a"), pair("b"));
    // alpha by its MAC written with colons, bravo by its host name in lower case, charlie by a
    // host name nobody announces.
    let colons = |m: [u8; 6]| {
        m.iter()
            .map(|b| format!("{b:02x}"))
            .collect::<Vec<_>>()
            .join(":")
    };
    let text = format!(
        "[[drone]]\nname = \"alpha\"\nid = \"{}\"\nreceiver_key = \"{}\"\n\n[[drone]]\nname = \"bravo\"\nid = \"{}\"\nreceiver_key = \"{}\"\n\n[[drone]]\nname = \"charlie\"\nid = \"{}\"\nreceiver_key = \"{}\"\n",
        colons(mac(1)),
        ka.display(),
        host(mac(2)).to_lowercase(),
        kb.display(),
        host(mac(0xFF)),
        kb.display()
    );
    let fleet = Fleet::parse(&text, Path::new("."), "t.toml").unwrap();
    let sec = Security::Secure {
        suite: Suite::ChaCha20Poly1305,
        kex: KexMode::X25519,
    };
    let (members, missing) = ground::members(&fleet, &sec, 1020, &idx).unwrap();
    let got: BTreeMap<String, SocketAddr> =
        members.iter().map(|m| (m.name.clone(), m.bridge)).collect();
    assert_eq!(
        got,
        BTreeMap::from([
            ("alpha".to_string(), "127.0.0.1:47001".parse().unwrap()),
            ("bravo".to_string(), "127.0.0.1:47002".parse().unwrap()),
        ])
    );
    // The member that is not on the network is named; the deck that is not in the fleet (the
    // third) is connected by nobody.
    assert_eq!(missing, ["charlie"]);
    assert!(members.iter().all(|m| m.bridge.port() != 47003));
    drop(ads);
}
