//! GHASH (NIST SP 800-38D §6.4) for RI5CY: constant time, and split over cores.
//!
//! | item | what |
//! |---|---|
//! | [`field`] | GF(2^128) multiply from 32-bit integer multiplies with "holes" and Karatsuba (no tables) |
//! | [`Ghash`] | sequential GHASH under a hash key `H` (what RustCrypto's `ghash::GHash` computes) |
//! | [`PartMac`] | one core's GHASH of its contiguous part of the ciphertext, fed in pieces of any length |
//! | [`Gcm`] | the combination: AAD, the parts (each multiplied by the power of `H` that its position in the message asks for), the length block and the tag mask `E_K(J0)` |
//!
//! # Parallel GHASH
//!
//! GHASH of blocks `X_0 … X_{m-1}` is `Σ X_i · H^(m-i)`. A core that absorbs blocks `s..e` by
//! Horner's rule from zero holds `Y = Σ_{s≤i<e} X_i · H^(e-i)`; multiplied by `H^(m-e)` (`m - e`
//! = the blocks after its part, the length block included) it is exactly its share of the sum.
//! The shares of the AAD, of every core's part and of the length block are XORed together and
//! with `E_K(J0)`: the tag is GCM's, bit for bit. The exponent depends only on lengths (public),
//! so the square-and-multiply in [`field::mul_pow`] branches on public data only; it costs about
//! `2·log2(m)` multiplies per core, against one multiply per block of the part.
//!
//! Parts must start at 16-byte multiples of the ciphertext (the cluster engine's parts do: they
//! start on 64-byte keystream blocks and GCM's payload starts at keystream offset 16); only the
//! last part may end inside a block, which is zero-padded as GCM requires.
pub mod field;
pub mod gcm;

use field::{Elem, Multiplier, Prepared};

/// Sequential GHASH under one hash key (the same function as RustCrypto `ghash::GHash`), with
/// the multiply kernel `M` ([`field::Wide`] by default).
#[derive(Clone)]
pub struct Ghash<M: Multiplier = Prepared> {
    h: M,
    y: Elem,
}

impl<M: Multiplier> Drop for Ghash<M> {
    fn drop(&mut self) {
        zeroize::Zeroize::zeroize(&mut self.y);
    }
}

impl Ghash {
    /// GHASH under `h` (`E_K(0^128)`), state zero, with the default kernel.
    pub fn new(h: &[u8; 16]) -> Self {
        Self::with_kernel(h)
    }
}

impl<M: Multiplier> Ghash<M> {
    /// GHASH under `h` with the multiply kernel `M`.
    pub fn with_kernel(h: &[u8; 16]) -> Self {
        Ghash {
            h: M::new(&field::load(h)),
            y: [0; 4],
        }
    }

    /// Absorbs the whole blocks of `data` (`data.len() / 16` of them); returns how many bytes
    /// were absorbed.
    #[inline]
    pub fn update_blocks(&mut self, data: &[u8]) -> usize {
        let mut chunks = data.chunks_exact(16);
        self.y = blocks(&self.h, self.y, &mut chunks);
        data.len() - chunks.remainder().len()
    }

    /// Absorbs `data`, its last partial block padded with zeros.
    pub fn update_padded(&mut self, data: &[u8]) {
        let n = self.update_blocks(data);
        if n < data.len() {
            let mut b = [0u8; 16];
            b[..data.len() - n].copy_from_slice(&data[n..]);
            self.update_blocks(&b);
            zeroize::Zeroize::zeroize(&mut b);
        }
    }

    /// The state (the hash so far).
    pub fn state(&self) -> [u8; 16] {
        field::store(&self.y)
    }

    /// The state as a field element.
    pub fn elem(&self) -> Elem {
        self.y
    }
}

/// Horner's rule over whole blocks: `y = (y ⊕ X) · H` per block.
#[inline(always)]
fn blocks<M: Multiplier>(
    h: &M,
    mut y: Elem,
    chunks: &mut core::slice::ChunksExact<'_, u8>,
) -> Elem {
    for b in chunks {
        let x = field::load(b.try_into().unwrap_or(&[0; 16]));
        y = h.mul(&[y[0] ^ x[0], y[1] ^ x[1], y[2] ^ x[2], y[3] ^ x[3]]);
    }
    y
}

/// GCM's `J0` for a 96-bit nonce: `nonce ‖ 00000001`.
pub fn j0(nonce: &[u8; 12]) -> [u8; 16] {
    let mut b = [0u8; 16];
    b[..12].copy_from_slice(nonce);
    b[15] = 1;
    b
}

