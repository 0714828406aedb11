//! The cluster engine behind [`KeystreamApplier`]: the same interface as [`Sequential`], with the
//! payload spread over the cluster cores by `gap_rust_wrapper` (triple-buffered DMA rounds, or
//! directly in place without DMA).
//!
//! ```ignore
//! let cluster = gap_rust_sdk::host::HostCluster::new();      // or PmsisCluster / BareCluster
//! let mut eng = ClusterEngine::new(&cluster, Config::new(8, 8192))?;
//! eng.apply_keystream(CipherId::ChaCha20, &key, &nonce, 64, &mut payload)?;
//! ```
//!
//! Ciphers: [`crate::ChaCha20`] and [`crate::Aes128Ctr`] (this crate's kernels, so on GAP8 with the
//! `pulp` feature the PULP kernels), through the engine's block-level fast path: each piece is one
//! "apply these whole blocks at this counter" call. AES-128-CTR through `gap_rust_wrapper::Blocks`
//! (the cipher core built once per call on cluster core 0, cloned by every core); ChaCha20 through
//! [`ChaCha20Blocks`], where every core builds its own core after the fork.
//!
//! [`Sequential`]: crate::Sequential
use crate::{AeadId, CipherId, KeystreamApplier, KeystreamError};
use cipher::KeyIvInit;
use gap_rust_sdk::Cluster;
pub use gap_rust_wrapper::Config;
use gap_rust_wrapper::{Blocks, CipherFactory, Engine, Error, Keystream};

/// The ChaCha20 core of this target's kernel ([`crate::ChaCha20`] without the byte-level wrapper).
pub type ChaCha20Core = crate::chacha::ChaCha20Core<ChaChaBackend>;
/// The AES-128-CTR core of this target's best kernel.
pub type Aes128CtrCore = crate::aes::Aes128CtrCore<crate::aes::Best>;

/// ChaCha20 for the cluster engine: the block-level fast path, where every core builds its own
/// [`ChaCha20Core`] from the key and nonce (the per-message set-up — key words, the precomputed
/// column round — runs on all cores at once after the fork, instead of on core 0 before it and a
/// 136-byte copy per core). Core 0 checks the keystream range first with the exact rules of the
/// generic path ([`gap_rust_wrapper::cipher::check_core`], on an [`Unkeyed`] core), so errors
/// are those of [`crate::ChaCha20`]. The worker's code is linked on GAP8 next to the kernel
/// (`.text.hot.1.chacha`).
///
/// [`Unkeyed`]: crate::chacha::Unkeyed
pub struct ChaCha20Blocks<'a> {
    key: &'a [u8; 32],
    nonce: &'a [u8; 12],
    bad_len: bool,
}

impl<'a> ChaCha20Blocks<'a> {
    /// Key and nonce (lengths are checked when a call starts: `Error::KeyIv`).
    pub fn new(key: &'a [u8], nonce: &'a [u8]) -> Self {
        const ZK: [u8; 32] = [0; 32];
        const ZN: [u8; 12] = [0; 12];
        match (<&[u8; 32]>::try_from(key), <&[u8; 12]>::try_from(nonce)) {
            (Ok(key), Ok(nonce)) => ChaCha20Blocks {
                key,
                nonce,
                bad_len: false,
            },
            _ => ChaCha20Blocks {
                key: &ZK,
                nonce: &ZN,
                bad_len: true,
            },
        }
    }
}

