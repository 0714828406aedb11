//! CPX packets → gapstream messages.
//!
//! A message starts at the first packet after a `last_packet` one and its length is known from its
//! own header ([`crate::wire::message_len`]), so the assembler does not depend on the `last_packet`
//! bit alone. That makes it recover from lost packets (UDP) without losing the next message:
//!
//! * the message is complete when its announced length has arrived (even if `last_packet` was
//!   lost with the packet that carried it);
//! * a packet with `last_packet` that ends the message early means packets were lost: the message
//!   is dropped ([`AssemblyError::Truncated`]);
//! * a packet that would overrun the announced length cannot belong to the message: the message
//!   is dropped and the packet is tried as the start of the next one;
//! * a continuation packet with no message started (its start was lost) is dropped;
//! * a message announcing more than the configured maximum is refused before it is buffered, so
//!   memory use is bounded by `max_message` whatever arrives.
//!
//! What survives is then authenticated by the session; anything that is not a real message fails
//! there.

use alloc::collections::VecDeque;
use alloc::vec::Vec;

use crate::cpx::{GAPSTREAM_FUNCTION, Route};
use crate::wire::{self, WireError};

/// Why (part of) a message was dropped. The assembler goes on with the next packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AssemblyError {
    /// The first bytes are not a gapstream message header.
    Wire(WireError),
    /// A message announces more bytes than allowed.
    Oversize { len: usize, max: usize },
    /// The message ended (a `last_packet`, or the next message's start) before its announced length.
    Truncated { expected: usize, got: usize },
    /// A continuation packet arrived with no message started.
    Stray,
    /// The first packet holds more bytes than the message it starts announces.
    Overrun { expected: usize, got: usize },
}

impl core::fmt::Display for AssemblyError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            AssemblyError::Wire(e) => write!(f, "not a gapstream message: {e}"),
            AssemblyError::Oversize { len, max } => {
                write!(f, "message of {len} bytes exceeds the maximum {max}")
            }
            AssemblyError::Truncated { expected, got } => {
                write!(
                    f,
                    "message truncated ({got} of {expected} bytes): packets were lost"
                )
            }
            AssemblyError::Stray => {
                f.write_str("packet without the start of its message (lost packets)")
            }
            AssemblyError::Overrun { expected, got } => {
                write!(
                    f,
                    "packet holds {got} bytes, its message header announces {expected}"
                )
            }
        }
    }
}

impl core::error::Error for AssemblyError {}

/// Counters of the assembler.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct AssemblyCounters {
    pub packets: u64,
    pub messages: u64,
    pub dropped_messages: u64,
    pub stray_packets: u64,
    /// Packets of other CPX functions (ignored).
    pub ignored_packets: u64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// Between messages.
    Idle,
    /// Collecting a message; its length once the header has arrived.
    Collecting(Option<usize>),
    /// Discarding the rest of an oversize message (bytes left).
    Skipping(usize),
}

/// Reassembles gapstream messages from CPX packets of the gapstream function.
#[derive(Debug, Clone)]
pub struct Assembler {
    buf: Vec<u8>,
    state: State,
    max_message: usize,
    function: u8,
    /// Packets of the message in progress, and the wire bytes of the last message completed.
    packets_in_message: usize,
    last_wire_len: usize,
    done: VecDeque<Vec<u8>>,
    counters: AssemblyCounters,
}

impl Assembler {
    /// `max_message`: the largest message accepted (e.g. a frame header, the largest payload and a
    /// tag). Packets of other functions than [`GAPSTREAM_FUNCTION`] are ignored.
    pub fn new(max_message: usize) -> Self {
        Assembler {
            buf: Vec::new(),
            state: State::Idle,
            max_message,
            function: GAPSTREAM_FUNCTION as u8,
            packets_in_message: 0,
            last_wire_len: 0,
            done: VecDeque::new(),
            counters: AssemblyCounters::default(),
        }
    }

    /// Bytes held for the message in progress (never above `max(max_message, 1020)`).
    pub fn buffered(&self) -> usize {
        self.buf.len()
    }
    pub fn counters(&self) -> AssemblyCounters {
        self.counters
    }

    /// Drops the message in progress (for example after a reconnect).
    pub fn reset(&mut self) {
        self.buf = Vec::new();
        self.state = State::Idle;
        self.packets_in_message = 0;
    }

    /// A completed message is waiting ([`Assembler::next_message`] gives it).
    pub fn has_message(&self) -> bool {
        !self.done.is_empty()
    }

