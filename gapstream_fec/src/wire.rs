//! The FEC datagrams (`docs/stream.md`, "Forward error correction"). All start with the magic
//! `"GF"` (0x47 0x46): read as a CPX length (u16 little-endian) that is 17,991, never a CPX
//! packet (at most 1,022), and not the cookie exchange's `"GS"` either.
//!
//! Bridge → receiver, one per datagram:
//!
//! | offset | bytes | field |
//! |---|---|---|
//! | 0 | 2 | `"GF"` |
//! | 2 | 1 | kind: `0x10` data shard, `0x11` parity shard (high nibble: version 1) |
//! | 3 | 4 | block number, u32 little-endian, +1 per block (wraps) |
//! | 7 | 1 | index: the shard's point, `0..k` data, `k..k+m` parity |
//! | 8 | 1 | k: data shards in the block (a data shard: 0 while the block's size is not known yet) |
//! | 9 | 1 | m: parity shards in the block (a data shard: 0 while not known) |
//! | 10 | … | data shard: the datagram (a CPX packet); parity shard: the parity symbol (2 + the block's longest datagram) |
//!
//! Receiver → bridge (`0x12` request, `0x13` loss report) are described at [`Control`].

/// The two magic bytes of every FEC datagram.
pub const MAGIC: [u8; 2] = *b"GF";
/// Bytes of a shard header.
pub const HEADER_LEN: usize = 10;
/// Largest datagram a data shard carries: a parity shard of it (header + length prefix +
/// datagram) still fits a 1500-byte MTU with the IPv4 and UDP headers (1,472 bytes of payload).
pub const MAX_DATAGRAM: usize = 1472 - HEADER_LEN - crate::code::LEN_PREFIX;

/// Kind byte of a data shard.
pub const KIND_DATA: u8 = 0x10;
/// Kind byte of a parity shard.
pub const KIND_PARITY: u8 = 0x11;
/// Kind byte of the receiver's request for FEC.
pub const KIND_REQUEST: u8 = 0x12;
/// Kind byte of the receiver's loss report.
pub const KIND_REPORT: u8 = 0x13;

/// Why a datagram is not a valid FEC datagram.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WireError {
    /// Shorter than its header.
    Truncated,
    /// Not `"GF"`.
    BadMagic,
    /// An unknown kind byte (another version).
    UnknownKind(u8),
    /// k, m or the index out of range (k + m > 256, an index outside its part of the block, a
    /// parity shard of a block with no data or no parity).
    BadShape,
    /// A data shard longer than [`MAX_DATAGRAM`], or a report of the wrong size.
    BadLength,
}

impl core::fmt::Display for WireError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            WireError::Truncated => f.write_str("FEC datagram shorter than its header"),
            WireError::BadMagic => f.write_str("not a FEC datagram"),
            WireError::UnknownKind(k) => write!(f, "unknown FEC datagram kind 0x{k:02x}"),
            WireError::BadShape => f.write_str("FEC shard with an impossible k / m / index"),
            WireError::BadLength => f.write_str("FEC datagram of a wrong length"),
        }
    }
}

/// True when `d` starts like a FEC datagram (the caller then parses it as one).
pub fn is_fec(d: &[u8]) -> bool {
    d.len() >= 3 && d[..2] == MAGIC
}

/// The header of a data or parity shard.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ShardHeader {
    pub parity: bool,
    pub block: u32,
    pub index: u8,
    /// Data shards in the block (0 in a data shard sent before the block's size was known).
    pub k: u8,
    /// Parity shards in the block (0 in such a data shard).
    pub m: u8,
}

impl ShardHeader {
    /// The 10 header bytes.
    pub fn encode(&self) -> [u8; HEADER_LEN] {
        let mut h = [0u8; HEADER_LEN];
        h[..2].copy_from_slice(&MAGIC);
        h[2] = if self.parity { KIND_PARITY } else { KIND_DATA };
        h[3..7].copy_from_slice(&self.block.to_le_bytes());
        h[7] = self.index;
        h[8] = self.k;
        h[9] = self.m;
        h
    }

    /// Parses a shard datagram: its header and body, after checking the block's shape.
    pub fn parse(d: &[u8]) -> Result<(ShardHeader, &[u8]), WireError> {
        if d.len() < HEADER_LEN {
            return Err(if d.len() >= 2 && d[..2] != MAGIC {
                WireError::BadMagic
            } else {
                WireError::Truncated
            });
        }
        if d[..2] != MAGIC {
            return Err(WireError::BadMagic);
        }
        let parity = match d[2] {
            KIND_DATA => false,
            KIND_PARITY => true,
            k => return Err(WireError::UnknownKind(k)),
        };
        let h = ShardHeader {
            parity,
            block: u32::from_le_bytes([d[3], d[4], d[5], d[6]]),
            index: d[7],
            k: d[8],
            m: d[9],
        };
        let (k, m, i) = (h.k as usize, h.m as usize, h.index as usize);
        let shape_ok = if parity {
            k >= 1 && m >= 1 && k + m <= crate::code::MAX_SHARDS && (k..k + m).contains(&i)
        } else if k == 0 {
            m == 0
        } else {
            k + m <= crate::code::MAX_SHARDS && i < k
        };
        if !shape_ok {
            return Err(WireError::BadShape);
        }
        let body = &d[HEADER_LEN..];
        let max = if parity {
            crate::code::symbol_len(MAX_DATAGRAM)
        } else {
            MAX_DATAGRAM
        };
        if body.len() > max || (parity && body.len() < crate::code::LEN_PREFIX) {
            return Err(WireError::BadLength);
        }
        Ok((h, body))
    }
}

