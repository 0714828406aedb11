//! Known-answer tests (FIPS-197, SP 800-38A), component tests against byte-level definitions, and
//! property tests against `ctr::Ctr128BE<aes::Aes128>`.
#![allow(clippy::needless_range_loop)]

use super::slice::{self, NativeRotate, State};
use super::*;
use cipher::{KeyIvInit, StreamCipher, StreamCipherSeek};
use proptest::prelude::*;

extern crate std;
use std::vec::Vec;

fn hex(s: &str) -> Vec<u8> {
    let s: Vec<u8> = s.bytes().filter(|b| !b.is_ascii_whitespace()).collect();
    s.chunks(2)
        .map(|c| u8::from_str_radix(core::str::from_utf8(c).unwrap(), 16).unwrap())
        .collect()
}

fn arr16(v: &[u8]) -> [u8; 16] {
    v.try_into().unwrap()
}

/// GF(2^8) multiplication modulo x^8 + x^4 + x^3 + x + 1 (test oracle only).
fn gmul(mut a: u8, mut b: u8) -> u8 {
    let mut p = 0;
    while b != 0 {
        if b & 1 != 0 {
            p ^= a;
        }
        a = (a << 1) ^ if a & 0x80 != 0 { 0x1b } else { 0 };
        b >>= 1;
    }
    p
}

/// The AES S-box from its definition (inverse, then the affine map), as a test oracle.
fn sbox_ref(x: u8) -> u8 {
    let inv = (1..=255u8).find(|&y| gmul(x, y) == 1).unwrap_or(0);
    let mut s = inv;
    for k in 1..5 {
        s ^= inv.rotate_left(k);
    }
    s ^ 0x63
}

#[test]
fn sbox_table_matches_definition() {
    // 0x63 and 0x7c are FIPS-197's S(0) and S(1).
    assert_eq!(sbox_ref(0), 0x63);
    assert_eq!(sbox_ref(1), 0x7c);
    assert_eq!(sbox_ref(0x53), 0xed);
}

#[test]
fn bitsliced_sbox_on_all_bytes() {
    // 32 bytes per state; 8 states cover 0..=255.
    for chunk in 0..8u32 {
        let b0: [u8; 16] = core::array::from_fn(|i| (chunk * 32 + i as u32) as u8);
        let b1: [u8; 16] = core::array::from_fn(|i| (chunk * 32 + 16 + i as u32) as u8);
        let mut s = slice::pack(&b0, &b1);
        slice::sub_bytes(&mut s);
        let (o0, o1) = slice::unpack(&s);
        for i in 0..16 {
            assert_eq!(o0[i] ^ 0x63, sbox_ref(b0[i]), "S({:#04x})", b0[i]);
            assert_eq!(o1[i] ^ 0x63, sbox_ref(b1[i]), "S({:#04x})", b1[i]);
        }
    }
}

#[test]
fn pack_layout_and_roundtrip() {
    let b0: [u8; 16] = core::array::from_fn(|i| (i as u8).wrapping_mul(37).wrapping_add(11));
    let b1: [u8; 16] = core::array::from_fn(|i| (i as u8).wrapping_mul(91).wrapping_add(200));
    let s = slice::pack(&b0, &b1);
    for (b, blk) in [b0, b1].iter().enumerate() {
        for r in 0..4 {
            for c in 0..4 {
                for i in 0..8 {
                    let want = (blk[4 * c + r] >> i) & 1;
                    let got = (s[i] >> (8 * r + 2 * c + b)) & 1;
                    assert_eq!(u32::from(want), got);
                }
            }
        }
    }
    assert_eq!(slice::unpack(&s), (b0, b1));
}

/// MixColumns on one column, byte form.
fn mix_column_bytes(a: [u8; 4]) -> [u8; 4] {
    core::array::from_fn(|r| {
        gmul(a[r], 2) ^ gmul(a[(r + 1) % 4], 3) ^ a[(r + 2) % 4] ^ a[(r + 3) % 4]
    })
}

