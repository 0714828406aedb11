//! The receiver's side, sans I/O: FEC datagrams in (any order, lost, duplicated, forged), the
//! datagrams they carry out, in order, each at most once, as soon as it can be told that nothing
//! before it is still coming or can be rebuilt.
//!
//! - A data shard that is next in line is handed on at once: with no loss FEC adds no delay.
//! - After a gap the following shards wait until the block's parity rebuilds the missing ones
//!   (as soon as any `k` of the block's shards are in), or until the block is given up: a shard
//!   of a later block arrived [`Config::reorder_ms`] ago, or nothing of the block arrived for
//!   [`Config::stall_ms`], or the window of [`Config::window`] blocks or [`Config::max_buffered`]
//!   bytes is full. A block given up hands on what it has, in order, past the gaps (as plain UDP
//!   would: the CPX and protocol layers drop the broken message and count it).
//! - Memory is bounded by the window; every input is checked ([`crate::wire::ShardHeader::parse`],
//!   shards of a block must agree on k, m and the symbol length, rebuilt symbols must have a
//!   length inside the symbol and zero padding); nothing panics on any input.
//!
//! A forged or corrupted parity shard can make a rebuilt datagram wrong; that datagram then fails
//! where any corrupted datagram fails: its CPX message's authentication tag (counted by the
//! protocol session), unless the length / padding check here already refuses it
//! ([`Stats::inconsistent`]).

use alloc::collections::VecDeque;
use alloc::vec;
use alloc::vec::Vec;

use crate::code::{self, CodeError};
use crate::wire::{Report, ShardHeader};

/// Rebuilds the missing data symbols of a block (`shards[p]`: symbol at point `p`, `0..k` data,
/// `k..k+m` parity, `None` when missing; every present symbol equally long).
pub trait Recover {
    fn reconstruct_data(
        &mut self,
        k: usize,
        m: usize,
        shards: &mut [Option<Vec<u8>>],
    ) -> Result<(), CodeError>;
}

/// This crate's decoder ([`code::reconstruct_data`]).
#[derive(Clone, Copy, Debug, Default)]
pub struct Decoder;

impl Recover for Decoder {
    fn reconstruct_data(
        &mut self,
        k: usize,
        _m: usize,
        shards: &mut [Option<Vec<u8>>],
    ) -> Result<(), CodeError> {
        code::reconstruct_data(k, shards)
    }
}

/// Limits and patience.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Config {
    /// Blocks held at once (from the oldest not yet retired).
    pub window: u32,
    /// A block with a gap is given up this long after a shard of a later block arrived
    /// (tolerated reordering), and a finished block is forgotten then (its late parity shards
    /// still counted).
    pub reorder_ms: u64,
    /// A block with a gap is given up after this long without any of its shards.
    pub stall_ms: u64,
    /// Bytes of shards held at most.
    pub max_buffered: usize,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            window: 8,
            reorder_ms: 5,
            stall_ms: 50,
            max_buffered: 1 << 20,
        }
    }
}

/// Shards that arrive this far past the window are taken for a restarted stream only after
/// [`RESYNC_AFTER`] of them in a row.
const RESYNC_DISTANCE: u32 = 64;
const RESYNC_AFTER: u32 = 8;

