//! `docs/protocol.md` is checked here: every fenced block tagged ```` ```hex <name> ```` in the
//! document is parsed and compared with what the encoders of this crate produce for the inputs the
//! document states. Every vector the code defines must appear in the document and vice versa.
//!
//! `cargo test -p gapstream_protocol print_spec_vectors -- --ignored --nocapture` prints them.

use alloc::string::String;
use alloc::vec::Vec;

use crate::aead::PayloadKey;
use crate::compat::StockStreamer;
use crate::cpx::{self, Function, Route, Target};
use crate::frame;
use crate::handshake::{
    HelloMacKey, StaticSecret, encode_choice, encode_offer, hello_mac, receiver_key_id,
};
use crate::keys::{DirectionKey, GroupKeys, GroupPool, IvBytes, SessionKeys, SessionSecret};
use crate::suite::{KexMode, Suite};
use crate::wire::{self, AlertCode, FrameHeader, GroupKeyBody, MsgType, PixelFormat};
use gap_rust_cipher_s::Sequential;
use sha2::Digest;

const DOC: &str = include_str!("../../docs/protocol.md");

fn seq_bytes(start: u8, n: usize) -> Vec<u8> {
    (0..n).map(|i| start.wrapping_add(i as u8)).collect()
}

fn dkey(suite: Suite, key: &[u8], iv_start: u8) -> DirectionKey {
    DirectionKey {
        key: PayloadKey::new(&mut Sequential, suite, key).unwrap(),
        iv: IvBytes(seq_bytes(iv_start, 12).try_into().unwrap()),
    }
}

fn small_header(suite: Suite) -> FrameHeader {
    FrameHeader {
        padded: false,
        suite: suite as u8,
        pixel_format: PixelFormat::Grey8.code(),
        width: 4,
        height: 4,
        epoch: 0,
        sequence: 1,
        capture_ns: 1000,
        payload_len: 16,
        state: None,
    }
}

fn sealed(suite: Suite, key: &[u8]) -> Vec<u8> {
    let k = dkey(suite, key, 0xA0);
    let mut payload = b"gapstream frame!".to_vec();
    let s = frame::seal_frame(&mut Sequential, &k, &small_header(suite), &mut payload).unwrap();
    let mut m = s.header.to_vec();
    m.extend_from_slice(&payload);
    m.extend_from_slice(s.tag());
    m
}

/// The padded vectors: `gapstream frame!` as a 4×4 JPEG frame's coded payload, padded to the
/// next power of two (16 + 4 → 32 bytes), flag `PADDED`.
fn sealed_padded(suite: Suite, key: &[u8]) -> Vec<u8> {
    let k = dkey(suite, key, 0xA0);
    let mut payload = b"gapstream frame!".to_vec();
    assert!(crate::padding::pad(
        &mut payload,
        crate::padding::Padding::Pow2,
        79_056
    ));
    let h = FrameHeader {
        padded: true,
        pixel_format: PixelFormat::Jpeg.code(),
        payload_len: payload.len() as u32,
        ..small_header(suite)
    };
    let s = frame::seal_frame(&mut Sequential, &k, &h, &mut payload).unwrap();
    let mut m = s.header.to_vec();
    m.extend_from_slice(&payload);
    m.extend_from_slice(s.tag());
    m
}

/// The documented HELLO header: hello id `01 … 08`, key id `11 22 33 44`, a 71-byte Noise message,
/// hello time 1 700 000 000 123 456 789 ns.
fn hello_header() -> [u8; wire::HELLO_HEADER_LEN] {
    wire::HelloHeader {
        hello_id: seq_bytes(1, 8).try_into().unwrap(),
        key_id: [0x11, 0x22, 0x33, 0x44],
        noise_len: 71,
        time: 1_700_000_000_123_456_789,
    }
    .encode()
}

/// The documented static keys of the HELLO MAC vectors: the drone's secret `00 … 1f`, the
/// receiver's `20 … 3f`.
fn mac_pair() -> (StaticSecret, StaticSecret) {
    (
        StaticSecret::from_bytes(seq_bytes(0, 32).try_into().unwrap()),
        StaticSecret::from_bytes(seq_bytes(0x20, 32).try_into().unwrap()),
    )
}

/// What the documented MAC covers: the HELLO header above and 71 Noise bytes `00 … 46`.
fn mac_input() -> Vec<u8> {
    let mut m = hello_header().to_vec();
    m.extend(seq_bytes(0, 71));
    m
}

