//! Synthetic camera pattern: a moving greyscale scene with the frame number and the capture time
//! burned into the pixels, twice: as digits a person can read in the viewer, and as a block code
//! with a CRC that [`decode`] reads back, so latency can be checked from the image itself (a
//! "visual event" measurement: no clock shared between drone and receiver is needed).
//!
//! Layout (needs at least [`MIN_WIDTH`] × [`MIN_HEIGHT`] pixels; the HM01B0 gives 324 × 244):
//! - rows 4..12: frame number, 32 bits + CRC-8, one bit per 6 × 8 block (white = 1, black = 0);
//! - rows 14..22: capture time in ns, 64 bits + CRC-8, one bit per 4 × 8 block;
//! - rows 26..40: the same values as digits (`#frame  seconds.micro`);
//! - everywhere else: diagonal stripes and a square that move with the frame number.
//!
//! The code blocks are pure black or white, so they survive a Bayer mosaic unchanged
//! ([`render_bayer`]): the receiver decodes the raw bytes before any demosaicing.

/// Smallest frame the pattern fits in.
pub const MIN_WIDTH: usize = 300;
/// Smallest frame the pattern fits in.
pub const MIN_HEIGHT: usize = 48;

const CODE_X: usize = 8;
const FRAME_ROW: usize = 4;
const FRAME_BLOCK_W: usize = 6;
const TIME_ROW: usize = 14;
const TIME_BLOCK_W: usize = 4;
const BLOCK_H: usize = 8;
const TEXT_ROW: usize = 26;

/// What the pattern carries.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Stamp {
    /// Frame number (wraps at 2^32).
    pub frame: u32,
    /// Capture time in nanoseconds on the drone's clock.
    pub capture_ns: u64,
}

/// Why a pattern could not be rendered.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PatternError {
    /// The frame is smaller than [`MIN_WIDTH`] × [`MIN_HEIGHT`].
    TooSmall,
    /// `buf.len()` is not `width * height`.
    BufferSize,
}

impl core::fmt::Display for PatternError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(match self {
            PatternError::TooSmall => "frame too small for the test pattern (needs 300x48)",
            PatternError::BufferSize => "buffer length is not width*height",
        })
    }
}

/// CRC-8 (polynomial 0x07, init 0), over little-endian bytes.
fn crc8(bytes: &[u8]) -> u8 {
    let mut crc = 0u8;
    for &b in bytes {
        crc ^= b;
        for _ in 0..8 {
            crc = if crc & 0x80 != 0 {
                (crc << 1) ^ 0x07
            } else {
                crc << 1
            };
        }
    }
    crc
}

/// The check byte after each code: CRC-8 XOR 0xA5, so an all-black or all-white area never
/// decodes as a stamp.
fn check_byte(bytes: &[u8]) -> u8 {
    crc8(bytes) ^ 0xA5
}

fn check(buf: &[u8], width: usize, height: usize) -> Result<(), PatternError> {
    if width < MIN_WIDTH || height < MIN_HEIGHT {
        return Err(PatternError::TooSmall);
    }
    if buf.len() != width * height {
        return Err(PatternError::BufferSize);
    }
    Ok(())
}

/// Renders frame `stamp.frame` of the moving greyscale scene with `stamp` burned in.
pub fn render(
    buf: &mut [u8],
    width: usize,
    height: usize,
    stamp: Stamp,
) -> Result<(), PatternError> {
    check(buf, width, height)?;
    render_with(buf, width, height, stamp, |x, y, v| {
        let _ = (x, y);
        v
    });
    Ok(())
}

/// Renders the scene as the colour HM01B0 variant would deliver it: an RGGB Bayer mosaic of a
/// coloured version of the scene (red, green and blue bands move at different speeds). The burned-in
/// code and digits are pure black / white in every channel.
pub fn render_bayer(
    buf: &mut [u8],
    width: usize,
    height: usize,
    stamp: Stamp,
) -> Result<(), PatternError> {
    check(buf, width, height)?;
    let f = stamp.frame as usize;
    render_with(buf, width, height, stamp, |x, y, v| {
        // Channel of this photosite in an RGGB mosaic.
        let band = (x + 2 * f) % width * 3 / width; // 0, 1, 2: three vertical colour bands
        let (r, g, b) = match band {
            0 => (v, v / 3, v / 4),
            1 => (v / 4, v, v / 3),
            _ => (v / 3, v / 4, v),
        };
        match (y & 1, x & 1) {
            (0, 0) => r,
            (1, 1) => b,
            _ => g,
        }
    });
    Ok(())
}

