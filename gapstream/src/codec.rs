//! Compress, then seal, on the host: the simulated drone's frame coder (the codecs' portable
//! encoders: `gapstream_jpeg` baseline JPEG, `gapstream_jpegls` lossless JPEG-LS, one band per
//! GAP8 core as on the cluster, so the bytes are those the firmware's cluster encoders write) and
//! the receiver's decoders, which run only on frames that verified and never panic.

use gapstream_drone::{CoderError, FrameCoder, FrameFormat, PixelFormat};

/// Bands per frame: the GAP8 cluster's 8 cores, one band each (restart markers between them).
pub const BANDS: u8 = 8;

/// The default JPEG quality (IJG scale).
pub const DEFAULT_QUALITY: u8 = 75;

/// How the drone codes its frames.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum Codec {
    /// `width × height` samples as captured.
    #[default]
    Raw,
    /// Baseline greyscale JPEG at `--quality` (grey cameras; a Bayer camera's frames go raw).
    Jpeg,
    /// Lossless JPEG-LS (grey, or a Bayer mosaic as four planes).
    Jpegls,
}

impl Codec {
    /// The name on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Codec::Raw => "raw",
            Codec::Jpeg => "jpeg",
            Codec::Jpegls => "jpegls",
        }
    }
}

/// Length-hiding padding of coded frames (`--pad`; `gapstream_protocol::padding`): each coded
/// frame padded inside the AEAD to the next of a set of sizes. Raw frames are never padded.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum Pad {
    /// No padding: an observer of the link sees each coded frame's length.
    Off,
    /// Padmé sizes (PoPETs 2019): under 6.25 % more bytes on coded frames, O(log log L) bits of
    /// the length left. The default (docs/protocol.md §6 has the measurements).
    #[default]
    Padme,
    /// Powers of two: up to 100 % more bytes, fewer sizes.
    Pow2,
    /// Every coded frame as long as the raw frame: hides the length, saves no bytes.
    Max,
}

impl Pad {
    pub fn padding(self) -> gapstream_protocol::padding::Padding {
        use gapstream_protocol::padding::Padding;
        match self {
            Pad::Off => Padding::Off,
            Pad::Padme => Padding::Padme,
            Pad::Pow2 => Padding::Pow2,
            Pad::Max => Padding::Max,
        }
    }
}

/// The simulated drone's coder: the codecs' portable encoders on the calling thread.
#[derive(Clone, Debug)]
pub struct HostCoder {
    pub codec: Codec,
    /// JPEG quality 1..=100.
    pub quality: u8,
    /// JPEG-LS: each frame's band count and preset from the frame's own estimate, as the
    /// firmware's cluster coder chooses them (so both stream the same bytes).
    pub jpegls_bands: gapstream_jpegls::BandChooser,
}

/// The IJG quality scaling in percent of the Annex K table (libjpeg's `jpeg_quality_scaling`).
fn ijg_scale(q: u8) -> f64 {
    let q = q.clamp(1, 100) as f64;
    if q < 50.0 {
        5000.0 / q
    } else {
        200.0 - 2.0 * q
    }
}

/// The quality whose IJG scale is `scale` percent (the inverse of [`ijg_scale`]).
fn ijg_quality(scale: f64) -> f64 {
    if scale >= 100.0 {
        5000.0 / scale
    } else {
        (200.0 - scale) / 2.0
    }
}

/// Target-bytes rate control for JPEG: picks the next frame's quality from the last frame's
/// size, so that a busy scene keeps the frame rate (smaller, coarser frames) instead of stalling
/// the link. Model: a frame's bytes ~ complexity / scale^0.7 (the IJG scale), the complexity estimated from
/// the frame just coded (scenes change slowly between frames at 60 fps); the quality stays within
/// `min..=max` and aims a little under the target.
#[derive(Clone, Copy, Debug)]
pub struct RateControl {
    pub target_bytes: usize,
    pub min_quality: u8,
    pub max_quality: u8,
}

