//! The PULP line coder's arithmetic in Rust: [`PulpModel`] codes exactly what the assembly
//! kernel of `pulp.rs` codes, with the same state, the same formulas and the same exits, so that
//! the reformulation can be checked everywhere (host tests, rv32 on QEMU) against the portable
//! coder, and the assembly on the GAP8 model against this (`make gvsoc-bench` compares digests).
//!
//! The regular mode is computed differently from [`crate::line`], with the same results:
//!
//! * **Context number** from a table of `6 · Q(d)` ([`QUANT6`]): `6 · (81 Q1 + 9 Q2 + Q3)` is two
//!   multiply-adds (`p.mac`), its absolute value is the context's byte offset (a context is 6
//!   bytes) and its sign the context's sign.
//! * **MED** as `max(min(Ra, Rb), min(max(Ra, Rb), Rb − (Rc − Ra)))`, reusing the gradient
//!   `Rc − Ra`.
//! * **Golomb parameter** `k = t + (N << t < A)` with `t = fl1(A | N) − fl1(N)` (`fl1`: the index
//!   of the most significant one): `A | N` makes `t ≥ 0` and covers `A = 0`.
//! * **Bias state**: the context's `b` field holds `D = B + N − 1` (0..N−1) instead of `B`
//!   (both start at 0). Then the update of A.6.2 is branch-free: with `D' = D + err + 1`
//!   (`D + err`, halved as B, plus RESET / 2 on a reset), `dc = (N_old < D') − (D' < 0)`,
//!   `C = clip(C + dc, −128, 127)`, `D = clip(D' − N_new·dc, 0, N_old)`.
//! * **Error mapping**: the `k = 0` correction of A.5.2 (`2B ≤ −N`, i.e. `D < N / 2`) flips
//!   the mapped error's lowest bit; `D + 256k < N / 2` tests both conditions at once (`f`; N is
//!   at most RESET, at most 255). `MErrval = 2|e| − (e < 0)` flipped by `f` is
//!   `2|e| + (−(e < 0) ^ f)`: one multiply-add with the constant 2 on the `|e|` the update adds
//!   to `A` anyway.
//! * **Bit writer**: the accumulator is left-aligned, `nu = −used`; a code of up to 16 bits is
//!   OR-ed in at `acc |= v << (nu mod 32)`; two bytes go out whenever 16 bits are pending, and
//!   the stuffed 0 bit after a 0xFF byte goes into the accumulator at once (no "last byte was
//!   0xFF" state between samples).
//!
//! A [`Kernel`] codes a whole line, run mode ([`run_mode`], A.7 with `J` computed, not looked
//! up) and codes longer than 16 bits included; only a full buffer ([`Exit::Spill`]) goes back to
//! the driver [`encode_line_with`], which spills the buffer (or goes on in the checked Rust
//! kernel) and enters the kernel again.
use crate::bits::{Sink, Writer, flush};
use crate::line::{Ops, Out, Portable, edges};
use crate::model::{LIMIT, Model, Preset};

/// `QUANT6[d + 255] = 6 · Q(d)`: the gradient quantisation table of the PULP line coder (the
/// default thresholds).
pub static QUANT6: [i8; 511] = Preset::DEFAULT.table(6);

/// Bytes the kernel keeps free at the end of its buffer: it stops (with [`Exit::Spill`]) at the
/// end of a sample once fewer are left, and writes at most 14 bytes per sample (a run with its
/// interruption sample and its stuffed bits).
pub const MARGIN: usize = 16;

/// Byte offset of the run-interruption contexts in [`Model`] (after the 365 regular contexts and
/// a pad): `A`, `N`, `Nn` as `i32`, 12 bytes each; then `RUNindex` (`u32`).
pub const RUN_OFFSET: usize = 2192;
/// Byte offset of `RUNindex` in [`Model`].
pub const RUN_INDEX_OFFSET: usize = 2216;
const _: () = assert!(core::mem::offset_of!(Model, run) == RUN_OFFSET);
const _: () = assert!(core::mem::offset_of!(Model, run_index) == RUN_INDEX_OFFSET);
const _: () = assert!(core::mem::offset_of!(Model, ctx) == 0);
const _: () = assert!(core::mem::size_of::<crate::model::Ctx>() == 6);

/// Why the kernel stopped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Exit {
    /// Every sample of the line is coded.
    LineEnd,
    /// Fewer than [`MARGIN`] bytes are left in the buffer (at a sample boundary; `State::i` is
    /// the next sample).
    Spill,
}

