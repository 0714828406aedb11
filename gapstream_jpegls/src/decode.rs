//! The decoder (feature `alloc`): baseline JPEG-LS as this crate and CharLS write it — 8 bits,
//! NEAR = 0, any valid preset thresholds and RESET (LSE id 1, MAXVAL 255), one component per scan (ILV = 0),
//! any number of components, with or without restart markers. It never panics: every malformed
//! input gives a [`DecodeError`].
use crate::DecodeError;
use crate::bits::BitReader;
use crate::encode::marker;
use crate::model::{J, LIMIT, MAXVAL, Model, Preset, QBPP, RunCtx, context_with, predict};
use alloc::vec;
use alloc::vec::Vec;

/// Default limit on `width × height × components` ([`decode_with_limit`]).
pub const DEFAULT_MAX_SAMPLES: usize = 1 << 24;

/// A decoded picture: `components` planes of `width × height` samples, one after the other.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Image {
    /// Samples per line of each component.
    pub width: usize,
    /// Lines of each component.
    pub height: usize,
    /// Components.
    pub components: usize,
    /// Component-planar samples: component `c` at `c * width * height`.
    pub samples: Vec<u8>,
}

impl Image {
    /// Component `c`'s plane.
    pub fn plane(&self, c: usize) -> Option<&[u8]> {
        let n = self.width * self.height;
        self.samples.get(c * n..(c + 1) * n)
    }

    /// The RGGB mosaic (`2 width × 2 height`) of a four-component picture (R, Gr, Gb, B), as
    /// [`crate::Layout::BayerRggb`] codes it.
    pub fn to_bayer(&self) -> Result<Vec<u8>, DecodeError> {
        if self.components != 4 {
            return Err(DecodeError::NotBayer);
        }
        let (w, h) = (self.width, self.height);
        let mut out = vec![0u8; 4 * w * h];
        for c in 0..4 {
            let plane = &self.samples[c * w * h..(c + 1) * w * h];
            for y in 0..h {
                let row = &mut out[(2 * y + c / 2) * 2 * w..][..2 * w];
                for (x, s) in plane[y * w..(y + 1) * w].iter().enumerate() {
                    row[2 * x + c % 2] = *s;
                }
            }
        }
        Ok(out)
    }
}

/// Decodes a JPEG-LS stream ([`DEFAULT_MAX_SAMPLES`] at most).
pub fn decode(data: &[u8]) -> Result<Image, DecodeError> {
    decode_with_limit(data, DEFAULT_MAX_SAMPLES)
}

/// Decodes a Bayer stream of this crate back to the `2w × 2h` mosaic: `(width, height, pixels)`.
pub fn decode_bayer(data: &[u8]) -> Result<(usize, usize, Vec<u8>), DecodeError> {
    let img = decode(data)?;
    let m = img.to_bayer()?;
    Ok((2 * img.width, 2 * img.height, m))
}

struct Reader<'a> {
    d: &'a [u8],
    p: usize,
}

impl<'a> Reader<'a> {
    fn u8(&mut self) -> Result<u8, DecodeError> {
        let b = *self.d.get(self.p).ok_or(DecodeError::Truncated)?;
        self.p += 1;
        Ok(b)
    }
    fn u16(&mut self) -> Result<u16, DecodeError> {
        Ok(u16::from_be_bytes([self.u8()?, self.u8()?]))
    }
    fn take(&mut self, n: usize) -> Result<&'a [u8], DecodeError> {
        let end = self.p.checked_add(n).ok_or(DecodeError::Truncated)?;
        let s = self.d.get(self.p..end).ok_or(DecodeError::Truncated)?;
        self.p = end;
        Ok(s)
    }
    /// The next marker code (skipping fill bytes 0xFF).
    fn marker(&mut self) -> Result<u8, DecodeError> {
        if self.u8()? != 0xff {
            return Err(DecodeError::Marker);
        }
        loop {
            let m = self.u8()?;
            if m != 0xff {
                return Ok(m);
            }
        }
    }
    /// A marker segment's body (after its 2-byte length).
    fn segment(&mut self) -> Result<&'a [u8], DecodeError> {
        let len = self.u16()? as usize;
        if len < 2 {
            return Err(DecodeError::Header);
        }
        self.take(len - 2)
    }
}

