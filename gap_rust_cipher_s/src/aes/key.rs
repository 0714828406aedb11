//! AES-128 key schedule, once per key, into the fixsliced round-key representation.
//!
//! The expansion itself (FIPS-197 §5.2) runs on little-endian column words, one round key at a
//! time; its `SubWord` uses the bitsliced S-box of [`slice::sub_bytes`] (no table). Round key `r`
//! is stored for the state it is added to:
//! permuted by `SR^-d` with the drift `d = (2 + r) mod 4` of that state (see `ctr.rs` for why the
//! drift starts at 2), XORed with `0x63` in every byte for `r ≥ 1` (the NOTs the S-box circuit
//! leaves out), and packed into both lanes. Kernels that execute ShiftRows in rounds 3..=10
//! ([`Schedule::ShiftRows`]) take round keys 3..=10 unpermuted (drift 0).
use super::slice::{self, State};
use zeroize::Zeroize;

/// Drift (number of skipped ShiftRows, mod 4) of the state before round 1. Two, so that after the
/// ten ShiftRows of AES-128 the state is back in byte order (2 + 10 ≡ 0 mod 4) and no final
/// ShiftRows is needed.
pub(crate) const DRIFT0: usize = 2;

/// Which drift each round key is stored for: the kernels of a backend decide (`Backend::SCHEDULE`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Schedule {
    /// Fixsliced throughout: round `r` at drift `(2 + r) mod 4`, ShiftRows never executed.
    Fixsliced,
    /// Rounds 1 and 2 fixsliced (drifts 3, 0: the counter-mode caches are the same), rounds
    /// 3..=10 with an explicit ShiftRows at drift 0 (the PULP kernel: one per-byte rotation per
    /// plane with packed-SIMD shifts is cheaper than the fixsliced MixColumns of odd drifts).
    ShiftRows,
}

impl Schedule {
    /// Drift of the state round key `r` is added to.
    pub(crate) const fn drift(self, r: usize) -> usize {
        match self {
            Schedule::ShiftRows if r >= 3 => 0,
            _ => (DRIFT0 + r) % 4,
        }
    }
}

/// Expanded AES-128 key in the representation the kernels use.
///
/// `repr(C)` because the assembly kernels read it: `rk` at offset 0 (11 × 8 words).
#[repr(C)]
#[derive(Clone)]
pub struct RoundKeys {
    /// Round key `r` in bitsliced, fixsliced form (both lanes equal).
    pub(crate) rk: [State; 11],
    /// Byte 15 of the cipher key (round key 0), which meets the counter's low byte in round 1.
    pub(crate) k15: u8,
}

impl Drop for RoundKeys {
    fn drop(&mut self) {
        self.rk.zeroize();
        self.k15.zeroize();
    }
}

impl core::fmt::Debug for RoundKeys {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str("RoundKeys { .. }")
    }
}

/// `SubWord`: the AES S-box on the four bytes of a little-endian word, in constant time. Byte
/// `r` becomes lane `8·r` of the planes (bit `i` of every byte is `(x >> i) & 0x01010101`); the
/// other lanes are 0.
fn sub_word(x: u32) -> u32 {
    let mut s: State = core::array::from_fn(|i| (x >> i) & 0x0101_0101);
    slice::sub_bytes(&mut s);
    let mut y = 0;
    for (i, p) in s.iter().enumerate() {
        y |= (p & 0x0101_0101) << i;
    }
    y ^ 0x6363_6363
}

/// The next round key from the previous one (FIPS-197 §5.2), little-endian column words.
fn next_round_key(w: &mut [u32; 4], rcon: &mut u32) {
    // RotWord = rotate right by a byte; rcon is updated with a mask, not a branch.
    let t = sub_word(w[3].rotate_right(8)) ^ *rcon;
    *rcon = ((*rcon << 1) ^ (0x1b & 0u32.wrapping_sub(*rcon >> 7))) & 0xff;
    w[0] ^= t;
    w[1] ^= w[0];
    w[2] ^= w[1];
    w[3] ^= w[2];
}

/// The 44 words of the AES-128 key expansion, little endian: word `4·r + c` is column `c` of
/// round key `r` (byte `r'` of the column = row `r'`). Tests only.
#[cfg(test)]
fn expand_words(key: &[u8; 16]) -> [u32; 44] {
    let mut w = [0u32; 44];
    for (i, c) in key.chunks_exact(4).enumerate() {
        w[i] = u32::from_le_bytes([c[0], c[1], c[2], c[3]]);
    }
    let mut rcon = 1u32;
    for i in 4..44 {
        let mut t = w[i - 1];
        if i % 4 == 0 {
            // The branch depends on the public index only. RotWord = rotate right by a byte.
            t = sub_word(t.rotate_right(8)) ^ rcon;
            rcon = ((rcon << 1) ^ (0x1b & 0u32.wrapping_sub(rcon >> 7))) & 0xff;
        }
        w[i] = w[i - 4] ^ t;
    }
    w
}

/// The eleven AES-128 round keys in byte form, byte `4·c + r` = row `r`, column `c` (tests).
#[cfg(test)]
pub(crate) fn expand_bytes(key: &[u8; 16]) -> [[u8; 16]; 11] {
    let w = expand_words(key);
    core::array::from_fn(|r| core::array::from_fn(|i| w[4 * r + i / 4].to_le_bytes()[i % 4]))
}

impl RoundKeys {
    /// Expands `key` for the fixsliced kernels.
    pub(crate) fn new(key: &[u8; 16]) -> Self {
        Self::with_schedule(key, Schedule::Fixsliced)
    }

    /// Expands `key` for kernels running `schedule`.
    pub(crate) fn with_schedule(key: &[u8; 16], schedule: Schedule) -> Self {
        // Built in place and one round key at a time: cluster cores have 2 KiB stacks.
        let mut keys = RoundKeys {
            rk: [[0u32; 8]; 11],
            k15: key[15],
        };
        let mut w = [0u32; 4];
        for (wi, c) in w.iter_mut().zip(key.chunks_exact(4)) {
            *wi = u32::from_le_bytes([c[0], c[1], c[2], c[3]]);
        }
        let mut rcon = 1u32;
        for (r, out) in keys.rk.iter_mut().enumerate() {
            if r > 0 {
                next_round_key(&mut w, &mut rcon);
            }
            let d = schedule.drift(r);
            // Stored as SR^-d(K): column c, row r' comes from column c - d·r'. The S-box's NOTs
            // (0x63 in every byte) go into keys 1..=10.
            let nots = if r >= 1 { 0x6363_6363 } else { 0 };
            for c in 0..4 {
                let mut col = nots;
                if d == 0 {
                    // Most keys of Schedule::ShiftRows (a branch on the round number only).
                    col ^= w[c];
                } else {
                    for row in 0..4 {
                        col ^= w[(c + 4 * row - d * row) % 4] & (0xff << (8 * row));
                    }
                }
                out[2 * c] = col;
                out[2 * c + 1] = col;
            }
            slice::transpose(out);
        }
        w.zeroize();
        keys
    }
}
