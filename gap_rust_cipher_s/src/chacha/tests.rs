//! Host tests: RFC 8439 vectors, cross-checks against RustCrypto `chacha20` (proptest), and the
//! end of the keystream. They run for every backend that runs on the host: [`Portable`], and
//! [`Model`], a Rust transcription of the assembly kernels' dataflow (same [`Ctx`] with the
//! precomputed column round, same block sequence, fed through the same [`run_aligned`] bounce
//! logic), so the per-message precomputation and the core's bookkeeping are checked here too. The
//! assembly itself is cross-checked on QEMU (`rv32_qemu/src/bin/chacha_check.rs`).
extern crate std;

use super::ctx::{Ctx, PRE_WORDS, run_aligned};

/// The quarter-round on words `a, b, c, d` of a whole state (through the set-up's one-column
/// quarter-round).
fn quarter_round(x: &mut [u32; 16], a: usize, b: usize, c: usize, d: usize) {
    let mut q = [x[a], x[b], x[c], x[d]];
    super::ctx::quarter_round(&mut q);
    [x[a], x[b], x[c], x[d]] = q;
}
use super::*;
use cipher::{KeyIvInit, StreamCipher, StreamCipherSeek};
use proptest::prelude::*;
use std::vec;
use std::vec::Vec;

/// The assembly kernels' dataflow in Rust (test only).
#[derive(Clone)]
pub(super) struct Model(Ctx);

impl sealed::Sealed for Model {}

impl Backend for Model {
    fn new(key: &[u8; 32], nonce: &[u8; 12]) -> Self {
        Model(Ctx::new(key, nonce))
    }

    fn apply_blocks(&mut self, counter: u32, data: InOutBuf<'_, '_, ChaChaBlock>) {
        let ctx = &self.0;
        run_aligned(counter, data, |ctr, input, output, n| {
            assert_eq!(input as usize % 4, 0, "kernel input not word-aligned");
            assert_eq!(output as usize % 4, 0, "kernel output not word-aligned");
            assert!(n >= 1);
            for b in 0..n {
                let c = ctr.wrapping_add(b as u32);
                let mut x = [0u32; 16];
                for i in [0, 4, 8] {
                    x[i] = ctx.init[i];
                }
                x[12] = c;
                for (j, &i) in PRE_WORDS.iter().enumerate() {
                    x[i] = ctx.pre[j];
                }
                quarter_round(&mut x, 0, 4, 8, 12);
                diagonal(&mut x);
                for _ in 0..9 {
                    for k in 0..4 {
                        quarter_round(&mut x, k, 4 + k, 8 + k, 12 + k);
                    }
                    diagonal(&mut x);
                }
                let mut block = [0u8; 64];
                // SAFETY: the kernel contract: `input` valid for `64 * n` bytes.
                unsafe { core::ptr::copy(input.add(64 * b), block.as_mut_ptr(), 64) };
                for i in 0..16 {
                    let orig = if i == 12 { c } else { ctx.init[i] };
                    let ks = x[i].wrapping_add(orig).to_le_bytes();
                    for k in 0..4 {
                        block[4 * i + k] ^= ks[k];
                    }
                }
                // SAFETY: the kernel contract: `output` valid for `64 * n` bytes.
                unsafe { core::ptr::copy(block.as_ptr(), output.add(64 * b), 64) };
            }
        });
    }
}

fn diagonal(x: &mut [u32; 16]) {
    quarter_round(x, 0, 5, 10, 15);
    quarter_round(x, 1, 6, 11, 12);
    quarter_round(x, 2, 7, 8, 13);
    quarter_round(x, 3, 4, 9, 14);
}

type ModelCipher = StreamCipherCoreWrapper<ChaCha20Core<Model>>;

fn hex(s: &str) -> Vec<u8> {
    let s: Vec<u8> = s.bytes().filter(|b| b.is_ascii_hexdigit()).collect();
    s.chunks(2)
        .map(|p| u8::from_str_radix(std::str::from_utf8(p).unwrap(), 16).unwrap())
        .collect()
}

fn key_0_to_31() -> [u8; 32] {
    core::array::from_fn(|i| i as u8)
}

