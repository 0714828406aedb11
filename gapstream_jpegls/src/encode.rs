//! The encoder: the stream's layout ([`Plan`]), one segment (a restart interval of one
//! component) at a time ([`encode_segment`]), the join of segments coded elsewhere ([`join`]),
//! and the whole stream in one call ([`encode`]).
use crate::bits::{NoSpill, Sink, Writer};
use crate::line::{Ops, Portable};
use crate::model::{Model, Preset};
use crate::{EncodeError, Layout};
use core::ops::Range;

/// Largest width and height (16-bit fields of SOF55).
pub const MAX_DIM: usize = 65535;
/// Most bands per component (restart intervals per scan).
pub const MAX_BANDS: usize = 64;
/// Bytes between two segments at most (an SOS of a new scan: 10; a restart marker: 2; EOI: 2).
pub const MAX_SEPARATOR: usize = 10;

/// Bytes of the LSE segment that states preset coding parameters (marker, length, id 1, five
/// 16-bit values).
pub const LSE_LEN: usize = 15;

/// Marker codes.
pub(crate) mod marker {
    pub const SOI: u8 = 0xd8;
    pub const EOI: u8 = 0xd9;
    pub const SOF55: u8 = 0xf7;
    pub const LSE: u8 = 0xf8;
    pub const SOS: u8 = 0xda;
    pub const DRI: u8 = 0xdd;
    pub const RST0: u8 = 0xd0;
}

/// Where one segment's samples come from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Segment {
    /// Component (0 for grey; 0..4 = R, Gr, Gb, B for a Bayer RGGB mosaic).
    pub component: usize,
    /// Band of the component (restart interval within its scan).
    pub band: usize,
    /// First line of the component's plane.
    pub first_line: usize,
    /// Lines.
    pub lines: usize,
}

/// The layout of one coded picture: its components, planes and bands. Every band but a plane's
/// last has the same number of lines (the restart interval of DRI).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Plan {
    width: usize,
    height: usize,
    layout: Layout,
    /// Plane size (the picture's for grey, half of it in each direction for Bayer).
    pw: usize,
    ph: usize,
    comps: usize,
    /// Lines per band (the restart interval; = ph without restart markers).
    interval: usize,
    /// Bands per component.
    bands: usize,
    /// The preset coding parameters (an LSE segment when they are not the defaults).
    preset: Preset,
}

impl Plan {
    /// The layout of a `width × height` picture cut into (at most) `bands` bands per component.
    /// With `bands = n` each band has `ceil(lines / n)` lines, so a small picture may get fewer.
    /// The preset coding parameters are [`Preset::for_bands`] of the resulting band count (the
    /// defaults below 8 bands); [`Plan::with_preset`] sets others.
    pub fn new(
        width: usize,
        height: usize,
        layout: Layout,
        bands: usize,
    ) -> Result<Plan, EncodeError> {
        if width == 0 || height == 0 {
            return Err(EncodeError::Size);
        }
        let (pw, ph, comps) = match layout {
            Layout::Grey => (width, height, 1),
            Layout::BayerRggb => {
                if width % 2 != 0 || height % 2 != 0 {
                    return Err(EncodeError::OddBayer);
                }
                (width / 2, height / 2, 4)
            }
        };
        if pw > MAX_DIM || ph > MAX_DIM {
            return Err(EncodeError::Size);
        }
        if bands == 0 || bands > MAX_BANDS {
            return Err(EncodeError::Bands);
        }
        let interval = ph.div_ceil(bands.min(ph));
        let bands = ph.div_ceil(interval);
        Ok(Plan {
            width,
            height,
            layout,
            pw,
            ph,
            comps,
            interval,
            bands,
            preset: Preset::for_bands(bands),
        })
    }

    /// The same layout coded with the preset parameters `preset` (thresholds and RESET): the
    /// stream then carries them in an LSE segment, which every conforming decoder honours.
    pub fn with_preset(mut self, preset: Preset) -> Plan {
        self.preset = preset;
        self
    }

