//! How a frame is cut: the MCU grid, the bands (one per core), the restart intervals, the
//! headers, and bounds on the coded size.
//!
//! A greyscale baseline JPEG has one 8×8 block per MCU. The frame's MCU rows are cut into bands
//! of `band_rows` whole MCU rows, one band per core, and each band is coded on its own: its DC
//! predictor starts at 0 and its coded bytes end on a byte boundary. T.81's restart markers make
//! exactly that legal: with a restart interval (DRI) of `interval_rows × mcus_per_row` MCUs every
//! interval is coded independently and followed by `RSTn` (n = interval index mod 8), so the
//! bands' byte strings, each ending with its `RSTn`, are joined by concatenation.
//!
//! DRI is one interval for the whole scan, so every band but the last must be a whole number of
//! intervals. The choice here: `band_rows = ceil(mcu_rows / cores)` and one interval per band
//! (`interval_rows = band_rows`); only the last band may be shorter, which T.81 allows (the scan
//! ends inside an interval). The slowest core codes `ceil(mcu_rows / cores)` rows, the least any
//! cut into whole MCU rows can give, and the frame carries `bands - 1` markers (324×244 on 8
//! cores: 31 MCU rows as 7 bands of 4 and one of 3, 7 markers). A restart interval every MCU row
//! would give the same balance with 30 markers and 30 DC predictor resets (about 2.5 bytes
//! each). When `band_rows × mcus_per_row` exceeds DRI's 16 bits (frames over ~4 megapixels per
//! band) the interval shrinks to the largest whole number of rows that fits and each band holds
//! several intervals. One band means no restart markers (no DRI), as libjpeg writes by default.
//!
//! A cut by load ([`Layout::balanced`]) takes a short restart interval instead (a few MCUs, so a
//! band may start and end inside a row) and gives each band a run of whole intervals whose
//! share of a per-interval load (the previous frame's, as the cluster encoder measures it) is
//! as close to equal as whole intervals allow. The file's bytes depend on the interval alone,
//! not on where the bands are cut.
use crate::entropy::MAX_FLUSH_BYTES;
use crate::tables::{
    STD_AC_LUMA_BITS, STD_AC_LUMA_VALUES, STD_DC_LUMA_BITS, STD_DC_LUMA_VALUES, Tables,
};
use crate::{Error, entropy::Out};

/// Bits one block codes to at most (DC 9 + 11, 63 AC coefficients of 16 + 10).
pub const MAX_BLOCK_BITS: usize = 20 + 63 * 26;

/// The MCU grid of a frame and its cut into bands and restart intervals.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Layout {
    /// Pixels per row (1..=65535).
    pub width: u16,
    /// Rows (1..=65535).
    pub height: u16,
    /// Blocks (MCUs) per MCU row: `ceil(width / 8)`.
    pub mcus_x: u32,
    /// MCU rows: `ceil(height / 8)`.
    pub mcu_rows: u32,
    /// MCUs of the frame: `mcus_x × mcu_rows`.
    pub mcus: u32,
    /// MCUs per restart interval (the DRI value; all of them without restart markers).
    pub interval: u32,
    /// MCU rows per band in a cut by rows ([`Layout::new`]; the last band may be shorter).
    pub band_rows: u32,
    /// Bands (at most the count asked for).
    pub bands: u32,
    /// Whether the frame has restart markers (a DRI segment).
    pub restart: bool,
    /// A cut by load ([`Layout::balanced`]): band `i` is MCUs `cuts[i]..cuts[i + 1]`, every
    /// cut a multiple of `interval`; `None`: bands of `band_rows` MCU rows.
    pub cuts: Option<[u32; MAX_BANDS + 1]>,
}

/// The most bands of a cut by load ([`Layout::balanced`]): the cluster's cores.
pub const MAX_BANDS: usize = 8;

/// The most restart intervals a cut by load may have ([`Layout::balanced`] makes the interval
/// longer for frames that would have more): 324×244 (1,271 MCUs) in intervals of 8 MCUs.
pub const MAX_INTERVALS: usize = 160;