/// The state record of docs/protocol.md §6: a sample with STM32 time 12 345 678 µs that arrived at
/// 2 000 000 µs of the drone's clock, a frame whose exposure ended at 2 004 500 µs (4.5 ms later:
/// fresh); position (1500, −250, 1000) mm, velocity (−120, 700, 0) mm/s, acceleration
/// (−90, −15, 0) mm/s², yaw 45° (quaternion (0, 0, sin 22.5°, cos 22.5°)), body rates (0, 0, 785)
/// mrad/s.
fn doc_state_record() -> crate::state::StateRecord {
    use crate::state::{StateRecord, StateSample, quat};
    let sample = StateSample {
        stm32_us: 12_345_678,
        position_mm: [1500, -250, 1000],
        velocity_mm_s: [-120, 700, 0],
        accel_mm_s2: [-90, -15, 0],
        // sin 22.5°, cos 22.5° as f32.
        quat: quat::compress([0.0, 0.0, 0.382_683_43, 0.923_879_5]),
        rates_mrad_s: [0, 0, 785],
    };
    StateRecord::new(Some((sample, 2_000_000)), 2_004_500, 50_000)
}

/// Every vector of the document: (name, bytes).
fn vectors() -> Vec<(&'static str, Vec<u8>)> {
    let mut v = Vec::new();
    let route = Route::new(Target::Gap8, Target::WifiHost, Function::Test);
    v.push(("cpx-route", route.to_bytes().to_vec()));
    // Receiver -> drone (what the receivers send; the bridge forwards it to the GAP8).
    let up = Route::new(Target::WifiHost, Target::Gap8, Function::Test);
    v.push(("cpx-route-to-drone", up.to_bytes().to_vec()));
    let mut out = [0u8; 16];
    let n = cpx::encode_packet(route.with_last(false), &[0x47, 0x53, 0x03], &mut out).unwrap();
    v.push(("cpx-packet", out[..n].to_vec()));
    let image = [0u8; 324 * 244];
    let mut st = StockStreamer::raw(&image, 324, 244, 1020).unwrap();
    let mut out = [0u8; cpx::MAX_WIRE_PACKET];
    let n = st.next_packet(&mut out).unwrap().unwrap();
    v.push(("stock-header-packet", out[..n].to_vec()));
    let n = cpx::encode_packet(
        crate::compat::CLIENT_STATUS_ROUTE,
        &crate::compat::client_status_payload(true),
        &mut out,
    )
    .unwrap();
    v.push(("client-status-packet", out[..n].to_vec()));
    let h = FrameHeader {
        padded: false,
        suite: Suite::ChaCha20Poly1305 as u8,
        pixel_format: PixelFormat::Grey8.code(),
        width: 324,
        height: 244,
        epoch: 2,
        sequence: 0x0102_0304_0506_0708,
        capture_ns: 1_700_000_000_123_456_789,
        payload_len: 79_056,
        state: None,
    };
    v.push(("frame-header", h.encode().to_vec()));
    v.push((
        "nonce",
        wire::nonce(
            &seq_bytes(0xA0, 12).try_into().unwrap(),
            0x0102_0304_0506_0708,
        )
        .to_vec(),
    ));
    v.push((
        "frame-chacha20poly1305",
        sealed(Suite::ChaCha20Poly1305, &seq_bytes(0, 32)),
    ));
    v.push((
        "frame-aes128gcm",
        sealed(Suite::Aes128Gcm, &seq_bytes(0, 16)),
    ));
    v.push((
        "frame-chacha20-unauthenticated",
        sealed(Suite::ChaCha20Unauthenticated, &seq_bytes(0, 32)),
    ));
    v.push((
        "frame-aes128ctr-unauthenticated",
        sealed(Suite::Aes128CtrUnauthenticated, &seq_bytes(0, 16)),
    ));
    v.push(("frame-none", sealed(Suite::None, &[])));
    v.push(("frame-padded-none", sealed_padded(Suite::None, &[])));
    v.push((
        "frame-padded-chacha20poly1305",
        sealed_padded(Suite::ChaCha20Poly1305, &seq_bytes(0, 32)),
    ));
    let rec = doc_state_record();
    v.push(("state-record", rec.encode().to_vec()));
    let k = dkey(Suite::ChaCha20Poly1305, &seq_bytes(0, 32), 0xA0);
    let mut payload = b"gapstream frame!".to_vec();
    let h = FrameHeader {
        state: Some(rec.encode()),
        ..small_header(Suite::ChaCha20Poly1305)
    };
    let s = frame::seal_frame(&mut Sequential, &k, &h, &mut payload).unwrap();
    let mut m = s.header.to_vec();
    m.extend_from_slice(&payload);
    m.extend_from_slice(s.tag());
    v.push(("frame-chacha20poly1305-state", m));
    let ck = dkey(Suite::ChaCha20Poly1305, &seq_bytes(0x40, 32), 0xC0);
    let mut out = [0u8; 96];
    let body = GroupKeyBody {
        epoch: 4,
        first_sequence: 1000,
        secret: crate::keys::GroupSecret::from_slice(&seq_bytes(0x60, 32)).unwrap(),
    }
    .encode();
    let n = frame::seal_control(
        &mut Sequential,
        &ck,
        MsgType::GroupKey,
        seq_bytes(1, 8).try_into().unwrap(),
        5,
        &body[..],
        &mut out,
    )
    .unwrap();
    v.push(("control-group-key", out[..n].to_vec()));
    let n = frame::seal_control(
        &mut Sequential,
        &ck,
        MsgType::SetQuality,
        seq_bytes(1, 8).try_into().unwrap(),
        3,
        &[50],
        &mut out,
    )
    .unwrap();
    v.push(("control-set-quality", out[..n].to_vec()));
    v.push((
        "alert",
        wire::encode_alert(
            seq_bytes(1, 8).try_into().unwrap(),
            AlertCode::AuthenticationFailed,
        )
        .to_vec(),
    ));
    v.push(("hello-header", hello_header().to_vec()));
    let (drone, receiver) = mac_pair();
    let key = HelloMacKey::derive(&drone, &receiver.public());
    v.push(("hello-mac-key", key.bytes().to_vec()));
    v.push(("hello-mac", hello_mac(&key, &mac_input()).to_vec()));
    v.push((
        "accept-header",
        wire::HandshakeHeader {
            msg_type: MsgType::Accept,
            hello_id: seq_bytes(1, 8).try_into().unwrap(),
            key_id: [0x11, 0x22, 0x33, 0x44],
            noise_len: 56,
        }
        .encode()
        .to_vec(),
    ));
    v.push((
        "offer-payload",
        encode_offer(
            &[Suite::ChaCha20Poly1305, Suite::Aes128Gcm],
            &[(KexMode::X25519, &[])],
        ),
    ));
    v.push((
        "choice-payload",
        encode_choice(Suite::ChaCha20Poly1305, KexMode::X25519, 7, &[]),
    ));
    v.push((
        "receiver-key-id",
        receiver_key_id(&seq_bytes(0, 32).try_into().unwrap()).to_vec(),
    ));
    // Key schedule.
    let h = sha2::Sha256::digest(b"gapstream test vector transcript");
    let s = SessionSecret::initial(&h, &[0x11; 32], &[0x22; 32], &[]);
    let sk = SessionKeys::derive(&mut Sequential, &s).unwrap();
    v.push(("schedule-session-secret", s.bytes().to_vec()));
    v.push((
        "schedule-d2r-control-key",
        sk.d2r_control.key.key().to_vec(),
    ));
    v.push(("schedule-d2r-control-iv", sk.d2r_control.iv.0.to_vec()));
    v.push((
        "schedule-r2d-control-key",
        sk.r2d_control.key.key().to_vec(),
    ));
    let mut pool = GroupPool::new();
    pool.absorb(&s.contribution());
    v.push(("schedule-pool-after-handshake", pool.bytes().to_vec()));
    let g0 = pool.draw(&[0x33; 32], 0);
    v.push(("schedule-group-secret-epoch0", g0.bytes().to_vec()));
    v.push(("schedule-pool-after-epoch0", pool.bytes().to_vec()));
    let k0 = GroupKeys::derive(&mut Sequential, &g0, 0, Suite::ChaCha20Poly1305).unwrap();
    v.push(("schedule-epoch0-frame-key", k0.frame.key.key().to_vec()));
    v.push(("schedule-epoch0-frame-iv", k0.frame.iv.0.to_vec()));
    let g1 = pool.draw(&[0x33; 32], 1);
    let k1 = GroupKeys::derive(&mut Sequential, &g1, 1, Suite::Aes128Gcm).unwrap();
    v.push(("schedule-epoch1-gcm-frame-key", k1.frame.key.key().to_vec()));
    v
}