/// RFC 8439 §2.3.2: the block function, key 00..1f, nonce 000000090000004a00000000, counter 1.
fn rfc_2_3_2<C: KeyIvInit + StreamCipher + StreamCipherSeek>() {
    let nonce = hex("000000090000004a00000000");
    let mut c = C::new_from_slices(&key_0_to_31(), &nonce).unwrap();
    c.seek(64u64);
    let mut block = [0u8; 64];
    c.apply_keystream(&mut block);
    let want = hex(
        "10f1e7e4d13b5915500fdd1fa32071c4c7d1f4c733c068030422aa9ac3d46c4e
         d2826446079faa0914c2d705d98b02a2b5129cd1de164eb9cbd083e8a2503c4e",
    );
    assert_eq!(&block[..], &want[..]);
}

/// RFC 8439 §2.4.2: encryption starting at block counter 1 ("Ladies and Gentlemen ...").
fn rfc_2_4_2<C: KeyIvInit + StreamCipher + StreamCipherSeek>() {
    let nonce = hex("000000000000004a00000000");
    let plain = b"Ladies and Gentlemen of the class of '99: If I could offer you only one tip for the future, sunscreen would be it.";
    let want = hex(
        "6e2e359a2568f98041ba0728dd0d6981 e97e7aec1d4360c20a27afccfd9fae0b
         f91b65c5524733ab8f593dabcd62b357 1639d624e65152ab8f530c359f0861d8
         07ca0dbf500d6a6156a38e088a22b65e 52bc514d16ccf806818ce91ab7793736
         5af90bbf74a35be6b40b8eedf2785e42 874d",
    );
    // In place, whole message at once.
    let mut c = C::new_from_slices(&key_0_to_31(), &nonce).unwrap();
    c.seek(64u64);
    let mut buf = plain.to_vec();
    c.apply_keystream(&mut buf);
    assert_eq!(buf, want);
    // In to out, unaligned, in uneven pieces.
    let mut c = C::new_from_slices(&key_0_to_31(), &nonce).unwrap();
    c.seek(64u64);
    let mut src = vec![0u8; plain.len() + 3];
    src[3..].copy_from_slice(plain);
    let mut dst = vec![0u8; plain.len() + 1];
    let (mut at, mut step) = (0, 1);
    while at < plain.len() {
        let end = (at + step).min(plain.len());
        c.apply_keystream_b2b(&src[3 + at..3 + end], &mut dst[1 + at..1 + end]);
        at = end;
        step = step * 3 + 1;
    }
    assert_eq!(&dst[1..], &want[..]);
}

#[test]
fn rfc8439_vectors_portable() {
    rfc_2_3_2::<ChaCha20Portable>();
    rfc_2_4_2::<ChaCha20Portable>();
}

#[test]
fn rfc8439_vectors_model() {
    rfc_2_3_2::<ModelCipher>();
    rfc_2_4_2::<ModelCipher>();
}

#[test]
fn rfc8439_vectors_reference_agrees() {
    // The same vectors through RustCrypto itself: guards the transcription of the constants.
    rfc_2_3_2::<chacha20::ChaCha20>();
    rfc_2_4_2::<chacha20::ChaCha20>();
}

#[test]
fn selected_backend_on_host_is_portable() {
    assert_eq!(SELECTED_BACKEND, "portable");
    let _: ChaCha20 = ChaCha20Portable::new(&[0u8; 32].into(), &[0u8; 12].into());
}

/// One random case: the keystream at `offset..offset + len` XORed over `data`, applied in the
/// pieces `cuts` (split points), in place at `misalign` bytes into the buffer, equals RustCrypto's.
fn check_against_reference<C: KeyIvInit + StreamCipher + StreamCipherSeek>(
    key: [u8; 32],
    nonce: [u8; 12],
    offset: u64,
    data: &[u8],
    misalign: usize,
    cuts: &[usize],
    b2b: bool,
) -> Result<(), TestCaseError> {
    let mut want = data.to_vec();
    let mut r = chacha20::ChaCha20::new(&key.into(), &nonce.into());
    r.seek(offset);
    r.apply_keystream(&mut want);

    let mut c = C::new_from_slices(&key, &nonce).unwrap();
    c.try_seek(offset).unwrap();
    prop_assert_eq!(c.current_pos::<u64>(), offset);
    let mut buf = vec![0u8; data.len() + misalign];
    let mut cuts: Vec<usize> = cuts.iter().map(|&x| x % (data.len() + 1)).collect();
    cuts.push(0);
    cuts.push(data.len());
    cuts.sort_unstable();
    if b2b {
        let mut src = vec![0u8; data.len() + 3];
        src[3..].copy_from_slice(data);
        for w in cuts.windows(2) {
            let (a, b) = (w[0], w[1]);
            c.try_apply_keystream_b2b(&src[3 + a..3 + b], &mut buf[misalign + a..misalign + b])
                .unwrap();
        }
    } else {
        buf[misalign..].copy_from_slice(data);
        for w in cuts.windows(2) {
            c.try_apply_keystream(&mut buf[misalign + w[0]..misalign + w[1]])
                .unwrap();
        }
    }
    prop_assert_eq!(&buf[misalign..], &want[..]);
    prop_assert_eq!(c.current_pos::<u64>(), offset + data.len() as u64);
    Ok(())
}