/// One band: MCUs `[first, first + blocks)` in raster order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Band {
    /// Its index.
    pub index: u32,
    /// First MCU.
    pub first: u32,
    /// MCUs.
    pub blocks: u32,
    /// Index of its first restart interval in the scan.
    pub first_interval: u32,
    /// The last band of the frame (its bytes end without a restart marker).
    pub last: bool,
}

impl Band {
    /// The restart intervals the band holds (the last one may end the scan early).
    pub fn intervals(&self, layout: &Layout) -> u32 {
        (self.first + self.blocks).div_ceil(layout.interval) - self.first_interval
    }
}

/// One strip of a band ([`Layout::strips`]): blocks `x0..x0 + nb` of MCU row `row`, the first
/// being MCU `first` of the scan. Restart intervals may end inside it ([`Layout::run_end`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Strip {
    /// MCU row.
    pub row: u32,
    /// First block in the row.
    pub x0: usize,
    /// Blocks.
    pub nb: usize,
    /// Its first MCU in the scan.
    pub first: u32,
}

/// The strips of a band in coding order ([`Layout::strips`]).
#[derive(Clone, Debug)]
pub struct Strips {
    mcus_x: u32,
    max: u32,
    at: u32,
    end: u32,
    seg_end: u32,
    per: u32,
}

impl Iterator for Strips {
    type Item = Strip;

    #[inline(always)]
    fn next(&mut self) -> Option<Strip> {
        if self.at >= self.end {
            return None;
        }
        if self.at >= self.seg_end {
            // A segment: to the end of the row or of the band, in strips of at most `max`
            // blocks, as even as they come.
            let row_end = (self.at / self.mcus_x + 1) * self.mcus_x;
            self.seg_end = row_end.min(self.end);
            let len = self.seg_end - self.at;
            self.per = len.div_ceil(len.div_ceil(self.max));
        }
        let b = self.at;
        let nb = self.per.min(self.seg_end - b);
        self.at += nb;
        Some(Strip {
            row: b / self.mcus_x,
            x0: (b % self.mcus_x) as usize,
            nb: nb as usize,
            first: b,
        })
    }
}

/// Header bytes before the entropy-coded data without a DRI segment: SOI 2, APP0 (JFIF) 18, DQT
/// 69, SOF0 13, DHT (DC) 33, DHT (AC) 183, SOS 10.
pub const HEADER_LEN: usize = 2 + 18 + 69 + 13 + 33 + 183 + 10;
/// The DRI segment.
pub const DRI_LEN: usize = 6;

impl Layout {
    /// The layout of a `width × height` frame cut into at most `bands` bands.
    pub fn new(width: u16, height: u16, bands: usize) -> Result<Layout, Error> {
        if width == 0 || height == 0 {
            return Err(Error::Size);
        }
        if bands == 0 {
            return Err(Error::Bands);
        }
        let mcus_x = (width as u32).div_ceil(8);
        let mcu_rows = (height as u32).div_ceil(8);
        let mcus = mcus_x * mcu_rows;
        let per_band = mcu_rows.div_ceil(bands.min(mcu_rows as usize) as u32);
        let count = mcu_rows.div_ceil(per_band);
        if count == 1 {
            return Ok(Layout {
                width,
                height,
                mcus_x,
                mcu_rows,
                mcus,
                interval: mcus,
                band_rows: mcu_rows,
                bands: 1,
                restart: false,
                cuts: None,
            });
        }
        // DRI counts MCUs in 16 bits.
        let interval_rows = per_band.min(65_535 / mcus_x).max(1);
        let band_rows = per_band.div_ceil(interval_rows) * interval_rows;
        let count = mcu_rows.div_ceil(band_rows);
        Ok(Layout {
            width,
            height,
            mcus_x,
            mcu_rows,
            mcus,
            interval: interval_rows * mcus_x,
            band_rows,
            bands: count,
            restart: count > 1,
            cuts: None,
        })
    }