/// Counters since the reassembler was made.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    /// FEC datagrams pushed.
    pub datagrams: u64,
    pub data_shards: u64,
    pub parity_shards: u64,
    /// Bytes of data / parity shards (headers included): the overhead the receiver sees.
    pub data_bytes: u64,
    pub parity_bytes: u64,
    /// Datagrams handed on.
    pub delivered: u64,
    /// Datagrams rebuilt from parity and handed on.
    pub recovered: u64,
    /// Blocks finished (complete, rebuilt or given up).
    pub blocks: u64,
    /// Blocks given up with data missing.
    pub unrecoverable_blocks: u64,
    /// Datagrams of given-up blocks never handed on.
    pub lost_datagrams: u64,
    /// Shards of finished blocks that never arrived (data and parity: the loss rate reported to
    /// the bridge).
    pub shards_lost: u64,
    /// Shards of finished blocks that arrived.
    pub shards_received: u64,
    pub duplicates: u64,
    /// Not FEC datagrams, or malformed headers.
    pub malformed: u64,
    /// Shards of blocks already forgotten.
    pub late: u64,
    /// Shards that disagree with their block (k, m, symbol length), and rebuilt symbols whose
    /// length or padding is wrong (a corrupted or forged parity shard).
    pub inconsistent: u64,
    /// Shape of the most recent block that had parity and at least half as many data shards as
    /// the one before it: the redundancy in use (`m / k`).
    pub k: u8,
    pub m: u8,
}

impl Stats {
    /// Redundancy in use, in percent of the data shards (`100 · m / k` of the latest block).
    pub fn redundancy_percent(&self) -> f64 {
        if self.k == 0 {
            0.0
        } else {
            100.0 * self.m as f64 / self.k as f64
        }
    }
}

#[derive(Debug)]
struct Block {
    id: u32,
    /// 0: not known yet.
    k: u8,
    m: u8,
    /// Symbol length (from parity shards); 0: not known yet.
    l: usize,
    /// Data shards hold the datagram, parity shards the symbol.
    shards: Vec<Option<Vec<u8>>>,
    present: usize,
    bytes: usize,
    /// Next data index to hand on.
    next: usize,
    done: bool,
    gave_up: bool,
    /// `present` when recovery last failed (retried only with more shards).
    tried: Option<usize>,
    last_ms: u64,
    later_seen_ms: Option<u64>,
    /// The block the stream was joined in: not counted (what came before is not known).
    first: bool,
    /// Data shards handed on.
    handed: usize,
}

impl Block {
    fn new(id: u32, now: u64) -> Self {
        Block {
            id,
            k: 0,
            m: 0,
            l: 0,
            shards: Vec::new(),
            present: 0,
            bytes: 0,
            next: 0,
            done: false,
            gave_up: false,
            tried: None,
            last_ms: now,
            later_seen_ms: None,
            first: false,
            handed: 0,
        }
    }

    fn data(&self, i: usize) -> Option<&[u8]> {
        if self.k != 0 && i >= self.k as usize {
            return None;
        }
        self.shards.get(i)?.as_deref()
    }
}

/// The reassembler (one per UDP connection to the bridge).
#[derive(Debug)]
pub struct Reassembler<R: Recover = Decoder> {
    cfg: Config,
    rec: R,
    blocks: VecDeque<Block>,
    buffered: usize,
    far_streak: u32,
    stats: Stats,
    /// The most shards one finished block lost since the last report.
    worst_since_report: u16,
    /// The block after the last one forgotten: what comes before it is late, even when no block
    /// is held.
    after_retired: Option<u32>,
}

impl<R: Recover> Reassembler<R> {
    pub fn new(cfg: Config, rec: R) -> Self {
        Reassembler {
            cfg: Config {
                window: cfg.window.clamp(1, RESYNC_DISTANCE),
                ..cfg
            },
            rec,
            blocks: VecDeque::new(),
            buffered: 0,
            far_streak: 0,
            stats: Stats::default(),
            worst_since_report: 0,
            after_retired: None,
        }
    }

    pub fn stats(&self) -> &Stats {
        &self.stats
    }

    /// The loss report for the bridge (cumulative counts, wrapping; the worst block since the
    /// previous report, which this call starts again).
    pub fn take_report(&mut self) -> Report {
        Report {
            received: self.stats.shards_received as u32,
            lost: self.stats.shards_lost as u32,
            unrecoverable: self.stats.unrecoverable_blocks as u32,
            worst: core::mem::take(&mut self.worst_since_report),
        }
    }

    /// Bytes of shards held now.
    pub fn buffered(&self) -> usize {
        self.buffered
    }