fn offsets() -> impl Strategy<Value = u64> {
    prop_oneof![
        0u64..10_000,
        // Anywhere in the keystream, as long as the data still fits before its end (the
        // reference stops one block early, see the boundary tests).
        0u64..(KEYSTREAM_BYTES - 64 - 8192),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 96, .. ProptestConfig::default() })]

    #[test]
    fn portable_matches_rustcrypto(
        key in any::<[u8; 32]>(), nonce in any::<[u8; 12]>(), offset in offsets(),
        data in proptest::collection::vec(any::<u8>(), 0..=4096), misalign in 0usize..4,
        cuts in proptest::collection::vec(any::<usize>(), 0..4), b2b in any::<bool>(),
    ) {
        check_against_reference::<ChaCha20Portable>(key, nonce, offset, &data, misalign, &cuts, b2b)?;
    }

    #[test]
    fn model_of_the_asm_kernels_matches_rustcrypto(
        key in any::<[u8; 32]>(), nonce in any::<[u8; 12]>(), offset in offsets(),
        data in proptest::collection::vec(any::<u8>(), 0..=4096), misalign in 0usize..4,
        cuts in proptest::collection::vec(any::<usize>(), 0..4), b2b in any::<bool>(),
    ) {
        check_against_reference::<ModelCipher>(key, nonce, offset, &data, misalign, &cuts, b2b)?;
    }

    #[test]
    fn sequential_matches_rustcrypto(
        key in any::<[u8; 32]>(), nonce in any::<[u8; 12]>(), offset in offsets(),
        data in proptest::collection::vec(any::<u8>(), 0..=4096),
    ) {
        use crate::{CipherId, KeystreamApplier, Sequential};
        let mut want = data.clone();
        let mut r = chacha20::ChaCha20::new(&key.into(), &nonce.into());
        r.seek(offset);
        r.apply_keystream(&mut want);
        let mut got = data.clone();
        Sequential.apply_keystream(CipherId::ChaCha20, &key, &nonce, offset, &mut got).unwrap();
        prop_assert_eq!(got, want);
    }
}

/// Block 0xFFFF_FFFF computed by RustCrypto's core directly (its stream wrapper cannot reach it).
fn reference_last_block(key: &[u8; 32], nonce: &[u8; 12]) -> [u8; 64] {
    use cipher::StreamCipherCore;
    let mut core = chacha20::ChaChaCore::<chacha20::R20, chacha20::variants::Ietf>::new(
        key.into(),
        nonce.into(),
    );
    core.set_block_pos(u32::MAX);
    let mut b = ChaChaBlock::default();
    core.write_keystream_block(&mut b);
    b.0
}

