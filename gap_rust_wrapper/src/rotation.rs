//! The three L1 buffers of a call, shared by the cores of the round fork.
//!
//! This is the wrapper's only `unsafe`: a buffer is written by different cores in different rounds
//! (its pieces by all cores while it is the work buffer, whole by the DMA driven by core 0 while it
//! is the prefetch or commit buffer), so no single borrow can describe it for the whole fork. The
//! access rule, which the round loop in `engine.rs` follows and the team barrier enforces, is:
//!
//! | round `r` | buffer | who |
//! |---|---|---|
//! | work | `r % 3` | core `i`: its own piece only (pieces are disjoint) |
//! | prefetch | `(r + 1) % 3` | core 0 (DMA destination), waited for before the barrier |
//! | commit | `(r + 2) % 3` | core 0 (DMA source), waited for before the barrier |
//!
//! Between two rounds every core passes the team barrier, so the roles rotate only when nobody
//! holds a reference obtained in the previous round.
//!
//! The per-core pipelines (`Rounds::Auto`) use the buffers differently: core `i` owns bytes
//! `[i * share, (i + 1) * share)` of all three for the whole fork ([`Rotation::lane`]), and
//! rotates its three slices itself; the slices of different cores are disjoint.
#![allow(unsafe_code)]

use core::marker::PhantomData;

pub(crate) struct Rotation<'a> {
    bufs: [*mut u8; 3],
    len: usize,
    _borrow: PhantomData<&'a mut [u8]>,
}

/// Which buffer is round `r`'s work buffer: `r % 3`, kept incrementally by the round loop.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Turn(u8);

impl Turn {
    /// Round `r`'s turn.
    pub(crate) fn of(r: usize) -> Turn {
        Turn((r % 3) as u8)
    }

    /// The next round's turn.
    #[inline(always)]
    pub(crate) fn next(self) -> Turn {
        Turn(if self.0 == 2 { 0 } else { self.0 + 1 })
    }
}

// SAFETY: `Rotation` is only a set of pointers into buffers it borrows mutably for `'a`; sharing it
// between cores is sound under the access rule of the module docs, which every `unsafe fn` states
// as its contract.
unsafe impl Sync for Rotation<'_> {}

impl<'a> Rotation<'a> {
    /// Borrows the three buffers for the call; only their first `len` bytes are used.
    pub(crate) fn new(bufs: [&'a mut [u8]; 3], len: usize) -> Self {
        let len = bufs.iter().map(|b| b.len()).fold(len, usize::min);
        let [a, b, c] = bufs;
        Rotation {
            bufs: [a.as_mut_ptr(), b.as_mut_ptr(), c.as_mut_ptr()],
            len,
            _borrow: PhantomData,
        }
    }

    /// Bytes `[start, end)` of buffer `which` (0, 1, 2), clamped to the buffer. One copy next to
    /// the round loop (three accessors call it every round).
    #[inline(never)]
    #[cfg_attr(target_arch = "riscv32", unsafe(link_section = ".text.hot.3.rounds"))]
    fn range(&self, which: u8, start: usize, end: usize) -> (*mut u8, usize) {
        // Out-of-range requests are clamped (the engine never makes one); no panic on the chip.
        let end = end.min(self.len);
        let start = start.min(end);
        let base = match which {
            0 => self.bufs[0],
            1 => self.bufs[1],
            _ => self.bufs[2],
        };
        // SAFETY: `start <= len`, inside the buffer.
        (unsafe { base.add(start) }, end - start)
    }

    /// Bytes `[start, end)` of round `r`'s work buffer, `t` being round `r`'s turn.
    ///
    /// # Safety
    /// Called in round `r` (between the barriers that delimit it) by the core that owns this
    /// piece; no other reference to these bytes exists until the reference is dropped, which
    /// happens before the round ends.
    #[allow(clippy::mut_from_ref)]
    #[inline(always)]
    pub(crate) unsafe fn work(&self, t: Turn, start: usize, end: usize) -> &mut [u8] {
        let (p, n) = self.range(t.0, start, end);
        // SAFETY: in bounds (`range`); exclusive per the caller's contract.
        unsafe { core::slice::from_raw_parts_mut(p, n) }
    }

    /// The first `len` bytes of round `r`'s prefetch buffer (`t`: round `r`'s turn).
    ///
    /// # Safety
    /// Called by core 0 in round `r`; the reference (and any transfer into it) ends before the
    /// round ends.
    #[allow(clippy::mut_from_ref)]
    #[inline(always)]
    pub(crate) unsafe fn prefetch(&self, t: Turn, len: usize) -> &mut [u8] {
        let (p, n) = self.range(t.next().0, 0, len);
        // SAFETY: in bounds; only core 0 touches this buffer in round `r` (caller's contract).
        unsafe { core::slice::from_raw_parts_mut(p, n) }
    }

    /// The first `len` bytes of round `r`'s commit buffer (round `r - 1`'s work buffer; `t`:
    /// round `r`'s turn).
    ///
    /// # Safety
    /// Called by core 0 in round `r` (or after the fork, with `r` = the number of rounds);
    /// nobody writes the buffer until the reference ends, before the round ends.
    #[inline(always)]
    pub(crate) unsafe fn commit(&self, t: Turn, len: usize) -> &[u8] {
        let (p, n) = self.range(t.next().next().0, 0, len);
        // SAFETY: in bounds; no writer while the reference lives (caller's contract).
        unsafe { core::slice::from_raw_parts(p, n) }
    }
}

impl<'a> Rotation<'a> {
    /// Core `i`'s slice of each of the three buffers in the per-core pipelines: bytes
    /// `[i * share, (i + 1) * share)`, clamped to the buffers.
    ///
    /// # Safety
    /// Called by core `i` of a lane fork, once, and by no other core with the same `i` or another
    /// `share`; while the fork runs nobody uses the round accessors above. Distinct cores then
    /// hold disjoint slices.
    #[allow(clippy::mut_from_ref)]
    #[inline(always)]
    pub(crate) unsafe fn lane(&self, i: usize, share: usize) -> [&mut [u8]; 3] {
        let start = i.saturating_mul(share).min(self.len);
        let n = share.min(self.len - start);
        // SAFETY: `start + n <= len`, inside each buffer; exclusive per the caller's contract.
        self.bufs
            .map(|b| unsafe { core::slice::from_raw_parts_mut(b.add(start), n) })
    }
}

#[cfg(test)]
mod tests {
    use super::Turn;

    #[test]
    fn turns_follow_the_round_modulo_three() {
        let mut t = Turn::of(0);
        for r in 0..20 {
            assert_eq!(t, Turn::of(r));
            t = t.next();
        }
    }
}
