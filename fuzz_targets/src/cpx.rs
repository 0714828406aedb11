//! CPX: the byte-stream decoder and the message reassembler.

use gapstream_protocol::assembler::Assembler;
use gapstream_protocol::cpx::{
    CpxError, MAX_PAYLOAD, MAX_WIRE_PACKET, Route, StreamDecoder, encode_packet,
};
use gapstream_protocol::wire;

use crate::Input;

type Decoded = Vec<Result<(Route, Vec<u8>), CpxError>>;

/// Everything `bytes` decodes to when fed in pieces of `chunk` bytes.
fn decode_all(bytes: &[u8], chunk: usize) -> (Decoded, StreamDecoder) {
    let mut d = StreamDecoder::new();
    let mut out = Vec::new();
    for mut piece in bytes.chunks(chunk.max(1)) {
        while let Some(r) = d.decode(&mut piece) {
            out.push(r.map(|p| (p.route, p.payload.to_vec())));
            assert!(
                d.buffered() <= MAX_WIRE_PACKET,
                "decoder holds {} bytes",
                d.buffered()
            );
        }
        assert!(piece.is_empty(), "decode returned None with input left");
    }
    (out, d)
}

/// `cpx_decoder`: input `chunk u8, stream...`. Invariants: the packets and errors do not depend on
/// how the stream is split (TCP delivers any split); payloads are at most 1020 bytes; the decoder
/// holds at most one wire packet; every decoded packet re-encodes to wire bytes that decode to the
/// same packet; the counters add up.
pub fn cpx_decoder(data: &[u8]) {
    let mut i = Input::new(data);
    let chunk = i.byte() as usize + 1;
    let stream = i.rest();
    let (whole, d) = decode_all(stream, stream.len());
    let (split, _) = decode_all(stream, chunk);
    assert_eq!(
        whole, split,
        "decoding depends on the split (chunk {chunk})"
    );
    let ok = whole.iter().filter(|r| r.is_ok()).count() as u64;
    assert_eq!(d.packets(), ok);
    assert_eq!(d.errors(), whole.len() as u64 - ok);
    let mut buf = [0u8; MAX_WIRE_PACKET];
    for (route, payload) in whole.iter().flatten() {
        assert!(payload.len() <= MAX_PAYLOAD);
        let n = encode_packet(*route, payload, &mut buf).expect("a decoded packet re-encodes");
        let (again, _) = decode_all(&buf[..n], n);
        assert_eq!(again, vec![Ok((*route, payload.clone()))]);
    }
}

/// `cpx_assembler`: input `max u8` (picks the message limit), then records `route (2 bytes),
/// len u16, payload` (len taken modulo 1021). Invariants: the assembler holds at most
/// `max(max_message, 1020)` bytes; every message it completes is at most `max_message` bytes and
/// is exactly as long as its own header says (`wire::message_len`).
pub fn cpx_assembler(data: &[u8]) {
    let mut i = Input::new(data);
    let max = [64usize, 1000, 4096, 70_000][(i.byte() & 3) as usize];
    let mut asm = Assembler::new(max);
    while !i.is_empty() {
        let route = [i.byte(), i.byte()];
        let len = i.u16() as usize % (MAX_PAYLOAD + 1);
        let payload = i.bytes(len);
        let Ok(route) = Route::from_bytes(route) else {
            continue;
        };
        let _ = asm.push(route, payload);
        assert!(
            asm.buffered() <= max.max(MAX_PAYLOAD),
            "assembler holds {} bytes (max_message {max})",
            asm.buffered()
        );
        while let Some(m) = asm.next_message() {
            assert!(m.len() <= max, "message of {} bytes > {max}", m.len());
            let head = &m[..m.len().min(64)];
            assert_eq!(wire::message_len(head), Ok(Some(m.len())), "{m:02x?}");
        }
    }
}