    /// Completed messages, oldest first.
    pub fn next_message(&mut self) -> Option<Vec<u8>> {
        self.done.pop_front()
    }

    /// The message [`Assembler::next_message`] gives next.
    pub fn peek_message(&self) -> Option<&[u8]> {
        self.done.front().map(|m| &m[..])
    }

    /// The bytes the packets of the message completed last took on the wire (CPX headers
    /// included); 0 before the first.
    pub fn last_wire_len(&self) -> usize {
        self.last_wire_len
    }

    fn drop_message(&mut self, e: AssemblyError) -> Result<(), AssemblyError> {
        self.counters.dropped_messages += 1;
        self.buf.clear();
        self.state = State::Idle;
        self.packets_in_message = 0;
        Err(e)
    }

    /// Feeds one packet. An error reports a dropped message or packet; messages completed by this
    /// packet are still queued for [`Assembler::next_message`].
    pub fn push(&mut self, route: Route, payload: &[u8]) -> Result<(), AssemblyError> {
        if route.function != self.function {
            self.counters.ignored_packets += 1;
            return Ok(());
        }
        self.counters.packets += 1;
        let mut earlier = None;
        match self.state {
            State::Skipping(left) if payload.len() <= left => {
                let left = left - payload.len();
                self.state = if route.last_packet || left == 0 {
                    State::Idle
                } else {
                    State::Skipping(left)
                };
                return Ok(());
            }
            // Longer than the rest of the oversize message: a new message starts here.
            State::Skipping(_) => self.state = State::Idle,
            State::Collecting(Some(exp)) if self.buf.len() + payload.len() > exp => {
                // Cannot belong to this message: its end was lost. Retry the packet as a start.
                earlier = self
                    .drop_message(AssemblyError::Truncated {
                        expected: exp,
                        got: self.buf.len(),
                    })
                    .err();
            }
            _ => {}
        }
        if self.state == State::Idle {
            match wire::parse_prefix(payload) {
                Ok(_) | Err(WireError::Truncated { .. }) => self.state = State::Collecting(None),
                // A message of another protocol version (a peer of an older or newer build): said
                // so, not taken for a stray continuation. Its length is that version's business:
                // this packet is dropped, any further ones of the message count as stray.
                Err(e @ WireError::UnsupportedVersion(_)) => {
                    self.counters.dropped_messages += 1;
                    return Err(earlier.unwrap_or(AssemblyError::Wire(e)));
                }
                Err(_) => {
                    self.counters.stray_packets += 1;
                    return Err(earlier.unwrap_or(AssemblyError::Stray));
                }
            }
        }
        let r = self.append(route, payload);
        match earlier {
            Some(e) => Err(e),
            None => r,
        }
    }

