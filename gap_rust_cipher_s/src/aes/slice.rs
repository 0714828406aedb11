//! Bitsliced AES-128 primitives on eight 32-bit words holding two blocks.
//!
//! # Layout
//!
//! A [`State`] holds two AES blocks ("lanes" `b` = 0, 1). Word `i` ("plane `i`") holds bit `i` of
//! every byte of both blocks; inside a plane, the byte at row `r`, column `c` of lane `b` sits at
//! bit `8·r + 2·c + b`. So a row is one byte of the word, a row rotation of MixColumns is a 32-bit
//! rotation by 8, and the two lanes are neighbouring bits.
//!
//! # Fixslicing
//!
//! ShiftRows is never executed. After `d` skipped ShiftRows the stored state `X` relates to the
//! true AES state `S` by `S = SR^d(X)`; a round at drift `d` then uses the conjugated MixColumns
//! `MC_d = SR^-d ∘ MC ∘ SR^d` ([`mix_columns`]) and round keys stored as `SR^-d(K)`
//! (see `key.rs`). `MC_d` needs the operator "next row, `d` columns further", which is a plain
//! rotation for `d = 0` and two rotations and a mask merge otherwise (Adomnicai–Peyrin, "Fixslicing
//! AES-like ciphers", TCHES 2021/1).
//!
//! Every function here is straight-line code on its arguments: no branch and no memory index
//! depends on the data (see the constant-time notes in the module docs of `aes`).

/// Two blocks, bitsliced (see the module docs for the layout).
pub(crate) type State = [u32; 8];

/// How a kernel rotates a 32-bit word right by a constant. Lets the same round code compile to
/// `srli/slli/or` (rv32imc), a native rotate (hosts), or PULP `p.ror` (feature `pulp`).
pub(crate) trait Rotate {
    fn ror<const N: u32>(x: u32) -> u32;
}

/// `u32::rotate_right`: three instructions on rv32imc, one on hosts with a rotate.
#[derive(Clone, Copy, Debug)]
pub(crate) struct NativeRotate;

impl Rotate for NativeRotate {
    #[inline(always)]
    fn ror<const N: u32>(x: u32) -> u32 {
        x.rotate_right(N)
    }
}

/// Exchanges the bits of `a` selected by `mask << n` with the bits of `b` selected by `mask`
/// (bit `k + n` of `a` ↔ bit `k` of `b`).
#[inline(always)]
fn swapmove(a: &mut u32, b: &mut u32, mask: u32, n: u32) {
    let t = ((*a >> n) ^ *b) & mask;
    *b ^= t;
    *a ^= t << n;
}

/// Transposes the 8×8 bit matrix held in each byte lane of `w` (word `j`, bit `8·r + i`) ↔
/// (word `i`, bit `8·r + j`). It is its own inverse.
///
/// With `w[2·c + b]` = little-endian column `c` of block `b` this packs two blocks into the
/// bitsliced layout; applied to a state it unpacks it again.
#[inline(always)]
pub(crate) fn transpose(w: &mut State) {
    let [w0, w1, w2, w3, w4, w5, w6, w7] = w;
    swapmove(w0, w1, 0x5555_5555, 1);
    swapmove(w2, w3, 0x5555_5555, 1);
    swapmove(w4, w5, 0x5555_5555, 1);
    swapmove(w6, w7, 0x5555_5555, 1);
    swapmove(w0, w2, 0x3333_3333, 2);
    swapmove(w1, w3, 0x3333_3333, 2);
    swapmove(w4, w6, 0x3333_3333, 2);
    swapmove(w5, w7, 0x3333_3333, 2);
    swapmove(w0, w4, 0x0F0F_0F0F, 4);
    swapmove(w1, w5, 0x0F0F_0F0F, 4);
    swapmove(w2, w6, 0x0F0F_0F0F, 4);
    swapmove(w3, w7, 0x0F0F_0F0F, 4);
}

/// Packs two 16-byte blocks into a state.
pub(crate) fn pack(b0: &[u8; 16], b1: &[u8; 16]) -> State {
    let mut w = [0u32; 8];
    for c in 0..4 {
        w[2 * c] = u32::from_le_bytes([b0[4 * c], b0[4 * c + 1], b0[4 * c + 2], b0[4 * c + 3]]);
        w[2 * c + 1] = u32::from_le_bytes([b1[4 * c], b1[4 * c + 1], b1[4 * c + 2], b1[4 * c + 3]]);
    }
    transpose(&mut w);
    w
}

/// Unpacks a state into its two blocks.
pub(crate) fn unpack(s: &State) -> ([u8; 16], [u8; 16]) {
    let mut w = *s;
    transpose(&mut w);
    let (mut b0, mut b1) = ([0u8; 16], [0u8; 16]);
    for c in 0..4 {
        b0[4 * c..4 * c + 4].copy_from_slice(&w[2 * c].to_le_bytes());
        b1[4 * c..4 * c + 4].copy_from_slice(&w[2 * c + 1].to_le_bytes());
    }
    (b0, b1)
}

