//! The line coder: one line of one component, regular and run mode (ISO/IEC 14495-1, A.2–A.7),
//! NEAR = 0, 8 bits. Generic over [`Ops`], the few operations where the PULP instructions pay
//! (`p.fl1` for the Golomb parameter, `p.min`/`p.max` for the median predictor, `p.clipu` for the
//! corrected prediction, `p.abs`): [`Portable`] here, `Pulp` in `pulp.rs` (feature `pulp`); both
//! code the same bits (checked on the host, and on the GAP8 model by the benchmark's digests).
//!
//! Lines are `width + 2` bytes: `line[1..=width]` the samples, `line[0]` and `line[width + 1]`
//! the edges the standard defines (A.2.1: `Ra` of the first sample is the sample above it, `Rc`
//! the first sample two lines up; `Rd` of the last sample is the sample above it), which
//! [`edges`] sets before each line.
use crate::bits::{Bits, Sink, Writer, flush};
use crate::model::{CONTEXTS, Ctx, J, LIMIT, Model, QBPP, RunCtx};

/// The operations a kernel variant provides, and its line coder.
pub trait Ops {
    /// The gradient quantisation table its line coder reads (`table[d + 255]` for a difference
    /// `d`); the cluster job copies it into L1.
    const QUANT: &'static [i8; 511] = &crate::model::QUANT;
    /// The factor of its table's entries: `QUANT[d + 255] = QUANT_SCALE · Q(d)` (the table for
    /// other thresholds is [`crate::model::Preset::table`]`(QUANT_SCALE)`).
    const QUANT_SCALE: i8 = 1;
    /// Codes line `cur[1..=width]` with `prev` above it (see [`encode_line`]); `quant` is
    /// [`Ops::QUANT`] or a copy of it. The default is the generic line coder over the operations
    /// below.
    #[inline(always)]
    fn encode_line<S: Sink>(
        m: &mut Model,
        quant: &[i8; 511],
        w: &mut Writer<'_, S>,
        prev: &mut [u8],
        cur: &mut [u8],
        width: usize,
    ) where
        Self: Sized,
    {
        encode_line::<Self, S>(m, quant, w, prev, cur, width)
    }
    /// Golomb parameter of a regular context: the least `k` with `n << k >= a` (`n >= 1`).
    fn k(n: u32, a: u32) -> u32;
    /// The median edge detector.
    fn med(ra: i32, rb: i32, rc: i32) -> i32;
    /// `v` clamped to 0..=255.
    fn clamp255(v: i32) -> i32;
    /// |v|.
    fn abs(v: i32) -> i32;
}

/// Plain RV32IMC.
pub struct Portable;

impl Ops for Portable {
    #[inline(always)]
    fn k(n: u32, a: u32) -> u32 {
        let mut k = 0;
        while (n << k) < a {
            k += 1;
        }
        k
    }
    #[inline(always)]
    fn med(ra: i32, rb: i32, rc: i32) -> i32 {
        crate::model::predict(ra, rb, rc)
    }
    #[inline(always)]
    fn clamp255(v: i32) -> i32 {
        v.clamp(0, 255)
    }
    #[inline(always)]
    fn abs(v: i32) -> i32 {
        v.abs()
    }
}

/// Sets the edge samples of `prev` / `cur` (`width + 2` bytes each) before coding `cur`.
#[inline(always)]
pub fn edges(prev: &mut [u8], cur: &mut [u8], width: usize) {
    prev[width + 1] = prev[width];
    cur[0] = prev[1];
}

/// The writer's registers and its buffer, as locals of the line coder.
pub(crate) struct Out<'a, 'b, S: Sink> {
    pub(crate) b: Bits,
    pub(crate) buf: &'a mut [u8],
    pub(crate) sink: &'b mut S,
}