    fn append(&mut self, route: Route, payload: &[u8]) -> Result<(), AssemblyError> {
        self.buf.extend_from_slice(payload);
        self.packets_in_message += 1;
        let mut expected = match self.state {
            State::Collecting(e) => e,
            _ => None,
        };
        if expected.is_none() {
            let head = &self.buf[..self.buf.len().min(64)];
            match wire::message_len(head) {
                Ok(Some(len)) if len > self.max_message => {
                    let left = len.saturating_sub(self.buf.len());
                    self.counters.dropped_messages += 1;
                    self.buf.clear();
                    self.packets_in_message = 0;
                    self.state = if route.last_packet || left == 0 {
                        State::Idle
                    } else {
                        State::Skipping(left)
                    };
                    return Err(AssemblyError::Oversize {
                        len,
                        max: self.max_message,
                    });
                }
                Ok(Some(len)) => {
                    // Bounded by `max_message` (checked above): one allocation per message.
                    self.buf.reserve_exact(len.saturating_sub(self.buf.len()));
                    expected = Some(len)
                }
                Ok(None) => {}
                Err(e) => return self.drop_message(AssemblyError::Wire(e)),
            }
            self.state = State::Collecting(expected);
        }
        match expected {
            Some(exp) if self.buf.len() == exp => {
                self.counters.messages += 1;
                self.last_wire_len = exp + crate::cpx::WIRE_OVERHEAD * self.packets_in_message;
                self.packets_in_message = 0;
                self.done.push_back(core::mem::take(&mut self.buf));
                self.state = State::Idle;
                Ok(())
            }
            Some(exp) if self.buf.len() > exp => {
                let got = self.buf.len();
                self.drop_message(AssemblyError::Overrun { expected: exp, got })
            }
            Some(exp) if route.last_packet => {
                let got = self.buf.len();
                self.drop_message(AssemblyError::Truncated { expected: exp, got })
            }
            None if route.last_packet => {
                let got = self.buf.len();
                self.drop_message(AssemblyError::Truncated {
                    expected: got + 1,
                    got,
                })
            }
            _ => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cpx::{Function, LastFlag, MAX_WIRE_PACKET, Packetizer, StreamDecoder, Target};
    use crate::wire::{ControlHeader, FrameHeader, MsgType, PixelFormat};
    use alloc::vec;
    use proptest::prelude::*;

    fn route() -> Route {
        Route::new(Target::Gap8, Target::WifiHost, Function::Test)
    }

    /// A well-formed message (frame, control or alert) with the given body bytes.
    fn message(kind: u8, body: &[u8], seq: u64) -> Vec<u8> {
        let mut m = Vec::new();
        match kind % 3 {
            0 => {
                let h = FrameHeader {
                    suite: 0x11,
                    pixel_format: PixelFormat::Grey8.code(),
                    width: 1,
                    height: 1,
                    epoch: 0,
                    sequence: seq,
                    capture_ns: 0,
                    payload_len: body.len() as u32,
                    state: None,
                };
                m.extend_from_slice(&h.encode());
                m.extend_from_slice(body);
                m.extend_from_slice(&[0xEE; 16]);
            }
            1 => {
                let b = &body[..body.len().min(64)];
                let h = ControlHeader {
                    msg_type: MsgType::GroupKey,
                    session: [1; 8],
                    sequence: seq,
                    body_len: b.len() as u16,
                };
                m.extend_from_slice(&h.encode());
                m.extend_from_slice(b);
                m.extend_from_slice(&[0xDD; 16]);
            }
            _ => m.extend_from_slice(&crate::wire::encode_alert(
                [seq as u8; 8],
                crate::wire::AlertCode::BadHello,
            )),
        }
        m
    }

    /// Packets (wire bytes) of one message.
    fn packets(m: &[u8], size: usize) -> Vec<Vec<u8>> {
        let mut p = Packetizer::new(route(), [m, &[], &[]], size, LastFlag::Final).unwrap();
        let mut out = [0u8; MAX_WIRE_PACKET];
        let mut v = Vec::new();
        while let Some(n) = p.next_packet(&mut out) {
            v.push(out[..n.unwrap()].to_vec());
        }
        v
    }

    fn feed(wire: &[u8], cut: usize, asm: &mut Assembler) -> Vec<Vec<u8>> {
        let mut d = StreamDecoder::new();
        let mut got = Vec::new();
        for chunk in wire.chunks(cut.max(1)) {
            let mut c = chunk;
            while let Some(r) = d.decode(&mut c) {
                let p = r.unwrap();
                let _ = asm.push(p.route, p.payload);
                while let Some(m) = asm.next_message() {
                    got.push(m);
                }
            }
        }
        got
    }

    proptest! {
        /// encode ∘ decode = identity for any messages, packet sizes and stream splits.
        #[test]
        fn identity_under_any_split(
            msgs in proptest::collection::vec((any::<u8>(), proptest::collection::vec(any::<u8>(), 0..2500), 1usize..=1020), 1..12),
            cut in 1usize..3000,
        ) {
            let mut wire = Vec::new();
            let mut want = Vec::new();
            for (i, (kind, body, size)) in msgs.iter().enumerate() {
                let m = message(*kind, body, i as u64);
                for p in packets(&m, *size) { wire.extend_from_slice(&p); }
                want.push(m);
            }
            let mut asm = Assembler::new(4096);
            let got = feed(&wire, cut, &mut asm);
            prop_assert_eq!(got, want);
            prop_assert_eq!(asm.buffered(), 0);
        }

        /// Each message's wire length is what its packets took (payloads and CPX headers), for any
        /// packet size, also after a message that lost its tail.
        #[test]
        fn wire_length_of_each_message(
            msgs in proptest::collection::vec((any::<u8>(), proptest::collection::vec(any::<u8>(), 0..2500), 1usize..=1020), 1..8),
            truncate_first in any::<bool>(),
        ) {
            let mut asm = Assembler::new(4096);
            for (i, (kind, body, size)) in msgs.iter().enumerate() {
                let m = message(*kind, body, i as u64);
                let ps = packets(&m, *size);
                let whole = !(truncate_first && i == 0 && ps.len() > 1);
                // A first message without its middle packets: dropped at its last one.
                for (j, p) in ps.iter().enumerate() {
                    if whole || j == 0 || j + 1 == ps.len() {
                        let r = Route::from_bytes([p[2], p[3]]).unwrap();
                        let _ = asm.push(r, &p[4..]);
                    }
                }
                if whole {
                    let wire: usize = ps.iter().map(|p| p.len()).sum();
                    prop_assert_eq!(wire, crate::cpx::wire_len(m.len(), *size));
                    prop_assert_eq!(asm.last_wire_len(), wire);
                    prop_assert_eq!(asm.peek_message(), Some(&m[..]));
                    prop_assert_eq!(asm.next_message(), Some(m));
                } else {
                    // Its remains may read as some message (the session rejects it): skip it.
                    while asm.next_message().is_some() {}
                }
                prop_assert!(asm.peek_message().is_none());
            }
        }

        /// With packets dropped: every message that lost nothing, and whose predecessor's last packet
        /// arrived, still comes out intact; nothing else comes out longer than the limit.
        #[test]
        fn clean_messages_survive_losses(
            msgs in proptest::collection::vec((any::<u8>(), proptest::collection::vec(any::<u8>(), 0..3000)), 1..12),
            size in prop_oneof![Just(128usize), Just(256), Just(512), Just(1020), 1usize..1020],
            drops in proptest::collection::vec(any::<bool>(), 0..200),
        ) {
            let mut wire = Vec::new();
            let mut clean = Vec::new();
            let mut prev_last_ok = true;
            let mut k = 0;
            for (i, (kind, body)) in msgs.iter().enumerate() {
                let m = message(*kind, body, i as u64);
                let ps = packets(&m, size);
                let mut lost_any = false;
                let mut last_ok = true;
                for (j, p) in ps.iter().enumerate() {
                    let drop = drops.get(k).copied().unwrap_or(false) && k % 3 == 0;
                    k += 1;
                    if drop { lost_any = true; if j + 1 == ps.len() { last_ok = false; } } else { wire.extend_from_slice(p); }
                }
                if !lost_any && prev_last_ok { clean.push(m); }
                prev_last_ok = last_ok;
            }
            let mut asm = Assembler::new(4096);
            let got = feed(&wire, 700, &mut asm);
            for m in &clean {
                prop_assert!(got.contains(m), "clean message lost");
            }
            for m in &got {
                prop_assert!(m.len() <= 4096);
            }
        }

    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]
        /// Arbitrary packets never panic and never make the assembler hold more than the bound.
        #[test]
        fn garbage_is_bounded(pkts in proptest::collection::vec(
            (any::<bool>(), proptest::collection::vec(any::<u8>(), 0..1020), any::<bool>()), 0..60)) {
            let mut asm = Assembler::new(2000);
            for (start, mut p, last) in pkts {
                if start && p.len() >= 4 { p[..4].copy_from_slice(&[0x47, 0x53, 0x02, 0x10]); }
                let _ = asm.push(route().with_last(last), &p);
                prop_assert!(asm.buffered() <= 2000 + 1020);
                while let Some(m) = asm.next_message() { prop_assert!(m.len() <= 2000); }
            }
        }
    }

    #[test]
    fn oversize_is_skipped_and_next_message_survives() {
        let big = message(0, &[1u8; 5000], 1);
        let small = message(1, &[2u8; 10], 2);
        let mut wire = Vec::new();
        for p in packets(&big, 1020) {
            wire.extend_from_slice(&p);
        }
        for p in packets(&small, 1020) {
            wire.extend_from_slice(&p);
        }
        let mut asm = Assembler::new(1000);
        let got = feed(&wire, 4096, &mut asm);
        assert_eq!(got, vec![small]);
        assert_eq!(asm.counters().dropped_messages, 1);
    }

    #[test]
    fn lost_last_packet_does_not_take_the_next_message() {
        let a = message(0, &[1u8; 3000], 1);
        let b = message(0, &[2u8; 3000], 2);
        let mut pa = packets(&a, 1020);
        pa.pop();
        let mut wire: Vec<u8> = pa.concat();
        wire.extend(packets(&b, 1020).concat());
        let mut asm = Assembler::new(10_000);
        assert_eq!(feed(&wire, 1024, &mut asm), vec![b]);
        // Other functions are ignored.
        assert!(
            asm.push(
                Route::new(Target::Gap8, Target::WifiHost, Function::App),
                &[0xBC]
            )
            .is_ok()
        );
        assert_eq!(asm.counters().ignored_packets, 1);
    }
}
