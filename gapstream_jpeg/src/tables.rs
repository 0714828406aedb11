//! The standard tables of baseline JPEG and what the encoder derives from them.
//!
//! * [`STD_LUMA_QUANT`]: the luminance quantisation table of ITU-T T.81 Annex K (Table K.1), in
//!   natural (row-major) order, scaled by a quality 1..=100 with the Independent JPEG Group's
//!   formula ([`quality_scaling`], [`scaled_quant`]; libjpeg's `jpeg_quality_scaling` and
//!   `jpeg_add_quant_table` with `force_baseline`).
//! * [`STD_DC_LUMA_BITS`] / [`STD_DC_LUMA_VALUES`], [`STD_AC_LUMA_BITS`] / [`STD_AC_LUMA_VALUES`]:
//!   the luminance Huffman tables of Annex K.3 (Tables K.3 and K.5), as the DHT segment carries
//!   them; [`HuffCodes`] holds the code of each symbol derived from them (Annex C).
//! * [`ZIGZAG`]: the natural index of each zig-zag position (Figure A.6).
//! * [`Tables`]: what one frame's coder reads per coefficient: for each zig-zag position the
//!   natural index, libjpeg-turbo's reciprocal divisor of `8 * Q` (`compute_reciprocal` in its
//!   `jcdctmgr.c`: multiply by a reciprocal instead of dividing, rounding half away from zero as
//!   libjpeg does), the smallest magnitude that does not quantise to 0, and the Huffman codes.

/// Table K.1 of ITU-T T.81: luminance quantisation table, natural order.
pub const STD_LUMA_QUANT: [u8; 64] = [
    16, 11, 10, 16, 24, 40, 51, 61, //
    12, 12, 14, 19, 26, 58, 60, 55, //
    14, 13, 16, 24, 40, 57, 69, 56, //
    14, 17, 22, 29, 51, 87, 80, 62, //
    18, 22, 37, 56, 68, 109, 103, 77, //
    24, 35, 55, 64, 81, 104, 113, 92, //
    49, 64, 78, 87, 103, 121, 120, 101, //
    72, 92, 95, 98, 112, 100, 103, 99,
];

/// Natural (row-major) index of zig-zag position `k` (T.81 Figure A.6).
pub const ZIGZAG: [u8; 64] = [
    0, 1, 8, 16, 9, 2, 3, 10, 17, 24, 32, 25, 18, 11, 4, 5, 12, 19, 26, 33, 40, 48, 41, 34, 27, 20,
    13, 6, 7, 14, 21, 28, 35, 42, 49, 56, 57, 50, 43, 36, 29, 22, 15, 23, 30, 37, 44, 51, 58, 59,
    52, 45, 38, 31, 39, 46, 53, 60, 61, 54, 47, 55, 62, 63,
];

