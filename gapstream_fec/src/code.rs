//! The erasure code. A block holds `k` data symbols at the evaluation points `0..k` and `m`
//! parity symbols at `k..k+m` (points are field elements, `i as u8`): the symbols are the values
//! at those points of the one polynomial of degree < k through the data (per byte position).
//! This is the systematic code of `reed-solomon-erasure` (and Backblaze / klauspost): its
//! generator matrix is the n × k Vandermonde matrix `V[r][c] = r^c` times the inverse of its top
//! k × k square, i.e. row `r` holds the Lagrange basis polynomials of the points `0..k` evaluated
//! at `r`. So any `k` of the `k + m` symbols give back the data (the code is MDS), and the parity
//! bytes are those `reed-solomon-erasure` computes for the same symbols (checked in the tests).
//!
//! Both directions use the closed form of the Lagrange coefficients instead of a matrix inverse:
//! for known points `S` and a target `t`, `L_s(t) = N(t) / ((t - s) · D_s)` with
//! `N(t) = Π_{s'∈S} (t - s')` and `D_s = Π_{s'∈S, s'≠s} (s - s')` (subtraction is XOR):
//! O(k²) field operations per block, no allocation, no matrix cache.
//!
//! Datagrams of a block differ in length: a data symbol is the datagram's length (u16
//! little-endian), the datagram, then zeros up to the block's symbol length `L` = 2 + the longest
//! datagram (`docs/stream.md`, "Forward error correction"). The data datagrams travel without
//! that prefix and padding; only parity symbols are `L` bytes long.

use crate::gf;

/// Most symbols in a block (data + parity): the points of GF(2^8).
pub const MAX_SHARDS: usize = 256;
/// Bytes of the length prefix of a data symbol.
pub const LEN_PREFIX: usize = 2;

/// Why a block cannot be coded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CodeError {
    /// No data symbol.
    NoData,
    /// More than [`MAX_SHARDS`] symbols in the block.
    TooManyShards,
    /// The same point given twice.
    DuplicatePoint,
    /// Symbols of one block differ in length, or a buffer is shorter than the symbol length.
    LengthMismatch,
    /// Fewer than `k` symbols present: the block cannot be recovered.
    TooFewShards,
    /// A datagram longer than `u16::MAX` bytes.
    PayloadTooLong,
}

impl core::fmt::Display for CodeError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(match self {
            CodeError::NoData => "a block without data",
            CodeError::TooManyShards => "more than 256 symbols in a block",
            CodeError::DuplicatePoint => "a symbol position given twice",
            CodeError::LengthMismatch => "symbols of different lengths in one block",
            CodeError::TooFewShards => "fewer symbols than data symbols: not recoverable",
            CodeError::PayloadTooLong => "datagram longer than 65535 bytes",
        })
    }
}

/// Lagrange coefficients over a fixed set of known points.
#[derive(Clone, Debug)]
pub struct Lagrange {
    points: [u8; MAX_SHARDS],
    /// `1 / D_s` for each known point.
    inv_d: [u8; MAX_SHARDS],
    len: usize,
}

impl Lagrange {
    /// For the distinct points `known` (at most 256).
    pub fn new(known: &[u8]) -> Result<Self, CodeError> {
        if known.len() > MAX_SHARDS {
            return Err(CodeError::TooManyShards);
        }
        let mut seen = [false; MAX_SHARDS];
        let mut l = Lagrange {
            points: [0; MAX_SHARDS],
            inv_d: [0; MAX_SHARDS],
            len: known.len(),
        };
        for (i, &s) in known.iter().enumerate() {
            if core::mem::replace(&mut seen[s as usize], true) {
                return Err(CodeError::DuplicatePoint);
            }
            l.points[i] = s;
        }
        for (i, &s) in known.iter().enumerate() {
            let mut d = 1u8;
            for (j, &t) in known.iter().enumerate() {
                if i != j {
                    d = gf::mul(d, s ^ t);
                }
            }
            // Distinct points: every factor is non-zero.
            l.inv_d[i] = gf::inv(d).unwrap_or(0);
        }
        Ok(l)
    }

    /// `out[i]` = the coefficient of known point `i` in the value at `target`:
    /// `f(target) = Σ out[i] · f(known[i])` for every polynomial f of degree < the number of points.
    pub fn row(&self, target: u8, out: &mut [u8]) {
        let pts = &self.points[..self.len];
        let out = &mut out[..self.len];
        if let Some(i) = pts.iter().position(|&s| s == target) {
            out.fill(0);
            out[i] = 1;
            return;
        }
        let mut n = 1u8;
        for &s in pts {
            n = gf::mul(n, target ^ s);
        }
        for (i, &s) in pts.iter().enumerate() {
            // target ∉ known: target ^ s != 0.
            let denom_inv = gf::inv(target ^ s).unwrap_or(0);
            out[i] = gf::mul(gf::mul(n, denom_inv), self.inv_d[i]);
        }
    }
}