impl<S: Sink> Out<'_, '_, S> {
    #[inline(always)]
    fn put(&mut self, v: u32, c: u32) {
        if self.b.room() < c {
            self.flush();
        }
        self.b.push(v, c);
    }
    /// Inline: a call here makes the regular loop save and reload its registers on every sample.
    #[inline(always)]
    fn flush(&mut self) {
        flush(&mut self.b, self.buf, self.sink);
    }
    /// [`Out::flush`] for the regular loop, whose accumulator lives in registers.
    #[inline(always)]
    fn flush_regs(&mut self, acc: u32, used: u32) -> (u32, u32) {
        self.b.set_acc(acc, used);
        flush(&mut self.b, self.buf, self.sink);
        self.b.acc_used()
    }
    /// The mapped error `merr` with the limited-length Golomb code `LG(k, limit)` (A.5.3).
    #[inline(always)]
    fn golomb(&mut self, k: u32, merr: u32, limit: u32) {
        let high = merr >> k;
        if high + 1 + k <= 25 && high < limit - QBPP - 1 {
            // `high` zeros, a one, the `k` low bits: `(1 << k) | (merr & ((1 << k) - 1))`.
            self.put(merr.wrapping_sub(high.wrapping_sub(1) << k), high + 1 + k);
        } else {
            self.golomb_long(k, merr, limit);
        }
    }
    /// Long codes: more than 25 bits, or the escape.
    #[inline(never)]
    #[cold]
    pub(crate) fn golomb_long(&mut self, k: u32, merr: u32, limit: u32) {
        let high = merr >> k;
        if high < limit - QBPP - 1 {
            self.zeros(high);
            self.put((1 << k) | (merr & ((1 << k) - 1)), 1 + k);
        } else {
            // Escape: `limit - qbpp - 1` zeros, a one, `merr - 1` in qbpp bits.
            self.zeros(limit - QBPP - 1);
            self.put((1 << QBPP) | ((merr - 1) & ((1 << QBPP) - 1)), QBPP + 1);
        }
    }
    fn zeros(&mut self, mut c: u32) {
        while c > 24 {
            self.put(0, 24);
            c -= 24;
        }
        if c > 0 {
            self.put(0, c);
        }
    }
}

/// Updates a regular context with a (modulo-reduced) error (A.6.1, A.6.2).
#[inline(always)]
fn update<K: Ops>(ctx: &mut Ctx, err: i32, reset: i32) {
    let mut a = ctx.a as i32 + K::abs(err);
    let mut b = ctx.b as i32 + err;
    let mut n = ctx.n as i32;
    let mut c = ctx.c as i32;
    if n == reset {
        a >>= 1;
        b >>= 1;
        n >>= 1;
    }
    n += 1;
    if b + n <= 0 {
        b += n;
        if b <= -n {
            b = -n + 1;
        }
        if c > -128 {
            c -= 1;
        }
    } else if b > 0 {
        b -= n;
        if b > 0 {
            b = 0;
        }
        if c < 127 {
            c += 1;
        }
    }
    *ctx = Ctx {
        a: a as u16,
        b: b as i16,
        c: c as i8,
        n: n as u8,
    };
}