impl CipherFactory for ChaCha20Blocks<'_> {
    type Shared = ();
    type Worker = ChaCha20Worker;

    fn prepare(&self, offset: u64, len: usize, slot: &mut Option<()>) -> Result<(), Error> {
        if self.bad_len {
            return Err(Error::KeyIv);
        }
        let mut probe = crate::chacha::ChaCha20Core::<crate::chacha::Unkeyed>::new(
            &Default::default(),
            &Default::default(),
        );
        gap_rust_wrapper::cipher::check_core(&mut probe, offset, len)?;
        *slot = Some(());
        Ok(())
    }

    fn worker(&self, _: &()) -> Result<ChaCha20Worker, Error> {
        Ok(ChaCha20Worker(ChaCha20Core::new(
            self.key.into(),
            self.nonce.into(),
        )))
    }

    /// Built in place (no 136-byte move per core).
    #[inline(always)]
    fn worker_in(&self, _: &(), slot: &mut Option<ChaCha20Worker>) -> Result<(), Error> {
        let _ = slot.insert(ChaCha20Worker(ChaCha20Core::new(
            self.key.into(),
            self.nonce.into(),
        )));
        Ok(())
    }
}
/// Per-core worker of [`Aes128CtrCore`] (`.text.hot.2.aes`).
pub type Aes128CtrBlocks<'a> = Blocks<'a, Aes128CtrCore, Aes128CtrWorker>;

macro_rules! hot_worker {
    ($(#[$m:meta])* $name:ident, $core:ty, $section:literal, $align:literal) => {
        $(#[$m])*
        pub struct $name($core);

        impl From<$core> for $name {
            fn from(core: $core) -> Self {
                $name(core)
            }
        }

        impl Keystream for $name {
            const PIECE_ALIGN: usize = $align;

            #[inline(never)]
            #[cfg_attr(target_arch = "riscv32", unsafe(link_section = $section))]
            fn apply_at(&mut self, pos: u64, data: &mut [u8]) -> Result<(), Error> {
                gap_rust_wrapper::cipher::apply_blocks_at(&mut self.0, pos, data)
            }
        }
    };
}

/// A cluster core's ChaCha20 for one call (see [`ChaCha20Blocks`]).
pub struct ChaCha20Worker(ChaCha20Core);

impl From<ChaCha20Core> for ChaCha20Worker {
    fn from(core: ChaCha20Core) -> Self {
        ChaCha20Worker(core)
    }
}

impl Keystream for ChaCha20Worker {
    /// Whole blocks at a block position (every piece of the engine but a payload's unaligned
    /// first or ragged last one) go straight to the kernel; the rest takes the generic path, out
    /// of line, so that this stays small next to the kernel.
    #[inline(never)]
    #[cfg_attr(target_arch = "riscv32", unsafe(link_section = ".text.hot.1.chacha"))]
    fn apply_at(&mut self, pos: u64, data: &mut [u8]) -> Result<(), Error> {
        if pos % 64 == 0 && self.0.xor_blocks_at(pos / 64, data) {
            return Ok(());
        }
        chacha_general(&mut self.0, pos, data)
    }

    /// The engine's call for a part's ragged last piece (a payload that is not whole blocks,
    /// e.g. a 79,056-byte frame): at a block position, the piece and its partial last block go
    /// to the kernel as whole blocks in one call, over the scratch after the piece, which is then
    /// wiped (on GAP8 the generic path's cold code finished the frame's last lane ~1,000 cycles
    /// after the others). Anything else goes to [`Self::apply_at`].
    #[inline(never)]
    fn apply_in(&mut self, pos: u64, buf: &mut [u8], len: usize) -> Result<(), Error> {
        let whole = len.wrapping_add(63) & !63;
        if pos % 64 == 0 && whole >= len && whole <= buf.len() {
            let blocks = &mut buf[..whole];
            if self.0.xor_blocks_at(pos / 64, blocks) {
                if whole != len {
                    wipe_scratch(&mut blocks[len..]);
                }
                return Ok(());
            }
        }
        match buf.get_mut(..len) {
            Some(data) => self.apply_at(pos, data),
            None => Err(Error::Length),
        }
    }
}

/// Overwrites the keystream a ragged last block left in the engine's scratch (out of line: it runs
/// once per payload, on one core).
#[inline(never)]
fn wipe_scratch(b: &mut [u8]) {
    zeroize::Zeroize::zeroize(b);
}

#[inline(never)]
fn chacha_general(core: &mut ChaCha20Core, pos: u64, data: &mut [u8]) -> Result<(), Error> {
    gap_rust_wrapper::cipher::apply_blocks_at(core, pos, data)
}
hot_worker!(
    /// A cluster core's AES-128-CTR for one call (see [`Aes128CtrBlocks`]).
    Aes128CtrWorker,
    Aes128CtrCore,
    ".text.hot.2.aes",
    // Whole 8-block groups (the kernels cache rounds 1 and 2 per group of 8 counter blocks).
    128
);

#[cfg(all(target_arch = "riscv32", feature = "pulp"))]
type ChaChaBackend = crate::chacha::PulpAsm;
#[cfg(all(target_arch = "riscv32", not(feature = "pulp")))]
type ChaChaBackend = crate::chacha::Rv32Asm;
#[cfg(not(target_arch = "riscv32"))]
type ChaChaBackend = crate::chacha::Portable;

/// How the engine moves the payload.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Transfer {
    /// Payload in L2, rounds of L1 buffers filled and drained by the cluster DMA.
    Dma,
    /// No DMA: cores read and write the payload where it is (already in L1, or L2 directly).
    Direct,
    /// The faster of the two for the cipher and core count, as measured on the GAP8 model
    /// (default): DMA rounds for ChaCha20 (whose kernel, 16 cycles per byte, would wait on L2
    /// without them), and for AES-128-CTR on one core; AES-128-CTR on several cores directly, its
    /// code (kernel, per-run set-up, engine) does not fit the 4 KiB instruction cache and misses
    /// would wait behind the transfers (128 KiB on 8 cores: 8.6 against 11.5 cycles per byte).
    Auto,
}

/// A cluster engine usable wherever a [`KeystreamApplier`] is expected.
pub struct ClusterEngine<'c, C: Cluster> {
    engine: Engine<'c, C>,
    transfer: Transfer,
}

