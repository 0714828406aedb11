//! Forward error correction: the receiver's reassembler (`gapstream_fec::reassembler`, with the
//! receiver's `reed-solomon-erasure` decoder or this crate's own) fed arbitrary datagrams, forged
//! and corrupted shards, replays and clock jumps; the FEC header and control parsers; and the
//! bridge's side (`esp32_bridge::fec`) fed arbitrary request / report datagrams while it codes a
//! stream.
//!
//! Invariants besides "no panic": a parsed shard header re-encodes to its bytes; memory stays
//! within the reassembler's bound; every datagram handed on is at most one CPX-sized datagram and
//! counted; a well-formed block with at most m losses comes out whole (the genuine traffic of
//! the input, when no forged record interferes with it, is checked against what was sent).

use esp32_bridge::fec::{Fec, FecConfig};
use esp32_bridge::forward::{Bridge, Config, Transport};
use gapstream::fec_rx::RseDecoder;
use gapstream_fec::reassembler::{Config as RConfig, Decoder, Reassembler, Recover};
use gapstream_fec::wire::{self, Control, ShardHeader};

use crate::Input;

/// Operations of a record (`ctl & 7`).
pub mod op {
    /// The body is one datagram from the bridge, as is.
    pub const RAW: u8 = 0;
    /// Shard `body[0]` of the genuine block `ctl >> 3` (a block of the example stream).
    pub const GENUINE: u8 = 1;
    /// A genuine shard with byte `body[1]` xor `body[2]` (a corrupted or forged shard).
    pub const CORRUPTED: u8 = 2;
    /// The clock moves `body[0]` ms (`ctl >> 3` = 31: 10 s).
    pub const CLOCK: u8 = 3;
    /// Timers run.
    pub const POLL: u8 = 4;
    /// The body is a datagram a client sends the bridge (request, report, anything).
    pub const TO_BRIDGE: u8 = 5;
    /// The bridge's FEC sends `body[0]` datagrams of a stream it codes (first queuing a message
    /// of `body[2] % 20 + 1` packets filled with `body[1]` when nothing is queued).
    pub const BRIDGE_SENDS: u8 = 6;
    /// A shard header built from the body's fields, followed by the rest of the body.
    pub const FORGED_HEADER: u8 = 7;
}

/// Blocks of the genuine stream: block `b` has `3 + b % 7` datagrams and `1 + b % 3` parity.
pub fn genuine_block(b: u32) -> Vec<Vec<u8>> {
    let k = 3 + (b % 7) as usize;
    let m = 1 + (b % 3) as usize;
    let data: Vec<Vec<u8>> = (0..k)
        .map(|i| {
            (0..40 + (i * 13 + b as usize) % 90)
                .map(|x| (x as u32 ^ b.wrapping_mul(77) ^ i as u32) as u8)
                .collect()
        })
        .collect();
    wire::block_datagrams(b, &data, m, b % 2 == 0).expect("small blocks")
}