/// The kernel's state between calls.
#[derive(Clone, Copy, Debug)]
pub struct State {
    /// Next sample (1..=width).
    pub i: usize,
    /// Pending bits, left-aligned (fewer than 16 at entry and exit).
    pub acc: u32,
    /// How many.
    pub used: u32,
    /// Write position in the buffer.
    pub pos: usize,
    /// The kernel stops at the end of a sample once `pos >= limit`.
    pub limit: usize,
    /// A byte did not fit in the buffer (the Rust kernel only: it checks every write).
    pub overflow: bool,
}

/// A line kernel: codes samples `st.i..=width` of `cur` (regular and run mode) until the line's
/// end or a full buffer. `prev` and `cur` are `width + 2` bytes with their edges set; `quant` is
/// [`QUANT6`] (or a copy); the contexts' `b` fields hold `D` (module docs).
pub trait Kernel {
    /// Runs the kernel.
    fn line(
        m: &mut Model,
        quant: &[i8; 511],
        prev: &[u8],
        cur: &[u8],
        width: usize,
        st: &mut State,
        buf: &mut [u8],
    ) -> Exit;
}

/// `fl1` of PULP: the index of the most significant one (`x != 0`).
#[inline(always)]
fn fl1(x: u32) -> i32 {
    31 - x.leading_zeros() as i32
}

/// The least `k` with `n << k >= a` (`n >= 1`, `a < 2^16`): `t + (n << t < a)` with
/// `t = fl1(a | n) − fl1(n)`.
#[inline(always)]
fn golomb_k(a: i32, n: i32) -> i32 {
    let t = fl1((a | n) as u32) - fl1(n as u32);
    t + (((n << t) as u32) < a as u32) as i32
}

/// `J[RUNindex]` of A.7.1.2 without the table: `max(ri / 4, ri / 2 − 4, ri − 16)`.
#[inline(always)]
fn run_j(ri: i32) -> i32 {
    (ri >> 2).max((ri >> 1) - 4).max(ri - 16)
}

/// The bit writer of the kernel: left-aligned accumulator, `nu = −used`.
pub(crate) struct Bw<'a> {
    pub(crate) acc: u32,
    pub(crate) nu: i32,
    pub(crate) pos: usize,
    pub(crate) buf: &'a mut [u8],
    pub(crate) overflow: bool,
}

impl Bw<'_> {
    #[inline(always)]
    fn byte(&mut self, b: u8) {
        match self.buf.get_mut(self.pos) {
            Some(d) => {
                *d = b;
                self.pos += 1;
            }
            None => self.overflow = true,
        }
    }

    /// Two bytes out (one when the first is 0xFF) while 16 bits or more are pending; the stuffed
    /// 0 bit after a 0xFF byte goes into the accumulator.
    #[inline(always)]
    pub(crate) fn flush2(&mut self) {
        while self.nu < -15 {
            let (b1, b2) = ((self.acc >> 24) as u8, (self.acc >> 16) as u8);
            self.byte(b1);
            if b1 == 0xff {
                self.acc = (self.acc << 8) >> 1;
                self.nu += 7;
                continue;
            }
            self.byte(b2);
            self.acc <<= 16;
            self.nu += 16;
            if b2 == 0xff {
                self.acc >>= 1;
                self.nu -= 1;
            }
        }
    }

    /// `len` (1..=16) bits of `v`.
    #[inline(always)]
    fn put(&mut self, v: u32, len: i32) {
        self.flush2();
        self.nu -= len;
        self.acc |= v << (self.nu & 31);
    }

    /// `z` zero bits.
    fn zeros(&mut self, mut z: i32) {
        while z > 0 {
            self.flush2();
            let n = z.min(16);
            self.nu -= n;
            z -= n;
        }
    }

    /// The limited-length Golomb code of `merr` (A.5.3): `high` zeros, a one and `k` bits, or
    /// the escape (`limit − 9` zeros, a one, `merr − 1` in 8 bits).
    pub(crate) fn golomb(&mut self, k: i32, merr: u32, limit: i32) {
        let high = (merr >> k) as i32;
        if high < limit - 9 {
            self.zeros(high);
            self.put((merr & ((1 << k) - 1)) | (1 << k), k + 1);
        } else {
            self.zeros(limit - 9);
            self.put(0x100 | ((merr - 1) & 0xff), 9);
        }
    }
}

/// The Rust transcription of the assembly kernel.
pub struct ModelKernel;