impl<'c, C: Cluster> ClusterEngine<'c, C> {
    /// Allocates the engine's L1 buffers on `cluster` ([`Transfer::Auto`]).
    pub fn new(cluster: &'c C, cfg: Config) -> Result<Self, Error> {
        Ok(ClusterEngine {
            engine: Engine::new(cluster, cfg)?,
            transfer: Transfer::Auto,
        })
    }

    /// Chooses DMA rounds or direct access for the next calls.
    pub fn set_transfer(&mut self, transfer: Transfer) {
        self.transfer = transfer;
    }

    /// The cluster the engine runs on.
    pub fn cluster(&self) -> &'c C {
        self.engine.cluster()
    }

    /// The wrapped engine (core count, configuration, other payload sources).
    pub fn engine(&mut self) -> &mut Engine<'c, C> {
        &mut self.engine
    }
}

impl<C: Cluster> ClusterEngine<'_, C> {
    /// Reads `input`, writes `input ⊕ keystream` to `output` (same length, both in L2).
    pub fn apply_keystream_b2b(
        &mut self,
        id: CipherId,
        key: &[u8],
        iv: &[u8],
        offset: u64,
        input: &[u8],
        output: &mut [u8],
    ) -> Result<(), KeystreamError> {
        if key.len() != id.key_len() {
            return Err(KeystreamError::KeyLength);
        }
        if iv.len() != id.iv_len() {
            return Err(KeystreamError::IvLength);
        }
        if input.len() != output.len() {
            return Err(KeystreamError::Engine);
        }
        let r = match id {
            CipherId::ChaCha20 => {
                self.engine
                    .apply_b2b(&ChaCha20Blocks::new(key, iv), offset, input, output)
            }
            CipherId::Aes128Ctr => {
                self.engine
                    .apply_b2b(&Aes128CtrBlocks::new(key, iv), offset, input, output)
            }
        };
        r.map_err(keystream_error)
    }
}