    /// The preset coding parameters ([`Preset::DEFAULT`] unless [`Plan::with_preset`]).
    pub fn preset(&self) -> Preset {
        self.preset
    }

    /// Picture width (samples of the input).
    pub fn width(&self) -> usize {
        self.width
    }
    /// Picture height.
    pub fn height(&self) -> usize {
        self.height
    }
    /// Grey or Bayer.
    pub fn layout(&self) -> Layout {
        self.layout
    }
    /// Width of a component's plane.
    pub fn plane_width(&self) -> usize {
        self.pw
    }
    /// Height of a component's plane.
    pub fn plane_height(&self) -> usize {
        self.ph
    }
    /// Components (scans).
    pub fn components(&self) -> usize {
        self.comps
    }
    /// Bands per component.
    pub fn bands(&self) -> usize {
        self.bands
    }
    /// Lines per band (DRI's restart interval).
    pub fn interval(&self) -> usize {
        self.interval
    }
    /// Segments: components × bands, in stream order.
    pub fn segments(&self) -> usize {
        self.comps * self.bands
    }

    /// Segment `i` (`i < segments()`).
    pub fn segment(&self, i: usize) -> Segment {
        let (component, band) = (i / self.bands, i % self.bands);
        let first_line = band * self.interval;
        Segment {
            component,
            band,
            first_line,
            lines: self.interval.min(self.ph.saturating_sub(first_line)),
        }
    }

    /// Worst-case bytes of segment `i`: at most 32 bits a sample (LIMIT; a run costs less), 7 data
    /// bits in a byte after 0xFF, and the 0x00 after a final 0xFF.
    pub fn max_segment_len(&self, i: usize) -> usize {
        let samples = self.segment(i).lines * self.pw;
        (32 * samples).div_ceil(7) + 2
    }

    /// Bytes before the first segment: SOI, SOF55, LSE (with parameters other than the
    /// defaults), DRI (with restart markers), the first SOS.
    pub fn prefix_len(&self) -> usize {
        2 + (2 + 8 + 3 * self.comps)
            + if self.preset.is_default() { 0 } else { LSE_LEN }
            + if self.bands > 1 { 6 } else { 0 }
            + 10
    }

    /// Bytes after segment `i`: a restart marker, the next scan's SOS, or EOI after the last.
    pub fn separator_len(&self, i: usize) -> usize {
        if i + 1 == self.segments() {
            2
        } else if (i + 1) % self.bands == 0 {
            10
        } else {
            2
        }
    }

    /// Worst-case bytes of the whole stream ([`encode`] never needs more).
    pub fn max_encoded_len(&self) -> usize {
        self.prefix_len()
            + (0..self.segments())
                .map(|i| self.max_segment_len(i) + self.separator_len(i))
                .sum::<usize>()
    }

    /// Writes the prefix ([`Plan::prefix_len`] bytes).
    pub fn write_prefix(&self, out: &mut [u8]) -> Result<usize, EncodeError> {
        let n = self.prefix_len();
        let out = out.get_mut(..n).ok_or(EncodeError::OutputFull)?;
        let mut p = 0;
        let mut put = |b: &[u8]| {
            out[p..p + b.len()].copy_from_slice(b);
            p += b.len();
        };
        put(&[0xff, marker::SOI, 0xff, marker::SOF55]);
        let lf = (8 + 3 * self.comps) as u16;
        put(&lf.to_be_bytes());
        put(&[8]);
        put(&(self.ph as u16).to_be_bytes());
        put(&(self.pw as u16).to_be_bytes());
        put(&[self.comps as u8]);
        for c in 0..self.comps {
            put(&[c as u8 + 1, 0x11, 0]);
        }
        if !self.preset.is_default() {
            // LSE, id 1: MAXVAL, T1, T2, T3, RESET (C.2.4.1.1).
            let p = self.preset;
            put(&[0xff, marker::LSE, 0, 13, 1]);
            for v in [255, p.t1, p.t2, p.t3, p.reset] {
                put(&[0, v]);
            }
        }
        if self.bands > 1 {
            put(&[0xff, marker::DRI, 0, 4]);
            put(&(self.interval as u16).to_be_bytes());
        }
        put(&sos(0));
        Ok(n)
    }

