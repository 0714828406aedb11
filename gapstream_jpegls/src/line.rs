//! The portable line coder: one line of one component, regular and run mode (ISO/IEC 14495-1,
//! A.2–A.7), NEAR = 0, 8 bits. The PULP kernel (`pulp.rs`, feature `pulp`) codes the same bits.
//!
//! Lines are `width + 2` bytes: `line[1..=width]` the samples, `line[0]` and `line[width + 1]`
//! the edges the standard defines (A.2.1: `Ra` of the first sample is the sample above it, `Rc`
//! the first sample two lines up; `Rd` of the last sample is the sample above it), which
//! [`edges`] sets before each line.
use crate::bits::{BitWriter, Sink};
use crate::model::{J, LIMIT, Model, QBPP, RunCtx, context, predict};

/// Sets the edge samples of `prev` / `cur` (`width + 2` bytes each) before coding `cur`.
#[inline(always)]
pub fn edges(prev: &mut [u8], cur: &mut [u8], width: usize) {
    prev[width + 1] = prev[width];
    cur[0] = prev[1];
}

/// Writes a mapped error value with the limited-length Golomb code `LG(k, limit)` (A.5.3).
#[inline(always)]
pub fn golomb<S: Sink>(w: &mut BitWriter, s: &mut S, k: u32, merr: u32, limit: u32) {
    let high = merr >> k;
    if high < limit - QBPP - 1 {
        // `high` zeros, a one, the `k` low bits.
        if high + 1 + k <= 25 {
            w.put(s, (1 << k) | (merr & ((1 << k) - 1)), high + 1 + k);
        } else {
            w.zeros(s, high);
            w.put(s, (1 << k) | (merr & ((1 << k) - 1)), 1 + k);
        }
    } else {
        // Escape: `limit - qbpp - 1` zeros, a one, `merr - 1` in qbpp bits.
        w.zeros(s, limit - QBPP - 1);
        w.put(s, (1 << QBPP) | ((merr - 1) & ((1 << QBPP) - 1)), QBPP + 1);
    }
}

/// Codes one regular-mode sample; `q` is the signed context number (≠ 0).
#[inline(always)]
fn regular<S: Sink>(
    m: &mut Model,
    w: &mut BitWriter,
    s: &mut S,
    q: i32,
    x: i32,
    ra: i32,
    rb: i32,
    rc: i32,
) {
    let sign = q >> 31;
    let ctx = &mut m.ctx[((q ^ sign) - sign) as usize];
    let k = ctx.k();
    let px = (predict(ra, rb, rc) + ((ctx.c as i32 ^ sign) - sign)).clamp(0, 255);
    // Error in the context's orientation, reduced modulo RANGE to −128..=127.
    let err = (((x - px) ^ sign) - sign) as i8 as i32;
    let e = err ^ ctx.correction(k);
    let merr = ((e << 1) ^ (e >> 31)) as u32;
    golomb(w, s, k, merr, LIMIT);
    ctx.update(err);
}

/// Codes the run of `count` samples equal to `Ra` (A.7.1); `eol`: the run reaches the end of
/// the line.
#[inline(always)]
fn run_length<S: Sink>(m: &mut Model, w: &mut BitWriter, s: &mut S, mut count: usize, eol: bool) {
    loop {
        let len = 1usize << J[m.run_index as usize];
        if count < len {
            break;
        }
        w.put(s, 1, 1);
        count -= len;
        if m.run_index < 31 {
            m.run_index += 1;
        }
    }
    if eol {
        if count != 0 {
            w.put(s, 1, 1);
        }
    } else {
        // A zero, then the remainder in J[RUNindex] bits.
        w.put(s, count as u32, J[m.run_index as usize] as u32 + 1);
    }
}

/// Codes the sample that interrupts a run (A.7.2).
#[inline(always)]
fn interruption<S: Sink>(m: &mut Model, w: &mut BitWriter, s: &mut S, x: i32, ra: i32, rb: i32) {
    let ritype = (ra == rb) as i32;
    let err = if ritype == 1 {
        x - ra
    } else if rb > ra {
        x - rb
    } else {
        rb - x
    } as i8 as i32;
    let limit = LIMIT - J[m.run_index as usize] as u32 - 1;
    let ctx: &mut RunCtx = &mut m.run[ritype as usize];
    let k = ctx.k(ritype);
    let map = ctx.map(err, k) as i32;
    let emerr = 2 * err.abs() - ritype - map;
    golomb(w, s, k, emerr as u32, limit);
    ctx.update(err, emerr, ritype);
    m.run_index = m.run_index.saturating_sub(1);
}

/// Codes line `cur[1..=width]` with `prev` as the line above. Sets the edges itself.
#[inline(never)]
pub fn encode_line<S: Sink>(
    m: &mut Model,
    w: &mut BitWriter,
    s: &mut S,
    prev: &mut [u8],
    cur: &mut [u8],
    width: usize,
) {
    edges(prev, cur, width);
    let (prev, cur) = (&prev[..width + 2], &cur[..width + 2]);
    let mut i = 1;
    let mut rb = prev[0] as i32;
    let mut rd = prev[1] as i32;
    while i <= width {
        let ra = cur[i - 1] as i32;
        let rc = rb;
        rb = rd;
        rd = prev[i + 1] as i32;
        let q = context(rd, rb, rc, ra);
        if q != 0 {
            regular(m, w, s, q, cur[i] as i32, ra, rb, rc);
            i += 1;
        } else {
            // Run mode: samples equal to Ra, to the end of the line at most.
            let mut n = 0;
            let ra8 = ra as u8;
            while i + n <= width && cur[i + n] == ra8 {
                n += 1;
            }
            let eol = i + n > width;
            run_length(m, w, s, n, eol);
            i += n;
            if eol {
                break;
            }
            interruption(m, w, s, cur[i] as i32, ra, prev[i] as i32);
            i += 1;
            rb = prev[i - 1] as i32;
            rd = prev[i] as i32;
        }
    }
}