/// GCM's length block: `be64(8·aad) ‖ be64(8·ct)`.
pub fn length_block(aad_len: u64, ct_len: u64) -> [u8; 16] {
    let mut b = [0u8; 16];
    b[..8].copy_from_slice(&aad_len.wrapping_mul(8).to_be_bytes());
    b[8..].copy_from_slice(&ct_len.wrapping_mul(8).to_be_bytes());
    b
}

/// Sequential GCM tag: `GHASH_H(aad ‖ pad ‖ ct ‖ pad ‖ lengths) ⊕ mask`.
pub fn gcm_tag(h: &[u8; 16], mask: &[u8; 16], aad: &[u8], ct: &[u8]) -> [u8; 16] {
    let mut g = Ghash::new(h);
    g.update_padded(aad);
    g.update_padded(ct);
    g.update_blocks(&length_block(aad.len() as u64, ct.len() as u64));
    xor16(&g.state(), mask)
}

fn xor16(a: &[u8; 16], b: &[u8; 16]) -> [u8; 16] {
    let mut t = [0u8; 16];
    for i in 0..16 {
        t[i] = a[i] ^ b[i];
    }
    t
}

/// Why a part could not be combined.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PartError {
    /// A part that is not the message's last one ends inside a block, or parts overlap or run
    /// past the ciphertext.
    Layout,
}

/// One core's GHASH of its contiguous part of the ciphertext, fed in pieces of any length (the
/// engine's chunks), in order. Whole blocks go straight to the multiply; a piece that ends
/// inside a block leaves its bytes pending for the next piece.
#[derive(Clone)]
pub struct PartMac {
    g: Ghash,
    pending: [u8; 16],
    npending: usize,
    bytes: u64,
}

impl Drop for PartMac {
    fn drop(&mut self) {
        zeroize::Zeroize::zeroize(&mut self.pending);
    }
}

impl PartMac {
    /// A part under `h`, empty.
    pub fn new(h: &[u8; 16]) -> Self {
        PartMac {
            g: Ghash::new(h),
            pending: [0; 16],
            npending: 0,
            bytes: 0,
        }
    }

    /// A part under an already prepared key (no per-part key preparation).
    pub fn from_ghash(g: Ghash) -> Self {
        PartMac {
            g,
            pending: [0; 16],
            npending: 0,
            bytes: 0,
        }
    }

    /// Absorbs the next piece of the part's ciphertext.
    #[inline]
    pub fn absorb(&mut self, mut data: &[u8]) {
        self.bytes += data.len() as u64;
        if self.npending != 0 {
            let take = (16 - self.npending).min(data.len());
            self.pending[self.npending..self.npending + take].copy_from_slice(&data[..take]);
            self.npending += take;
            data = &data[take..];
            if self.npending < 16 {
                return;
            }
            let b = self.pending;
            self.g.update_blocks(&b);
            self.npending = 0;
        }
        let n = self.g.update_blocks(data);
        let rest = &data[n..];
        self.pending[..rest.len()].copy_from_slice(rest);
        self.npending = rest.len();
    }

    /// Bytes absorbed so far.
    pub fn len(&self) -> u64 {
        self.bytes
    }

    /// Whether nothing was absorbed.
    pub fn is_empty(&self) -> bool {
        self.bytes == 0
    }

    /// Pads a pending partial block and returns the part's Horner sum `Σ X_i · H^(e-i)`.
    pub fn finish(mut self) -> Elem {
        if self.npending != 0 {
            let mut b = [0u8; 16];
            b[..self.npending].copy_from_slice(&self.pending[..self.npending]);
            self.g.update_blocks(&b);
            zeroize::Zeroize::zeroize(&mut b);
        }
        self.g.elem()
    }

    /// Whether the part had a ragged end (a partial last block).
    pub fn ragged(&self) -> bool {
        self.npending != 0
    }
}

/// The GCM combination of per-core parts (see the module docs).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Gcm {
    aad_len: u64,
    ct_len: u64,
}

impl Gcm {
    /// A message of `aad_len` bytes of AAD and `ct_len` bytes of ciphertext.
    pub const fn new(aad_len: u64, ct_len: u64) -> Self {
        Gcm { aad_len, ct_len }
    }

    /// Ciphertext blocks (the last one possibly partial).
    pub const fn ct_blocks(&self) -> u64 {
        self.ct_len.div_ceil(16)
    }

    /// The share of the part of the ciphertext `start..start + part.len()`: its Horner sum times
    /// `H^(blocks after it)`. Runs on the core that absorbed the part, in parallel with the
    /// others. `start` must be a multiple of 16, and the part must end on a block boundary
    /// unless it ends the ciphertext.
    pub fn part_share(&self, h: &[u8; 16], start: u64, part: PartMac) -> Result<Elem, PartError> {
        let end = start.checked_add(part.len()).ok_or(PartError::Layout)?;
        if start % 16 != 0 || end > self.ct_len || (end % 16 != 0 && end != self.ct_len) {
            return Err(PartError::Layout);
        }
        let y = part.finish();
        // Blocks after the part: the rest of the ciphertext and the length block.
        let after = self.ct_blocks() - end.div_ceil(16) + 1;
        Ok(field::mul_pow(&y, &field::load(h), after))
    }