/// Table K.3: number of luminance DC codes of each length 1..=16.
pub const STD_DC_LUMA_BITS: [u8; 16] = [0, 1, 5, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0];
/// Table K.3: the luminance DC symbols (magnitude categories) in code order.
pub const STD_DC_LUMA_VALUES: [u8; 12] = [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11];
/// Table K.5: number of luminance AC codes of each length 1..=16.
pub const STD_AC_LUMA_BITS: [u8; 16] = [0, 2, 1, 3, 3, 2, 4, 3, 5, 5, 4, 4, 0, 0, 1, 0x7d];
/// Table K.5: the luminance AC symbols (run << 4 | size) in code order.
pub const STD_AC_LUMA_VALUES: [u8; 162] = [
    0x01, 0x02, 0x03, 0x00, 0x04, 0x11, 0x05, 0x12, 0x21, 0x31, 0x41, 0x06, 0x13, 0x51, 0x61, 0x07,
    0x22, 0x71, 0x14, 0x32, 0x81, 0x91, 0xa1, 0x08, 0x23, 0x42, 0xb1, 0xc1, 0x15, 0x52, 0xd1, 0xf0,
    0x24, 0x33, 0x62, 0x72, 0x82, 0x09, 0x0a, 0x16, 0x17, 0x18, 0x19, 0x1a, 0x25, 0x26, 0x27, 0x28,
    0x29, 0x2a, 0x34, 0x35, 0x36, 0x37, 0x38, 0x39, 0x3a, 0x43, 0x44, 0x45, 0x46, 0x47, 0x48, 0x49,
    0x4a, 0x53, 0x54, 0x55, 0x56, 0x57, 0x58, 0x59, 0x5a, 0x63, 0x64, 0x65, 0x66, 0x67, 0x68, 0x69,
    0x6a, 0x73, 0x74, 0x75, 0x76, 0x77, 0x78, 0x79, 0x7a, 0x83, 0x84, 0x85, 0x86, 0x87, 0x88, 0x89,
    0x8a, 0x92, 0x93, 0x94, 0x95, 0x96, 0x97, 0x98, 0x99, 0x9a, 0xa2, 0xa3, 0xa4, 0xa5, 0xa6, 0xa7,
    0xa8, 0xa9, 0xaa, 0xb2, 0xb3, 0xb4, 0xb5, 0xb6, 0xb7, 0xb8, 0xb9, 0xba, 0xc2, 0xc3, 0xc4, 0xc5,
    0xc6, 0xc7, 0xc8, 0xc9, 0xca, 0xd2, 0xd3, 0xd4, 0xd5, 0xd6, 0xd7, 0xd8, 0xd9, 0xda, 0xe1, 0xe2,
    0xe3, 0xe4, 0xe5, 0xe6, 0xe7, 0xe8, 0xe9, 0xea, 0xf1, 0xf2, 0xf3, 0xf4, 0xf5, 0xf6, 0xf7, 0xf8,
    0xf9, 0xfa,
];

/// The longest Huffman code of the standard luminance tables plus the longest magnitude field
/// (AC: 16 + 10 bits; DC: 9 + 11): what one `put` of the bit writer carries at most.
pub const MAX_SYMBOL_BITS: u32 = 26;

/// libjpeg's `jpeg_quality_scaling`: quality 1..=100 (clamped) to a percentage scale factor
/// (quality 50 = 100 %, 100 = 0 %, 1 = 5000 %).
pub const fn quality_scaling(quality: u8) -> u32 {
    let q = if quality == 0 {
        1
    } else if quality > 100 {
        100
    } else {
        quality as u32
    };
    if q < 50 { 5000 / q } else { 200 - 2 * q }
}

/// The Annex K luminance table scaled for `quality` (natural order), as libjpeg's
/// `jpeg_add_quant_table(..., force_baseline = TRUE)`: `(base * scale + 50) / 100` clamped to
/// 1..=255.
pub const fn scaled_quant(quality: u8) -> [u8; 64] {
    let scale = quality_scaling(quality);
    let mut t = [0u8; 64];
    let mut i = 0;
    while i < 64 {
        let mut v = (STD_LUMA_QUANT[i] as u32 * scale + 50) / 100;
        if v == 0 {
            v = 1;
        }
        if v > 255 {
            v = 255;
        }
        t[i] = v as u8;
        i += 1;
    }
    t
}

/// Huffman codes of one table: `code[s]` and `len[s]` for symbol `s` (length 0: symbol absent).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HuffCodes {
    /// `len << 16 | code` of each symbol (0 for symbols the table does not have).
    pub packed: [u32; 256],
}

impl HuffCodes {
    /// The canonical codes of a DHT table (T.81 Annex C: `Generate_size_table`,
    /// `Generate_code_table`, `Order_codes`).
    pub const fn from_dht(bits: &[u8; 16], values: &[u8]) -> HuffCodes {
        let mut packed = [0u32; 256];
        let mut code: u32 = 0;
        let mut k = 0;
        let mut len = 1;
        while len <= 16 {
            let mut n = 0;
            while n < bits[len - 1] {
                packed[values[k] as usize] = (len as u32) << 16 | code;
                code += 1;
                k += 1;
                n += 1;
            }
            code <<= 1;
            len += 1;
        }
        HuffCodes { packed }
    }

