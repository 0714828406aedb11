//! Counter mode with round-1 and round-2 caching: the parts of the first two rounds that do not
//! depend on the counter's low byte are computed once per 256-block run ([`RunCtx`]), the rest
//! once per group of 8 blocks ([`group_z`]) with two bitsliced S-boxes instead of eight.
//!
//! # Round 1
//!
//! Blocks are processed in pairs `(2j, 2j+1)` of the counter's low byte, so both lanes of a state
//! share bytes 0..=14 of the counter block (the "run", which changes every 256 blocks) and differ
//! only in byte 15 (`v`). The state starts at drift 2 (`X0 = SR²(S0)`, so byte 15 sits at row 3,
//! column 1) and round 1 is `X1 = MC_3(SB(X0 ^ K0)) ^ K1`. SubBytes works byte by byte and MC_3
//! is linear, so
//!
//! ```text
//! X1 = C1 ^ MC_3(e(3,1) · y(v)),   y(v) = S(v ^ K0[15]) ^ 0x63
//! C1 = MC_3(SB(X0 ^ K0) with byte (3,1) cleared) ^ K1
//! ```
//!
//! and `MC_3(e(3,1)·y)` puts `y`, `y`, `3y`, `2y` at (row r, column c_r) = (0,0), (1,3), (2,2),
//! (3,1): the set `P` of varying positions ([`VARYING_MASK`]).
//!
//! # Round 2
//!
//! Round 2 runs at drift 0. SubBytes changes only the bytes in `P`, so with
//! `A = SB(C1)` cleared on `P` and `D` = SubBytes of the four varying bytes (zero elsewhere),
//!
//! ```text
//! X2 = C2 ^ MC_0(D),   C2 = MC_0(A) ^ K2,   D(r, c_r) = S(C1(r, c_r) ^ m_r · y(v)) ^ 0x63
//! ```
//!
//! with `m = (1, 1, 3, 2)`. `C2` is per run; `D` needs four S-boxes per block.
//!
//! # Groups of 8 blocks
//!
//! A group is the 8 blocks with low bytes `8g..8g+8`: pairs `p = 0..4`, lanes `b`. One bitsliced
//! S-box evaluates 32 lanes; [`group_z`] places lane `(p, r, b)` at bit
//! `q = 8·((r + p) mod 4) + 2·c_r + b` and runs two S-boxes: first `y(8g + 2p + b)` (the same for
//! all `r`), then `D` (each lane picks its multiple `m_r` of `y` with two masks, since row `r`
//! is column `c_r` of every byte). For pair `p`, `ror(z, 8p)` moves its lanes to exactly the bits
//! of `P` ([`pair_state`]): one rotate and one AND per plane, no transposition. Rounds 1 and 2
//! of 8 blocks then cost 2 S-boxes, about 50 other instructions, and per pair one MixColumns,
//! instead of 8 S-boxes and 8 MixColumns.
//!
//! Every index and branch here depends on the counter and the length only, which are public.
use super::key::RoundKeys;
#[cfg(doc)]
use super::key::Schedule;
use super::slice::{self, Rotate, State};

/// Bits of a plane in `P`, the positions round 1 changes with the counter's low byte:
/// (row, column) (0,0), (1,3), (2,2), (3,1), both lanes.
pub(crate) const VARYING_MASK: u32 = 0x0C30_C003;

/// Column `c` of every row, both lanes.
const fn col(c: u32) -> u32 {
    0x0303_0303 << (2 * c)
}

/// Which rows of a group layout take `3y` (columns 2) and `2y` (column 1).
pub(crate) const ROWS_23: u32 = col(2) | col(1);
pub(crate) const ROW_3: u32 = col(1);

/// The group lane layout's constant input planes: bit `i` of `2p + b` at lane `(p, r, b)`.
const fn pattern(i: u32) -> u32 {
    let mut w = 0u32;
    let mut s = 0;
    while s < 4 {
        let mut c = 0;
        while c < 4 {
            let r = (4 - c) % 4;
            let p = (s + 4 - r) % 4;
            let mut b = 0;
            while b < 2 {
                if ((2 * p + b) >> i) & 1 == 1 {
                    w |= 1 << (8 * s + 2 * c + b);
                }
                b += 1;
            }
            c += 1;
        }
        s += 1;
    }
    w
}

/// All ones if bit `i` of `x` is set, else zero.
#[inline(always)]
fn bcast(x: u32, i: u32) -> u32 {
    0u32.wrapping_sub((x >> i) & 1)
}

