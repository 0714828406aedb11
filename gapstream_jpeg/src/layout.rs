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
    /// MCU rows per restart interval (all of them without restart markers).
    pub interval_rows: u32,
    /// MCU rows per band (a multiple of `interval_rows`; the last band may be shorter).
    pub band_rows: u32,
    /// Bands (`ceil(mcu_rows / band_rows)`, at most the count asked for).
    pub bands: u32,
    /// Whether the frame has restart markers (a DRI segment): more than one band.
    pub restart: bool,
}

/// One band: MCU rows `[first_row, first_row + rows)`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Band {
    /// Its index.
    pub index: u32,
    /// First MCU row.
    pub first_row: u32,
    /// MCU rows.
    pub rows: u32,
    /// Index of its first restart interval in the scan.
    pub first_interval: u32,
    /// The last band of the frame (its bytes end without a restart marker).
    pub last: bool,
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
        let per_band = mcu_rows.div_ceil(bands.min(mcu_rows as usize) as u32);
        let count = mcu_rows.div_ceil(per_band);
        if count == 1 {
            return Ok(Layout {
                width,
                height,
                mcus_x,
                mcu_rows,
                interval_rows: mcu_rows,
                band_rows: mcu_rows,
                bands: 1,
                restart: false,
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
            interval_rows,
            band_rows,
            bands: count,
            restart: count > 1,
        })
    }

    /// Band `i` (`i < self.bands`).
    pub fn band(&self, i: u32) -> Band {
        let first_row = (i * self.band_rows).min(self.mcu_rows);
        let rows = self.band_rows.min(self.mcu_rows - first_row);
        Band {
            index: i,
            first_row,
            rows,
            first_interval: first_row / self.interval_rows,
            last: i + 1 >= self.bands,
        }
    }

    /// The restart interval in MCUs (the DRI value), 0 without restart markers.
    pub fn restart_interval(&self) -> u16 {
        if self.restart {
            (self.interval_rows * self.mcus_x) as u16
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
        let blocks = b.rows as usize * self.mcus_x as usize;
        let intervals = b.rows.div_ceil(self.interval_rows) as usize;
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
    /// proportional to its MCU rows. Slots are disjoint and in band order.
    pub fn slot(&self, i: u32, out_len: usize) -> (usize, usize) {
        let hl = self.header_len();
        let avail = out_len.saturating_sub(hl + 2);
        let worst: usize = (0..self.bands).map(|j| self.max_band_len(j)).sum();
        if avail >= worst {
            let start = hl + (0..i).map(|j| self.max_band_len(j)).sum::<usize>();
            return (start, self.max_band_len(i));
        }
        let b = self.band(i);
        let at = |row: u32| hl + (avail as u64 * row as u64 / self.mcu_rows as u64) as usize;
        let start = at(b.first_row);
        (start, at(b.first_row + b.rows) - start)
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
        assert_eq!((l.mcus_x, l.mcu_rows), (41, 31));
        assert_eq!((l.band_rows, l.interval_rows, l.bands), (4, 4, 8));
        assert_eq!(l.restart_interval(), 164);
        assert_eq!(l.band(7).rows, 3);
        assert!(l.band(7).last && !l.band(6).last);
        assert_eq!(l.max_len(), 527_246);
        let one = Layout::new(324, 244, 1).unwrap();
        assert!(!one.restart);
        assert_eq!(one.restart_interval(), 0);
        // Fewer rows than cores: one band per row at most.
        let small = Layout::new(20, 9, 8).unwrap();
        assert_eq!((small.mcu_rows, small.bands), (2, 2));
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

    proptest! {
        /// Bands cover the MCU rows in order without gaps, every band but the last is a whole
        /// number of intervals, the interval fits DRI, and the slowest band has the fewest rows
        /// any cut into `bands` whole-row parts can give (unless DRI's limit forces more).
        #[test]
        fn bands_tile_the_rows(w in 1u16..=u16::MAX, h in 1u16..=u16::MAX, bands in 1usize..=8) {
            let l = Layout::new(w, h, bands).unwrap();
            prop_assert!(l.bands >= 1 && l.bands as usize <= bands);
            let mut next = 0;
            for i in 0..l.bands {
                let b = l.band(i);
                prop_assert_eq!(b.first_row, next);
                prop_assert!(b.rows >= 1);
                if !b.last {
                    prop_assert_eq!(b.rows % l.interval_rows, 0);
                }
                prop_assert_eq!(b.first_interval * l.interval_rows, b.first_row);
                next += b.rows;
            }
            prop_assert_eq!(next, l.mcu_rows);
            prop_assert!(l.interval_rows as u64 * l.mcus_x as u64 <= 65_535 || !l.restart);
            let ideal = l.mcu_rows.div_ceil(bands as u32);
            if l.restart && ideal * l.mcus_x <= 65_535 {
                prop_assert_eq!(l.band_rows, ideal);
            }
            prop_assert_eq!(l.restart, l.bands > 1);
        }
    }
}
