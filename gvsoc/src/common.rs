// Shared by the GAP8 programs and build.rs (which computes the expected digests on the host):
// the test payload, key and nonce, and the digest.

/// The payload of the engine check: 128 KiB.
pub const CHECK_BYTES: usize = 128 * 1024;
/// Key of the engine check.
pub const CHECK_KEY: [u8; 32] = [
    0x80, 0x81, 0x82, 0x83, 0x84, 0x85, 0x86, 0x87, 0x88, 0x89, 0x8a, 0x8b, 0x8c, 0x8d, 0x8e, 0x8f,
    0x90, 0x91, 0x92, 0x93, 0x94, 0x95, 0x96, 0x97, 0x98, 0x99, 0x9a, 0x9b, 0x9c, 0x9d, 0x9e, 0x9f,
];
/// Nonce of the engine check.
pub const CHECK_NONCE: [u8; 12] = [0, 0, 0, 0x4a, 0, 0, 0, 0, 0x31, 0x41, 0x59, 0x26];
/// Keystream byte offset of the engine check (block counter 1, as RFC 8439's AEAD payload).
pub const CHECK_OFFSET: u64 = 64;

/// Byte `i` of the test payload.
pub fn pattern(i: usize) -> u8 {
    (i.wrapping_mul(2_654_435_761) >> 13) as u8 ^ (i as u8)
}

/// FNV-1a (64-bit) over the little-endian 32-bit words of `data` (then its tail bytes).
pub fn digest(data: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    let mut words = data.chunks_exact(4);
    for w in &mut words {
        h ^= u32::from_le_bytes([w[0], w[1], w[2], w[3]]) as u64;
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    for &b in words.remainder() {
        h ^= b as u64;
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}

// ---- gvsoc_bench: the run list the host runner (`cargo xtask gvsoc-bench`) patches into the ELF.

/// First word of [`BenchConfig`] ("GVBC").
pub const BENCH_MAGIC: u32 = 0x4342_5647;
/// Layout version of [`BenchConfig`].
pub const BENCH_VERSION: u32 = 1;
/// Runs one launch can hold.
pub const BENCH_MAX_RUNS: usize = 512;
/// Largest payload of a run (the L2 payload buffer).
pub const BENCH_MAX_BYTES: usize = 128 * 1024;
/// Guard bytes before and after the payload, checked after every run.
pub const BENCH_GUARD: usize = 64;
/// Name of the config symbol in the ELF.
pub const BENCH_SYMBOL: &str = "GVSOC_BENCH_CONFIG";

/// AES-128 key of the benchmark (ChaCha20 uses [`CHECK_KEY`] / [`CHECK_NONCE`]).
pub const BENCH_AES_KEY: [u8; 16] = [
    0x2b, 0x7e, 0x15, 0x16, 0x28, 0xae, 0xd2, 0xa6, 0xab, 0xf7, 0x15, 0x88, 0x09, 0xcf, 0x4f, 0x3c,
];
/// AES-CTR initial counter block of the benchmark.
pub const BENCH_AES_IV: [u8; 16] = [
    0xf0, 0xf1, 0xf2, 0xf3, 0xf4, 0xf5, 0xf6, 0xf7, 0xf8, 0xf9, 0xfa, 0xfb, 0xfc, 0xfd, 0xfe, 0xff,
];

/// GCM's `J0` of the AES-128-GCM runs: the first 12 bytes of [`BENCH_AES_IV`] as the nonce,
/// then `00000001`.
pub const fn bench_gcm_j0() -> [u8; 16] {
    let mut j = BENCH_AES_IV;
    j[12] = 0;
    j[13] = 0;
    j[14] = 0;
    j[15] = 1;
    j
}

/// One benchmark run. All fields little-endian `u32`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RunSpec {
    /// Index into [`BENCH_KERNELS`].
    pub kernel: u32,
    /// One of [`BENCH_MODES`]' indices.
    pub mode: u32,
    /// Cluster cores, 1..=8.
    pub cores: u32,
    /// L1 buffer bytes (each of three); ignored by the no-DMA mode.
    pub buffer: u32,
    /// Payload bytes, at most [`BENCH_MAX_BYTES`].
    pub bytes: u32,
    /// Keystream byte offset of the payload.
    pub offset: u32,
    /// Expected [`digest`] of the output (low word).
    pub digest_lo: u32,
    /// Expected [`digest`] of the output (high word).
    pub digest_hi: u32,
}

/// The run list.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct BenchConfig {
    /// [`BENCH_MAGIC`].
    pub magic: u32,
    /// [`BENCH_VERSION`].
    pub version: u32,
    /// Runs used in `runs`.
    pub count: u32,
    /// Bit 0: no warm-up call before each measured run.
    pub flags: u32,
    /// The runs.
    pub runs: [RunSpec; BENCH_MAX_RUNS],
}