impl RateControl {
    /// Headroom: the controller aims at this share of the target.
    pub const AIM: f64 = 0.9;
    /// The model's exponent: bytes ~ scale^-ALPHA (the test's busy scene: 41,467 B at quality
    /// 90, 6,577 B at quality 17, i.e. 0.68; a square root over-corrected and oscillated).
    pub const ALPHA: f64 = 0.7;

    /// The next frame's quality after a frame of `bytes` coded at `quality`.
    pub fn next_quality(&self, quality: u8, bytes: usize) -> u8 {
        let complexity = bytes.max(1) as f64 * ijg_scale(quality).powf(Self::ALPHA);
        let want = Self::AIM * self.target_bytes.max(1) as f64;
        let scale = (complexity / want).powf(1.0 / Self::ALPHA);
        let q = ijg_quality(scale).round();
        (q.clamp(1.0, 100.0) as u8).clamp(self.min_quality, self.max_quality)
    }
}

impl HostCoder {
    /// A coder for `codec` at `quality` ([`BANDS`] bands, JPEG-LS's chosen per frame).
    pub fn new(codec: Codec, quality: u8) -> HostCoder {
        HostCoder {
            codec,
            quality,
            jpegls_bands: gapstream_jpegls::BandChooser::new(BANDS as usize),
        }
    }

    /// A coder for `codec` (None for raw frames); a quality outside 1..=100 is an error.
    pub fn boxed(codec: Codec, quality: u8) -> Result<Option<Box<dyn FrameCoder + Send>>, String> {
        Self::boxed_with_target(codec, quality, None)
    }

    /// The same, and with `target_bytes` (JPEG only) the quality of each next frame picked by
    /// [`RateControl`] (between 5 and `quality`).
    pub fn boxed_with_target(
        codec: Codec,
        quality: u8,
        target_bytes: Option<usize>,
    ) -> Result<Option<Box<dyn FrameCoder + Send>>, String> {
        if !(1..=100).contains(&quality) {
            return Err(format!("JPEG quality {quality} outside 1..=100"));
        }
        if codec == Codec::Raw {
            return Ok(None);
        }
        let coder = HostCoder::new(codec, quality);
        Ok(Some(match target_bytes {
            Some(t) if codec == Codec::Jpeg => Box::new(RateCoder {
                coder,
                rate: RateControl {
                    target_bytes: t,
                    min_quality: 5.min(quality),
                    max_quality: quality,
                },
            }),
            _ => Box::new(coder),
        }))
    }
}

/// A JPEG coder under [`RateControl`]: each frame at the quality the last one's size asked for.
#[derive(Clone, Debug)]
pub struct RateCoder {
    pub coder: HostCoder,
    pub rate: RateControl,
}

impl FrameCoder for RateCoder {
    fn code(
        &mut self,
        format: FrameFormat,
        frame: &[u8],
        out: &mut Vec<u8>,
    ) -> Result<Option<PixelFormat>, CoderError> {
        let r = self.coder.code(format, frame, out)?;
        if r.is_some() {
            self.coder.quality = self.rate.next_quality(self.coder.quality, out.len());
        }
        Ok(r)
    }

    /// In target-bytes mode a receiver's quality is the new ceiling (the next frame starts there
    /// at most).
    fn set_quality(&mut self, quality: u8) {
        self.rate.max_quality = quality.clamp(1, 100);
        self.rate.min_quality = self.rate.min_quality.min(self.rate.max_quality);
        self.coder.quality = self.coder.quality.min(self.rate.max_quality);
    }
}

