//! The slice of CPX framing the bridge needs: split a byte stream (SPI transfers, a TCP stream)
//! into wire packets, read the routing header (for `last_packet`), and group packets into whole
//! messages. The bridge never looks past the 2-byte routing header: payloads are opaque ciphertext.
//!
//! Wire packet: `u16 LE length` (= payload length + 2), routing header byte 0 =
//! `dst[2:0] | src[2:0] << 3 | last_packet << 6`, byte 1 = `function[5:0] | version[1:0] << 6`,
//! then the payload (at most 1020 bytes). See `shared/notes/platform-facts.md`.

use alloc::vec::Vec;

/// Largest CPX packet (routing header + payload), as the length field counts it.
pub const MTU: usize = 1022;
/// Largest payload of one packet.
pub const MAX_PAYLOAD: usize = MTU - 2;

/// CPX targets.
pub mod target {
    pub const STM32: u8 = 1;
    pub const ESP32: u8 = 2;
    pub const WIFI_HOST: u8 = 3;
    pub const GAP8: u8 = 4;
}

/// The routing header of one packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Header {
    pub dst: u8,
    pub src: u8,
    pub last_packet: bool,
    pub function: u8,
    pub version: u8,
}

impl Header {
    pub fn from_bytes(b: [u8; 2]) -> Self {
        Header {
            dst: b[0] & 7,
            src: (b[0] >> 3) & 7,
            last_packet: b[0] & 0x40 != 0,
            function: b[1] & 0x3F,
            version: b[1] >> 6,
        }
    }
    pub fn to_bytes(self) -> [u8; 2] {
        [
            (self.dst & 7) | (self.src & 7) << 3 | (self.last_packet as u8) << 6,
            (self.function & 0x3F) | (self.version & 3) << 6,
        ]
    }
}

/// Why bytes are not a CPX packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CpxError {
    /// Length field below 2 or above [`MTU`].
    BadLength(u16),
    /// Version bits other than 0.
    UnknownVersion(u8),
    /// A message grew past the configured maximum before its `last_packet`.
    Oversize,
    /// A datagram that is not exactly one packet.
    BadDatagram,
}

impl core::fmt::Display for CpxError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            CpxError::BadLength(l) => write!(f, "CPX length {l} outside 2..=1022"),
            CpxError::UnknownVersion(v) => write!(f, "CPX version {v} is not 0"),
            CpxError::Oversize => f.write_str("CPX message longer than the allowed maximum"),
            CpxError::BadDatagram => f.write_str("datagram is not exactly one CPX packet"),
        }
    }
}

/// Checks the 4 bytes at the start of `b`: `Ok(Some(total wire length))`, `Ok(None)` if more bytes
/// are needed to tell.
pub fn packet_len(b: &[u8]) -> Result<Option<usize>, CpxError> {
    if b.len() < 2 {
        return Ok(None);
    }
    let len = u16::from_le_bytes([b[0], b[1]]);
    if !(2..=MTU as u16).contains(&len) {
        return Err(CpxError::BadLength(len));
    }
    if b.len() >= 4 {
        let h = Header::from_bytes([b[2], b[3]]);
        if h.version != 0 {
            return Err(CpxError::UnknownVersion(h.version));
        }
    }
    Ok(Some(2 + len as usize))
}

/// A header that could have been sent: known source and destination targets, different ones.
fn plausible(h: Header) -> bool {
    (1..=4).contains(&h.dst) && (1..=4).contains(&h.src) && h.dst != h.src
}

/// Appends one wire packet to `out`. `payload.len()` must be at most [`MAX_PAYLOAD`].
pub fn encode_packet(h: Header, payload: &[u8], out: &mut Vec<u8>) {
    debug_assert!(payload.len() <= MAX_PAYLOAD);
    out.extend_from_slice(&((payload.len() + 2) as u16).to_le_bytes());
    out.extend_from_slice(&h.to_bytes());
    out.extend_from_slice(payload);
}

/// A whole message: its packets as they travel on the wire, concatenated.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WireMessage {
    pub bytes: Vec<u8>,
    pub packets: u32,
    pub first: Header,
}

/// Groups a byte stream into whole messages (packets up to and including `last_packet`).
///
/// Memory is bounded: at most `max_message` bytes are held. After an error the partial message is
/// discarded and the assembler skips bytes until a plausible packet header, so one garbled packet
/// costs one message, not the connection.
pub struct MessageAssembler {
    max_message: usize,
    pending: Vec<u8>,
    msg: Vec<u8>,
    packets: u32,
    first: Option<Header>,
    skipping: bool,
}

impl MessageAssembler {
    pub fn new(max_message: usize) -> Self {
        MessageAssembler { max_message, pending: Vec::new(), msg: Vec::new(), packets: 0, first: None, skipping: false }
    }

    /// True when no partial packet or message is held.
    pub fn is_idle(&self) -> bool {
        self.pending.is_empty() && self.msg.is_empty()
    }

    /// Drops everything held (for example when the peer reconnects).
    pub fn reset(&mut self) {
        self.pending.clear();
        self.drop_message();
        self.skipping = false;
    }

    fn drop_message(&mut self) {
        self.msg.clear();
        self.packets = 0;
        self.first = None;
    }