/// The symbol length of a block whose longest datagram has `max_len` bytes.
pub const fn symbol_len(max_len: usize) -> usize {
    LEN_PREFIX + max_len
}

/// The parity symbols of one block: `data` are the block's `k` datagrams (any lengths up to
/// `u16::MAX`), `parity[j]` receives the symbol at point `k + j` in its first `L` bytes, `L` =
/// [`symbol_len`] of the longest datagram. Returns `L`. `k + parity.len()` ≤ 256.
pub fn encode<D: AsRef<[u8]>>(data: &[D], parity: &mut [&mut [u8]]) -> Result<usize, CodeError> {
    let k = data.len();
    if k == 0 {
        return Err(CodeError::NoData);
    }
    if k + parity.len() > MAX_SHARDS {
        return Err(CodeError::TooManyShards);
    }
    let mut max = 0;
    for d in data {
        let n = d.as_ref().len();
        if n > u16::MAX as usize {
            return Err(CodeError::PayloadTooLong);
        }
        max = max.max(n);
    }
    let l = symbol_len(max);
    if parity.iter().any(|p| p.len() < l) {
        return Err(CodeError::LengthMismatch);
    }
    let mut pts = [0u8; MAX_SHARDS];
    for (i, p) in pts[..k].iter_mut().enumerate() {
        *p = i as u8;
    }
    let lag = Lagrange::new(&pts[..k])?;
    let mut rows = [[0u8; MAX_SHARDS]; 4];
    for p in parity.iter_mut() {
        p[..l].fill(0);
    }
    // Four parity symbols per pass over the data: each data byte is read once per four.
    let mut j = 0;
    while j < parity.len() {
        let n = (parity.len() - j).min(4);
        for (r, row) in rows.iter_mut().enumerate().take(n) {
            lag.row((k + j + r) as u8, row);
        }
        let group = &mut parity[j..j + n];
        for (i, d) in data.iter().enumerate() {
            let d = d.as_ref();
            let len = (d.len() as u16).to_le_bytes();
            if let [p0, p1, p2, p3] = group {
                let c = [rows[0][i], rows[1][i], rows[2][i], rows[3][i]];
                gf::mul_add4(
                    c,
                    &len,
                    [&mut p0[..], &mut p1[..], &mut p2[..], &mut p3[..]],
                );
                gf::mul_add4(
                    c,
                    d,
                    [
                        &mut p0[LEN_PREFIX..],
                        &mut p1[LEN_PREFIX..],
                        &mut p2[LEN_PREFIX..],
                        &mut p3[LEN_PREFIX..],
                    ],
                );
            } else {
                for (r, p) in group.iter_mut().enumerate() {
                    let c = rows[r][i];
                    gf::mul_add(c, &len, &mut p[..LEN_PREFIX]);
                    gf::mul_add(c, d, &mut p[LEN_PREFIX..l]);
                }
            }
        }
        j += n;
    }
    Ok(l)
}

/// The data symbol of a datagram for symbol length `l` (length prefix, datagram, zeros).
#[cfg(feature = "alloc")]
pub fn data_symbol(datagram: &[u8], l: usize) -> Option<alloc::vec::Vec<u8>> {
    if datagram.len() > u16::MAX as usize || symbol_len(datagram.len()) > l {
        return None;
    }
    let mut s = alloc::vec![0u8; l];
    s[..LEN_PREFIX].copy_from_slice(&(datagram.len() as u16).to_le_bytes());
    s[LEN_PREFIX..LEN_PREFIX + datagram.len()].copy_from_slice(datagram);
    Some(s)
}

/// The datagram inside a data symbol: `None` when its length prefix runs past the symbol or the
/// padding is not all zeros (a corrupted or forged parity symbol rebuilt it).
pub fn symbol_datagram(symbol: &[u8]) -> Option<&[u8]> {
    let n = u16::from_le_bytes([*symbol.first()?, *symbol.get(1)?]) as usize;
    let body = &symbol[LEN_PREFIX..];
    if n > body.len() || body[n..].iter().any(|&b| b != 0) {
        return None;
    }
    Some(&body[..n])
}

