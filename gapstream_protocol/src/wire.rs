//! Byte layouts of every gapstream message (see `docs/protocol.md`, which tests check against this).
//!
//! Every message starts with the 4-byte prefix `47 53 03 <type>` ("GS", version 3, type). The first
//! byte is never the stock streamer's `0xBC`.
//!
//! | type | message | direction | layout after the prefix |
//! |---|---|---|---|
//! | `0x01` | HELLO | receiver → drone | hello id (8), receiver key id (4), noise length u16, hello time u64, Noise_KK message 1, MAC (16) |
//! | `0x02` | ACCEPT | drone → receiver | hello id (8), receiver key id (4), noise length u16, Noise_KK message 2 |
//! | `0x03` | ALERT | drone → receiver | hello id (8), code u8 (plaintext, unauthenticated) |
//! | `0x10` | FRAME | drone → all receivers | [`FrameHeader`] (36 bytes, 88 with the drone's state record), payload, tag |
//! | `0x20`..`0x30` | GROUP_KEY, KEY_ACK, REKEY_REQUEST, KEEPALIVE, CLOSE | see [`MsgType`] | [`ControlHeader`] (22 bytes in all: session id, sequence), body, tag |
//!
//! The hello id that opened a session is that session's id: ACCEPT and ALERT carry it, and so
//! does every control message, so a receiver ignores what the bridge broadcasts for the others.
//!
//! All integers are little-endian.

use zeroize::{ZeroizeOnDrop, Zeroizing};

use crate::keys::GroupSecret;

/// First two bytes of every gapstream message: "GS".
pub const MAGIC: [u8; 2] = [0x47, 0x53];
/// Protocol version carried in byte 2 (3: HELLOs carry a time and a MAC, the ACCEPT the drone's
/// boot counter, the GROUP_KEY the session's first sequence number; see `docs/protocol.md` §17 for
/// what changed from 2 and from 1).
pub const VERSION: u8 = 3;
/// Bytes of the common prefix.
pub const PREFIX_LEN: usize = 4;
/// Bytes of a frame header's fixed part (the whole header, the AEAD's associated data, without a
/// state record).
pub const FRAME_HEADER_LEN: usize = 36;
/// Frame-header flag: the drone's state record ([`FRAME_STATE_LEN`] bytes,
/// [`crate::state::StateRecord`]) follows the fixed header, inside the associated data.
pub const FRAME_FLAG_STATE: u16 = 1 << 0;
/// Bytes of the state record in a frame header.
pub const FRAME_STATE_LEN: usize = crate::state::STATE_RECORD_LEN;
/// Bytes of the longest frame header: the fixed part and the state record.
pub const FRAME_HEADER_MAX_LEN: usize = FRAME_HEADER_LEN + FRAME_STATE_LEN;
/// Bytes of a control header (the AEAD's associated data).
pub const CONTROL_HEADER_LEN: usize = 22;
/// Bytes of the header HELLO and ACCEPT share (prefix, hello id, key id, Noise length); an ACCEPT's
/// Noise message follows it.
pub const HANDSHAKE_HEADER_LEN: usize = 18;
/// Bytes of a HELLO before its Noise message: the shared header and the hello time (u64).
pub const HELLO_HEADER_LEN: usize = HANDSHAKE_HEADER_LEN + 8;
/// Bytes of the MAC that ends a HELLO (`handshake::hello_mac`).
pub const HELLO_MAC_LEN: usize = 16;
/// Bytes of an ALERT.
pub const ALERT_LEN: usize = 13;
/// Largest control body.
pub const MAX_CONTROL_BODY: usize = 64;
/// Largest Noise message (the Noise specification's limit).
pub const MAX_NOISE_LEN: usize = 65535;

/// Message types (byte 3).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum MsgType {
    Hello = 0x01,
    Accept = 0x02,
    Alert = 0x03,
    Frame = 0x10,
    /// Drone → one receiver: the group secret of a frame epoch (sent before frames use it).
    GroupKey = 0x20,
    /// Receiver → drone: "I hold epoch N's group key".
    KeyAck = 0x21,
    /// Receiver → drone: "please rekey soon".
    RekeyRequest = 0x22,
    /// Receiver → drone every second, and the drone's answer: both ends know the other is there.
    Keepalive = 0x23,
    /// Either side: the session ends.
    Close = 0x30,
}

impl MsgType {
    pub const fn from_u8(v: u8) -> Option<Self> {
        match v {
            0x01 => Some(MsgType::Hello),
            0x02 => Some(MsgType::Accept),
            0x03 => Some(MsgType::Alert),
            0x10 => Some(MsgType::Frame),
            0x20 => Some(MsgType::GroupKey),
            0x21 => Some(MsgType::KeyAck),
            0x22 => Some(MsgType::RekeyRequest),
            0x23 => Some(MsgType::Keepalive),
            0x30 => Some(MsgType::Close),
            _ => None,
        }
    }
    pub const fn is_control(self) -> bool {
        matches!(
            self,
            MsgType::GroupKey
                | MsgType::KeyAck
                | MsgType::RekeyRequest
                | MsgType::Keepalive
                | MsgType::Close
        )
    }
}

/// Why bytes are not a well-formed gapstream message.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WireError {
    /// Not "GS" at the start.
    BadMagic,
    /// Another protocol version.
    UnsupportedVersion(u8),
    /// Unknown message type.
    UnknownType(u8),
    /// Unknown suite byte in a frame header.
    UnknownSuite(u8),
    /// Fewer bytes than the layout needs.
    Truncated { needed: usize, have: usize },
    /// More bytes than the header announces.
    TrailingBytes { expected: usize, have: usize },
    /// A length field beyond the protocol's or the configured limit.
    TooLong { len: u64, max: u64 },
    /// A reserved field is not zero.
    Reserved,
}

