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
#![allow(unsafe_code)]

use core::marker::PhantomData;

pub(crate) struct Rotation<'a> {
    bufs: [*mut u8; 3],
    len: usize,
    _borrow: PhantomData<&'a mut [u8]>,
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

    fn range(&self, which: usize, start: usize, end: usize) -> (*mut u8, usize) {
        // Out-of-range requests are clamped (the engine never makes one); no panic on the chip.
        let end = end.min(self.len);
        let start = start.min(end);
        // SAFETY: `start <= len`, inside the buffer.
        (unsafe { self.bufs[which % 3].add(start) }, end - start)
    }

    /// Bytes `[start, end)` of round `r`'s work buffer.
    ///
    /// # Safety
    /// Called in round `r` (between the barriers that delimit it) by the core that owns this
    /// piece; no other reference to these bytes exists until the reference is dropped, which
    /// happens before the round ends.
    #[allow(clippy::mut_from_ref)]
    pub(crate) unsafe fn work(&self, r: usize, start: usize, end: usize) -> &mut [u8] {
        let (p, n) = self.range(r, start, end);
        // SAFETY: in bounds (`range`); exclusive per the caller's contract.
        unsafe { core::slice::from_raw_parts_mut(p, n) }
    }

    /// The first `len` bytes of round `r`'s prefetch buffer.
    ///
    /// # Safety
    /// Called by core 0 in round `r`; the reference (and any transfer into it) ends before the
    /// round ends.
    #[allow(clippy::mut_from_ref)]
    pub(crate) unsafe fn prefetch(&self, r: usize, len: usize) -> &mut [u8] {
        let (p, n) = self.range(r + 1, 0, len);
        // SAFETY: in bounds; only core 0 touches this buffer in round `r` (caller's contract).
        unsafe { core::slice::from_raw_parts_mut(p, n) }
    }

    /// The first `len` bytes of round `r`'s commit buffer (round `r - 1`'s work buffer).
    ///
    /// # Safety
    /// Called by core 0 in round `r` (or after the fork); nobody writes the buffer until the
    /// reference ends, before the round ends.
    pub(crate) unsafe fn commit(&self, r: usize, len: usize) -> &[u8] {
        let (p, n) = self.range(r + 2, 0, len);
        // SAFETY: in bounds; no writer while the reference lives (caller's contract).
        unsafe { core::slice::from_raw_parts(p, n) }
    }
}