fn keystream_error(e: Error) -> KeystreamError {
    match e {
        Error::CounterOverflow => KeystreamError::CounterOverflow,
        Error::KeyIv => KeystreamError::KeyLength,
        _ => KeystreamError::Engine,
    }
}

impl<C: Cluster> KeystreamApplier for ClusterEngine<'_, C> {
    fn apply_keystream(
        &mut self,
        id: CipherId,
        key: &[u8],
        iv: &[u8],
        offset: u64,
        data: &mut [u8],
    ) -> Result<(), KeystreamError> {
        if key.len() != id.key_len() {
            return Err(KeystreamError::KeyLength);
        }
        if iv.len() != id.iv_len() {
            return Err(KeystreamError::IvLength);
        }
        let direct = match self.transfer {
            Transfer::Dma => false,
            Transfer::Direct => true,
            Transfer::Auto => id == CipherId::Aes128Ctr && self.engine.config().cores > 1,
        };
        let r = match (id, direct) {
            (CipherId::ChaCha20, false) => {
                self.engine
                    .apply(&ChaCha20Blocks::new(key, iv), offset, data)
            }
            (CipherId::ChaCha20, true) => {
                self.engine
                    .apply_direct(&ChaCha20Blocks::new(key, iv), offset, data)
            }
            (CipherId::Aes128Ctr, false) => {
                self.engine
                    .apply(&Aes128CtrBlocks::new(key, iv), offset, data)
            }
            (CipherId::Aes128Ctr, true) => {
                self.engine
                    .apply_direct(&Aes128CtrBlocks::new(key, iv), offset, data)
            }
        };
        r.map_err(keystream_error)
    }

    /// ChaCha20-Poly1305 in one pass on the cluster ([`crate::aead`]): each core encrypts its
    /// chunks and absorbs their ciphertext into its Poly1305 lane while they are in L1. Payload in
    /// L2 through the DMA pipelines, or where it is with [`Transfer::Direct`].
    fn seal_aead(
        &mut self,
        id: AeadId,
        key: &[u8],
        nonce: &[u8; 12],
        aad: &[u8],
        data: &mut [u8],
    ) -> Option<Result<[u8; 16], KeystreamError>> {
        match id {
            AeadId::ChaCha20Poly1305 => {
                let Ok(key) = <&[u8; 32]>::try_from(key) else {
                    return Some(Err(KeystreamError::KeyLength));
                };
                let pass = match self.transfer {
                    Transfer::Direct => crate::aead::Pass::Direct,
                    Transfer::Dma | Transfer::Auto => crate::aead::Pass::Dma,
                };
                Some(
                    crate::aead::seal(&mut self.engine, pass, key, nonce, aad, data)
                        .map_err(keystream_error),
                )
            }
            AeadId::Aes128Gcm => {
                let Ok(key) = <&[u8; 16]>::try_from(key) else {
                    return Some(Err(KeystreamError::KeyLength));
                };
                // As for AES-128-CTR: no DMA on several cores (the kernel, GHASH and the engine
                // do not fit the instruction cache; misses would wait behind the transfers).
                let pass = match self.transfer {
                    Transfer::Direct => crate::aead::Pass::Direct,
                    Transfer::Dma => crate::aead::Pass::Dma,
                    Transfer::Auto if self.engine.config().cores > 1 => crate::aead::Pass::Direct,
                    Transfer::Auto => crate::aead::Pass::Dma,
                };
                Some(
                    crate::ghash::gcm::seal(&mut self.engine, pass, key, nonce, aad, data)
                        .map_err(keystream_error),
                )
            }
        }
    }
}

#[cfg(test)]
mod tests {
    extern crate std;
    use super::*;
    use crate::Sequential;
    use gap_rust_sdk::host::HostCluster;
    use proptest::prelude::*;
    use std::vec::Vec;

