//! Compress, then seal, on the GAP8: `gapstream_drone`'s [`FrameCoder`] over the cluster
//! encoders, one band per core, the bands joined by restart markers into one standard file, which
//! the drone then seals with the fused cluster AEAD pass under the coded pixel format and length:
//!
//! * [`JpegCoder`]: baseline JPEG (`gapstream_jpeg::cluster`), at a quality the receiver may change
//!   over its authenticated control channel (SET_QUALITY, [`FrameCoder::set_quality`]);
//! * [`JplsCoder`]: lossless JPEG-LS (`gapstream_jpegls::cluster`), pixel format JPEG-LS.
//!
//! The coded frame is written into a [`CodedBuffer`] of L2 (the drone's coded-frame `Vec`,
//! allocated once on the first frame and kept): L2 has no room for a frame-sized third buffer next
//! to the two capture buffers, so a frame whose code does not fit (both encoders give each band a
//! share of the buffer) is a coder error: the drone counts it (`DroneStats::coder_errors`, the
//! firmware's `coder_errors=`) and sends the frame raw. The buffer also holds the frame's
//! length-hiding padding (`gapstream_protocol::padding`, added by the drone after the coder): the
//! code gets only as many bytes as still pad within the buffer, so padding never grows the `Vec`
//! (no allocation on the frame path).
use alloc::vec::Vec;

use gap_rust_sdk::Cluster;
use gapstream_drone::{CoderError, FrameCoder, FrameFormat, PixelFormat};
use gapstream_jpeg::cluster::{ClusterEncoder, Config};
use gapstream_jpeg::{DefaultKernel, Error, FrameSpec};
use gapstream_jpegls::{BandChooser, EncodeError, Layout, Plan};
use gapstream_protocol::padding::Padding;

/// The L2 buffer a coded frame is written to, and the padding the drone adds to it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CodedBuffer {
    /// Bytes allocated (once) for the coded frame and its padding.
    pub bytes: usize,
    /// The padding the drone applies to coded frames (`Drone::set_padding`).
    pub padding: Padding,
    /// The raw frame's length: the padding's cap (`Padding::padded_len`).
    pub raw: usize,
}

impl CodedBuffer {
    /// The most bytes the code may take so that the padded payload still fits [`Self::bytes`]:
    /// the largest `n` with `padded_len(n) <= bytes` (`bytes` itself without padding); 0 when
    /// no code fits (e.g. `Padding::Max` pads to the raw frame's length, more than the buffer).
    pub fn code_limit(&self) -> usize {
        let fits = |n: usize| {
            self.padding
                .padded_len(n, self.raw)
                .is_none_or(|p| p <= self.bytes)
        };
        if self.padding == Padding::Off {
            return self.bytes;
        }
        // padded_len is non-decreasing in n: the last n that fits, by bisection.
        let (mut lo, mut hi) = (0usize, self.bytes + 1);
        if !fits(0) {
            return 0;
        }
        while hi - lo > 1 {
            let mid = lo + (hi - lo) / 2;
            if fits(mid) {
                lo = mid;
            } else {
                hi = mid;
            }
        }
        lo
    }

    /// Readies `out` for a code of at most `limit` bytes: the whole buffer reserved once (later
    /// frames only refill the length), the length set to `limit`.
    fn prepare(&self, out: &mut Vec<u8>, limit: usize) {
        out.clear();
        out.reserve_exact(self.bytes);
        out.resize(limit, 0);
    }
}

/// L1 per core: strips of 8 blocks (64 pixels) and 512-byte output chunks, 2 KiB per core and the
/// tables once (18,008 bytes for 8 cores, `FW codec … l1_bytes=`): what is left of the 64 KiB L1
/// next to the cluster stacks and the cipher engine's buffers (firmware/Makefile `L1_BUFFER`).
pub const fn l1_config(cores: usize) -> Config {
    Config {
        cores,
        strip_blocks: 8,
        chunk: 512,
    }
}

/// Baseline JPEG on the cluster, one band per core, at a quality the receiver may change.
pub struct JpegCoder<'c, C: Cluster> {
    enc: ClusterEncoder<'c, C>,
    quality: u8,
    buffer: CodedBuffer,
    limit: usize,
}

