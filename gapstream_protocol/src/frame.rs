//! Sealing and opening FRAME and control messages on caller buffers (no allocation).
//!
//! A FRAME on the wire is `header (36, or 88 with the drone's state record) ‖ payload (payload_len)
//! ‖ tag (16, AEAD suites only)`; the whole header, state record included, is the associated data, the nonce is `frame iv XOR be64(sequence)` of the header's epoch.
//! A control message is `header (22) ‖ body ‖ tag (16)`, always ChaCha20-Poly1305 under the
//! session's control key of its direction, nonce `control iv XOR be64(control sequence)`.

use gap_rust_cipher_s::KeystreamApplier;

use crate::aead::{CryptoError, TAG_LEN};
use crate::keys::DirectionKey;
use crate::suite::Suite;
use crate::wire::{
    self, CONTROL_HEADER_LEN, ControlHeader, EncodedFrameHeader, FrameHeader, MsgType, WireError,
};

/// What the camera side knows about a frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FrameMeta {
    pub pixel_format: wire::PixelFormat,
    pub width: u16,
    pub height: u16,
    /// Capture time in nanoseconds (the drone's clock).
    pub capture_ns: u64,
    /// The drone's state when the exposure ended (`docs/protocol.md` §6), sealed into the
    /// header; None sends the 36-byte header without one.
    pub state: Option<crate::state::StateRecord>,
}

/// A sealed frame's header and tag; the payload was encrypted in place. Send
/// `header ‖ payload ‖ tag()` (see [`SealedFrame::packetizer`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SealedFrame {
    pub header: EncodedFrameHeader,
    tag: [u8; TAG_LEN],
    tag_len: usize,
}

impl SealedFrame {
    pub fn tag(&self) -> &[u8] {
        &self.tag[..self.tag_len]
    }
    /// Total message length for a payload of `payload_len` bytes.
    pub fn message_len(&self, payload_len: usize) -> usize {
        self.header.len() + payload_len + self.tag_len
    }
    /// CPX packets of `header ‖ payload ‖ tag`, `last_packet` on the final one.
    pub fn packetizer<'a>(
        &'a self,
        payload: &'a [u8],
        route: crate::cpx::Route,
        packet_payload: usize,
    ) -> Result<crate::cpx::Packetizer<'a>, crate::cpx::CpxError> {
        crate::cpx::Packetizer::new(
            route,
            [&self.header[..], payload, self.tag()],
            packet_payload,
            crate::cpx::LastFlag::Final,
        )
    }
}

/// Seals `payload` in place under `key` (whose suite must be `header.suite`).
pub fn seal_frame<K: KeystreamApplier + ?Sized>(
    k: &mut K,
    key: &DirectionKey,
    header: &FrameHeader,
    payload: &mut [u8],
) -> Result<SealedFrame, CryptoError> {
    if payload.len() != header.payload_len as usize {
        return Err(CryptoError::PayloadTooLong);
    }
    let hb = header.encode();
    let tag = key.key.seal(k, &key.nonce(header.sequence), &hb, payload)?;
    Ok(SealedFrame {
        header: hb,
        tag,
        tag_len: key.key.suite().tag_len(),
    })
}

/// Why a frame or control message was not opened.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OpenError {
    Wire(WireError),
    /// The message length disagrees with its header.
    Length {
        expected: usize,
        have: usize,
    },
    Crypto(CryptoError),
}

impl From<WireError> for OpenError {
    fn from(e: WireError) -> Self {
        OpenError::Wire(e)
    }
}
impl From<CryptoError> for OpenError {
    fn from(e: CryptoError) -> Self {
        OpenError::Crypto(e)
    }
}

impl core::fmt::Display for OpenError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            OpenError::Wire(e) => e.fmt(f),
            OpenError::Length { expected, have } => {
                write!(f, "message is {have} bytes, its header says {expected}")
            }
            OpenError::Crypto(e) => e.fmt(f),
        }
    }
}

/// Checks that `msg` is exactly one frame with `suite`'s tag length, returns its header.
pub fn frame_layout(msg: &[u8], suite: Suite) -> Result<FrameHeader, OpenError> {
    let h = FrameHeader::decode(msg)?;
    // Checked: on a 32-bit target 36 + a u32 payload length + 16 can wrap to a small number that
    // a short message matches.
    let expected = crate::wire::checked_len::<usize>(&[
        h.header_len() as u64,
        u64::from(h.payload_len),
        suite.tag_len() as u64,
    ])?;
    if msg.len() != expected {
        return Err(OpenError::Length {
            expected,
            have: msg.len(),
        });
    }
    Ok(h)
}

/// Opens a whole FRAME message in place; on success the plaintext is at
/// `msg[header_len..header_len + payload_len]` (`header_len` 36, or 88 with a state record). The caller has checked the header's suite and epoch and picked
/// `key` accordingly.
pub fn open_frame<K: KeystreamApplier + ?Sized>(
    k: &mut K,
    key: &DirectionKey,
    msg: &mut [u8],
) -> Result<FrameHeader, OpenError> {
    let h = frame_layout(msg, key.key.suite())?;
    let (hb, rest) = msg.split_at_mut(h.header_len());
    let (payload, tag) = rest.split_at_mut(h.payload_len as usize);
    key.key.open(k, &key.nonce(h.sequence), hb, payload, tag)?;
    Ok(h)
}

