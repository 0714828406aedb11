//! The RSA mode's drone side runs on QEMU rv32 (`rv32_qemu/src/bin/protocol_handshake.rs`), but the
//! receiver side needs the `rsa` crate, which does not build for riscv32imc. So the rv32 program
//! checks its ACCEPT byte-for-byte against `testdata/rv32_rsa_accept.hex`, and this host test makes
//! the same ACCEPT from the same inputs and completes the handshake with the RSA private key.
//! The inputs below must stay identical to the rv32 program's.

use crate::handshake::{
    DronePolicy, HelloMacKey, Identity, Offer, ReceiverHandshake, StaticSecret, respond,
};
use crate::suite::{KexMode, Suite};
use crate::test_util::{TestRng, hex, to_hex};
use alloc::vec::Vec;

const GOLDEN: &str = include_str!("../testdata/rv32_rsa_accept.hex");
/// The drone's boot counter in the golden ACCEPT (the rv32 program uses the same).
const BOOT: u32 = 3;
/// The HELLO's time (the rv32 program uses the same).
const HELLO_TIME: u64 = 1_700_000_000_000_000_000;

fn make() -> (
    Vec<u8>,
    Vec<u8>,
    ReceiverHandshake,
    crate::handshake::Established,
) {
    let d = StaticSecret::from_bytes([0xD1; 32]);
    let r = StaticSecret::from_bytes([0x2E; 32]);
    let drone = Identity {
        peer_public: r.public(),
        local: d.clone(),
    };
    let receiver = Identity {
        peer_public: d.public(),
        local: r,
    };
    let n: [u8; 256] = hex(crate::test_util::RSA_TEST_N).try_into().unwrap();
    let offer = Offer {
        suites: &[Suite::ChaCha20Poly1305],
        modes: &[KexMode::RsaOaep2048],
        rsa_modulus: Some(&n),
    };
    let (rh, hello) =
        ReceiverHandshake::start(&receiver, HELLO_TIME, &offer, &mut TestRng::new(100)).unwrap();
    let (est, accept) = respond(
        &drone,
        &HelloMacKey::derive(&drone.local, &drone.peer_public),
        &DronePolicy::default(),
        BOOT,
        &mut TestRng::new(200),
        &hello,
    )
    .unwrap();
    (hello, accept, rh, est)
}

#[test]
fn rsa_accept_matches_golden_and_completes() {
    let (_, accept, mut rh, drone) = make();
    assert_eq!(
        to_hex(&accept),
        GOLDEN.trim(),
        "regenerate with print_rv32_golden if the protocol changed"
    );
    let key = crate::rsa_oaep::tests::test_key();
    let mut dec = |ct: &[u8]| {
        key.decrypt(&mut TestRng::new(1), ct)
            .map_err(crate::handshake::HandshakeError::Rsa)
    };
    let rx = rh.finish(&accept, &mut dec).unwrap();
    assert_eq!(
        (rx.suite, rx.mode),
        (Suite::ChaCha20Poly1305, KexMode::RsaOaep2048)
    );
    assert_eq!(rx.secret.bytes(), drone.secret.bytes());
}

#[test]
fn rv32_modulus_file_is_the_test_key() {
    assert_eq!(
        include_str!("../testdata/rsa_test_n.hex").trim(),
        hex_str(crate::test_util::RSA_TEST_N)
    );
}

fn hex_str(s: &str) -> alloc::string::String {
    s.chars()
        .filter(|c| !c.is_whitespace() && *c != '\\')
        .collect()
}

#[test]
#[ignore = "prints testdata/rv32_rsa_accept.hex"]
fn print_rv32_golden() {
    extern crate std;
    std::println!("{}", to_hex(&make().1));
}