impl<'c, C: Cluster> JpegCoder<'c, C> {
    /// Allocates the encoder's L1 buffers ([`l1_config`]) for `cores` bands.
    pub fn new(
        cluster: &'c C,
        cores: usize,
        quality: u8,
        buffer: CodedBuffer,
    ) -> Result<Self, Error> {
        if !(1..=100).contains(&quality) {
            return Err(Error::Quality);
        }
        Ok(JpegCoder {
            enc: ClusterEncoder::new(cluster, l1_config(cores))?,
            quality,
            limit: buffer.code_limit(),
            buffer,
        })
    }

    /// The quality the next frame is coded with.
    pub fn quality(&self) -> u8 {
        self.quality
    }

    /// The most bytes a frame's code may take ([`CodedBuffer::code_limit`]).
    pub fn code_limit(&self) -> usize {
        self.limit
    }

    /// The L1 bytes the encoder holds.
    pub fn l1_bytes(&self) -> usize {
        self.enc.config().l1_bytes()
    }
}

impl<C: Cluster> FrameCoder for JpegCoder<'_, C> {
    fn code(
        &mut self,
        format: FrameFormat,
        frame: &[u8],
        out: &mut Vec<u8>,
    ) -> Result<Option<PixelFormat>, CoderError> {
        if format.pixel != PixelFormat::Grey8 || frame.len() != format.bytes() {
            return Ok(None);
        }
        let spec = FrameSpec {
            width: format.width,
            height: format.height,
            quality: self.quality,
            bands: self.enc.config().cores as u8,
        };
        self.buffer.prepare(out, self.limit);
        let r = self.enc.encode::<DefaultKernel>(&spec, frame, out);
        let r = r.map_err(|e| matches!(e, Error::OutputFull));
        finish(out, r, PixelFormat::Jpeg, "cluster JPEG encoder failed")
    }

    /// SET_QUALITY from the receiver: the next frame is coded at `quality` (1..=100; the
    /// session refuses other values before they get here, and this keeps the old one for them).
    fn set_quality(&mut self, quality: u8) {
        if (1..=100).contains(&quality) {
            self.quality = quality;
        }
    }
}

/// The JPEG-LS line coder's kernel: the PULP one on the GAP8, the portable one elsewhere (the
/// same stream either way).
#[cfg(all(feature = "pulp", target_arch = "riscv32"))]
pub type JplsKernel = gapstream_jpegls::pulp::Pulp;
/// The JPEG-LS line coder's kernel: the PULP one on the GAP8, the portable one elsewhere (the
/// same stream either way).
#[cfg(not(all(feature = "pulp", target_arch = "riscv32")))]
pub type JplsKernel = gapstream_jpegls::Portable;

/// Lossless JPEG-LS on the cluster (NEAR = 0): bands of lines coded on the cores at once,
/// restart markers between them; grey frames only (pixel format JPEG-LS). The band count and
/// preset of each frame come from the frame itself ([`BandChooser::plan`]: an estimate of its
/// bits a sample from a few of its lines, run on the FC before the cluster job): one band per
/// core, or fewer bands for a frame that codes in few bits a sample (the same choice as the host
/// drone's coder, so both stream the same bytes).
pub struct JplsCoder<'c, C: Cluster> {
    cluster: &'c C,
    cores: usize,
    chooser: BandChooser,
    buffer: CodedBuffer,
    limit: usize,
    last_bands: usize,
}

impl<'c, C: Cluster> JplsCoder<'c, C> {
    /// A coder of `cores` bands (1..=8). Its L1 (context models, line buffers, code chunks:
    /// `gapstream_jpegls::cluster::l1_per_core`) is allocated by each frame's job and freed
    /// at its end.
    pub fn new(cluster: &'c C, cores: usize, buffer: CodedBuffer) -> Result<Self, EncodeError> {
        if !(1..=gap_rust_sdk::MAX_CORES).contains(&cores) {
            return Err(EncodeError::Bands);
        }
        Ok(JplsCoder {
            cluster,
            cores,
            chooser: BandChooser::new(cores),
            limit: buffer.code_limit(),
            buffer,
            last_bands: 0,
        })
    }