impl core::fmt::Display for WireError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            WireError::BadMagic => f.write_str("not a gapstream message (bad magic)"),
            WireError::UnsupportedVersion(v) => write!(
                f,
                "gapstream protocol version {v} is not supported (only {VERSION})"
            ),
            WireError::UnknownType(t) => write!(f, "unknown gapstream message type {t:#04x}"),
            WireError::UnknownSuite(s) => write!(f, "unknown suite {s:#04x}"),
            WireError::Truncated { needed, have } => {
                write!(f, "message truncated: {have} of {needed} bytes")
            }
            WireError::TrailingBytes { expected, have } => {
                write!(
                    f,
                    "message has {have} bytes, its header announces {expected}"
                )
            }
            WireError::TooLong { len, max } => write!(f, "length {len} exceeds the limit {max}"),
            WireError::Reserved => f.write_str("reserved field is not zero"),
        }
    }
}

impl core::error::Error for WireError {}

/// The prefix of a message of type `t`.
pub const fn prefix(t: MsgType) -> [u8; 4] {
    [MAGIC[0], MAGIC[1], VERSION, t as u8]
}

/// Checks the prefix and returns the message type.
pub fn parse_prefix(b: &[u8]) -> Result<MsgType, WireError> {
    if b.len() < PREFIX_LEN {
        // A short buffer that already differs from the magic is not ours.
        if b.first().is_some_and(|x| *x != MAGIC[0]) || b.get(1).is_some_and(|x| *x != MAGIC[1]) {
            return Err(WireError::BadMagic);
        }
        return Err(WireError::Truncated {
            needed: PREFIX_LEN,
            have: b.len(),
        });
    }
    if b[..2] != MAGIC {
        return Err(WireError::BadMagic);
    }
    if b[2] != VERSION {
        return Err(WireError::UnsupportedVersion(b[2]));
    }
    MsgType::from_u8(b[3]).ok_or(WireError::UnknownType(b[3]))
}

/// Total length of the message whose first bytes are `head`, from its header alone:
/// `Ok(None)` when more bytes are needed to tell. Used to reassemble messages from CPX packets.
/// `parts` summed as a `T` (the target's `usize`), or [`WireError::TooLong`] when the sum does
/// not fit: on a 32-bit target (the drone, an armhf Pi) a header plus a u32 payload length can
/// exceed `usize`. Generic so the host tests check the 32-bit case with `T = u32`.
pub fn checked_len<T: TryFrom<u64>>(parts: &[u64]) -> Result<T, WireError> {
    let mut sum = 0u64;
    for &p in parts {
        sum = sum.checked_add(p).ok_or(WireError::TooLong {
            len: u64::MAX,
            max: u64::MAX,
        })?;
    }
    T::try_from(sum).map_err(|_| WireError::TooLong {
        len: sum,
        max: u64::MAX >> (64 - 8 * core::mem::size_of::<T>().min(8)),
    })
}

pub fn message_len(head: &[u8]) -> Result<Option<usize>, WireError> {
    let t = match parse_prefix(head) {
        Ok(t) => t,
        Err(WireError::Truncated { .. }) => return Ok(None),
        Err(e) => return Err(e),
    };
    let need = match t {
        MsgType::Hello | MsgType::Accept => HANDSHAKE_HEADER_LEN,
        MsgType::Alert => return Ok(Some(ALERT_LEN)),
        MsgType::Frame => FRAME_HEADER_LEN,
        _ => CONTROL_HEADER_LEN,
    };
    if head.len() < need {
        return Ok(None);
    }
    Ok(Some(match t {
        MsgType::Hello => {
            HELLO_HEADER_LEN + u16::from_le_bytes([head[16], head[17]]) as usize + HELLO_MAC_LEN
        }
        MsgType::Accept => HANDSHAKE_HEADER_LEN + u16::from_le_bytes([head[16], head[17]]) as usize,
        MsgType::Frame => {
            // From the fixed part alone: the state record's length follows from the flags.
            let flags = u16::from_le_bytes([head[10], head[11]]);
            if flags & !FRAME_FLAG_STATE != 0 {
                return Err(WireError::Reserved);
            }
            let state = if flags & FRAME_FLAG_STATE != 0 {
                FRAME_STATE_LEN
            } else {
                0
            };
            let tag = crate::suite::Suite::from_u8(head[4])
                .map(|s| s.tag_len())
                .ok_or(WireError::UnknownSuite(head[4]))?;
            checked_len(&[
                (FRAME_HEADER_LEN + state) as u64,
                u64::from(u32::from_le_bytes(head[32..36].try_into().unwrap())),
                tag as u64,
            ])?
        }
        _ => {
            let h = ControlHeader::decode(head)?;
            CONTROL_HEADER_LEN + h.body_len as usize + crate::aead::TAG_LEN
        }
    }))
}