fn mix_columns_bytes(b: &[u8; 16]) -> [u8; 16] {
    let mut o = [0u8; 16];
    for c in 0..4 {
        let col = mix_column_bytes([b[4 * c], b[4 * c + 1], b[4 * c + 2], b[4 * c + 3]]);
        o[4 * c..4 * c + 4].copy_from_slice(&col);
    }
    o
}

fn mc_k(s: &mut State, k: u32) {
    match k {
        0 => slice::mix_columns::<NativeRotate, 0>(s),
        1 => slice::mix_columns::<NativeRotate, 1>(s),
        2 => slice::mix_columns::<NativeRotate, 2>(s),
        _ => slice::mix_columns::<NativeRotate, 3>(s),
    }
}

#[test]
fn fixsliced_mix_columns_are_conjugated_mix_columns() {
    let b0: [u8; 16] = core::array::from_fn(|i| (i as u8).wrapping_mul(29).wrapping_add(3));
    let b1: [u8; 16] = core::array::from_fn(|i| (i as u8).wrapping_mul(113).wrapping_add(77));
    for k in 0..4usize {
        let mut s = slice::pack(&b0, &b1);
        mc_k(&mut s, k as u32);
        // MC_k = SR^-k ∘ MC ∘ SR^k.
        let want = |b: &[u8; 16]| {
            slice::shift_rows_bytes(
                &mix_columns_bytes(&slice::shift_rows_bytes(b, k)),
                (4 - k) % 4,
            )
        };
        assert_eq!(slice::unpack(&s), (want(&b0), want(&b1)), "MC_{k}");
    }
}

#[test]
fn key_expansion_fips197_a1() {
    let key = arr16(&hex("2b7e151628aed2a6abf7158809cf4f3c"));
    let rk = key::expand_bytes(&key);
    assert_eq!(rk[0], key);
    assert_eq!(rk[1].to_vec(), hex("a0fafe1788542cb123a339392a6c7605"));
    assert_eq!(rk[10].to_vec(), hex("d014f9a8c9ee2589e13f0cc8b6630ca6"));
}

#[test]
fn block_fips197_c1() {
    let key = arr16(&hex("000102030405060708090a0b0c0d0e0f"));
    let pt = arr16(&hex("00112233445566778899aabbccddeeff"));
    let ct = hex("69c4e0d86a7b0430d8cdb78070b4c55a");
    let (c0, c1) = encrypt_blocks(&key, &pt, &[0; 16]);
    assert_eq!(c0.to_vec(), ct);
    // Lane 1 is an independent block: compare with the reference block cipher.
    use ::aes::cipher::{BlockCipherEncrypt, KeyInit};
    let mut z = ::aes::Block::default();
    ::aes::Aes128::new(&key.into()).encrypt_block(&mut z);
    assert_eq!(c1, <[u8; 16]>::from(z));
}

const F5_KEY: &str = "2b7e151628aed2a6abf7158809cf4f3c";
const F5_CTR: &str = "f0f1f2f3f4f5f6f7f8f9fafbfcfdfeff";
const F5_PT: &str = "6bc1bee22e409f96e93d7e117393172a ae2d8a571e03ac9c9eb76fac45af8e51
                     30c81c46a35ce411e5fbc1191a0a52ef f69f2445df4f9b17ad2b417be66c3710";
const F5_CT: &str = "874d6191b620e3261bef6864990db6ce 9806f66b7970fdff8617187bb9fffdff
                     5ae4df3edbd5d35e5b4f09020db03eab 1e031dda2fbe03d1792170a0f3009cee";

fn sp800_38a<C: KeyIvInit + StreamCipher>(input: &str, output: &str) {
    let mut buf = hex(input);
    let mut c = C::new_from_slices(&hex(F5_KEY), &hex(F5_CTR)).unwrap();
    c.apply_keystream(&mut buf);
    assert_eq!(buf, hex(output));
}