    proptest! {
        #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

        /// Same bytes and same errors as the sequential kernels, for both ciphers and transfers.
        #[test]
        fn cluster_engine_equals_sequential(len in prop_oneof![0usize..200, 0usize..70_000], cores in 1usize..=8,
                                            buffer in prop_oneof![Just(64usize), Just(8192), 64usize..16384],
                                            aes in any::<bool>(), transfer in 0u8..3,
                                            offset in prop_oneof![Just(0u64), 0u64..1000, Just((64u64 << 32) - 100)],
                                            key in any::<[u8; 32]>(), iv in any::<[u8; 16]>()) {
            let id = if aes { CipherId::Aes128Ctr } else { CipherId::ChaCha20 };
            let (key, iv) = (&key[..id.key_len()], &iv[..id.iv_len()]);
            let input: Vec<u8> = (0..len).map(|i| (i * 31 + 7) as u8).collect();
            let mut expect = input.clone();
            let want = Sequential.apply_keystream(id, key, iv, offset, &mut expect);
            let cl = HostCluster::new();
            let mut eng = ClusterEngine::new(&cl, Config::new(cores, buffer)).unwrap();
            eng.set_transfer([Transfer::Auto, Transfer::Dma, Transfer::Direct][transfer as usize]);
            let mut got = input.clone();
            let r = eng.apply_keystream(id, key, iv, offset, &mut got);
            prop_assert_eq!(r, want);
            if r.is_ok() {
                prop_assert!(got == expect);
            } else {
                prop_assert!(got == input, "an error must leave the data untouched");
            }
        }
    }