/// Pixel layout of a frame's payload: the frame header's pixel-format byte (its wire code, the
/// enum's discriminant). The one pixel-format type of the project: the drone's cameras report it,
/// [`crate::frame::FrameMeta`] seals it into the header, receivers read it back with
/// `PixelFormat::try_from(header.pixel_format)`. The header keeps the raw byte: a code this build
/// does not know is authenticated and passed through (the application decides), and reading it
/// gives a typed [`UnknownPixelFormat`]. A new format is a new variant with the next free code.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum PixelFormat {
    /// 8-bit greyscale, one byte per pixel (the mono HM01B0).
    Grey8 = 0,
    /// 8-bit Bayer mosaic, RGGB, one byte per pixel (the colour HM01B0).
    BayerRggb8 = 1,
    /// 8-bit Bayer mosaic, BGGR.
    BayerBggr8 = 2,
    /// A baseline JPEG file (JFIF, greyscale SOF0; width and height those of the picture). The
    /// payload is the coded file, its length the frame's payload length: compress, then seal.
    Jpeg = 3,
    /// A lossless JPEG-LS stream (ISO/IEC 14495-1, one grey component) of a GRAY8 picture.
    JpegLs = 4,
    /// A lossless JPEG-LS stream of an RGGB Bayer mosaic coded as four components (R, Gr, Gb, B
    /// planes, each `width/2 × height/2`); decoded and put back it is a BAYER_RGGB8 frame.
    JpegLsBayerRggb = 5,
}

impl PixelFormat {
    /// Every format this build knows, by code.
    pub const ALL: [PixelFormat; 6] = [
        PixelFormat::Grey8,
        PixelFormat::BayerRggb8,
        PixelFormat::BayerBggr8,
        PixelFormat::Jpeg,
        PixelFormat::JpegLs,
        PixelFormat::JpegLsBayerRggb,
    ];

    /// Whether the payload is a coded stream (JPEG, JPEG-LS) rather than `width × height` bytes.
    pub const fn is_coded(self) -> bool {
        matches!(
            self,
            PixelFormat::Jpeg | PixelFormat::JpegLs | PixelFormat::JpegLsBayerRggb
        )
    }

    /// The layout of the pixels once the payload is decoded: itself for the raw formats, GRAY8
    /// for JPEG and JPEG-LS, BAYER_RGGB8 for the Bayer JPEG-LS stream.
    pub const fn decoded(self) -> PixelFormat {
        match self {
            PixelFormat::Jpeg | PixelFormat::JpegLs => PixelFormat::Grey8,
            PixelFormat::JpegLsBayerRggb => PixelFormat::BayerRggb8,
            f => f,
        }
    }

    /// The wire code (the frame header's byte 5).
    pub const fn code(self) -> u8 {
        self as u8
    }

    /// The format of a wire code.
    pub const fn from_code(code: u8) -> Result<Self, UnknownPixelFormat> {
        match code {
            0 => Ok(PixelFormat::Grey8),
            1 => Ok(PixelFormat::BayerRggb8),
            2 => Ok(PixelFormat::BayerBggr8),
            3 => Ok(PixelFormat::Jpeg),
            4 => Ok(PixelFormat::JpegLs),
            5 => Ok(PixelFormat::JpegLsBayerRggb),
            _ => Err(UnknownPixelFormat(code)),
        }
    }
}

impl TryFrom<u8> for PixelFormat {
    type Error = UnknownPixelFormat;
    fn try_from(code: u8) -> Result<Self, UnknownPixelFormat> {
        PixelFormat::from_code(code)
    }
}

impl From<PixelFormat> for u8 {
    fn from(f: PixelFormat) -> u8 {
        f.code()
    }
}

/// A pixel-format code this build does not know.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct UnknownPixelFormat(pub u8);

impl core::fmt::Display for UnknownPixelFormat {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "unknown pixel format {:#04x}", self.0)
    }
}

impl core::error::Error for UnknownPixelFormat {}

/// Frame header: the associated data of the frame's AEAD.
///
/// | offset | size | field |
/// |---|---|---|
/// | 0 | 4 | prefix `47 53 02 10` |
/// | 4 | 1 | suite |
/// | 5 | 1 | pixel format |
/// | 6 | 2 | width |
/// | 8 | 2 | height |
/// | 10 | 2 | flags: bit 0 [`FRAME_FLAG_STATE`]; the others 0 |
/// | 12 | 4 | key epoch |
/// | 16 | 8 | sequence number |
/// | 24 | 8 | capture timestamp, ns |
/// | 32 | 4 | payload length |
/// | 36 | 52 | with [`FRAME_FLAG_STATE`]: the drone's state record ([`crate::state`]) |
///
/// The state record is kept as its bytes ([`FrameHeader::state`]): it is authenticated with the
/// rest of the header, and read with [`FrameHeader::state_record`] once the tag verified.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct FrameHeader {
    /// Raw suite byte (checked against the session's suite by the receiver).
    pub suite: u8,
    /// Raw pixel-format byte ([`PixelFormat::try_from`] reads it; unknown codes pass through).
    pub pixel_format: u8,
    pub width: u16,
    pub height: u16,
    pub epoch: u32,
    pub sequence: u64,
    pub capture_ns: u64,
    pub payload_len: u32,
    /// The drone's state record as sent ([`FRAME_FLAG_STATE`]; None without one).
    pub state: Option<[u8; FRAME_STATE_LEN]>,
}

/// An encoded frame header: 36 or 88 bytes (dereferences to them).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EncodedFrameHeader {
    bytes: [u8; FRAME_HEADER_MAX_LEN],
    len: usize,
}

impl core::ops::Deref for EncodedFrameHeader {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        &self.bytes[..self.len]
    }
}

impl FrameHeader {
    /// Bytes of this header on the wire: 36, or 88 with a state record.
    pub fn header_len(&self) -> usize {
        FRAME_HEADER_LEN
            + if self.state.is_some() {
                FRAME_STATE_LEN
            } else {
                0
            }
    }

    /// The flags field this header encodes.
    pub fn flags(&self) -> u16 {
        if self.state.is_some() {
            FRAME_FLAG_STATE
        } else {
            0
        }
    }