#[test]
fn sp800_38a_f51_encrypt() {
    sp800_38a::<Aes128Ctr>(F5_PT, F5_CT);
    sp800_38a::<Aes128CtrWith<Portable>>(F5_PT, F5_CT);
    sp800_38a::<Aes128CtrWith<PortableShiftRows>>(F5_PT, F5_CT);
    sp800_38a::<Reference>(F5_PT, F5_CT);
}

#[test]
fn sp800_38a_f52_decrypt() {
    sp800_38a::<Aes128Ctr>(F5_CT, F5_PT);
    sp800_38a::<Aes128CtrWith<Portable>>(F5_CT, F5_PT);
    sp800_38a::<Aes128CtrWith<PortableShiftRows>>(F5_CT, F5_PT);
}

/// ShiftRows on planes is the byte-level ShiftRows (`shift_rows_bytes(·, 1)`) of both lanes.
#[test]
fn plane_shift_rows_is_shift_rows() {
    let mut rng = 0x1234_5678_9abc_def0u64;
    for _ in 0..64 {
        let mut b = [[0u8; 16]; 2];
        for x in b.iter_mut().flatten() {
            rng = rng
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            *x = (rng >> 56) as u8;
        }
        let mut s = slice::pack(&b[0], &b[1]);
        slice::shift_rows(&mut s);
        let (o0, o1) = slice::unpack(&s);
        assert_eq!(o0, slice::shift_rows_bytes(&b[0], 1));
        assert_eq!(o1, slice::shift_rows_bytes(&b[1], 1));
    }
}

/// Both round-key schedules agree on rounds 0..=2 (the counter caches are shared) and store the
/// plain round key for drift 0.
#[test]
fn schedules_share_rounds_0_to_2() {
    let key = arr16(&hex("000102030405060708090a0b0c0d0e0f"));
    let a = RoundKeys::new(&key);
    let b = RoundKeys::with_schedule(&key, Schedule::ShiftRows);
    assert_eq!(a.rk[..3], b.rk[..3]);
    assert_eq!(a.rk[6], b.rk[6]);
    assert_eq!(a.rk[10], b.rk[10]);
    assert_ne!(a.rk[3], b.rk[3]);
}

#[test]
fn round_two_cache_matches_direct_rounds() {
    let key = arr16(&hex("000102030405060708090a0b0c0d0e0f"));
    let keys = RoundKeys::new(&key);
    for ctr in [
        0u128,
        0x1234_5678_9abc_def0_0fed_cba9_8765_4300,
        u128::MAX - 255,
    ] {
        let run = ctr::RunCtx::new(&keys, ctr);
        for g in (0..=255u8).step_by(8) {
            let z = ctr::group_z(&run, g);
            for p in 0..4u32 {
                let lo = u128::from(g) + 2 * u128::from(p);
                let mk = |c: u128| slice::shift_rows_bytes(&c.to_be_bytes(), 2);
                let mut s = slice::pack(&mk((ctr & !0xff) | lo), &mk((ctr & !0xff) | (lo + 1)));
                slice::add_round_key(&mut s, &keys.rk[0]);
                slice::sub_bytes(&mut s);
                slice::mix_columns::<NativeRotate, 3>(&mut s);
                slice::add_round_key(&mut s, &keys.rk[1]);
                slice::sub_bytes(&mut s);
                slice::mix_columns::<NativeRotate, 0>(&mut s);
                slice::add_round_key(&mut s, &keys.rk[2]);
                let got = ctr::pair_state::<NativeRotate>(&run, &z, p);
                assert_eq!(got, s, "ctr {ctr:#x} group {g} pair {p}");
            }
        }
    }
}

/// Applies `data` in the pieces `cuts` describes, starting at byte `seek`, with the cipher `C`.
fn run<C: KeyIvInit + StreamCipher + StreamCipherSeek>(
    key: &[u8; 16],
    iv: &[u8; 16],
    seek: u64,
    data: &mut [u8],
    cuts: &[usize],
) -> u64 {
    let mut c = C::new_from_slices(key, iv).unwrap();
    c.seek(seek);
    let mut rest = data;
    for &cut in cuts {
        let n = cut.min(rest.len());
        let (a, b) = rest.split_at_mut(n);
        c.apply_keystream(a);
        rest = b;
    }
    c.apply_keystream(rest);
    c.current_pos::<u64>()
}