/// One plane of [`RunCtx::bconst`] from the same plane of `C1`. Out of line (one copy instead of
/// eight): the run-context code runs between kernel calls and competes with the kernel for the
/// GAP8 cluster's instruction cache.
#[inline(never)]
fn bconst_plane(c1: u32) -> u32 {
    let mut w = 0;
    for r in 0..4u32 {
        let c = (4 - r) % 4;
        w |= bcast(c1, 8 * r + 2 * c) & col(c);
    }
    w
}

/// What a 256-block run needs: `repr(C)` because the assembly kernels read it.
#[repr(C)]
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RunCtx {
    /// `C2`, the round-2 state without the varying part.
    pub(crate) c2: State,
    /// `C1` on `P` in the group layout: plane `i`, lanes of row `r` = bit `i` of `C1(r, c_r)`.
    pub(crate) bconst: State,
    /// The group layout's input planes for `y` without the group number: `pattern(i) ^ K0[15]_i`.
    pub(crate) yin: State,
    /// Group cache: the low byte of the group [`RunCtx::z`] belongs to (`u32::MAX`: none).
    pub(crate) zbase: u32,
    /// Group cache: [`group_z`] of group `zbase`, so that consecutive kernel calls of one message
    /// (partial first or last pair, scratch buffer) do not recompute it.
    pub(crate) z: State,
}

impl Drop for RunCtx {
    fn drop(&mut self) {
        use zeroize::Zeroize;
        self.c2.zeroize();
        self.bconst.zeroize();
        self.yin.zeroize();
        self.z.zeroize();
    }
}

/// Round-1 state without the counter's low byte, for the run of `ctr` (its byte 15 is ignored).
pub(crate) fn round1_const(keys: &RoundKeys, ctr: u128) -> State {
    let p = (ctr & !0xff).to_be_bytes();
    let x0 = slice::shift_rows_bytes(&p, 2);
    let mut s = slice::pack(&x0, &x0);
    slice::add_round_key(&mut s, &keys.rk[0]);
    slice::sub_bytes_once(&mut s);
    for x in s.iter_mut() {
        // Byte 15 of the counter block sits at (row 3, column 1): bits 26 and 27.
        *x &= !0x0C00_0000;
    }
    slice::mix_columns::<slice::NativeRotate, 3>(&mut s);
    slice::add_round_key(&mut s, &keys.rk[1]);
    s
}

impl RunCtx {
    /// A context of no run (all zero, no group cached), to be overwritten by [`RunCtx::fill`].
    pub(crate) const fn empty() -> Self {
        RunCtx {
            c2: [0; 8],
            bconst: [0; 8],
            yin: [0; 8],
            zbase: u32::MAX,
            z: [0; 8],
        }
    }

    /// The run of 256 counter blocks whose bytes 0..=14 are those of `ctr` (tests).
    #[cfg(test)]
    pub(crate) fn new(keys: &RoundKeys, ctr: u128) -> Self {
        let mut run = RunCtx::empty();
        run.fill(keys, ctr);
        run
    }

    /// Makes this the context of the run of `ctr`, in place (no 132-byte copy). Not inlined:
    /// its temporaries stay out of the frame that calls the kernel (cluster stacks are 2 KiB).
    #[inline(never)]
    pub(crate) fn fill(&mut self, keys: &RoundKeys, ctr: u128) {
        let c1 = round1_const(keys, ctr);
        let a = &mut self.c2;
        *a = c1;
        slice::sub_bytes_once(a);
        for x in a.iter_mut() {
            *x &= !VARYING_MASK;
        }
        slice::mix_columns::<slice::NativeRotate, 0>(a);
        slice::add_round_key(a, &keys.rk[2]);
        for (b, &c) in self.bconst.iter_mut().zip(&c1) {
            *b = bconst_plane(c);
        }
        let k15 = u32::from(keys.k15);
        for (i, y) in self.yin.iter_mut().enumerate() {
            *y = pattern(i as u32) ^ bcast(k15, i as u32);
        }
        self.zbase = u32::MAX;
    }
}

/// The round-2 S-box outputs `D` of the group of low bytes `g..g+8` (`g` a multiple of 8), in the
/// group layout.
#[inline(always)]
pub(crate) fn group_z(run: &RunCtx, g: u8) -> State {
    debug_assert_eq!(g % 8, 0);
    let g = u32::from(g);
    let mut y: State = core::array::from_fn(|i| run.yin[i] ^ bcast(g, i as u32));
    slice::sub_bytes(&mut y);
    let x2 = slice::xtime(&y);
    let mut z: State =
        core::array::from_fn(|i| y[i] ^ (x2[i] & ROWS_23) ^ (y[i] & ROW_3) ^ run.bconst[i]);
    slice::sub_bytes(&mut z);
    z
}