    pub fn encode(&self) -> EncodedFrameHeader {
        let mut b = [0u8; FRAME_HEADER_MAX_LEN];
        b[..4].copy_from_slice(&prefix(MsgType::Frame));
        b[4] = self.suite;
        b[5] = self.pixel_format;
        b[6..8].copy_from_slice(&self.width.to_le_bytes());
        b[8..10].copy_from_slice(&self.height.to_le_bytes());
        b[10..12].copy_from_slice(&self.flags().to_le_bytes());
        b[12..16].copy_from_slice(&self.epoch.to_le_bytes());
        b[16..24].copy_from_slice(&self.sequence.to_le_bytes());
        b[24..32].copy_from_slice(&self.capture_ns.to_le_bytes());
        b[32..36].copy_from_slice(&self.payload_len.to_le_bytes());
        if let Some(s) = &self.state {
            b[FRAME_HEADER_LEN..].copy_from_slice(s);
        }
        EncodedFrameHeader {
            bytes: b,
            len: self.header_len(),
        }
    }

    /// The state record, parsed (None when the frame has none). Read it after the frame's tag
    /// verified: before, the bytes are whatever arrived.
    pub fn state_record(
        &self,
    ) -> Option<Result<crate::state::StateRecord, crate::state::StateError>> {
        self.state
            .as_ref()
            .map(|s| crate::state::StateRecord::decode(s))
    }

    /// Parses the header at the start of `b` (36 bytes, 88 with a state record; more may follow).
    /// The state record's bytes are taken as they are ([`Self::state_record`] reads them).
    pub fn decode(b: &[u8]) -> Result<Self, WireError> {
        if parse_prefix(b)? != MsgType::Frame {
            return Err(WireError::UnknownType(b[3]));
        }
        if b.len() < FRAME_HEADER_LEN {
            return Err(WireError::Truncated {
                needed: FRAME_HEADER_LEN,
                have: b.len(),
            });
        }
        let flags = u16::from_le_bytes([b[10], b[11]]);
        if flags & !FRAME_FLAG_STATE != 0 {
            return Err(WireError::Reserved);
        }
        let state = if flags & FRAME_FLAG_STATE != 0 {
            if b.len() < FRAME_HEADER_MAX_LEN {
                return Err(WireError::Truncated {
                    needed: FRAME_HEADER_MAX_LEN,
                    have: b.len(),
                });
            }
            Some(
                b[FRAME_HEADER_LEN..FRAME_HEADER_MAX_LEN]
                    .try_into()
                    .unwrap(),
            )
        } else {
            None
        };
        let u16_at = |i: usize| u16::from_le_bytes([b[i], b[i + 1]]);
        let u32_at = |i: usize| u32::from_le_bytes(b[i..i + 4].try_into().unwrap());
        let u64_at = |i: usize| u64::from_le_bytes(b[i..i + 8].try_into().unwrap());
        Ok(FrameHeader {
            suite: b[4],
            pixel_format: b[5],
            width: u16_at(6),
            height: u16_at(8),
            epoch: u32_at(12),
            sequence: u64_at(16),
            capture_ns: u64_at(24),
            payload_len: u32_at(32),
            state,
        })
    }

    /// Tag length implied by the suite byte.
    pub fn suite_tag_len(&self) -> Result<usize, WireError> {
        crate::suite::Suite::from_u8(self.suite)
            .map(|s| s.tag_len())
            .ok_or(WireError::UnknownSuite(self.suite))
    }
}

/// A session's id: the hello id of the HELLO that opened it (chosen at random by the receiver).
pub type SessionId = [u8; 8];

/// Header of the sealed control messages (GROUP_KEY, KEY_ACK, REKEY_REQUEST, KEEPALIVE, CLOSE).
///
/// | offset | size | field |
/// |---|---|---|
/// | 0 | 4 | prefix `47 53 02 <type>` |
/// | 4 | 8 | session id (the hello id of the session's HELLO) |
/// | 12 | 8 | control sequence number (per session and direction) |
/// | 20 | 2 | body length |
///
/// Then the body (encrypted) and a 16-byte ChaCha20-Poly1305 tag under the session's control key
/// of that direction (control messages are always authenticated, whatever the frame suite).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ControlHeader {
    pub msg_type: MsgType,
    pub session: SessionId,
    pub sequence: u64,
    pub body_len: u16,
}

impl ControlHeader {
    pub fn encode(&self) -> [u8; CONTROL_HEADER_LEN] {
        let mut b = [0u8; CONTROL_HEADER_LEN];
        b[..4].copy_from_slice(&prefix(self.msg_type));
        b[4..12].copy_from_slice(&self.session);
        b[12..20].copy_from_slice(&self.sequence.to_le_bytes());
        b[20..22].copy_from_slice(&self.body_len.to_le_bytes());
        b
    }

    pub fn decode(b: &[u8]) -> Result<Self, WireError> {
        let t = parse_prefix(b)?;
        if !t.is_control() {
            return Err(WireError::UnknownType(t as u8));
        }
        if b.len() < CONTROL_HEADER_LEN {
            return Err(WireError::Truncated {
                needed: CONTROL_HEADER_LEN,
                have: b.len(),
            });
        }
        let body_len = u16::from_le_bytes([b[20], b[21]]);
        if body_len as usize > MAX_CONTROL_BODY {
            return Err(WireError::TooLong {
                len: body_len as u64,
                max: MAX_CONTROL_BODY as u64,
            });
        }
        Ok(ControlHeader {
            msg_type: t,
            session: b[4..12].try_into().unwrap(),
            sequence: u64::from_le_bytes(b[12..20].try_into().unwrap()),
            body_len,
        })
    }
}

