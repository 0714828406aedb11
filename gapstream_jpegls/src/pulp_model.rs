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
//!   (`D + err`, halved as B, plus 33 − 1 on a reset), `dc = (N_old < D') − (D' < 0)`,
//!   `C = clip(C + dc, −128, 127)`, `D = clip(D' − N_new·dc, 0, N_old)`.
//! * **Error mapping**: the `k = 0` correction of A.5.2 (`2B ≤ −N`, i.e. `D < N / 2`) flips
//!   the mapped error's lowest bit; `D + 64k < N / 2` tests both conditions at once.
//! * **Bit writer**: the accumulator is left-aligned, `nu = −used`; a code of up to 16 bits is
//!   OR-ed in at `acc |= v << (nu mod 32)`; two bytes go out whenever 16 bits are pending, and
//!   the stuffed 0 bit after a 0xFF byte goes into the accumulator at once (no "last byte was
//!   0xFF" state between samples).
//!
//! Run mode, codes longer than 16 bits and full buffers leave the kernel ([`Exit`]); the driver
//! [`encode_line_with`] handles them with the portable code and enters the kernel again.
use crate::bits::{Sink, Writer, flush};
use crate::line::{Ops, Out, Portable, edges, run_mode};
use crate::model::{LIMIT, Model, quantize};

/// `QUANT6[d + 255] = 6 · Q(d)`: the gradient quantisation table of the PULP line coder.
pub static QUANT6: [i8; 511] = {
    let mut t = [0i8; 511];
    let mut i = 0;
    while i < 511 {
        t[i] = (6 * quantize(i as i32 - 255)) as i8;
        i += 1;
    }
    t
};

/// Bytes the kernel keeps free at the end of its buffer: it stops (with [`Exit::Spill`]) at the
/// end of a sample once fewer are left, and writes at most 4 bytes per sample.
pub const MARGIN: usize = 8;

/// Why the kernel stopped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Exit {
    /// Every sample of the line is coded.
    LineEnd,
    /// Sample `i` is in a run context (`Q1 = Q2 = Q3 = 0`): nothing of it is coded.
    Run,
    /// Sample `i - 1`'s context is updated but its code (`merr` with parameter `k`) is longer
    /// than 16 bits (or the escape): the driver writes it.
    Long {
        /// The mapped error.
        merr: u32,
        /// The Golomb parameter.
        k: u32,
    },
    /// Fewer than [`MARGIN`] bytes are left in the buffer (at a sample boundary).
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
    /// The kernel stops once `pos >= limit` (at most `buf.len() - MARGIN`).
    pub limit: usize,
}

