//! Baseline greyscale JPEG for the GAP8 cluster: one band of MCU rows per core, joined by
//! restart markers into one standard JFIF file, written into a caller-provided buffer.
//!
//! * 8-bit greyscale, baseline sequential (SOF0), JFIF APP0; the ITU-T T.81 Annex K luminance
//!   quantisation table scaled by a quality 1..=100 with the IJG formula, the Annex K luminance
//!   Huffman tables: the file libjpeg (and so Pillow, OpenCV, browsers) would write at that
//!   quality, bit for bit in its headers. Any size 1×1..=65535×65535; sizes that are not
//!   multiples of 8 are padded by replicating the last column and row (as libjpeg does).
//! * Parallel without seams: the frame's MCU rows are cut into bands, one per core, and each
//!   band is coded on its own (DC predictor from 0, byte-aligned end) between restart markers
//!   (DRI + `RSTn`), so the bands' bytes join by concatenation ([`layout`] explains the cut).
//! * Forward DCT in fixed point on 16-bit dot products ([`fdct`]): a portable model and, with
//!   feature `pulp` on riscv32, the RI5CY kernel on `pv.dotsp.h` / `pv.sdotsp.h` that computes the
//!   same bits. Quantisation by reciprocal multiply rounding as libjpeg-turbo does, zig-zag,
//!   Huffman coding with byte stuffing ([`entropy`]).
//! * No allocation anywhere; the cluster encoder ([`cluster`]) allocates its L1 buffers once and
//!   streams every band L2 → L1 → L2 with the cluster DMA, each core its own DMA commands.
//!
//! | item | what |
//! |---|---|
//! | [`FrameSpec`] | width, height, quality, bands: one frame's parameters |
//! | [`encode`] | the whole frame on the calling core (any [`Kernel`]), into `out`; returns the length |
//! | [`layout::Layout`] | the MCU grid, bands, restart interval, headers, size bounds ([`layout::Layout::max_len`]) |
//! | [`band::encode_band`] | one band's bytes (its trailing `RSTn` included) from a frame in memory: the per-core step |
//! | [`join`] | band byte strings from wherever they were written to one file after the header, EOI appended |
//! | [`cluster::ClusterEncoder`] | the frame on 1..=8 cluster cores (any `gap_rust_sdk` backend), bands DMA-streamed through L1, joined |
//! | [`fdct::Portable`], `fdct::Pulp` | the DCT kernels |
//! | [`testimage`] | deterministic test frames and the digest used by the rv32 checks |
//!
//! Output size: [`layout::Layout::max_len`] bytes always suffice (every block at its
//! worst case, every byte stuffed: 527,246 bytes for 324×244 on 8 cores, more than GAP8's L2);
//! a smaller buffer works whenever the frame fits and otherwise gives
//! [`Error::OutputFull`] (the cluster encoder gives each band a share of the buffer proportional
//! to its rows, see [`cluster`]).
#![cfg_attr(not(test), no_std)]
#![deny(unsafe_op_in_unsafe_fn)]
#![warn(missing_docs)]

pub mod band;
pub mod cluster;
pub mod entropy;
pub mod fdct;
pub mod layout;
#[cfg(all(target_arch = "riscv32", feature = "pulp"))]
mod pulp;
pub mod tables;
pub mod testimage;

use entropy::Out;
use layout::Layout;
use tables::Tables;

pub use fdct::{Kernel, Portable};
#[cfg(all(target_arch = "riscv32", feature = "pulp"))]
pub use pulp::Pulp;

/// The DCT kernel this build prefers: PULP on riscv32 with feature `pulp`, else the portable one.
#[cfg(all(target_arch = "riscv32", feature = "pulp"))]
pub type DefaultKernel = Pulp;
/// The DCT kernel this build prefers: PULP on riscv32 with feature `pulp`, else the portable one.
#[cfg(not(all(target_arch = "riscv32", feature = "pulp")))]
pub type DefaultKernel = Portable;

/// One frame's parameters.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FrameSpec {
    /// Pixels per row, 1..=65535.
    pub width: u16,
    /// Rows, 1..=65535.
    pub height: u16,
    /// Quality 1..=100 (IJG scale: 50 is the Annex K table, 100 all ones).
    pub quality: u8,
    /// Bands (normally the cores that code the frame); 1: no restart markers.
    pub bands: u8,
}