/// The ```` ```hex name ```` blocks of the document.
fn doc_blocks() -> Vec<(String, Vec<u8>)> {
    doc_vectors::blocks(DOC, "hex")
}

#[test]
fn doc_hex_blocks_match_the_encoders() {
    let code: Vec<(String, Vec<u8>)> = vectors()
        .into_iter()
        .map(|(n, b)| (String::from(n), b))
        .collect();
    doc_vectors::check("docs/protocol.md", DOC, "hex", "", &code);
}

/// The documented sealed frames open again, and the documented layout tables agree with the
/// constants.
#[test]
fn doc_frames_open_and_constants_agree() {
    for (name, suite, key) in [
        (
            "frame-chacha20poly1305",
            Suite::ChaCha20Poly1305,
            seq_bytes(0, 32),
        ),
        ("frame-aes128gcm", Suite::Aes128Gcm, seq_bytes(0, 16)),
    ] {
        let (_, mut m) = doc_blocks().into_iter().find(|(n, _)| n == name).unwrap();
        let k = dkey(suite, &key, 0xA0);
        frame::open_frame(&mut Sequential, &k, &mut m).unwrap();
        assert_eq!(&m[36..52], b"gapstream frame!");
    }
    // The padded frame opens, and its padding comes off to the same 16 bytes.
    let (_, mut m) = doc_blocks()
        .into_iter()
        .find(|(n, _)| n == "frame-padded-chacha20poly1305")
        .unwrap();
    let k = dkey(Suite::ChaCha20Poly1305, &seq_bytes(0, 32), 0xA0);
    let h = frame::open_frame(&mut Sequential, &k, &mut m).unwrap();
    assert!(h.padded);
    assert_eq!(&m[10..12], &wire::FRAME_FLAG_PADDED.to_le_bytes());
    let n = crate::padding::unpad(&m[36..36 + h.payload_len as usize]).unwrap();
    assert_eq!(&m[36..36 + n], b"gapstream frame!");
    let (_, mut m) = doc_blocks()
        .into_iter()
        .find(|(n, _)| n == "frame-chacha20poly1305-state")
        .unwrap();
    let k = dkey(Suite::ChaCha20Poly1305, &seq_bytes(0, 32), 0xA0);
    let h = frame::open_frame(&mut Sequential, &k, &mut m).unwrap();
    assert_eq!(&m[88..104], b"gapstream frame!");
    assert_eq!(h.state_record(), Some(Ok(doc_state_record())));
    assert_eq!(doc_state_record().age_us(), Some(4_500));
    assert_eq!(wire::FRAME_HEADER_MAX_LEN, 88);
    assert_eq!(crate::state::STATE_RECORD_LEN, 52);
    assert_eq!(wire::FRAME_HEADER_LEN, 36);
    assert_eq!(wire::CONTROL_HEADER_LEN, 22);
    assert_eq!(wire::HANDSHAKE_HEADER_LEN, 18);
    assert_eq!(wire::HELLO_HEADER_LEN, 26);
    assert_eq!(wire::HELLO_MAC_LEN, 16);
    assert_eq!(wire::GROUP_KEY_BODY_LEN, 44);
    assert_eq!(wire::ALERT_LEN, 13);
    assert!(DOC.contains(crate::noise::PROTOCOL_NAME));
    assert!(DOC.contains(core::str::from_utf8(crate::rsa_oaep::LABEL).unwrap()));
    assert!(
        DOC.contains(
            core::str::from_utf8(crate::handshake::PROLOGUE)
                .unwrap()
                .trim_end()
        )
    );
}

