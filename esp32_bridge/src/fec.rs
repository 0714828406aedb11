//! Forward error correction for UDP clients, sans I/O: the bridge's side of `gapstream_fec`
//! (`docs/stream.md`, "Forward error correction"). It sits between the forwarding core's per-client
//! queues ([`Bridge::next_for_client`] / [`Bridge::client_sent`]) and the UDP socket, so every
//! driver (the tokio host bridge, the ESP-IDF glue and the GVSOC stand-in through the C entry
//! points) runs the same code:
//!
//! - a client asks with a request datagram ([`Fec::client_datagram`]); a client that never asks
//!   gets one CPX packet per datagram, as before;
//! - [`Fec::next_datagram`] writes the next datagram for a client into the driver's buffer (a data
//!   shard: header + CPX packet, or a parity shard), [`Fec::datagram_sent`] commits it; a driver
//!   that could not send it asks again and gets the same bytes;
//! - blocks: a message of several packets (a frame) starts a block and is cut into
//!   `ceil(P / k)` blocks of nearly equal size, the last closing with the message's last packet;
//!   single-packet messages share a block that closes at `k` packets or after
//!   [`FecConfig::timeout_ms`] ([`Fec::tick`]); each block gets `ceil(j · m / k)` parity shards;
//! - the adaptive mode ([`gapstream_fec::adaptive`]) moves `m` between a floor and a ceiling from
//!   the client's loss reports.
//!
//! The bridge holds no key: it codes ciphertext, and reads nothing past the CPX routing header.

use alloc::collections::VecDeque;
use alloc::sync::Arc;
use alloc::vec;
use alloc::vec::Vec;
use core::ops::Range;

use gapstream_fec::adaptive::{Adaptive, AdaptiveConfig};
use gapstream_fec::code;
use gapstream_fec::wire::{self, Control, ShardHeader};

use crate::cpx;
use crate::forward::{Bridge, ClientId};

/// Largest datagram [`Fec::next_datagram`] writes: a parity shard of a full CPX packet (10-byte
/// header, 2-byte length prefix, 1,024 bytes).
pub const MAX_DATAGRAM: usize =
    wire::HEADER_LEN + code::LEN_PREFIX + cpx::WIRE_OVERHEAD + cpx::MAX_PAYLOAD;

/// The bridge's FEC settings (the same for every client that asks).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FecConfig {
    /// Grant requests at all.
    pub enabled: bool,
    /// Data shards per block (1..=128).
    pub k: u8,
    /// Parity shards per `k` data shards (`n - k`); the adaptive mode's start.
    pub parity: u8,
    /// A block of single-packet messages closes this long after its first packet.
    pub timeout_ms: u32,
    /// Adaptive mode: parity per `k` between this floor and ceiling (`None`: fixed `parity`).
    pub adaptive: Option<(u8, u8)>,
}

impl Default for FecConfig {
    /// k = 40, n = 50, 5 ms, fixed: a raw frame (78 packets) is two blocks of 39 data and 10
    /// parity shards (`docs/stream.md` has the reasons).
    fn default() -> Self {
        FecConfig {
            enabled: true,
            k: 40,
            parity: 10,
            timeout_ms: 5,
            adaptive: None,
        }
    }
}

/// Why a configuration is refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FecConfigError {
    /// k outside 1..=128.
    K,
    /// k + parity (or k + the adaptive ceiling) above 256.
    TooManyShards,
    /// Adaptive floor above the ceiling.
    FloorAboveCeiling,
}

impl core::fmt::Display for FecConfigError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(match self {
            FecConfigError::K => "FEC k must be 1 to 128",
            FecConfigError::TooManyShards => "FEC k + parity must be at most 256",
            FecConfigError::FloorAboveCeiling => "FEC adaptive floor above its ceiling",
        })
    }
}