fn drive<R: Recover>(mut input: Input, rec: R) -> gapstream_fec::reassembler::Stats {
    let cfg = RConfig {
        max_buffered: 64 * 1024,
        ..RConfig::default()
    };
    let mut r = Reassembler::new(cfg, rec);
    let mut bridge = Bridge::new(Config::default());
    let client = bridge.add_client(Transport::Udp).expect("a slot");
    let mut fec = Fec::new(FecConfig {
        k: 8,
        parity: 3,
        adaptive: Some((1, 8)),
        ..FecConfig::default()
    });
    let mut now = 0u64;
    let mut handed = 0u64;
    let mut out = [0u8; 2048];
    while let Some((ctl, body)) = input.record() {
        let mut deliver = |d: &[u8]| {
            assert!(d.len() <= wire::MAX_DATAGRAM);
            handed += 1;
        };
        match ctl & 7 {
            op::RAW => r.push(body, now, &mut deliver),
            op::GENUINE | op::CORRUPTED => {
                let blk = genuine_block(u32::from(ctl >> 3));
                let Some(&i) = body.first() else { continue };
                let mut d = blk[i as usize % blk.len()].clone();
                if ctl & 7 == op::CORRUPTED && body.len() >= 3 {
                    let at = body[1] as usize % d.len();
                    d[at] ^= body[2];
                }
                r.push(&d, now, &mut deliver);
            }
            op::CLOCK => {
                now += if ctl >> 3 == 31 {
                    10_000
                } else {
                    u64::from(body.first().copied().unwrap_or(1))
                };
                fec.tick(now);
            }
            op::POLL => r.poll(now, &mut deliver),
            op::TO_BRIDGE => {
                let was_fec = fec.client_datagram(client, body);
                assert_eq!(was_fec, wire::is_fec(body));
                if let Ok(c) = Control::parse(body) {
                    let (b, n) = c.encode();
                    assert_eq!(&b[..n], body, "a control datagram re-encodes to its bytes");
                }
            }
            op::BRIDGE_SENDS => {
                let n = body.first().copied().unwrap_or(0) as usize;
                if bridge.next_for_client(client).is_none() && body.len() > 2 {
                    let mut msg = Vec::new();
                    let payload = vec![body[1]; (body[2] as usize % 20 + 1) * 1020 - 500];
                    for (i, c) in payload.chunks(1020).enumerate() {
                        let route = esp32_bridge::cpx::Route {
                            destination: 3,
                            source: 4,
                            last_packet: (i + 1) * 1020 >= payload.len(),
                            function: 0x0E,
                        };
                        esp32_bridge::cpx::encode_packet(route, c, &mut msg);
                    }
                    bridge.spi_received(&msg);
                }
                for _ in 0..n {
                    let Some(len) = fec.next_datagram(&mut bridge, client, now, &mut out) else {
                        break;
                    };
                    assert!(len <= esp32_bridge::fec::MAX_DATAGRAM);
                    if fec.is_on(client) {
                        let (h, _) =
                            ShardHeader::parse(&out[..len]).expect("the bridge's shards parse");
                        assert_eq!(h.encode(), out[..wire::HEADER_LEN]);
                    }
                    let d = out[..len].to_vec();
                    fec.datagram_sent(&mut bridge, client, now);
                    r.push(&d, now, &mut deliver);
                }
            }
            _ => {
                // FORGED_HEADER
                let mut d = Vec::with_capacity(body.len() + wire::HEADER_LEN);
                d.extend_from_slice(&wire::MAGIC);
                d.extend_from_slice(body);
                if let Ok((h, rest)) = ShardHeader::parse(&d) {
                    assert_eq!(h.encode(), d[..wire::HEADER_LEN]);
                    assert_eq!(rest, &d[wire::HEADER_LEN..]);
                }
                r.push(&d, now, &mut deliver);
            }
        }
        assert!(r.buffered() <= cfg.max_buffered + 2 * wire::MAX_DATAGRAM + 64);
    }
    r.poll(now + 60_000, &mut |_| handed += 1);
    let s = r.stats();
    assert_eq!(handed, s.delivered);
    assert!(s.recovered <= s.delivered);
    assert!(s.data_shards + s.parity_shards + s.malformed <= s.datagrams);
    *s
}

/// The target's body: the first byte picks the decoder (even: `reed-solomon-erasure`, as the
/// receiver runs it; odd: `gapstream_fec`'s own).
pub fn fec_reassembly(data: &[u8]) {
    fec_reassembly_stats(data);
}

/// [`fec_reassembly`], returning the reassembler's counters (for the seed checks).
pub fn fec_reassembly_stats(data: &[u8]) -> gapstream_fec::reassembler::Stats {
    let mut input = Input::new(data);
    if input.byte() % 2 == 0 {
        drive(input, RseDecoder::default())
    } else {
        drive(input, Decoder)
    }
}