/// [`BenchConfig::flags`]: measure cold (no warm-up call).
pub const BENCH_FLAG_COLD: u32 = 1;

/// Byte size of [`BenchConfig`] (what the runner patches).
pub const BENCH_CONFIG_BYTES: usize = 16 + 32 * BENCH_MAX_RUNS;

/// Associated data of the AEAD runs: a 36-byte frame header.
pub const BENCH_AAD: [u8; 36] = [
    0x47, 0x53, 0x01, 0x01, 0x01, 0x00, 0x44, 0x01, 0xf4, 0x00, 0x03, 0x00, 0x00, 0x00, 0x4d, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x7b, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0xd0, 0x34,
    0x01, 0x00, 0x00, 0x00,
];

/// Digest of an AEAD run: the ciphertext's [`digest`] mixed with the tag's.
pub fn aead_digest(ct: &[u8], tag: &[u8; 16]) -> u64 {
    digest(ct) ^ digest(tag).rotate_left(17)
}

/// `(kernel, variant)` of each kernel index; the cipher is ChaCha20 for `kernel == "chacha20"`,
/// AES-128-CTR for `"aes128ctr"`; `"chacha20poly1305"` is the AEAD (RFC 8439 §2.8, AAD
/// [`BENCH_AAD`], output digest [`aead_digest`]): `pulp` the engine's fused pass (PULP ChaCha20,
/// each core's Poly1305 lane over its ciphertext chunks in L1, the tag made in the cluster job),
/// `rustcrypto` the `chacha20poly1305` crate on cluster core 0 (1 core only: the anchor).
/// `"aes128gcm"` is AES-128-GCM with [`BENCH_AES_KEY`], the nonce of [`bench_gcm_j0`] and
/// [`BENCH_AAD`] (digest [`aead_digest`]): `pulp` the PULP AES-CTR pass with GHASH fused (each
/// core's GHASH lane over its ciphertext chunks in L1, the tag made in the cluster job),
/// `rustcrypto` the `aes-gcm` crate on cluster core 0 (1 core only: the anchor).
///
/// `"jpegls"` is lossless JPEG-LS (`gapstream_jpegls`) of one frame of the frame set
/// ([`BENCH_FRAME_W`] × [`BENCH_FRAME_H`], patched into [`BENCH_FRAME_SYMBOL`] by the runner) with
/// the plan `gapstream_jpegls::BandChooser` of [`JPEGLS_BANDS`] bands takes from the frame itself
/// (its estimate on the FC, measured apart), on the run's cores, output (and its digest) the `.jls` stream;
/// `portable`: the portable line coder; `pulp`: with the PULP operations (`gapstream_jpegls::pulp`).
pub const BENCH_KERNELS: [(&str, &str); 15] = [
    ("chacha20", "portable"),
    ("chacha20", "rv32-asm"),
    ("chacha20", "pulp"),
    ("chacha20", "rustcrypto"),
    ("chacha20", "pulp-generic"),
    ("aes128ctr", "portable"),
    ("aes128ctr", "rv32-asm"),
    ("aes128ctr", "pulp"),
    ("aes128ctr", "rustcrypto"),
    ("chacha20poly1305", "pulp"),
    ("chacha20poly1305", "rustcrypto"),
    ("aes128gcm", "pulp"),
    ("aes128gcm", "rustcrypto"),
    ("jpegls", "portable"),
    ("jpegls", "pulp"),
];

/// True for the JPEG-LS kernels (input: the frame symbol; output: a stream of its own length).
pub fn is_jpegls_kernel(kernel: usize) -> bool {
    matches!(BENCH_KERNELS.get(kernel), Some(("jpegls", _)))
}

/// Name of the frame symbol of the codec runs in the ELF.
pub const BENCH_FRAME_SYMBOL: &str = "GVSOC_BENCH_FRAME";
/// Width of the codec runs' frame (the HM01B0's).
pub const BENCH_FRAME_W: usize = 324;
/// Height of the codec runs' frame.
pub const BENCH_FRAME_H: usize = 244;
/// The JPEG-LS runs' chooser's band count on any core count (the same stream on 1..8 cores): a
/// frame gets these bands, or the chooser's sparse plan when its own estimate says so.
pub const JPEGLS_BANDS: usize = 8;

/// Modes: the engine's DMA rounds with round sizes chosen from the payload (`dma`), with every
/// round one whole buffer as in the paper (F. Barchi et al., PARMA-DITAM 2023) (`fixed`), or no DMA (`nodma`: cores read and write
/// the payload in L2 directly).
pub const BENCH_MODES: [&str; 3] = ["dma", "fixed", "nodma"];