fn render_with(
    buf: &mut [u8],
    width: usize,
    height: usize,
    stamp: Stamp,
    mut colour: impl FnMut(usize, usize, u8) -> u8,
) {
    let f = stamp.frame as usize;
    // Background: diagonal stripes moving right by 3 pixels per frame.
    // A bright square bouncing horizontally below the stamp area.
    let sq = 40usize.min(height / 4);
    let span = width - sq;
    let phase = (f * 5) % (2 * span);
    let sq_x = if phase < span {
        phase
    } else {
        2 * span - phase
    };
    let sq_y = (TEXT_ROW + 20).min(height - sq) + (f % 8);
    let sq_y = sq_y.min(height - sq);
    for y in 0..height {
        let row = &mut buf[y * width..(y + 1) * width];
        for (x, px) in row.iter_mut().enumerate() {
            let stripe = ((x + y + 3 * f) / 16) & 1;
            let mut v = if stripe == 1 { 150 } else { 70 } + ((y * 60) / height) as u8;
            if x >= sq_x && x < sq_x + sq && y >= sq_y && y < sq_y + sq {
                v = 230;
            }
            *px = colour(x, y, v);
        }
    }
    // Block codes (pure black/white, not passed through `colour`).
    let mut fbits = [0u8; 5];
    fbits[..4].copy_from_slice(&stamp.frame.to_le_bytes());
    fbits[4] = check_byte(&fbits[..4]);
    draw_code(buf, width, FRAME_ROW, FRAME_BLOCK_W, &fbits);
    let mut tbits = [0u8; 9];
    tbits[..8].copy_from_slice(&stamp.capture_ns.to_le_bytes());
    tbits[8] = check_byte(&tbits[..8]);
    draw_code(buf, width, TIME_ROW, TIME_BLOCK_W, &tbits);
    // Digits: "#frame  s.micro" on a black band.
    for y in TEXT_ROW - 1..TEXT_ROW + 15 {
        buf[y * width..(y + 1) * width].fill(0);
    }
    let mut text = [b' '; 32];
    let mut n = 0;
    text[n] = b'#';
    n += 1;
    n += write_u64(&mut text[n..], stamp.frame as u64, 1);
    n += 2;
    let secs = stamp.capture_ns / 1_000_000_000;
    let micros = (stamp.capture_ns % 1_000_000_000) / 1_000;
    n += write_u64(&mut text[n..], secs % 1_000_000, 1);
    text[n] = b'.';
    n += 1;
    n += write_u64(&mut text[n..], micros, 6);
    text[n] = b's';
    n += 1;
    draw_text(buf, width, CODE_X, TEXT_ROW, &text[..n]);
}

/// Writes `v` in decimal with at least `min_digits` digits; returns the number of bytes written.
fn write_u64(out: &mut [u8], mut v: u64, min_digits: usize) -> usize {
    let mut tmp = [0u8; 20];
    let mut i = 0;
    while v > 0 || i < min_digits {
        tmp[i] = b'0' + (v % 10) as u8;
        v /= 10;
        i += 1;
    }
    for k in 0..i {
        out[k] = tmp[i - 1 - k];
    }
    i
}

fn draw_code(buf: &mut [u8], width: usize, row: usize, block_w: usize, bytes: &[u8]) {
    for (i, bit) in bits(bytes).enumerate() {
        let x0 = CODE_X + i * block_w;
        let v = if bit { 255 } else { 0 };
        for y in row..row + BLOCK_H {
            buf[y * width + x0..y * width + x0 + block_w].fill(v);
        }
    }
}

fn bits(bytes: &[u8]) -> impl Iterator<Item = bool> + '_ {
    bytes
        .iter()
        .flat_map(|b| (0..8).map(move |k| (b >> k) & 1 == 1))
}

fn read_code<const N: usize>(buf: &[u8], width: usize, row: usize, block_w: usize) -> [u8; N] {
    let mut out = [0u8; N];
    for i in 0..N * 8 {
        // Majority of the 4 central pixels of the block.
        let cx = CODE_X + i * block_w + block_w / 2;
        let cy = row + BLOCK_H / 2;
        let s: u32 = [(cx - 1, cy - 1), (cx, cy - 1), (cx - 1, cy), (cx, cy)]
            .iter()
            .map(|&(x, y)| buf[y * width + x] as u32)
            .sum();
        if s >= 4 * 128 {
            out[i / 8] |= 1 << (i % 8);
        }
    }
    out
}

/// Reads the stamp back from a frame rendered by [`render`] or [`render_bayer`] (raw bytes, before any
/// demosaicing). `None` when the frame is too small or a CRC does not match (not a test-pattern frame).
pub fn decode(buf: &[u8], width: usize, height: usize) -> Option<Stamp> {
    check(buf, width, height).ok()?;
    let f: [u8; 5] = read_code(buf, width, FRAME_ROW, FRAME_BLOCK_W);
    let t: [u8; 9] = read_code(buf, width, TIME_ROW, TIME_BLOCK_W);
    if check_byte(&f[..4]) != f[4] || check_byte(&t[..8]) != t[8] {
        return None;
    }
    let mut fb = [0u8; 4];
    fb.copy_from_slice(&f[..4]);
    let mut tb = [0u8; 8];
    tb.copy_from_slice(&t[..8]);
    Some(Stamp {
        frame: u32::from_le_bytes(fb),
        capture_ns: u64::from_le_bytes(tb),
    })
}