/// Rebuilds the missing data symbols of a block: `shards[p]` is the symbol at point `p` (`0..k`
/// data, `k..` parity), `None` when it was lost; every present symbol has the same length. Needs
/// at least `k` present symbols; parity symbols are not rebuilt.
#[cfg(feature = "alloc")]
pub fn reconstruct_data(
    k: usize,
    shards: &mut [Option<alloc::vec::Vec<u8>>],
) -> Result<(), CodeError> {
    if k == 0 {
        return Err(CodeError::NoData);
    }
    if shards.len() > MAX_SHARDS || k > shards.len() {
        return Err(CodeError::TooManyShards);
    }
    let missing = shards[..k].iter().filter(|s| s.is_none()).count();
    if missing == 0 {
        return Ok(());
    }
    // The first k present symbols (data first: they are the cheaper coefficients' points).
    let mut known = [0u8; MAX_SHARDS];
    let mut n = 0;
    let mut l = None;
    for (p, s) in shards.iter().enumerate() {
        if let Some(s) = s {
            if *l.get_or_insert(s.len()) != s.len() {
                return Err(CodeError::LengthMismatch);
            }
            if n < k {
                known[n] = p as u8;
                n += 1;
            }
        }
    }
    if n < k {
        return Err(CodeError::TooFewShards);
    }
    let l = l.unwrap_or(0);
    let lag = Lagrange::new(&known[..k])?;
    let mut row = [0u8; MAX_SHARDS];
    for e in 0..k {
        if shards[e].is_some() {
            continue;
        }
        lag.row(e as u8, &mut row);
        let mut out = alloc::vec![0u8; l];
        for (i, &p) in known[..k].iter().enumerate() {
            if let Some(s) = &shards[p as usize] {
                gf::mul_add(row[i], s, &mut out);
            }
        }
        shards[e] = Some(out);
    }
    Ok(())
}

#[cfg(all(test, feature = "alloc"))]
mod tests {
    use super::*;
    use alloc::vec;
    use alloc::vec::Vec;
    use proptest::prelude::*;

    fn datagrams(seed: u64, k: usize, max: usize) -> Vec<Vec<u8>> {
        let mut x = seed | 1;
        let mut next = move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        (0..k)
            .map(|_| {
                let n = (next() % (max as u64 + 1)) as usize;
                (0..n).map(|_| next() as u8).collect()
            })
            .collect()
    }

    fn parity_of(data: &[Vec<u8>], m: usize) -> (usize, Vec<Vec<u8>>) {
        let max = data.iter().map(Vec::len).max().unwrap();
        let mut p = vec![vec![0u8; symbol_len(max)]; m];
        let mut refs: Vec<&mut [u8]> = p.iter_mut().map(|v| &mut v[..]).collect();
        let l = encode(data, &mut refs).unwrap();
        (l, p)
    }

    #[test]
    fn parity_bytes_equal_reed_solomon_erasure_for_the_same_symbols() {
        for (k, m) in [
            (1, 1),
            (2, 1),
            (3, 2),
            (8, 4),
            (20, 5),
            (40, 10),
            (78, 14),
            (128, 128),
        ] {
            let data = datagrams(k as u64 * 31 + m as u64, k, 300);
            let (l, parity) = parity_of(&data, m);
            let rs = reed_solomon_erasure::galois_8::ReedSolomon::new(k, m).unwrap();
            let mut shards: Vec<Vec<u8>> =
                data.iter().map(|d| data_symbol(d, l).unwrap()).collect();
            shards.extend((0..m).map(|_| vec![0u8; l]));
            rs.encode(&mut shards).unwrap();
            assert_eq!(&shards[k..], &parity[..], "k={k} m={m}");
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]
        /// Any pattern of at most m lost symbols (data or parity) is recovered, datagram by datagram,
        /// by this decoder and by reed-solomon-erasure's from the same symbols.
        #[test]
        fn any_m_erasures_are_recovered_by_both_decoders(
            k in 1usize..=48, m in 1usize..=16, max in 0usize..=200,
            seed in any::<u64>(), erase in proptest::collection::vec(any::<u16>(), 0..=16),
        ) {
            let data = datagrams(seed, k, max);
            let (l, parity) = parity_of(&data, m);
            let mut full: Vec<Vec<u8>> = data.iter().map(|d| data_symbol(d, l).unwrap()).collect();
            full.extend(parity);
            let mut shards: Vec<Option<Vec<u8>>> = full.iter().cloned().map(Some).collect();
            let mut lost = 0;
            for e in erase.iter().take(m) {
                let p = *e as usize % (k + m);
                if shards[p].take().is_some() { lost += 1; }
            }
            prop_assert!(lost <= m);
            let mut theirs = shards.clone();
            reconstruct_data(k, &mut shards).unwrap();
            for i in 0..k {
                let s = shards[i].as_ref().unwrap();
                prop_assert_eq!(s, &full[i]);
                prop_assert_eq!(symbol_datagram(s).unwrap(), &data[i][..]);
            }
            let rs = reed_solomon_erasure::galois_8::ReedSolomon::new(k, m).unwrap();
            rs.reconstruct_data(&mut theirs).unwrap();
            for i in 0..k {
                prop_assert_eq!(theirs[i].as_ref().unwrap(), &full[i]);
            }
        }

        /// More than m lost symbols: refused, never a wrong answer passed off as a recovery.
        #[test]
        fn more_than_m_erasures_are_refused(k in 1usize..=20, m in 1usize..=8, seed in any::<u64>()) {
            let data = datagrams(seed, k, 64);
            let (l, parity) = parity_of(&data, m);
            let mut shards: Vec<Option<Vec<u8>>> =
                data.iter().map(|d| data_symbol(d, l)).chain(parity.into_iter().map(Some)).collect();
            let n = k + m;
            for i in 0..=m {
                shards[(seed as usize + i * 7) % n] = None;
            }
            let present = shards.iter().filter(|s| s.is_some()).count();
            if present < k {
                prop_assert_eq!(reconstruct_data(k, &mut shards), Err(CodeError::TooFewShards));
            }
        }
    }