/// The session a control message belongs to, read without opening it (receivers skip the ones of
/// other sessions: the bridge broadcasts every drone message to every receiver).
pub fn control_session(b: &[u8]) -> Option<SessionId> {
    ControlHeader::decode(b).ok().map(|h| h.session)
}

/// The GROUP_KEY body: the epoch, the session's first frame sequence number and the epoch's
/// 32-byte group secret (`le32(epoch) ‖ le64(first sequence) ‖ secret`). The first sequence number
/// is the drone's next frame sequence number when it accepted the session's HELLO: the receiver
/// refuses every frame below it, so frames recorded before a reconnect cannot be replayed into the
/// new session. The secret is held as a [`GroupSecret`], wiped on drop.
#[derive(Clone, ZeroizeOnDrop)]
pub struct GroupKeyBody {
    #[zeroize(skip)]
    pub epoch: u32,
    #[zeroize(skip)]
    pub first_sequence: u64,
    pub secret: GroupSecret,
}

/// Bytes of a GROUP_KEY body.
pub const GROUP_KEY_BODY_LEN: usize = 44;

impl core::fmt::Debug for GroupKeyBody {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("GroupKeyBody")
            .field("epoch", &self.epoch)
            .field("first_sequence", &self.first_sequence)
            .finish_non_exhaustive()
    }
}

impl GroupKeyBody {
    /// The body's bytes, wiped on drop (they hold the secret).
    pub fn encode(&self) -> Zeroizing<[u8; GROUP_KEY_BODY_LEN]> {
        let mut b = Zeroizing::new([0u8; GROUP_KEY_BODY_LEN]);
        b[..4].copy_from_slice(&self.epoch.to_le_bytes());
        b[4..12].copy_from_slice(&self.first_sequence.to_le_bytes());
        b[12..].copy_from_slice(self.secret.bytes());
        b
    }
    pub fn decode(b: &[u8]) -> Option<Self> {
        if b.len() != GROUP_KEY_BODY_LEN {
            return None;
        }
        Some(GroupKeyBody {
            epoch: u32::from_le_bytes(b[..4].try_into().ok()?),
            first_sequence: u64::from_le_bytes(b[4..12].try_into().ok()?),
            secret: GroupSecret::from_slice(&b[12..])?,
        })
    }
}

/// The header HELLO and ACCEPT share: prefix, the 8-byte hello id (chosen by the receiver, echoed
/// by the drone, mixed into the Noise prologue; it becomes the session id), the receiver's 4-byte
/// key id (which of the drone's paired receiver keys the Noise handshake uses; also in the
/// prologue), and the Noise message length. An ACCEPT's Noise message follows; a HELLO has its
/// hello time first and a MAC last ([`HelloHeader`], [`decode_hello`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HandshakeHeader {
    pub msg_type: MsgType,
    pub hello_id: [u8; 8],
    pub key_id: [u8; 4],
    pub noise_len: u16,
}

impl HandshakeHeader {
    pub fn encode(&self) -> [u8; HANDSHAKE_HEADER_LEN] {
        let mut b = [0u8; HANDSHAKE_HEADER_LEN];
        b[..4].copy_from_slice(&prefix(self.msg_type));
        b[4..12].copy_from_slice(&self.hello_id);
        b[12..16].copy_from_slice(&self.key_id);
        b[16..18].copy_from_slice(&self.noise_len.to_le_bytes());
        b
    }

    /// Parses a whole HELLO or ACCEPT: the shared header and the Noise message (a HELLO's exact
    /// length, hello time and MAC included, is checked too; [`decode_hello`] gives its parts).
    pub fn decode(b: &[u8]) -> Result<(Self, &[u8]), WireError> {
        let t = parse_prefix(b)?;
        let (head, tail) = match t {
            MsgType::Hello => (HELLO_HEADER_LEN, HELLO_MAC_LEN),
            MsgType::Accept => (HANDSHAKE_HEADER_LEN, 0),
            _ => return Err(WireError::UnknownType(t as u8)),
        };
        if b.len() < head {
            return Err(WireError::Truncated {
                needed: head,
                have: b.len(),
            });
        }
        let noise_len = u16::from_le_bytes([b[16], b[17]]);
        let want = head + noise_len as usize + tail;
        if b.len() < want {
            return Err(WireError::Truncated {
                needed: want,
                have: b.len(),
            });
        }
        if b.len() > want {
            return Err(WireError::TrailingBytes {
                expected: want,
                have: b.len(),
            });
        }
        Ok((
            HandshakeHeader {
                msg_type: t,
                hello_id: b[4..12].try_into().unwrap(),
                key_id: b[12..16].try_into().unwrap(),
                noise_len,
            },
            &b[head..head + noise_len as usize],
        ))
    }
}

/// A HELLO's fixed part: the shared header ([`HandshakeHeader`], type HELLO) and the hello time,
/// the receiver's wall-clock time in nanoseconds since 1970-01-01 UTC, strictly increasing from
/// one HELLO of a receiver to the next. The drone accepts a HELLO only with a time above the
/// greatest it accepted from that receiver (a replay is refused before any Diffie-Hellman).
///
/// | offset | size | field |
/// |---|---|---|
/// | 0 | 18 | prefix `47 53 03 01`, hello id, key id, Noise length `n` |
/// | 18 | 8 | hello time |
/// | 26 | n | Noise_KK message 1 |
/// | 26 + n | 16 | MAC over bytes `0 .. 26 + n` (`handshake::hello_mac`) |
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HelloHeader {
    pub hello_id: [u8; 8],
    pub key_id: [u8; 4],
    pub noise_len: u16,
    pub time: u64,
}

