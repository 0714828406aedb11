//! ChaCha20-Poly1305 (RFC 8439 §2.8) on the cluster in one pass: every core encrypts its part of
//! the payload chunk by chunk and absorbs each chunk's ciphertext into its own Poly1305 lane while
//! the chunk is still in L1 (`gap_rust_wrapper::mac`); the lanes' partial polynomials, each
//! already multiplied by the power of r of the blocks after it, add up to the polynomial of the
//! ciphertext. The associated data, the padding and the length block are folded in too, all
//! inside the cluster job ([`ChaChaPolyMac`]):
//!
//! ```text
//! h = ((A(r) * r^N + C(r)) + L) * r          A(r): AAD blocks by Horner, C(r) = sum_i lane_i
//! tag = (h mod 2^130 - 5) + s mod 2^128      N = ceil(len / 16), L = le64(aad len) || le64(len)
//! ```
//!
//! The tag is exactly RFC 8439's (checked against RustCrypto `chacha20poly1305` for every core
//! count, buffer size and length in the tests).
use crate::engine::ChaCha20Blocks;
use crate::poly1305::{Fe, Poly1305Key};
use cipher::{KeyIvInit, StreamCipher};
use gap_rust_sdk::Cluster;
use gap_rust_wrapper::{
    CipherFactory, Engine, Error, Horner, Keystream, MacFactory, MacInput, MacLane, Polynomial,
};
use zeroize::Zeroize;

/// The Poly1305 one-time key of `(key, nonce)`: the first 32 bytes of ChaCha20 block 0.
pub fn chacha20poly1305_otk(key: &[u8; 32], nonce: &[u8; 12]) -> Poly1305Key {
    let mut otk = [0u8; 32];
    let mut c = crate::ChaCha20::new(key.into(), nonce.into());
    c.apply_keystream(&mut otk);
    let k = Poly1305Key::new(&otk);
    otk.zeroize();
    k
}

/// The same through the engine's own ChaCha20 worker (on GAP8: the kernel and its per-piece code
/// in the hot text, already in the instruction cache when a call starts in a stream of calls).
fn otk_with_worker(key: &[u8; 32], nonce: &[u8; 12]) -> Poly1305Key {
    let mut block = Words::<16>([0; 16]);
    let f = ChaCha20Blocks::new(key, nonce);
    let mut w = None;
    let ok = f.worker_in(&(), &mut w).is_ok()
        && w.as_mut()
            .is_some_and(|w| w.apply_at(0, block.bytes_mut()).is_ok());
    let k = ok.then(|| {
        let otk: &[u8; 32] = block.bytes_mut()[..32].try_into().unwrap_or(&[0; 32]);
        Poly1305Key::new(otk)
    });
    block.0.zeroize();
    // The worker cannot fail on block 0 of a valid key and nonce (lengths are types here).
    k.unwrap_or_else(|| chacha20poly1305_otk(key, nonce))
}

/// `N` words, seen as bytes (4-byte aligned, so Poly1305's block loop reads them in place).
#[repr(C, align(4))]
struct Words<const N: usize>([u32; N]);

impl<const N: usize> Words<N> {
    fn bytes_mut(&mut self) -> &mut [u8] {
        // SAFETY: `[u32; N]` is `4 * N` initialised bytes with no padding, and every byte pattern
        // is a valid `u32`; the borrow is `self`'s.
        unsafe { core::slice::from_raw_parts_mut(self.0.as_mut_ptr().cast::<u8>(), 4 * N) }
    }
}

/// The Horner value of the associated data, zero-padded (the polynomial's first blocks): whole
/// blocks through the block loop (a short AAD, such as a 36-byte frame header, copied into
/// zero-padded aligned blocks first).
fn aad_poly(key: &Poly1305Key, aad: &[u8]) -> Fe {
    let mut h = Fe::ZERO;
    if aad.len() <= 64 {
        let mut b = Words::<16>([0; 16]);
        b.bytes_mut()[..aad.len()].copy_from_slice(aad);
        key.blocks(&mut h, &b.bytes_mut()[..aad.len().div_ceil(16) * 16]);
        b.0.zeroize();
    } else {
        key.update_zero_padded(&mut h, aad);
    }
    h
}