/// What a receiver sends the bridge about FEC (from its registered UDP address).
///
/// | datagram | bytes | |
/// |---|---|---|
/// | request | `"GF" 12 00` (4) | "send me the FEC stream"; repeated as the keep-alive until FEC shards arrive |
/// | report | `"GF" 13 00` + received, lost, unrecoverable (3 × u32 LE, cumulative, wrapping), worst (u16 LE), 2 zero bytes (20) | the receiver's shard counts every 500 ms, and the most shards one block lost since the previous report: the adaptive mode's input |
///
/// Neither is authenticated: the bridge is not trusted with anything, and what a forged report
/// can do is bounded by the bridge's floor and ceiling of redundancy.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Control {
    Request,
    Report(Report),
}

/// Cumulative shard counts of a receiver since it asked for FEC (wrapping at 2^32).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Report {
    /// Shards (data and parity) received.
    pub received: u32,
    /// Shards of finished blocks that never arrived.
    pub lost: u32,
    /// Blocks given up with data missing.
    pub unrecoverable: u32,
    /// The most shards one block lost since the previous report (not cumulative: how bursty the
    /// loss is, which the counts above do not tell).
    pub worst: u16,
}

/// Bytes of a report datagram.
pub const REPORT_LEN: usize = 20;

impl Control {
    /// The datagram's bytes (at most [`REPORT_LEN`]) and its length.
    pub fn encode(&self) -> ([u8; REPORT_LEN], usize) {
        let mut b = [0u8; REPORT_LEN];
        b[..2].copy_from_slice(&MAGIC);
        match self {
            Control::Request => {
                b[2] = KIND_REQUEST;
                (b, 4)
            }
            Control::Report(r) => {
                b[2] = KIND_REPORT;
                b[4..8].copy_from_slice(&r.received.to_le_bytes());
                b[8..12].copy_from_slice(&r.lost.to_le_bytes());
                b[12..16].copy_from_slice(&r.unrecoverable.to_le_bytes());
                b[16..18].copy_from_slice(&r.worst.to_le_bytes());
                (b, REPORT_LEN)
            }
        }
    }

    /// Parses a request or a report (exact sizes, the reserved byte zero).
    pub fn parse(d: &[u8]) -> Result<Control, WireError> {
        if d.len() < 4 {
            return Err(WireError::Truncated);
        }
        if d[..2] != MAGIC {
            return Err(WireError::BadMagic);
        }
        let u = |i: usize| u32::from_le_bytes([d[i], d[i + 1], d[i + 2], d[i + 3]]);
        match d[2] {
            KIND_REQUEST if d.len() == 4 && d[3] == 0 => Ok(Control::Request),
            KIND_REPORT if d.len() == REPORT_LEN && d[3] == 0 && d[18..20] == [0, 0] => {
                Ok(Control::Report(Report {
                    received: u(4),
                    lost: u(8),
                    unrecoverable: u(12),
                    worst: u16::from_le_bytes([d[16], d[17]]),
                }))
            }
            KIND_REQUEST | KIND_REPORT => Err(WireError::BadLength),
            k => Err(WireError::UnknownKind(k)),
        }
    }
}

