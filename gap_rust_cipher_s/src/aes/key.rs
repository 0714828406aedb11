//! AES-128 key schedule, once per key, into the fixsliced round-key representation.
//!
//! The expansion itself (FIPS-197 §5.2) runs on bytes; its `SubWord` uses the bitsliced S-box of
//! [`slice::sub_bytes`] (no table). Round key `r` is then stored for the state it is added to:
//! permuted by `SR^-d` with the drift `d = (2 + r) mod 4` of that state (see `ctr.rs` for why the
//! drift starts at 2), XORed with `0x63` in every byte for `r ≥ 1` (the NOTs the S-box circuit
//! leaves out), and packed into both lanes.
use super::slice::{self, State};
use zeroize::Zeroize;

/// Drift (number of skipped ShiftRows, mod 4) of the state before round 1. Two, so that after the
/// ten ShiftRows of AES-128 the state is back in byte order (2 + 10 ≡ 0 mod 4) and no final
/// ShiftRows is needed.
pub(crate) const DRIFT0: usize = 2;

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

/// `SubWord`: the AES S-box on the four bytes of `w`, in constant time.
fn sub_word(w: [u8; 4]) -> [u8; 4] {
    let mut s: State = [u32::from_le_bytes(w), 0, 0, 0, 0, 0, 0, 0];
    slice::transpose(&mut s);
    slice::sub_bytes(&mut s);
    slice::transpose(&mut s);
    (s[0] ^ 0x6363_6363).to_le_bytes()
}

/// The eleven AES-128 round keys in byte form (FIPS-197 §5.2), byte `4·c + r` = row `r`, column `c`.
pub(crate) fn expand_bytes(key: &[u8; 16]) -> [[u8; 16]; 11] {
    let mut w = [[0u8; 4]; 44];
    for (i, wi) in w.iter_mut().take(4).enumerate() {
        wi.copy_from_slice(&key[4 * i..4 * i + 4]);
    }
    let mut rcon = 1u8;
    for i in 4..44 {
        let mut t = w[i - 1];
        if i % 4 == 0 {
            // The branch depends on the public index only.
            t = sub_word([t[1], t[2], t[3], t[0]]);
            t[0] ^= rcon;
            rcon = (rcon << 1) ^ (0x1b & 0u8.wrapping_sub(rcon >> 7));
        }
        for b in 0..4 {
            w[i][b] = w[i - 4][b] ^ t[b];
        }
    }
    let mut out = [[0u8; 16]; 11];
    for (r, o) in out.iter_mut().enumerate() {
        for c in 0..4 {
            o[4 * c..4 * c + 4].copy_from_slice(&w[4 * r + c]);
        }
    }
    w.zeroize();
    out
}

impl RoundKeys {
    /// Expands `key`.
    pub(crate) fn new(key: &[u8; 16]) -> Self {
        let mut bytes = expand_bytes(key);
        let mut rk = [[0u32; 8]; 11];
        for (r, (k, out)) in bytes.iter_mut().zip(rk.iter_mut()).enumerate() {
            let d = (DRIFT0 + r) % 4;
            // SR^-d = SR^(4-d).
            let mut kb = slice::shift_rows_bytes(k, (4 - d) % 4);
            if r >= 1 {
                for b in kb.iter_mut() {
                    *b ^= 0x63;
                }
            }
            *out = slice::pack(&kb, &kb);
            kb.zeroize();
            k.zeroize();
        }
        RoundKeys { rk, k15: key[15] }
    }
}