/// The tag from `h`, the polynomial of the associated data and the ciphertext (as the engine's
/// lanes add it up, limbs below 2^30): the length block, then `+ s`.
pub fn chacha20poly1305_tag(key: &Poly1305Key, h: &Fe, aad_len: usize, len: usize) -> [u8; 16] {
    // Carried first: the block loop takes limbs of 26 bits (and a little).
    let mut h = h.freeze();
    let mut lens = Words::<4>([0; 4]);
    let l = lens.bytes_mut();
    l[..8].copy_from_slice(&(aad_len as u64).to_le_bytes());
    l[8..].copy_from_slice(&(len as u64).to_le_bytes());
    key.blocks(&mut h, lens.bytes_mut());
    let t = key.tag(&h);
    h.zeroize();
    t
}

/// The ChaCha20-Poly1305 MAC of one engine call, all of it inside the cluster job: the one-time
/// key and the associated data's polynomial on cluster core 0 before the fork
/// ([`MacFactory::prepare`]: no DMA transfer runs yet, so its code's instruction-cache misses are
/// short on GAP8); each core's lane absorbs its ciphertext chunks, and the lane that holds payload
/// byte 0 starts from the associated data's polynomial ([`Horner::seed`]), so that its
/// multiplication by r^N is part of that lane's own (parallel) finish; the length block and `+ s`
/// on core 0 after the fork ([`MacFactory::conclude`]). The call returns the tag.
pub struct ChaChaPolyMac<'a> {
    key: &'a [u8; 32],
    nonce: &'a [u8; 12],
    aad: &'a [u8],
    input: MacInput,
}

impl<'a> ChaChaPolyMac<'a> {
    /// Sealing (`MacInput::Output`) or opening (`MacInput::Input`) under `key`, `nonce`, `aad`.
    pub fn new(key: &'a [u8; 32], nonce: &'a [u8; 12], aad: &'a [u8], input: MacInput) -> Self {
        ChaChaPolyMac {
            key,
            nonce,
            aad,
            input,
        }
    }
}

/// What every lane of a [`ChaChaPolyMac`] call reads: the one-time key and the associated
/// data's polynomial.
pub struct AeadShared {
    key: Poly1305Key,
    aad: Fe,
}

/// A core's Poly1305 lane of [`ChaChaPolyMac`].
pub struct AeadLane {
    h: Horner<Poly1305Key>,
    aad: Fe,
}

impl Drop for AeadShared {
    fn drop(&mut self) {
        self.aad.zeroize();
    }
}

impl Drop for AeadLane {
    fn drop(&mut self) {
        self.aad.zeroize();
    }
}

impl MacLane for AeadLane {
    /// On GAP8 in the hot text with the ChaCha20 kernel and the Poly1305 block loop.
    #[inline(never)]
    #[cfg_attr(
        target_arch = "riscv32",
        unsafe(link_section = ".text.hot.1.chacha.1.absorb")
    )]
    fn absorb(&mut self, at: usize, data: &[u8]) {
        if at == 0 {
            self.h.seed(self.aad);
        }
        self.h.absorb_at(at, data)
    }
}

impl MacFactory for ChaChaPolyMac<'_> {
    type Shared = AeadShared;
    type Lane = AeadLane;
    type Partial = Fe;
    type Output = [u8; 16];

    fn input(&self) -> MacInput {
        self.input
    }

    fn prepare(&self, _len: usize, slot: &mut Option<AeadShared>) {
        let key = otk_with_worker(self.key, self.nonce);
        let aad = aad_poly(&key, self.aad);
        *slot = Some(AeadShared { key, aad });
    }

    fn lane_in(&self, sh: &AeadShared, _len: usize, slot: &mut Option<AeadLane>) {
        *slot = Some(AeadLane {
            h: Horner::new(sh.key.clone()),
            aad: sh.aad,
        });
    }

    fn finish(&self, _: &AeadShared, lane: &mut AeadLane, len: usize) -> Fe {
        lane.h.finish(len)
    }

    fn zero(&self) -> Fe {
        Fe::ZERO
    }

    /// Limb-wise (each lane's limbs are below 2^27, so the sum of 8 stays below 2^30; the tag
    /// carries it once, [`chacha20poly1305_tag`]).
    fn combine(&self, a: Fe, b: Fe) -> Fe {
        a.add(&b)
    }

    fn conclude(&self, sh: &AeadShared, sum: Fe, len: usize) -> [u8; 16] {
        // An empty payload has no lane that held byte 0: the AAD's polynomial alone.
        let h = if len == 0 { sh.aad } else { sum };
        chacha20poly1305_tag(&sh.key, &h, self.aad.len(), len)
    }
}

/// Where the payload is for [`seal`] / [`open`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Pass {
    /// In L2, through the engine's DMA (per-core pipelines by default).
    Dma,
    /// Where it is, without DMA (a payload in L1, or cores reading L2 directly).
    Direct,
}