    /// `(code, length)` of `symbol`.
    pub const fn get(&self, symbol: u8) -> (u32, u32) {
        let p = self.packed[symbol as usize];
        (p & 0xffff, p >> 16)
    }
}

/// The standard luminance DC codes.
pub const DC_CODES: HuffCodes = HuffCodes::from_dht(&STD_DC_LUMA_BITS, &STD_DC_LUMA_VALUES);
/// The standard luminance AC codes.
pub const AC_CODES: HuffCodes = HuffCodes::from_dht(&STD_AC_LUMA_BITS, &STD_AC_LUMA_VALUES);

/// libjpeg-turbo's `compute_reciprocal` for a 16-bit DCT element: `(reciprocal, correction,
/// shift)` such that `((|x| + correction) * reciprocal) >> shift` is its quantised magnitude of
/// `x` (a DCT output scaled by 8) for the divisor `divisor = 8 * Q`.
pub const fn reciprocal(divisor: u32) -> (u32, u32, u32) {
    if divisor == 1 {
        // libjpeg-turbo's identity case (cannot occur with divisor = 8 * Q).
        return (1, 0, 16);
    }
    let b = 31 - divisor.leading_zeros(); // flss(divisor) - 1
    let mut r = 16 + b;
    let mut fq = (1u64 << r) / divisor as u64;
    let fr = (1u64 << r) % divisor as u64;
    let mut c = divisor / 2;
    if fr == 0 {
        fq >>= 1;
        r -= 1;
    } else if fr <= (divisor / 2) as u64 {
        c += 1;
    } else {
        fq += 1;
    }
    (fq as u32, c, r)
}

/// Where the total length sits in a coder entry ([`Tables::ac`], [`Tables::dc`]): bits 27..32;
/// the code, shifted by the size, below (an AC code is at most 16 bits with a size of at most
/// 10, a DC code at most 9 with a size of at most 11: `len + size <= 26`).
pub const LEN_SHIFT: u32 = 27;

/// The bits of a coder entry below its length.
pub const CODE_MASK: u32 = (1 << LEN_SHIFT) - 1;

/// The coder entry of a symbol (`len << 16 | code`, [`HuffCodes::packed`]) whose magnitude field
/// has `size` bits: `(len + size) << 27 | code << size` (0 for a symbol the table lacks), so that
/// the coder ORs the field into the low bits and puts `entry >> 27` bits of `entry & CODE_MASK`.
pub const fn coder_entry(packed: u32, size: u32) -> u32 {
    let (len, code) = (packed >> 16, packed & 0xffff);
    if len == 0 {
        return 0;
    }
    (len + size) << LEN_SHIFT | code << size
}

/// Bytes between the AC coder entries of runs `r` and `r + 1` of one size in [`Tables::ac`].
pub const AC_RUN_STEP: usize = 8;

/// Bytes between the AC coder entries of sizes `s` and `s + 1` of one run in [`Tables::ac`]:
/// `8 r + 68 (s - 1)` is one-to-one on runs 0..=15 and sizes 1..=10 (`8 Δr = 68 Δs` needs
/// `Δr` a multiple of 17), so that the PULP coder finds the entry of `(run, size)` from
/// `8 run` and `31 - size` with one multiply-subtract, in 736 bytes (the 256 entries indexed by
/// symbol took 1 KiB).
pub const AC_SIZE_STEP: usize = 68;

/// Words of [`Tables::ac`]: up to the entry of run 15, size 10.
pub const AC_WORDS: usize = (15 * AC_RUN_STEP + 9 * AC_SIZE_STEP) / 4 + 1;

/// Index in [`Tables::ac`] of the entry of `run` (0..=15) zeros followed by a coefficient of
/// `size` (1..=10) bits: word `2 run + 17 (size - 1)` (see [`AC_SIZE_STEP`]).
#[inline(always)]
pub const fn ac_index(run: u32, size: u32) -> usize {
    ((AC_RUN_STEP / 4) as u32 * run + (AC_SIZE_STEP / 4) as u32 * size)
        .wrapping_sub((AC_SIZE_STEP / 4) as u32) as usize
}