struct Frame {
    width: usize,
    height: usize,
    ids: Vec<u8>,
}

/// Decodes with a limit on `width × height × components` (memory the decoder allocates).
pub fn decode_with_limit(data: &[u8], max_samples: usize) -> Result<Image, DecodeError> {
    let mut r = Reader { d: data, p: 0 };
    if r.marker()? != marker::SOI {
        return Err(DecodeError::Marker);
    }
    let mut frame: Option<Frame> = None;
    let mut samples: Vec<u8> = Vec::new();
    let mut done: Vec<bool> = Vec::new();
    let mut interval = 0usize;
    let mut preset = Preset::DEFAULT;
    loop {
        let m = r.marker()?;
        match m {
            marker::SOF55 => {
                if frame.is_some() {
                    return Err(DecodeError::Header);
                }
                let b = r.segment()?;
                let f = parse_sof(b)?;
                let n = f
                    .width
                    .checked_mul(f.height)
                    .and_then(|n| n.checked_mul(f.ids.len()))
                    .filter(|&n| n <= max_samples)
                    .ok_or(DecodeError::TooLarge)?;
                samples = vec![0u8; n];
                done = vec![false; f.ids.len()];
                frame = Some(f);
            }
            marker::LSE => preset = parse_lse(r.segment()?)?,
            marker::DRI => {
                let b = r.segment()?;
                interval = match b.len() {
                    2..=4 => b.iter().fold(0usize, |v, &x| (v << 8) | x as usize),
                    _ => return Err(DecodeError::Header),
                };
            }
            marker::SOS => {
                let f = frame.as_ref().ok_or(DecodeError::Header)?;
                let b = r.segment()?;
                let c = parse_sos(b, f)?;
                if done[c] {
                    return Err(DecodeError::Header);
                }
                let plane = &mut samples[c * f.width * f.height..(c + 1) * f.width * f.height];
                let used = decode_scan(&data[r.p..], f.width, f.height, interval, preset, plane)?;
                r.p += used;
                done[c] = true;
            }
            marker::EOI => break,
            0xe0..=0xef | 0xfe => {
                r.segment()?;
            }
            0xc0..=0xcf | 0xf9..=0xfb => return Err(DecodeError::Unsupported),
            _ => return Err(DecodeError::Marker),
        }
    }
    let f = frame.ok_or(DecodeError::Header)?;
    if done.iter().any(|d| !d) {
        return Err(DecodeError::Truncated);
    }
    Ok(Image {
        width: f.width,
        height: f.height,
        components: f.ids.len(),
        samples,
    })
}

fn parse_sof(b: &[u8]) -> Result<Frame, DecodeError> {
    let mut r = Reader { d: b, p: 0 };
    if r.u8()? != 8 {
        return Err(DecodeError::Unsupported);
    }
    let height = r.u16()? as usize;
    let width = r.u16()? as usize;
    let nf = r.u8()? as usize;
    if height == 0 || width == 0 || nf == 0 {
        // Height 0 (a DNL marker later) is not supported.
        return Err(DecodeError::Unsupported);
    }
    let mut ids = Vec::with_capacity(nf);
    for _ in 0..nf {
        let id = r.u8()?;
        let hv = r.u8()?;
        let _tq = r.u8()?;
        if hv != 0x11 {
            return Err(DecodeError::Unsupported);
        }
        if ids.contains(&id) {
            return Err(DecodeError::Header);
        }
        ids.push(id);
    }
    if r.p != b.len() {
        return Err(DecodeError::Header);
    }
    Ok(Frame { width, height, ids })
}