impl FrameSpec {
    /// The frame's layout; [`Error::Quality`] for a quality outside 1..=100.
    pub fn layout(&self) -> Result<Layout, Error> {
        if !(1..=100).contains(&self.quality) {
            return Err(Error::Quality);
        }
        Layout::new(self.width, self.height, self.bands as usize)
    }
}

/// Why a frame was not coded. Nothing is partially valid after an error: the output buffer's
/// content is unspecified.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Error {
    /// Width or height 0, or the pixel buffer is not `width × height` bytes.
    Size,
    /// Band count 0, or more bands than the cluster encoder has cores.
    Bands,
    /// Quality outside 1..=100.
    Quality,
    /// The coded frame does not fit the output buffer (in the cluster encoder: band `band`'s
    /// bytes do not fit its share of it).
    OutputFull,
    /// The cluster encoder's configuration cannot work (see [`cluster::Config`]).
    Config,
    /// A frame wider than the cluster encoder was made for.
    Width,
    /// The L1 buffers could not be allocated.
    Alloc(gap_rust_sdk::AllocError),
    /// The cluster refused the offload.
    Cluster(gap_rust_sdk::ClusterError),
    /// A fork failed.
    Fork(gap_rust_sdk::ForkError),
    /// A DMA transfer could not be started.
    Dma(gap_rust_sdk::DmaError),
}

impl core::fmt::Display for Error {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            Error::Size => f.write_str("frame size 0 or pixel buffer of the wrong length"),
            Error::Bands => f.write_str("band count 0 or larger than the encoder's cores"),
            Error::Quality => f.write_str("JPEG quality outside 1..=100"),
            Error::OutputFull => f.write_str("the coded frame does not fit the output buffer"),
            Error::Config => f.write_str("invalid cluster encoder configuration"),
            Error::Width => f.write_str("frame wider than the encoder's L1 strips allow"),
            Error::Alloc(e) => write!(f, "L1 allocation failed: {e}"),
            Error::Cluster(e) => write!(f, "cluster: {e}"),
            Error::Fork(e) => write!(f, "fork: {e}"),
            Error::Dma(e) => write!(f, "DMA: {e}"),
        }
    }
}

/// Codes a frame (`pixels`: `width × height` bytes, row-major, 8-bit grey) on the calling core
/// into `out`; returns the file's length. The bands are coded one after the other, so the file
/// is byte-identical to the cluster encoder's with the same spec.
pub fn encode<K: Kernel>(spec: &FrameSpec, pixels: &[u8], out: &mut [u8]) -> Result<usize, Error> {
    let layout = spec.layout()?;
    if pixels.len() != spec.width as usize * spec.height as usize {
        return Err(Error::Size);
    }
    let t = Tables::new(spec.quality);
    let mut o = Out::new(out);
    layout.write_header(&t, &mut o);
    for i in 0..layout.bands {
        band::encode_band::<K>(&layout, &t, i, pixels, &mut o)?;
    }
    o.put_bytes(&[0xff, 0xd9]);
    if o.full {
        return Err(Error::OutputFull);
    }
    Ok(o.pos)
}

/// Joins band byte strings into one file: `segments[i] = (start, len)` is band `i`'s bytes at
/// `out[start..start + len]`, band 0 starting right after the `header` bytes already at the
/// start of `out`, and every band at or after where the previous one ends when packed
/// (`start_i >= header + len_0 + ... + len_{i-1}`, as when each band was coded into its own
/// share of `out`). Moves each band down to follow the previous one, appends EOI and returns the
/// file's length.
pub fn join(out: &mut [u8], header: usize, segments: &[(usize, usize)]) -> Result<usize, Error> {
    let mut end = header;
    for &(start, len) in segments {
        if start < end || start.checked_add(len).is_none_or(|e| e > out.len()) {
            return Err(Error::Config);
        }
        out.copy_within(start..start + len, end);
        end += len;
    }
    out.get_mut(end..end + 2)
        .ok_or(Error::OutputFull)?
        .copy_from_slice(&[0xff, 0xd9]);
    Ok(end + 2)
}