/// Encrypts `data` in place with ChaCha20-Poly1305 on the engine's cores and returns the tag.
pub fn seal<C: Cluster>(
    eng: &mut Engine<'_, C>,
    pass: Pass,
    key: &[u8; 32],
    nonce: &[u8; 12],
    aad: &[u8],
    data: &mut [u8],
) -> Result<[u8; 16], Error> {
    run(eng, pass, key, nonce, aad, data, MacInput::Output)
}

/// Checks `tag` and decrypts `data` in place (one pass: each chunk's ciphertext is absorbed
/// before it is decrypted). On a wrong tag `data` is encrypted again (left as it was) and
/// `Ok(false)` is returned.
pub fn open<C: Cluster>(
    eng: &mut Engine<'_, C>,
    pass: Pass,
    key: &[u8; 32],
    nonce: &[u8; 12],
    aad: &[u8],
    data: &mut [u8],
    tag: &[u8; 16],
) -> Result<bool, Error> {
    let mut want = run(eng, pass, key, nonce, aad, data, MacInput::Input)?;
    // Constant time comparison.
    let diff = want.iter().zip(tag).fold(0u8, |d, (a, b)| d | (a ^ b));
    want.zeroize();
    if diff != 0 {
        let f = ChaCha20Blocks::new(key, nonce);
        match pass {
            Pass::Dma => eng.apply(&f, 64, data)?,
            Pass::Direct => eng.apply_direct(&f, 64, data)?,
        }
        return Ok(false);
    }
    Ok(true)
}

fn run<C: Cluster>(
    eng: &mut Engine<'_, C>,
    pass: Pass,
    key: &[u8; 32],
    nonce: &[u8; 12],
    aad: &[u8],
    data: &mut [u8],
    input: MacInput,
) -> Result<[u8; 16], Error> {
    let f = ChaCha20Blocks::new(key, nonce);
    let mac = ChaChaPolyMac::new(key, nonce, aad, input);
    match pass {
        Pass::Dma => eng.apply_mac(&f, 64, data, &mac),
        Pass::Direct => eng.apply_direct_mac(&f, 64, data, &mac),
    }
}

#[cfg(test)]
mod tests {
    extern crate std;
    use super::*;
    use chacha20poly1305::aead::{AeadInOut, KeyInit};
    use gap_rust_sdk::Buf;
    use gap_rust_sdk::host::HostCluster;
    use gap_rust_wrapper::{Config, Rounds};
    use proptest::prelude::*;
    use std::vec::Vec;

