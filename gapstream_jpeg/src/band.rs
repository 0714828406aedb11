//! Coding a band: strips of 8 pixel rows (edge-replicated to whole blocks), block by block, with
//! the restart-interval ends, into an [`Out`] that may fill up (then the caller commits it and
//! the step is repeated: every operation here either completes or leaves the state as it was).
use crate::Error;
use crate::entropy::{Bits, MAX_BLOCK_BYTES, MAX_FLUSH_BYTES, Out};
use crate::fdct::{DctCtx, Kernel, Work};
use crate::layout::Layout;
use crate::tables::Tables;

/// What a band's coder carries from block to block: the DC predictor and the pending bits.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CoderState {
    /// Quantised DC of the previous block of the interval (0 at an interval's start).
    pub dc: i32,
    /// Bits not yet emitted.
    pub bits: Bits,
}

/// Codes blocks `from..n` of a strip (8 rows `stride` bytes apart, block `b` at `strip[8 b]`),
/// calling `between` before each block (the cluster lanes move their DMA on there). Returns the
/// first block not coded: `n`, or the block that did not fit `out` (the state and `out` are then
/// as before that block, and `out.full` is cleared).
#[allow(clippy::too_many_arguments)]
#[inline(always)]
pub fn code_blocks<K: Kernel>(
    strip: &[u8],
    stride: usize,
    from: usize,
    n: usize,
    t: &Tables,
    st: &mut CoderState,
    out: &mut Out<'_>,
    w: &mut Work,
    mut between: impl FnMut(),
) -> usize {
    let ctx = DctCtx::new(stride, &t.dct, &t.zz);
    for b in from..n {
        between();
        K::fdct(&strip[8 * b..], &ctx, w);
        let (saved, pos) = (*st, out.pos);
        K::code_block(&w.f8, t, &mut st.dc, &mut st.bits, out);
        if out.full {
            *st = saved;
            out.pos = pos;
            out.full = false;
            return b;
        }
    }
    n
}

/// Codes blocks `from..n` of a strip like [`code_blocks`], but only while `out` keeps room for
/// one more block at its worst and an interval end after it ([`MAX_BLOCK_BYTES`] +
/// [`MAX_FLUSH_BYTES`]), so nothing ever has to be undone: returns the first block not coded
/// (`n` when the strip is done; then its interval end, if any, fits too). The cluster lanes
/// code into L1 chunks this way and commit a chunk once it stops taking blocks. `between` is
/// called before each block for as long as it returns true (the cluster lanes move their DMA
/// on there until every command of the next strip is issued); the blocks after that go to
/// [`Kernel::code_run`] in one call. A kernel that cannot take the strip or `out` codes nothing:
/// the result is then `from` even though `out` had room.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
pub fn code_blocks_reserved<K: Kernel>(
    strip: &[u8],
    stride: usize,
    from: usize,
    n: usize,
    t: &Tables,
    st: &mut CoderState,
    out: &mut Out<'_>,
    w: &mut Work,
    mut between: impl FnMut() -> bool,
) -> usize {
    let ctx = DctCtx::new(stride, &t.dct, &t.zz);
    let limit = out
        .buf
        .len()
        .saturating_sub(MAX_BLOCK_BYTES + MAX_FLUSH_BYTES);
    let mut b = from;
    let mut more = true;
    while b < n && out.pos <= limit {
        if more {
            more = between();
        }
        let to = if more { b + 1 } else { n };
        let next = K::code_run(
            strip,
            &ctx,
            b,
            to,
            t,
            &mut st.dc,
            &mut st.bits,
            out,
            w,
            limit,
        );
        if next == b {
            // The kernel cannot take this strip or output (see `Kernel::code_run`).
            break;
        }
        b = next;
    }
    b
}

/// Ends a restart interval: pads the pending bits to a byte and, unless the scan ends here, puts
/// `RST(interval mod 8)`; the next interval starts with a fresh state. Returns false (nothing
/// changed, `out.full` cleared) when it does not fit.
pub fn end_interval(interval: u32, scan_end: bool, st: &mut CoderState, out: &mut Out<'_>) -> bool {
    let (saved, pos) = (*st, out.pos);
    st.bits.flush(out);
    if !scan_end {
        out.put_bytes(&[0xff, 0xd0 + (interval % 8) as u8]);
    }
    if out.full {
        *st = saved;
        out.pos = pos;
        out.full = false;
        return false;
    }
    *st = CoderState::default();
    true
}

/// Whether MCU row `row` is the last of a restart interval (or of the scan): `(ends, scan_end)`.
pub fn interval_end(layout: &Layout, row: u32) -> (bool, bool) {
    let scan_end = row + 1 == layout.mcu_rows;
    (scan_end || (row + 1) % layout.interval_rows == 0, scan_end)
}

