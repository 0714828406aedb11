//! Message grouping on top of `gapstream_protocol::cpx` (the protocol crate's CPX codec: length
//! prefix, routing header, stream decoder with resynchronisation). The bridge groups packets into
//! whole messages (up to and including the packet with `last_packet` set) so it can queue and drop
//! whole frames; it never looks past the 2-byte routing header: payloads are opaque ciphertext.

use alloc::vec::Vec;

pub use gapstream_protocol::cpx::{
    CpxError as CodecError, MAX_PAYLOAD, MTU, Route, StreamDecoder, Target, WIRE_OVERHEAD,
};

/// Why bytes are not a usable CPX message.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CpxError {
    /// The CPX codec rejected the bytes (bad length, unsupported version).
    Codec(CodecError),
    /// A message grew past the configured maximum before its `last_packet`.
    Oversize,
    /// A datagram / SPI transaction that is not exactly one packet.
    BadDatagram,
}

impl core::fmt::Display for CpxError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            CpxError::Codec(e) => write!(f, "{e}"),
            CpxError::Oversize => f.write_str("CPX message longer than the allowed maximum"),
            CpxError::BadDatagram => f.write_str("datagram is not exactly one CPX packet"),
        }
    }
}

/// Total wire length of the packet starting at `b`: `Ok(None)` if fewer than 2 bytes.
pub fn packet_len(b: &[u8]) -> Result<Option<usize>, CpxError> {
    gapstream_protocol::cpx::packet_len(b).map_err(CpxError::Codec)
}

/// Appends one wire packet to `out`.
pub fn encode_packet(route: Route, payload: &[u8], out: &mut Vec<u8>) {
    let at = out.len();
    out.resize(at + WIRE_OVERHEAD + payload.len(), 0);
    let n = gapstream_protocol::cpx::encode_packet(route, payload, &mut out[at..])
        .expect("payload fits one packet");
    out.truncate(at + n);
}

/// A whole message: its packets as they travel on the wire, concatenated.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WireMessage {
    pub bytes: Vec<u8>,
    pub packets: u32,
    pub first: Route,
}

/// Groups a byte stream into whole messages. Memory is bounded: at most `max_message` bytes of a
/// message plus the codec's 1 KiB. After an error the partial message is discarded, so one garbled
/// packet costs one message, not the connection.
pub struct MessageAssembler {
    max_message: usize,
    decoder: StreamDecoder,
    msg: Vec<u8>,
    packets: u32,
    first: Option<Route>,
    /// Inside an oversize message: skip until its last packet.
    skipping_oversize: bool,
    /// Inside a garbled stretch (errors reported once per stretch).
    in_error: bool,
}

impl MessageAssembler {
    pub fn new(max_message: usize) -> Self {
        MessageAssembler {
            max_message,
            decoder: StreamDecoder::new(),
            msg: Vec::new(),
            packets: 0,
            first: None,
            skipping_oversize: false,
            in_error: false,
        }
    }

    /// True when no partial packet or message is held.
    pub fn is_idle(&self) -> bool {
        self.decoder.buffered() == 0 && self.msg.is_empty() && !self.skipping_oversize
    }

    /// Drops everything held (for example when the peer reconnects).
    pub fn reset(&mut self) {
        self.decoder.reset();
        self.drop_message();
        self.skipping_oversize = false;
        self.in_error = false;
    }

    fn drop_message(&mut self) {
        self.msg.clear();
        self.packets = 0;
        self.first = None;
    }

    /// Feeds bytes; calls `on_message` for each completed message and `on_error` for each error.
    pub fn push(
        &mut self,
        mut bytes: &[u8],
        mut on_message: impl FnMut(WireMessage),
        mut on_error: impl FnMut(CpxError),
    ) {
        while let Some(r) = self.decoder.decode(&mut bytes) {
            let p = match r {
                Ok(p) => p,
                Err(e) => {
                    // Report once per garbled stretch: the decoder slides byte by byte.
                    if !self.in_error {
                        on_error(CpxError::Codec(e));
                    }
                    self.in_error = true;
                    self.msg.clear();
                    self.packets = 0;
                    self.first = None;
                    continue;
                }
            };
            self.in_error = false;
            let (route, payload) = (p.route, p.payload);
            if self.skipping_oversize {
                self.skipping_oversize = !route.last_packet;
                continue;
            }
            if self.msg.len() + WIRE_OVERHEAD + payload.len() > self.max_message {
                on_error(CpxError::Oversize);
                self.drop_message();
                self.skipping_oversize = !route.last_packet;
                continue;
            }
            encode_packet(route, payload, &mut self.msg);
            self.packets += 1;
            self.first.get_or_insert(route);
            if route.last_packet {
                let first = self.first.take().unwrap_or(route);
                let packets = core::mem::replace(&mut self.packets, 0);
                on_message(WireMessage {
                    bytes: core::mem::take(&mut self.msg),
                    packets,
                    first,
                });
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
        let chunks: Vec<&[u8]> = if payload.is_empty() {
            vec![&[][..]]
        } else {
            payload.chunks(per).collect()
        };
        for (i, c) in chunks.iter().enumerate() {
            let h = Route {
                destination: Target::WifiHost as u8,
                source: Target::Gap8 as u8,
                last_packet: i + 1 == chunks.len(),
                function,
            };
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
    fn bad_length_and_version_are_reported_once_then_resync() {
        let good = msg(b"hello", 1020, 5);
        // Length 65535, then a good message: the codec slides byte by byte onto the real length.
        let mut bytes = vec![0xFF, 0xFF];
        bytes.extend_from_slice(&good);
        let mut a = MessageAssembler::new(4096);
        let (m, e) = collect(&mut a, &bytes);
        assert_eq!(e, vec![CpxError::Codec(CodecError::BadLength(0xFFFF))]);
        assert_eq!(m.len(), 1);
        assert_eq!(m[0].bytes, good);
        let mut v = msg(b"x", 1020, 5);
        v[3] |= 0x40; // version 1
        let (m, e) = collect(&mut a, &v);
        assert!(m.is_empty());
        assert_eq!(e, vec![CpxError::Codec(CodecError::UnsupportedVersion(1))]);
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
            prop_assert!(a.decoder.buffered() <= 2 + MTU && a.msg.len() <= 2048);
        }
    }
}
