//! Counter mode with round-1 caching: the parts of the first round that do not depend on the
//! counter's low byte are computed once per 256-block run, the rest once per 32 blocks.
//!
//! # Round 1 of a counter block
//!
//! Blocks are processed in pairs `(2j, 2j+1)` of the counter's low byte, so both lanes of a state
//! share bytes 0..=14 of the counter block (`P`, the "run", changes every 256 blocks) and differ
//! only in byte 15 (`v`). The state starts at drift 2 (`X0 = SR²(S0)`, so byte 15 sits at row 3,
//! column 1) and round 1 is `X1 = MC_3(SB(X0 ^ K0)) ^ K1`. SubBytes works byte by byte and MC_3 is
//! linear, so
//!
//! ```text
//! X1 = C ^ MC_3(e(3,1) · y(v)),   y(v) = S(v ^ K0[15]) ^ 0x63
//! C  = MC_3(SB(X0 ^ K0) with byte (3,1) cleared) ^ K1          (once per run: [`run_const`])
//! ```
//!
//! and `MC_3(e(3,1)·y)` puts `y`, `y`, `3y`, `2y` at (row, column) (0,0), (1,3), (2,2), (3,1).
//! [`batch`] computes `y` for 32 consecutive low bytes with one bitsliced S-box (lane ℓ = low byte
//! `base + ℓ`), forms `2y` and `3y`, and transposes the result so that each pair gets two words
//! `W = [W_lo, W_hi]`: plane `i` of the pair's varying bits, rotated left by `8·(i mod 4)`, in
//! `W_lo` (`i < 4`) or `W_hi`. [`pair_state`] rebuilds `X1` with one rotate, one AND and one XOR
//! per plane, which replaces AddRoundKey 0, SubBytes 1, MixColumns 1 and AddRoundKey 1
//! (about 250 instructions per pair) by about 30.
//!
//! Every index and branch here depends on the counter and the length only, which are public.
use super::key::RoundKeys;
use super::slice::{self, Rotate, State};

/// Bits of a plane that round 1 changes with the counter's low byte:
/// (row, column) (0,0), (1,3), (2,2), (3,1), both lanes.
pub(crate) const VARYING_MASK: u32 = 0x0C30_C003;

/// Round-1 state with the counter's low byte removed, for the run of 256 counter blocks whose
/// bytes 0..=14 are those of `ctr` (its byte 15 is ignored).
pub(crate) fn run_const(keys: &RoundKeys, ctr: u128) -> State {
    let p = (ctr & !0xff).to_be_bytes();
    let x0 = slice::shift_rows_bytes(&p, 2);
    let mut s = slice::pack(&x0, &x0);
    slice::add_round_key(&mut s, &keys.rk[0]);
    slice::sub_bytes(&mut s);
    for x in s.iter_mut() {
        // Byte 15 of the counter block sits at (row 3, column 1): bits 26 and 27.
        *x &= !0x0C00_0000;
    }
    slice::mix_columns::<slice::NativeRotate, 3>(&mut s);
    slice::add_round_key(&mut s, &keys.rk[1]);
    s
}

/// Field `f` (bits `2f`, `2f+1`) of a pair word that holds plane `i` (mod 4) of row `r`.
const fn field(r: usize, i: usize) -> usize {
    4 * ((r + i) % 4) + (4 - r) % 4
}

/// Transposes a 16×16 matrix of 2-bit fields: word `f`, field `j` ↔ word `j`, field `f`.
fn transpose16x2(a: &mut [u32; 16]) {
    fn stage(a: &mut [u32; 16], d: usize, mask: u32) {
        let sh = 2 * d as u32;
        for f in 0..16 {
            if f & d == 0 {
                let t = ((a[f] >> sh) ^ a[f + d]) & mask;
                a[f + d] ^= t;
                a[f] ^= t << sh;
            }
        }
    }
    stage(a, 8, 0x0000_FFFF);
    stage(a, 4, 0x00FF_00FF);
    stage(a, 2, 0x0F0F_0F0F);
    stage(a, 1, 0x3333_3333);
}