    /// A `width × height` frame with a restart interval of `interval` MCUs (1..=65535; longer
    /// when the frame would have more than [`MAX_INTERVALS`] intervals), cut into at most
    /// `bands` (1..=[`MAX_BANDS`]) bands of whole intervals so that the largest band's share of
    /// `load` (one figure per interval, in scan order: see [`Layout::intervals`]) is the least
    /// that whole intervals allow; a `load` of another length (no history) counts every MCU
    /// alike. The coded bytes do not depend on the cut, only on the interval:
    /// the file is the same as a one-band-per-interval one. One interval or one band: no
    /// restart markers only when the interval covers the frame.
    pub fn balanced(
        width: u16,
        height: u16,
        bands: usize,
        interval: u32,
        load: &[u32],
    ) -> Result<Layout, Error> {
        if width == 0 || height == 0 {
            return Err(Error::Size);
        }
        if bands == 0 || bands > MAX_BANDS {
            return Err(Error::Bands);
        }
        if interval == 0 {
            return Err(Error::Config);
        }
        let mcus_x = (width as u32).div_ceil(8);
        let mcu_rows = (height as u32).div_ceil(8);
        let mcus = mcus_x * mcu_rows;
        let interval = interval.max(mcus.div_ceil(MAX_INTERVALS as u32)).min(mcus);
        if interval > 65_535 {
            return Err(Error::Config);
        }
        let n = mcus.div_ceil(interval);
        let count = (bands as u32).min(n);
        // Prefix sums of the load by interval; without history, the MCUs.
        let weight = |k: u32| -> u64 {
            if load.len() == n as usize {
                load[k as usize] as u64 + 1
            } else {
                (interval.min(mcus - k * interval)) as u64
            }
        };
        // The least bottleneck: the smallest band load `b` for which bands taking intervals in
        // order while their load stays within `b` need no more than `count` bands.
        let bands_within = |b: u64| {
            let (mut used, mut sum) = (1u32, 0u64);
            for k in 0..n {
                let w = weight(k);
                if sum + w > b {
                    used += 1;
                    sum = 0;
                }
                sum += w;
            }
            used
        };
        let (mut lo, mut hi) = (
            (0..n).map(weight).max().unwrap_or(1),
            (0..n).map(weight).sum(),
        );
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            if bands_within(mid) <= count {
                hi = mid;
            } else {
                lo = mid + 1;
            }
        }
        // The cut: each band takes intervals while its load stays within the bottleneck and
        // every band still to come keeps at least one; the last takes the rest.
        let mut cuts = [mcus; MAX_BANDS + 1];
        cuts[0] = 0;
        let mut k = 0u32;
        for (i, cut) in cuts.iter_mut().enumerate().take(count as usize).skip(1) {
            let later = count - i as u32;
            let mut sum = weight(k);
            k += 1;
            while n - k > later && sum + weight(k) <= lo {
                sum += weight(k);
                k += 1;
            }
            *cut = k * interval;
        }
        Ok(Layout {
            width,
            height,
            mcus_x,
            mcu_rows,
            mcus,
            interval,
            band_rows: mcu_rows,
            bands: count,
            restart: n > 1,
            cuts: Some(cuts),
        })
    }

    /// The restart intervals of the frame.
    pub fn intervals(&self) -> u32 {
        self.mcus.div_ceil(self.interval)
    }

    /// Where the restart interval holding MCU `mcu` ends (the MCU after its last), its index,
    /// and whether the scan ends there: `(end, interval, scan_end)`.
    #[inline(always)]
    pub fn run_end(&self, mcu: u32) -> (u32, u32, bool) {
        let k = mcu / self.interval;
        let end = (k + 1).saturating_mul(self.interval).min(self.mcus);
        (end, k, end == self.mcus)
    }

    /// Band `i` (`i < self.bands`).
    pub fn band(&self, i: u32) -> Band {
        let (first, end) = match &self.cuts {
            Some(c) => (c[i as usize], c[i as usize + 1]),
            None => {
                let r = (i * self.band_rows).min(self.mcu_rows);
                let e = (r + self.band_rows).min(self.mcu_rows);
                (r * self.mcus_x, e * self.mcus_x)
            }
        };
        Band {
            index: i,
            first,
            blocks: end - first,
            first_interval: first / self.interval,
            last: i + 1 >= self.bands,
        }
    }

    /// The strips of band `i` in coding order: its MCUs cut at the ends of MCU rows, each row's
    /// part in strips of at most `max` (≥ 1) blocks of nearly equal size (a 41-block row with
    /// `max` 21: 21 + 20).
    pub fn strips(&self, i: u32, max: usize) -> Strips {
        let b = self.band(i);
        Strips {
            mcus_x: self.mcus_x,
            max: max.clamp(1, u32::MAX as usize) as u32,
            at: b.first,
            end: b.first + b.blocks,
            seg_end: b.first,
            per: 1,
        }
    }

    /// The restart interval in MCUs (the DRI value), 0 without restart markers.
    pub fn restart_interval(&self) -> u16 {
        if self.restart {
            self.interval as u16
        } else {
            0
        }
    }

    /// Bytes of the headers before the entropy-coded data.
    pub fn header_len(&self) -> usize {
        HEADER_LEN + if self.restart { DRI_LEN } else { 0 }
    }

    /// An upper bound on the bytes of band `i`'s coded data, its restart markers included: every
    /// block at [`MAX_BLOCK_BITS`], each interval padded, every byte stuffed.
    pub fn max_band_len(&self, i: u32) -> usize {
        let b = self.band(i);
        let blocks = b.blocks as usize;
        let intervals = b.intervals(self) as usize;
        (2 * blocks * MAX_BLOCK_BITS).div_ceil(8) + intervals * MAX_FLUSH_BYTES
    }

    /// An upper bound on the whole file (headers, every band, EOI): an output buffer of this size
    /// never fails with [`Error::OutputFull`]. 324×244 in 8 bands: 527,246 bytes (real frames
    /// code to 5–15 % of their 79,056 pixels at quality 75).
    pub fn max_len(&self) -> usize {
        self.header_len() + (0..self.bands).map(|i| self.max_band_len(i)).sum::<usize>() + 2
    }

    /// Where band `i` goes when every band is coded into its own share of an `out_len`-byte
    /// output buffer whose first [`Layout::header_len`] bytes hold the header and whose last 2
    /// bytes are kept for EOI: `(start, capacity)`. With room for every band's worst case
    /// ([`Layout::max_band_len`]) each band gets exactly that; otherwise each gets a share
    /// proportional to its MCUs. Slots are disjoint and in band order.
    pub fn slot(&self, i: u32, out_len: usize) -> (usize, usize) {
        let hl = self.header_len();
        let avail = out_len.saturating_sub(hl + 2);
        let worst: usize = (0..self.bands).map(|j| self.max_band_len(j)).sum();
        if avail >= worst {
            let start = hl + (0..i).map(|j| self.max_band_len(j)).sum::<usize>();
            return (start, self.max_band_len(i));
        }
        let b = self.band(i);
        let at = |mcu: u32| hl + (avail as u64 * mcu as u64 / self.mcus as u64) as usize;
        let start = at(b.first);
        (start, at(b.first + b.blocks) - start)
    }

    /// Writes SOI, APP0 (JFIF 1.01, no density unit, 1:1), DQT, SOF0, DHT (luminance DC and AC),
    /// DRI (with restart markers) and SOS: exactly [`Layout::header_len`] bytes.
    pub fn write_header(&self, t: &Tables, out: &mut Out<'_>) {
        out.put_bytes(&[0xff, 0xd8]);
        out.put_bytes(&[
            0xff, 0xe0, 0, 16, b'J', b'F', b'I', b'F', 0, 1, 1, 0, 0, 1, 0, 1, 0, 0,
        ]);
        out.put_bytes(&[0xff, 0xdb, 0, 67, 0x00]);
        out.put_bytes(&t.dqt);
        let [h1, h0] = self.height.to_be_bytes();
        let [w1, w0] = self.width.to_be_bytes();
        out.put_bytes(&[0xff, 0xc0, 0, 11, 8, h1, h0, w1, w0, 1, 1, 0x11, 0]);
        for (class, bits, values) in [
            (0x00u8, &STD_DC_LUMA_BITS, &STD_DC_LUMA_VALUES[..]),
            (0x10, &STD_AC_LUMA_BITS, &STD_AC_LUMA_VALUES[..]),
        ] {
            let len = (2 + 1 + 16 + values.len()) as u16;
            let [l1, l0] = len.to_be_bytes();
            out.put_bytes(&[0xff, 0xc4, l1, l0, class]);
            out.put_bytes(bits);
            out.put_bytes(values);
        }
        if self.restart {
            let [r1, r0] = self.restart_interval().to_be_bytes();
            out.put_bytes(&[0xff, 0xdd, 0, 4, r1, r0]);
        }
        out.put_bytes(&[0xff, 0xda, 0, 8, 1, 1, 0x00, 0, 63, 0]);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn the_camera_frame_on_eight_cores() {
        let l = Layout::new(324, 244, 8).unwrap();
        assert_eq!((l.mcus_x, l.mcu_rows, l.mcus), (41, 31, 1271));
        assert_eq!((l.band_rows, l.interval, l.bands), (4, 164, 8));
        assert_eq!(l.restart_interval(), 164);
        assert_eq!(l.band(7).blocks, 3 * 41);
        assert!(l.band(7).last && !l.band(6).last);
        assert_eq!(l.max_len(), 527_246);
        let one = Layout::new(324, 244, 1).unwrap();
        assert!(!one.restart);
        assert_eq!(one.restart_interval(), 0);
        assert_eq!(one.strips(0, 21).count(), 62);
        // Fewer rows than cores: one band per row at most.
        let small = Layout::new(20, 9, 8).unwrap();
        assert_eq!((small.mcu_rows, small.bands), (2, 2));
    }

    #[test]
    fn a_cut_by_load() {
        // 1,271 MCUs in intervals of 8: 159 intervals, the last of 7 MCUs.
        let even = Layout::balanced(324, 244, 8, 8, &[]).unwrap();
        assert_eq!((even.interval, even.intervals(), even.bands), (8, 159, 8));
        assert_eq!(even.restart_interval(), 8);
        let sizes: Vec<u32> = (0..8).map(|i| even.band(i).blocks).collect();
        assert!(sizes.iter().all(|&b| (151..=160).contains(&b)), "{sizes:?}");
        // Band 1 starts inside row 3 (at MCU 160 = 3 x 41 + 37): 4 blocks to the row's end,
        // then row 4 in strips of 21 + 20; its first interval ends at MCU 168.
        let s: Vec<Strip> = even.strips(1, 21).collect();
        assert_eq!((s[0].row, s[0].x0, s[0].nb, s[0].first), (3, 37, 4, 160));
        assert_eq!((s[1].row, s[1].x0, s[1].nb, s[1].first), (4, 0, 21, 164));
        assert_eq!(even.run_end(160), (168, 20, false));
        assert_eq!(even.run_end(1270), (1271, 158, true));
        // All the load in the first half: the first bands take fewer intervals.
        let mut load = vec![1u32; 159];
        load[..80].iter_mut().for_each(|l| *l = 100);
        let l = Layout::balanced(324, 244, 8, 8, &load).unwrap();
        assert!(l.band(0).blocks < 100 && l.band(7).blocks > 300);
        assert_eq!(l.band(7).first + l.band(7).blocks, 1271);
        // Long frames get longer intervals.
        let big = Layout::balanced(4000, 4000, 8, 8, &[]).unwrap();
        assert!(big.intervals() as usize <= MAX_INTERVALS);
        assert_eq!(Layout::balanced(324, 244, 9, 8, &[]), Err(Error::Bands));
        assert_eq!(Layout::balanced(324, 244, 8, 0, &[]), Err(Error::Config));
    }

    #[test]
    fn the_header_has_its_announced_length() {
        let t = Tables::new(75);
        for bands in [1, 2, 8] {
            let l = Layout::new(324, 244, bands).unwrap();
            let mut buf = vec![0u8; 1000];
            let mut out = Out::new(&mut buf);
            l.write_header(&t, &mut out);
            assert_eq!(out.pos, l.header_len());
        }
    }

    /// Bands cover the MCUs in order without gaps, every band but the last is a whole number of
    /// intervals, each band's strips cover its MCUs in order, within rows, at most `max` blocks
    /// each, and its intervals end inside it.
    fn check_tiling(l: &Layout, max: usize) -> Result<(), TestCaseError> {
        prop_assert_eq!(l.mcus, l.mcus_x * l.mcu_rows);
        let mut next = 0;
        for i in 0..l.bands {
            let b = l.band(i);
            prop_assert_eq!(b.first, next);
            prop_assert!(b.blocks >= 1);
            prop_assert_eq!(b.first % l.interval, 0);
            if !b.last {
                prop_assert_eq!(b.blocks % l.interval, 0);
            }
            prop_assert_eq!(b.first_interval * l.interval, b.first);
            if b.blocks <= 20_000 {
                let mut at = b.first;
                for s in l.strips(i, max) {
                    prop_assert!(s.nb >= 1 && s.nb <= max);
                    prop_assert_eq!(s.row * l.mcus_x + s.x0 as u32, at);
                    prop_assert_eq!(s.first, at);
                    prop_assert!(s.x0 + s.nb <= l.mcus_x as usize);
                    at += s.nb as u32;
                }
                prop_assert_eq!(at, b.first + b.blocks);
                // The intervals inside the band, by `run_end`.
                let (mut m, mut ends) = (b.first, 0);
                while m < b.first + b.blocks {
                    let (end, k, scan_end) = l.run_end(m);
                    prop_assert_eq!(k, b.first_interval + ends);
                    prop_assert!(end <= b.first + b.blocks);
                    prop_assert_eq!(scan_end, end == l.mcus);
                    m = end;
                    ends += 1;
                }
                prop_assert_eq!(ends, b.intervals(l));
            }
            next += b.blocks;
        }
        prop_assert_eq!(next, l.mcus);
        prop_assert!(l.interval <= 65_535 || !l.restart);
        Ok(())
    }

    proptest! {
        /// A cut by rows tiles the frame, and the slowest band has the fewest rows any cut into
        /// `bands` whole-row parts can give (unless DRI's limit forces more).
        #[test]
        fn bands_tile_the_rows(
            w in 1u16..=u16::MAX,
            h in 1u16..=u16::MAX,
            bands in 1usize..=8,
            max in 1usize..=40,
        ) {
            let l = Layout::new(w, h, bands).unwrap();
            prop_assert!(l.bands >= 1 && l.bands as usize <= bands);
            check_tiling(&l, max)?;
            let ideal = l.mcu_rows.div_ceil(bands as u32);
            if l.restart && ideal * l.mcus_x <= 65_535 {
                prop_assert_eq!(l.band_rows, ideal);
            }
            prop_assert_eq!(l.restart, l.bands > 1);
        }

        /// A cut by load tiles the frame into `bands` bands (at most one per interval), none
        /// more than one interval's load above an equal share.
        #[test]
        fn a_cut_by_load_tiles_and_balances(
            w in 1u16..=2000,
            h in 1u16..=2000,
            bands in 1usize..=8,
            interval in 1u32..=300,
            max in 1usize..=40,
            seed in any::<u64>(),
        ) {
            let probe = Layout::balanced(w, h, bands, interval, &[]).unwrap();
            let n = probe.intervals() as usize;
            let mut x = seed | 1;
            let load: Vec<u32> = (0..n)
                .map(|_| {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    (x % 1000) as u32
                })
                .collect();
            let l = Layout::balanced(w, h, bands, interval, &load).unwrap();
            prop_assert_eq!(l.interval, probe.interval);
            prop_assert!(l.bands as usize <= bands && l.bands as usize == bands.min(n));
            check_tiling(&l, max)?;
            let total: u64 = load.iter().map(|&v| v as u64 + 1).sum();
            let share = total / l.bands as u64;
            let heaviest = load.iter().map(|&v| v as u64 + 1).max().unwrap_or(0);
            {
                for i in 0..l.bands {
                    let b = l.band(i);
                    let k = b.first_interval as usize;
                    let sum: u64 = load[k..k + b.intervals(&l) as usize]
                        .iter()
                        .map(|&v| v as u64 + 1)
                        .sum();
                    prop_assert!(sum <= share + heaviest, "band {i}: {sum} vs {share}");
                }
            }
        }
    }
}