/// The AC coder entries ([`coder_entry`]) of every `(run, size)` with a size, at
/// [`ac_index`]; the words between them are 0. Made at compile time so that [`Tables::new`]
/// copies them and needs no second table on its stack (built there, it overflowed the GVSOC
/// bench's 8 KiB FC stack into `.bss`).
const AC_CODER: [u32; AC_WORDS] = {
    let mut t = [0u32; AC_WORDS];
    let mut run = 0;
    while run < 16 {
        let mut size = 1;
        while size <= 10 {
            t[ac_index(run, size)] = coder_entry(AC_CODES.packed[(run << 4 | size) as usize], size);
            size += 1;
        }
        run += 1;
    }
    t
};

/// The DC coder entries of categories 0..=11.
const DC_CODER: [u32; 12] = {
    let mut t = [0u32; 12];
    let mut s = 0;
    while s < 12 {
        t[s] = coder_entry(DC_CODES.packed[s], s as u32);
        s += 1;
    }
    t
};

/// One zig-zag position of [`Tables`]: where its coefficient is and how it is quantised.
///
/// The first word is what the PULP coder multiplies the magnitude by and shifts with:
/// `shift | at << 8 | (recip - shift - 256 at) << 16`. Its halves sum to `recip`, so that one
/// `pv.sdotup.sc.h` (the magnitude times both halves, added to `bias`) is the quantiser's
/// multiply, and `srl` by the word shifts by its low 5 bits, `shift`: one load for the
/// reciprocal and the shift.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[repr(C)]
pub struct QuantEntry {
    /// Right shift after the multiply (at most 26: bits 0..5 of the first word).
    pub shift: u8,
    /// Byte offset of the coefficient in [`crate::fdct::Work::f8`]
    /// (`2 *` [`crate::fdct::slot`]`(k)`).
    pub at: u8,
    /// `recip - shift - 256 at` ([`QuantEntry::recip`]: the reciprocal of `8 * Q` is at least
    /// 2^15, more than `26 + 256 * 126`).
    pub recip_rest: u16,
    /// The correction (rounding) times the reciprocal: libjpeg-turbo adds the correction to
    /// the magnitude before the multiply, `(a + corr) * recip`; `a * recip + bias` is the same
    /// product (below 2^32 for `a <= 0x7fff`) in one multiply-accumulate.
    pub bias: u32,
}

impl QuantEntry {
    /// The entry of libjpeg-turbo's reciprocal divisor `(recip, corr, shift)` for the
    /// coefficient at byte offset `at`.
    pub const fn new(at: u8, (recip, corr, shift): (u32, u32, u32)) -> QuantEntry {
        let low = shift + 256 * at as u32;
        assert!(shift < 32 && recip <= 0xffff && recip >= low);
        QuantEntry {
            shift: shift as u8,
            at,
            recip_rest: (recip - low) as u16,
            bias: corr * recip,
        }
    }

    /// The reciprocal of `8 * Q`: the sum of the first word's halves.
    #[inline(always)]
    pub const fn recip(&self) -> u32 {
        self.shift as u32 + 256 * self.at as u32 + self.recip_rest as u32
    }

    /// The quantised magnitude of `a = |x|` (`a <= 0x7fff`).
    #[inline(always)]
    pub const fn quantise(&self, a: u32) -> u32 {
        (a * self.recip() + self.bias) >> self.shift
    }

    /// The smallest magnitude that does not quantise to 0.
    #[inline]
    pub const fn threshold(&self) -> u32 {
        // Smallest a with a * recip + bias >= 2^shift (shift <= 26: no overflow in 32 bits).
        let need = 1u32 << self.shift;
        if need <= self.bias {
            0
        } else {
            (need - self.bias).div_ceil(self.recip())
        }
    }
}