/// Codes line `cur[1..=width]` with `prev` as the line above (sets the edges itself); `quant`
/// is the gradient quantisation table ([`crate::model::QUANT`], or a copy of it in L1).
#[inline(never)]
pub fn encode_line<K: Ops, S: Sink>(
    m: &mut Model,
    quant: &[i8; 511],
    w: &mut Writer<'_, S>,
    prev: &mut [u8],
    cur: &mut [u8],
    width: usize,
) {
    edges(prev, cur, width);
    let (prev, cur) = (&prev[..width + 2], &cur[..width + 2]);
    let mut o = Out {
        b: w.bits,
        buf: &mut *w.buf,
        sink: &mut w.sink,
    };
    let q = |d: i32| quant[(d + 255) as usize] as i32;
    let reset = m.reset_at as i32;
    let mut i = 1;
    let mut rb = prev[0] as i32;
    let mut rd = prev[1] as i32;
    // Q(Rb - Rc) of the next sample is Q(Rd - Rb) of this one.
    let mut q2 = q(rd - rb);
    // The accumulator in registers (the rest of the writer is touched only when flushing).
    let (mut acc, mut used) = o.b.acc_used();
    while i <= width {
        let ra = cur[i - 1] as i32;
        let rc = rb;
        rb = rd;
        rd = prev[i + 1] as i32;
        let q1 = q(rd - rb);
        let ctxn = (q1 * 9 + q2) * 9 + q(rc - ra);
        q2 = q1;
        if ctxn != 0 {
            // Regular mode.
            let x = cur[i] as i32;
            let sign = ctxn >> 31;
            let ctx = &mut m.ctx[(((ctxn ^ sign) - sign) as usize).min(CONTEXTS - 1)];
            let k = K::k(ctx.n as u32, ctx.a as u32);
            let px = K::clamp255(K::med(ra, rb, rc) + ((ctx.c as i32 ^ sign) - sign));
            // The error in the context's orientation, reduced modulo RANGE to -128..=127.
            let err = (((x - px) ^ sign) - sign) as i8 as i32;
            let e = if k == 0 {
                err ^ ((2 * ctx.b as i32 + ctx.n as i32 - 1) >> 31)
            } else {
                err
            };
            let merr = ((e << 1) ^ (e >> 31)) as u32;
            let high = merr >> k;
            let len = high + 1 + k;
            if len <= 25 && high < LIMIT - QBPP - 1 {
                // `high` zeros, a one, the `k` low bits: `(1 << k) | (merr & ((1 << k) - 1))`.
                if used + len > 32 {
                    (acc, used) = o.flush_regs(acc, used);
                }
                used += len;
                acc |= merr.wrapping_sub(high.wrapping_sub(1) << k) << (32 - used);
            } else {
                o.b.set_acc(acc, used);
                o.golomb_long(k, merr, LIMIT);
                (acc, used) = o.b.acc_used();
            }
            update::<K>(ctx, err, reset);
            i += 1;
        } else {
            // Run mode (out of line: the regular loop must stay small).
            o.b.set_acc(acc, used);
            let next = run_mode::<K, S>(m, &mut o, prev, cur, i, width, ra);
            (acc, used) = o.b.acc_used();
            let Some(next) = next else {
                break;
            };
            i = next;
            rb = prev[i - 1] as i32;
            rd = prev[i] as i32;
            q2 = q(rd - rb);
        }
    }
    // Whole bytes out (so that the caller sees the line's code in the buffer).
    o.b.set_acc(acc, used);
    flush(&mut o.b, o.buf, o.sink);
    w.bits = o.b;
}

/// Run mode at sample `i` (A.7): the run of samples equal to `ra`, then (unless the run reaches
/// the end of the line, `None`) the interruption sample. Returns the next sample's index.
#[inline(never)]
pub(crate) fn run_mode<K: Ops, S: Sink>(
    m: &mut Model,
    o: &mut Out<'_, '_, S>,
    prev: &[u8],
    cur: &[u8],
    i: usize,
    width: usize,
    ra: i32,
) -> Option<usize> {
    let mut n = 0;
    let ra8 = ra as u8;
    while i + n <= width && cur[i + n] == ra8 {
        n += 1;
    }
    let eol = i + n > width;
    // The run length (A.7.1).
    let mut count = n;
    loop {
        let len = 1usize << J[m.run_index as usize];
        if count < len {
            break;
        }
        o.put(1, 1);
        count -= len;
        if m.run_index < 31 {
            m.run_index += 1;
        }
    }
    if eol {
        if count != 0 {
            o.put(1, 1);
        }
        return None;
    }
    // A zero, then the remainder in J[RUNindex] bits.
    o.put(count as u32, J[m.run_index as usize] as u32 + 1);
    let i = i + n;
    // The interruption sample (A.7.2).
    let x = cur[i] as i32;
    let rbx = prev[i] as i32;
    let ritype = (ra == rbx) as i32;
    let err = if ritype == 1 {
        x - ra
    } else if rbx > ra {
        x - rbx
    } else {
        rbx - x
    } as i8 as i32;
    let limit = LIMIT - J[m.run_index as usize] as u32 - 1;
    let ctx: &mut RunCtx = &mut m.run[ritype as usize];
    let k = ctx.k(ritype);
    let map = ctx.map(err, k) as i32;
    let emerr = 2 * K::abs(err) - ritype - map;
    o.golomb(k, emerr as u32, limit);
    ctx.update(err, emerr, ritype, m.reset_at as i32);
    m.run_index = m.run_index.saturating_sub(1);
    Some(i + 1)
}