impl Kernel for ModelKernel {
    fn line(
        m: &mut Model,
        quant: &[i8; 511],
        prev: &[u8],
        cur: &[u8],
        width: usize,
        st: &mut State,
        buf: &mut [u8],
    ) -> Exit {
        let q = |d: i32| quant[(d + 255) as usize] as i32;
        let reset = m.reset_at as i32;
        let mut i = st.i;
        let mut w = Bw {
            acc: st.acc,
            nu: -(st.used as i32),
            pos: st.pos,
            buf,
            overflow: st.overflow,
        };
        let exit = 'line: loop {
            // (Re-)entry at sample i: Ra, Rb, Rc and Q2 from the lines.
            if i > width {
                break Exit::LineEnd;
            }
            let mut ra = cur[i - 1] as i32;
            let mut rb = prev[i] as i32;
            let mut rc = prev[i - 1] as i32;
            let mut q2 = q(rb - rc);
            loop {
                // The regular loop (two samples per hardware-loop pass in the assembly).
                let d3 = rc - ra;
                let rd = prev[i + 1] as i32;
                let x = cur[i] as i32;
                let q1 = q(rd - rb);
                let ctx6 = q(d3) + 9 * (q2 + 9 * q1);
                if ctx6 == 0 {
                    break;
                }
                q2 = q1;
                let ctx = &mut m.ctx[(ctx6.unsigned_abs() / 6) as usize];
                let (a, n, d, c) = (ctx.a as i32, ctx.n as i32, ctx.b as i32, ctx.c as i32);
                let med = (rb - d3).min(ra.max(rb)).max(ra.min(rb));
                let k = golomb_k(a, n);
                let s = (ctx6 >> 31) | 1;
                let px = (med + s * c).clamp(0, 255);
                let e = ((x - px) * s) as i8 as i32;
                // MErrval = 2|e| − (e < 0), its lowest bit flipped (f) when k = 0 and D < N/2
                // (D + 256k < N/2): 2|e| + (−(e < 0) ^ f), one p.mac.
                let f = ((d + (k << 8)) < (n >> 1)) as i32;
                let merr = (((e >> 31) ^ f) + 2 * e.abs()) as u32;
                let high = merr >> k;
                let len = high as i32 + k;
                if len < 16 {
                    w.nu -= len + 1;
                    w.acc |= (merr ^ ((high ^ 1) << k)) << (w.nu & 31);
                } else {
                    w.golomb(k, merr, LIMIT as i32);
                }
                // The context update (A.6).
                let a = a + e.abs();
                let mut d = d + e;
                let nold = if n == reset {
                    d = ((d - (reset - 1)) >> 1) + (reset >> 1);
                    ctx.a = (a >> 1) as u16;
                    reset >> 1
                } else {
                    d += 1;
                    ctx.a = a as u16;
                    n
                };
                let nnew = nold + 1;
                let dc = (nold < d) as i32 - (d < 0) as i32;
                ctx.c = (c + dc).clamp(-128, 127) as i8;
                ctx.b = (d - nnew * dc).clamp(0, nold) as i16;
                ctx.n = nnew as u8;
                i += 1;
                ra = x;
                rc = rb;
                rb = rd;
                let wrote = len >= 16 || w.nu < -15;
                w.flush2();
                if wrote && w.pos >= st.limit {
                    break 'line Exit::Spill;
                }
                if i > width {
                    break 'line Exit::LineEnd;
                }
            }
            // Run mode at sample i.
            let next = run_mode(m, &mut w, prev, cur, i, width);
            w.flush2();
            match next {
                Some(n) => i = n,
                None => {
                    i = width + 1;
                    break Exit::LineEnd;
                }
            }
            if w.pos >= st.limit {
                break Exit::Spill;
            }
        };
        st.i = i;
        st.acc = w.acc;
        st.used = (-w.nu) as u32;
        st.pos = w.pos;
        st.overflow = w.overflow;
        exit
    }
}

