//! AES-128-GCM (NIST SP 800-38D, 96-bit nonce) on the cluster in one pass: every core encrypts its
//! part of the payload with AES-128-CTR from `inc32(J0)` chunk by chunk and hashes each chunk's
//! ciphertext into its own GHASH lane while the chunk is in L1 (`gap_rust_wrapper::mac`). The
//! whole tag is made inside the cluster job ([`GcmMac`]):
//!
//! ```text
//! prepare (core 0, before the fork):  H = E_K(0^128), mask = E_K(J0), X_A = GHASH_H(aad ‖ pad)
//! lanes (every core, in parallel):    Σ C_j · H^(N-j) over its blocks; the lane holding byte 0
//!                                     starts from X_A, so X_A · H^N is part of its finish
//! conclude (core 0, after the fork):  tag = ((X_A · H^N ⊕ X_C ⊕ L) · H) ⊕ mask
//! ```
//!
//! with `L = be64(8·|aad|) ‖ be64(8·|ct|)`; the tag is exactly GCM's (checked against RustCrypto
//! `aes-gcm` for every core count, buffer size and length in the tests).
use super::field::{self, Elem, Multiplier, Prepared};
use super::{GhashPoly, length_block};
use crate::aead::Pass;
use crate::engine::Aes128CtrBlocks;
use gap_rust_sdk::Cluster;
use gap_rust_wrapper::{Engine, Error, Horner, MacFactory, MacInput, MacLane, Polynomial};
use zeroize::Zeroize;

/// The GCM MAC of one engine call (see the module docs). The call returns the tag.
pub struct GcmMac<'a> {
    key: &'a [u8; 16],
    nonce: &'a [u8; 12],
    aad: &'a [u8],
    input: MacInput,
}

impl<'a> GcmMac<'a> {
    /// Sealing (`MacInput::Output`) or opening (`MacInput::Input`) under `key`, `nonce`, `aad`.
    pub fn new(key: &'a [u8; 16], nonce: &'a [u8; 12], aad: &'a [u8], input: MacInput) -> Self {
        GcmMac {
            key,
            nonce,
            aad,
            input,
        }
    }
}

/// What every lane of a [`GcmMac`] call reads: `H` (prepared), the mask and `X_A`.
pub struct GcmShared {
    poly: GhashPoly<Prepared>,
    mask: [u8; 16],
    aad: Elem,
}

/// A core's GHASH lane of [`GcmMac`].
pub struct GcmLane {
    h: Horner<GhashPoly<Prepared>>,
    aad: Elem,
}

impl Drop for GcmShared {
    fn drop(&mut self) {
        self.mask.zeroize();
        self.aad.zeroize();
    }
}

impl Drop for GcmLane {
    fn drop(&mut self) {
        self.aad.zeroize();
    }
}

impl MacLane for GcmLane {
    /// On GAP8 in the hot text next to the AES kernel's worker.
    #[inline(never)]
    #[cfg_attr(
        target_arch = "riscv32",
        unsafe(link_section = ".text.hot.2.aes.1.absorb")
    )]
    fn absorb(&mut self, at: usize, data: &[u8]) {
        if at == 0 {
            self.h.seed(self.aad);
        }
        self.h.absorb_at(at, data)
    }
}

impl MacFactory for GcmMac<'_> {
    type Shared = GcmShared;
    type Lane = GcmLane;
    type Partial = Elem;
    type Output = [u8; 16];

    fn input(&self) -> MacInput {
        self.input
    }

    fn prepare(&self, _len: usize, slot: &mut Option<GcmShared>) {
        let (mut h, mask) = crate::aes::encrypt_blocks(self.key, &[0; 16], &super::j0(self.nonce));
        let poly = GhashPoly::<Prepared>::new(&h);
        h.zeroize();
        let mut aad = [0u32; 4];
        let mut blocks = self.aad.chunks_exact(16);
        for b in &mut blocks {
            let mut x = [0u8; 16];
            x.copy_from_slice(b);
            poly.block(&mut aad, &x, true);
        }
        if !blocks.remainder().is_empty() {
            let mut x = [0u8; 16];
            x[..blocks.remainder().len()].copy_from_slice(blocks.remainder());
            poly.block(&mut aad, &x, true);
        }
        *slot = Some(GcmShared { poly, mask, aad });
    }

    fn lane_in(&self, sh: &GcmShared, _len: usize, slot: &mut Option<GcmLane>) {
        *slot = Some(GcmLane {
            h: Horner::new(sh.poly.clone()),
            aad: sh.aad,
        });
    }

    fn finish(&self, _: &GcmShared, lane: &mut GcmLane, len: usize) -> Elem {
        lane.h.finish(len)
    }

    fn zero(&self) -> Elem {
        [0; 4]
    }

    fn combine(&self, a: Elem, b: Elem) -> Elem {
        super::add(&a, &b)
    }

    fn conclude(&self, sh: &GcmShared, sum: Elem, len: usize) -> [u8; 16] {
        // An empty payload has no lane that held byte 0: X_A · H^0.
        let x = if len == 0 { sh.aad } else { sum };
        let l = field::load(&length_block(self.aad.len() as u64, len as u64));
        let s = field::store(&sh.poly.hp.mul(&super::add(&x, &l)));
        let mut t = [0u8; 16];
        for i in 0..16 {
            t[i] = s[i] ^ sh.mask[i];
        }
        t
    }
}

/// Encrypts `data` in place with AES-128-GCM on the engine's cores and returns the tag.
pub fn seal<C: Cluster>(
    eng: &mut Engine<'_, C>,
    pass: Pass,
    key: &[u8; 16],
    nonce: &[u8; 12],
    aad: &[u8],
    data: &mut [u8],
) -> Result<[u8; 16], Error> {
    let j0 = super::j0(nonce);
    let f = Aes128CtrBlocks::new(key, &j0);
    let mac = GcmMac::new(key, nonce, aad, MacInput::Output);
    match pass {
        Pass::Dma => eng.apply_mac(&f, 16, data, &mac),
        Pass::Direct => eng.apply_direct_mac(&f, 16, data, &mac),
    }
}