    proptest! {
        /// The per-piece call with scratch: the piece gets RustCrypto's keystream, the scratch
        /// after it holds nothing but zeros up to the end of the last block used and is untouched
        /// beyond it, with or without room for a whole last block.
        #[test]
        fn chacha_apply_in_uses_scratch_and_wipes_it(block in 0u64..1000, skip in prop_oneof![Just(0usize), 0usize..64],
                                                     len in 1usize..600, room in 0usize..130,
                                                     key in any::<[u8; 32]>(), nonce in any::<[u8; 12]>()) {
            use cipher::{KeyIvInit, StreamCipher, StreamCipherSeek};
            let pos = block * 64 + skip as u64;
            let data: Vec<u8> = (0..len).map(|i| (i * 13 + 1) as u8).collect();
            let mut want = data.clone();
            let mut r = chacha20::ChaCha20::new(&key.into(), &nonce.into());
            r.seek(pos);
            r.apply_keystream(&mut want);
            let mut buf = data.clone();
            buf.resize(len + room, 0xA5);
            let mut w = ChaCha20Blocks::new(&key, &nonce).worker(&()).unwrap();
            w.apply_in(pos, &mut buf, len).unwrap();
            prop_assert_eq!(&buf[..len], &want[..]);
            let used = if skip == 0 && len.next_multiple_of(64) <= len + room {
                len.next_multiple_of(64)
            } else {
                len
            };
            prop_assert!(buf[len..used].iter().all(|&b| b == 0), "scratch not wiped");
            prop_assert!(buf[used..].iter().all(|&b| b == 0xA5), "scratch past the block touched");
            prop_assert_eq!(w.apply_in(pos, &mut buf[..len], len + 1), Err(Error::Length));
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

        /// AES-128-GCM with GHASH fused into the cluster's AES-CTR pass (the whole tag in the
        /// cluster job) against RustCrypto `aes-gcm`: lengths 0..=256 KiB (sampled), 1–8 cores,
        /// buffer sizes, every transfer, AAD (the 36-byte header or any length).
        #[test]
        fn fused_gcm_equals_aes_gcm(len in prop_oneof![0usize..300, 0usize..20_000, 0usize..=256 * 1024, Just(79_056)],
                                    cores in 1usize..=8,
                                    buffer in prop_oneof![Just(8192usize), Just(64), 16usize..16384],
                                    transfer in 0u8..3, aad_len in prop_oneof![Just(36usize), 0usize..70],
                                    key in any::<[u8; 16]>(), nonce in any::<[u8; 12]>()) {
            use aes_gcm::aead::{AeadInOut, KeyInit};
            let pt: Vec<u8> = (0..len).map(|i| (i * 131 + 5) as u8).collect();
            let aad: Vec<u8> = (0..aad_len).map(|i| (i * 7) as u8).collect();
            let cl = HostCluster::new();
            let mut eng = ClusterEngine::new(&cl, Config::new(cores, buffer)).unwrap();
            eng.set_transfer([Transfer::Auto, Transfer::Dma, Transfer::Direct][transfer as usize]);
            let mut got = pt.clone();
            let tag = eng.seal_aead(crate::AeadId::Aes128Gcm, &key, &nonce, &aad, &mut got).unwrap().unwrap();
            let mut want = pt.clone();
            let r = aes_gcm::Aes128Gcm::new(&key.into());
            let rtag = r.encrypt_inout_detached(&nonce.into(), &aad, want.as_mut_slice().into()).unwrap();
            prop_assert!(got == want, "ciphertext differs");
            prop_assert_eq!(&tag[..], &rtag[..]);
        }
    }

    /// A skipped DMA wait in the fused AES-GCM pass never goes unnoticed: what the engine
    /// outputs (ciphertext and the tag made from its GHASH) does not open to the plaintext with
    /// RustCrypto `aes-gcm` (a skipped prefetch wait encrypts and hashes stale bytes; a skipped
    /// write-back wait leaves ciphertext in L2 that the tag does not cover).
    #[test]
    fn fault_injection_skipped_wait_fails_the_gcm_tag() {
        use aes_gcm::aead::{AeadInOut, KeyInit};
        use gap_rust_sdk::host::Fault;
        let key = [0x3Cu8; 16];
        let nonce = [0x11u8; 12];
        let aad = [0x22u8; 36];
        let pt: Vec<u8> = (0..40_000).map(|i| (i * 17 + 1) as u8).collect();
        let seal = |eng: &mut ClusterEngine<'_, HostCluster>| {
            let mut ct = pt.clone();
            let aead = crate::AeadId::Aes128Gcm;
            let tag = eng
                .seal_aead(aead, &key, &nonce, &aad, &mut ct)
                .unwrap()
                .unwrap();
            (ct, tag)
        };
        let opens = |(mut ct, tag): (Vec<u8>, [u8; 16])| {
            let r = aes_gcm::Aes128Gcm::new(&key.into());
            r.decrypt_inout_detached(&nonce.into(), &aad, ct.as_mut_slice().into(), &tag.into())
                .is_ok()
                && ct == pt
        };
        for every in [1, 2, 3, 5] {
            for cores in [1, 8] {
                let cl = HostCluster::new();
                let mut eng = ClusterEngine::new(&cl, Config::new(cores, 4096)).unwrap();
                eng.set_transfer(Transfer::Dma);
                cl.inject(Fault::SkipWait(every));
                assert!(
                    !opens(seal(&mut eng)),
                    "skipping every {every}th DMA wait went unnoticed ({cores} cores)"
                );
                cl.inject(Fault::None);
                assert!(opens(seal(&mut eng)), "{cores} cores without the fault");
            }
        }
    }

    #[test]
    fn wrong_lengths_are_reported_like_sequential() {
        let cl = HostCluster::new();
        let mut eng = ClusterEngine::new(&cl, Config::new(8, 1024)).unwrap();
        let mut d = [0u8; 10];
        assert_eq!(
            eng.apply_keystream(CipherId::ChaCha20, &[0; 16], &[0; 12], 0, &mut d),
            Err(KeystreamError::KeyLength)
        );
        assert_eq!(
            eng.apply_keystream(CipherId::Aes128Ctr, &[0; 16], &[0; 12], 0, &mut d),
            Err(KeystreamError::IvLength)
        );
    }
}