/// The preset coding parameters of an LSE segment (id 1; C.2.4.1.1): 0 stands for a default;
/// MAXVAL must be 255 (or 0), the thresholds and RESET must be valid for it
/// ([`DecodeError::Preset`] otherwise). Other LSE ids (mapping tables, oversize dimensions) are
/// [`DecodeError::Unsupported`].
fn parse_lse(b: &[u8]) -> Result<Preset, DecodeError> {
    let mut r = Reader { d: b, p: 0 };
    if r.u8()? != 1 {
        return Err(DecodeError::Unsupported);
    }
    if b.len() != 11 {
        return Err(DecodeError::Header);
    }
    let maxval = r.u16()?;
    if maxval != 0 && maxval as i32 != MAXVAL {
        return Err(DecodeError::Unsupported);
    }
    let d = Preset::DEFAULT;
    let mut v = [d.t1, d.t2, d.t3, d.reset];
    for x in &mut v {
        match r.u16()? {
            0 => {}
            n => *x = u8::try_from(n).map_err(|_| DecodeError::Preset)?,
        }
    }
    Preset::new(v[0], v[1], v[2], v[3]).ok_or(DecodeError::Preset)
}

fn parse_sos(b: &[u8], f: &Frame) -> Result<usize, DecodeError> {
    let mut r = Reader { d: b, p: 0 };
    let ns = r.u8()?;
    if ns != 1 {
        return Err(DecodeError::Unsupported);
    }
    let id = r.u8()?;
    let tm = r.u8()?;
    let near = r.u8()?;
    let ilv = r.u8()?;
    let al_ah = r.u8()?;
    if tm != 0 || near != 0 || ilv != 0 || al_ah != 0 || r.p != b.len() {
        return Err(DecodeError::Unsupported);
    }
    f.ids
        .iter()
        .position(|&x| x == id)
        .ok_or(DecodeError::Header)
}

/// Decodes one scan's entropy-coded data (starting at `data[0]`) into `plane`; returns the bytes
/// used, up to the marker that ends the scan.
fn decode_scan(
    data: &[u8],
    width: usize,
    height: usize,
    interval: usize,
    preset: Preset,
    plane: &mut [u8],
) -> Result<usize, DecodeError> {
    let interval = if interval == 0 { height } else { interval };
    let mut model = Model::with_reset(preset.reset as u16);
    let quant = preset.table(1);
    let mut lines = vec![0u8; 2 * (width + 2)];
    let mut p = 0;
    let mut line = 0;
    let mut rst = 0u8;
    loop {
        // The segment: up to the next marker (0xFF followed by a byte >= 0x80).
        let mut end = p;
        while end < data.len()
            && !(data[end] == 0xff && data.get(end + 1).is_none_or(|&b| b >= 0x80))
        {
            end += 1;
        }
        if end >= data.len() {
            return Err(DecodeError::Truncated);
        }
        let n = interval.min(height - line);
        let out = &mut plane[line * width..(line + n) * width];
        decode_segment(&data[p..end], width, n, &mut model, &quant, &mut lines, out)?;
        line += n;
        p = end;
        if line == height {
            return Ok(p);
        }
        // A restart marker must follow, numbered modulo 8.
        let mut q = p + 1;
        while data.get(q) == Some(&0xff) {
            q += 1;
        }
        match data.get(q) {
            Some(&m) if m == marker::RST0 + rst => {}
            Some(_) => return Err(DecodeError::Restart),
            None => return Err(DecodeError::Truncated),
        }
        rst = (rst + 1) & 7;
        p = q + 1;
    }
}

/// Decodes the LG(k, limit) code of a mapped error (A.5.3); `None` for an invalid code.
#[inline(always)]
fn golomb(r: &mut BitReader<'_>, k: u32, limit: u32) -> Option<u32> {
    let max = limit - QBPP - 1;
    let z = r.unary(max);
    if z < max {
        Some((z << k) | r.bits(k))
    } else if z == max {
        Some(r.bits(QBPP) + 1)
    } else {
        None
    }
}

