//! Where the payload lives, and how a round's bytes reach L1 and go back.
//!
//! The engine asks a [`Source`] once per round (on cluster core 0) to *exchange*: start fetching the
//! next round into one L1 buffer and committing the previous round from another, run the cores'
//! work meanwhile, and return only when both transfers are complete. Because the L1 buffers are
//! borrowed for the call only, a `Source` cannot leave a transfer running into a buffer the engine
//! reuses.
//!
//! | source | payload | transfers |
//! |---|---|---|
//! | [`InPlace`] | one `&mut [u8]` in L2, result written over it | cluster DMA |
//! | [`Separate`] | `&[u8]` in, `&mut [u8]` out (same length), both in L2 | cluster DMA |
//! | your driver | external RAM / flash (e.g. `pi_cl_ram_read` / `pi_cl_ram_write`) | the driver's own asynchronous requests; implement [`Source`] |
use crate::Error;
use gap_rust_sdk::{Dma, DmaRaw, MAX_CORES};

/// A payload the engine encrypts round by round.
pub trait Source: Send {
    /// Payload length in bytes.
    fn len(&self) -> usize;

    /// True for an empty payload.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Starts copying payload bytes `[at, at + buf.len())` into `fetch`'s buffer and `commit`'s
    /// buffer into the output bytes `[at, at + buf.len())`, runs `work` while both are in flight,
    /// and returns `work`'s result once both are complete. The engine guarantees the two ranges do
    /// not overlap and lie inside `0..self.len()`; an implementation still checks and returns
    /// [`Error::Length`] rather than panicking.
    ///
    /// On GAP8 an instruction-cache refill waits behind a running DMA transfer, and the engine's
    /// first round warms the code of a fetch but not of a write-back: the sources here start the
    /// write-back first.
    fn exchange<D: DmaRaw, const N: usize, T>(
        &mut self,
        dma: &mut Dma<D, N>,
        fetch: Option<(usize, &mut [u8])>,
        commit: Option<(usize, &[u8])>,
        work: impl FnOnce() -> T,
    ) -> Result<T, Error>;
}

fn range(at: usize, len: usize, total: usize) -> Result<core::ops::Range<usize>, Error> {
    let end = at.checked_add(len).ok_or(Error::Length)?;
    if end > total {
        return Err(Error::Length);
    }
    Ok(at..end)
}

/// A payload in L2, encrypted in place.
pub struct InPlace<'a>(pub &'a mut [u8]);

impl Source for InPlace<'_> {
    fn len(&self) -> usize {
        self.0.len()
    }

    fn exchange<D: DmaRaw, const N: usize, T>(
        &mut self,
        dma: &mut Dma<D, N>,
        fetch: Option<(usize, &mut [u8])>,
        commit: Option<(usize, &[u8])>,
        work: impl FnOnce() -> T,
    ) -> Result<T, Error> {
        let total = self.0.len();
        let f = fetch
            .as_ref()
            .map(|(at, b)| range(*at, b.len(), total))
            .transpose()?;
        let c = commit
            .as_ref()
            .map(|(at, b)| range(*at, b.len(), total))
            .transpose()?;
        // Split the payload so that the fetched range (read) and the committed range (written)
        // are disjoint borrows.
        let (cut, commit_first) = match (&f, &c) {
            (Some(f), Some(c)) if c.end <= f.start => (f.start, true),
            (Some(f), Some(c)) if f.end <= c.start => (c.start, false),
            (Some(_), Some(_)) => return Err(Error::Length),
            (Some(f), None) => (f.start, true),
            (None, Some(c)) => (c.end, true),
            (None, None) => (0, true),
        };
        let (lo, hi) = self.0.split_at_mut(cut);
        dma.scope(|s| {
            let (fetch_src, commit_dst): (Option<&[u8]>, Option<&mut [u8]>) = if commit_first {
                (
                    f.as_ref().map(|r| &hi[r.start - cut..r.end - cut]),
                    c.as_ref().map(|r| &mut lo[r.clone()]),
                )
            } else {
                (
                    f.as_ref().map(|r| &lo[r.clone()]),
                    c.as_ref().map(|r| &mut hi[r.start - cut..r.end - cut]),
                )
            };
            // The write-back first: its code runs while no transfer occupies L2 (see
            // `Source::exchange`).
            if let (Some(dst), Some((_, buf))) = (commit_dst, commit) {
                s.copy_out(buf, dst)?;
            }
            if let (Some(src), Some((_, buf))) = (fetch_src, fetch) {
                s.copy_in(src, buf)?;
            }
            Ok(work())
        })
    }
}

/// A payload read from `input` and written to `output` (same length), both in L2.
pub struct Separate<'a> {
    /// Plaintext (or ciphertext) to read.
    pub input: &'a [u8],
    /// Where the result goes.
    pub output: &'a mut [u8],
}