impl FrameCoder for HostCoder {
    fn code(
        &mut self,
        format: FrameFormat,
        frame: &[u8],
        out: &mut Vec<u8>,
    ) -> Result<Option<PixelFormat>, CoderError> {
        out.clear();
        match (self.codec, format.pixel) {
            (Codec::Raw, _) => Ok(None),
            (Codec::Jpeg, PixelFormat::Grey8) => {
                let spec = gapstream_jpeg::FrameSpec {
                    width: format.width,
                    height: format.height,
                    quality: self.quality,
                    bands: BANDS,
                };
                let layout = spec.layout().map_err(|_| CoderError("JPEG frame size"))?;
                out.resize(layout.max_len(), 0);
                let n = gapstream_jpeg::encode::<gapstream_jpeg::Portable>(&spec, frame, out)
                    .map_err(|_| CoderError("JPEG encoder"))?;
                out.truncate(n);
                Ok(Some(PixelFormat::Jpeg))
            }
            (Codec::Jpegls, PixelFormat::Grey8 | PixelFormat::BayerRggb8) => {
                let (layout, coded) = if format.pixel == PixelFormat::Grey8 {
                    (gapstream_jpegls::Layout::Grey, PixelFormat::JpegLs)
                } else {
                    (
                        gapstream_jpegls::Layout::BayerRggb,
                        PixelFormat::JpegLsBayerRggb,
                    )
                };
                let plan = self
                    .jpegls_bands
                    .plan(format.width as usize, format.height as usize, layout, frame)
                    .map_err(|_| CoderError("JPEG-LS frame size"))?;
                *out = gapstream_jpegls::encode_to_vec(&plan, frame)
                    .map_err(|_| CoderError("JPEG-LS encoder"))?;
                Ok(Some(coded))
            }
            // JPEG of a Bayer mosaic, other layouts: raw.
            _ => Ok(None),
        }
    }

    fn set_quality(&mut self, quality: u8) {
        self.quality = quality.clamp(1, 100);
    }
}

/// Why a verified coded payload did not decode (counted as a malformed frame).
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum DecodeError {
    #[error("JPEG payload: {0}")]
    Jpeg(String),
    #[error("JPEG-LS payload: {0}")]
    JpegLs(gapstream_jpegls::DecodeError),
    #[error("coded picture is {got_w}x{got_h}, the authenticated header says {want_w}x{want_h}")]
    Size {
        got_w: usize,
        got_h: usize,
        want_w: usize,
        want_h: usize,
    },
}

/// Decodes a verified coded payload of `format` (JPEG, JPEG-LS) that the authenticated header
/// says is `width × height`: the samples, `width × height` bytes of `format.decoded()`. A raw
/// format returns `None` (nothing to decode). Never panics, whatever the bytes.
pub fn decode(
    format: PixelFormat,
    width: usize,
    height: usize,
    payload: &[u8],
) -> Option<Result<Vec<u8>, DecodeError>> {
    let r = match format {
        PixelFormat::Jpeg => decode_jpeg_sized(payload, Some((width, height))),
        PixelFormat::JpegLs => gapstream_jpegls::decode_with_limit(payload, MAX_SAMPLES)
            .map_err(DecodeError::JpegLs)
            .and_then(|img| {
                if img.components != 1 {
                    return Err(DecodeError::JpegLs(gapstream_jpegls::DecodeError::Header));
                }
                Ok((img.width, img.height, img.samples))
            }),
        PixelFormat::JpegLsBayerRggb => gapstream_jpegls::decode_with_limit(payload, MAX_SAMPLES)
            .and_then(|img| Ok((2 * img.width, 2 * img.height, img.to_bayer()?)))
            .map_err(DecodeError::JpegLs),
        _ => return None,
    };
    Some(r.and_then(|(w, h, px)| {
        if (w, h) != (width, height) || px.len() != w * h {
            return Err(DecodeError::Size {
                got_w: w,
                got_h: h,
                want_w: width,
                want_h: height,
            });
        }
        Ok(px)
    }))
}

/// The most samples a payload may decode to (a 4096 × 4096 picture): a verified frame still
/// cannot make the receiver allocate more.
pub const MAX_SAMPLES: usize = 4096 * 4096;

/// A greyscale baseline JPEG with `jpeg-decoder` (one component; colour files are refused: the
/// drone writes greyscale), at most [`MAX_SAMPLES`]. Its panics, if any input still finds one, are
/// caught and reported.
pub fn decode_jpeg(data: &[u8]) -> Result<(usize, usize, Vec<u8>), DecodeError> {
    decode_jpeg_sized(data, None)
}

