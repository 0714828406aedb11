// The run list of `gvsoc_jpeg` (the JPEG rows of `make gvsoc-bench`), shared by the GAP8 program
// and the host runner (`xtask/src/gvsoc_jpeg.rs`) by `include!`: one launch codes one picture
// (patched into the ELF with its runs) with every variant, quality and core count asked for.

/// First word of the config ("GVJP").
pub const JPEG_MAGIC: u32 = 0x504a_5647;
/// Layout version of the config.
pub const JPEG_VERSION: u32 = 1;
/// Runs one launch can hold.
pub const JPEG_MAX_RUNS: usize = 64;
/// Largest frame (bytes) the config can carry: 324 × 300, or 400 × 240.
pub const JPEG_MAX_PIXELS: usize = 96 * 1024;
/// Bytes of the L2 output buffer each run codes into (with guards around it).
pub const JPEG_OUT_BYTES: usize = 120 * 1024;
/// Guard bytes before and after the output buffer, checked after every run.
pub const JPEG_GUARD: usize = 64;
/// Name of the config symbol in the ELF.
pub const JPEG_SYMBOL: &str = "GVSOC_JPEG_CONFIG";
/// Words of one run.
pub const JPEG_RUN_WORDS: usize = 6;
/// Words before the runs: magic, version, run count, flags, width, height.
pub const JPEG_HEAD_WORDS: usize = 6;
/// Byte offset of the frame in the config.
pub const JPEG_FRAME_AT: usize = 4 * (JPEG_HEAD_WORDS + JPEG_RUN_WORDS * JPEG_MAX_RUNS);
/// Byte size of the config.
pub const JPEG_CONFIG_BYTES: usize = JPEG_FRAME_AT + JPEG_MAX_PIXELS;
/// Flag: no warm-up call before each measured run.
pub const JPEG_FLAG_COLD: u32 = 1;

/// The DCT kernels, by the `variant` index of a run.
pub const JPEG_VARIANTS: [&str; 2] = ["portable", "pulp"];

/// One run: `(variant, quality, cores, expected length, expected digest low, high)`, the digest
/// being `gapstream_jpeg::testimage::digest` of the file.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct JpegRun {
    /// Index into [`JPEG_VARIANTS`].
    pub variant: u32,
    /// JPEG quality 1..=100.
    pub quality: u32,
    /// Cores (= bands), 1..=8.
    pub cores: u32,
    /// Length of the file the host's encoder wrote.
    pub len: u32,
    /// Digest of that file, low word.
    pub digest_lo: u32,
    /// Digest of that file, high word.
    pub digest_hi: u32,
}

impl JpegRun {
    /// The run's words.
    pub fn words(&self) -> [u32; JPEG_RUN_WORDS] {
        [
            self.variant,
            self.quality,
            self.cores,
            self.len,
            self.digest_lo,
            self.digest_hi,
        ]
    }

    /// From its words.
    pub fn from_words(w: [u32; JPEG_RUN_WORDS]) -> JpegRun {
        JpegRun {
            variant: w[0],
            quality: w[1],
            cores: w[2],
            len: w[3],
            digest_lo: w[4],
            digest_hi: w[5],
        }
    }
}