    /// One datagram from the bridge that [`crate::wire::is_fec`] recognised; `deliver` gets the
    /// datagrams that can go on now, in order. `now_ms`: a monotonic clock.
    pub fn push(&mut self, d: &[u8], now_ms: u64, deliver: &mut dyn FnMut(&[u8])) {
        self.stats.datagrams += 1;
        let Ok((h, body)) = ShardHeader::parse(d) else {
            self.stats.malformed += 1;
            return;
        };
        if h.parity {
            self.stats.parity_shards += 1;
            self.stats.parity_bytes += d.len() as u64;
            // Redundancy in use: the shape of the latest block about as large as the ones
            // before (a block of one control message does not stand for the stream).
            if 2 * h.k as usize >= self.stats.k as usize {
                self.stats.k = h.k;
                self.stats.m = h.m;
            }
        } else {
            self.stats.data_shards += 1;
            self.stats.data_bytes += d.len() as u64;
        }
        if let Some(slot) = self.slot_for(&h, now_ms, deliver) {
            self.insert(slot, &h, body, now_ms, deliver);
        }
        self.advance(now_ms, deliver);
    }

    /// Timers: gives up blocks whose time is over. Call it when nothing arrives (every ~100 ms).
    pub fn poll(&mut self, now_ms: u64, deliver: &mut dyn FnMut(&[u8])) {
        self.advance(now_ms, deliver);
    }

    /// Where block `h.block` goes in the window, making room (or resynchronising) as needed.
    fn slot_for(
        &mut self,
        h: &ShardHeader,
        now: u64,
        deliver: &mut dyn FnMut(&[u8]),
    ) -> Option<usize> {
        let Some(front) = self.blocks.front().map(|b| b.id) else {
            if self
                .after_retired
                .is_some_and(|n| h.block.wrapping_sub(n) >= 1 << 31)
            {
                // A shard of a block already forgotten (say, a parity shard that came after its
                // block was finished and counted).
                self.stats.late += 1;
                return None;
            }
            self.start_at(h, now);
            return Some(0);
        };
        let diff = h.block.wrapping_sub(front);
        if diff >= 1 << 31 {
            self.stats.late += 1;
            return None;
        }
        if diff >= self.cfg.window + RESYNC_DISTANCE {
            // Far ahead: the stream restarted, or a forgery. Believed only when it persists.
            self.far_streak += 1;
            if self.far_streak < RESYNC_AFTER {
                self.stats.late += 1;
                return None;
            }
            while !self.blocks.is_empty() {
                self.retire_front(now, deliver, true);
            }
            // A restarted stream: joined anew.
            self.after_retired = None;
            self.start_at(h, now);
            return Some(0);
        }
        self.far_streak = 0;
        while h
            .block
            .wrapping_sub(self.blocks.front().map_or(h.block, |b| b.id))
            >= self.cfg.window
        {
            self.retire_front(now, deliver, true);
        }
        let Some(front) = self.blocks.front().map(|b| b.id) else {
            self.start_at(h, now);
            return Some(0);
        };
        let slot = h.block.wrapping_sub(front) as usize;
        while self.blocks.len() <= slot {
            let id = front.wrapping_add(self.blocks.len() as u32);
            self.blocks.push_back(Block::new(id, now));
        }
        for b in self.blocks.iter_mut().take(slot) {
            b.later_seen_ms.get_or_insert(now);
        }
        Some(slot)
    }

    fn start_at(&mut self, h: &ShardHeader, now: u64) {
        let mut b = Block::new(h.block, now);
        // Only the block the stream was joined in is not counted, and only there is what came
        // before the first shard not waited for (later, every block is followed from index 0).
        if self.after_retired.is_none() {
            b.first = true;
            b.next = if h.parity { 0 } else { h.index as usize };
        }
        self.blocks.push_back(b);
        self.far_streak = 0;
    }