/// Everything the block coder reads, for one quality: copied next to the cores (L1) per frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(C)]
pub struct Tables {
    /// Per zig-zag position: natural index, divisor, zero threshold.
    pub quant: [QuantEntry; 64],
    /// The zero thresholds in [`crate::fdct::slot`] order as halfword pairs: `thr[i]` = the
    /// thresholds of the coefficients in slots `2 i` (low) and `2 i + 1` (the layout
    /// [`crate::Kernel::zero_mask`] reads; the DC's is 0: it is always coded).
    pub thr: [u32; 32],
    /// Each AC symbol `run << 4 | size` with `size >= 1` as the coder puts it, at
    /// [`ac_index`]`(run, size)`: its code shifted left by `size` (room for the magnitude field)
    /// and the total length `len + size` in the top bits ([`coder_entry`]).
    pub ac: [u32; AC_WORDS],
    /// End of block (symbol `0x00`) in the same form.
    pub eob: u32,
    /// Sixteen zeros (symbol `0xf0`) in the same form.
    pub zrl: u32,
    /// Each DC category 0..=11 in the same form.
    pub dc: [u32; 12],
    /// The quantisation table in zig-zag order, as the DQT segment carries it.
    pub dqt: [u8; 64],
    /// The DCT's coefficient pairs ([`crate::fdct::PAIRS`]), here so that they travel to L1 with
    /// the rest.
    pub dct: [u32; 15],
    /// The DCT's zig-zag store offsets ([`crate::fdct::ZZ_STORE`]).
    pub zz: [u8; 64],
    /// The quality these tables were made for.
    pub quality: u32,
}

/// Bytes of [`Tables`]: every field an integer array, 4-byte aligned, no padding.
pub const TABLES_BYTES: usize =
    64 * 8 + 32 * 4 + AC_WORDS * 4 + 2 * 4 + 12 * 4 + 64 + 15 * 4 + 64 + 4;
const _: () = assert!(core::mem::size_of::<Tables>() == TABLES_BYTES);
const _: () = assert!(core::mem::align_of::<Tables>() == 4);
const _: () = assert!(core::mem::size_of::<QuantEntry>() == 8);
// The PULP coder reads the first word (shift, at, recip_rest) and `at` as byte 1, `bias` at +4.
const _: () = assert!(
    core::mem::offset_of!(QuantEntry, shift) == 0
        && core::mem::offset_of!(QuantEntry, at) == 1
        && core::mem::offset_of!(QuantEntry, recip_rest) == 2
        && core::mem::offset_of!(QuantEntry, bias) == 4
);

impl Tables {
    /// The tables of `quality` (clamped to 1..=100).
    pub fn new(quality: u8) -> Tables {
        let q = scaled_quant(quality);
        let mut quant = [QuantEntry::default(); 64];
        let mut dqt = [0u8; 64];
        for (k, e) in quant.iter_mut().enumerate() {
            let nat = ZIGZAG[k];
            let qv = q[nat as usize];
            dqt[k] = qv;
            *e = QuantEntry::new(2 * crate::fdct::slot(k) as u8, reciprocal(8 * qv as u32));
        }
        let mut thr = [0u32; 32];
        for (i, t) in thr.iter_mut().enumerate() {
            let of = |s: usize| match crate::fdct::coef_of_slot(s) {
                0 => 0,
                k => quant[k].threshold().min(0xffff),
            };
            *t = of(2 * i) | of(2 * i + 1) << 16;
        }
        Tables {
            quant,
            thr,
            ac: AC_CODER,
            eob: coder_entry(AC_CODES.packed[0x00], 0),
            zrl: coder_entry(AC_CODES.packed[0xf0], 0),
            dc: DC_CODER,
            dqt,
            dct: crate::fdct::PAIRS,
            zz: crate::fdct::ZZ_STORE,
            quality: quality.clamp(1, 100) as u32,
        }
    }

