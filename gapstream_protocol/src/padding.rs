//! Length-hiding padding of coded frames (inside the AEAD).
//!
//! A coded frame's length tells an observer of the link what the camera sees: a JPEG of a busy
//! scene is larger than one of a wall, a face entering the picture or the drone moving changes it.
//! With padding on, the drone pads each coded payload to the next of a small set of sizes before
//! sealing and sets [`FRAME_FLAG_PADDED`](crate::wire::FRAME_FLAG_PADDED) in the (authenticated)
//! header. The padded payload is
//!
//! ```text
//! coded (n bytes) ‖ 00 … 00 ‖ n as u32 little-endian
//! ```
//!
//! so the receiver finds `n` in the last four bytes after the tag verified, checks
//! `n ≤ length − 4` and that every padding byte is zero, and keeps the first `n` bytes
//! ([`unpad`]); anything else is refused ([`PaddingError`]). The trailer makes removal
//! unambiguous whatever the coded bytes end with, and costs O(1) to find.
//!
//! The sizes ([`Padding`]): `padme` (Nikitin, Barman, Lueks, Underwood, Hubaux, Ford: "Reducing
//! Metadata Leakage from Encrypted Files and Communication with PURBs", PoPETs 2019: a length
//! `L` with `2^E ≤ L < 2^(E+1)` is rounded up to a multiple of `2^(E − ⌊log2 E⌋ − 1)`: under
//! 12.5 % more bytes, under 6.25 % from 256 bytes on, O(log log L) bits of length left), `pow2` (the next power of two, up to
//! 100 % more) and `max` (every frame as long as the raw frame: nothing left but the cost of not
//! compressing). Every size is capped at the caller's `cap` (the raw frame's length).

#[cfg(feature = "alloc")]
use alloc::vec::Vec;

/// Bytes of the trailer (the coded length, u32 LE) at the end of a padded payload.
pub const TRAILER_LEN: usize = 4;

/// Which sizes coded frames are padded to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Padding {
    /// No padding: the payload is the coded frame (the header's flag is clear).
    Off,
    /// Padmé: under 12.5 % overhead (6.25 % from 256 bytes on), O(log log L) bits of length left.
    Padme,
    /// The next power of two: at most 100 % overhead, O(log log L) bits left with a smaller set.
    Pow2,
    /// Always the cap (the raw frame's length): no length information, no compression gain.
    Max,
}

impl Padding {
    /// Every setting, in the order of the documentation's table.
    pub const ALL: [Padding; 4] = [Padding::Off, Padding::Padme, Padding::Pow2, Padding::Max];

    /// The setting's name on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Padding::Off => "off",
            Padding::Padme => "padme",
            Padding::Pow2 => "pow2",
            Padding::Max => "max",
        }
    }

    /// The padded payload length of a coded payload of `n` bytes (trailer included), never above
    /// `max(cap, n + 4)`; `None` when padding is off or `n` does not fit the trailer's u32.
    pub fn padded_len(self, n: usize, cap: usize) -> Option<usize> {
        if self == Padding::Off || u32::try_from(n).is_err() {
            return None;
        }
        let l = n.checked_add(TRAILER_LEN)?;
        let r = match self {
            Padding::Off => return None,
            Padding::Padme => padme(l),
            Padding::Pow2 => l.checked_next_power_of_two().unwrap_or(l),
            Padding::Max => cap,
        };
        Some(r.min(cap).max(l))
    }
}

/// Padmé's length for `l` (PoPETs 2019, Algorithm 1): `l` rounded up so that only the top
/// `⌊log2 E⌋ + 1` bits of the `E + 1`-bit length may be non-zero.
pub fn padme(l: usize) -> usize {
    if l < 2 {
        return l;
    }
    let e = usize::BITS - 1 - l.leading_zeros(); // ⌊log2 l⌋
    let s = u32::BITS - e.leading_zeros(); // ⌊log2 e⌋ + 1
    let last_bits = e - s;
    let mask = (1usize << last_bits) - 1;
    l.checked_add(mask).map_or(l, |x| x & !mask)
}

/// Writes the padding of a payload whose first `n` bytes are the coded frame: zeros up to the
/// trailer, then `n` (u32 LE) in the last four bytes of `buf` (the whole padded payload, e.g.
/// `padded_len` bytes of a caller buffer; no allocation). `None` when `n` and the trailer do not
/// fit in `buf` or `n` does not fit a u32.
pub fn write_padding(buf: &mut [u8], n: usize) -> Option<()> {
    let body = buf.len().checked_sub(TRAILER_LEN)?;
    if n > body {
        return None;
    }
    let n32 = u32::try_from(n).ok()?;
    buf[n..body].fill(0);
    buf[body..].copy_from_slice(&n32.to_le_bytes());
    Some(())
}

/// Pads `buf` (a coded payload) in place to `padding`'s size for it, capped at `cap`; returns
/// whether it padded (false: padding off, or a payload too long for the trailer: left as is).
#[cfg(feature = "alloc")]
pub fn pad(buf: &mut Vec<u8>, padding: Padding, cap: usize) -> bool {
    let n = buf.len();
    let Some(total) = padding.padded_len(n, cap) else {
        return false;
    };
    buf.resize(total, 0);
    write_padding(buf, n).is_some()
}

/// Why a padded payload was refused (it verified, so only a faulty or hostile sealer, or an
/// unauthenticated suite's tampering, makes one).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PaddingError {
    /// Shorter than the trailer.
    TooShort { len: usize },
    /// The trailer's length runs into the trailer or past the payload.
    LengthOutOfRange { claimed: u32, max: usize },
    /// A padding byte is not zero.
    NonZero { at: usize },
}