    /// Writes the separator after segment `i` ([`Plan::separator_len`] bytes).
    pub fn write_separator(&self, i: usize, out: &mut [u8]) -> Result<usize, EncodeError> {
        let n = self.separator_len(i);
        let out = out.get_mut(..n).ok_or(EncodeError::OutputFull)?;
        if i + 1 == self.segments() {
            out.copy_from_slice(&[0xff, marker::EOI]);
        } else if (i + 1) % self.bands == 0 {
            out.copy_from_slice(&sos((i + 1) / self.bands));
        } else {
            // RSTm counts the restart markers of a scan modulo 8.
            let m = (i % self.bands) as u8 & 7;
            out.copy_from_slice(&[0xff, marker::RST0 + m]);
        }
        Ok(n)
    }

    /// Where segment `i` is coded when all segments are coded into one buffer of `out_len`
    /// bytes at once (the cluster's layout before [`join`]): the prefix, then equal regions, each
    /// [`MAX_SEPARATOR`] bytes longer than the range returned, so that every segment moves
    /// towards the front (or stays) when joined.
    pub fn region(&self, i: usize, out_len: usize) -> Range<usize> {
        let p = self.prefix_len();
        let share = out_len.saturating_sub(p) / self.segments();
        let start = p + i * share;
        start..start + share.saturating_sub(MAX_SEPARATOR)
    }

    /// Reads the samples of line `line` of component `c`'s plane from the picture into
    /// `dst[..plane_width]`.
    #[inline]
    pub fn plane_line(&self, pixels: &[u8], c: usize, line: usize, dst: &mut [u8]) {
        match self.layout {
            Layout::Grey => {
                dst[..self.pw].copy_from_slice(&pixels[line * self.width..][..self.pw]);
            }
            Layout::BayerRggb => {
                let row = &pixels[(2 * line + c / 2) * self.width..][..self.width];
                for (d, s) in dst[..self.pw]
                    .iter_mut()
                    .zip(row[c % 2..].iter().step_by(2))
                {
                    *d = *s;
                }
            }
        }
    }
}

/// SOS of a one-component scan (component `c`): NEAR = 0, ILV = 0, no mapping table.
fn sos(c: usize) -> [u8; 10] {
    [0xff, marker::SOS, 0, 8, 1, c as u8 + 1, 0, 0, 0, 0]
}

/// Codes segment `i` of `plan` from the whole picture `pixels` with `w` (its entropy-coded
/// bytes, without marker; `w.finish()` included: the tail stays in `w`'s buffer). `model` is
/// reset here; `lines` holds two lines of the plane (`2 * (plane_width + 2)` bytes). The first
/// line of a segment is coded as the first line of a picture (the line above is zero), as the
/// standard requires after a restart marker. The portable kernel; [`encode_segment_with`] takes
/// another.
pub fn encode_segment<S: Sink>(
    plan: &Plan,
    i: usize,
    pixels: &[u8],
    model: &mut Model,
    lines: &mut [u8],
    w: &mut Writer<'_, S>,
) -> Result<(), EncodeError> {
    encode_segment_with::<Portable, S>(plan, i, pixels, model, lines, w)
}

