//! Bit I/O of JPEG-LS entropy-coded segments: most significant bit first, and after every 0xFF
//! byte one stuffed 0 bit (ISO/IEC 14495-1, A.1: the byte after 0xFF carries only 7 bits), so
//! that no marker (0xFF followed by a byte ≥ 0x80) appears inside a segment.

/// Where a segment's bytes go.
pub trait Sink {
    /// Appends one byte. A sink that is full records it and drops the byte (checked once per
    /// segment or line: [`Sink::overflowed`]).
    fn push(&mut self, byte: u8);
    /// True when a byte was dropped.
    fn overflowed(&self) -> bool;
}

/// A sink writing into a slice.
pub struct SliceSink<'a> {
    out: &'a mut [u8],
    pos: usize,
    overflow: bool,
}

impl<'a> SliceSink<'a> {
    /// Writes from the start of `out`.
    pub fn new(out: &'a mut [u8]) -> Self {
        SliceSink {
            out,
            pos: 0,
            overflow: false,
        }
    }
    /// Bytes written.
    pub fn len(&self) -> usize {
        self.pos
    }
    /// Nothing written yet.
    pub fn is_empty(&self) -> bool {
        self.pos == 0
    }
}

impl Sink for SliceSink<'_> {
    #[inline(always)]
    fn push(&mut self, byte: u8) {
        match self.out.get_mut(self.pos) {
            Some(b) => {
                *b = byte;
                self.pos += 1;
            }
            None => self.overflow = true,
        }
    }
    fn overflowed(&self) -> bool {
        self.overflow
    }
}

/// The bit accumulator of an encoder: `n` pending bits, right-aligned in `acc`, at most 7 (or
/// 6 after 0xFF) between calls.
#[derive(Clone, Copy, Debug, Default)]
pub struct BitWriter {
    acc: u32,
    n: u32,
    ff: bool,
}

impl BitWriter {
    /// An empty writer (start of a segment).
    pub const fn new() -> Self {
        BitWriter {
            acc: 0,
            n: 0,
            ff: false,
        }
    }

    /// Appends the low `count` bits of `value` (`count <= 25`, higher bits of `value` zero).
    #[inline(always)]
    pub fn put<S: Sink>(&mut self, s: &mut S, value: u32, count: u32) {
        if self.n + count > 32 {
            self.drain(s);
        }
        // `count < 32`: the shift is in range; bits shifted out were emitted already.
        self.acc = (self.acc << count) | value;
        self.n += count;
    }

    /// `count` zero bits (any count).
    #[inline(always)]
    pub fn zeros<S: Sink>(&mut self, s: &mut S, mut count: u32) {
        while count > 24 {
            self.put(s, 0, 24);
            count -= 24;
        }
        self.put(s, 0, count);
    }

    /// Emits every whole byte (7 bits after a 0xFF) of the accumulator.
    #[inline(always)]
    pub fn drain<S: Sink>(&mut self, s: &mut S) {
        loop {
            let unit = if self.ff { 7 } else { 8 };
            if self.n < unit {
                return;
            }
            self.n -= unit;
            let byte = (self.acc >> self.n) as u8 & if self.ff { 0x7f } else { 0xff };
            self.ff = byte == 0xff;
            s.push(byte);
        }
    }

    /// Ends the segment: the last bits padded with zeros to a whole byte; after a final 0xFF one
    /// more byte 0x00 (its stuffed bit and seven zeros), as CharLS ends a scan.
    pub fn finish<S: Sink>(&mut self, s: &mut S) {
        self.drain(s);
        if self.n > 0 {
            let unit = if self.ff { 7 } else { 8 };
            let pad = unit - self.n;
            self.put(s, 0, pad);
            self.drain(s);
        }
        if self.ff {
            s.push(0);
            self.ff = false;
        }
        self.acc = 0;
        self.n = 0;
    }
}

/// Reads the bits of one entropy-coded segment (the bytes between two markers). Past its end it
/// reads zeros and records that it did: decoding then fails with a typed error.
pub struct BitReader<'a> {
    data: &'a [u8],
    pos: usize,
    /// Pending bits, left-aligned; the bits below the pending ones are zero.
    acc: u64,
    n: u32,
    /// How many of the lowest pending bits are zeros past the end.
    fake: u32,
    past_end: bool,
}

impl<'a> BitReader<'a> {
    /// Reads `data` (one segment: no marker inside).
    pub fn new(data: &'a [u8]) -> Self {
        BitReader {
            data,
            pos: 0,
            acc: 0,
            n: 0,
            fake: 0,
            past_end: false,
        }
    }