impl Source for Separate<'_> {
    fn len(&self) -> usize {
        self.input.len()
    }

    fn exchange<D: DmaRaw, const N: usize, T>(
        &mut self,
        dma: &mut Dma<D, N>,
        fetch: Option<(usize, &mut [u8])>,
        commit: Option<(usize, &[u8])>,
        work: impl FnOnce() -> T,
    ) -> Result<T, Error> {
        if self.input.len() != self.output.len() {
            return Err(Error::Length);
        }
        let total = self.input.len();
        let f = fetch
            .as_ref()
            .map(|(at, b)| range(*at, b.len(), total))
            .transpose()?;
        let c = commit
            .as_ref()
            .map(|(at, b)| range(*at, b.len(), total))
            .transpose()?;
        let input: &[u8] = self.input;
        let output: &mut [u8] = self.output;
        dma.scope(|s| {
            if let (Some(r), Some((_, buf))) = (c, commit) {
                s.copy_out(buf, &mut output[r])?;
            }
            if let (Some(r), Some((_, buf))) = (f, fetch) {
                s.copy_in(&input[r], buf)?;
            }
            Ok(work())
        })
    }
}

/// A payload that can be cut into contiguous per-core parts, each moved by its own core with its
/// own DMA commands: what the engine's per-core pipelines ([`crate::Rounds::Auto`]) need.
/// Implemented by [`InPlace`] and [`Separate`]; other sources use the team rounds.
pub trait Split: Source {
    /// One core's part.
    type Part<'a>: Part
    where
        Self: 'a;

    /// Hands the parts `[b[i], b[i + 1])` for `i < n` to `put(i, part)`. `b` must be
    /// non-decreasing from 0; parts past the end of the payload are cut short or empty.
    fn split<'a>(
        &'a mut self,
        b: &[usize; MAX_CORES + 1],
        n: usize,
        put: impl FnMut(usize, Self::Part<'a>),
    );

    /// The payload as a handle from which each core takes its own part after the fork
    /// ([`Split::take`]), so that cutting the payload needs no serial work before the fork.
    type Shares<'a>: Sync
    where
        Self: 'a;

    /// The handle of [`Split::take`], borrowing the payload for as long as it or a part lives.
    fn shares(&mut self) -> Self::Shares<'_>;

    /// Part `[lo, hi)` of the payload (both clamped to its length, `lo` to `hi`).
    ///
    /// # Safety
    ///
    /// The ranges taken from one handle must be pairwise disjoint while the parts live (each
    /// payload byte in at most one part): two parts with a common byte would alias.
    #[allow(unsafe_code)] // the contract above
    unsafe fn take<'a>(shares: &Self::Shares<'a>, lo: usize, hi: usize) -> Self::Part<'a>
    where
        Self: 'a;
}

/// A payload's bytes shared by the cores of one fork, each taking a disjoint part
/// ([`Split::take`]): a raw pointer plus length that keeps the `&'a mut` borrow it came from.
pub struct RawShares<'a> {
    ptr: *mut u8,
    len: usize,
    _borrow: core::marker::PhantomData<&'a mut [u8]>,
}

impl<'a> RawShares<'a> {
    fn new(bytes: &'a mut [u8]) -> Self {
        RawShares {
            ptr: bytes.as_mut_ptr(),
            len: bytes.len(),
            _borrow: core::marker::PhantomData,
        }
    }

    /// Bytes `[lo, hi)` (clamped).
    ///
    /// # Safety
    ///
    /// No other live reference (from this handle or elsewhere) covers any of these bytes.
    #[allow(unsafe_code)]
    unsafe fn slice(&self, lo: usize, hi: usize) -> &'a mut [u8] {
        let hi = hi.min(self.len);
        let lo = lo.min(hi);
        // SAFETY: `[lo, hi)` is within the `len` bytes at `ptr`, which the `&'a mut [u8]` this
        // handle was made from borrows exclusively for `'a`; the caller guarantees that no other
        // live reference covers them.
        unsafe { core::slice::from_raw_parts_mut(self.ptr.add(lo), hi - lo) }
    }
}

// SAFETY: the handle only hands out disjoint `&mut [u8]` (the contract of `RawShares::slice` and
// `Split::take`), which may be sent to and used by other threads like any `&mut [u8]`.
#[allow(unsafe_code)]
unsafe impl Sync for RawShares<'_> {}
// SAFETY: as above.
#[allow(unsafe_code)]
unsafe impl Send for RawShares<'_> {}

/// One core's part of a [`Split`] payload (positions relative to the part's start).
pub trait Part: Send {
    /// Bytes of the part.
    fn len(&self) -> usize;

    /// True for an empty part.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The output bytes `commit` (to write back into) and the input bytes `fetch` (to read), as
    /// two borrows that can be in flight at the same time; `None` unless `commit.0 <= commit.1
    /// <= fetch.0 <= fetch.1 <= self.len()` (an empty range is allowed anywhere in that order).
    fn io(&mut self, commit: (usize, usize), fetch: (usize, usize)) -> Option<(&mut [u8], &[u8])>;
}