fn iv_strategy() -> impl Strategy<Value = [u8; 16]> {
    prop_oneof![
        any::<[u8; 16]>(),
        // Near the 2^128 wrap of the counter.
        (0u128..600).prop_map(|d| u128::MAX.wrapping_sub(d).to_be_bytes()),
        // Near byte carries: low bytes ..FF FF, ..FF FE, ..FF E0 etc. with random high part.
        (any::<u128>(), 0u128..600).prop_map(|(h, d)| ((h & !0xFFFF_FFFF)
            | (0xFFFF_FFFFu128.wrapping_sub(d) & 0xFFFF_FFFF))
            .to_be_bytes()),
        (any::<u128>(), 0u128..300)
            .prop_map(|(h, d)| ((h & !0xFFFF) | (0xFFFFu128 - d)).to_be_bytes()),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 300, ..ProptestConfig::default() })]

    #[test]
    fn matches_reference(
        key in any::<[u8; 16]>(),
        iv in iv_strategy(),
        seek in prop_oneof![0u64..70, 0u64..5000],
        len in 0usize..=4096,
        misalign in 0usize..4,
        cuts in proptest::collection::vec(0usize..700, 0..4),
    ) {
        let mut input = std::vec![0u8; len + misalign];
        for (i, b) in input.iter_mut().enumerate() {
            *b = (i as u8).wrapping_mul(151).wrapping_add(len as u8);
        }
        let mut want = input.clone();
        let mut got = input.clone();
        let pa = run::<Reference>(&key, &iv, seek, &mut want[misalign..], &cuts);
        let pb = run::<Aes128CtrWith<Portable>>(&key, &iv, seek, &mut got[misalign..], &cuts);
        prop_assert_eq!(&got, &want);
        prop_assert_eq!(pa, pb);
        let mut got_sr = input.clone();
        let pc = run::<Aes128CtrWith<PortableShiftRows>>(
            &key, &iv, seek, &mut got_sr[misalign..], &cuts,
        );
        prop_assert_eq!(&got_sr, &want);
        prop_assert_eq!(pa, pc);
        prop_assert_eq!(pb, seek + len as u64);
    }

    #[test]
    fn seek_and_position_match_reference(
        key in any::<[u8; 16]>(),
        iv in iv_strategy(),
        seek in 0u64..100_000,
        len in 0usize..300,
    ) {
        let mut a = Reference::new(&key.into(), &iv.into());
        let mut b = Aes128Ctr::new(&key.into(), &iv.into());
        prop_assert_eq!(a.try_seek(seek).is_ok(), b.try_seek(seek).is_ok());
        let mut x = std::vec![0u8; len];
        let mut y = std::vec![0u8; len];
        a.apply_keystream(&mut x);
        b.apply_keystream(&mut y);
        prop_assert_eq!(&x, &y);
        prop_assert_eq!(a.current_pos::<u64>(), b.current_pos::<u64>());
    }

    #[test]
    fn buffer_to_buffer_matches_in_place(
        key in any::<[u8; 16]>(),
        iv in any::<[u8; 16]>(),
        len in 0usize..1200,
    ) {
        let input: Vec<u8> = (0..len).map(|i| i as u8).collect();
        let mut out = std::vec![0u8; len];
        let mut c = Aes128Ctr::new(&key.into(), &iv.into());
        c.apply_keystream_b2b(&input, &mut out);
        let mut inplace = input.clone();
        Reference::new(&key.into(), &iv.into()).apply_keystream(&mut inplace);
        prop_assert_eq!(out, inplace);
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 200, ..ProptestConfig::default() })]

    /// One cipher applied at positions that jump forward and back, inside a run of 256 blocks and
    /// across runs (the run context and its group cache are kept between calls), with every
    /// kernel, against a fresh reference at each position.
    #[test]
    fn run_cache_across_calls_and_seeks(
        key in any::<[u8; 16]>(),
        iv in iv_strategy(),
        steps in proptest::collection::vec((0u64..20_000, 0usize..600), 1..8),
    ) {
        fn check<C: KeyIvInit + StreamCipher + StreamCipherSeek>(
            key: &[u8; 16],
            iv: &[u8; 16],
            steps: &[(u64, usize)],
        ) -> Result<(), TestCaseError> {
            let mut c = C::new_from_slices(key, iv).unwrap();
            for &(pos, len) in steps {
                let mut got = std::vec![0x5au8; len];
                let mut want = got.clone();
                c.seek(pos);
                c.apply_keystream(&mut got);
                let mut r = Reference::new(&(*key).into(), &(*iv).into());
                r.seek(pos);
                r.apply_keystream(&mut want);
                prop_assert_eq!(got, want, "position {}", pos);
            }
            Ok(())
        }
        check::<Aes128CtrWith<Portable>>(&key, &iv, &steps)?;
        check::<Aes128CtrWith<PortableShiftRows>>(&key, &iv, &steps)?;
        check::<Aes128Ctr>(&key, &iv, &steps)?;
    }

    /// A message applied as consecutive pieces of whole blocks (odd and even block counts, so
    /// pieces end and start inside pairs and the kept half pair is used), then once more from a
    /// position inside it, against one reference pass.
    #[test]
    fn pieces_of_blocks_match_one_pass(
        key in any::<[u8; 16]>(),
        iv in iv_strategy(),
        start in 0u64..600,
        pieces in proptest::collection::vec(0usize..40, 1..12),
        back in 0usize..40,
    ) {
        let total: usize = pieces.iter().sum::<usize>() * 16;
        let input: Vec<u8> = (0..total).map(|i| (i * 7) as u8).collect();
        let mut want = input.clone();
        let mut r = Reference::new(&key.into(), &iv.into());
        r.seek(16 * start);
        r.apply_keystream(&mut want);
        fn pass<C: KeyIvInit + StreamCipher + StreamCipherSeek>(
            key: &[u8; 16], iv: &[u8; 16], start: u64, pieces: &[usize], back: usize,
            input: &[u8], want: &[u8],
        ) -> Result<(), TestCaseError> {
            let mut c = C::new_from_slices(key, iv).unwrap();
            c.seek(16 * start);
            let mut got = input.to_vec();
            let mut at = 0;
            for &n in pieces {
                c.apply_keystream(&mut got[at..at + 16 * n]);
                at += 16 * n;
            }
            prop_assert_eq!(&got, &want);
            let b = (16 * back).min(input.len());
            let mut again = input[b..].to_vec();
            c.seek(16 * start + b as u64);
            c.apply_keystream(&mut again);
            prop_assert_eq!(&again[..], &want[b..]);
            Ok(())
        }
        pass::<Aes128CtrWith<Portable>>(&key, &iv, start, &pieces, back, &input, &want)?;
        pass::<Aes128CtrWith<PortableShiftRows>>(&key, &iv, start, &pieces, back, &input, &want)?;
        pass::<Aes128Ctr>(&key, &iv, start, &pieces, back, &input, &want)?;
    }
}

#[test]
fn far_positions_match_the_reference() {
    let key = [7u8; 16];
    for iv in [[0u8; 16], [0xff; 16]] {
        for far in [
            u128::MAX,
            u128::MAX - 15,
            u128::MAX - 16,
            u128::MAX - 100,
            1u128 << 100,
        ] {
            let mut a = Reference::new(&key.into(), &iv.into());
            let mut b = Aes128Ctr::new(&key.into(), &iv.into());
            assert_eq!(a.try_seek(far).is_ok(), b.try_seek(far).is_ok());
            let mut x = [0u8; 70];
            let mut y = [0u8; 70];
            assert_eq!(
                a.try_apply_keystream(&mut x).is_ok(),
                b.try_apply_keystream(&mut y).is_ok()
            );
            assert_eq!(x, y);
            assert_eq!(
                a.try_current_pos::<u128>().ok(),
                b.try_current_pos::<u128>().ok()
            );
        }
    }
}