    fn insert(
        &mut self,
        slot: usize,
        h: &ShardHeader,
        body: &[u8],
        now: u64,
        deliver: &mut dyn FnMut(&[u8]),
    ) {
        let b = &mut self.blocks[slot];
        let i = h.index as usize;
        if b.shards.get(i).is_some_and(Option::is_some) {
            self.stats.duplicates += 1;
            return;
        }
        if !h.parity && b.k != 0 && i >= b.k as usize {
            // A data shard at a parity point of this block.
            self.stats.inconsistent += 1;
            return;
        }
        if b.done {
            // Too late to matter; counted as received for the loss report. The block stays
            // while its shards keep coming.
            b.last_ms = now;
            if b.shards.len() <= i {
                b.shards.resize(i + 1, None);
            }
            if b.shards[i].is_none() && (b.k == 0 || i < b.k as usize + b.m as usize) {
                b.shards[i] = Some(Vec::new());
                b.present += 1;
            }
            return;
        }
        // The block's shape: every shard that states it must agree.
        if h.k != 0 {
            if b.k == 0 {
                let longest_index = b.shards.iter().rposition(Option::is_some);
                if longest_index.is_some_and(|x| x >= h.k as usize) {
                    self.stats.inconsistent += 1;
                    return;
                }
                b.k = h.k;
                b.m = h.m;
            } else if (b.k, b.m) != (h.k, h.m) {
                self.stats.inconsistent += 1;
                return;
            }
        }
        if h.parity {
            if b.l == 0 {
                let too_long = b
                    .shards
                    .iter()
                    .take(b.k as usize)
                    .flatten()
                    .any(|d| code::symbol_len(d.len()) > body.len());
                if too_long {
                    self.stats.inconsistent += 1;
                    return;
                }
                b.l = body.len();
            } else if b.l != body.len() {
                self.stats.inconsistent += 1;
                return;
            }
        } else if b.l != 0 && code::symbol_len(body.len()) > b.l {
            self.stats.inconsistent += 1;
            return;
        }
        if b.shards.len() <= i {
            b.shards.resize(i + 1, None);
        }
        b.shards[i] = Some(body.to_vec());
        b.present += 1;
        b.bytes += body.len();
        b.last_ms = now;
        self.buffered += body.len();
        while self.buffered > self.cfg.max_buffered && self.blocks.len() > 1 {
            self.retire_front(now, deliver, true);
        }
    }

    /// Hands on what can go, rebuilds what can be rebuilt, gives up what waited too long, and
    /// forgets finished blocks.
    fn advance(&mut self, now: u64, deliver: &mut dyn FnMut(&[u8])) {
        let reorder = self.cfg.reorder_ms;
        let stall = self.cfg.stall_ms;
        for bi in 0..self.blocks.len() {
            if self.blocks[bi].done {
                continue;
            }
            loop {
                let b = &mut self.blocks[bi];
                while let Some(d) = b.data(b.next) {
                    deliver(d);
                    b.next += 1;
                    b.handed += 1;
                    self.stats.delivered += 1;
                }
                if b.k != 0 && b.next >= b.k as usize {
                    b.done = true;
                    break;
                }
                if b.k != 0 && b.l != 0 && b.present >= b.k as usize && b.tried != Some(b.present) {
                    if self.recover(bi) {
                        continue;
                    }
                    self.blocks[bi].tried = Some(self.blocks[bi].present);
                }
                let b = &mut self.blocks[bi];
                let late = b
                    .later_seen_ms
                    .is_some_and(|t| now.saturating_sub(t) >= reorder);
                let stalled = now.saturating_sub(b.last_ms) >= stall;
                if late || stalled {
                    Self::give_up(b, &mut self.stats, deliver);
                }
                break;
            }
            if !self.blocks[bi].done {
                // Order: nothing after a block that still waits.
                break;
            }
        }
        while let Some(b) = self.blocks.front() {
            let expired = b
                .later_seen_ms
                .is_some_and(|t| now.saturating_sub(t) >= reorder)
                || now.saturating_sub(b.last_ms) >= stall;
            if b.done && expired {
                self.retire_front(now, deliver, false);
            } else {
                break;
            }
        }
    }