fn end_of_keystream<C: KeyIvInit + StreamCipher + StreamCipherSeek>() {
    let key = [7u8; 32];
    let nonce = [9u8; 12];
    let last = reference_last_block(&key, &nonce);
    let last_start = (BLOCKS - 1) * 64;

    // The last block is usable, to its last byte, at any byte offset.
    let mut c = C::new_from_slices(&key, &nonce).unwrap();
    c.try_seek(last_start + 10).unwrap();
    let mut buf = [0u8; 54];
    c.try_apply_keystream(&mut buf).unwrap();
    assert_eq!(&buf[..], &last[10..]);
    assert_eq!(c.current_pos::<u64>(), KEYSTREAM_BYTES);
    // One byte more is an error, nothing is written, and the position stays.
    let mut one = [0x55u8; 1];
    assert!(c.try_apply_keystream(&mut one).is_err());
    assert_eq!(one, [0x55]);
    assert_eq!(c.current_pos::<u64>(), KEYSTREAM_BYTES);
    // An empty apply at the end is fine.
    c.try_apply_keystream(&mut []).unwrap();

    // A request crossing the end fails as a whole (nothing written), one that ends exactly at it works.
    let mut c = C::new_from_slices(&key, &nonce).unwrap();
    c.try_seek(last_start - 64 + 3).unwrap();
    let mut big = [0u8; 126];
    assert!(c.try_apply_keystream(&mut big).is_err());
    assert_eq!(big, [0u8; 126]);
    let mut exact = [0u8; 125];
    c.try_apply_keystream(&mut exact).unwrap();
    assert_eq!(&exact[61..], &last[..]);

    // Whole blocks through the bulk path, ending on the last block.
    let mut c = C::new_from_slices(&key, &nonce).unwrap();
    c.try_seek(last_start - 3 * 64).unwrap();
    let mut four = [0u8; 256];
    c.try_apply_keystream(&mut four).unwrap();
    assert_eq!(&four[192..], &last[..]);
    assert!(c.try_apply_keystream(&mut [0u8; 1]).is_err());

    // Seeking: to the end is allowed, past it is an error (no wrap to block 0).
    let mut c = C::new_from_slices(&key, &nonce).unwrap();
    c.try_seek(KEYSTREAM_BYTES).unwrap();
    assert!(c.try_apply_keystream(&mut [0u8; 1]).is_err());
    assert!(c.try_seek(KEYSTREAM_BYTES + 1).is_err());
    assert!(c.try_seek(KEYSTREAM_BYTES + 64).is_err());
    assert!(c.try_seek(u64::MAX).is_err());
    assert!(c.try_seek(u128::MAX).is_err());
    // The failed seeks left the cipher usable where it was.
    c.try_seek(0u64).unwrap();
    let mut first = [0u8; 64];
    c.try_apply_keystream(&mut first).unwrap();
    let mut r = chacha20::ChaCha20::new(&key.into(), &nonce.into());
    let mut want = [0u8; 64];
    r.apply_keystream(&mut want);
    assert_eq!(first, want);
}

#[test]
fn end_of_keystream_portable() {
    end_of_keystream::<ChaCha20Portable>();
}

#[test]
fn end_of_keystream_model() {
    end_of_keystream::<ModelCipher>();
}

/// What RustCrypto `chacha20` 0.10 does at the end (documented in the module docs): it never
/// wraps either, but gives up one block early.
#[test]
fn rustcrypto_stops_one_block_before_the_end() {
    let mut r = chacha20::ChaCha20::new(&[7u8; 32].into(), &[9u8; 12].into());
    r.try_seek((BLOCKS - 1) * 64).unwrap();
    assert!(r.try_apply_keystream(&mut [0u8; 1]).is_err());
    assert!(r.try_seek((BLOCKS - 1) * 64 + 1).is_err());
    r.try_seek((BLOCKS - 2) * 64).unwrap();
    r.try_apply_keystream(&mut [0u8; 64]).unwrap();
}

#[test]
fn sequential_reports_counter_overflow() {
    use crate::{CipherId, KeystreamApplier, KeystreamError, Sequential};
    let (k, n) = ([1u8; 32], [2u8; 12]);
    let mut d = [0u8; 10];
    assert_eq!(
        Sequential.apply_keystream(CipherId::ChaCha20, &k, &n, KEYSTREAM_BYTES - 9, &mut d),
        Err(KeystreamError::CounterOverflow)
    );
    assert_eq!(d, [0u8; 10]);
    Sequential
        .apply_keystream(CipherId::ChaCha20, &k, &n, KEYSTREAM_BYTES - 10, &mut d)
        .unwrap();
    assert_eq!(&d[..], &reference_last_block(&k, &n)[54..]);
    assert_eq!(
        Sequential.apply_keystream(CipherId::ChaCha20, &k, &n, KEYSTREAM_BYTES + 1, &mut []),
        Err(KeystreamError::CounterOverflow)
    );
    assert_eq!(
        Sequential.apply_keystream(CipherId::ChaCha20, &k[..31], &n, 0, &mut d),
        Err(KeystreamError::KeyLength)
    );
    assert_eq!(
        Sequential.apply_keystream(CipherId::ChaCha20, &k, &n[..8], 0, &mut d),
        Err(KeystreamError::IvLength)
    );
}