    /// The band count of the last frame coded (its plan: [`BandChooser::plan`]); 0 before the
    /// first.
    pub fn last_bands(&self) -> usize {
        self.last_bands
    }

    /// The most L1 bytes one frame's job takes for `format` (the tables and every core's share,
    /// with one band per core: a frame of fewer bands takes less).
    pub fn l1_bytes(&self, format: FrameFormat) -> usize {
        jpegls_l1_bytes(self.cores, format)
    }

    /// The most bytes a frame's code may take ([`CodedBuffer::code_limit`]).
    pub fn code_limit(&self) -> usize {
        self.limit
    }
}

/// The L1 bytes one JPEG-LS frame job on `cores` cores takes for `format` (the quantisation table
/// and every core's share: `gapstream_jpegls::cluster::l1_per_core`); allocated by the job and
/// freed at its end, next to what the cluster's stacks take then.
pub fn jpegls_l1_bytes(cores: usize, format: FrameFormat) -> usize {
    Plan::new(
        format.width.into(),
        format.height.into(),
        Layout::Grey,
        cores,
    )
    .map_or(0, |p| {
        512 + gapstream_jpegls::cluster::l1_per_core(&p) * cores.min(p.segments())
    })
}

impl<C: Cluster> FrameCoder for JplsCoder<'_, C> {
    fn code(
        &mut self,
        format: FrameFormat,
        frame: &[u8],
        out: &mut Vec<u8>,
    ) -> Result<Option<PixelFormat>, CoderError> {
        if format.pixel != PixelFormat::Grey8 || frame.len() != format.bytes() {
            return Ok(None);
        }
        // The frame's own plan: its estimate on the FC, before the cluster job.
        let plan = self
            .chooser
            .plan(
                format.width.into(),
                format.height.into(),
                Layout::Grey,
                frame,
            )
            .map_err(|_| CoderError("JPEG-LS: frame size out of range"))?;
        self.last_bands = plan.bands();
        self.buffer.prepare(out, self.limit);
        let r = gapstream_jpegls::cluster::encode::<JplsKernel, C>(
            self.cluster,
            self.cores,
            &plan,
            frame,
            out,
        );
        let r = r.map_err(|e| matches!(e, EncodeError::OutputFull));
        finish(
            out,
            r,
            PixelFormat::JpegLs,
            "cluster JPEG-LS encoder failed",
        )
    }
}