    /// Feeds bytes; calls `on_message` for each completed message and `on_error` for each error.
    pub fn push(&mut self, mut bytes: &[u8], mut on_message: impl FnMut(WireMessage), mut on_error: impl FnMut(CpxError)) {
        while !bytes.is_empty() || !self.pending.is_empty() {
            // Take enough bytes into `pending` to hold one packet.
            let need = match packet_len(&self.pending) {
                Ok(Some(n)) => n,
                Ok(None) => 4,
                Err(e) => {
                    if !self.skipping {
                        on_error(e);
                        self.drop_message();
                    }
                    self.skipping = true;
                    self.pending.remove(0);
                    continue;
                }
            };
            if self.pending.len() < need {
                if bytes.is_empty() {
                    return;
                }
                let take = (need - self.pending.len()).min(bytes.len());
                self.pending.extend_from_slice(&bytes[..take]);
                bytes = &bytes[take..];
                continue;
            }
            // A whole packet (need >= 4 here because a length >= 2 was read).
            let h = Header::from_bytes([self.pending[2], self.pending[3]]);
            if self.skipping && !plausible(h) {
                // While resynchronising, only a header naming real targets ends the skip.
                self.pending.remove(0);
                continue;
            }
            self.skipping = false;
            if self.msg.len() + need > self.max_message {
                on_error(CpxError::Oversize);
                self.drop_message();
                self.pending.clear();
                // Skip the rest of this oversize message.
                if !h.last_packet {
                    self.first = None;
                    self.packets = u32::MAX;
                }
                continue;
            }
            if self.packets == u32::MAX {
                // Inside an oversize message being skipped.
                if h.last_packet {
                    self.packets = 0;
                }
                self.pending.clear();
                continue;
            }
            self.msg.extend_from_slice(&self.pending);
            self.pending.clear();
            self.packets += 1;
            self.first.get_or_insert(h);
            if h.last_packet {
                let first = self.first.take().unwrap_or(h);
                let packets = core::mem::replace(&mut self.packets, 0);
                on_message(WireMessage { bytes: core::mem::take(&mut self.msg), packets, first });
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::vec;
    use proptest::prelude::*;

    fn msg(payload: &[u8], per: usize, function: u8) -> Vec<u8> {
        let mut out = Vec::new();
        let chunks: Vec<&[u8]> = if payload.is_empty() { vec![&[][..]] } else { payload.chunks(per).collect() };
        for (i, c) in chunks.iter().enumerate() {
            let h = Header { dst: target::WIFI_HOST, src: target::GAP8, last_packet: i + 1 == chunks.len(), function, version: 0 };
            encode_packet(h, c, &mut out);
        }
        out
    }

    fn collect(a: &mut MessageAssembler, bytes: &[u8]) -> (Vec<WireMessage>, Vec<CpxError>) {
        let (mut m, mut e) = (Vec::new(), Vec::new());
        a.push(bytes, |x| m.push(x), |x| e.push(x));
        (m, e)
    }

    #[test]
    fn header_bits() {
        let h = Header { dst: 3, src: 4, last_packet: true, function: 5, version: 0 };
        assert_eq!(h.to_bytes(), [0x63, 0x05]);
        assert_eq!(Header::from_bytes([0x63, 0x05]), h);
    }

    #[test]
    fn bad_length_and_version_are_reported_once_then_resync() {
        let good = msg(b"hello", 1020, 5);
        let mut bytes = vec![0xFF, 0xFF, 0, 0, 0xAA]; // length 65535
        bytes.extend_from_slice(&good);
        let mut a = MessageAssembler::new(4096);
        let (m, e) = collect(&mut a, &bytes);
        assert_eq!(e, vec![CpxError::BadLength(0xFFFF)]);
        assert_eq!(m.len(), 1);
        assert_eq!(m[0].bytes, good);
        let mut v = msg(b"x", 1020, 5);
        v[3] |= 0x40; // version 1
        let (m, e) = collect(&mut a, &v);
        assert!(m.is_empty());
        assert_eq!(e, vec![CpxError::UnknownVersion(1)]);
        let (m, _) = collect(&mut a, &good);
        assert_eq!(m.len(), 1);
    }

    #[test]
    fn oversize_message_is_dropped_whole() {
        let big = msg(&[7u8; 5000], 1000, 5);
        let small = msg(&[1u8; 10], 1000, 5);
        let mut a = MessageAssembler::new(3000);
        let mut all = big.clone();
        all.extend_from_slice(&small);
        let (m, e) = collect(&mut a, &all);
        assert_eq!(e, vec![CpxError::Oversize]);
        assert_eq!(m.len(), 1);
        assert_eq!(m[0].bytes, small);
        assert!(a.is_idle());
    }

    proptest! {
        #[test]
        fn any_split_gives_the_same_messages(
            payloads in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..3000), 1..5),
            per in prop_oneof![Just(128usize), Just(256), Just(512), Just(1020)],
            cuts in proptest::collection::vec(1usize..700, 0..40),
        ) {
            let mut stream = Vec::new();
            for p in &payloads { stream.extend_from_slice(&msg(p, per, 5)); }
            let mut a = MessageAssembler::new(1 << 20);
            let mut got = Vec::new();
            let mut rest = &stream[..];
            for c in cuts {
                let c = c.min(rest.len());
                a.push(&rest[..c], |m| got.push(m), |e| panic!("{e}"));
                rest = &rest[c..];
            }
            a.push(rest, |m| got.push(m), |e| panic!("{e}"));
            prop_assert_eq!(got.len(), payloads.len());
            for (g, p) in got.iter().zip(&payloads) {
                prop_assert_eq!(&g.bytes, &msg(p, per, 5));
                prop_assert_eq!(g.packets as usize, p.len().div_ceil(per).max(1));
            }
            prop_assert!(a.is_idle());
        }

        #[test]
        fn garbage_never_panics_and_memory_is_bounded(bytes in proptest::collection::vec(any::<u8>(), 0..5000)) {
            let mut a = MessageAssembler::new(2048);
            a.push(&bytes, |m| assert!(m.bytes.len() <= 2048), |_| {});
            prop_assert!(a.pending.len() <= 2 + MTU && a.msg.len() <= 2048);
        }
    }
}
