//! Compress, then seal, on the GAP8: [`JpegCoder`] is `gapstream_drone`'s [`FrameCoder`] over
//! the cluster JPEG encoder (`gapstream_jpeg::cluster`): one band of MCU rows per core, the bands
//! joined by restart markers into one standard JFIF file, which the drone then seals with the
//! fused cluster AEAD pass under pixel format JPEG and the coded length.
//!
//! The coded frame is written into a buffer of `capacity` bytes of L2 (the drone's coded-frame
//! `Vec`, allocated on the first frame and kept): L2 has no room for a frame-sized third buffer
//! next to the two capture buffers, so a frame whose code does not fit (the encoder gives each band
//! a share of the buffer proportional to its rows) is a coder error: the drone counts it
//! (`DroneStats::coder_errors`, the firmware's `coder_errors=`) and sends the frame raw.
use alloc::vec::Vec;

use gap_rust_sdk::Cluster;
use gapstream_drone::{CoderError, FrameCoder, FrameFormat, PixelFormat};
use gapstream_jpeg::cluster::{ClusterEncoder, Config};
use gapstream_jpeg::{DefaultKernel, Error, FrameSpec};

/// L1 per core: strips of 8 blocks (64 pixels) and 512-byte output chunks, 2 KiB per core and the
/// tables once (18.3 KiB for 8 cores): what is left of the 64 KiB L1 next to the cluster stacks
/// and the cipher engine's buffers (firmware/Makefile `L1_BUFFER`).
pub const fn l1_config(cores: usize) -> Config {
    Config {
        cores,
        strip_blocks: 8,
        chunk: 512,
    }
}

/// Baseline JPEG on the cluster at a fixed quality, one band per core.
pub struct JpegCoder<'c, C: Cluster> {
    enc: ClusterEncoder<'c, C>,
    quality: u8,
    capacity: usize,
}

impl<'c, C: Cluster> JpegCoder<'c, C> {
    /// Allocates the encoder's L1 buffers ([`l1_config`]) for `cores` bands.
    pub fn new(cluster: &'c C, cores: usize, quality: u8, capacity: usize) -> Result<Self, Error> {
        if !(1..=100).contains(&quality) {
            return Err(Error::Quality);
        }
        Ok(JpegCoder {
            enc: ClusterEncoder::new(cluster, l1_config(cores))?,
            quality,
            capacity,
        })
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
        // Allocated once (the first frame); later frames only refill the length.
        out.resize(self.capacity, 0);
        match self.enc.encode::<DefaultKernel>(&spec, frame, out) {
            Ok(n) => {
                out.truncate(n);
                Ok(Some(PixelFormat::Jpeg))
            }
            Err(Error::OutputFull) => {
                out.clear();
                Err(CoderError("coded frame larger than its L2 buffer"))
            }
            Err(_) => {
                out.clear();
                Err(CoderError("cluster JPEG encoder failed"))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use gap_rust_sdk::host::HostCluster;
    use gapstream_jpeg::Portable;

    /// The cluster coder (host backend, 8 cores, the firmware's L1 layout) writes the portable
    /// encoder's bytes; a buffer too small for the frame sends it raw.
    #[test]
    fn codes_what_the_portable_encoder_writes() {
        let cl = HostCluster::new();
        let f = FrameFormat::HM01B0;
        let px: Vec<u8> = (0..f.bytes())
            .map(|i| {
                let n = (i as u32).wrapping_mul(2_654_435_761) >> 28;
                ((i % 324) as u32 * 3 + (i / 324) as u32 * 5 + n) as u8
            })
            .collect();
        let mut c = JpegCoder::new(&cl, 8, 75, 40960).unwrap();
        let mut out = Vec::new();
        assert_eq!(c.code(f, &px, &mut out), Ok(Some(PixelFormat::Jpeg)));
        let spec = FrameSpec {
            width: 324,
            height: 244,
            quality: 75,
            bands: 8,
        };
        let mut want = alloc::vec![0u8; 200_000];
        let n = gapstream_jpeg::encode::<Portable>(&spec, &px, &mut want).unwrap();
        assert_eq!(out, want[..n]);
        let mut small = JpegCoder::new(&cl, 8, 75, 1000).unwrap();
        assert!(small.code(f, &px, &mut out).is_err(), "counted, sent raw");
        assert!(out.is_empty());
        let bayer = FrameFormat {
            pixel: PixelFormat::JpegLs,
            ..f
        };
        assert_eq!(c.code(bayer, &px, &mut out), Ok(None));
        assert!(JpegCoder::new(&cl, 8, 0, 1000).is_err());
    }
}