/// Copies strip pixels (MCU row `row`, blocks `x0..x0 + nb`) of the frame `pixels` (laid out as
/// `layout` says) into `strip` (`stride >= 8 nb`), replicating the last column and the last row
/// past the frame's edges.
pub fn fill_strip(
    layout: &Layout,
    pixels: &[u8],
    row: u32,
    x0: usize,
    nb: usize,
    strip: &mut [u8],
    stride: usize,
) {
    let (width, height) = (layout.width as usize, layout.height as usize);
    let left = 8 * x0;
    let valid = (width - left).min(8 * nb);
    for y in 0..8 {
        let sy = (8 * row as usize + y).min(height - 1);
        let src = &pixels[sy * width + left..sy * width + left + valid];
        let dst = &mut strip[y * stride..y * stride + 8 * nb];
        dst[..valid].copy_from_slice(src);
        let last = src[valid - 1];
        dst[valid..].fill(last);
    }
}

/// Edge replication in a strip whose first `valid_rows` rows hold `valid_cols` pixels each
/// (what the DMA brought): fills the rest of those rows with their last pixel and the rows
/// below with the last valid row, up to 8 rows of `8 nb` pixels.
pub fn replicate_edges(
    strip: &mut [u8],
    stride: usize,
    nb: usize,
    valid_rows: usize,
    valid_cols: usize,
) {
    let w = 8 * nb;
    if valid_cols < w {
        for y in 0..valid_rows {
            let r = &mut strip[y * stride..y * stride + w];
            let last = r[valid_cols - 1];
            r[valid_cols..].fill(last);
        }
    }
    for y in valid_rows..8 {
        strip.copy_within(
            (valid_rows - 1) * stride..(valid_rows - 1) * stride + w,
            y * stride,
        );
    }
}

/// Blocks per strip when coding a band without DMA (a strip is copied to a buffer on the stack).
pub const SEQ_STRIP_BLOCKS: usize = 16;

#[repr(C, align(4))]
struct StripBuf([u8; 64 * SEQ_STRIP_BLOCKS]);

/// The strips of an MCU row of `mcus_x` blocks with strips of at most `max` blocks: `(count,
/// blocks per strip)`; the last strip holds the rest.
pub fn strips(mcus_x: u32, max: usize) -> (usize, usize) {
    let count = (mcus_x as usize).div_ceil(max.max(1));
    (count, (mcus_x as usize).div_ceil(count))
}

/// Codes band `band` of a frame held in memory (`pixels`, `width × height`, row-major) into
/// `out`, from its first block to its end: its last interval's padding and, unless it is the
/// frame's last band, the restart marker after it. The band's coded bytes do not depend on where
/// they are written, so a band coded on its own is byte-identical to the same band in a
/// sequential encode. [`Error::OutputFull`] when `out` has no room.
pub fn encode_band<K: Kernel>(
    layout: &Layout,
    t: &Tables,
    band: u32,
    pixels: &[u8],
    out: &mut Out<'_>,
) -> Result<(), Error> {
    let (w, h) = (layout.width as usize, layout.height as usize);
    if pixels.len() != w * h {
        return Err(Error::Size);
    }
    let b = layout.band(band);
    let (count, per) = strips(layout.mcus_x, SEQ_STRIP_BLOCKS);
    let stride = 8 * per;
    let mut buf = StripBuf([0; 64 * SEQ_STRIP_BLOCKS]);
    let mut st = CoderState::default();
    let mut w = Work::default();
    for row in b.first_row..b.first_row + b.rows {
        for s in 0..count {
            let x0 = s * per;
            let nb = per.min(layout.mcus_x as usize - x0);
            fill_strip(layout, pixels, row, x0, nb, &mut buf.0, stride);
            if code_blocks::<K>(&buf.0, stride, 0, nb, t, &mut st, out, &mut w, || {}) < nb {
                return Err(Error::OutputFull);
            }
        }
        let (ends, scan_end) = interval_end(layout, row);
        if ends && !end_interval(row / layout.interval_rows, scan_end, &mut st, out) {
            return Err(Error::OutputFull);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strips_are_balanced() {
        assert_eq!(strips(41, 12), (4, 11));
        assert_eq!(strips(41, 16), (3, 14));
        assert_eq!(strips(1, 16), (1, 1));
        assert_eq!(strips(16, 16), (1, 16));
        assert_eq!(strips(17, 16), (2, 9));
    }

    #[test]
    fn edges_replicate_like_fill_strip() {
        // A 13 x 5 frame: one MCU row, two blocks, 3 columns and 3 rows of padding.
        let (w, h) = (13usize, 5usize);
        let pixels: Vec<u8> = (0..w * h).map(|i| (i * 7) as u8).collect();
        let stride = 24;
        let mut a = vec![0u8; 8 * stride];
        let layout = Layout::new(w as u16, h as u16, 1).unwrap();
        fill_strip(&layout, &pixels, 0, 0, 2, &mut a, stride);
        let mut b = vec![0u8; 8 * stride];
        for y in 0..h {
            b[y * stride..y * stride + w].copy_from_slice(&pixels[y * w..(y + 1) * w]);
        }
        replicate_edges(&mut b, stride, 2, h, w);
        for y in 0..8 {
            assert_eq!(
                a[y * stride..y * stride + 16],
                b[y * stride..y * stride + 16]
            );
            assert_eq!(a[y * stride + 15], pixels[y.min(h - 1) * w + w - 1]);
        }
    }
}
