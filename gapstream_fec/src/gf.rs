//! GF(2^8) with the reduction polynomial x^8 + x^4 + x^3 + x^2 + 1 (0x11D) and generator 2: the
//! field of `reed-solomon-erasure`, Backblaze's JavaReedSolomon and klauspost/reedsolomon.
//! Table driven: `EXP`/`LOG` for inverses and a full 64 KiB multiplication table, so that one
//! multiply-accumulate over a buffer is one table load per byte ([`mul_add`]). All tables are
//! computed at compile time.

/// The reduction polynomial.
pub const POLY: u16 = 0x11D;

const fn exp_log() -> ([u8; 512], [u8; 256]) {
    let mut exp = [0u8; 512];
    let mut log = [0u8; 256];
    let mut x: u16 = 1;
    let mut i = 0;
    while i < 255 {
        exp[i] = x as u8;
        log[x as usize] = i as u8;
        x <<= 1;
        if x & 0x100 != 0 {
            x ^= POLY;
        }
        i += 1;
    }
    while i < 512 {
        exp[i] = exp[i - 255];
        i += 1;
    }
    (exp, log)
}

const EXP_LOG: ([u8; 512], [u8; 256]) = exp_log();

/// `EXP[i] = 2^i` for `i` in `0..510` (doubled so that `EXP[LOG[a] + LOG[b]]` needs no reduction).
pub static EXP: [u8; 512] = EXP_LOG.0;
/// `LOG[a]` = the `i` with `2^i = a`, for `a != 0` (`LOG[0]` is unused).
pub static LOG: [u8; 256] = EXP_LOG.1;

const fn mul_table() -> [[u8; 256]; 256] {
    let (exp, log) = EXP_LOG;
    let mut t = [[0u8; 256]; 256];
    let mut a = 1;
    while a < 256 {
        let mut b = 1;
        while b < 256 {
            t[a][b] = exp[log[a] as usize + log[b] as usize];
            b += 1;
        }
        a += 1;
    }
    t
}

/// `MUL[a][b] = a · b`.
pub static MUL: [[u8; 256]; 256] = mul_table();

/// a · b.
#[inline]
pub fn mul(a: u8, b: u8) -> u8 {
    MUL[a as usize][b as usize]
}

/// The inverse of `a`; `None` for 0.
#[inline]
pub fn inv(a: u8) -> Option<u8> {
    (a != 0).then(|| EXP[255 - LOG[a as usize] as usize])
}

/// a / b; `None` when b is 0.
#[inline]
pub fn div(a: u8, b: u8) -> Option<u8> {
    Some(mul(a, inv(b)?))
}

/// a^n, with 0^0 = 1 (as the Vandermonde matrix of `reed-solomon-erasure` takes it).
pub fn pow(a: u8, n: usize) -> u8 {
    if n == 0 {
        return 1;
    }
    if a == 0 {
        return 0;
    }
    EXP[(LOG[a as usize] as usize * n) % 255]
}

/// `dst[i] ^= c · src[i]` for `i < min(len)`: the multiply-accumulate every coding step is made of.
#[inline]
pub fn mul_add(c: u8, src: &[u8], dst: &mut [u8]) {
    match c {
        0 => {}
        1 => {
            for (d, s) in dst.iter_mut().zip(src) {
                *d ^= *s;
            }
        }
        _ => {
            let row = &MUL[c as usize];
            for (d, s) in dst.iter_mut().zip(src) {
                *d ^= row[*s as usize];
            }
        }
    }
}

/// `dst[r][i] ^= c[r] · src[i]` for four coefficients at once: each source byte is loaded once
/// for four parity symbols (the encoder's inner loop; 4 table loads, 4 XORs per byte).
#[inline]
pub fn mul_add4(c: [u8; 4], src: &[u8], dst: [&mut [u8]; 4]) {
    let n = src.len();
    let [d0, d1, d2, d3] = dst;
    let (d0, d1, d2, d3) = (&mut d0[..n], &mut d1[..n], &mut d2[..n], &mut d3[..n]);
    let (r0, r1, r2, r3) = (
        &MUL[c[0] as usize],
        &MUL[c[1] as usize],
        &MUL[c[2] as usize],
        &MUL[c[3] as usize],
    );
    for i in 0..n {
        let s = src[i] as usize;
        d0[i] ^= r0[s];
        d1[i] ^= r1[s];
        d2[i] ^= r2[s];
        d3[i] ^= r3[s];
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Multiplication by shift-and-add, independent of the tables.
    fn slow_mul(mut a: u8, mut b: u8) -> u8 {
        let mut r = 0u8;
        while b != 0 {
            if b & 1 != 0 {
                r ^= a;
            }
            let carry = a & 0x80 != 0;
            a <<= 1;
            if carry {
                a ^= (POLY & 0xFF) as u8;
            }
            b >>= 1;
        }
        r
    }

    #[test]
    fn tables_agree_with_shift_and_add_and_with_reed_solomon_erasure() {
        use reed_solomon_erasure::galois_8 as rse;
        for a in 0..=255u8 {
            for b in 0..=255u8 {
                assert_eq!(mul(a, b), slow_mul(a, b), "{a} * {b}");
                assert_eq!(
                    mul(a, b),
                    rse::mul(a, b),
                    "{a} * {b} vs reed-solomon-erasure"
                );
                if b != 0 {
                    assert_eq!(div(a, b), Some(rse::div(a, b)));
                }
            }
            for n in [0usize, 1, 2, 7, 254, 255, 256, 1000] {
                assert_eq!(pow(a, n), rse::exp(a, n), "{a}^{n}");
            }
        }
        for a in 1..=255u8 {
            assert_eq!(mul(a, inv(a).unwrap()), 1);
        }
        assert_eq!(inv(0), None);
        // 2 generates the multiplicative group: 255 distinct powers.
        let mut seen = [false; 256];
        for &e in &EXP[..255] {
            assert!(!seen[e as usize]);
            seen[e as usize] = true;
        }
    }

    #[test]
    fn mul_add4_is_four_mul_adds() {
        let src: [u8; 5] = [0, 1, 0x53, 0xCA, 0xFF];
        let c = [0u8, 1, 2, 0xE7];
        let mut four = [[0x33u8; 5]; 4];
        let mut one = four;
        let [a, b, cc, d] = &mut four;
        mul_add4(c, &src, [a, b, cc, d]);
        for r in 0..4 {
            mul_add(c[r], &src, &mut one[r]);
        }
        assert_eq!(four, one);
    }

    #[test]
    fn mul_add_is_elementwise_multiply_accumulate() {
        let src: [u8; 7] = [0, 1, 2, 0x53, 0xCA, 0xFF, 0x80];
        for c in [0u8, 1, 2, 0x1D, 0xFF] {
            let mut dst = [0x11u8; 7];
            mul_add(c, &src, &mut dst);
            for i in 0..7 {
                assert_eq!(dst[i], 0x11 ^ mul(c, src[i]));
            }
        }
    }
}