    /// The tables' bytes, for the DMA that copies them next to the cluster cores.
    pub fn as_bytes(&self) -> &[u8] {
        // SAFETY: `Tables` is `repr(C)` with only integer fields and no padding (size and
        // alignment checked at compile time above), so its `TABLES_BYTES` bytes are initialised
        // and may be read as bytes for as long as `self` is borrowed.
        unsafe { core::slice::from_raw_parts((self as *const Tables).cast::<u8>(), TABLES_BYTES) }
    }

    /// The tables held in `bytes` (the L1 copy the DMA made from [`Tables::as_bytes`]): `None`
    /// unless `bytes` is at least [`TABLES_BYTES`] long and 4-byte aligned.
    pub fn from_bytes(bytes: &[u8]) -> Option<&Tables> {
        if bytes.len() < TABLES_BYTES || bytes.as_ptr() as usize % 4 != 0 {
            return None;
        }
        // SAFETY: the pointer is aligned for `Tables` and valid for `TABLES_BYTES` reads while
        // `bytes` is borrowed; every bit pattern is a valid `Tables` (integer fields only, no
        // padding), so the bytes, whatever they hold, form one.
        Some(unsafe { &*bytes.as_ptr().cast::<Tables>() })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The tables survive a copy of their bytes into an aligned buffer (as the DMA makes into
    /// L1), and misaligned or short buffers are refused.
    #[test]
    fn tables_round_trip_through_bytes() {
        use gap_rust_sdk::{Cluster, RawAlloc};
        let t = Tables::new(60);
        let cl = gap_rust_sdk::host::HostCluster::new();
        let mut buf = cl.l1().alloc_zeroed(TABLES_BYTES + 4, 8).unwrap();
        buf[..TABLES_BYTES].copy_from_slice(t.as_bytes());
        assert_eq!(Tables::from_bytes(&buf), Some(&t));
        assert!(Tables::from_bytes(&buf[..TABLES_BYTES - 1]).is_none());
        assert!(Tables::from_bytes(&buf[1..]).is_none());
        assert_ne!(Tables::from_bytes(&buf[4..]), Some(&t));
    }

    #[test]
    fn quality_50_is_annex_k_and_the_ends_clamp() {
        assert_eq!(scaled_quant(50), STD_LUMA_QUANT);
        assert!(scaled_quant(100).iter().all(|&v| v == 1));
        // Quality 1: scale 5000 %, every entry clamped to the baseline maximum.
        assert!(scaled_quant(1).iter().all(|&v| v == 255));
        // libjpeg's figures for quality 75 (scale 50 %): 16 -> 8, 11 -> 6 (5.5 + 0.5 rounds up).
        let t = scaled_quant(75);
        assert_eq!((t[0], t[1], t[2], t[63]), (8, 6, 5, 50));
        assert_eq!(quality_scaling(0), quality_scaling(1));
        assert_eq!(quality_scaling(200), 0);
    }

    #[test]
    fn zigzag_is_a_permutation_walking_anti_diagonals() {
        let mut seen = [false; 64];
        for w in ZIGZAG.windows(2) {
            let (a, b) = (w[0] as i32, w[1] as i32);
            let (ra, ca, rb, cb) = (a / 8, a % 8, b / 8, b % 8);
            // Each step moves to a neighbour (along the diagonal or to the next one).
            assert!((ra - rb).abs() <= 1 && (ca - cb).abs() <= 1, "{a} -> {b}");
        }
        for &z in &ZIGZAG {
            assert!(!seen[z as usize]);
            seen[z as usize] = true;
        }
    }

    #[test]
    fn huffman_tables_are_complete_prefix_codes() {
        for (bits, values, codes) in [
            (&STD_DC_LUMA_BITS, &STD_DC_LUMA_VALUES[..], &DC_CODES),
            (&STD_AC_LUMA_BITS, &STD_AC_LUMA_VALUES[..], &AC_CODES),
        ] {
            assert_eq!(
                bits.iter().map(|&b| b as usize).sum::<usize>(),
                values.len()
            );
            // Kraft sum below 1 (T.81 reserves the all-ones code), no code is a prefix of another.
            let kraft: f64 = values
                .iter()
                .map(|&s| 0.5f64.powi(codes.get(s).1 as i32))
                .sum();
            assert!(kraft < 1.0);
            for &a in values {
                for &b in values {
                    let ((ca, la), (cb, lb)) = (codes.get(a), codes.get(b));
                    if a != b && la <= lb {
                        assert_ne!(cb >> (lb - la), ca, "{a:#x} prefixes {b:#x}");
                    }
                }
            }
        }
        // Two anchors from Table K.5: EOB = 1010, ZRL = 11111111001.
        // The coder's entries: the code shifted by the size, the total length on top.
        let t = Tables::new(75);
        let mut ac_seen = [false; AC_WORDS];
        let ac = (0..=255u32)
            .filter(|s| (1..=10).contains(&(s & 15)) || *s == 0 || *s == 0xf0)
            .map(|s| {
                let e = match s {
                    0x00 => t.eob,
                    0xf0 => t.zrl,
                    _ => {
                        let i = ac_index(s >> 4, s & 15);
                        assert!(!ac_seen[i], "symbol {s:#x} shares word {i}");
                        ac_seen[i] = true;
                        t.ac[i]
                    }
                };
                (e, s, &AC_CODES)
            });
        // Every symbol with a size has a word of its own; the others are 0.
        for (e, s, codes) in ac.collect::<Vec<_>>().into_iter().chain(
            t.dc.iter()
                .enumerate()
                .map(|(s, &e)| (e, s as u32, &DC_CODES)),
        ) {
            let (code, len) = codes.get(s as u8);
            let size = s & 15;
            if len == 0 {
                assert_eq!(e, 0);
                continue;
            }
            assert_eq!(e >> LEN_SHIFT, len + size, "symbol {s:#x}");
            assert!(e >> LEN_SHIFT <= 26);
            assert_eq!(e & CODE_MASK, code << size, "symbol {s:#x}");
        }
        assert_eq!(ac_seen.iter().filter(|&&x| x).count(), 160);
        for (i, &e) in t.ac.iter().enumerate() {
            assert_eq!(e != 0, ac_seen[i], "word {i}");
        }
        assert_eq!(AC_CODES.get(0x00), (0b1010, 4));
        assert_eq!(AC_CODES.get(0xf0), (0b111_1111_1001, 11));
        assert_eq!(DC_CODES.get(0), (0b00, 2));
        assert_eq!(DC_CODES.get(11), (0b1_1111_1110, 9));
        let longest = (0..=255u8).map(|s| AC_CODES.get(s).1).max().unwrap();
        assert_eq!(longest + 10, MAX_SYMBOL_BITS);
    }

    /// The reciprocal quantiser rounds like `(|x| + d/2) / d` away from zero, exactly except
    /// where libjpeg-turbo's own reciprocal differs (checked: never in 0..=0x7fff for d = 8Q), and
    /// the zero threshold is exact.
    #[test]
    fn reciprocal_quantiser_matches_division_and_threshold() {
        for quality in [1u8, 10, 25, 50, 75, 90, 95, 100] {
            let t = Tables::new(quality);
            for (k, e) in t.quant.iter().enumerate() {
                assert_eq!(e.at as usize, 2 * crate::fdct::slot(k));
                // The PULP coder's first word: its halves sum to the reciprocal, its low 5 bits
                // are the shift, byte 1 the offset.
                let mut w = [0u8; 4];
                w[0] = e.shift;
                w[1] = e.at;
                w[2..].copy_from_slice(&e.recip_rest.to_le_bytes());
                let w = u32::from_le_bytes(w);
                let d = 8 * t.dqt[k] as u32;
                assert_eq!((w & 0xffff) + (w >> 16), reciprocal(d).0);
                assert_eq!(w & 31, reciprocal(d).2);
                let d = 8 * t.dqt[k] as u32;
                for a in 0..=0x7fffu32 {
                    let q = e.quantise(a);
                    assert_eq!(q, (a + d / 2) / d, "a {a} d {d}");
                    assert_eq!(q == 0, a < e.threshold(), "a {a} d {d}");
                }
            }
        }
    }
}