    /// The AAD's share: `GHASH(aad ‖ pad)` times `H^(ct blocks + 1)`.
    pub fn aad_share(&self, h: &[u8; 16], aad: &[u8]) -> Elem {
        let mut g = Ghash::new(h);
        g.update_padded(aad);
        field::mul_pow(&g.elem(), &field::load(h), self.ct_blocks() + 1)
    }

    /// The tag from the XOR of every share (AAD and parts): adds the length block's share and
    /// the mask `E_K(J0)`.
    pub fn tag(&self, h: &[u8; 16], shares: Elem, mask: &[u8; 16]) -> [u8; 16] {
        let l = field::load(&length_block(self.aad_len, self.ct_len));
        let lh = field::mul(&l, &field::load(h));
        let t = [
            shares[0] ^ lh[0],
            shares[1] ^ lh[1],
            shares[2] ^ lh[2],
            shares[3] ^ lh[3],
        ];
        xor16(&field::store(&t), mask)
    }
}

/// XOR of two shares.
#[inline]
pub fn add(a: &Elem, b: &Elem) -> Elem {
    [a[0] ^ b[0], a[1] ^ b[1], a[2] ^ b[2], a[3] ^ b[3]]
}

/// GCM tag computed as `parts` cores would: the ciphertext cut into `parts` contiguous parts on
/// 16-byte boundaries, each hashed on its own and combined with [`Gcm`]. For tests and the
/// host; the cluster engine does the same with one part per core.
pub fn gcm_tag_parts(
    h: &[u8; 16],
    mask: &[u8; 16],
    aad: &[u8],
    ct: &[u8],
    parts: usize,
) -> [u8; 16] {
    let gcm = Gcm::new(aad.len() as u64, ct.len() as u64);
    let parts = parts.max(1);
    let blocks = ct.len().div_ceil(16);
    let mut acc = gcm.aad_share(h, aad);
    for p in 0..parts {
        let s = (blocks * p / parts * 16).min(ct.len());
        let e = (blocks * (p + 1) / parts * 16).min(ct.len());
        let mut m = PartMac::new(h);
        m.absorb(&ct[s..e]);
        let share = gcm
            .part_share(h, s as u64, m)
            .unwrap_or_else(|_| unreachable!("parts are cut on block boundaries"));
        acc = add(&acc, &share);
    }
    gcm.tag(h, acc, mask)
}

/// GHASH as a [`gap_rust_wrapper::mac::Polynomial`]: the MAC the cluster engine computes in the
/// AES-CTR pass (every core hashes the ciphertext of its pieces while they are in L1). The
/// engine's sum over the cores is `X_C = Σ C_j · H^(N-j)` over the `N` zero-padded ciphertext
/// blocks; [`gcm::GcmMac`] adds the AAD, the length block and the mask.
#[derive(Clone)]
pub struct GhashPoly<M: Multiplier = Prepared> {
    h: Elem,
    hp: M,
}

impl<M: Multiplier> GhashPoly<M> {
    /// The polynomial under `h` (`E_K(0^128)`).
    pub fn new(h: &[u8; 16]) -> Self {
        let h = field::load(h);
        GhashPoly { hp: M::new(&h), h }
    }
}

impl<M: Multiplier> Drop for GhashPoly<M> {
    fn drop(&mut self) {
        zeroize::Zeroize::zeroize(&mut self.h);
    }
}

impl<M: Multiplier + Send + Sync> gap_rust_wrapper::mac::Polynomial for GhashPoly<M> {
    type Acc = Elem;

    fn zero(&self) -> Elem {
        [0; 4]
    }

    #[inline(never)]
    #[cfg_attr(target_arch = "riscv32", unsafe(link_section = ".text.hot.3.ghash"))]
    fn blocks(&self, acc: &mut Elem, data: &[u8]) {
        let mut chunks = data.chunks_exact(16);
        *acc = blocks(&self.hp, *acc, &mut chunks);
    }

    fn block(&self, acc: &mut Elem, block: &[u8; 16], _lead: bool) {
        let x = field::load(block);
        *acc = self.hp.mul(&add(acc, &x));
    }

    fn shift(&self, acc: &mut Elem, n: u64) {
        *acc = field::mul_pow_with(acc, &self.h, &self.hp, n);
    }

    fn add(&self, a: &mut Elem, b: &Elem) {
        *a = add(a, b);
    }
}

#[cfg(test)]
mod tests;
