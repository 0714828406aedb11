//! `docs/protocol.md`'s UDP registration vectors are checked here: every fenced block tagged
//! ```` ```udp-hex <name> ```` in the document is compared with what the bridge's code produces
//! for the inputs the document states (the blocks tagged ```` ```hex ```` are
//! `gapstream_protocol`'s). Every vector defined here must be in the document and vice versa.
//!
//! `cargo test -p esp32_bridge print_udp_vectors -- --ignored --nocapture` prints them.

use alloc::string::String;
use alloc::vec::Vec;
use core::net::SocketAddr;
use sha2::{Digest, Sha256};

use super::*;
use crate::forward::{Bridge, Config};

const DOC: &str = include_str!("../../../docs/protocol.md");

/// The document's inputs: the bridge's secret 00 01 … 1f, the receiver at 192.168.4.2:5000, a
/// request at 1000 ms of the bridge's clock, the echo at 1010 ms, the first probe at 2010 ms.
fn secret() -> [u8; 32] {
    core::array::from_fn(|i| i as u8)
}
fn receiver() -> SocketAddr {
    SocketAddr::from(([192, 168, 4, 2], 5000))
}

/// Every vector: (name, bytes), made by the bridge's [`Gate`] exactly as it runs.
fn vectors() -> Vec<(&'static str, Vec<u8>)> {
    let mut v = Vec::new();
    let (pb, pl) = peer_bytes(receiver());
    let peer = pb[..pl].to_vec();
    v.push(("udp-address", peer.clone()));
    let mut input = LABEL_COOKIE.to_vec();
    input.extend_from_slice(&1000u32.to_le_bytes());
    input.extend_from_slice(&peer);
    v.push(("udp-cookie-mac-input", input));
    let mut bridge = Bridge::new(Config::default());
    let mut gate = Gate::new(secret(), GateConfig::default());
    let request = Control::Request.encode();
    v.push(("udp-request", request.to_vec()));
    let Outcome::Reply(cookie) = gate.datagram(&mut bridge, receiver(), &request, 1000) else {
        panic!("no cookie")
    };
    v.push(("udp-cookie", cookie.to_vec()));
    let Some(Control::Cookie(c)) = Control::parse(&cookie) else {
        panic!("not a cookie")
    };
    let echo = Control::Echo(c).encode();
    v.push(("udp-echo", echo.to_vec()));
    let Outcome::Registered { welcome, .. } = gate.datagram(&mut bridge, receiver(), &echo, 1010)
    else {
        panic!("not registered")
    };
    v.push(("udp-welcome", welcome.to_vec()));
    let mut probe = None;
    gate.poll(
        &mut bridge,
        2010,
        || None,
        |e| {
            if let Event::Probe(_, d) = e {
                probe = Some(d)
            }
        },
    );
    let probe = probe.expect("a probe at 2010 ms");
    v.push(("udp-probe", probe.to_vec()));
    let Some(Control::Probe(p)) = Control::parse(&probe) else {
        panic!("not a probe")
    };
    let alive = Control::Alive(p).encode();
    assert!(matches!(
        gate.datagram(&mut bridge, receiver(), &alive, 2020),
        Outcome::Refreshed(_)
    ));
    v.push(("udp-alive", alive.to_vec()));
    let leave = Control::Leave(p).encode();
    assert!(matches!(
        gate.datagram(&mut bridge, receiver(), &leave, 2030),
        Outcome::Left(_)
    ));
    v.push(("udp-leave", leave.to_vec()));
    v
}

#[test]
fn doc_udp_hex_blocks_match_the_bridge() {
    let code: Vec<(String, Vec<u8>)> = vectors()
        .into_iter()
        .map(|(n, b)| (String::from(n), b))
        .collect();
    doc_vectors::check("docs/protocol.md", DOC, "udp-hex", "", &code);
}

/// HMAC-SHA-256 written out from its definition (RFC 2104) over the `sha2` crate alone.
fn hmac_sha256(key: &[u8; 32], m: &[u8]) -> [u8; 32] {
    let mut k = [0u8; 64];
    k[..32].copy_from_slice(key);
    let pad = |b: u8| -> Vec<u8> { k.iter().map(|x| x ^ b).collect() };
    let inner = Sha256::new()
        .chain_update(pad(0x36))
        .chain_update(m)
        .finalize();
    Sha256::new()
        .chain_update(pad(0x5c))
        .chain_update(inner)
        .finalize()
        .into()
}

/// The documented cookie and probe tokens are the first 16 bytes of HMAC-SHA-256 as written in
/// RFC 2104, over the documented input: computed here without the `hmac` crate.
#[test]
fn doc_tokens_are_hmac_sha256_of_label_time_and_address() {
    let v = vectors();
    let get = |n: &str| v.iter().find(|(k, _)| *k == n).unwrap().1.clone();
    let peer = get("udp-address");
    assert_eq!(peer, [0x04, 192, 168, 4, 2, 0x13, 0x88]);
    let input = get("udp-cookie-mac-input");
    let cookie = get("udp-cookie");
    assert_eq!(&cookie[..4], b"GSCK");
    assert_eq!(&cookie[4..8], &1000u32.to_le_bytes());
    assert_eq!(&cookie[8..], &hmac_sha256(&secret(), &input)[..16]);
    for (name, magic, issued) in [
        ("udp-welcome", b"GSCW", 1010u32),
        ("udp-probe", b"GSCP", 2010),
        ("udp-alive", b"GSCA", 2010),
        ("udp-leave", b"GSCL", 2010),
    ] {
        let d = get(name);
        let mut m = LABEL_PROBE.to_vec();
        m.extend_from_slice(&issued.to_le_bytes());
        m.extend_from_slice(&peer);
        assert_eq!(&d[..4], magic, "{name}");
        assert_eq!(&d[4..8], &issued.to_le_bytes(), "{name}");
        assert_eq!(&d[8..], &hmac_sha256(&secret(), &m)[..16], "{name}");
    }
    assert!(DOC.contains(core::str::from_utf8(LABEL_COOKIE).unwrap()));
    assert!(DOC.contains(core::str::from_utf8(LABEL_PROBE).unwrap()));
}

#[test]
#[ignore = "prints the vectors for docs/protocol.md"]
fn print_udp_vectors() {
    extern crate std;
    for (name, bytes) in vectors() {
        std::println!("```udp-hex {name}\n{}\n```", doc_vectors::hex_lines(&bytes));
    }
}
