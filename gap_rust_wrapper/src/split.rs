//! Cutting a range of the payload into per-core pieces.
//!
//! Piece `i > 0` of a range `[start, end)` starts at the first position
//! `p >= max(start, end - (n - i) * per)`, `per` being `ceil(len / n)` rounded up to a multiple of
//! `align`, whose keystream position `offset + p` is a
//! multiple of `align`, clamped to `end`. So every piece but possibly the first starts on a
//! keystream block boundary (no core computes a block another core also needs), the pieces cover
//! the range exactly, and the shortfall of a range that does not divide evenly goes to piece 0:
//! core 0, which also drives the DMA, gets the smallest piece. With few bytes the first cores get
//! nothing.

/// Boundaries `b[0] = start <= b[1] <= … <= b[n] = end` of `n` pieces; piece `i` is `b[i]..b[i+1]`.
/// `n` is 1..=8 and `align` a power of two.
#[inline(never)]
pub fn boundaries(start: usize, end: usize, n: usize, offset: u64, align: usize) -> [usize; 9] {
    debug_assert!((1..=8).contains(&n) && align.is_power_of_two() && start <= end);
    // One division for all cuts, and a loop rather than nine unrolled copies (this runs once per
    // call on GAP8, where code size costs instruction-cache refills).
    let per = per(start, end, n, align);
    let mut b = [end; 9];
    let mut i = 0;
    // Cuts 0..n (cut n and later are `end`); a loop bounded by `n`, not unrolled nine times.
    while i < n.min(b.len()) {
        b[i] = cut_per(start, end, per, n, i, offset, align);
        i += 1;
    }
    b
}

/// Boundary `i` (`0..=n`, larger values give `end`) of [`boundaries`], computed on its own.
#[inline(always)]
pub fn cut(start: usize, end: usize, n: usize, i: usize, offset: u64, align: usize) -> usize {
    cut_per(start, end, per(start, end, n, align), n, i, offset, align)
}

/// Piece `i` (`i < n`) of [`boundaries`]: `(b[i], b[i + 1])`, what a core needs each round,
/// without building the whole array (one division).
#[inline(always)]
pub fn piece(
    start: usize,
    end: usize,
    n: usize,
    i: usize,
    offset: u64,
    align: usize,
) -> (usize, usize) {
    let per = per(start, end, n, align);
    (
        cut_per(start, end, per, n, i, offset, align),
        cut_per(start, end, per, n, i + 1, offset, align),
    )
}

/// Bytes per piece: `ceil(len / n)` rounded up to whole `align` units (`align` a power of two;
/// no division for one core, a mask for the rounding: this runs on every core every round).
#[inline(always)]
fn per(start: usize, end: usize, n: usize, align: usize) -> usize {
    let len = end - start;
    let q = if n <= 1 { len } else { len.div_ceil(n) };
    let mask = align.wrapping_sub(1);
    (q + mask) & !mask
}

#[inline(always)]
fn cut_per(
    start: usize,
    end: usize,
    per: usize,
    n: usize,
    i: usize,
    offset: u64,
    align: usize,
) -> usize {
    if i == 0 {
        return start;
    }
    if i >= n {
        return end;
    }
    let target = end.saturating_sub((n - i) * per).max(start);
    // Only the low bits of the keystream position matter (`align` is a power of two).
    let mask = align.wrapping_sub(1);
    let ks = (offset as usize).wrapping_add(target);
    let pad = align.wrapping_sub(ks & mask) & mask;
    target.saturating_add(pad).min(end)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn even_split_on_blocks() {
        let b = boundaries(0, 512, 8, 0, 64);
        assert_eq!(&b[..9], &[0, 64, 128, 192, 256, 320, 384, 448, 512]);
    }

    #[test]
    fn core_zero_gets_the_shortfall() {
        // 127 blocks on 8 cores: core 0 gets 15, the others 16.
        let b = boundaries(0, 127 * 64, 8, 0, 64);
        assert_eq!(b[1], 15 * 64);
        assert!((1..8).all(|i| b[i + 1] - b[i] == 16 * 64));
        // Few blocks: the first cores get nothing.
        let b = boundaries(0, 3 * 64, 8, 0, 64);
        assert_eq!(&b[..9], &[0, 0, 0, 0, 0, 0, 64, 128, 192]);
    }

    #[test]
    fn unaligned_offset_moves_cuts_to_block_starts() {
        // offset 5: keystream block boundaries are at payload positions 59, 123, 187, ...
        let b = boundaries(0, 256, 2, 5, 64);
        assert_eq!(&b[..3], &[0, 187, 256]);
        assert_eq!((5 + 187) % 64, 0);
    }

    /// The closed form above against a straightforward loop.
    fn reference(start: usize, end: usize, n: usize, offset: u64, align: usize) -> [usize; 9] {
        let mut b = [end; 9];
        b[0] = start;
        let per = (end - start).div_ceil(n).div_ceil(align) * align;
        let mask = align as u64 - 1;
        for (i, slot) in b.iter_mut().enumerate().take(n).skip(1) {
            let back = (n - i) * per;
            let target = if back >= end - start {
                start
            } else {
                end - back
            };
            let ks = offset.wrapping_add(target as u64);
            let pad = ((align as u64 - (ks & mask)) & mask) as usize;
            *slot = target.saturating_add(pad).min(end);
        }
        b
    }

    proptest! {
        #[test]
        fn cut_equals_the_loop(start in 0usize..100_000, len in 0usize..200_000, n in 1usize..=8, offset in any::<u64>(), align_log in 0u32..7) {
            let align = 1usize << align_log;
            let b = reference(start, start + len, n, offset, align);
            prop_assert_eq!(boundaries(start, start + len, n, offset, align), b);
            for i in 0..n {
                prop_assert_eq!(piece(start, start + len, n, i, offset, align), (b[i], b[i + 1]));
            }
        }

        #[test]
        fn pieces_cover_range_in_order(start in 0usize..10_000, len in 0usize..20_000, n in 1usize..=8, offset in any::<u64>(), align_log in 0u32..7) {
            let align = 1usize << align_log;
            let end = start + len;
            let b = boundaries(start, end, n, offset, align);
            prop_assert_eq!(b[0], start);
            prop_assert_eq!(b[n], end);
            for i in 0..n {
                prop_assert!(b[i] <= b[i + 1]);
                if i > 0 && b[i] < end {
                    prop_assert_eq!(offset.wrapping_add(b[i] as u64) % align as u64, 0);
                }
            }
        }
    }
}