/// [`decode_jpeg`], refusing before any sample is decoded a file whose frame header is not
/// `want` (the authenticated width and height) or holds more than [`MAX_SAMPLES`]:
/// `jpeg-decoder` checks its own size limit only once the whole picture is decoded, so a
/// few-hundred-byte file that claims 20000 × 20000 would otherwise cost the receiver its full
/// decoding (41.6 s and 660 MB in a debug build, measured) before the refusal.
fn decode_jpeg_sized(
    data: &[u8],
    want: Option<(usize, usize)>,
) -> Result<(usize, usize, Vec<u8>), DecodeError> {
    let r = std::panic::catch_unwind(|| {
        let mut d = jpeg_decoder::Decoder::new(data);
        d.set_max_decoding_buffer_size(MAX_SAMPLES);
        d.read_info()
            .map_err(|e| DecodeError::Jpeg(e.to_string()))?;
        let info = d
            .info()
            .ok_or_else(|| DecodeError::Jpeg("no frame header".into()))?;
        let (w, h) = (info.width as usize, info.height as usize);
        if let Some((want_w, want_h)) = want
            && (w, h) != (want_w, want_h)
        {
            return Err(DecodeError::Size {
                got_w: w,
                got_h: h,
                want_w,
                want_h,
            });
        }
        if w * h > MAX_SAMPLES {
            return Err(DecodeError::Jpeg(format!(
                "{w}x{h} picture, more than {MAX_SAMPLES} samples"
            )));
        }
        if info.pixel_format != jpeg_decoder::PixelFormat::L8 {
            return Err(DecodeError::Jpeg(format!(
                "{:?} picture, greyscale expected",
                info.pixel_format
            )));
        }
        let px = d.decode().map_err(|e| DecodeError::Jpeg(e.to_string()))?;
        Ok((w, h, px))
    });
    r.unwrap_or_else(|_| Err(DecodeError::Jpeg("decoder panicked".into())))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pattern(w: usize, h: usize) -> Vec<u8> {
        (0..w * h)
            .map(|i| (((i % w) * 7) ^ ((i / w) * 3)) as u8)
            .collect()
    }

    /// JPEG-LS: the band count of each frame comes from the frame itself, as in the firmware's
    /// cluster coder (`gapstream_jpegls::BandChooser`): a flat frame is coded in fewer bands
    /// with the sparse preset, a busy frame with 8, whatever came before; every frame decodes
    /// bit-exact.
    #[test]
    fn jpegls_bands_come_from_the_frame() {
        use gapstream_jpegls::{BandChooser, Layout, Plan};
        let fmt = FrameFormat::HM01B0;
        let flat: Vec<u8> = (0..324 * 244)
            .map(|i| if (i % 324) / 54 % 2 == 0 { 40 } else { 200 })
            .collect();
        let busy: Vec<u8> = (0..324 * 244u32)
            .map(|i| ((i % 324) * 3 + (i / 324) * 5 + (i.wrapping_mul(2_654_435_761) >> 28)) as u8)
            .collect();
        let mut c = HostCoder::new(Codec::Jpegls, 75);
        let dense = Plan::new(324, 244, Layout::Grey, BANDS as usize).unwrap();
        let sparse = Plan::new(324, 244, Layout::Grey, BandChooser::SPARSE_BANDS)
            .unwrap()
            .with_preset(BandChooser::SPARSE_PRESET);
        let mut out = Vec::new();
        for (px, plan) in [
            (&flat, sparse),
            (&flat, sparse),
            (&busy, dense),
            (&busy, dense),
            (&flat, sparse),
        ] {
            assert_eq!(c.code(fmt, px, &mut out), Ok(Some(PixelFormat::JpegLs)));
            assert_eq!(out, gapstream_jpegls::encode_to_vec(&plan, px).unwrap());
            assert_eq!(
                decode(PixelFormat::JpegLs, 324, 244, &out),
                Some(Ok(px.clone()))
            );
        }
    }

    #[test]
    fn every_codec_round_trips_through_the_receiver_decoders() {
        let fmt = FrameFormat::HM01B0;
        let px = pattern(324, 244);
        let mut out = Vec::new();
        let mut jls = HostCoder::new(Codec::Jpegls, 75);
        assert_eq!(
            jls.code(fmt, &px, &mut out).unwrap(),
            Some(PixelFormat::JpegLs)
        );
        assert!(out.len() < px.len());
        assert_eq!(
            decode(PixelFormat::JpegLs, 324, 244, &out),
            Some(Ok(px.clone()))
        );
        let mut jpeg = HostCoder::new(Codec::Jpeg, 75);
        assert_eq!(
            jpeg.code(fmt, &px, &mut out).unwrap(),
            Some(PixelFormat::Jpeg)
        );
        let dec = decode(PixelFormat::Jpeg, 324, 244, &out).unwrap().unwrap();
        let err: f64 = dec
            .iter()
            .zip(&px)
            .map(|(a, b)| (*a as f64 - *b as f64).powi(2))
            .sum::<f64>()
            / px.len() as f64;
        let psnr = 10.0 * (255.0f64 * 255.0 / err.max(1e-9)).log10();
        assert!(psnr > 28.0, "PSNR {psnr:.1} dB");
        // The authenticated size must match the picture's own.
        assert!(matches!(
            decode(PixelFormat::Jpeg, 320, 244, &out),
            Some(Err(DecodeError::Size { .. }))
        ));
        assert_eq!(decode(PixelFormat::Grey8, 324, 244, &out), None);
        // Bayer: JPEG-LS as four planes, back to the mosaic; JPEG declines.
        let bayer = FrameFormat {
            pixel: PixelFormat::BayerRggb8,
            ..fmt
        };
        assert_eq!(
            jls.code(bayer, &px, &mut out).unwrap(),
            Some(PixelFormat::JpegLsBayerRggb)
        );
        assert_eq!(
            decode(PixelFormat::JpegLsBayerRggb, 324, 244, &out),
            Some(Ok(px.clone()))
        );
        assert_eq!(jpeg.code(bayer, &px, &mut out).unwrap(), None);
        assert!(HostCoder::boxed(Codec::Jpeg, 0).is_err());
        assert!(HostCoder::boxed(Codec::Raw, 75).unwrap().is_none());
    }

    /// A small file whose frame header claims a huge picture is refused from its header, before
    /// any decoding (it took 41.6 s and 660 MB of a debug build to refuse when `jpeg-decoder`'s
    /// own limit, checked after decoding, was the only one), on the authenticated path, alone and
    /// on the stock stream.
    #[test]
    fn a_file_claiming_a_huge_picture_is_refused_before_decoding() {
        let px = vec![128u8; 40 * 32];
        let mut file = Vec::new();
        jpeg_encoder::Encoder::new(&mut file, 75)
            .encode(&px, 40, 32, jpeg_encoder::ColorType::Luma)
            .unwrap();
        assert_eq!(decode_jpeg(&file).unwrap().2.len(), 40 * 32);
        let sof = file.windows(2).position(|w| w == [0xFF, 0xC0]).unwrap();
        file[sof + 5..sof + 7].copy_from_slice(&20000u16.to_be_bytes());
        file[sof + 7..sof + 9].copy_from_slice(&20000u16.to_be_bytes());
        // Refused from the header (jpeg-decoder's own refusal, after decoding, says "size of
        // decoded image exceeds maximum allowed size").
        assert_eq!(
            decode(PixelFormat::Jpeg, 324, 244, &file),
            Some(Err(DecodeError::Size {
                got_w: 20000,
                got_h: 20000,
                want_w: 324,
                want_h: 244
            }))
        );
        assert!(matches!(
            decode(PixelFormat::Jpeg, 20000, 20000, &file),
            Some(Err(DecodeError::Jpeg(e))) if e.contains("more than")
        ));
        assert!(matches!(decode_jpeg(&file), Err(DecodeError::Jpeg(e)) if e.contains("more than")));
        // The stock stream's decoder (no authentication at all) likewise; it took 51 s of a debug
        // build (the process's peak 670 MB) to accept this file as a 20000 x 20000 picture.
        let stock = crate::receiver::decode_stock_jpeg(&file).unwrap_err();
        assert!(stock.contains("more than"), "{stock}");
    }

    proptest::proptest! {
        /// Garbage, truncated and bit-flipped payloads give errors, never a panic.
        #[test]
        fn decoders_never_panic(data in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..600),
                                cut in 0usize..2000, flip in 0usize..2000) {
            for f in [PixelFormat::Jpeg, PixelFormat::JpegLs, PixelFormat::JpegLsBayerRggb] {
                let _ = decode(f, 16, 16, &data);
            }
            let mut out = Vec::new();
            let px = pattern(40, 30);
            let fmt = FrameFormat { width: 40, height: 30, pixel: PixelFormat::Grey8 };
            for (codec, pf) in [(Codec::Jpeg, PixelFormat::Jpeg), (Codec::Jpegls, PixelFormat::JpegLs)] {
                HostCoder::new(codec, 50).code(fmt, &px, &mut out).unwrap();
                let mut bad = out.clone();
                bad.truncate(cut % (out.len() + 1));
                let _ = decode(pf, 40, 30, &bad);
                let mut bad = out.clone();
                let i = flip % out.len();
                bad[i] ^= 0x5a;
                let _ = decode(pf, 40, 30, &bad);
            }
        }
    }
}