impl core::fmt::Display for PaddingError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            PaddingError::TooShort { len } => {
                write!(f, "padded payload of {len} bytes has no length trailer")
            }
            PaddingError::LengthOutOfRange { claimed, max } => {
                write!(
                    f,
                    "padding trailer claims {claimed} coded bytes, at most {max} fit"
                )
            }
            PaddingError::NonZero { at } => write!(f, "padding byte {at} is not zero"),
        }
    }
}

impl core::error::Error for PaddingError {}

/// The coded length inside a padded payload (the receiver keeps `payload[..n]`).
pub fn unpad(payload: &[u8]) -> Result<usize, PaddingError> {
    let len = payload.len();
    let Some(body) = len.checked_sub(TRAILER_LEN) else {
        return Err(PaddingError::TooShort { len });
    };
    let claimed = u32::from_le_bytes(payload[body..].try_into().expect("4 bytes"));
    let n = usize::try_from(claimed)
        .map_err(|_| PaddingError::LengthOutOfRange { claimed, max: body })?;
    if n > body {
        return Err(PaddingError::LengthOutOfRange { claimed, max: body });
    }
    if let Some(i) = payload[n..body].iter().position(|&b| b != 0) {
        return Err(PaddingError::NonZero { at: n + i });
    }
    Ok(n)
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::vec;
    use proptest::prelude::*;

    #[test]
    fn padme_matches_the_papers_definition() {
        // Algorithm 1 of the paper, written with floating-point logarithms.
        fn reference(l: usize) -> usize {
            let e = (l as f64).log2().floor() as u32;
            let s = (e as f64).log2().floor() as u32 + 1;
            let last_bits = e - s;
            let mask = (1usize << last_bits) - 1;
            (l + mask) & !mask
        }
        for l in (2..70_000).chain([1 << 20, (1 << 20) + 1, 3_000_001]) {
            assert_eq!(padme(l), reference(l), "L = {l}");
        }
        // Overhead below 2^-S of L: under 12.5 % everywhere, under 6.25 % from 256 bytes on
        // (where every coded frame is).
        for l in 2..200_000usize {
            assert!(padme(l) >= l && (padme(l) - l) * 8 < l, "L = {l}");
            assert!(l < 256 || (padme(l) - l) * 16 < l, "L = {l}");
        }
        assert_eq!(padme(10_000), 10_240);
    }

    #[test]
    fn sizes_are_capped_and_off_pads_nothing() {
        assert_eq!(Padding::Off.padded_len(100, 1000), None);
        assert_eq!(Padding::Pow2.padded_len(100, 1000), Some(128));
        assert_eq!(Padding::Pow2.padded_len(600, 1000), Some(1000));
        assert_eq!(Padding::Max.padded_len(10, 1000), Some(1000));
        // Above the cap: the trailer still fits.
        assert_eq!(Padding::Max.padded_len(2000, 1000), Some(2004));
        let mut v = vec![1u8, 2, 3];
        assert!(!pad(&mut v, Padding::Off, 100));
        assert_eq!(v, [1, 2, 3]);
    }

    #[test]
    fn vector() {
        let mut v = b"JPEG".to_vec();
        assert!(pad(&mut v, Padding::Pow2, 79_056));
        assert_eq!(v, [b'J', b'P', b'E', b'G', 4, 0, 0, 0]);
        assert_eq!(unpad(&v), Ok(4));
    }

    #[test]
    fn bad_padding_is_refused() {
        let mut v = vec![7u8; 10];
        pad(&mut v, Padding::Pow2, 1 << 20); // 16 bytes
        assert_eq!(v.len(), 16);
        assert_eq!(unpad(&v), Ok(10));
        assert_eq!(unpad(&v[..3]), Err(PaddingError::TooShort { len: 3 }));
        let mut w = v.clone();
        w[11] = 1;
        assert_eq!(unpad(&w), Err(PaddingError::NonZero { at: 11 }));
        let mut w = v.clone();
        w[12..].copy_from_slice(&13u32.to_le_bytes());
        assert_eq!(
            unpad(&w),
            Err(PaddingError::LengthOutOfRange {
                claimed: 13,
                max: 12
            })
        );
        w[12..].copy_from_slice(&u32::MAX.to_le_bytes());
        assert!(unpad(&w).is_err());
    }

    proptest! {
        #[test]
        fn pad_then_unpad_gives_the_coded_bytes_back(
            coded in proptest::collection::vec(any::<u8>(), 0..5000),
            which in 0usize..4,
            cap in 0usize..6000,
        ) {
            let p = Padding::ALL[which];
            let mut v = coded.clone();
            let padded = pad(&mut v, p, cap);
            prop_assert_eq!(padded, p != Padding::Off);
            if padded {
                prop_assert_eq!(Some(v.len()), p.padded_len(coded.len(), cap));
                prop_assert!(v.len() >= coded.len() + TRAILER_LEN);
                prop_assert!(v.len() <= cap.max(coded.len() + TRAILER_LEN));
                let n = unpad(&v).unwrap();
                prop_assert_eq!(&v[..n], &coded[..]);
            }
        }

        #[test]
        fn unpad_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..64)) {
            if let Ok(n) = unpad(&bytes) {
                prop_assert!(n + TRAILER_LEN <= bytes.len());
            }
        }
    }
}
