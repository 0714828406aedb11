//! The receiver's stock-stream path without a socket, for the fuzz targets (crate
//! `gapstream_fuzz_targets`): bytes from the bridge → CPX decoder → the stock `0xBC` session, the
//! way [`super::run`] drives them (one malformed report per garbled stretch).

use super::*;
use gapstream_protocol::cpx::StreamDecoder;

/// What the receiver's stock session makes of `bytes` arriving in pieces of `chunk` bytes:
/// every frame delivered (`width`, `height`, pixel bytes) and the number of malformed reports.
pub fn stock_stream(bytes: &[u8], chunk: usize) -> (Vec<(usize, usize, usize)>, usize) {
    let mut session = new_session(&SessionKind::StockPlaintext, Default::default());
    let mut decoder = StreamDecoder::new();
    let (mut events, mut reply) = (Vec::new(), Vec::new());
    let mut garbled = false;
    let (mut frames, mut malformed) = (Vec::new(), 0);
    for mut input in bytes.chunks(chunk.max(1)) {
        while let Some(r) = decoder.decode(&mut input) {
            match r {
                Ok(p) => {
                    garbled = false;
                    session.packet(p.route, p.payload, &mut events, &mut reply)
                }
                Err(_) if !garbled => {
                    garbled = true;
                    malformed += 1;
                }
                Err(_) => {}
            }
        }
        session.tick(&mut events, &mut reply);
        for ev in events.drain(..) {
            match ev {
                Event::Frame(f) => frames.push((f.width, f.height, f.pixels.len())),
                Event::Malformed(_) => malformed += 1,
                _ => {}
            }
        }
    }
    (frames, malformed)
}