impl FecConfig {
    /// From command-line values: k, n (= k + parity), the timeout and the adaptive range as
    /// `FLOOR:CEILING`; the error says which option is wrong.
    pub fn from_cli(
        enabled: bool,
        k: u8,
        n: u16,
        timeout_ms: u32,
        adaptive: Option<&str>,
    ) -> Result<FecConfig, alloc::string::String> {
        use alloc::format;
        let parity = n
            .checked_sub(u16::from(k))
            .and_then(|p| u8::try_from(p).ok())
            .ok_or_else(|| format!("--fec-n {n} must be k ({k}) to k + 255"))?;
        let adaptive = match adaptive {
            None => None,
            Some(s) => {
                let (a, b) = s.split_once(':').ok_or_else(|| {
                    format!("--fec-adaptive {s}: expected FLOOR:CEILING, e.g. 2:40")
                })?;
                let p = |x: &str| {
                    x.trim()
                        .parse::<u8>()
                        .map_err(|e| format!("--fec-adaptive {s}: {e}"))
                };
                Some((p(a)?, p(b)?))
            }
        };
        let c = FecConfig {
            enabled,
            k,
            parity,
            timeout_ms,
            adaptive,
        };
        c.validate().map_err(|e| format!("{e}"))?;
        Ok(c)
    }

    /// Checks the limits.
    pub fn validate(&self) -> Result<(), FecConfigError> {
        if !(1..=128).contains(&self.k) {
            return Err(FecConfigError::K);
        }
        let top = match self.adaptive {
            Some((floor, ceiling)) => {
                if floor > ceiling {
                    return Err(FecConfigError::FloorAboveCeiling);
                }
                ceiling.max(self.parity)
            }
            None => self.parity,
        };
        if self.k as usize + top as usize > code::MAX_SHARDS {
            return Err(FecConfigError::TooManyShards);
        }
        Ok(())
    }
}

/// Counters of one client's FEC stream.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FecClientStats {
    pub blocks: u64,
    pub data_shards: u64,
    pub parity_shards: u64,
    /// Bytes of the CPX packets sent as data shards (what plain UDP would have sent).
    pub packet_bytes: u64,
    /// Bytes of all FEC datagrams sent (headers and parity included).
    pub wire_bytes: u64,
    pub reports: u64,
    /// Parity shards per `k` in use now.
    pub parity_now: u8,
}

/// The next datagram handed out and not yet committed.
#[derive(Clone, Debug)]
enum Peek {
    Parity,
    Data {
        bytes: Arc<[u8]>,
        range: Range<usize>,
        /// Packets of the message this packet starts (0: not a message start).
        starts: usize,
        /// k and m the data shard announced, and its place.
        k: u8,
        m: u8,
        block: u32,
        index: usize,
    },
}

/// The plan of a multi-packet message being sent.
#[derive(Clone, Copy, Debug)]
struct Plan {
    packets_left: usize,
    blocks_left: usize,
}

#[derive(Debug)]
struct Client {
    id: ClientId,
    block: u32,
    open: Vec<(Arc<[u8]>, Range<usize>)>,
    /// Planned size and parity of the open block (0: a block of single-packet messages).
    open_k: u8,
    open_m: u8,
    open_ms: u64,
    plan: Option<Plan>,
    pending: VecDeque<Vec<u8>>,
    peeked: Option<Peek>,
    adaptive: Option<Adaptive>,
    parity: u8,
    sent_since_report: u64,
    stats: FecClientStats,
}

/// The FEC state of every client that asked for it.
#[derive(Debug)]
pub struct Fec {
    cfg: FecConfig,
    clients: Vec<Client>,
    /// Malformed FEC datagrams from clients.
    pub malformed: u64,
}

/// Parity shards for a block of `j` data shards at `parity` per `k`.
fn parity_for_block(j: usize, k: u8, parity: u8) -> u8 {
    if parity == 0 || j == 0 {
        return 0;
    }
    let m = (j * parity as usize).div_ceil(k as usize).max(1);
    m.min(code::MAX_SHARDS - j) as u8
}

