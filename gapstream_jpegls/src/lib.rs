//! Lossless JPEG-LS (ISO/IEC 14495-1 | ITU-T T.87, the LOCO-I algorithm of M. J. Weinberger,
//! G. Seroussi and G. Sapiro, IEEE Trans. Image Processing 9(8), 2000) for the GAP8: 8-bit
//! samples, NEAR = 0, coded in bands that the cluster's cores code at once.
//!
//! # The stream
//!
//! A standard `.jls` stream (SOI, SOF55, LSE when the preset parameters are not the defaults,
//! DRI, one SOS per component, EOI) that CharLS and any other conforming decoder reads as is:
//!
//! * **Bands with restart markers.** A component's plane is cut into bands of equal height (the
//!   last may be shorter), each one restart interval (DRI + RSTm). After a restart marker the
//!   standard resets the context model and codes the interval's first line as a picture's first
//!   line (the line above is zero; CharLS does the same), so bands are independent: core `i`
//!   codes band `i` without waiting for anyone, and the segments are joined afterwards.
//! * **Preset coding parameters** ([`Preset`]: T1, T2, T3, RESET; an LSE segment). Every
//!   restart learns the context model again; with 8 or more bands [`Plan::new`] takes
//!   [`Preset::BANDED`] (T3 = 128, RESET = 40: fewer contexts in use, each learning faster),
//!   which codes the frame set's photographs within 1.05× CharLS's one-scan size; below 8 bands
//!   the defaults. The decoder honours any valid preset.
//! * **Bands chosen per frame** ([`BandChooser`]): a frame that codes in few bits a sample (long
//!   runs, flat areas) loses a large share to its restarts, but codes fast; such a frame gets
//!   fewer bands (5) with a preset for them, which keeps it within 1.05× of one scan. Which kind
//!   a frame is comes from the frame itself before it is coded ([`adapt::estimate`]: the MED
//!   residuals of a few of its lines), so every frame gets its own plan.
//! * **Bayer mosaics** ([`Layout::BayerRggb`]): the HM01B0's colour variant delivers an RGGB
//!   mosaic, whose neighbouring samples are of different colours and defeat the predictor. The
//!   encoder codes the four colour planes (R, Gr, Gb, B; each `w/2 × h/2`) as four components,
//!   one scan each; [`Image::to_bayer`] puts them back.
//!
//! # API
//!
//! | item | what |
//! |---|---|
//! | [`Plan`] | the layout of a picture: components, bands, worst-case sizes, headers, regions |
//! | [`BandChooser`], [`adapt::estimate`] | each frame's plan from the frame itself: one band per core, or [`BandChooser::SPARSE_BANDS`] with their preset for a frame whose estimate is below [`BandChooser::SPARSE_BELOW_MILLIBITS`] |
//! | [`encode`] | the whole picture on the calling core into a caller's buffer (no allocation) |
//! | [`encode_segment`] | one band of one component through a [`Writer`] into any [`Sink`] (what a cluster core runs) |
//! | [`join`] | segments coded in place ([`Plan::region`]) joined into one stream |
//! | [`cluster::encode`] (feature `cluster`) | the bands on the cluster's cores, lines and code streamed L2 → L1 → L2 with the cluster DMA, then the join |
//! | [`Portable`], `pulp::Pulp` (feature `pulp`, riscv32) | the line coder's kernel operations: plain RV32IMC, or PULP's `p.fl1`, `p.min`/`p.max`, `p.clipu`, `p.abs` (the same stream) |
//! | [`decode`], [`decode_bayer`] (feature `alloc`) | the decoder: typed errors, never a panic |
//!
//! The per-frame path allocates nothing: the output buffer is the caller's, its worst case is
//! [`Plan::max_encoded_len`] (32 bits a sample), and a shorter buffer that does not hold the
//! code gives [`EncodeError::OutputFull`] (the caller may then send the frame raw).
#![cfg_attr(not(feature = "std"), no_std)]
#![deny(unsafe_code)]
#![warn(missing_docs)]

#[cfg(feature = "alloc")]
extern crate alloc;

pub mod adapt;
pub mod bits;
pub mod encode;
pub mod line;
#[allow(missing_docs)]
pub mod model;
pub mod pulp_model;

#[cfg(feature = "cluster")]
pub mod cluster;
#[cfg(feature = "alloc")]
pub mod decode;
#[cfg(all(feature = "pulp", target_arch = "riscv32"))]
pub mod pulp;

