//! The receiver's side of forward error correction over UDP (`docs/stream.md`, "Forward error
//! correction"): asks the bridge for FEC, feeds its datagrams through
//! [`gapstream_fec::reassembler::Reassembler`] (decoding with `reed-solomon-erasure`, the
//! well-kept crate whose code the bridge's encoder reproduces byte for byte), hands the CPX packets
//! on in order, and reports its shard counts so the bridge's adaptive mode can follow the loss.
//!
//! A datagram that is not a FEC datagram (the plain stream, before the bridge granted the
//! request) goes on as it is.

use std::collections::{HashMap, VecDeque};
use std::time::{Duration, Instant};

use gapstream_fec::code::CodeError;
use gapstream_fec::reassembler::{Config, Reassembler, Recover, Stats};
use gapstream_fec::wire::{self, Control};

/// `reed-solomon-erasure` as the reassembler's decoder, one codec per block shape.
#[derive(Default)]
pub struct RseDecoder {
    codecs: HashMap<(usize, usize), reed_solomon_erasure::galois_8::ReedSolomon>,
}

impl std::fmt::Debug for RseDecoder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "RseDecoder({} block shapes)", self.codecs.len())
    }
}

impl Recover for RseDecoder {
    fn reconstruct_data(
        &mut self,
        k: usize,
        m: usize,
        shards: &mut [Option<Vec<u8>>],
    ) -> Result<(), CodeError> {
        if k == 0 {
            return Err(CodeError::NoData);
        }
        if m == 0 || k + m > gapstream_fec::code::MAX_SHARDS || shards.len() != k + m {
            return Err(CodeError::TooManyShards);
        }
        if self.codecs.len() > 64 {
            self.codecs.clear();
        }
        let rs = match self.codecs.entry((k, m)) {
            std::collections::hash_map::Entry::Occupied(e) => e.into_mut(),
            std::collections::hash_map::Entry::Vacant(v) => v.insert(
                reed_solomon_erasure::galois_8::ReedSolomon::new(k, m)
                    .map_err(|_| CodeError::TooManyShards)?,
            ),
        };
        rs.reconstruct_data(shards).map_err(|e| match e {
            reed_solomon_erasure::Error::TooFewShardsPresent => CodeError::TooFewShards,
            _ => CodeError::LengthMismatch,
        })
    }
}

/// FEC counters of a receiver (cumulative over its connections).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct FecCounters {
    /// The bridge is sending FEC shards on the current connection.
    pub on: bool,
    /// Packets rebuilt from parity.
    pub recovered: u64,
    /// Blocks given up with packets missing.
    pub unrecoverable_blocks: u64,
    /// Redundancy of the latest block (parity shards per data shard, in percent).
    pub redundancy_pct: f64,
    /// Data and parity shards received.
    pub data_shards: u64,
    pub parity_shards: u64,
    /// Shards of finished blocks received / lost (what the reports say).
    pub shards_received: u64,
    pub shards_lost: u64,
    /// Shards refused: malformed, inconsistent with their block, duplicates, late.
    pub refused: u64,
}

/// How often the receiver tells the bridge its shard counts.
pub const REPORT_INTERVAL: Duration = Duration::from_millis(500);

/// One connection's FEC state.
pub struct FecRx {
    reasm: Reassembler<RseDecoder>,
    start: Instant,
    /// Counters of earlier connections.
    base: FecCounters,
    last_report: Option<Instant>,
    /// Packets ready to go on.
    ready: VecDeque<Vec<u8>>,
}

impl std::fmt::Debug for FecRx {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FecRx")
            .field("stats", self.reasm.stats())
            .finish()
    }
}

impl FecRx {
    /// A fresh reassembler; `base` carries the counters of earlier connections.
    pub fn new(base: FecCounters) -> Self {
        FecRx {
            reasm: Reassembler::new(Config::default(), RseDecoder::default()),
            start: Instant::now(),
            base: FecCounters { on: false, ..base },
            last_report: None,
            ready: VecDeque::new(),
        }
    }

    fn now_ms(&self) -> u64 {
        self.start.elapsed().as_millis() as u64
    }