    /// Rebuilds the missing data of block `bi`; true when the missing ones were handed a value.
    fn recover(&mut self, bi: usize) -> bool {
        let b = &mut self.blocks[bi];
        let (k, m, l) = (b.k as usize, b.m as usize, b.l);
        let mut shards: Vec<Option<Vec<u8>>> = vec![None; k + m];
        for (p, s) in b.shards.iter().enumerate().take(k + m) {
            let Some(s) = s else { continue };
            shards[p] = if p < k {
                match code::data_symbol(s, l) {
                    Some(sym) => Some(sym),
                    None => return false,
                }
            } else {
                Some(s.clone())
            };
        }
        if self.rec.reconstruct_data(k, m, &mut shards).is_err() {
            return false;
        }
        let mut rebuilt = Vec::new();
        for (p, s) in shards.iter().enumerate().take(k) {
            if b.shards.get(p).is_some_and(Option::is_some) {
                continue;
            }
            match s.as_deref().and_then(code::symbol_datagram) {
                Some(d) => rebuilt.push((p, d.to_vec())),
                None => {
                    // A wrong length or padding: some shard of this set is not what the bridge
                    // sent. Nothing of it is handed on.
                    self.stats.inconsistent += 1;
                    return false;
                }
            }
        }
        if b.shards.len() < k {
            b.shards.resize(k, None);
        }
        for (p, d) in rebuilt {
            if p >= b.next {
                self.stats.recovered += 1;
            }
            self.buffered += d.len();
            b.bytes += d.len();
            b.shards[p] = Some(d);
        }
        true
    }

    fn give_up(b: &mut Block, stats: &mut Stats, deliver: &mut dyn FnMut(&[u8])) {
        let end = if b.k != 0 {
            b.k as usize
        } else {
            b.shards.len()
        };
        let mut missing = false;
        for i in b.next..end {
            match b.data(i) {
                Some(d) => {
                    deliver(d);
                    b.handed += 1;
                    stats.delivered += 1;
                }
                None => missing = true,
            }
        }
        b.next = end;
        b.done = true;
        b.gave_up = missing;
    }