/// SubBytes without its four output NOTs: every byte `x` becomes `S(x) ^ 0x63`.
///
/// The 113-gate circuit of Boyar and Peralta (`SLP_AES_113`: 32 AND, 81 XOR); the XNORs of the
/// original are replaced by XORs and the constant `0x63` is folded into the round keys (it passes
/// unchanged through MixColumns, whose rows sum to 1). In BP's numbering `U0`/`S0` is the most
/// significant bit, i.e. plane 7.
#[inline(always)]
pub(crate) fn sub_bytes(s: &mut State) {
    let u7 = s[0];
    let u6 = s[1];
    let u5 = s[2];
    let u4 = s[3];
    let u3 = s[4];
    let u2 = s[5];
    let u1 = s[6];
    let u0 = s[7];

    // Top linear layer (and the first products as soon as their inputs exist).
    let y14 = u3 ^ u5;
    let y13 = u0 ^ u6;
    let y12 = y13 ^ y14;
    let t1 = u4 ^ y12;
    let y15 = t1 ^ u5;
    let t2 = y12 & y15;
    let y6 = y15 ^ u7;
    let y20 = t1 ^ u1;
    let y9 = u0 ^ u3;
    let y11 = y20 ^ y9;
    let t12 = y9 & y11;
    let y7 = u7 ^ y11;
    let y8 = u0 ^ u5;
    let t0 = u1 ^ u2;
    let y10 = y15 ^ t0;
    let y17 = y10 ^ y11;
    let t13 = y14 & y17;
    let t14 = t13 ^ t12;
    let y19 = y10 ^ y8;
    let t15 = y8 & y10;
    let t16 = t15 ^ t12;
    let y16 = t0 ^ y11;
    let y21 = y13 ^ y16;
    let t7 = y13 & y16;
    let y18 = u0 ^ y16;
    let y1 = t0 ^ u7;
    let y4 = y1 ^ u3;
    let t5 = y4 & u7;
    let t6 = t5 ^ t2;
    let t18 = t6 ^ t16;
    let t22 = t18 ^ y19;
    let y2 = y1 ^ u0;
    let t10 = y2 & y7;
    let t11 = t10 ^ t7;
    let t20 = t11 ^ t16;
    let t24 = t20 ^ y18;
    let y5 = y1 ^ u6;
    let t8 = y5 & y1;
    let t9 = t8 ^ t7;
    let t19 = t9 ^ t14;
    let t23 = t19 ^ y21;
    let y3 = y5 ^ y8;
    let t3 = y3 & y6;
    let t4 = t3 ^ t2;
    let t17 = t4 ^ y20;
    let t21 = t17 ^ t14;

    // Inversion in GF(2^4)^2.
    let t26 = t21 & t23;
    let t27 = t24 ^ t26;
    let t31 = t22 ^ t26;
    let t25 = t21 ^ t22;
    let t28 = t25 & t27;
    let t29 = t28 ^ t22;
    let z14 = t29 & y2;
    let z5 = t29 & y7;
    let t30 = t23 ^ t24;
    let t32 = t31 & t30;
    let t33 = t32 ^ t24;
    let t35 = t27 ^ t33;
    let t36 = t24 & t35;
    let t38 = t27 ^ t36;
    let t39 = t29 & t38;
    let t40 = t25 ^ t39;
    let t43 = t29 ^ t40;

    // Output products and bottom linear layer.
    let z3 = t43 & y16;
    let tc12 = z3 ^ z5;
    let z12 = t43 & y13;
    let z13 = t40 & y5;
    let z4 = t40 & y1;
    let tc6 = z3 ^ z4;
    let t34 = t23 ^ t33;
    let t37 = t36 ^ t34;
    let t41 = t40 ^ t37;
    let z8 = t41 & y10;
    let z17 = t41 & y8;
    let t44 = t33 ^ t37;
    let z0 = t44 & y15;
    let z9 = t44 & y12;
    let z10 = t37 & y3;
    let z1 = t37 & y6;
    let tc5 = z1 ^ z0;
    let tc11 = tc6 ^ tc5;
    let z11 = t33 & y4;
    let t42 = t29 ^ t33;
    let t45 = t42 ^ t41;
    let z7 = t45 & y17;
    let tc8 = z7 ^ tc6;
    let z16 = t45 & y14;
    let z6 = t42 & y11;
    let tc16 = z6 ^ tc8;
    let z15 = t42 & y9;
    let tc20 = z15 ^ tc16;
    let tc1 = z15 ^ z16;
    let tc2 = z10 ^ tc1;
    let tc21 = tc2 ^ z11;
    let tc3 = z9 ^ tc2;
    let s0 = tc3 ^ tc16;
    let s3 = tc3 ^ tc11;
    let s1 = s3 ^ tc16;
    let tc13 = z13 ^ tc1;
    let z2 = t33 & u7;
    let tc4 = z0 ^ z2;
    let tc7 = z12 ^ tc4;
    let tc9 = z8 ^ tc7;
    let tc10 = tc8 ^ tc9;
    let tc17 = z14 ^ tc10;
    let s5 = tc21 ^ tc17;
    let tc26 = tc17 ^ tc20;
    let s2 = tc26 ^ z17;
    let tc14 = tc4 ^ tc12;
    let tc18 = tc13 ^ tc14;
    let s6 = tc10 ^ tc18;
    let s7 = z12 ^ tc18;
    let s4 = tc14 ^ s3;

    *s = [s7, s6, s5, s4, s3, s2, s1, s0];
}