/// A regular-mode kernel: codes samples `st.i..=width` of `cur` until a run context, a long code,
/// a full buffer or the line's end. `prev` and `cur` are `width + 2` bytes with their edges set;
/// `quant` is [`QUANT6`] (or a copy); the contexts' `b` fields hold `D` (module docs).
pub trait Kernel {
    /// Runs the kernel.
    fn regular(
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

/// The Rust transcription of the assembly kernel.
pub struct ModelKernel;

impl Kernel for ModelKernel {
    fn regular(
        m: &mut Model,
        quant: &[i8; 511],
        prev: &[u8],
        cur: &[u8],
        width: usize,
        st: &mut State,
        buf: &mut [u8],
    ) -> Exit {
        let q = |d: i32| quant[(d + 255) as usize] as i32;
        let mut i = st.i;
        let (mut acc, mut nu) = (st.acc, -(st.used as i32));
        let mut pos = st.pos;
        let mut ra = cur[i - 1] as i32;
        let mut rb = prev[i] as i32;
        let mut rc = prev[i - 1] as i32;
        let mut q2 = q(rb - rc);
        let exit = loop {
            if i > width {
                break Exit::LineEnd;
            }
            let rd = prev[i + 1] as i32;
            let x = cur[i] as i32;
            let q1 = q(rd - rb);
            let d3 = rc - ra;
            let ctx6 = q(d3) + 9 * (q2 + 9 * q1);
            q2 = q1;
            if ctx6 == 0 {
                break Exit::Run;
            }
            let ctx = &mut m.ctx[(ctx6.unsigned_abs() / 6) as usize];
            let (a, n, d, c) = (ctx.a as i32, ctx.n as i32, ctx.b as i32, ctx.c as i32);
            // MED.
            let med = (rb - d3).min(ra.max(rb)).max(ra.min(rb));
            // k.
            let t = fl1((a | n) as u32) - fl1(n as u32);
            let k = t + (((n << t) as u32) < a as u32) as i32;
            // The error in the context's orientation, modulo 256.
            let s = (ctx6 >> 31) | 1;
            let px = (med + s * c).clamp(0, 255);
            let e = ((x - px) * s) as i8 as i32;
            let mut merr = ((e << 1) ^ (e >> 31)) as u32;
            merr ^= ((d + (k << 6)) < (n >> 1)) as u32;
            let high = merr >> k;
            let len = high + k as u32;
            let fast = len < 16;
            if fast {
                let v = merr ^ ((high ^ 1) << k);
                nu -= len as i32 + 1;
                acc |= v << (nu & 31);
            }
            // The context update (A.6).
            let a = a + e.abs();
            let mut d = d + e;
            let nold = if n == 64 {
                d = ((d - 63) >> 1) + 32;
                ctx.a = (a >> 1) as u16;
                32
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
            if !fast {
                break Exit::Long { merr, k: k as u32 };
            }
            if nu < -15 {
                flush2(&mut acc, &mut nu, buf, &mut pos);
                if pos >= st.limit {
                    break Exit::Spill;
                }
            }
        };
        st.i = i;
        st.acc = acc;
        st.used = (-nu) as u32;
        st.pos = pos;
        exit
    }
}

/// Writes two bytes (one when the first is 0xFF) while 16 bits or more are pending. After a 0xFF
/// byte the stuffed 0 bit goes into the accumulator.
#[inline(always)]
fn flush2(acc: &mut u32, nu: &mut i32, buf: &mut [u8], pos: &mut usize) {
    while *nu < -15 {
        let (b1, b2) = ((*acc >> 24) as u8, (*acc >> 16) as u8);
        buf[*pos] = b1;
        *pos += 1;
        if b1 == 0xff {
            *acc = (*acc << 8) >> 1;
            *nu += 7;
            continue;
        }
        buf[*pos] = b2;
        *pos += 1;
        *acc <<= 16;
        *nu += 16;
        if b2 == 0xff {
            *acc >>= 1;
            *nu -= 1;
        }
    }
}

/// Codes line `cur[1..=width]` (`prev` above it) with regular-mode kernel `R` and the portable
/// run mode; the contexts' `b` fields hold `D` (module docs), `quant` is [`QUANT6`].
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
    // line runs in the Rust kernel, whose writes stop at the buffer's end.
    let mut checked = false;
    while i <= width && !o.b.overflow() {
        // Whole bytes out (fewer than 8 bits pending), the stuffed bit after a 0xFF byte into
        // the accumulator, room for the kernel.
        flush(&mut o.b, o.buf, o.sink);
        if S::SPILLS && o.b.pos() + MARGIN + 4 > o.buf.len() {
            crate::bits::spill(&mut o.b, o.buf, o.sink);
        }
        let (acc, used) = o.b.take_stuffed();
        let limit = if checked {
            o.buf.len()
        } else {
            o.buf.len().saturating_sub(MARGIN)
        };
        let mut st = State {
            i,
            acc,
            used,
            pos: o.b.pos(),
            limit,
        };
        let exit = if checked {
            ModelKernel::regular(m, quant, prev, cur, width, &mut st, o.buf)
        } else {
            R::regular(m, quant, prev, cur, width, &mut st, o.buf)
        };
        o.b.set_acc(st.acc, st.used);
        o.b.set_pos(st.pos);
        i = st.i;
        match exit {
            Exit::LineEnd => break,
            Exit::Run => {
                match run_mode::<Portable, S>(m, &mut o, prev, cur, i, width, cur[i - 1] as i32) {
                    Some(next) => i = next,
                    None => break,
                }
            }
            Exit::Long { merr, k } => o.golomb_long(k, merr, LIMIT),
            Exit::Spill => {
                if S::SPILLS {
                    crate::bits::spill(&mut o.b, o.buf, o.sink);
                } else if checked {
                    o.b.set_overflow();
                } else {
                    checked = true;
                }
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