/// The datagrams of one whole block, as the bridge sends them: the `data` datagrams as data
/// shards (announcing k and m when `announce` is true, else 0 / 0 as for a block whose size was
/// not known when they went out), then `m` parity shards. For tests, tools and the documentation's
/// vector; the bridge builds the same bytes incrementally (`esp32_bridge::fec`).
#[cfg(feature = "alloc")]
pub fn block_datagrams<D: AsRef<[u8]>>(
    block: u32,
    data: &[D],
    m: usize,
    announce: bool,
) -> Result<alloc::vec::Vec<alloc::vec::Vec<u8>>, crate::code::CodeError> {
    use alloc::vec::Vec;
    let k = data.len();
    if k == 0 {
        return Err(crate::code::CodeError::NoData);
    }
    if k + m > crate::code::MAX_SHARDS {
        return Err(crate::code::CodeError::TooManyShards);
    }
    let max = data.iter().map(|d| d.as_ref().len()).max().unwrap_or(0);
    let l = crate::code::symbol_len(max);
    let mut parity = alloc::vec![alloc::vec![0u8; l]; m];
    let mut refs: Vec<&mut [u8]> = parity.iter_mut().map(|p| &mut p[..]).collect();
    crate::code::encode(data, &mut refs)?;
    let mut out = Vec::with_capacity(k + m);
    for (i, d) in data.iter().enumerate() {
        let h = ShardHeader {
            parity: false,
            block,
            index: i as u8,
            k: if announce { k as u8 } else { 0 },
            m: if announce { m as u8 } else { 0 },
        };
        let mut v = h.encode().to_vec();
        v.extend_from_slice(d.as_ref());
        out.push(v);
    }
    for (j, p) in parity.into_iter().enumerate() {
        let h = ShardHeader {
            parity: true,
            block,
            index: (k + j) as u8,
            k: k as u8,
            m: m as u8,
        };
        let mut v = h.encode().to_vec();
        v.extend_from_slice(&p);
        out.push(v);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::vec::Vec;

    #[test]
    fn headers_round_trip_and_shapes_are_checked() {
        let h = ShardHeader {
            parity: true,
            block: 0x0102_0304,
            index: 41,
            k: 39,
            m: 10,
        };
        let mut d = h.encode().to_vec();
        d.extend_from_slice(&[0; 50]);
        assert_eq!(ShardHeader::parse(&d), Ok((h, &[0u8; 50][..])));
        assert_eq!(&d[..10], &[0x47, 0x46, 0x11, 4, 3, 2, 1, 41, 39, 10]);
        let bad = |f: &dyn Fn(&mut Vec<u8>)| {
            let mut x = d.clone();
            f(&mut x);
            ShardHeader::parse(&x).map(|_| ())
        };
        assert_eq!(
            bad(&|x| x[7] = 38),
            Err(WireError::BadShape),
            "parity index < k"
        );
        assert_eq!(
            bad(&|x| x[7] = 49),
            Err(WireError::BadShape),
            "parity index ≥ k + m"
        );
        assert_eq!(bad(&|x| x[9] = 0), Err(WireError::BadShape));
        assert_eq!(
            bad(&|x| x[8] = 250),
            Err(WireError::BadShape),
            "k + m > 256"
        );
        assert_eq!(bad(&|x| x[2] = 0x20), Err(WireError::UnknownKind(0x20)));
        assert_eq!(bad(&|x| x[0] = b'G'), Ok(()));
        assert_eq!(bad(&|x| x[1] = b'S'), Err(WireError::BadMagic));
        assert_eq!(
            bad(&|x| x.truncate(11)),
            Err(WireError::BadLength),
            "parity body < 2"
        );
        assert_eq!(bad(&|x| x.truncate(9)), Err(WireError::Truncated));
        let data = ShardHeader {
            parity: false,
            block: 7,
            index: 3,
            k: 0,
            m: 0,
        };
        let mut d = data.encode().to_vec();
        d.extend_from_slice(&[1; MAX_DATAGRAM]);
        assert!(ShardHeader::parse(&d).is_ok());
        d.push(1);
        assert_eq!(
            ShardHeader::parse(&d).map(|_| ()),
            Err(WireError::BadLength)
        );
        let mut d = data.encode().to_vec();
        d[9] = 2;
        assert_eq!(
            ShardHeader::parse(&d).map(|_| ()),
            Err(WireError::BadShape),
            "m without k"
        );
        d[8] = 3;
        assert_eq!(
            ShardHeader::parse(&d).map(|_| ()),
            Err(WireError::BadShape),
            "index ≥ k"
        );
        d[8] = 4;
        assert!(ShardHeader::parse(&d).is_ok());
    }

    #[test]
    fn fec_datagrams_are_neither_cpx_nor_cookie_datagrams() {
        let len = u16::from_le_bytes(MAGIC);
        assert!(len as usize > 1022 + 2);
        assert_ne!(MAGIC, *b"GS");
        assert!(is_fec(b"GF\x10"));
        assert!(!is_fec(b"GS\x10"));
        assert!(!is_fec(b"GF"));
    }

    #[test]
    fn control_datagrams_round_trip() {
        for c in [
            Control::Request,
            Control::Report(Report {
                received: 1,
                lost: u32::MAX,
                unrecoverable: 5,
                worst: 9,
            }),
        ] {
            let (b, n) = c.encode();
            assert_eq!(Control::parse(&b[..n]), Ok(c));
            assert!(Control::parse(&b[..n - 1]).is_err());
        }
        assert_eq!(Control::parse(b"GF\x12\x00"), Ok(Control::Request));
        assert_eq!(Control::parse(b"GF\x12\x01"), Err(WireError::BadLength));
        assert_eq!(
            Control::parse(b"GF\x10\x00"),
            Err(WireError::UnknownKind(0x10))
        );
    }
}