impl HelloHeader {
    pub fn encode(&self) -> [u8; HELLO_HEADER_LEN] {
        let mut b = [0u8; HELLO_HEADER_LEN];
        b[..HANDSHAKE_HEADER_LEN].copy_from_slice(
            &HandshakeHeader {
                msg_type: MsgType::Hello,
                hello_id: self.hello_id,
                key_id: self.key_id,
                noise_len: self.noise_len,
            }
            .encode(),
        );
        b[HANDSHAKE_HEADER_LEN..].copy_from_slice(&self.time.to_le_bytes());
        b
    }
}

/// A HELLO cut into its parts (only the layout is checked; the MAC by `handshake`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HelloParts<'a> {
    pub header: HelloHeader,
    /// Noise_KK message 1.
    pub noise: &'a [u8],
    /// The bytes the MAC covers: everything before it.
    pub maced: &'a [u8],
    pub mac: &'a [u8; HELLO_MAC_LEN],
}

/// Parses a whole HELLO.
pub fn decode_hello(b: &[u8]) -> Result<HelloParts<'_>, WireError> {
    let (h, noise) = HandshakeHeader::decode(b)?;
    if h.msg_type != MsgType::Hello {
        return Err(WireError::UnknownType(h.msg_type as u8));
    }
    let end = b.len() - HELLO_MAC_LEN;
    Ok(HelloParts {
        header: HelloHeader {
            hello_id: h.hello_id,
            key_id: h.key_id,
            noise_len: h.noise_len,
            time: u64::from_le_bytes(
                b[HANDSHAKE_HEADER_LEN..HELLO_HEADER_LEN]
                    .try_into()
                    .unwrap(),
            ),
        },
        noise,
        maced: &b[..end],
        mac: b[end..].try_into().unwrap(),
    })
}

/// Alert codes (ALERT messages are plaintext and unauthenticated: informative only).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum AlertCode {
    /// The HELLO did not authenticate: the drone is paired with another receiver key.
    AuthenticationFailed = 1,
    /// No suite offered by the receiver is allowed by the drone.
    NoCommonSuite = 2,
    /// No key-establishment mode offered by the receiver is allowed by the drone.
    NoCommonKexMode = 3,
    /// The HELLO was malformed.
    BadHello = 4,
    /// The drone could not complete the handshake (entropy or crypto failure).
    InternalError = 5,
    /// Every receiver slot of the drone is taken by another paired receiver.
    GroupFull = 6,
    /// The drone answered a HELLO of this receiver less than a second ago (responder handshakes
    /// are rate-limited per receiver key), or holds as many unconfirmed sessions of it as it
    /// keeps: retry later.
    Busy = 7,
}

impl AlertCode {
    pub const fn from_u8(v: u8) -> Option<Self> {
        match v {
            1 => Some(AlertCode::AuthenticationFailed),
            2 => Some(AlertCode::NoCommonSuite),
            3 => Some(AlertCode::NoCommonKexMode),
            4 => Some(AlertCode::BadHello),
            5 => Some(AlertCode::InternalError),
            6 => Some(AlertCode::GroupFull),
            7 => Some(AlertCode::Busy),
            _ => None,
        }
    }
    pub const fn description(self) -> &'static str {
        match self {
            AlertCode::AuthenticationFailed => {
                "the drone could not authenticate this receiver (paired with a different receiver key?)"
            }
            AlertCode::NoCommonSuite => "the drone allows none of the offered frame suites",
            AlertCode::NoCommonKexMode => {
                "the drone allows none of the offered key-establishment modes"
            }
            AlertCode::BadHello => "the drone found the HELLO malformed",
            AlertCode::InternalError => "the drone failed internally during the handshake",
            AlertCode::GroupFull => {
                "every receiver slot of the drone is taken (raise max_receivers or close a receiver)"
            }
            AlertCode::Busy => {
                "the drone is answering another HELLO of this receiver (at most one a second)"
            }
        }
    }
}

/// Encodes an ALERT.
pub fn encode_alert(hello_id: [u8; 8], code: AlertCode) -> [u8; ALERT_LEN] {
    let mut b = [0u8; ALERT_LEN];
    b[..4].copy_from_slice(&prefix(MsgType::Alert));
    b[4..12].copy_from_slice(&hello_id);
    b[12] = code as u8;
    b
}

/// Parses an ALERT: hello id and code (unknown codes are returned raw).
pub fn decode_alert(b: &[u8]) -> Result<([u8; 8], u8), WireError> {
    if parse_prefix(b)? != MsgType::Alert {
        return Err(WireError::UnknownType(b[3]));
    }
    if b.len() != ALERT_LEN {
        return Err(if b.len() < ALERT_LEN {
            WireError::Truncated {
                needed: ALERT_LEN,
                have: b.len(),
            }
        } else {
            WireError::TrailingBytes {
                expected: ALERT_LEN,
                have: b.len(),
            }
        });
    }
    Ok((b[4..12].try_into().unwrap(), b[12]))
}

