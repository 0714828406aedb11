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

/// The simulated drone's coder: the codecs' portable encoders on the calling thread.
#[derive(Clone, Debug)]
pub struct HostCoder {
    pub codec: Codec,
    /// JPEG quality 1..=100.
    pub quality: u8,
}

impl HostCoder {
    /// A coder for `codec` (None for raw frames); a quality outside 1..=100 is an error.
    pub fn boxed(codec: Codec, quality: u8) -> Result<Option<Box<dyn FrameCoder + Send>>, String> {
        if !(1..=100).contains(&quality) {
            return Err(format!("JPEG quality {quality} outside 1..=100"));
        }
        Ok((codec != Codec::Raw)
            .then(|| Box::new(HostCoder { codec, quality }) as Box<dyn FrameCoder + Send>))
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
                let plan = gapstream_jpegls::Plan::new(
                    format.width as usize,
                    format.height as usize,
                    layout,
                    BANDS as usize,
                )
                .map_err(|_| CoderError("JPEG-LS frame size"))?;
                *out = gapstream_jpegls::encode_to_vec(&plan, frame)
                    .map_err(|_| CoderError("JPEG-LS encoder"))?;
                Ok(Some(coded))
            }
            // JPEG of a Bayer mosaic, other layouts: raw.
            _ => Ok(None),
        }
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
        PixelFormat::Jpeg => decode_jpeg(payload),
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
/// drone writes greyscale). Its panics, if any input still finds one, are caught and reported.
pub fn decode_jpeg(data: &[u8]) -> Result<(usize, usize, Vec<u8>), DecodeError> {
    let r = std::panic::catch_unwind(|| {
        let mut d = jpeg_decoder::Decoder::new(data);
        d.set_max_decoding_buffer_size(MAX_SAMPLES);
        d.read_info()
            .map_err(|e| DecodeError::Jpeg(e.to_string()))?;
        let info = d
            .info()
            .ok_or_else(|| DecodeError::Jpeg("no frame header".into()))?;
        if info.pixel_format != jpeg_decoder::PixelFormat::L8 {
            return Err(DecodeError::Jpeg(format!(
                "{:?} picture, greyscale expected",
                info.pixel_format
            )));
        }
        let px = d.decode().map_err(|e| DecodeError::Jpeg(e.to_string()))?;
        Ok((info.width as usize, info.height as usize, px))
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

    #[test]
    fn every_codec_round_trips_through_the_receiver_decoders() {
        let fmt = FrameFormat::HM01B0;
        let px = pattern(324, 244);
        let mut out = Vec::new();
        let mut jls = HostCoder {
            codec: Codec::Jpegls,
            quality: 75,
        };
        assert_eq!(
            jls.code(fmt, &px, &mut out).unwrap(),
            Some(PixelFormat::JpegLs)
        );
        assert!(out.len() < px.len());
        assert_eq!(
            decode(PixelFormat::JpegLs, 324, 244, &out),
            Some(Ok(px.clone()))
        );
        let mut jpeg = HostCoder {
            codec: Codec::Jpeg,
            quality: 75,
        };
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
                HostCoder { codec, quality: 50 }.code(fmt, &px, &mut out).unwrap();
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