#[cfg(test)]
mod rate_tests {
    use super::*;

    /// A frame of complexity `busy` (0: smooth gradient; larger: more texture and noise).
    fn scene(k: u32, busy: u32) -> Vec<u8> {
        let mut x = 0x1234_5678u32 ^ k;
        (0..324 * 244)
            .map(|i| {
                x ^= x << 13;
                x ^= x >> 17;
                x ^= x << 5;
                let (px, py) = (i % 324, i / 324);
                let base = (px / 3 + py / 2 + k) as u8;
                let tex = if busy > 0 {
                    ((px * py / (9 - busy.min(8))) as u8 & 0x3f) ^ ((x % (8 * busy)) as u8)
                } else {
                    0
                };
                base.wrapping_add(tex)
            })
            .collect()
    }

    /// The scene jumps from smooth to busy and back: with the controller the frames stay near
    /// the target after at most two frames (so the link keeps the frame rate), and the quality
    /// climbs back when the scene calms down; at a fixed quality the busy frames are far larger.
    #[test]
    fn target_bytes_follow_a_complexity_jump() {
        let rc = RateControl {
            target_bytes: 12_000,
            min_quality: 5,
            max_quality: 90,
        };
        let fmt = FrameFormat::HM01B0;
        let mut q = rc.max_quality;
        let mut out = Vec::new();
        let mut log = Vec::new();
        for k in 0..36u32 {
            let busy = if (12..24).contains(&k) { 6 } else { 0 };
            let px = scene(k, busy);
            let mut c = HostCoder::new(Codec::Jpeg, q);
            c.code(fmt, &px, &mut out).unwrap();
            let fixed = {
                let mut o = Vec::new();
                HostCoder::new(Codec::Jpeg, rc.max_quality)
                    .code(fmt, &px, &mut o)
                    .unwrap();
                o.len()
            };
            log.push((k, busy, q, out.len(), fixed));
            q = rc.next_quality(q, out.len());
        }
        for &(k, busy, q, n, fixed) in &log {
            // Two frames after each jump (k = 12, 24) to settle.
            if !(12..14).contains(&k) && !(24..26).contains(&k) && k >= 2 {
                assert!(
                    n <= rc.target_bytes * 11 / 10,
                    "frame {k}: {n} bytes at q{q}: {log:?}"
                );
            }
            if busy > 0 {
                assert!(
                    fixed > 2 * rc.target_bytes,
                    "the busy scene must be hard: {log:?}"
                );
            }
        }
        // Quality drops in the busy stretch and recovers after it.
        let q_busy = log[20].2;
        let q_after = log[35].2;
        assert!(q_busy < 50 && q_after > q_busy + 20, "{log:?}");
    }
}