/// Length of part `i` of `split` given the bytes `at` already handed out and `left` remaining.
#[inline(always)]
fn part_len(b: &[usize; MAX_CORES + 1], n: usize, i: usize, at: usize, left: usize) -> usize {
    if i < n {
        b[i + 1].saturating_sub(at).min(left)
    } else {
        0
    }
}

/// `commit.0 <= commit.1 <= fetch.0 <= fetch.1 <= len`.
#[inline(always)]
fn ordered(commit: (usize, usize), fetch: (usize, usize), len: usize) -> bool {
    commit.0 <= commit.1 && commit.1 <= fetch.0 && fetch.0 <= fetch.1 && fetch.1 <= len
}

impl Split for InPlace<'_> {
    type Part<'a>
        = InPlace<'a>
    where
        Self: 'a;

    #[inline(never)]
    fn split<'a>(
        &'a mut self,
        b: &[usize; MAX_CORES + 1],
        n: usize,
        mut put: impl FnMut(usize, InPlace<'a>),
    ) {
        let mut rest: &mut [u8] = &mut self.0[..];
        let mut at = 0;
        for i in 0..n.min(MAX_CORES) {
            let k = part_len(b, n, i, at, rest.len());
            let (part, tail) = core::mem::take(&mut rest).split_at_mut(k);
            rest = tail;
            at += k;
            put(i, InPlace(part));
        }
    }

    type Shares<'a>
        = RawShares<'a>
    where
        Self: 'a;

    fn shares(&mut self) -> RawShares<'_> {
        RawShares::new(self.0)
    }

    #[inline(always)]
    #[allow(unsafe_code)]
    unsafe fn take<'a>(shares: &RawShares<'a>, lo: usize, hi: usize) -> InPlace<'a>
    where
        Self: 'a,
    {
        // SAFETY: the caller's ranges are disjoint (contract of `Split::take`).
        InPlace(unsafe { shares.slice(lo, hi) })
    }
}

impl Part for InPlace<'_> {
    fn len(&self) -> usize {
        self.0.len()
    }

    #[inline(always)]
    fn io(&mut self, commit: (usize, usize), fetch: (usize, usize)) -> Option<(&mut [u8], &[u8])> {
        if !ordered(commit, fetch, self.0.len()) {
            return None;
        }
        let (lo, hi) = self.0.split_at_mut(fetch.0);
        Some((&mut lo[commit.0..commit.1], &hi[..fetch.1 - fetch.0]))
    }
}

impl Split for Separate<'_> {
    type Part<'a>
        = Separate<'a>
    where
        Self: 'a;

    #[inline(never)]
    fn split<'a>(
        &'a mut self,
        b: &[usize; MAX_CORES + 1],
        n: usize,
        mut put: impl FnMut(usize, Separate<'a>),
    ) {
        let mut input: &[u8] = self.input;
        let mut output: &mut [u8] = &mut self.output[..];
        let mut at = 0;
        for i in 0..n.min(MAX_CORES) {
            let k = part_len(b, n, i, at, input.len().min(output.len()));
            let (pi, ti) = input.split_at(k);
            let (po, to) = core::mem::take(&mut output).split_at_mut(k);
            input = ti;
            output = to;
            at += k;
            put(
                i,
                Separate {
                    input: pi,
                    output: po,
                },
            );
        }
    }

    type Shares<'a>
        = (&'a [u8], RawShares<'a>)
    where
        Self: 'a;

    fn shares(&mut self) -> (&[u8], RawShares<'_>) {
        let n = self.input.len().min(self.output.len());
        (&self.input[..n], RawShares::new(&mut self.output[..n]))
    }

    #[inline(always)]
    #[allow(unsafe_code)]
    unsafe fn take<'a>(shares: &(&'a [u8], RawShares<'a>), lo: usize, hi: usize) -> Separate<'a>
    where
        Self: 'a,
    {
        let (input, output) = shares;
        let hi = hi.min(input.len());
        let lo = lo.min(hi);
        Separate {
            input: &input[lo..hi],
            // SAFETY: the caller's ranges are disjoint (contract of `Split::take`).
            output: unsafe { output.slice(lo, hi) },
        }
    }
}

impl Part for Separate<'_> {
    fn len(&self) -> usize {
        self.input.len().min(self.output.len())
    }

    #[inline(always)]
    fn io(&mut self, commit: (usize, usize), fetch: (usize, usize)) -> Option<(&mut [u8], &[u8])> {
        if !ordered(commit, fetch, Part::len(self)) {
            return None;
        }
        Some((
            &mut self.output[commit.0..commit.1],
            &self.input[fetch.0..fetch.1],
        ))
    }
}
