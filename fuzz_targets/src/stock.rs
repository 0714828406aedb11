//! The stock `0xBC` image stream (plaintext compatibility mode): header parser and reassembly.

use gapstream_drone::testpattern;
use gapstream_protocol::compat::{
    STOCK_HEADER_LEN, StockHeader, StockReceiver, is_stock_header_packet, parse_client_status,
};
use gapstream_protocol::cpx::StreamDecoder;

use crate::Input;

/// `stock_stream`: input `selector u8, CPX stream...`. The stream goes through the CPX decoder into
/// `compat::StockReceiver` (limit picked by the selector) and the WIFI_CTRL client-status parser,
/// and, in pieces of `selector + 1` bytes, through the receiver's own stock session; the first
/// bytes are also read as a header and as a test-pattern frame. Invariants: a header that decodes
/// re-encodes to the same 11 bytes, and a packet taken for a header packet decodes as one; an
/// image has exactly the announced size, within the limit; a frame the receiver delivers has
/// `width × height` pixels.
pub fn stock_stream(data: &[u8]) {
    let mut i = Input::new(data);
    let sel = i.byte();
    let stream = i.rest();

    if let Some(h) = StockHeader::decode(stream) {
        assert_eq!(h.encode()[..], stream[..STOCK_HEADER_LEN]);
    }
    let w = (sel as usize % 16 + 1) * 20;
    let _ = testpattern::decode(stream, w, stream.len() / w);

    let max = [0usize, 100, 4096, 1 << 20][(sel & 3) as usize];
    let mut rx = StockReceiver::new(max);
    let mut d = StreamDecoder::new();
    let mut input = stream;
    while let Some(r) = d.decode(&mut input) {
        let Ok(p) = r else { continue };
        if is_stock_header_packet(p.route, p.payload) {
            assert!(StockHeader::decode(p.payload).is_some());
        }
        let _ = parse_client_status(p.route, p.payload);
        if let Ok(Some(img)) = rx.push(p.route, p.payload) {
            assert_eq!(img.data.len(), img.header.size as usize);
            assert!(img.data.len() <= max);
        }
    }

    let (frames, _) = gapstream::receiver::fuzz_entry::stock_stream(stream, sel as usize + 1);
    for (w, h, n) in frames {
        assert_eq!(n, w * h, "stock frame of {n} bytes for {w}x{h}");
    }
}