/// [`sub_bytes`] as one out-of-line copy, for the once-per-run and once-per-key code (run
/// context, key schedule): on GAP8 that code runs between kernel calls and every byte of it
/// competes with the kernel for the cluster's 4 KiB instruction cache.
#[inline(never)]
pub(crate) fn sub_bytes_once(s: &mut State) {
    sub_bytes(s)
}

/// "Next row, `K` columns further" (`(R_K a)(r, c) = a(r + 1, c + K)`) on one plane.
#[inline(always)]
fn rot_row<R: Rotate, const K: u32>(x: u32) -> u32 {
    match K {
        0 => R::ror::<8>(x),
        1 => (R::ror::<10>(x) & 0x3F3F_3F3F) | (R::ror::<2>(x) & 0xC0C0_C0C0),
        2 => (R::ror::<12>(x) & 0x0F0F_0F0F) | (R::ror::<4>(x) & 0xF0F0_F0F0),
        _ => (R::ror::<14>(x) & 0x0303_0303) | (R::ror::<6>(x) & 0xFCFC_FCFC),
    }
}

/// `R_K²`: two rows down, `2·K` columns further.
#[inline(always)]
fn rot_row2<R: Rotate, const K: u32>(x: u32) -> u32 {
    if K % 2 == 0 {
        R::ror::<16>(x)
    } else {
        (R::ror::<20>(x) & 0x0F0F_0F0F) | (R::ror::<12>(x) & 0xF0F0_F0F0)
    }
}

/// MixColumns conjugated by ShiftRows^K (`MC_K = SR^-K ∘ MC ∘ SR^K`):
/// `out = 2·a ^ 3·R a ^ R² a ^ R³ a`, computed as `b = R a`, `c = a ^ b`,
/// `out = b ^ xtime(c) ^ R² c`.
#[inline(always)]
pub(crate) fn mix_columns<R: Rotate, const K: u32>(s: &mut State) {
    let b: [u32; 8] = core::array::from_fn(|i| rot_row::<R, K>(s[i]));
    let c: [u32; 8] = core::array::from_fn(|i| s[i] ^ b[i]);
    let r2 = |x| rot_row2::<R, K>(x);
    s[0] = b[0] ^ c[7] ^ r2(c[0]);
    s[1] = b[1] ^ c[0] ^ c[7] ^ r2(c[1]);
    s[2] = b[2] ^ c[1] ^ r2(c[2]);
    s[3] = b[3] ^ c[2] ^ c[7] ^ r2(c[3]);
    s[4] = b[4] ^ c[3] ^ c[7] ^ r2(c[4]);
    s[5] = b[5] ^ c[4] ^ r2(c[5]);
    s[6] = b[6] ^ c[5] ^ r2(c[6]);
    s[7] = b[7] ^ c[6] ^ r2(c[7]);
}

/// ShiftRows on a state at drift 0 (`out(r, c) = in(r, c + r)`): byte `r` of every plane
/// rotated right by `2·r` bits. The PULP kernel does it with two packed-SIMD shifts and an OR
/// per plane (`pv.srl.b` by bytes `0, 2, 4, 6`, `pv.sll.b` by `0, 6, 4, 2`).
#[inline(always)]
pub(crate) fn shift_rows(s: &mut State) {
    for x in s.iter_mut() {
        let mut y = *x & 0xff;
        for r in 1..4u32 {
            let b = (*x >> (8 * r)) & 0xff;
            y |= (((b >> (2 * r)) | (b << (8 - 2 * r))) & 0xff) << (8 * r);
        }
        *x = y;
    }
}

/// AddRoundKey.
#[inline(always)]
pub(crate) fn add_round_key(s: &mut State, rk: &State) {
    for (x, k) in s.iter_mut().zip(rk) {
        *x ^= *k;
    }
}

/// `xtime` (multiplication by 2 in GF(2^8)) on bitsliced planes.
#[inline(always)]
pub(crate) fn xtime(y: &State) -> State {
    [
        y[7],
        y[0] ^ y[7],
        y[1],
        y[2] ^ y[7],
        y[3] ^ y[7],
        y[4],
        y[5],
        y[6],
    ]
}

/// Applies `SR^k` to a block in byte form (`out(r, c) = in(r, c + k·r)`, byte `4·c + r`).
pub(crate) fn shift_rows_bytes(b: &[u8; 16], k: usize) -> [u8; 16] {
    core::array::from_fn(|i| {
        let (c, r) = (i / 4, i % 4);
        b[4 * ((c + k * r) % 4) + r]
    })
}