fn decode_segment(
    data: &[u8],
    width: usize,
    lines: usize,
    m: &mut Model,
    quant: &[i8; 511],
    buf: &mut [u8],
    out: &mut [u8],
) -> Result<(), DecodeError> {
    m.reset();
    buf.fill(0);
    let mut r = BitReader::new(data);
    let (mut a, mut b) = buf.split_at_mut(width + 2);
    for y in 0..lines {
        decode_line(m, quant, &mut r, a, b, width)?;
        out[y * width..(y + 1) * width].copy_from_slice(&b[1..=width]);
        core::mem::swap(&mut a, &mut b);
    }
    if r.ran_out() {
        return Err(DecodeError::Truncated);
    }
    Ok(())
}

fn decode_line(
    m: &mut Model,
    quant: &[i8; 511],
    r: &mut BitReader<'_>,
    prev: &mut [u8],
    cur: &mut [u8],
    width: usize,
) -> Result<(), DecodeError> {
    prev[width + 1] = prev[width];
    cur[0] = prev[1];
    let mut i = 1;
    let mut rb = prev[0] as i32;
    let mut rd = prev[1] as i32;
    let reset = m.reset_at as i32;
    while i <= width {
        let ra = cur[i - 1] as i32;
        let rc = rb;
        rb = rd;
        rd = prev[i + 1] as i32;
        let q = context_with(quant, rd, rb, rc, ra);
        if q != 0 {
            let sign = q >> 31;
            let ctx = &mut m.ctx[((q ^ sign) - sign) as usize];
            let k = ctx.k();
            let merr = golomb(r, k, LIMIT).ok_or(DecodeError::Code)?;
            let e = ((merr >> 1) as i32) ^ -((merr & 1) as i32);
            let err = e ^ ctx.correction(k);
            if !(-128..=127).contains(&err) {
                return Err(DecodeError::Code);
            }
            let px = (predict(ra, rb, rc) + ((ctx.c as i32 ^ sign) - sign)).clamp(0, 255);
            cur[i] = (px + ((err ^ sign) - sign)) as u8;
            ctx.update(err, reset);
            i += 1;
        } else {
            // Run mode.
            let left = width + 1 - i;
            let mut n = 0;
            let mut eol = false;
            while r.bit() {
                let len = 1usize << J[m.run_index as usize];
                let c = len.min(left - n);
                n += c;
                if c == len && m.run_index < 31 {
                    m.run_index += 1;
                }
                if n == left {
                    eol = true;
                    break;
                }
            }
            if !eol {
                n += r.bits(J[m.run_index as usize] as u32) as usize;
                if n >= left {
                    // A run that does not end inside the line is coded with ones only.
                    return Err(DecodeError::Code);
                }
            }
            cur[i..i + n].fill(ra as u8);
            i += n;
            if eol {
                break;
            }
            let rbx = prev[i] as i32;
            let ritype = (ra == rbx) as i32;
            let limit = LIMIT - J[m.run_index as usize] as u32 - 1;
            let ctx: &mut RunCtx = &mut m.run[ritype as usize];
            let k = ctx.k(ritype);
            let emerr = golomb(r, k, limit).ok_or(DecodeError::Code)? as i32;
            let t = emerr + ritype;
            let map = t & 1;
            let abs = (t + map) / 2;
            let err = if (k != 0 || 2 * ctx.nn >= ctx.n) == (map == 1) {
                -abs
            } else {
                abs
            };
            if !(-128..=127).contains(&err) || ctx.map(err, k) as i32 != map {
                return Err(DecodeError::Code);
            }
            let x = if ritype == 1 {
                ra + err
            } else if rbx > ra {
                rbx + err
            } else {
                rbx - err
            };
            cur[i] = x as u8;
            ctx.update(err, emerr, ritype, reset);
            m.run_index = m.run_index.saturating_sub(1);
            i += 1;
            rb = prev[i - 1] as i32;
            rd = prev[i] as i32;
        }
    }
    Ok(())
}