    /// The recovery property of a different, well-kept code (reed-solomon-simd: Leopard-RS, an FFT
    /// code over GF(2^16)) on the same block shapes and erasure patterns: both recover every
    /// pattern of at most m erasures, bit for bit.
    #[test]
    fn same_erasure_patterns_recovered_by_reed_solomon_simd() {
        for (k, m, seed) in [(8usize, 4usize, 1u64), (20, 5, 2), (40, 10, 3), (78, 14, 4)] {
            let data = datagrams(seed, k, 400);
            let (l, parity) = parity_of(&data, m);
            // reed-solomon-simd needs even shard sizes.
            let ls = l.next_multiple_of(2);
            let syms: Vec<Vec<u8>> = data
                .iter()
                .map(|d| {
                    let mut s = data_symbol(d, l).unwrap();
                    s.resize(ls, 0);
                    s
                })
                .collect();
            let simd_parity = reed_solomon_simd::encode(k, m, &syms).unwrap();
            for trial in 0..20usize {
                let lost: Vec<usize> = (0..m).map(|i| (trial * 13 + i * 5) % k).collect();
                let mut ours: Vec<Option<Vec<u8>>> = data
                    .iter()
                    .map(|d| data_symbol(d, l))
                    .chain(parity.iter().cloned().map(Some))
                    .collect();
                for &e in &lost {
                    ours[e] = None;
                }
                reconstruct_data(k, &mut ours).unwrap();
                let originals: Vec<(usize, &Vec<u8>)> = (0..k)
                    .filter(|i| !lost.contains(i))
                    .map(|i| (i, &syms[i]))
                    .collect();
                let recovery: Vec<(usize, &Vec<u8>)> = simd_parity.iter().enumerate().collect();
                let theirs = reed_solomon_simd::decode(k, m, originals, recovery).unwrap();
                for &e in &lost {
                    assert_eq!(&ours[e].as_ref().unwrap()[..], &syms[e][..l]);
                    assert_eq!(&theirs[&e][..], &syms[e][..]);
                }
            }
        }
    }

    #[test]
    fn symbols_carry_lengths_and_zero_padding() {
        let s = data_symbol(&[7, 8, 9], 8).unwrap();
        assert_eq!(s, [3, 0, 7, 8, 9, 0, 0, 0]);
        assert_eq!(symbol_datagram(&s), Some(&[7u8, 8, 9][..]));
        let mut bad = s.clone();
        bad[7] = 1;
        assert_eq!(symbol_datagram(&bad), None, "non-zero padding");
        let mut bad = s;
        bad[0] = 7;
        assert_eq!(symbol_datagram(&bad), None, "length past the symbol");
        assert_eq!(symbol_datagram(&[1]), None);
        assert_eq!(data_symbol(&[1, 2], 3), None);
    }

    #[test]
    fn bad_blocks_are_refused() {
        let mut p = [0u8; 4];
        assert_eq!(
            encode::<&[u8]>(&[], &mut [&mut p[..]]),
            Err(CodeError::NoData)
        );
        let big = [0u8; 10];
        assert_eq!(
            encode(&[&big[..]], &mut [&mut p[..]]),
            Err(CodeError::LengthMismatch)
        );
        let many: Vec<&[u8]> = vec![&[][..]; 256];
        assert_eq!(
            encode(&many, &mut [&mut p[..]]),
            Err(CodeError::TooManyShards)
        );
        assert_eq!(
            Lagrange::new(&[1, 2, 1]).err(),
            Some(CodeError::DuplicatePoint)
        );
        let mut shards = vec![Some(vec![0u8; 3]), None, Some(vec![0u8; 4])];
        assert_eq!(
            reconstruct_data(2, &mut shards),
            Err(CodeError::LengthMismatch)
        );
    }
}