/// Seals a control message of session `session` into `out` (which must hold
/// `22 + body.len() + 16` bytes); returns its length.
#[allow(clippy::too_many_arguments)]
pub fn seal_control<K: KeystreamApplier + ?Sized>(
    k: &mut K,
    key: &DirectionKey,
    msg_type: MsgType,
    session: wire::SessionId,
    sequence: u64,
    body: &[u8],
    out: &mut [u8],
) -> Result<usize, CryptoError> {
    let n = CONTROL_HEADER_LEN + body.len() + TAG_LEN;
    if body.len() > wire::MAX_CONTROL_BODY || out.len() < n || !msg_type.is_control() {
        return Err(CryptoError::PayloadTooLong);
    }
    let h = ControlHeader {
        msg_type,
        session,
        sequence,
        body_len: body.len() as u16,
    }
    .encode();
    out[..CONTROL_HEADER_LEN].copy_from_slice(&h);
    let (hb, rest) = out[..n].split_at_mut(CONTROL_HEADER_LEN);
    let (b, t) = rest.split_at_mut(body.len());
    b.copy_from_slice(body);
    let tag = key.key.seal(k, &key.nonce(sequence), hb, b)?;
    t.copy_from_slice(&tag);
    Ok(n)
}

/// Parses a control message's header (to pick the key).
pub fn control_header(msg: &[u8]) -> Result<ControlHeader, OpenError> {
    let h = ControlHeader::decode(msg)?;
    let expected = CONTROL_HEADER_LEN + h.body_len as usize + TAG_LEN;
    if msg.len() != expected {
        return Err(OpenError::Length {
            expected,
            have: msg.len(),
        });
    }
    Ok(h)
}

/// Opens a control message in place; returns the header and the body.
pub fn open_control<'m, K: KeystreamApplier + ?Sized>(
    k: &mut K,
    key: &DirectionKey,
    msg: &'m mut [u8],
) -> Result<(ControlHeader, &'m [u8]), OpenError> {
    let h = control_header(msg)?;
    let (hb, rest) = msg.split_at_mut(CONTROL_HEADER_LEN);
    let (b, t) = rest.split_at_mut(h.body_len as usize);
    key.key.open(k, &key.nonce(h.sequence), hb, b, t)?;
    Ok((h, b))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::keys::{GroupKeys, GroupSecret, SessionKeys, SessionSecret};
    use crate::wire::PixelFormat;
    use gap_rust_cipher_s::Sequential;

    fn keys(suite: Suite) -> GroupKeys {
        GroupKeys::derive(&mut Sequential, &GroupSecret::from_bytes([1; 32]), 0, suite).unwrap()
    }
    fn session_keys() -> SessionKeys {
        SessionKeys::derive(&mut Sequential, &SessionSecret::from_bytes([1; 32])).unwrap()
    }

    fn header(suite: Suite, len: u32) -> FrameHeader {
        FrameHeader {
            suite: suite as u8,
            pixel_format: PixelFormat::Grey8.code(),
            width: 16,
            height: 8,
            epoch: 0,
            sequence: 5,
            capture_ns: 1234,
            payload_len: len,
            state: None,
        }
    }

    #[test]
    fn frame_round_trip_every_suite() {
        for suite in Suite::ALL {
            let k = keys(suite);
            let pixels: alloc::vec::Vec<u8> = (0..128u8).collect();
            let mut payload = pixels.clone();
            let sealed =
                seal_frame(&mut Sequential, &k.frame, &header(suite, 128), &mut payload).unwrap();
            if suite != Suite::None {
                assert_ne!(payload, pixels);
            }
            let mut msg = alloc::vec::Vec::new();
            msg.extend_from_slice(&sealed.header);
            msg.extend_from_slice(&payload);
            msg.extend_from_slice(sealed.tag());
            assert_eq!(msg.len(), sealed.message_len(128));
            let h = open_frame(&mut Sequential, &k.frame, &mut msg).unwrap();
            assert_eq!(h, header(suite, 128));
            assert_eq!(&msg[36..164], &pixels[..]);
        }
    }

    #[test]
    fn control_round_trip_and_tamper() {
        let k = session_keys();
        let mut out = [0u8; 64];
        let n = seal_control(
            &mut Sequential,
            &k.d2r_control,
            MsgType::KeyAck,
            [3; 8],
            9,
            &4u32.to_le_bytes(),
            &mut out,
        )
        .unwrap();
        assert_eq!(n, 22 + 4 + 16);
        let mut m = out;
        let (h, body) = open_control(&mut Sequential, &k.d2r_control, &mut m[..n]).unwrap();
        assert_eq!(
            (h.msg_type, h.session, h.sequence),
            (MsgType::KeyAck, [3; 8], 9)
        );
        assert_eq!(body, &4u32.to_le_bytes());
        for i in 0..n {
            let mut m = out;
            m[i] ^= 0x04;
            assert!(
                open_control(&mut Sequential, &k.d2r_control, &mut m[..n]).is_err(),
                "byte {i}"
            );
        }
        // The other direction's key does not open it.
        let mut m = out;
        assert!(open_control(&mut Sequential, &k.r2d_control, &mut m[..n]).is_err());
    }
}
