//! Bit I/O of JPEG-LS entropy-coded segments: most significant bit first, and after every 0xFF
//! byte one stuffed 0 bit (ISO/IEC 14495-1, A.1: the byte after 0xFF carries only 7 bits), so
//! that no marker (0xFF followed by a byte ≥ 0x80) appears inside a segment.

/// Where a segment's code goes when the writer's buffer fills up.
pub trait Sink {
    /// Whether [`Sink::spill`] can take anything (the writer then spills a buffer with fewer than
    /// 4 bytes left; otherwise it writes to the last byte and records an overflow after it).
    const SPILLS: bool = true;
    /// Takes the buffer's content (whole bytes of the segment, in order). `false`: no room; the
    /// encoder then reports [`crate::EncodeError::OutputFull`].
    fn spill(&mut self, bytes: &[u8]) -> bool;
}

/// The writer's buffer is the final output: nothing can be spilled.
pub struct NoSpill;

impl Sink for NoSpill {
    const SPILLS: bool = false;
    fn spill(&mut self, _: &[u8]) -> bool {
        false
    }
}

/// The writer's registers: `used` pending bits, left-aligned in `acc` (at most 7 between
/// calls once flushed), whether the last byte was 0xFF, the write position.
#[derive(Clone, Copy, Debug, Default)]
pub struct Bits {
    acc: u32,
    used: u32,
    ff: bool,
    pos: usize,
    overflow: bool,
}

impl Bits {
    /// Bits that fit before a flush.
    #[inline(always)]
    pub(crate) fn room(&self) -> u32 {
        32 - self.used
    }
    /// The accumulator and its bit count.
    #[inline(always)]
    pub(crate) fn acc_used(&self) -> (u32, u32) {
        (self.acc, self.used)
    }
    /// Sets the accumulator and its bit count.
    #[inline(always)]
    pub(crate) fn set_acc(&mut self, acc: u32, used: u32) {
        self.acc = acc;
        self.used = used;
    }
    /// Appends `count` bits (`count <= room()`).
    #[inline(always)]
    pub(crate) fn push(&mut self, value: u32, count: u32) {
        self.used += count;
        self.acc |= value << (32 - self.used);
    }
}

/// Writes one segment's bits into `buf`, handing full buffers to `sink`.
pub struct Writer<'a, S: Sink> {
    /// The registers (copied into locals by the line coder).
    pub bits: Bits,
    /// The buffer (an L1 chunk on the cluster; the output itself elsewhere).
    pub buf: &'a mut [u8],
    /// Where full buffers go.
    pub sink: S,
}

impl<'a, S: Sink> Writer<'a, S> {
    /// An empty segment writing into `buf` (at least 8 bytes).
    pub fn new(buf: &'a mut [u8], sink: S) -> Self {
        Writer {
            bits: Bits::default(),
            buf,
            sink,
        }
    }

    /// Bytes in the buffer.
    pub fn len(&self) -> usize {
        self.bits.pos
    }

    /// Nothing in the buffer.
    pub fn is_empty(&self) -> bool {
        self.bits.pos == 0
    }

    /// True when the code did not fit.
    pub fn overflowed(&self) -> bool {
        self.bits.overflow
    }

    /// Appends the low `count` bits of `value` (`count <= 25`).
    pub fn put(&mut self, value: u32, count: u32) {
        let mut b = self.bits;
        put(&mut b, self.buf, &mut self.sink, value, count);
        self.bits = b;
    }

    /// Ends the segment: the last bits padded with zeros to a whole byte; after a final 0xFF one
    /// more byte 0x00 (its stuffed bit and seven zeros), as CharLS ends a scan. The buffer's
    /// content is the segment's tail (the caller spills or keeps it).
    pub fn finish(&mut self) {
        let mut b = self.bits;
        flush(&mut b, self.buf, &mut self.sink);
        if b.used > 0 {
            // Fewer bits than a unit are left: pad them to one.
            b.used = if b.ff { 7 } else { 8 };
            flush(&mut b, self.buf, &mut self.sink);
        }
        if b.ff {
            b.used = 8;
            b.acc = 0;
            flush(&mut b, self.buf, &mut self.sink);
        }
        self.bits = b;
    }

    /// Hands the buffer's content to the sink and starts the buffer again.
    pub fn spill(&mut self) {
        spill(&mut self.bits, self.buf, &mut self.sink);
    }
}

#[inline(never)]
#[cold]
fn spill<S: Sink>(b: &mut Bits, buf: &mut [u8], sink: &mut S) {
    let n = b.pos.min(buf.len());
    if n > 0 && !sink.spill(&buf[..n]) {
        b.overflow = true;
    }
    b.pos = 0;
}

/// Emits every whole unit (8 bits; 7 after 0xFF) of the accumulator.
#[inline(always)]
pub(crate) fn flush<S: Sink>(b: &mut Bits, buf: &mut [u8], sink: &mut S) {
    if S::SPILLS && b.pos + 4 > buf.len() {
        spill(b, buf, sink);
    }
    loop {
        let unit = 8 - b.ff as u32;
        if b.used < unit {
            return;
        }
        let byte = (b.acc >> (32 - unit)) as u8;
        b.acc <<= unit;
        b.used -= unit;
        b.ff = byte == 0xff;
        match buf.get_mut(b.pos) {
            Some(d) => {
                *d = byte;
                b.pos += 1;
            }
            None => b.overflow = true,
        }
    }
}

/// Appends the low `count` bits of `value` (`1 <= count <= 25`, higher bits zero).
#[inline(always)]
pub(crate) fn put<S: Sink>(b: &mut Bits, buf: &mut [u8], sink: &mut S, value: u32, count: u32) {
    if b.used + count > 32 {
        flush(b, buf, sink);
    }
    b.used += count;
    b.acc |= value << (32 - b.used);
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
        let mut w = Writer::new(&mut buf, NoSpill);
        // 0xFF, then bits that would make a marker without the stuffed bit.
        w.put(0xff, 8);
        w.put(0x1ff, 9);
        w.put(0b101, 3);
        w.finish();
        let n = w.len();
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
        let mut w = Writer::new(&mut buf, NoSpill);
        w.put(0xff, 8);
        w.finish();
        let n = w.len();
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
        let mut buf = [0u8; 8];
        let mut w = Writer::new(&mut buf, NoSpill);
        for _ in 0..12 {
            w.put(0x55, 8);
        }
        w.finish();
        assert!(w.overflowed());
    }
}