#[test]
fn core_level_use_past_the_end_panics_instead_of_wrapping() {
    use cipher::{StreamCipherCore, StreamCipherSeekCore};
    let mut core = ChaCha20Core::<Model>::new(&[0u8; 32].into(), &[0u8; 12].into());
    core.set_block_pos(BlockPos::try_from(BLOCKS - 1).unwrap());
    assert_eq!(core.remaining_blocks(), Some(1));
    let mut b = ChaChaBlock::default();
    core.write_keystream_block(&mut b);
    assert_eq!(core.remaining_blocks(), Some(0));
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        core.write_keystream_block(&mut b)
    }));
    assert!(r.is_err());
}

#[test]
fn block_pos_conversions_stop_at_the_end() {
    assert_eq!(BlockPos::try_from(BLOCKS).map(BlockPos::get), Ok(BLOCKS));
    assert!(BlockPos::try_from(BLOCKS + 1).is_err());
    assert!(BlockPos::try_from(-1i32).is_err());
    assert!(BlockPos::try_from(u128::MAX).is_err());
    assert_eq!(
        u32::try_from(BlockPos::try_from(BLOCKS).unwrap()),
        Err(BlockPosRange)
    );
    assert_eq!(u64::try_from(BlockPos::try_from(5u32).unwrap()), Ok(5));
}

#[test]
fn ctx_precomputes_the_counter_free_column_quarter_rounds() {
    let key: [u8; 32] = core::array::from_fn(|i| (3 * i + 1) as u8);
    let nonce: [u8; 12] = core::array::from_fn(|i| (7 * i + 2) as u8);
    let ctx = Ctx::new(&key, &nonce);
    // The same state with two different counters: columns 1-3 after one quarter-round agree with
    // `pre`, and column 0 is the only one that differs.
    for ctr in [0u32, 0xdead_beef] {
        let mut x = ctx.init;
        x[12] = ctr;
        for k in 0..4 {
            quarter_round(&mut x, k, 4 + k, 8 + k, 12 + k);
        }
        for (j, &i) in PRE_WORDS.iter().enumerate() {
            assert_eq!(x[i], ctx.pre[j], "word {i}");
        }
    }
    assert_eq!(&ctx.init[..4], &super::ctx::SIGMA);
    assert_eq!(ctx.init[12], 0);
}

/// The per-message context reads key and nonce a word at a time when they are word-aligned and a
/// byte at a time otherwise: the same context whatever the alignment.
#[test]
fn context_does_not_depend_on_key_alignment() {
    #[repr(C, align(4))]
    struct Buf([u8; 64]);
    let mut buf = Buf([0; 64]);
    for (i, b) in buf.0.iter_mut().enumerate() {
        *b = (i * 37 + 11) as u8;
    }
    let at = |o: usize| {
        let key: &[u8; 32] = buf.0[o..o + 32].try_into().unwrap();
        let nonce: &[u8; 12] = buf.0[o + 32..o + 44].try_into().unwrap();
        let c = Ctx::new(key, nonce);
        (c.init, c.pre, c.diag)
    };
    let want = at(0);
    for o in 1..8 {
        // Same key bytes at another alignment.
        let mut moved = Buf([0; 64]);
        moved.0[o..o + 44].copy_from_slice(&buf.0[..44]);
        let key: &[u8; 32] = moved.0[o..o + 32].try_into().unwrap();
        let nonce: &[u8; 12] = moved.0[o + 32..o + 44].try_into().unwrap();
        let c = Ctx::new(key, nonce);
        assert!((c.init, c.pre, c.diag) == want, "offset {o}");
    }
}

#[test]
fn ctx_clone_copies_every_word() {
    let key: [u8; 32] = core::array::from_fn(|i| (i * 7 + 1) as u8);
    let nonce: [u8; 12] = core::array::from_fn(|i| (i * 13 + 5) as u8);
    let c = Ctx::new(&key, &nonce);
    let d = c.clone();
    assert_eq!((c.init, c.pre, c.diag), (d.init, d.pre, d.diag));
}