/// Run mode at sample `i` of `cur` (A.7; `Ra = cur[i − 1]`): the run of samples equal to `Ra`,
/// its length, and the interruption sample with its run context. Returns the next sample, or
/// `None` when the run reached the line's end. The last code may be pending in `w` (16 bits or
/// more: [`Bw::flush2`] before the next regular-mode code).
#[inline]
pub(crate) fn run_mode(
    m: &mut Model,
    w: &mut Bw<'_>,
    prev: &[u8],
    cur: &[u8],
    i: usize,
    width: usize,
) -> Option<usize> {
    let ra = cur[i - 1] as i32;
    let mut j = i;
    while j <= width && cur[j] as i32 == ra {
        j += 1;
    }
    let mut count = (j - i) as i32;
    let mut ri = m.run_index as i32;
    loop {
        let jr = run_j(ri);
        if count < (1 << jr) {
            break;
        }
        w.put(1, 1);
        count -= 1 << jr;
        ri = (ri + 1).min(31);
    }
    if j > width {
        if count != 0 {
            w.put(1, 1);
        }
        m.run_index = ri as u32;
        return None;
    }
    let jr = run_j(ri);
    w.put(count as u32, jr + 1);
    // The interruption sample (A.7.2): RItype = (Ra == Rb); the error against Rb,
    // negated when Rb < Ra.
    let x = cur[j] as i32;
    let rbx = prev[j] as i32;
    let ritype = (ra == rbx) as i32;
    let mut err = x - rbx;
    if rbx < ra {
        err = -err;
    }
    let err = err as i8 as i32;
    let rc = &mut m.run[ritype as usize];
    let k = golomb_k(rc.a + (rc.n >> 1) * ritype, rc.n);
    let half = (2 * rc.nn >= rc.n) as i32;
    let map = if err > 0 {
        (k == 0 && half == 0) as i32
    } else if err < 0 {
        (k != 0 || half == 1) as i32
    } else {
        0
    };
    let emerr = 2 * err.abs() - ritype - map;
    w.golomb(k, emerr as u32, LIMIT as i32 - jr - 1);
    if err < 0 {
        rc.nn += 1;
    }
    rc.a += (emerr + 1 - ritype) >> 1;
    if rc.n == m.reset_at as i32 {
        rc.a >>= 1;
        rc.n >>= 1;
        rc.nn >>= 1;
    }
    rc.n += 1;
    m.run_index = (ri - 1).max(0) as u32;
    Some(j + 1)
}

/// Codes line `cur[1..=width]` (`prev` above it) with line kernel `R`; the contexts' `b` fields
/// hold `D` (module docs), `quant` is [`QUANT6`].
pub fn encode_line_with<R: Kernel, S: Sink>(
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
    let mut i = 1;
    // After the buffer filled up without a sink to take it (S::SPILLS false), the rest of the
    // line runs in the Rust kernel, which checks every write.
    let mut checked = false;
    while i <= width && !o.b.overflow() {
        // Whole bytes out (fewer than 8 bits pending), the stuffed bit after a 0xFF byte into
        // the accumulator, room for the kernel.
        flush(&mut o.b, o.buf, o.sink);
        if S::SPILLS && o.b.pos() + MARGIN + 4 > o.buf.len() {
            crate::bits::spill(&mut o.b, o.buf, o.sink);
        }
        let (acc, used) = o.b.take_stuffed();
        let mut st = State {
            i,
            acc,
            used,
            pos: o.b.pos(),
            limit: if checked {
                o.buf.len()
            } else {
                o.buf.len().saturating_sub(MARGIN)
            },
            overflow: false,
        };
        let exit = if !S::SPILLS && checked {
            ModelKernel::line(m, quant, prev, cur, width, &mut st, o.buf)
        } else {
            R::line(m, quant, prev, cur, width, &mut st, o.buf)
        };
        o.b.set_acc(st.acc, st.used);
        o.b.set_pos(st.pos);
        if st.overflow {
            o.b.set_overflow();
        }
        i = st.i;
        if exit == Exit::Spill {
            if S::SPILLS {
                crate::bits::spill(&mut o.b, o.buf, o.sink);
            } else {
                checked = true;
            }
        }
    }
    flush(&mut o.b, o.buf, o.sink);
    w.bits = o.b;
}

/// [`ModelKernel`] as a kernel variant ([`crate::Ops`]): the PULP line coder's arithmetic in
/// portable Rust. Its streams are the portable coder's, bit for bit.
pub struct PulpModel;

impl Ops for PulpModel {
    const QUANT: &'static [i8; 511] = &QUANT6;
    const QUANT_SCALE: i8 = 6;
    #[inline(always)]
    fn encode_line<S: Sink>(
        m: &mut Model,
        quant: &[i8; 511],
        w: &mut Writer<'_, S>,
        prev: &mut [u8],
        cur: &mut [u8],
        width: usize,
    ) {
        encode_line_with::<ModelKernel, S>(m, quant, w, prev, cur, width)
    }
    fn k(n: u32, a: u32) -> u32 {
        Portable::k(n, a)
    }
    fn med(ra: i32, rb: i32, rc: i32) -> i32 {
        Portable::med(ra, rb, rc)
    }
    fn clamp255(v: i32) -> i32 {
        Portable::clamp255(v)
    }
    fn abs(v: i32) -> i32 {
        Portable::abs(v)
    }
}