/// The varying round-1 words of the 16 pairs whose low bytes are `base..base + 32`
/// (`base` a multiple of 32): element `j` belongs to low bytes `base + 2j`, `base + 2j + 1`.
pub(crate) fn batch(keys: &RoundKeys, base: u8) -> [[u32; 2]; 16] {
    debug_assert_eq!(base % 32, 0);
    const PATTERN: [u32; 8] = [
        0xAAAA_AAAA,
        0xCCCC_CCCC,
        0xF0F0_F0F0,
        0xFF00_FF00,
        0xFFFF_0000,
        0,
        0,
        0,
    ];
    let v = base ^ keys.k15;
    let mut y: State =
        core::array::from_fn(|i| PATTERN[i] ^ 0u32.wrapping_sub(u32::from((v >> i) & 1)));
    slice::sub_bytes(&mut y);
    let x2 = slice::xtime(&y);
    let x3: State = core::array::from_fn(|i| x2[i] ^ y[i]);
    let rows = [&y, &y, &x3, &x2];
    let mut lo = [0u32; 16];
    let mut hi = [0u32; 16];
    for (r, q) in rows.iter().enumerate() {
        for i in 0..4 {
            lo[field(r, i)] = q[i];
            hi[field(r, i)] = q[4 + i];
        }
    }
    transpose16x2(&mut lo);
    transpose16x2(&mut hi);
    core::array::from_fn(|j| [lo[j], hi[j]])
}

/// State after round 1 of a pair, from the run constant and the pair's batch words.
#[inline(always)]
pub(crate) fn pair_state<R: Rotate>(cst: &State, w: &[u32; 2]) -> State {
    let m = VARYING_MASK;
    [
        cst[0] ^ (w[0] & m),
        cst[1] ^ (R::ror::<8>(w[0]) & m),
        cst[2] ^ (R::ror::<16>(w[0]) & m),
        cst[3] ^ (R::ror::<24>(w[0]) & m),
        cst[4] ^ (w[1] & m),
        cst[5] ^ (R::ror::<8>(w[1]) & m),
        cst[6] ^ (R::ror::<16>(w[1]) & m),
        cst[7] ^ (R::ror::<24>(w[1]) & m),
    ]
}

/// Rounds 2..=10 (round `r` runs at drift `(2 + r) mod 4`); the result is in byte order.
#[inline(always)]
pub(crate) fn rounds_2_to_10<R: Rotate>(s: &mut State, keys: &RoundKeys) {
    for r in 2..10 {
        slice::sub_bytes(s);
        match r % 4 {
            2 => slice::mix_columns::<R, 0>(s),
            3 => slice::mix_columns::<R, 1>(s),
            0 => slice::mix_columns::<R, 2>(s),
            _ => slice::mix_columns::<R, 3>(s),
        }
        slice::add_round_key(s, &keys.rk[r]);
    }
    slice::sub_bytes(s);
    slice::add_round_key(s, &keys.rk[10]);
}

/// Encrypts two arbitrary blocks (no caching). The block function of the tests and of
/// [`super::Aes128Block`]-style users; not on the CTR hot path.
pub(crate) fn encrypt_pair(keys: &RoundKeys, b0: &[u8; 16], b1: &[u8; 16]) -> ([u8; 16], [u8; 16]) {
    let x0 = slice::shift_rows_bytes(b0, 2);
    let x1 = slice::shift_rows_bytes(b1, 2);
    let mut s = slice::pack(&x0, &x1);
    slice::add_round_key(&mut s, &keys.rk[0]);
    slice::sub_bytes(&mut s);
    slice::mix_columns::<slice::NativeRotate, 3>(&mut s);
    slice::add_round_key(&mut s, &keys.rk[1]);
    rounds_2_to_10::<slice::NativeRotate>(&mut s, keys);
    slice::unpack(&s)
}

/// One call of a kernel: XOR the keystream of `w.len()` consecutive pairs of one batch into
/// `data` (8 little-endian words per pair: block `2j` then block `2j + 1`).
#[derive(Debug)]
pub struct PairJob<'a> {
    pub(crate) keys: &'a RoundKeys,
    pub(crate) cst: &'a State,
    pub(crate) w: &'a [[u32; 2]],
}

/// The portable kernel, generic over the rotate.
#[inline(always)]
pub(crate) fn xor_pairs_generic<R: Rotate>(job: &PairJob<'_>, data: &mut [u32]) {
    debug_assert_eq!(data.len(), 8 * job.w.len());
    for (w, d) in job.w.iter().zip(data.chunks_exact_mut(8)) {
        let mut s = pair_state::<R>(job.cst, w);
        rounds_2_to_10::<R>(&mut s, job.keys);
        slice::transpose(&mut s);
        // s[2c + b] is column c of block b; memory holds block 0 then block 1.
        for c in 0..4 {
            d[c] ^= s[2 * c];
            d[4 + c] ^= s[2 * c + 1];
        }
    }
}