/// Packets in the CPX message `bytes` (whole packets back to back).
fn count_packets(bytes: &[u8]) -> usize {
    let mut n = 0;
    let mut rest = bytes;
    while let Ok(Some(len)) = cpx::packet_len(rest) {
        if len > rest.len() {
            break;
        }
        n += 1;
        rest = &rest[len..];
    }
    n
}

impl Fec {
    /// `cfg` should have passed [`FecConfig::validate`]; out-of-range values are clamped.
    pub fn new(cfg: FecConfig) -> Self {
        let k = cfg.k.clamp(1, 128);
        let limit = (code::MAX_SHARDS - k as usize) as u8;
        Fec {
            cfg: FecConfig {
                k,
                parity: cfg.parity.min(limit),
                adaptive: cfg
                    .adaptive
                    .map(|(f, c)| (f.min(limit), c.min(limit).max(f.min(limit)))),
                ..cfg
            },
            clients: Vec::new(),
            malformed: 0,
        }
    }

    pub fn config(&self) -> &FecConfig {
        &self.cfg
    }

    fn client(&self, id: ClientId) -> Option<&Client> {
        self.clients.iter().find(|c| c.id == id)
    }

    fn client_mut(&mut self, id: ClientId) -> Option<&mut Client> {
        self.clients.iter_mut().find(|c| c.id == id)
    }

    /// Whether client `id` gets the FEC stream.
    pub fn is_on(&self, id: ClientId) -> bool {
        self.client(id).is_some()
    }

    /// Counters of a FEC client.
    pub fn client_stats(&self, id: ClientId) -> Option<FecClientStats> {
        self.client(id).map(|c| FecClientStats {
            parity_now: c.parity,
            ..c.stats
        })
    }

    /// Sum of every FEC client's counters.
    pub fn totals(&self) -> FecClientStats {
        let mut t = FecClientStats::default();
        for c in &self.clients {
            t.blocks += c.stats.blocks;
            t.data_shards += c.stats.data_shards;
            t.parity_shards += c.stats.parity_shards;
            t.packet_bytes += c.stats.packet_bytes;
            t.wire_bytes += c.stats.wire_bytes;
            t.reports += c.stats.reports;
            t.parity_now = t.parity_now.max(c.parity);
        }
        t
    }

    /// A datagram from registered UDP client `id`: true when it was a FEC datagram (a request
    /// turns FEC on for the client, a report feeds the adaptive mode; malformed ones are counted),
    /// which the driver must not hand to the forwarding core.
    pub fn client_datagram(&mut self, id: ClientId, d: &[u8]) -> bool {
        if !wire::is_fec(d) {
            return false;
        }
        let cfg = self.cfg;
        match Control::parse(d) {
            Ok(Control::Request) => {
                if cfg.enabled && self.client(id).is_none() {
                    self.clients.push(Client {
                        id,
                        block: 0,
                        open: Vec::new(),
                        open_k: 0,
                        open_m: 0,
                        open_ms: 0,
                        plan: None,
                        pending: VecDeque::new(),
                        peeked: None,
                        adaptive: cfg.adaptive.map(|(floor, ceiling)| {
                            Adaptive::new(AdaptiveConfig {
                                k: cfg.k,
                                floor,
                                ceiling,
                                start: cfg.parity,
                            })
                        }),
                        parity: cfg.parity,
                        sent_since_report: 0,
                        stats: FecClientStats::default(),
                    });
                }
            }
            Ok(Control::Report(r)) => {
                if let Some(c) = self.client_mut(id) {
                    c.stats.reports += 1;
                    if let Some(a) = &mut c.adaptive {
                        c.parity = a.on_report(r, c.sent_since_report);
                    }
                    c.sent_since_report = 0;
                }
            }
            Err(_) => self.malformed += 1,
        }
        true
    }

    /// Forgets a client (it left).
    pub fn forget(&mut self, id: ClientId) {
        self.clients.retain(|c| c.id != id);
    }

    /// Keeps the FEC state of the clients `alive` says are still there (a driver whose client
    /// table lives elsewhere, such as the UDP registration, prunes with it).
    pub fn retain(&mut self, mut alive: impl FnMut(ClientId) -> bool) {
        self.clients.retain(|c| alive(c.id));
    }