    /// A datagram from the bridge: its packets (or the packets it completes) are queued for
    /// [`FecRx::next_packet`]. A plain CPX datagram is queued as it is.
    pub fn datagram(&mut self, d: &[u8]) {
        if !wire::is_fec(d) {
            self.ready.push_back(d.to_vec());
            return;
        }
        let now = self.now_ms();
        let ready = &mut self.ready;
        self.reasm
            .push(d, now, &mut |p| ready.push_back(p.to_vec()));
    }

    /// Timers (blocks given up after their wait); call when nothing arrived for a while.
    pub fn poll(&mut self) {
        let now = self.now_ms();
        let ready = &mut self.ready;
        self.reasm.poll(now, &mut |p| ready.push_back(p.to_vec()));
    }

    /// Packets ready to go on.
    pub fn ready(&self) -> usize {
        self.ready.len()
    }

    /// The request datagram, while FEC shards have not arrived yet.
    pub fn request(&self) -> Option<Vec<u8>> {
        (!self.is_on()).then(|| Control::Request.encode().0[..4].to_vec())
    }

    /// The next packet to hand on.
    pub fn next_packet(&mut self) -> Option<Vec<u8>> {
        self.ready.pop_front()
    }

    /// True once FEC shards arrive on this connection.
    pub fn is_on(&self) -> bool {
        self.reasm.stats().datagrams > 0
    }

    /// What to send the bridge now in place of the empty keep-alive: the request until shards
    /// arrive, then a report every [`REPORT_INTERVAL`] (`None`: nothing due).
    pub fn outgoing(&mut self, keepalive_due: bool) -> Option<Vec<u8>> {
        if !self.is_on() {
            return keepalive_due.then(|| Control::Request.encode().0[..4].to_vec());
        }
        if self
            .last_report
            .is_some_and(|t| t.elapsed() < REPORT_INTERVAL)
        {
            return None;
        }
        self.last_report = Some(Instant::now());
        let (b, n) = Control::Report(self.reasm.take_report()).encode();
        Some(b[..n].to_vec())
    }

    /// The reassembler's own counters (this connection).
    pub fn stats(&self) -> &Stats {
        self.reasm.stats()
    }

    /// Counters of this connection added to the earlier ones.
    pub fn counters(&self) -> FecCounters {
        let s = self.reasm.stats();
        let b = &self.base;
        FecCounters {
            on: self.is_on(),
            recovered: b.recovered + s.recovered,
            unrecoverable_blocks: b.unrecoverable_blocks + s.unrecoverable_blocks,
            redundancy_pct: if s.k > 0 {
                s.redundancy_percent()
            } else {
                b.redundancy_pct
            },
            data_shards: b.data_shards + s.data_shards,
            parity_shards: b.parity_shards + s.parity_shards,
            shards_received: b.shards_received + s.shards_received,
            shards_lost: b.shards_lost + s.shards_lost,
            refused: b.refused + s.malformed + s.inconsistent + s.duplicates + s.late,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use gapstream_fec::wire::block_datagrams;

    #[test]
    fn plain_datagrams_pass_and_fec_shards_are_rebuilt_with_reed_solomon_erasure() {
        let mut rx = FecRx::new(FecCounters::default());
        assert_eq!(rx.outgoing(true), Some(b"GF\x12\x00".to_vec()));
        assert_eq!(rx.outgoing(false), None);
        rx.datagram(&[5, 0, 1, 2, 3, 4, 5]);
        assert_eq!(rx.next_packet(), Some(vec![5, 0, 1, 2, 3, 4, 5]));
        let data: Vec<Vec<u8>> = (0..6u8).map(|i| vec![i; 100 + i as usize]).collect();
        let dg = block_datagrams(0, &data, 3, true).unwrap();
        for (i, d) in dg.iter().enumerate() {
            if ![1, 2, 4].contains(&i) {
                rx.datagram(d);
            }
        }
        let got: Vec<Vec<u8>> = std::iter::from_fn(|| rx.next_packet()).collect();
        assert_eq!(got, data);
        let c = rx.counters();
        assert!(c.on);
        assert_eq!(c.recovered, 3);
        assert_eq!(c.redundancy_pct, 50.0);
        let r = rx.outgoing(false).unwrap();
        assert!(matches!(Control::parse(&r), Ok(Control::Report(_))));
        assert_eq!(rx.outgoing(true), None, "the next report in 500 ms");
    }
}