/// The per-message nonce: the epoch's 12-byte IV XOR `00000000 ‖ be64(sequence)` (as TLS 1.3).
pub fn nonce(iv: &[u8; 12], sequence: u64) -> [u8; 12] {
    let mut n = *iv;
    for (d, s) in n[4..].iter_mut().zip(sequence.to_be_bytes()) {
        *d ^= s;
    }
    n
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn arb_header() -> impl Strategy<Value = FrameHeader> {
        (
            any::<u8>(),
            any::<u8>(),
            any::<u16>(),
            any::<u16>(),
            any::<u32>(),
            any::<u64>(),
            any::<u64>(),
            any::<u32>(),
        )
            .prop_map(
                |(suite, pf, width, height, epoch, sequence, capture_ns, payload_len)| {
                    FrameHeader {
                        suite,
                        pixel_format: pf,
                        width,
                        height,
                        epoch,
                        sequence,
                        capture_ns,
                        payload_len,
                        state: None,
                    }
                },
            )
            .prop_flat_map(|h| {
                proptest::option::of(proptest::collection::vec(any::<u8>(), FRAME_STATE_LEN))
                    .prop_map(move |s| FrameHeader {
                        state: s.map(|s| s.try_into().unwrap()),
                        ..h
                    })
            })
    }

    /// The pixel formats keep their wire codes (docs/protocol.md: 0 GRAY8, 1 BAYER_RGGB8,
    /// 2 BAYER_BGGR8, 3 JPEG, 4 JPEG_LS, 5 JPEG_LS_BAYER_RGGB); every other byte is a typed
    /// error carrying the code.
    #[test]
    fn pixel_format_codes() {
        use PixelFormat::*;
        for (code, f) in [
            (0u8, Grey8),
            (1, BayerRggb8),
            (2, BayerBggr8),
            (3, Jpeg),
            (4, JpegLs),
            (5, JpegLsBayerRggb),
        ] {
            assert_eq!(PixelFormat::try_from(code), Ok(f));
            assert_eq!(u8::from(f), code);
        }
        for code in 0..=u8::MAX {
            match PixelFormat::try_from(code) {
                Ok(f) => {
                    assert_eq!(f.code(), code);
                    assert!(PixelFormat::ALL.contains(&f));
                }
                Err(e) => {
                    assert_eq!(e, UnknownPixelFormat(code));
                    assert!(code as usize >= PixelFormat::ALL.len());
                }
            }
        }
        assert_eq!(
            alloc::format!("{}", UnknownPixelFormat(6)),
            "unknown pixel format 0x06"
        );
        assert_eq!(
            PixelFormat::ALL
                .iter()
                .filter(|f| f.is_coded())
                .collect::<alloc::vec::Vec<_>>(),
            [&Jpeg, &JpegLs, &JpegLsBayerRggb]
        );
        assert_eq!(JpegLsBayerRggb.decoded(), BayerRggb8);
        assert_eq!(Jpeg.decoded(), Grey8);
        assert_eq!(BayerBggr8.decoded(), BayerBggr8);
    }

    proptest! {
        #[test]
        fn frame_header_round_trip(h in arb_header()) {
            let b = h.encode();
            prop_assert_eq!(b.len(), h.header_len());
            prop_assert_eq!(FrameHeader::decode(&b).unwrap(), h);
            if let Some(tag) = crate::suite::Suite::from_u8(h.suite).map(|s| s.tag_len()) {
                let want = h.header_len() as u64 + u64::from(h.payload_len) + tag as u64;
                prop_assert_eq!(message_len(&b[..FRAME_HEADER_LEN]).ok().flatten().map(|n| n as u64), usize::try_from(want).ok().map(|n| n as u64));
            }
            prop_assert_eq!(&b[..4], &[0x47, 0x53, 0x03, 0x10]);
        }

        #[test]
        fn parsers_total_on_garbage(b in proptest::collection::vec(any::<u8>(), 0..80)) {
            let _ = parse_prefix(&b);
            let _ = message_len(&b);
            let _ = FrameHeader::decode(&b);
            let _ = ControlHeader::decode(&b);
            let _ = HandshakeHeader::decode(&b);
            let _ = decode_hello(&b);
            let _ = decode_alert(&b);
            let _ = GroupKeyBody::decode(&b);
        }

        #[test]
        fn group_key_body_round_trip(epoch in any::<u32>(), first_sequence in any::<u64>(),
                                     secret in any::<[u8; 32]>()) {
            let g = GroupKeyBody { epoch, first_sequence, secret: GroupSecret::from_bytes(secret) };
            let d = GroupKeyBody::decode(&g.encode()[..]).unwrap();
            prop_assert_eq!((d.epoch, d.first_sequence, d.secret.bytes()), (epoch, first_sequence, &secret));
        }
    }

    /// Finding 6: `36 + payload_len + tag` in `usize` wrapped on 32-bit targets (the drone, an
    /// armhf Pi): a 36-byte message announcing `2^32 - 16` payload bytes matched its own "length".
    /// The sums are checked now; `checked_len::<u32>` is exactly what a 32-bit `usize` gets (the
    /// rv32 QEMU program `protocol_handshake` checks `message_len` / `frame_layout` themselves on a
    /// 32-bit target).
    #[test]
    fn finding6_lengths_do_not_wrap_on_32_bit_targets() {
        let wraps = [FRAME_HEADER_LEN as u64, u64::from(u32::MAX - 15), 16];
        assert!(matches!(
            checked_len::<u32>(&wraps),
            Err(WireError::TooLong { .. })
        ));
        assert_eq!(checked_len::<u32>(&[36, 79_056, 16]), Ok(79_108));
        assert_eq!(
            checked_len::<u32>(&[36, u64::from(u32::MAX) - 52, 16]),
            Ok(u32::MAX)
        );
        assert!(checked_len::<u64>(&[u64::MAX, 1]).is_err());
        // On this host the same header gives the true (large) length.
        let h = FrameHeader {
            suite: 0x11,
            pixel_format: PixelFormat::Grey8.code(),
            width: 1,
            height: 1,
            epoch: 0,
            sequence: 0,
            capture_ns: 0,
            payload_len: u32::MAX - 15,
            state: None,
        };
        let b = h.encode();
        assert_eq!(message_len(&b), checked_len::<usize>(&wraps).map(Some));
        assert!(crate::frame::frame_layout(&b, crate::suite::Suite::ChaCha20Poly1305).is_err());
    }

    #[test]
    fn message_len_from_headers() {
        let h = FrameHeader {
            suite: 0x11,
            pixel_format: PixelFormat::Grey8.code(),
            width: 324,
            height: 244,
            epoch: 0,
            sequence: 1,
            capture_ns: 2,
            payload_len: 79056,
            state: None,
        };
        let b = h.encode();
        assert_eq!(message_len(&b[..35]), Ok(None));
        assert_eq!(message_len(&b), Ok(Some(36 + 79056 + 16)));
        let h0 = FrameHeader { suite: 0x00, ..h };
        assert_eq!(message_len(&h0.encode()), Ok(Some(36 + 79056)));
        let hx = FrameHeader { suite: 0x07, ..h };
        assert_eq!(message_len(&hx.encode()), Err(WireError::UnknownSuite(7)));
        let c = ControlHeader {
            msg_type: MsgType::GroupKey,
            session: [3; 8],
            sequence: 9,
            body_len: 36,
        }
        .encode();
        assert_eq!(message_len(&c), Ok(Some(22 + 36 + 16)));
        assert_eq!(control_session(&c), Some([3; 8]));
        let hh = HandshakeHeader {
            msg_type: MsgType::Accept,
            hello_id: [1; 8],
            key_id: [2; 4],
            noise_len: 55,
        }
        .encode();
        assert_eq!(message_len(&hh), Ok(Some(18 + 55)));
        let hello = HelloHeader {
            hello_id: [1; 8],
            key_id: [2; 4],
            noise_len: 55,
            time: 7,
        }
        .encode();
        assert_eq!(message_len(&hello[..18]), Ok(Some(26 + 55 + 16)));
        assert_eq!(message_len(&[0x47]), Ok(None));
        assert_eq!(message_len(&[0xBC]), Err(WireError::BadMagic));
        assert_eq!(
            message_len(&[0x47, 0x53, 0x01, 0x10]),
            Err(WireError::UnsupportedVersion(1))
        );
        assert_eq!(
            message_len(&encode_alert([1; 8], AlertCode::NoCommonSuite)),
            Ok(Some(13))
        );
        let mut b = h.encode().to_vec();
        b[10] = 2;
        assert_eq!(FrameHeader::decode(&b), Err(WireError::Reserved));
        assert_eq!(message_len(&b), Err(WireError::Reserved));
        b[10] = 0;
        b[11] = 0x80;
        assert_eq!(FrameHeader::decode(&b), Err(WireError::Reserved));
        // The state flag without the record's bytes.
        b[10] = 1;
        b[11] = 0;
        assert_eq!(
            FrameHeader::decode(&b),
            Err(WireError::Truncated {
                needed: FRAME_HEADER_MAX_LEN,
                have: FRAME_HEADER_LEN
            })
        );
    }

    /// A header with the drone's state record: 88 bytes, the flag set, the record's bytes kept as
    /// sent (read after authentication), the message length from the fixed part alone.
    #[test]
    fn frame_header_with_state_record() {
        let rec = crate::state::StateRecord::new(
            Some((
                crate::state::StateSample {
                    stm32_us: 123_456,
                    position_mm: [1000, -2000, 500],
                    ..Default::default()
                },
                9_990,
            )),
            10_000,
            50_000,
        );
        let h = FrameHeader {
            suite: 0x11,
            pixel_format: 0,
            width: 4,
            height: 4,
            epoch: 1,
            sequence: 7,
            capture_ns: 10_000_000,
            payload_len: 16,
            state: Some(rec.encode()),
        };
        let b = h.encode();
        assert_eq!(b.len(), FRAME_HEADER_MAX_LEN);
        assert_eq!(h.header_len(), 88);
        assert_eq!(&b[10..12], &[1, 0]);
        assert_eq!(&b[36..], &rec.encode());
        assert_eq!(FrameHeader::decode(&b), Ok(h));
        assert_eq!(h.state_record(), Some(Ok(rec)));
        assert_eq!(message_len(&b[..36]), Ok(Some(88 + 16 + 16)));
        let plain = FrameHeader { state: None, ..h };
        assert_eq!(plain.encode().len(), FRAME_HEADER_LEN);
        assert_eq!(message_len(&plain.encode()), Ok(Some(36 + 16 + 16)));
        assert_eq!(plain.state_record(), None);
        // A record of an unknown version is still carried (and authenticated); reading it says so.
        let mut newer = rec.encode();
        newer[0] = 9;
        let h9 = FrameHeader {
            state: Some(newer),
            ..h
        };
        assert_eq!(FrameHeader::decode(&h9.encode()), Ok(h9));
        assert_eq!(
            h9.state_record(),
            Some(Err(crate::state::StateError::UnknownVersion(9)))
        );
    }

    #[test]
    fn nonce_is_iv_xor_sequence() {
        let iv = [0xFFu8; 12];
        let n = nonce(&iv, 0x0102_0304_0506_0708);
        assert_eq!(
            n,
            [
                0xFF, 0xFF, 0xFF, 0xFF, 0xFE, 0xFD, 0xFC, 0xFB, 0xFA, 0xF9, 0xF8, 0xF7
            ]
        );
    }
}