    /// Whether something waits for client `id` (its queue in the core, or parity shards).
    pub fn has_work(&self, bridge: &Bridge, id: ClientId) -> bool {
        self.client(id).is_some_and(|c| !c.pending.is_empty()) || bridge.has_work_for(id)
    }

    /// The earliest time (ms) at which [`Fec::tick`] has a block to close.
    pub fn next_deadline(&self) -> Option<u64> {
        let t = u64::from(self.cfg.timeout_ms);
        self.clients
            .iter()
            .filter(|c| !c.open.is_empty() && c.plan.is_none())
            .map(|c| c.open_ms + t)
            .min()
    }

    /// Closes the blocks of single-packet messages that waited the timeout.
    pub fn tick(&mut self, now_ms: u64) {
        let t = u64::from(self.cfg.timeout_ms);
        let k = self.cfg.k;
        for c in &mut self.clients {
            // Not while a data shard of the block is handed out (it would go out under the
            // closed block's number): its commit comes first, the next call closes the block.
            let busy = matches!(c.peeked, Some(Peek::Data { .. }));
            if !busy
                && !c.open.is_empty()
                && c.plan.is_none()
                && now_ms.saturating_sub(c.open_ms) >= t
            {
                Self::close(c, k);
            }
        }
    }

    /// Writes the next datagram for UDP client `id` into `out` and returns its length (`None`:
    /// nothing to send, or `out` too small). A client without FEC gets its next CPX packet as
    /// is. Commit with [`Fec::datagram_sent`]; until then the same datagram comes again.
    pub fn next_datagram(
        &mut self,
        bridge: &mut Bridge,
        id: ClientId,
        now_ms: u64,
        out: &mut [u8],
    ) -> Option<usize> {
        let k = self.cfg.k;
        let timeout = u64::from(self.cfg.timeout_ms);
        let Some(c) = self.clients.iter_mut().find(|c| c.id == id) else {
            let (bytes, r) = bridge.next_for_client(id)?;
            let src = &bytes[r];
            let dst = out.get_mut(..src.len())?;
            dst.copy_from_slice(src);
            return Some(src.len());
        };
        if !c.open.is_empty() && c.plan.is_none() && now_ms.saturating_sub(c.open_ms) >= timeout {
            Self::close(c, k);
        }
        loop {
            if let Some(p) = c.pending.front() {
                let dst = out.get_mut(..p.len())?;
                dst.copy_from_slice(p);
                c.peeked = Some(Peek::Parity);
                return Some(p.len());
            }
            let (bytes, range) = bridge.next_for_client(id)?;
            let starts = if range.start == 0 {
                count_packets(&bytes)
            } else {
                0
            };
            // A message of several packets starts a block of its own (and so does anything after
            // a plan that ended early).
            let new_plan = starts > 1 || (starts == 1 && c.plan.is_some());
            if new_plan && !c.open.is_empty() {
                Self::close(c, k);
                continue;
            }
            let (shard_k, shard_m) = if starts > 1 {
                let blocks = starts.div_ceil(k as usize);
                let first = starts.div_ceil(blocks) as u8;
                (first, parity_for_block(first as usize, k, c.parity))
            } else if starts == 1 || c.plan.is_none() {
                (0, 0)
            } else {
                (c.open_k, c.open_m)
            };
            let h = ShardHeader {
                parity: false,
                block: c.block,
                index: c.open.len() as u8,
                k: shard_k,
                m: shard_m,
            };
            let src = &bytes[range.clone()];
            let n = wire::HEADER_LEN + src.len();
            let dst = out.get_mut(..n)?;
            dst[..wire::HEADER_LEN].copy_from_slice(&h.encode());
            dst[wire::HEADER_LEN..].copy_from_slice(src);
            c.peeked = Some(Peek::Data {
                bytes,
                range,
                starts,
                k: shard_k,
                m: shard_m,
                block: c.block,
                index: c.open.len(),
            });
            return Some(n);
        }
    }