/// State after round 2 of pair `p` (0..4) of a group.
#[inline(always)]
pub(crate) fn pair_state<R: Rotate>(run: &RunCtx, z: &State, p: u32) -> State {
    let mut d: State = core::array::from_fn(|i| z[i].rotate_right(8 * p) & VARYING_MASK);
    slice::mix_columns::<R, 0>(&mut d);
    slice::add_round_key(&mut d, &run.c2);
    d
}

/// Rounds `from..=10` (round `r` runs at drift `(2 + r) mod 4`); the result is in byte order.
#[inline(always)]
pub(crate) fn rounds_to_10<R: Rotate>(s: &mut State, keys: &RoundKeys, from: usize) {
    for r in from..10 {
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

/// Rounds 3..=10 with an explicit ShiftRows at drift 0 (round keys of [`Schedule::ShiftRows`]):
/// what the PULP kernel computes. The state after round 2 is at drift 0 in both schedules.
#[inline(always)]
pub(crate) fn rounds_3_to_10_shift_rows<R: Rotate>(s: &mut State, keys: &RoundKeys) {
    for r in 3..10 {
        slice::sub_bytes(s);
        slice::shift_rows(s);
        slice::mix_columns::<R, 0>(s);
        slice::add_round_key(s, &keys.rk[r]);
    }
    slice::sub_bytes(s);
    slice::shift_rows(s);
    slice::add_round_key(s, &keys.rk[10]);
}

/// Encrypts two arbitrary blocks (no caching): the block function, for tests and diagnostics.
pub(crate) fn encrypt_pair(keys: &RoundKeys, b0: &[u8; 16], b1: &[u8; 16]) -> ([u8; 16], [u8; 16]) {
    let x0 = slice::shift_rows_bytes(b0, 2);
    let x1 = slice::shift_rows_bytes(b1, 2);
    let mut s = slice::pack(&x0, &x1);
    slice::add_round_key(&mut s, &keys.rk[0]);
    slice::sub_bytes(&mut s);
    slice::mix_columns::<slice::NativeRotate, 3>(&mut s);
    slice::add_round_key(&mut s, &keys.rk[1]);
    rounds_to_10::<slice::NativeRotate>(&mut s, keys, 2);
    slice::unpack(&s)
}

/// One call of a kernel: XOR the keystream of `npairs` consecutive pairs of one run, the first
/// with low bytes `v0`, `v0 + 1` (`v0` even), into `data` (8 little-endian words per pair:
/// block `v0` then block `v0 + 1`). The kernel updates the run's group cache.
#[derive(Debug)]
pub struct PairJob<'a> {
    pub(crate) keys: &'a RoundKeys,
    pub(crate) run: &'a mut RunCtx,
    pub(crate) v0: u8,
    pub(crate) npairs: usize,
}

/// The portable kernel, generic over the rotate and the round schedule (`SR`:
/// [`Schedule::ShiftRows`], else [`Schedule::Fixsliced`]).
#[inline(always)]
pub(crate) fn xor_pairs_generic<R: Rotate, const SR: bool>(
    job: &mut PairJob<'_>,
    data: &mut [u32],
) {
    debug_assert_eq!(data.len(), 8 * job.npairs);
    debug_assert!(job.v0 % 2 == 0 && usize::from(job.v0) + 2 * job.npairs <= 256);
    let mut v = job.v0;
    for d in data.chunks_exact_mut(8) {
        let g = u32::from(v & !7);
        if job.run.zbase != g {
            job.run.z = group_z(job.run, v & !7);
            job.run.zbase = g;
        }
        let mut s = pair_state::<R>(job.run, &job.run.z, u32::from(v >> 1) & 3);
        if SR {
            rounds_3_to_10_shift_rows::<R>(&mut s, job.keys);
        } else {
            rounds_to_10::<R>(&mut s, job.keys, 3);
        }
        slice::transpose(&mut s);
        // s[2c + b] is column c of block b; memory holds block 0 then block 1.
        for c in 0..4 {
            d[c] ^= s[2 * c];
            d[4 + c] ^= s[2 * c + 1];
        }
        v = v.wrapping_add(2);
    }
}
