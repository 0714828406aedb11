//! Message headers (wire) and sealed messages (frame).

use std::sync::OnceLock;

use gap_rust_cipher_s::Sequential;
use gapstream_protocol::frame::{
    self, FrameMeta, control_header, frame_layout, open_control, open_frame,
};
use gapstream_protocol::handshake::hello_ids;
use gapstream_protocol::keys::{DirectionKey, GroupKeys, GroupSecret};
use gapstream_protocol::suite::Suite;
use gapstream_protocol::wire::{
    self, ALERT_LEN, CONTROL_HEADER_LEN, ControlHeader, FRAME_HEADER_LEN, FrameHeader,
    GroupKeyBody, HANDSHAKE_HEADER_LEN, HandshakeHeader, MsgType, PixelFormat, WireError,
};

use crate::Input;

/// `wire_decode`: input `suite selector u8, message...`. Every header decoder on the message.
/// Invariants: whatever decodes re-encodes to the same bytes; `message_len` (what the reassembler
/// sizes messages by) never changes its answer once it has one as more bytes of the message
/// arrive, and never announces less than the header; `frame_layout` / `control_header` accept
/// only messages of exactly the announced length.
pub fn wire_decode(data: &[u8]) {
    let mut i = Input::new(data);
    let suite = Suite::ALL[i.byte() as usize % Suite::ALL.len()];
    let b = i.rest();

    let t = wire::parse_prefix(b);
    let mut settled: Option<Result<usize, WireError>> = None;
    for k in 0..=b.len().min(80) {
        let r = wire::message_len(&b[..k]);
        match (settled, r) {
            (None, Ok(None)) => {}
            (None, Ok(Some(n))) => settled = Some(Ok(n)),
            (None, Err(e)) => settled = Some(Err(e)),
            (Some(Ok(n)), r) => assert_eq!(r, Ok(Some(n)), "message_len changed at {k}"),
            (Some(Err(_)), r) => assert!(r.is_err(), "message_len recovered at {k}: {r:?}"),
        }
    }
    if let Some(Ok(n)) = settled {
        let t = t.expect("a sized message has a valid prefix");
        let min = match t {
            MsgType::Frame => FRAME_HEADER_LEN,
            MsgType::Hello | MsgType::Accept => HANDSHAKE_HEADER_LEN,
            MsgType::Alert => ALERT_LEN,
            _ => CONTROL_HEADER_LEN,
        };
        assert!(n >= min, "{t:?} announced {n} bytes");
    }

    if let Ok(h) = FrameHeader::decode(b) {
        // 36 bytes, or 88 with the state record (its bytes kept as they came).
        assert_eq!(h.encode()[..], b[..h.header_len()]);
        let _ = h.state_record();
    }
    if let Ok(h) = frame_layout(b, suite) {
        assert_eq!(
            b.len(),
            h.header_len() + h.payload_len as usize + suite.tag_len()
        );
    }
    if let Ok(h) = ControlHeader::decode(b) {
        assert_eq!(h.encode()[..], b[..CONTROL_HEADER_LEN]);
        assert!(h.msg_type.is_control());
    }
    if let Ok(h) = control_header(b) {
        assert_eq!(
            b.len(),
            CONTROL_HEADER_LEN + h.body_len as usize + gapstream_protocol::aead::TAG_LEN
        );
    }
    if let Ok((h, noise)) = HandshakeHeader::decode(b) {
        assert_eq!(h.encode()[..], b[..HANDSHAKE_HEADER_LEN]);
        assert_eq!(noise.len(), h.noise_len as usize);
        assert_eq!(settled, Some(Ok(b.len())));
    }
    if let Ok((id, key_id)) = hello_ids(b) {
        assert_eq!((&id[..], &key_id[..]), (&b[4..12], &b[12..16]));
    }
    if let Ok((id, code)) = wire::decode_alert(b) {
        assert_eq!(b.len(), ALERT_LEN);
        assert_eq!((&id[..], code), (&b[4..12], b[12]));
    }
    if let Some(g) = GroupKeyBody::decode(b) {
        assert_eq!(g.encode()[..], b[..]);
    }
}