/// [`encode_segment`] with the kernel `K`.
pub fn encode_segment_with<K: Ops, S: Sink>(
    plan: &Plan,
    i: usize,
    pixels: &[u8],
    model: &mut Model,
    lines: &mut [u8],
    w: &mut Writer<'_, S>,
) -> Result<(), EncodeError> {
    if pixels.len() != plan.width * plan.height {
        return Err(EncodeError::Input);
    }
    if i >= plan.segments() {
        return Err(EncodeError::Bands);
    }
    let pw = plan.pw;
    let lines = lines.get_mut(..2 * (pw + 2)).ok_or(EncodeError::Scratch)?;
    lines.fill(0);
    let (mut a, mut b) = lines.split_at_mut(pw + 2);
    model.reset_at = plan.preset.reset as u16;
    model.reset();
    let table;
    let quant = if plan.preset.is_default() {
        K::QUANT
    } else {
        table = plan.preset.table(K::QUANT_SCALE);
        &table
    };
    let seg = plan.segment(i);
    for y in seg.first_line..seg.first_line + seg.lines {
        plan.plane_line(pixels, seg.component, y, &mut b[1..]);
        K::encode_line(model, quant, w, a, b, pw);
        if w.overflowed() {
            return Err(EncodeError::OutputFull);
        }
        core::mem::swap(&mut a, &mut b);
    }
    w.finish();
    if w.overflowed() {
        return Err(EncodeError::OutputFull);
    }
    Ok(())
}

/// Joins segments coded in place (segment `i` at `out[starts[i]..starts[i] + lens[i]]`, each at
/// or after where it ends up, in order: [`Plan::region`] gives such places) into one stream:
/// writes the prefix, moves every segment to the front and writes the separators. Returns the
/// stream's length.
pub fn join(
    plan: &Plan,
    out: &mut [u8],
    starts: &[usize],
    lens: &[usize],
) -> Result<usize, EncodeError> {
    let n = plan.segments();
    if starts.len() < n || lens.len() < n {
        return Err(EncodeError::Bands);
    }
    let mut p = plan.prefix_len();
    for i in 0..n {
        let (s, l) = (starts[i], lens[i]);
        let end = s.checked_add(l).ok_or(EncodeError::OutputFull)?;
        if s < p || end > out.len() {
            return Err(EncodeError::OutputFull);
        }
        if i == 0 {
            plan.write_prefix(&mut out[..p])?;
        }
        out.copy_within(s..end, p);
        p += l;
        if i + 1 < n && p + plan.separator_len(i) > starts[i + 1] {
            return Err(EncodeError::OutputFull);
        }
        p += plan.write_separator(i, out.get_mut(p..).ok_or(EncodeError::OutputFull)?)?;
    }
    Ok(p)
}

/// Model and line buffers for [`encode`] on the stack: pictures up to this many samples wide
/// (per plane).
pub const STACK_WIDTH: usize = 1024;

/// Codes the whole picture into `out` on the calling core, segment after segment. Returns the
/// stream's length; [`EncodeError::OutputFull`] when `out` is too short
/// ([`Plan::max_encoded_len`] always suffices).
pub fn encode(plan: &Plan, pixels: &[u8], out: &mut [u8]) -> Result<usize, EncodeError> {
    encode_with::<Portable>(plan, pixels, out)
}

/// [`encode`] with the kernel variant `K` (the same stream with every variant).
pub fn encode_with<K: Ops>(
    plan: &Plan,
    pixels: &[u8],
    out: &mut [u8],
) -> Result<usize, EncodeError> {
    if plan.pw > STACK_WIDTH {
        return Err(EncodeError::Size);
    }
    let mut model = Model::new();
    let mut lines = [0u8; 2 * (STACK_WIDTH + 2)];
    let mut p = plan.write_prefix(out)?;
    for i in 0..plan.segments() {
        let mut w = Writer::new(out.get_mut(p..).ok_or(EncodeError::OutputFull)?, NoSpill);
        encode_segment_with::<K, _>(plan, i, pixels, &mut model, &mut lines, &mut w)?;
        p += w.len();
        p += plan.write_separator(i, out.get_mut(p..).ok_or(EncodeError::OutputFull)?)?;
    }
    Ok(p)
}