pub use adapt::BandChooser;
pub use bits::{NoSpill, Sink, Writer};
pub use encode::{Plan, Segment, encode, encode_segment, encode_segment_with, encode_with, join};
pub use line::{Ops, Portable};
pub use model::Preset;
pub use pulp_model::PulpModel;

#[cfg(feature = "alloc")]
pub use decode::{Image, decode, decode_bayer, decode_with_limit};

/// How the picture's samples are arranged.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Layout {
    /// One 8-bit grey component.
    Grey,
    /// An RGGB Bayer mosaic (even width and height), coded as four components R, Gr, Gb, B.
    BayerRggb,
}

/// Why encoding failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EncodeError {
    /// Width or height is 0, or a plane is wider or higher than 65,535 (or, for [`encode`],
    /// wider than [`encode::STACK_WIDTH`]).
    Size,
    /// A Bayer mosaic with an odd width or height.
    OddBayer,
    /// Band count 0 or above [`encode::MAX_BANDS`], or a segment index out of range.
    Bands,
    /// The pixel slice is not `width × height` bytes.
    Input,
    /// A scratch buffer (lines, L1) is too small.
    Scratch,
    /// The output buffer (or a segment's share of it) is too short for the code.
    OutputFull,
    /// The cluster could not run the job (fork, offload, DMA or L1 allocation).
    Cluster,
}

impl core::fmt::Display for EncodeError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(match self {
            EncodeError::Size => "picture size out of range",
            EncodeError::OddBayer => "a Bayer mosaic needs an even width and height",
            EncodeError::Bands => "band count or segment index out of range",
            EncodeError::Input => "pixel buffer is not width x height bytes",
            EncodeError::Scratch => "scratch buffer too small",
            EncodeError::OutputFull => "output buffer too short for the coded picture",
            EncodeError::Cluster => "the cluster job could not run",
        })
    }
}

impl core::error::Error for EncodeError {}

/// Why decoding failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DecodeError {
    /// A marker was expected and something else found, or an unknown marker.
    Marker,
    /// A header is malformed (lengths, duplicate frame or component, scan before frame).
    Header,
    /// A valid JPEG-LS feature this decoder does not implement (not 8 bits, NEAR ≠ 0,
    /// interleaved scans, mapping tables, MAXVAL other than 255, other JPEG processes).
    Unsupported,
    /// Preset coding parameters (LSE) that are not valid for 8-bit samples: thresholds out of
    /// order or above 255, RESET below 3 or above 255.
    Preset,
    /// The picture is larger than the decoder's limit.
    TooLarge,
    /// The data ends early (in a header, or before a segment's samples are all decoded).
    Truncated,
    /// An invalid code in the entropy-coded data.
    Code,
    /// A missing or misnumbered restart marker.
    Restart,
    /// [`Image::to_bayer`] of a picture that does not have four components.
    NotBayer,
}

impl core::fmt::Display for DecodeError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(match self {
            DecodeError::Marker => "JPEG-LS: marker expected",
            DecodeError::Header => "JPEG-LS: malformed header",
            DecodeError::Unsupported => "JPEG-LS: unsupported coding parameters",
            DecodeError::Preset => "JPEG-LS: invalid preset coding parameters",
            DecodeError::TooLarge => "JPEG-LS: picture larger than the decoder's limit",
            DecodeError::Truncated => "JPEG-LS: data ends early",
            DecodeError::Code => "JPEG-LS: invalid code in the scan data",
            DecodeError::Restart => "JPEG-LS: missing or misnumbered restart marker",
            DecodeError::NotBayer => "JPEG-LS: not a four-component Bayer picture",
        })
    }
}

impl core::error::Error for DecodeError {}

/// Codes a picture into a new vector (any width the decoder handles).
#[cfg(feature = "alloc")]
pub fn encode_to_vec(plan: &Plan, pixels: &[u8]) -> Result<alloc::vec::Vec<u8>, EncodeError> {
    let mut out = alloc::vec![0u8; plan.max_encoded_len()];
    let mut model = model::Model::new();
    let mut lines = alloc::vec![0u8; 2 * (plan.plane_width() + 2)];
    let mut p = plan.write_prefix(&mut out)?;
    for i in 0..plan.segments() {
        let mut w = Writer::new(&mut out[p..], NoSpill);
        encode_segment(plan, i, pixels, &mut model, &mut lines, &mut w)?;
        p += w.len();
        p += plan.write_separator(i, &mut out[p..])?;
    }
    out.truncate(p);
    Ok(out)
}