/// The fixed keys the `frame_open` target opens with: a group frame key per suite (epoch 7) and,
/// for control messages, a ChaCha20-Poly1305 key. The seeds are sealed under the same keys.
pub fn fuzz_keys() -> &'static [(Suite, DirectionKey)] {
    static KEYS: OnceLock<Vec<(Suite, DirectionKey)>> = OnceLock::new();
    KEYS.get_or_init(|| {
        Suite::ALL
            .iter()
            .map(|&s| {
                let g =
                    GroupKeys::derive(&mut Sequential, &GroupSecret::from_bytes([0x42; 32]), 7, s)
                        .expect("key derivation");
                (s, g.frame)
            })
            .collect()
    })
}

/// `frame_open`: input `selector u8, where u16, message...`. Selector bits 0-2: suite (modulo 5),
/// bit 3: control message (always ChaCha20-Poly1305) instead of frame, bit 4: seal the message
/// bytes as a payload and open them again. Invariants: a message that opens has exactly the
/// announced length; under an authenticated suite, changing any one byte (`where`) makes it fail;
/// sealing then opening gives the plaintext back.
pub fn frame_open(data: &[u8]) {
    let mut i = Input::new(data);
    let sel = i.byte();
    let at = i.u16() as usize;
    let msg = i.rest();
    let keys = fuzz_keys();
    let (suite, key) = &keys[(sel & 7) as usize % keys.len()];
    let (suite, control) = if sel & 8 != 0 {
        (Suite::ChaCha20Poly1305, true)
    } else {
        (*suite, false)
    };
    let key = if control { &keys[0].1 } else { key };

    if sel & 16 != 0 {
        seal_open_round_trip(suite, key, control, msg);
        return;
    }
    let open = |m: &mut [u8]| -> bool {
        if control {
            open_control(&mut Sequential, key, m).is_ok()
        } else {
            open_frame(&mut Sequential, key, m).is_ok()
        }
    };
    let mut m = msg.to_vec();
    if !open(&mut m) {
        return;
    }
    if suite.is_authenticated() && !msg.is_empty() {
        let mut t = msg.to_vec();
        let p = at % t.len();
        t[p] ^= 1 << (at >> 13);
        assert!(!open(&mut t), "{suite:?} opened with byte {p} changed");
    }
}

fn seal_open_round_trip(suite: Suite, key: &DirectionKey, control: bool, plain: &[u8]) {
    if control {
        let body = &plain[..plain.len().min(wire::MAX_CONTROL_BODY)];
        let mut out = vec![0u8; CONTROL_HEADER_LEN + body.len() + 16];
        let n = frame::seal_control(
            &mut Sequential,
            key,
            MsgType::Keepalive,
            [9; 8],
            3,
            body,
            &mut out,
        )
        .expect("a control message of at most 64 bytes seals");
        let (h, b) = open_control(&mut Sequential, key, &mut out[..n]).expect("opens");
        assert_eq!(
            (h.msg_type, h.body_len as usize, b),
            (MsgType::Keepalive, body.len(), body)
        );
        return;
    }
    let meta = FrameMeta {
        pixel_format: PixelFormat::Grey8,
        width: plain.len() as u16,
        height: 1,
        capture_ns: 5,
        // Every other input's frame carries a state record made of its bytes.
        state: (plain.len() % 2 == 1).then(|| {
            let mut sample = [0u8; 28];
            for (d, s) in sample.iter_mut().zip(plain.iter().cycle()) {
                *d = *s;
            }
            gapstream_protocol::state::StateRecord {
                flags: gapstream_protocol::state::VALID,
                arrival_us: plain.len() as u64,
                exposure_end_us: 5,
                sample: gapstream_protocol::state::StateSample::decode_fields(7, &sample),
            }
        }),
    };
    let header = FrameHeader {
        suite: suite as u8,
        pixel_format: meta.pixel_format.code(),
        width: meta.width,
        height: meta.height,
        epoch: 7,
        sequence: plain.len() as u64,
        capture_ns: meta.capture_ns,
        payload_len: plain.len() as u32,
        state: meta.state.map(|r| r.encode()),
    };
    let mut payload = plain.to_vec();
    let sealed = frame::seal_frame(&mut Sequential, key, &header, &mut payload).expect("seals");
    let mut m = sealed.header.to_vec();
    m.extend_from_slice(&payload);
    m.extend_from_slice(sealed.tag());
    let h = open_frame(&mut Sequential, key, &mut m).expect("a sealed frame opens");
    assert_eq!(h, header);
    assert_eq!(h.state_record(), meta.state.map(Ok));
    let at = h.header_len();
    assert_eq!(&m[at..at + plain.len()], plain);
}
