//! The bodies of gapstream's fuzz targets, kept out of the `cargo fuzz` crate (`fuzz/`, nightly,
//! libFuzzer) so that the same code also runs on stable: `tests/corpus.rs` feeds every body its
//! committed seed corpus (`fuzz/corpus/<target>/`) and proptest-random inputs in `make test`.
//!
//! Each body takes raw bytes, drives one parser or state machine that reads untrusted input, and
//! panics only when the code under test panics or breaks one of the invariants it checks (written
//! next to each body). Docs: `docs/fuzzing.md`.
//!
//! | target | what reads the bytes |
//! |---|---|
//! | `cpx_decoder` | [`gapstream_protocol::cpx::StreamDecoder`] (TCP / SPI byte stream → CPX packets) |
//! | `cpx_assembler` | [`gapstream_protocol::assembler::Assembler`] (CPX packets → protocol messages) |
//! | `wire_decode` | the message header decoders of [`gapstream_protocol::wire`], `hello_ids`, `frame_layout`, `control_header` |
//! | `frame_open` | [`gapstream_protocol::frame::open_frame`] / `open_control` under fixed keys, every suite |
//! | `drone_session` | [`gapstream_protocol::session::DroneSession`] fed what receivers send (messages or raw CPX bytes) |
//! | `receiver_session` | [`gapstream_protocol::session::ReceiverSession`] fed what the drone sends (messages or raw CPX bytes) |
//! | `stock_stream` | the stock `0xBC` header parser: `compat::StockReceiver` and the receiver's stock session, test-pattern stamps |
//! | `bridge_client` | [`esp32_bridge::forward::Bridge`], the bridge's client side (TCP bytes, UDP datagrams) |
//! | `fec_reassembly` | [`gapstream_fec::reassembler::Reassembler`] (FEC datagrams, forged and corrupted shards), the FEC header and control parsers, `esp32_bridge::fec` fed requests and reports |
//! | `jpegls_decode` | [`gapstream_jpegls::decode`], the receiver's JPEG-LS decoder (any payload, truncated ones too) |
//! | `jpeg_decode` | [`gapstream::codec::decode`] of a JPEG frame, the receiver's JPEG decode path (any payload and claimed size) |
//! | `stm32_uart` | [`gapstream_drone::state`], the drone's parser of the flight controller's UART messages and its latest-sample tracker |
//!
//! Session and bridge inputs are a sequence of records `ctl u8, len u16 (little-endian), len
//! bytes` ([`Input::record`]), so that the seeds ([`seeds`]) can be written from real messages.

pub mod bridge;
pub mod cpx;
pub mod fec;
pub mod jpeg;
pub mod jpegls;
pub mod seeds;
pub mod session;
pub mod stm32;
pub mod stock;
pub mod wire;

/// A fuzz target: its name (the `fuzz/fuzz_targets/<name>.rs` binary and `fuzz/corpus/<name>/`)
/// and its body.
pub type Target = (&'static str, fn(&[u8]));

/// Every target, in the order `make fuzz` runs them.
pub const TARGETS: &[Target] = &[
    ("cpx_decoder", cpx::cpx_decoder),
    ("cpx_assembler", cpx::cpx_assembler),
    ("wire_decode", wire::wire_decode),
    ("frame_open", wire::frame_open),
    ("drone_session", session::drone_session),
    ("receiver_session", session::receiver_session),
    ("stock_stream", stock::stock_stream),
    ("bridge_client", bridge::bridge_client),
    ("fec_reassembly", fec::fec_reassembly),
    ("jpegls_decode", jpegls::jpegls_decode),
    ("jpeg_decode", jpeg::jpeg_decode),
    ("stm32_uart", stm32::stm32_uart),
];

/// Reads fuzz input front to back; past the end every read gives zeros / empty slices, so any
/// input is a valid (possibly short) program.
#[derive(Clone, Copy, Debug)]
pub struct Input<'a> {
    data: &'a [u8],
}

impl<'a> Input<'a> {
    pub fn new(data: &'a [u8]) -> Self {
        Input { data }
    }
    pub fn is_empty(&self) -> bool {
        self.data.is_empty()
    }
    /// What is left.
    pub fn rest(&self) -> &'a [u8] {
        self.data
    }
    pub fn byte(&mut self) -> u8 {
        let b = self.data.first().copied().unwrap_or(0);
        self.data = self.data.get(1..).unwrap_or(&[]);
        b
    }
    pub fn u16(&mut self) -> u16 {
        u16::from_le_bytes([self.byte(), self.byte()])
    }
    /// Up to `n` bytes.
    pub fn bytes(&mut self, n: usize) -> &'a [u8] {
        let n = n.min(self.data.len());
        let (a, b) = self.data.split_at(n);
        self.data = b;
        a
    }
    /// The next record `(ctl, body)`: `ctl u8, len u16 LE, body` (body cut short at the end of the
    /// input); `None` at the end.
    pub fn record(&mut self) -> Option<(u8, &'a [u8])> {
        if self.is_empty() {
            return None;
        }
        let ctl = self.byte();
        let len = self.u16() as usize;
        Some((ctl, self.bytes(len)))
    }
}

/// Appends one record (the inverse of [`Input::record`]); bodies longer than 65535 bytes are an
/// error of the seed generator.
pub fn push_record(out: &mut Vec<u8>, ctl: u8, body: &[u8]) {
    let len = u16::try_from(body.len()).expect("record body fits in u16");
    out.push(ctl);
    out.extend_from_slice(&len.to_le_bytes());
    out.extend_from_slice(body);
}

/// The body of the target called `name`.
pub fn target(name: &str) -> Option<fn(&[u8])> {
    TARGETS.iter().find(|(n, _)| *n == name).map(|(_, f)| *f)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_round_trip_and_short_input_reads_zeros() {
        let mut v = Vec::new();
        push_record(&mut v, 7, b"abc");
        push_record(&mut v, 0x80, b"");
        let mut i = Input::new(&v);
        assert_eq!(i.record(), Some((7, &b"abc"[..])));
        assert_eq!(i.record(), Some((0x80, &b""[..])));
        assert_eq!(i.record(), None);
        let mut i = Input::new(&[5, 0xFF]);
        assert_eq!(i.record(), Some((5, &[][..])));
        assert_eq!(i.byte(), 0);
    }
}