    /// The driver sent the datagram [`Fec::next_datagram`] gave for client `id`.
    pub fn datagram_sent(&mut self, bridge: &mut Bridge, id: ClientId, now_ms: u64) {
        let k = self.cfg.k;
        let Some(c) = self.clients.iter_mut().find(|c| c.id == id) else {
            if let Some((_, r)) = bridge.next_for_client(id) {
                bridge.client_sent(id, r.len());
            }
            return;
        };
        match c.peeked.take() {
            None => {}
            Some(Peek::Parity) => {
                if let Some(p) = c.pending.pop_front() {
                    c.stats.parity_shards += 1;
                    c.stats.wire_bytes += p.len() as u64;
                    c.sent_since_report += 1;
                }
            }
            Some(Peek::Data {
                bytes,
                range,
                starts,
                k: shard_k,
                m: shard_m,
                block,
                index,
            }) => {
                // The block moved on since (cannot happen while a datagram is handed out, see
                // `tick`): the datagram went out under a place that is not its own; treat it as
                // not sent.
                if block != c.block || index != c.open.len() {
                    return;
                }
                // The same packet is still at the head of the client's queue (only this driver
                // takes from it); anything else means the queue moved: send nothing stale.
                match bridge.next_for_client(id) {
                    Some((b, r)) if Arc::ptr_eq(&b, &bytes) && r == range => {}
                    _ => return,
                }
                bridge.client_sent(id, range.len());
                c.stats.data_shards += 1;
                c.stats.packet_bytes += range.len() as u64;
                c.stats.wire_bytes += (wire::HEADER_LEN + range.len()) as u64;
                c.sent_since_report += 1;
                if starts > 1 {
                    let blocks = starts.div_ceil(k as usize);
                    c.plan = Some(Plan {
                        packets_left: starts,
                        blocks_left: blocks,
                    });
                    c.open_k = shard_k;
                    c.open_m = shard_m;
                } else if starts == 1 {
                    c.plan = None;
                    c.open_k = 0;
                }
                if c.open.is_empty() {
                    c.open_ms = now_ms;
                }
                c.open.push((bytes, range));
                match &mut c.plan {
                    Some(p) => {
                        p.packets_left -= 1;
                        if c.open.len() >= c.open_k as usize {
                            p.blocks_left = p.blocks_left.saturating_sub(1);
                            let (left, blocks) = (p.packets_left, p.blocks_left);
                            Self::close(c, k);
                            if left == 0 || blocks == 0 {
                                c.plan = None;
                                c.open_k = 0;
                            } else {
                                c.open_k = left.div_ceil(blocks).min(255) as u8;
                                c.open_m = parity_for_block(c.open_k as usize, k, c.parity);
                            }
                        }
                    }
                    None => {
                        if c.open.len() >= k as usize {
                            Self::close(c, k);
                        }
                    }
                }
            }
        }
    }