/// 5 × 7 glyphs, one byte per row, bit 4 = leftmost column.
fn glyph(c: u8) -> [u8; 7] {
    match c {
        b'0' => [0x0E, 0x11, 0x13, 0x15, 0x19, 0x11, 0x0E],
        b'1' => [0x04, 0x0C, 0x04, 0x04, 0x04, 0x04, 0x0E],
        b'2' => [0x0E, 0x11, 0x01, 0x02, 0x04, 0x08, 0x1F],
        b'3' => [0x1F, 0x02, 0x04, 0x02, 0x01, 0x11, 0x0E],
        b'4' => [0x02, 0x06, 0x0A, 0x12, 0x1F, 0x02, 0x02],
        b'5' => [0x1F, 0x10, 0x1E, 0x01, 0x01, 0x11, 0x0E],
        b'6' => [0x06, 0x08, 0x10, 0x1E, 0x11, 0x11, 0x0E],
        b'7' => [0x1F, 0x01, 0x02, 0x04, 0x08, 0x08, 0x08],
        b'8' => [0x0E, 0x11, 0x11, 0x0E, 0x11, 0x11, 0x0E],
        b'9' => [0x0E, 0x11, 0x11, 0x0F, 0x01, 0x02, 0x0C],
        b'#' => [0x0A, 0x0A, 0x1F, 0x0A, 0x1F, 0x0A, 0x0A],
        b'.' => [0x00, 0x00, 0x00, 0x00, 0x00, 0x0C, 0x0C],
        b's' => [0x00, 0x00, 0x0E, 0x10, 0x0E, 0x01, 0x1E],
        _ => [0; 7],
    }
}

/// Draws `text` in white at 2× scale (12 × 14 pixels per character).
fn draw_text(buf: &mut [u8], width: usize, x0: usize, y0: usize, text: &[u8]) {
    for (i, &c) in text.iter().enumerate() {
        let g = glyph(c);
        let cx = x0 + i * 12;
        if cx + 10 > width {
            break;
        }
        for (ry, bits) in g.iter().enumerate() {
            for rx in 0..5 {
                if bits & (0x10 >> rx) != 0 {
                    for dy in 0..2 {
                        let y = y0 + ry * 2 + dy;
                        let x = cx + rx * 2;
                        buf[y * width + x] = 255;
                        buf[y * width + x + 1] = 255;
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::vec;
    use proptest::prelude::*;

    #[test]
    fn crc8_check_value() {
        // CRC-8/SMBUS check value for "123456789".
        assert_eq!(crc8(b"123456789"), 0xF4);
    }

    #[test]
    fn flat_areas_are_not_stamps() {
        assert_eq!(decode(&vec![0u8; 324 * 244], 324, 244), None);
        assert_eq!(decode(&vec![255u8; 324 * 244], 324, 244), None);
    }

    #[test]
    fn too_small_is_an_error() {
        let mut b = vec![0u8; 100 * 100];
        assert_eq!(
            render(
                &mut b,
                100,
                100,
                Stamp {
                    frame: 1,
                    capture_ns: 2
                }
            ),
            Err(PatternError::TooSmall)
        );
        let mut b = vec![0u8; 10];
        assert_eq!(
            render(
                &mut b,
                324,
                244,
                Stamp {
                    frame: 1,
                    capture_ns: 2
                }
            ),
            Err(PatternError::BufferSize)
        );
        assert_eq!(decode(&b, 324, 244), None);
    }

    #[test]
    fn corrupted_code_is_not_decoded() {
        let mut b = vec![0u8; 324 * 244];
        let s = Stamp {
            frame: 77,
            capture_ns: 123_456_789,
        };
        render(&mut b, 324, 244, s).unwrap();
        assert_eq!(decode(&b, 324, 244), Some(s));
        // Invert one block of the time code.
        let x = CODE_X + 5 * TIME_BLOCK_W;
        for y in TIME_ROW..TIME_ROW + BLOCK_H {
            for p in &mut b[y * 324 + x..y * 324 + x + TIME_BLOCK_W] {
                *p ^= 0xFF;
            }
        }
        assert_eq!(decode(&b, 324, 244), None);
    }

    #[test]
    fn consecutive_frames_differ() {
        let mut a = vec![0u8; 324 * 244];
        let mut b = vec![0u8; 324 * 244];
        render(
            &mut a,
            324,
            244,
            Stamp {
                frame: 1,
                capture_ns: 0,
            },
        )
        .unwrap();
        render(
            &mut b,
            324,
            244,
            Stamp {
                frame: 2,
                capture_ns: 0,
            },
        )
        .unwrap();
        let differing = a.iter().zip(&b).filter(|(x, y)| x != y).count();
        assert!(differing > 1000, "only {differing} pixels changed");
    }

    proptest! {
        #[test]
        fn stamp_roundtrips(frame: u32, capture_ns: u64, bayer: bool, w in 300usize..400, h in 48usize..260) {
            let mut b = vec![0u8; w * h];
            let s = Stamp { frame, capture_ns };
            if bayer { render_bayer(&mut b, w, h, s).unwrap() } else { render(&mut b, w, h, s).unwrap() }
            prop_assert_eq!(decode(&b, w, h), Some(s));
        }
    }
}