    fn hex(s: &str) -> Vec<u8> {
        (0..s.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
            .collect()
    }

    fn reference(key: &[u8; 32], nonce: &[u8; 12], aad: &[u8], data: &mut [u8]) -> [u8; 16] {
        let r = chacha20poly1305::ChaCha20Poly1305::new(key.into());
        r.encrypt_inout_detached(nonce.into(), aad, data.into())
            .unwrap()
            .into()
    }

    /// RFC 8439 §2.8.2 on 1..=8 cores.
    #[test]
    fn rfc8439_2_8_2() {
        let key: [u8; 32] = hex("808182838485868788898a8b8c8d8e8f909192939495969798999a9b9c9d9e9f")
            .try_into()
            .unwrap();
        let nonce: [u8; 12] = hex("070000004041424344454647").try_into().unwrap();
        let aad = hex("50515253c0c1c2c3c4c5c6c7");
        let pt = b"Ladies and Gentlemen of the class of '99: If I could offer you only one tip for the future, sunscreen would be it.";
        let cl = HostCluster::new();
        for cores in 1..=8 {
            let mut eng = Engine::new(&cl, Config::new(cores, 1024)).unwrap();
            let mut d = pt.to_vec();
            let tag = seal(&mut eng, Pass::Dma, &key, &nonce, &aad, &mut d).unwrap();
            assert_eq!(&d[..16], &hex("d31a8d34648e60db7b86afbc53ef7ec2")[..]);
            assert_eq!(tag.to_vec(), hex("1ae10b594f09e26a7e902ecbd0600691"));
            assert!(open(&mut eng, Pass::Dma, &key, &nonce, &aad, &mut d, &tag).unwrap());
            assert_eq!(&d[..], &pt[..]);
        }
    }

    /// A skipped DMA wait in the fused pass (a chunk encrypted and MACed before it landed, or
    /// written back before the write landed) must make the frame fail to open with RustCrypto.
    #[test]
    fn fault_injection_skipped_wait_fails_the_tag() {
        use gap_rust_sdk::host::Fault;
        let key = [7u8; 32];
        let nonce = [9u8; 12];
        let aad = [1u8; 36];
        let pt: Vec<u8> = (0..40_000u32).map(|i| (i * 7 + 3) as u8).collect();
        let r = chacha20poly1305::ChaCha20Poly1305::new(&key.into());
        for every in [1, 2, 3, 5] {
            for cores in [1, 8] {
                let cl = HostCluster::new();
                let mut eng = Engine::new(&cl, Config::new(cores, 4096)).unwrap();
                cl.inject(Fault::SkipWait(every));
                let mut d = pt.clone();
                let tag = seal(&mut eng, Pass::Dma, &key, &nonce, &aad, &mut d).unwrap();
                let opened = r.decrypt_inout_detached(
                    (&nonce).into(),
                    &aad,
                    d.as_mut_slice().into(),
                    (&tag).into(),
                );
                assert!(
                    opened.is_err(),
                    "skipping every {every}th DMA wait went unnoticed ({cores} cores)"
                );
                // The same engine without the fault is right again.
                cl.inject(Fault::None);
                let mut d = pt.clone();
                let tag = seal(&mut eng, Pass::Dma, &key, &nonce, &aad, &mut d).unwrap();
                r.decrypt_inout_detached(
                    (&nonce).into(),
                    &aad,
                    d.as_mut_slice().into(),
                    (&tag).into(),
                )
                .unwrap();
                assert_eq!(d, pt);
            }
        }
    }

    fn len() -> impl Strategy<Value = usize> {
        prop_oneof![
            4 => 0usize..300,
            3 => 0usize..20_000,
            1 => 0usize..=262_144,
            1 => Just(79_056usize),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

        /// Same ciphertext and tag as RustCrypto over lengths 0..=256 KiB, 1..=8 cores, any
        /// buffer size and round policy, with AAD, in L2 (DMA and direct) and in L1; opening
        /// gives the plaintext back, and a flipped tag bit is refused with the data unchanged.
        #[test]
        fn seal_matches_rustcrypto(len in len(), cores in 1usize..=8,
                                   buffer in prop_oneof![1usize..128, 128usize..10_000],
                                   rounds in prop_oneof![3 => Just(Rounds::Auto), 1 => Just(Rounds::Fixed), 1 => Just(Rounds::Ramp)],
                                   aad in proptest::collection::vec(any::<u8>(), 0..64),
                                   key in any::<[u8; 32]>(), nonce in any::<[u8; 12]>(),
                                   where_ in 0u8..3, seed in any::<u8>()) {
            let cl = HostCluster::new();
            let pt: Vec<u8> = (0..len).map(|i| (i as u8).wrapping_mul(31) ^ seed).collect();
            let mut want = pt.clone();
            let wtag = reference(&key, &nonce, &aad, &mut want);
            // Big payloads with tiny buffers take too many rounds for a unit test.
            let buffer = if len > 20_000 { buffer.max(2048) } else { buffer };
            let Ok(mut eng) = Engine::new(&cl, Config::new(cores, buffer).with_rounds(rounds)) else {
                return Ok(());
            };
            let (got, tag, back) = match where_ {
                0 | 1 => {
                    let pass = if where_ == 0 { Pass::Dma } else { Pass::Direct };
                    let mut d = pt.clone();
                    let tag = seal(&mut eng, pass, &key, &nonce, &aad, &mut d).unwrap();
                    let got = d.clone();
                    let mut bad = tag;
                    bad[(seed % 16) as usize] ^= 1 << (seed % 8);
                    prop_assert!(!open(&mut eng, pass, &key, &nonce, &aad, &mut d, &bad).unwrap());
                    prop_assert!(d == got, "a refused open changed the data");
                    prop_assert!(open(&mut eng, pass, &key, &nonce, &aad, &mut d, &tag).unwrap());
                    (got, tag, d)
                }
                _ => {
                    let Ok(mut l1) = Buf::zeroed(cl.l1(), len.min(16_384), 8) else { return Ok(()) };
                    let pt = &pt[..l1.len()];
                    let mut w2 = pt.to_vec();
                    let wtag2 = reference(&key, &nonce, &aad, &mut w2);
                    l1.copy_from_slice(pt);
                    let tag = seal(&mut eng, Pass::Direct, &key, &nonce, &aad, &mut l1).unwrap();
                    prop_assert!(l1[..] == w2[..]);
                    prop_assert_eq!(tag, wtag2);
                    return Ok(());
                }
            };
            prop_assert!(got == want);
            prop_assert_eq!(tag, wtag);
            prop_assert!(back == pt);
        }
    }
}