    /// Forgets the oldest block (given up first if it still waits) and counts it.
    fn retire_front(&mut self, _now: u64, deliver: &mut dyn FnMut(&[u8]), force: bool) {
        let Some(mut b) = self.blocks.pop_front() else {
            return;
        };
        if !b.done {
            if !force {
                self.blocks.push_front(b);
                return;
            }
            Self::give_up(&mut b, &mut self.stats, deliver);
        }
        self.after_retired = Some(b.id.wrapping_add(1));
        self.buffered = self.buffered.saturating_sub(b.bytes);
        if b.first {
            return;
        }
        self.stats.blocks += 1;
        let expected = if b.k != 0 {
            b.k as usize + b.m as usize
        } else {
            b.shards
                .iter()
                .rposition(Option::is_some)
                .map_or(0, |x| x + 1)
        };
        let lost = expected.saturating_sub(b.present);
        self.stats.shards_received += b.present as u64;
        self.stats.shards_lost += lost as u64;
        self.worst_since_report = self
            .worst_since_report
            .max(lost.min(u16::MAX as usize) as u16);
        if b.gave_up {
            self.stats.unrecoverable_blocks += 1;
            let data = if b.k != 0 { b.k as usize } else { expected };
            self.stats.lost_datagrams += data.saturating_sub(b.handed) as u64;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::block_datagrams;
    use proptest::prelude::*;

    fn run(r: &mut Reassembler, d: &[u8], now: u64, out: &mut Vec<Vec<u8>>) {
        r.push(d, now, &mut |x| out.push(x.to_vec()));
    }

    fn payloads(block: u32, k: usize, len: usize) -> Vec<Vec<u8>> {
        (0..k)
            .map(|i| {
                (0..len - (i % 3))
                    .map(|x| (x as u32 ^ block.wrapping_mul(131) ^ (i as u32 * 7)) as u8)
                    .collect()
            })
            .collect()
    }

    #[test]
    fn without_loss_every_data_shard_goes_on_at_once() {
        let mut r = Reassembler::new(Config::default(), Decoder);
        let mut out = Vec::new();
        let mut want = Vec::new();
        for b in 0..5u32 {
            let data = payloads(b, 7, 100);
            let dg = block_datagrams(b, &data, 3, b % 2 == 0).unwrap();
            for (i, d) in dg.iter().enumerate() {
                let before = out.len();
                run(&mut r, d, b as u64, &mut out);
                if i < 7 {
                    assert_eq!(out.len(), before + 1, "data shard {i} of block {b} waited");
                    assert_eq!(out.last().unwrap(), &data[i]);
                }
            }
            want.extend(data);
        }
        assert_eq!(out, want);
        r.poll(1000, &mut |_| panic!("nothing left"));
        let s = r.stats();
        assert_eq!(
            (s.recovered, s.unrecoverable_blocks, s.duplicates),
            (0, 0, 0)
        );
        assert_eq!(s.blocks, 4, "the first block is not counted");
        assert_eq!(s.shards_lost, 0);
        assert_eq!(s.shards_received, 4 * 10);
        assert_eq!((s.k, s.m), (7, 3));
        // A block of one datagram after them does not stand for the stream's redundancy.
        for d in &block_datagrams(5, &payloads(5, 1, 10), 1, false).unwrap() {
            run(&mut r, d, 2000, &mut out);
        }
        assert_eq!((r.stats().k, r.stats().m), (7, 3));
    }

    #[test]
    fn a_lost_data_shard_is_rebuilt_when_the_parity_arrives() {
        let mut r = Reassembler::new(Config::default(), Decoder);
        let mut out = Vec::new();
        let data = payloads(9, 5, 64);
        let dg = block_datagrams(9, &data, 2, false).unwrap();
        run(&mut r, &dg[0], 0, &mut out);
        // Shard 1 lost: 2, 3, 4 wait.
        for d in &dg[2..5] {
            run(&mut r, d, 0, &mut out);
        }
        assert_eq!(out, data[..1]);
        run(&mut r, &dg[5], 1, &mut out);
        assert_eq!(out, data);
        assert_eq!(r.stats().recovered, 1);
        run(&mut r, &dg[6], 1, &mut out);
        run(&mut r, &dg[6], 1, &mut out);
        assert_eq!(r.stats().duplicates, 1);
        assert_eq!(out, data);
    }

    #[test]
    fn an_unrecoverable_block_is_given_up_and_the_stream_goes_on() {
        let cfg = Config::default();
        let mut r = Reassembler::new(cfg, Decoder);
        let mut out = Vec::new();
        let b0 = block_datagrams(0, &payloads(0, 4, 50), 1, true).unwrap();
        let b1 = block_datagrams(1, &payloads(1, 4, 50), 1, true).unwrap();
        let b2 = block_datagrams(2, &payloads(2, 4, 50), 1, true).unwrap();
        for d in &b0 {
            run(&mut r, d, 0, &mut out);
        }
        // Block 1 loses two data shards and has one parity shard.
        for d in [&b1[0], &b1[3], &b1[4]] {
            run(&mut r, d, 1, &mut out);
        }
        assert_eq!(out.len(), 5);
        run(&mut r, &b2[0], 2, &mut out);
        assert_eq!(
            out.len(),
            5,
            "block 2 waits behind block 1 for the reordering margin"
        );
        r.poll(2 + cfg.reorder_ms, &mut |x| out.push(x.to_vec()));
        // Block 1's shard 3 (past the gap), then block 2's first.
        assert_eq!(out.len(), 7);
        assert_eq!(out[5], payloads(1, 4, 50)[3]);
        assert_eq!(out[6], payloads(2, 4, 50)[0]);
        for d in &b2[1..] {
            run(&mut r, d, 20, &mut out);
        }
        r.poll(1000, &mut |x| out.push(x.to_vec()));
        let s = r.stats();
        assert_eq!(s.unrecoverable_blocks, 1);
        assert_eq!(s.lost_datagrams, 2);
        assert_eq!(s.shards_lost, 2);
        assert_eq!(out.len(), 4 + 2 + 4);
    }

    /// A receiver busy for longer than the stall time between a block's last data shard and its
    /// parity shards (verifying a frame): nothing is counted lost, the parity is not taken for a
    /// new stream.
    #[test]
    fn parity_after_a_long_pause_is_counted_received() {
        let cfg = Config::default();
        let mut r = Reassembler::new(cfg, Decoder);
        let mut out = Vec::new();
        for b in 0..4u32 {
            let dg = block_datagrams(b, &payloads(b, 5, 30), 3, true).unwrap();
            let t = 1000 * b as u64;
            for d in &dg[..5] {
                run(&mut r, d, t, &mut out);
            }
            // The parity comes 10 stall times later, one shard at a time.
            for (i, d) in dg[5..].iter().enumerate() {
                run(
                    &mut r,
                    d,
                    t + 10 * cfg.stall_ms + i as u64 * cfg.stall_ms,
                    &mut out,
                );
            }
        }
        r.poll(100_000, &mut |x| out.push(x.to_vec()));
        let s = r.stats();
        assert_eq!(out.len(), 20);
        assert_eq!((s.shards_lost, s.late, s.blocks), (0, 0, 3), "{s:?}");
        assert_eq!(s.shards_received, 3 * 8);
    }

    #[test]
    fn a_gap_with_nothing_after_it_is_given_up_after_the_stall_time() {
        let cfg = Config::default();
        let mut r = Reassembler::new(cfg, Decoder);
        let mut out = Vec::new();
        let b = block_datagrams(0, &payloads(0, 3, 10), 1, true).unwrap();
        run(&mut r, &b[0], 0, &mut out);
        run(&mut r, &b[2], 0, &mut out);
        r.poll(cfg.stall_ms - 1, &mut |x| out.push(x.to_vec()));
        assert_eq!(out.len(), 1);
        r.poll(cfg.stall_ms, &mut |x| out.push(x.to_vec()));
        assert_eq!(out.len(), 2);
    }

    /// A parity shard with one byte changed: a rebuilt datagram that differs from what was sent,
    /// or one refused by the length / padding check; never a panic, never a datagram twice.
    #[test]
    fn a_corrupted_parity_shard_rebuilds_a_wrong_datagram_or_is_refused() {
        let data = payloads(0, 6, 40);
        let dg = block_datagrams(0, &data, 2, true).unwrap();
        let (mut wrong, mut refused) = (0, 0);
        for byte in crate::wire::HEADER_LEN..dg[6].len() {
            let mut r = Reassembler::new(Config::default(), Decoder);
            let mut out = Vec::new();
            let mut forged = dg[6].clone();
            forged[byte] ^= 0x5A;
            for d in [&dg[0], &dg[1], &dg[3], &dg[4], &dg[5], &forged] {
                run(&mut r, d, 0, &mut out);
            }
            r.poll(1000, &mut |x| out.push(x.to_vec()));
            if r.stats().inconsistent > 0 {
                refused += 1;
                assert_eq!(out.len(), 5);
            } else {
                assert_eq!(out.len(), 6);
                assert_ne!(out[2], data[2]);
                wrong += 1;
            }
        }
        // Bytes in the length prefix / padding are caught here; the rest reach the AEAD.
        assert!(wrong > 0 && refused > 0, "{wrong} {refused}");
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(96))]
        /// Blocks of any shape with at most m losses each, duplicates and reordering inside a
        /// block: every datagram comes out once, in order. With heavier loss: what comes out is an
        /// in-order subsequence of what went in.
        #[test]
        fn in_order_exactly_once_recovering_up_to_m_losses(
            shapes in proptest::collection::vec((1usize..=20, 0usize..=6, 1usize..=120, any::<bool>()), 1..12),
            losses in proptest::collection::vec(any::<u16>(), 0..60),
            heavy in any::<bool>(),
            seed in any::<u64>(),
        ) {
            let mut r = Reassembler::new(Config::default(), Decoder);
            let mut out = Vec::new();
            let mut sent = Vec::new();
            let mut li = losses.into_iter();
            let mut x = seed | 1;
            let mut now = 0u64;
            for (b, &(k, m, len, announce)) in shapes.iter().enumerate() {
                let data = payloads(b as u32 ^ seed as u32, k, len.max(3));
                let mut dg = block_datagrams(b as u32, &data, m, announce).unwrap();
                sent.extend(data);
                let budget = if heavy { k + m } else { m };
                let mut lost = 0;
                while lost < budget {
                    let Some(l) = li.next() else { break };
                    let i = l as usize % dg.len();
                    if !dg[i].is_empty() { dg[i].clear(); lost += 1; }
                }
                // Reorder a little inside the block, duplicate a shard.
                x ^= x << 13; x ^= x >> 7; x ^= x << 17;
                let n = dg.len();
                if n > 2 { dg.swap(x as usize % n, (x >> 8) as usize % n); }
                let dup = dg[(x >> 16) as usize % n].clone();
                dg.push(dup);
                for d in dg.iter().filter(|d| !d.is_empty()) {
                    run(&mut r, d, now, &mut out);
                }
                now += 1;
            }
            r.poll(now + 1000, &mut |d| out.push(d.to_vec()));
            if heavy {
                let mut it = sent.iter();
                for o in &out {
                    prop_assert!(it.any(|s| s == o), "out of order or invented");
                }
            } else {
                // The first block may have lost its first shards before the stream was joined.
                prop_assert!(sent.ends_with(&out) || out == sent, "{} of {}", out.len(), sent.len());
                let skipped = sent.len() - out.len();
                prop_assert!(skipped <= shapes[0].0);
            }
            prop_assert!(r.buffered() <= Config::default().max_buffered);
        }

        /// Garbage, truncated, mutated and replayed datagrams: no panic, bounded memory, nothing
        /// handed on twice more often than it was sent.
        #[test]
        fn garbage_never_panics_and_memory_stays_bounded(
            ops in proptest::collection::vec((any::<u8>(), any::<u16>(), proptest::collection::vec(any::<u8>(), 0..40)), 0..300),
        ) {
            let cfg = Config { max_buffered: 64 * 1024, ..Config::default() };
            let mut r = Reassembler::new(cfg, Decoder);
            let good = block_datagrams(5, &payloads(5, 10, 300), 4, false).unwrap();
            let mut now = 0;
            let mut n_out = 0usize;
            for (op, a, bytes) in ops {
                let d: Vec<u8> = match op % 4 {
                    0 => bytes,
                    1 => {
                        let mut d = good[a as usize % good.len()].clone();
                        if !bytes.is_empty() { let i = a as usize % d.len(); d[i] ^= bytes[0]; }
                        d
                    }
                    2 => {
                        let mut d = good[a as usize % good.len()].clone();
                        d[3..7].copy_from_slice(&(a as u32 * 977).to_le_bytes());
                        d.truncate(d.len().saturating_sub(bytes.len()));
                        d
                    }
                    _ => { now += a as u64 % 100; continue; }
                };
                r.push(&d, now, &mut |_| n_out += 1);
                prop_assert!(r.buffered() <= cfg.max_buffered + 2 * crate::wire::MAX_DATAGRAM);
            }
            r.poll(now + 10_000, &mut |_| n_out += 1);
            prop_assert!(n_out as u64 == r.stats().delivered);
        }
    }
}