/// The HELLO MAC vectors from their definitions, without this crate's HKDF / HMAC code: HMAC
/// (RFC 2104) over plain SHA-256, X25519 through `curve25519-dalek`; the key is the same from both
/// ends of the pairing.
#[test]
fn doc_hello_mac_is_hmac_sha256_under_the_static_dh() {
    fn hmac(key: &[u8], msg: &[u8]) -> [u8; 32] {
        let mut k = [0u8; 64];
        k[..key.len()].copy_from_slice(key);
        let inner: Vec<u8> = k
            .iter()
            .map(|b| b ^ 0x36)
            .chain(msg.iter().copied())
            .collect();
        let ih = sha2::Sha256::digest(&inner);
        let outer: Vec<u8> = k
            .iter()
            .map(|b| b ^ 0x5c)
            .chain(ih.iter().copied())
            .collect();
        sha2::Sha256::digest(&outer).into()
    }
    let (drone, receiver) = mac_pair();
    let dh = curve25519_dalek::montgomery::MontgomeryPoint(receiver.public())
        .mul_clamped(drone.to_bytes())
        .to_bytes();
    // HKDF-SHA256 with an empty info and 32 bytes: T(1) = HMAC(PRK, 0x01).
    let prk = hmac(handshake_label(), &dh);
    let key = hmac(&prk, &[1]);
    let doc = doc_blocks();
    let block = |n: &str| doc.iter().find(|(m, _)| m == n).unwrap().1.clone();
    assert_eq!(block("hello-mac-key"), key);
    assert_eq!(
        HelloMacKey::derive(&receiver, &drone.public()).bytes(),
        &key,
        "the receiver's end"
    );
    assert_eq!(block("hello-mac"), hmac(&key, &mac_input())[..16]);
}

fn handshake_label() -> &'static [u8] {
    crate::handshake::HELLO_MAC_LABEL
}

#[test]
#[ignore = "prints the vectors for docs/protocol.md"]
fn print_spec_vectors() {
    extern crate std;
    for (name, bytes) in vectors() {
        std::println!("```hex {name}\n{}\n```", doc_vectors::hex_lines(&bytes));
    }
}
