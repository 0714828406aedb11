//! mDNS on the loopback interface only (nothing leaves the machine): bridges announced as stock
//! decks are found by `gapstream::discovery` with their host name, TXT id and address; a fleet
//! connects its members only, and a deck outside the fleet is listed, not connected.
//!
//! Where the loopback interface cannot carry multicast (some containers), the test says so in one
//! line and checks nothing else.

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
    let decks = [
        ([0x02, 0x67, 0x73, 0xD0, 0x00, 0x01], 47001u16),
        ([0x02, 0x67, 0x73, 0xD0, 0x00, 0x02], 47002),
        ([0xA1, 0xB2, 0xC3, 0xD4, 0xE5, 0xF6], 47003),
    ];
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
    let found = discovery::browse(&Interfaces::Loopback, Duration::from_secs(8), |f| {
        f.len() >= 3
    })
    .unwrap();
    if found.is_empty() {
        eprintln!(
            "skipped: mDNS found nothing on the loopback interface (no multicast on lo here); nothing checked"
        );
        return;
    }
    let hosts: Vec<(&str, Option<&str>, SocketAddr)> = found
        .iter()
        .map(|f| (f.host.as_str(), f.id.as_deref(), f.addr))
        .collect();
    assert_eq!(
        hosts,
        [
            (
                "aideck-D00001",
                Some("026773D00001"),
                "127.0.0.1:47001".parse().unwrap()
            ),
            (
                "aideck-D00002",
                Some("026773D00002"),
                "127.0.0.1:47002".parse().unwrap()
            ),
            (
                "aideck-D4E5F6",
                Some("A1B2C3D4E5F6"),
                "127.0.0.1:47003".parse().unwrap()
            ),
        ]
    );
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
    let text = format!(
        "[[drone]]\nname = \"alpha\"\nid = \"02:67:73:d0:00:01\"\nreceiver_key = \"{}\"\n\n[[drone]]\nname = \"bravo\"\nid = \"aideck-d00002\"\nreceiver_key = \"{}\"\n\n[[drone]]\nname = \"charlie\"\nid = \"aideck-0000FF\"\nreceiver_key = \"{}\"\n",
        ka.display(),
        kb.display(),
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
    // The member that is not on the network is named; the deck that is not in the fleet
    // (aideck-D4E5F6) is connected by nobody.
    assert_eq!(missing, ["charlie"]);
    assert!(members.iter().all(|m| m.bridge.port() != 47003));
    drop(ads);
}