/// An encoder's result as the coder's: the coded length kept in `out`, or `out` emptied and why
/// (`Err(true)`: the code did not fit the buffer; `Err(false)`: the encoder failed, `failed`).
fn finish(
    out: &mut Vec<u8>,
    r: Result<usize, bool>,
    pixel: PixelFormat,
    failed: &'static str,
) -> Result<Option<PixelFormat>, CoderError> {
    match r {
        Ok(n) => {
            out.truncate(n);
            Ok(Some(pixel))
        }
        Err(full) => {
            out.clear();
            Err(CoderError(if full {
                "coded frame larger than its L2 buffer"
            } else {
                failed
            }))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use gap_rust_sdk::host::HostCluster;
    use gapstream_jpeg::Portable;
    use proptest::prelude::*;

    const RAW: usize = 324 * 244;

    fn unpadded(bytes: usize) -> CodedBuffer {
        CodedBuffer {
            bytes,
            padding: Padding::Off,
            raw: RAW,
        }
    }

    /// A frame with texture and noise (JPEG-LS codes it to about half its size).
    fn busy_frame() -> Vec<u8> {
        let f = FrameFormat::HM01B0;
        (0..f.bytes())
            .map(|i| {
                let n = (i as u32).wrapping_mul(2_654_435_761) >> 28;
                ((i % 324) as u32 * 3 + (i / 324) as u32 * 5 + n) as u8
            })
            .collect()
    }

    /// The portable encoder's file of a 324 x 244 frame in 8 bands.
    fn portable_jpeg(px: &[u8], quality: u8) -> Vec<u8> {
        let spec = FrameSpec {
            width: 324,
            height: 244,
            quality,
            bands: 8,
        };
        let mut want = alloc::vec![0u8; 200_000];
        let n = gapstream_jpeg::encode::<Portable>(&spec, px, &mut want).unwrap();
        want.truncate(n);
        want
    }

    /// The cluster coder (host backend, 8 cores, the firmware's L1 layout) writes the portable
    /// encoder's bytes; a buffer too small for the frame sends it raw.
    #[test]
    fn codes_what_the_portable_encoder_writes() {
        let cl = HostCluster::new();
        let f = FrameFormat::HM01B0;
        let px = busy_frame();
        let mut c = JpegCoder::new(&cl, 8, 75, unpadded(40960)).unwrap();
        let mut out = Vec::new();
        assert_eq!(c.code(f, &px, &mut out), Ok(Some(PixelFormat::Jpeg)));
        assert_eq!(out, portable_jpeg(&px, 75));
        let mut small = JpegCoder::new(&cl, 8, 75, unpadded(1000)).unwrap();
        assert!(small.code(f, &px, &mut out).is_err(), "counted, sent raw");
        assert!(out.is_empty());
        let bayer = FrameFormat {
            pixel: PixelFormat::JpegLs,
            ..f
        };
        assert_eq!(c.code(bayer, &px, &mut out), Ok(None));
        assert!(JpegCoder::new(&cl, 8, 0, unpadded(1000)).is_err());
    }

    /// SET_QUALITY reaches the cluster coder: the next frame is the portable encoder's file at
    /// the new quality; a quality out of range keeps the old one.
    #[test]
    fn set_quality_codes_the_next_frame_at_the_new_quality() {
        let cl = HostCluster::new();
        let f = FrameFormat::HM01B0;
        let px = busy_frame();
        let mut c = JpegCoder::new(&cl, 8, 75, unpadded(60_000)).unwrap();
        let mut out = Vec::new();
        c.code(f, &px, &mut out).unwrap();
        let at75 = out.clone();
        c.set_quality(30);
        c.set_quality(0);
        c.set_quality(101);
        assert_eq!(c.quality(), 30);
        c.code(f, &px, &mut out).unwrap();
        assert_eq!(out, portable_jpeg(&px, 30));
        assert!(out.len() < at75.len());
    }

    /// The cluster JPEG-LS coder (host backend, 8 bands) writes the portable encoder's stream,
    /// which the decoder gives back bit-exact; a buffer whose band shares are too small is a
    /// coder error (the frame goes out raw), never a truncated stream.
    #[test]
    fn jpegls_codes_what_the_portable_encoder_writes_and_decodes_bit_exact() {
        let cl = HostCluster::new();
        let f = FrameFormat::HM01B0;
        let px = busy_frame();
        let mut c = JplsCoder::new(&cl, 8, unpadded(81_920)).unwrap();
        // The models, three lines and a code chunk per core, the quantisation table once.
        let plan = Plan::new(324, 244, Layout::Grey, 8).unwrap();
        let per = gapstream_jpegls::cluster::l1_per_core(&plan);
        assert_eq!(c.l1_bytes(f), 512 + 8 * per);
        assert!(c.l1_bytes(f) < 32 * 1024, "{}", c.l1_bytes(f));
        let mut out = Vec::new();
        assert_eq!(c.code(f, &px, &mut out), Ok(Some(PixelFormat::JpegLs)));
        let mut want = alloc::vec![0u8; plan.max_encoded_len()];
        let n = gapstream_jpegls::encode(&plan, &px, &mut want).unwrap();
        assert_eq!(out, want[..n]);
        let img = gapstream_jpegls::decode(&out).unwrap();
        assert_eq!((img.width, img.height), (324, 244));
        assert_eq!(img.samples, px);
        let mut small = JplsCoder::new(&cl, 8, unpadded(n / 2)).unwrap();
        assert!(small.code(f, &px, &mut out).is_err(), "counted, sent raw");
        assert!(out.is_empty());
        let other = FrameFormat {
            pixel: PixelFormat::JpegLs,
            ..f
        };
        assert_eq!(c.code(other, &px, &mut out), Ok(None));
        assert_eq!(c.code(f, &px[1..], &mut out), Ok(None));
        assert!(JplsCoder::new(&cl, 0, unpadded(1000)).is_err());
        assert!(JplsCoder::new(&cl, 9, unpadded(1000)).is_err());
    }

    /// The band count comes from the frame itself ([`BandChooser::plan`]): a frame of few bits
    /// a sample is coded in 5 bands with the sparse preset, a busy frame in 8, whatever came
    /// before; every stream is the portable encoder's with the chooser's plan and decodes
    /// bit-exact.
    #[test]
    fn jpegls_band_count_comes_from_the_frame() {
        let cl = HostCluster::new();
        let f = FrameFormat::HM01B0;
        // Flat areas and a few edges: an estimate far below the threshold.
        let sparse: Vec<u8> = (0..f.bytes())
            .map(|i| if (i % 324) / 54 % 2 == 0 { 40 } else { 200 })
            .collect();
        let busy = busy_frame();
        let mut c = JplsCoder::new(&cl, 8, unpadded(81_920)).unwrap();
        let want_chooser = BandChooser::new(8);
        let mut out = Vec::new();
        let mut bands = Vec::new();
        assert_eq!(c.last_bands(), 0);
        for px in [&sparse, &sparse, &busy, &busy, &sparse] {
            assert_eq!(c.code(f, px, &mut out), Ok(Some(PixelFormat::JpegLs)));
            bands.push(c.last_bands());
            let plan = want_chooser.plan(324, 244, Layout::Grey, px).unwrap();
            let want = gapstream_jpegls::encode_to_vec(&plan, px).unwrap();
            assert_eq!(out, want);
            assert_eq!(gapstream_jpegls::decode(&out).unwrap().samples, **px);
        }
        assert_eq!(bands, [5, 5, 8, 8, 5]);
        // A frame that does not fit (sent raw) was still planned from itself.
        let mut small = JplsCoder::new(&cl, 8, unpadded(100)).unwrap();
        assert!(small.code(f, &sparse, &mut out).is_err());
        assert_eq!(small.last_bands(), 5);
        // Fewer cores than the sparse band count: never more bands than cores.
        let mut four = JplsCoder::new(&cl, 4, unpadded(81_920)).unwrap();
        for px in [&sparse, &busy] {
            four.code(f, px, &mut out).unwrap();
            assert_eq!(four.last_bands(), 4);
        }
    }

    /// With padding, the code is limited so that the padded payload fits the buffer: the
    /// drone's padding then never reallocates the coded `Vec` (the frame path allocates nothing
    /// after the first frame).
    #[test]
    fn padding_fits_the_buffer_without_a_reallocation() {
        let cl = HostCluster::new();
        let f = FrameFormat::HM01B0;
        let px = busy_frame();
        let buf = CodedBuffer {
            bytes: 60_000,
            padding: Padding::Padme,
            raw: RAW,
        };
        let mut c = JplsCoder::new(&cl, 8, buf).unwrap();
        let mut out = Vec::new();
        c.code(f, &px, &mut out).unwrap();
        let (ptr, cap) = (out.as_ptr(), out.capacity());
        assert!(cap >= buf.bytes);
        assert!(gapstream_protocol::padding::pad(
            &mut out,
            Padding::Padme,
            RAW
        ));
        assert!(out.len() <= buf.bytes);
        assert_eq!((out.as_ptr(), out.capacity()), (ptr, cap));
        // Padding to the raw frame's length cannot fit a smaller buffer: no code fits.
        let max = CodedBuffer {
            padding: Padding::Max,
            ..buf
        };
        assert_eq!(max.code_limit(), 0);
    }

    proptest! {
        /// `code_limit` is the largest code whose padded length fits the buffer.
        #[test]
        fn code_limit_is_the_largest_code_that_pads_within_the_buffer(
            bytes in 0usize..100_000,
            p in 0usize..4,
            raw in 1usize..120_000,
        ) {
            let padding = Padding::ALL[p];
            let b = CodedBuffer { bytes, padding, raw };
            let n = b.code_limit();
            let fits = |n: usize| padding.padded_len(n, raw).is_none_or(|t| t <= bytes);
            if n > 0 || fits(0) {
                prop_assert!(fits(n));
            }
            prop_assert!(n <= bytes);
            if n < bytes {
                prop_assert!(!fits(n + 1));
            }
        }
    }
}