    /// Ends the open block: its parity shards go to the client's pending list.
    fn close(c: &mut Client, k: u8) {
        if c.open.is_empty() {
            return;
        }
        let j = c.open.len();
        // A planned block has the m its data shards announced; a block of single-packet
        // messages (or a planned one cut short) gets what its size asks for now.
        let m = if c.plan.is_some() && c.open_k as usize == j {
            c.open_m
        } else {
            parity_for_block(j, k, c.parity)
        };
        if m > 0 {
            let data: Vec<&[u8]> = c.open.iter().map(|(b, r)| &b[r.clone()]).collect();
            let max = data.iter().map(|d| d.len()).max().unwrap_or(0);
            let l = code::symbol_len(max);
            let mut shards = vec![vec![0u8; wire::HEADER_LEN + l]; m as usize];
            for (r, s) in shards.iter_mut().enumerate() {
                let h = ShardHeader {
                    parity: true,
                    block: c.block,
                    index: (j + r) as u8,
                    k: j as u8,
                    m,
                };
                s[..wire::HEADER_LEN].copy_from_slice(&h.encode());
            }
            let mut refs: Vec<&mut [u8]> = shards
                .iter_mut()
                .map(|s| &mut s[wire::HEADER_LEN..])
                .collect();
            // j ≤ 255 data shards of at most one CPX packet each and j + m ≤ 256: cannot fail.
            if code::encode(&data, &mut refs).is_ok() {
                c.pending.extend(shards);
            }
        }
        c.stats.blocks += 1;
        c.block = c.block.wrapping_add(1);
        c.open.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cpx::{Route, Target, encode_packet};
    use crate::forward::{Config, Transport};
    use gapstream_fec::reassembler::{Config as RConfig, Decoder, Reassembler};

    fn message(tag: u8, len: usize) -> Vec<u8> {
        let payload: Vec<u8> = (0..len).map(|i| tag ^ (i * 7) as u8).collect();
        let chunks: Vec<&[u8]> = payload.chunks(1020).collect();
        let mut out = Vec::new();
        for (i, ch) in chunks.iter().enumerate() {
            let h = Route {
                destination: Target::WifiHost as u8,
                source: Target::Gap8 as u8,
                last_packet: i + 1 == chunks.len(),
                function: 0x0E,
            };
            encode_packet(h, ch, &mut out);
        }
        out
    }

    fn with_fec(cfg: FecConfig) -> (Bridge, Fec, ClientId) {
        let mut b = Bridge::new(Config::default());
        let id = b.add_client(Transport::Udp).unwrap();
        let mut f = Fec::new(cfg);
        assert!(f.client_datagram(id, &Control::Request.encode().0[..4]));
        assert!(f.is_on(id));
        (b, f, id)
    }

    /// Everything the client gets until its queue is empty (and the open block's timeout passed).
    fn drain(b: &mut Bridge, f: &mut Fec, id: ClientId, now: &mut u64) -> Vec<Vec<u8>> {
        let mut out = Vec::new();
        let mut buf = [0u8; 2048];
        for _ in 0..2 {
            while let Some(n) = f.next_datagram(b, id, *now, &mut buf) {
                out.push(buf[..n].to_vec());
                f.datagram_sent(b, id, *now);
            }
            *now += 100;
            f.tick(*now);
        }
        out
    }

    fn headers(d: &[Vec<u8>]) -> Vec<ShardHeader> {
        d.iter().map(|x| ShardHeader::parse(x).unwrap().0).collect()
    }

    #[test]
    fn a_raw_frame_is_two_announced_blocks_closed_by_its_last_packet() {
        let (mut b, mut f, id) = with_fec(FecConfig::default());
        let frame = message(1, 79_120);
        b.spi_received(&frame);
        let mut buf = [0u8; 2048];
        let mut got = Vec::new();
        // No timeout needed: the frame's own last packet closes its last block.
        while let Some(n) = f.next_datagram(&mut b, id, 0, &mut buf) {
            got.push(buf[..n].to_vec());
            f.datagram_sent(&mut b, id, 0);
        }
        let h = headers(&got);
        let data: Vec<_> = h.iter().filter(|x| !x.parity).collect();
        let parity: Vec<_> = h.iter().filter(|x| x.parity).collect();
        assert_eq!(data.len(), 78);
        assert_eq!(parity.len(), 20);
        assert!(data.iter().all(|x| x.k == 39 && x.m == 10));
        assert_eq!(
            h.iter().map(|x| (x.block, x.index)).collect::<Vec<_>>()[..3],
            [(0, 0), (0, 1), (0, 2)]
        );
        // Block 0: 39 data then 10 parity, then block 1.
        assert!(
            h[39..49]
                .iter()
                .all(|x| x.parity && x.block == 0 && x.k == 39)
        );
        assert!(!h[49].parity && h[49].block == 1 && h[49].index == 0);
        // The plain packets, in order, are the data shards' bodies.
        let plain: Vec<u8> = got
            .iter()
            .zip(&h)
            .filter(|(_, x)| !x.parity)
            .flat_map(|(d, _)| d[wire::HEADER_LEN..].to_vec())
            .collect();
        assert_eq!(plain, frame);
        let s = f.client_stats(id).unwrap();
        assert_eq!((s.blocks, s.data_shards, s.parity_shards), (2, 78, 20));
        assert_eq!(s.packet_bytes as usize, frame.len());
    }

    #[test]
    fn single_packet_messages_share_a_block_closed_by_k_or_the_timeout() {
        let (mut b, mut f, id) = with_fec(FecConfig {
            k: 4,
            parity: 2,
            timeout_ms: 5,
            ..FecConfig::default()
        });
        let mut now = 0;
        for t in 0..6 {
            b.spi_received(&message(t, 100));
        }
        let mut buf = [0u8; 2048];
        let mut got = Vec::new();
        while let Some(n) = f.next_datagram(&mut b, id, now, &mut buf) {
            got.push(buf[..n].to_vec());
            f.datagram_sent(&mut b, id, now);
        }
        // 4 data + 2 parity (closed by k), then 2 data waiting for the timeout.
        let h = headers(&got);
        assert_eq!(h.len(), 8);
        assert!(h[..4].iter().all(|x| !x.parity && x.k == 0));
        assert!(h[4..6].iter().all(|x| x.parity && x.k == 4 && x.m == 2));
        assert_eq!(f.next_deadline(), Some(5));
        now += 4;
        f.tick(now);
        assert!(f.next_datagram(&mut b, id, now, &mut buf).is_none());
        now += 1;
        f.tick(now);
        let rest = drain(&mut b, &mut f, id, &mut now);
        let h = headers(&rest);
        assert_eq!(h.len(), 1);
        assert!(h[0].parity && h[0].k == 2 && h[0].m == 1 && h[0].block == 1);
    }

    #[test]
    fn a_client_without_request_gets_plain_packets() {
        let mut b = Bridge::new(Config::default());
        let id = b.add_client(Transport::Udp).unwrap();
        let mut f = Fec::new(FecConfig::default());
        let frame = message(3, 5000);
        b.spi_received(&frame);
        let mut now = 0;
        let got = drain(&mut b, &mut f, id, &mut now);
        assert_eq!(got.concat(), frame);
        assert_eq!(got.len(), 5);
        // A disabled bridge ignores requests.
        let mut off = Fec::new(FecConfig {
            enabled: false,
            ..FecConfig::default()
        });
        assert!(off.client_datagram(id, b"GF\x12\x00"));
        assert!(!off.is_on(id));
        assert!(!off.client_datagram(id, &frame[..10]));
        assert!(off.client_datagram(id, b"GF\x99"));
        assert_eq!(off.malformed, 1);
    }

    /// Through the receiver's reassembler with m losses per block: every packet comes back.
    #[test]
    fn the_reassembler_rebuilds_what_the_bridge_sent() {
        let (mut b, mut f, id) = with_fec(FecConfig::default());
        let frames: Vec<Vec<u8>> = (0..5).map(|t| message(t, 79_120)).collect();
        let ctl = message(9, 60);
        let mut now = 0;
        let mut wire = Vec::new();
        for fr in &frames {
            b.spi_received(fr);
            b.spi_received(&ctl);
            wire.extend(drain(&mut b, &mut f, id, &mut now));
        }
        let mut r = Reassembler::new(RConfig::default(), Decoder);
        let mut out = Vec::new();
        let mut lost_in_block = [0usize; 64];
        for (i, d) in wire.iter().enumerate() {
            let h = ShardHeader::parse(d).unwrap().0;
            let budget = if h.k == 0 && !h.parity { 0 } else { 5 };
            if i % 7 == 3 && lost_in_block[h.block as usize] < budget {
                lost_in_block[h.block as usize] += 1;
                continue;
            }
            r.push(d, now, &mut |x| out.extend_from_slice(x));
        }
        r.poll(now + 1000, &mut |x| out.extend_from_slice(x));
        // The block the stream starts in is not counted (what came before it is not known).
        let lost_on_purpose: usize = lost_in_block[1..].iter().sum();
        // A block of one control message whose only parity shard was lost cannot know it had
        // one: those losses are not counted.
        let counted = r.stats().shards_lost as usize;
        assert!(
            counted <= lost_on_purpose && counted + 5 >= lost_on_purpose,
            "{counted} of {lost_on_purpose}: {:?}",
            r.stats()
        );
        let mut want = Vec::new();
        for fr in &frames {
            want.extend_from_slice(fr);
            want.extend_from_slice(&ctl);
        }
        assert_eq!(out, want);
        assert!(r.stats().recovered > 20);
    }

    /// The adaptive mode changing its parity between blocks while frames and control messages
    /// flow: every block's shards agree on its shape, and a receiver without loss counts none.
    #[test]
    fn adaptive_changes_keep_every_block_consistent() {
        let (mut b, mut f, id) = with_fec(FecConfig {
            adaptive: Some((2, 40)),
            ..FecConfig::default()
        });
        let mut r = Reassembler::new(RConfig::default(), Decoder);
        let mut now = 0;
        let mut buf = [0u8; 2048];
        let mut sent = 0;
        let mut got = 0usize;
        for t in 0..40u8 {
            b.spi_received(&message(t, 79_120));
            if t % 3 == 0 {
                b.spi_received(&message(t, 40));
            }
            while let Some(n) = f.next_datagram(&mut b, id, now, &mut buf) {
                let d = buf[..n].to_vec();
                f.datagram_sent(&mut b, id, now);
                sent += 1;
                r.push(&d, now, &mut |x| got += x.len());
                if sent % 37 == 0 {
                    let (c, len) = Control::Report(r.take_report()).encode();
                    f.client_datagram(id, &c[..len]);
                }
                now += 1;
            }
            now += 10;
            f.tick(now);
            while let Some(n) = f.next_datagram(&mut b, id, now, &mut buf) {
                let d = buf[..n].to_vec();
                f.datagram_sent(&mut b, id, now);
                r.push(&d, now, &mut |x| got += x.len());
            }
        }
        r.poll(now + 1000, &mut |x| got += x.len());
        let s = r.stats();
        assert_eq!(
            (s.shards_lost, s.inconsistent, s.late, s.duplicates),
            (0, 0, 0, 0),
            "{s:?}"
        );
        assert_eq!(f.client_stats(id).unwrap().parity_now, 2);
    }

    #[test]
    fn adaptive_parity_follows_reports_within_bounds() {
        let (mut b, mut f, id) = with_fec(FecConfig {
            adaptive: Some((2, 30)),
            ..FecConfig::default()
        });
        let mut now = 0;
        let mut rep = gapstream_fec::wire::Report::default();
        for _ in 0..8 {
            b.spi_received(&message(1, 79_120));
            let n = drain(&mut b, &mut f, id, &mut now).len() as u32;
            rep.received += n;
            let (d, len) = Control::Report(rep).encode();
            assert!(f.client_datagram(id, &d[..len]));
        }
        assert_eq!(f.client_stats(id).unwrap().parity_now, 2);
        b.spi_received(&message(1, 79_120));
        let got = drain(&mut b, &mut f, id, &mut now);
        assert_eq!(headers(&got).iter().filter(|h| h.parity).count(), 4);
        f.forget(id);
        assert!(!f.is_on(id));
        assert_eq!(
            FecConfig {
                k: 0,
                ..FecConfig::default()
            }
            .validate(),
            Err(FecConfigError::K)
        );
        assert_eq!(
            FecConfig {
                k: 128,
                parity: 129,
                ..FecConfig::default()
            }
            .validate(),
            Err(FecConfigError::TooManyShards)
        );
        assert_eq!(
            FecConfig {
                adaptive: Some((5, 4)),
                ..FecConfig::default()
            }
            .validate(),
            Err(FecConfigError::FloorAboveCeiling)
        );
    }
}