    #[inline(never)]
    fn refill(&mut self) {
        while self.n <= 56 {
            let Some(&b) = self.data.get(self.pos) else {
                self.fake += 8;
                self.n += 8;
                continue;
            };
            let after_ff = self.pos > 0 && self.data[self.pos - 1] == 0xff;
            if after_ff {
                // The stuffed bit (0 in a valid segment; a 1 here is garbage, read as data).
                self.acc |= ((b & 0x7f) as u64) << (57 - self.n);
                self.n += 7;
            } else {
                self.acc |= (b as u64) << (56 - self.n);
                self.n += 8;
            }
            self.pos += 1;
        }
    }

    #[inline(always)]
    fn consume(&mut self, count: u32) {
        self.acc <<= count;
        self.n -= count;
        if self.n < self.fake {
            self.past_end = true;
            self.fake = self.n;
        }
    }

    /// Reads `count` bits (0..=32).
    #[inline(always)]
    pub fn bits(&mut self, count: u32) -> u32 {
        if count == 0 {
            return 0;
        }
        if self.n < count {
            self.refill();
        }
        let v = (self.acc >> (64 - count)) as u32;
        self.consume(count);
        v
    }

    /// One bit.
    #[inline(always)]
    pub fn bit(&mut self) -> bool {
        self.bits(1) == 1
    }

    /// Counts the zero bits before the next 1 and consumes them and the 1. More than `max` zeros:
    /// returns `max + 1` having consumed `max + 1` zeros.
    #[inline(always)]
    pub fn unary(&mut self, max: u32) -> u32 {
        let mut z = 0;
        loop {
            if self.n < 32 {
                self.refill();
            }
            let lz = self.acc.leading_zeros();
            if lz < 32 {
                if z + lz > max {
                    self.consume(max + 1 - z);
                    return max + 1;
                }
                self.consume(lz + 1);
                return z + lz;
            }
            if z + 32 > max {
                self.consume(max + 1 - z);
                return max + 1;
            }
            self.consume(32);
            z += 32;
        }
    }

    /// True when the segment's data ran out and zeros were read instead.
    pub fn ran_out(&self) -> bool {
        self.past_end
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stuffing_after_ff_and_reading_back() {
        let mut buf = [0u8; 64];
        let mut s = SliceSink::new(&mut buf);
        let mut w = BitWriter::new();
        // 0xFF, then bits that would make a marker without the stuffed bit.
        w.put(&mut s, 0xff, 8);
        w.put(&mut s, 0x1ff, 9);
        w.put(&mut s, 0b101, 3);
        w.finish(&mut s);
        let n = s.len();
        let out = &buf[..n];
        for pair in out.windows(2) {
            assert!(pair[0] != 0xff || pair[1] < 0x80, "{out:02x?}");
        }
        assert_eq!(out[0], 0xff);
        let mut r = BitReader::new(out);
        assert_eq!(r.bits(8), 0xff);
        assert_eq!(r.bits(9), 0x1ff);
        assert_eq!(r.bits(3), 0b101);
        assert!(!r.ran_out());
    }

    #[test]
    fn a_final_ff_gets_a_zero_byte() {
        let mut buf = [0u8; 8];
        let mut s = SliceSink::new(&mut buf);
        let mut w = BitWriter::new();
        w.put(&mut s, 0xff, 8);
        w.finish(&mut s);
        let n = s.len();
        assert_eq!(&buf[..n], &[0xff, 0x00]);
    }

    #[test]
    fn reading_past_the_end_is_recorded() {
        let mut r = BitReader::new(&[0x80]);
        assert_eq!(r.unary(30), 0);
        assert_eq!(r.bits(7), 0);
        assert!(!r.ran_out());
        assert_eq!(r.bits(1), 0);
        assert!(r.ran_out());
        let mut r = BitReader::new(&[]);
        assert_eq!(r.unary(23), 24);
        assert!(r.ran_out());
    }

    #[test]
    fn overflow_is_recorded_not_written() {
        let mut buf = [0u8; 2];
        let mut s = SliceSink::new(&mut buf);
        let mut w = BitWriter::new();
        for _ in 0..4 {
            w.put(&mut s, 0x55, 8);
        }
        w.finish(&mut s);
        assert!(s.overflowed());
        assert_eq!(buf, [0x55, 0x55]);
    }
}
