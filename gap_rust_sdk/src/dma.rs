//! Cluster DMA transfers between L2 ("ext") and L1 ("loc").
//!
//! A backend provides the raw engine ([`DmaRaw`]: start a command, wait for it). The safe API is a
//! [`Scope`], in the style of `std::thread::scope`:
//!
//! ```ignore
//! dma.scope(|s| {
//!     let fetch = s.copy_in(&l2[..n], &mut l1_a[..n])?;     // L2 -> L1, started now
//!     s.copy_out(&l1_b[..m], &mut l2_out[..m])?;            // L1 -> L2, started now
//!     work(&mut l1_c);                                      // overlaps with both transfers
//!     fetch.wait();                                         // optional early wait
//!     Ok(())
//! })                                                        // every transfer is complete here
//! ```
//!
//! Both buffers of a transfer are borrowed for the whole scope, so they cannot be read, written,
//! moved or freed until the scope has returned, and the scope waits for every transfer it started
//! before returning (also while unwinding). A [`Transfer`] handle only allows waiting earlier:
//! dropping it without `wait` does nothing, and neither does `mem::forget` — the scope still waits.
//! A scope never waits on a command it did not start.
use core::cell::{Cell, UnsafeCell};
use core::marker::PhantomData;
use core::mem::MaybeUninit;

/// Direction of a transfer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Dir {
    /// External memory (L2) to the cluster's L1.
    ExtToLoc,
    /// The cluster's L1 to external memory (L2).
    LocToExt,
}

/// Why a transfer was not started.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DmaError {
    /// Source and destination lengths differ.
    Length,
    /// Kept for compatibility: transfers longer than [`DmaRaw::max_len`] are split into several
    /// commands and never fail with this.
    TooLong,
    /// The local side is not in the cluster's L1.
    NotLocal,
    /// The scope already has as many transfers in flight as it has command slots.
    Busy,
    /// The backend cannot move a 2-D tile in one command ([`DmaRaw::has_2d`]).
    Unsupported,
}

impl core::fmt::Display for DmaError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(match self {
            DmaError::Length => "DMA source and destination lengths differ",
            DmaError::TooLong => "DMA transfer longer than one command allows",
            DmaError::NotLocal => "DMA local buffer is not in L1",
            DmaError::Busy => "too many DMA transfers in flight",
            DmaError::Unsupported => "2-D DMA transfers are not supported by this backend",
        })
    }
}

/// A backend's DMA engine.
///
/// # Safety
/// An implementation must, for a `start` whose arguments satisfy its contract, move exactly `len`
/// bytes in direction `dir` and touch no other memory; after `wait(cmd)` returns the transfer is
/// complete and the engine no longer accesses either range.
pub unsafe trait DmaRaw {
    /// Per-transfer record (pmsis: `pi_cl_dma_cmd_t`). It must not move while its transfer is in
    /// flight; a [`Scope`] keeps its records in place.
    type Cmd;

    /// A fresh, idle command record.
    fn new_cmd() -> Self::Cmd;

    /// Largest `len` one `start` accepts.
    fn max_len(&self) -> usize;

    /// True when `[addr, addr + len)` lies in memory the engine can use as the local (L1) side.
    fn is_local(&self, addr: usize, len: usize) -> bool;

    /// Starts a transfer of `len` bytes (`0 < len <= max_len`).
    ///
    /// # Safety
    /// Until `wait(cmd)` returns: `[ext, ext + len)` and `[loc, loc + len)` are valid and do not
    /// overlap; the destination range is accessed by nobody else and the source range is not
    /// written; `loc` satisfies [`DmaRaw::is_local`]; `cmd` is not moved, reused or dropped.
    unsafe fn start(
        &mut self,
        dir: Dir,
        ext: *mut u8,
        loc: *mut u8,
        len: usize,
        cmd: &mut Self::Cmd,
    );

    /// Waits until the transfer started with `cmd` is complete.
    ///
    /// # Safety
    /// `cmd` was passed to `start` on this engine and not waited on since.
    unsafe fn wait(&mut self, cmd: &mut Self::Cmd);

    /// Whether [`DmaRaw::start_2d`] moves a 2-D tile in one command (mchan: yes). Backends
    /// without it keep the default `false`, and [`Scope::copy_in_2d`] then refuses.
    fn has_2d(&self) -> bool {
        false
    }

    /// Starts copying `rows * row_len` bytes: `rows` lines of `row_len` bytes that lie `stride`
    /// bytes apart at `ext`, packed one after the other at `loc` (`0 < rows * row_len <=
    /// max_len`, `row_len <= stride < 65536`). Called only when [`DmaRaw::has_2d`] is true (the
    /// default does nothing and is never called).
    ///
    /// # Safety
    /// As for [`DmaRaw::start`], with the external range `[ext, ext + (rows - 1) * stride +
    /// row_len)` (only the lines are read or written) and the local range `[loc, loc + rows *
    /// row_len)`.
    #[allow(clippy::too_many_arguments)]
    unsafe fn start_2d(
        &mut self,
        dir: Dir,
        ext: *mut u8,
        loc: *mut u8,
        row_len: usize,
        rows: usize,
        stride: usize,
        cmd: &mut Self::Cmd,
    ) {
        let _ = (dir, ext, loc, row_len, rows, stride, cmd);
    }
}

/// DMA commands one [`Scope`] can have in flight by default (mchan has 16 transfer ids).
pub const SCOPE_SLOTS: usize = 16;

/// mchan's transfer ids on GAP8: **one pool for the whole cluster**, not 16 per core. A core
/// that starts a command while all of them are taken stalls until one is freed, and only a core
/// that waits on one of its own transfers frees one; so when the cores together can have more
/// than 16 commands in flight, every core holding ids can end up stalled starting another one,
/// and the cluster deadlocks (seen on the GAP8 model: 4 cores each starting a strip's 8 row
/// commands). A [`Dma`]'s slots bound one handle only: handles used at once on the cores of a
/// fork take [`slots_per_handle`] slots ([`Dma::with_slots`]), and a transfer that would need
/// more commands is then refused ([`DmaError::Busy`]) instead of hanging the cluster.
/// ([`Dma::overlap`] takes 2 ids while it runs.)
pub const CLUSTER_DMA_IDS: usize = 16;

/// Command slots for each handle when each of `cores` cores has `handles_per_core` handles in
/// use at once, so that all of them together stay within [`CLUSTER_DMA_IDS`]: 0 when that is
/// impossible (more than 16 handles), which [`Dma::with_slots`] refuses at compile time.
pub const fn slots_per_handle(cores: usize, handles_per_core: usize) -> usize {
    match CLUSTER_DMA_IDS.checked_div(cores * handles_per_core) {
        Some(n) => n,
        None => SCOPE_SLOTS,
    }
}

/// Safe handle on a backend's DMA engine; its scopes have room for `N` commands in flight
/// (1..=16, the transfer ids of mchan; the records live on the stack of the scope's caller, so a cluster core with a small
/// stack that needs only a couple of transfers at a time uses a small `N`, see [`Dma::with_slots`]).
pub struct Dma<R: DmaRaw, const N: usize = SCOPE_SLOTS> {
    raw: R,
    chunk: usize,
}

impl<R: DmaRaw> Dma<R> {
    /// Wraps a backend engine ([`SCOPE_SLOTS`] command slots per scope).
    pub fn new(raw: R) -> Self {
        Dma { raw, chunk: 0 }
    }
}

impl<R: DmaRaw, const N: usize> Dma<R, N> {
    /// The same engine with room for `M` commands per scope.
    pub fn with_slots<const M: usize>(self) -> Dma<R, M> {
        const {
            assert!(
                M >= 1 && M <= SCOPE_SLOTS,
                "a scope has 1..=16 command slots"
            )
        };
        Dma {
            raw: self.raw,
            chunk: self.chunk,
        }
    }

    /// Splits every later copy into commands of at most `bytes` (0: only as the engine's
    /// [`DmaRaw::max_len`] requires). On GAP8 a long command occupies L2 until it is done, and an
    /// instruction-cache refill waits behind it; shorter commands let refills in between.
    pub fn set_chunk(&mut self, bytes: usize) {
        self.chunk = bytes;
    }

    /// The backend engine.
    pub fn raw(&self) -> &R {
        &self.raw
    }

    /// Runs `f` with a [`Scope`] in which transfers can be started; returns after `f` returned
    /// and every transfer started in the scope is complete.
    #[inline(always)]
    pub fn scope<'env, T, F>(&'env mut self, f: F) -> T
    where
        F: for<'s> FnOnce(&'s Scope<'s, 'env, R, N>) -> T,
    {
        let state = ScopeState {
            chunk: self.chunk,
            raw: UnsafeCell::new(&mut self.raw),
            cmds: [const { UnsafeCell::new(MaybeUninit::uninit()) }; N],
            busy: Cell::new(0),
        };
        let scope = Scope {
            state: &state,
            _scope: PhantomData,
        };
        // `state` is dropped (and so waits for every transfer) after `f` returns or unwinds.
        f(&scope)
    }

    /// Starts writing `commit.0` (L1) into `commit.1` (L2) and reading `fetch.0` (L2) into
    /// `fetch.1` (L1), runs `work` while both are in flight, and returns its result once both are
    /// complete (also when `work` unwinds). An empty pair issues no command. Each copy is one
    /// command: longer than [`DmaRaw::max_len`] is [`DmaError::TooLong`], and nothing is started
    /// on any error.
    ///
    /// The lean form of a [`Dma::scope`] with one write-back and one fetch (no command slots to
    /// search, nothing to split): the per-core pipelines of the cluster engine run it for every
    /// chunk on every core.
    #[inline(always)]
    pub fn overlap<T>(
        &mut self,
        commit: (&[u8], &mut [u8]),
        fetch: (&[u8], &mut [u8]),
        work: impl FnOnce() -> T,
    ) -> Result<T, DmaError> {
        let (out_loc, out_ext) = commit;
        let (in_ext, in_loc) = fetch;
        let raw = &mut self.raw;
        if out_loc.len() != out_ext.len() || in_ext.len() != in_loc.len() {
            return Err(DmaError::Length);
        }
        let max = raw.max_len();
        if out_loc.len() > max || in_loc.len() > max {
            return Err(DmaError::TooLong);
        }
        if !raw.is_local(out_loc.as_ptr() as usize, out_loc.len())
            || !raw.is_local(in_loc.as_ptr() as usize, in_loc.len())
        {
            return Err(DmaError::NotLocal);
        }
        // The records live in this frame and do not move until `Pending` has waited for them
        // (its `Drop`, also while unwinding).
        let mut cmds = [R::new_cmd(), R::new_cmd()];
        let [c_out, c_in] = &mut cmds;
        let mut pending = Pending {
            raw,
            out: None,
            inp: None,
        };
        if !out_loc.is_empty() {
            // SAFETY: `out_loc` (L1, checked) and `out_ext` are borrowed, with equal length
            // `0 < len <= max_len`, until this function returns, and `pending` waits for the
            // command before that (its `Drop`); one is shared and one exclusive, so they do not
            // overlap, and nobody else reads or writes the destination meanwhile. `c_out` stays
            // in `cmds` until then.
            unsafe {
                pending.raw.start(
                    Dir::LocToExt,
                    out_ext.as_mut_ptr(),
                    out_loc.as_ptr() as *mut u8,
                    out_loc.len(),
                    c_out,
                )
            };
            pending.out = Some(c_out);
        }
        if !in_loc.is_empty() {
            // SAFETY: as above, for `in_ext` (source) and `in_loc` (L1 destination).
            unsafe {
                pending.raw.start(
                    Dir::ExtToLoc,
                    in_ext.as_ptr() as *mut u8,
                    in_loc.as_mut_ptr(),
                    in_loc.len(),
                    c_in,
                )
            };
            pending.inp = Some(c_in);
        }
        let r = work();
        drop(pending);
        Ok(r)
    }

    /// Copies `ext` (L2) into `loc` (L1) and waits. A copy that needs more commands than the
    /// handle has slots goes in waves of at most `N` commands, each waited for before the next.
    pub fn copy_in(&mut self, ext: &[u8], loc: &mut [u8]) -> Result<(), DmaError> {
        if ext.len() > self.wave_len() {
            return self.copy_in_waves(ext, loc);
        }
        self.scope(|s| s.copy_in(ext, loc).map(|t| t.wait()))
    }

    /// [`Dma::copy_in`] of more than one wave (out of line: the cluster's hot paths copy less).
    #[inline(never)]
    fn copy_in_waves(&mut self, ext: &[u8], loc: &mut [u8]) -> Result<(), DmaError> {
        if ext.len() != loc.len() {
            return Err(DmaError::Length);
        }
        let wave = self.wave_len();
        for (e, l) in ext.chunks(wave).zip(loc.chunks_mut(wave)) {
            self.scope(|s| s.copy_in(e, l).map(|t| t.wait()))?;
        }
        Ok(())
    }

    /// Copies `loc` (L1) into `ext` (L2) and waits, in waves as [`Dma::copy_in`].
    pub fn copy_out(&mut self, loc: &[u8], ext: &mut [u8]) -> Result<(), DmaError> {
        if loc.len() > self.wave_len() {
            return self.copy_out_waves(loc, ext);
        }
        self.scope(|s| s.copy_out(loc, ext).map(|t| t.wait()))
    }

    /// [`Dma::copy_out`] of more than one wave.
    #[inline(never)]
    fn copy_out_waves(&mut self, loc: &[u8], ext: &mut [u8]) -> Result<(), DmaError> {
        if ext.len() != loc.len() {
            return Err(DmaError::Length);
        }
        let wave = self.wave_len();
        for (l, e) in loc.chunks(wave).zip(ext.chunks_mut(wave)) {
            self.scope(|s| s.copy_out(l, e).map(|t| t.wait()))?;
        }
        Ok(())
    }

    /// Bytes that `N` commands of this handle move at most (each command `chunk` or
    /// [`DmaRaw::max_len`] bytes).
    fn wave_len(&self) -> usize {
        let max = self.raw.max_len().max(1);
        let per_command = if self.chunk == 0 {
            max
        } else {
            self.chunk.min(max)
        };
        per_command.saturating_mul(N)
    }
}

/// The commands [`Dma::overlap`] started; waits for them when dropped.
struct Pending<'a, R: DmaRaw> {
    raw: &'a mut R,
    out: Option<&'a mut R::Cmd>,
    inp: Option<&'a mut R::Cmd>,
}

impl<R: DmaRaw> Drop for Pending<'_, R> {
    #[inline(always)]
    fn drop(&mut self) {
        if let Some(c) = self.out.take() {
            // SAFETY: `c` was passed to `start` on this engine (it is only stored after) and is
            // waited on once (taken).
            unsafe { self.raw.wait(c) };
        }
        if let Some(c) = self.inp.take() {
            // SAFETY: as above.
            unsafe { self.raw.wait(c) };
        }
    }
}

/// The command records of a scope; waits for every transfer still in flight when dropped.
///
/// Bit `i` of `busy` is set exactly while `cmds[i]` holds a started, not yet waited command (and
/// only then is `cmds[i]` initialised). Records are written only when a command starts, so a scope
/// costs nothing for the slots it does not use (this runs every round on the GAP8 cluster).
struct ScopeState<'env, R: DmaRaw, const N: usize> {
    chunk: usize,
    raw: UnsafeCell<&'env mut R>,
    cmds: [UnsafeCell<MaybeUninit<R::Cmd>>; N],
    busy: Cell<u32>,
}

/// Transfers started in a scope borrow their buffers for `'s`; all are complete when the scope ends.
pub struct Scope<'s, 'env: 's, R: DmaRaw, const N: usize = SCOPE_SLOTS> {
    state: &'s ScopeState<'env, R, N>,
    // Invariant in `'s`, as `std::thread::Scope`.
    _scope: PhantomData<&'s mut &'s ()>,
}

/// A transfer in flight. [`Transfer::wait`] waits for it; dropping it does nothing (the scope waits).
pub struct Transfer<'s, 'env: 's, R: DmaRaw, const N: usize = SCOPE_SLOTS> {
    state: &'s ScopeState<'env, R, N>,
    /// The slots of its commands (one bit per slot).
    slots: u32,
}

impl<'s, 'env: 's, R: DmaRaw, const N: usize> Scope<'s, 'env, R, N> {
    /// Starts copying `ext` (L2) into `loc` (L1). Both stay borrowed until the scope ends.
    #[inline(always)]
    pub fn copy_in(
        &'s self,
        ext: &'s [u8],
        loc: &'s mut [u8],
    ) -> Result<Transfer<'s, 'env, R, N>, DmaError> {
        if ext.len() != loc.len() {
            return Err(DmaError::Length);
        }
        self.start(
            Dir::ExtToLoc,
            ext.as_ptr() as *mut u8,
            loc.as_mut_ptr(),
            loc.len(),
        )
    }

    /// Starts copying `loc` (L1) into `ext` (L2). Both stay borrowed until the scope ends.
    #[inline(always)]
    pub fn copy_out(
        &'s self,
        loc: &'s [u8],
        ext: &'s mut [u8],
    ) -> Result<Transfer<'s, 'env, R, N>, DmaError> {
        if ext.len() != loc.len() {
            return Err(DmaError::Length);
        }
        self.start(
            Dir::LocToExt,
            ext.as_mut_ptr(),
            loc.as_ptr() as *mut u8,
            loc.len(),
        )
    }

    // On GAP8 this runs every round of the cluster engine: linked with the engine's hot code, and
    // kept small (one command, the common case, here; several in `start_split`).
    #[cfg_attr(target_arch = "riscv32", unsafe(link_section = ".text.hot.0.dma"))]
    #[inline(never)]
    fn start(
        &'s self,
        dir: Dir,
        ext: *mut u8,
        loc: *mut u8,
        len: usize,
    ) -> Result<Transfer<'s, 'env, R, N>, DmaError> {
        let st = self.state;
        // SAFETY: the state is `!Sync` (UnsafeCell) and none of its methods keeps a reference to
        // `raw` across a call, so this is the only live reference to the engine.
        let raw: &mut R = unsafe { &mut **st.raw.get() };
        if !raw.is_local(loc as usize, len) {
            return Err(DmaError::NotLocal);
        }
        let max = raw.max_len().max(1);
        let chunk = if st.chunk == 0 {
            max
        } else {
            st.chunk.min(max)
        };
        if len > chunk {
            return self.start_split(dir, ext, loc, len, chunk);
        }
        // Zero length: no command is issued, and so none is ever waited on.
        if len == 0 {
            return Ok(Transfer {
                state: st,
                slots: 0,
            });
        }
        let busy = st.busy.get();
        // The lowest free slot, by a loop: `trailing_zeros` without the B extension reads a
        // lookup table in `.rodata` (L2 on GAP8, behind the transfer just started).
        let mut slot = 0;
        while slot < N && busy & (1 << slot) != 0 {
            slot += 1;
        }
        let Some(cell) = st.cmds.get(slot) else {
            return Err(DmaError::Busy);
        };
        // SAFETY: slot `slot` is free (its bit is clear), so nobody holds its record; the write
        // initialises it.
        let cmd: &mut R::Cmd = unsafe { (*cell.get()).write(R::new_cmd()) };
        // SAFETY: `ext` and `loc` come from a `&'s` / `&'s mut` pair of equal length `len`,
        // borrowed until the scope ends, and the scope waits for this command before it ends
        // (`Drop`), so both ranges stay valid and unaliased (they cannot overlap: one is shared,
        // one is exclusive) and the destination is ours for the whole transfer. `loc` passed
        // `is_local`, `0 < len <= max_len`. The command record lives in `st.cmds[slot]`, which
        // does not move (the state is borrowed by the scope until it is dropped) and is not
        // reused while its `busy` bit is set.
        unsafe { raw.start(dir, ext, loc, len, cmd) };
        st.busy.set(busy | 1 << slot);
        Ok(Transfer {
            state: st,
            slots: 1 << slot,
        })
    }

    /// A transfer longer than one command: split into commands of `chunk` bytes, all issued or
    /// none.
    #[inline(never)]
    fn start_split(
        &'s self,
        dir: Dir,
        ext: *mut u8,
        loc: *mut u8,
        len: usize,
        chunk: usize,
    ) -> Result<Transfer<'s, 'env, R, N>, DmaError> {
        let st = self.state;
        // SAFETY: as in `start`.
        let raw: &mut R = unsafe { &mut **st.raw.get() };
        let commands = len.div_ceil(chunk);
        let busy = st.busy.get();
        if commands > N - busy.count_ones() as usize {
            // Nothing started: either the whole transfer is issued or none of it.
            return Err(DmaError::Busy);
        }
        let mut slots = 0u32;
        let mut done = 0;
        let mut slot = 0;
        while done < len {
            let n = chunk.min(len - done);
            while (busy | slots) & (1 << slot) != 0 {
                slot += 1;
            }
            let Some(cell) = st.cmds.get(slot) else {
                break; // unreachable: enough free slots were counted above
            };
            // SAFETY: slot `slot` is free (its bit is clear), so nobody holds its record; the
            // write initialises it.
            let cmd: &mut R::Cmd = unsafe { (*cell.get()).write(R::new_cmd()) };
            // SAFETY: as in `start`, for the bytes `[done, done + n)` of the two ranges
            // (`done + n <= len`, `n <= chunk <= max_len`).
            unsafe { raw.start(dir, ext.add(done), loc.add(done), n, cmd) };
            slots |= 1 << slot;
            st.busy.set(busy | slots);
            done += n;
        }
        Ok(Transfer {
            state: self.state,
            slots,
        })
    }

    /// Starts copying a 2-D tile from `ext` (L2) into `loc` (L1) with one command: the lines of
    /// `row_len` bytes that start every `stride` bytes of `ext`, packed into `loc` (`loc.len()`
    /// a multiple of `row_len`; `ext` must reach the end of the last line). Both stay borrowed
    /// until the scope ends. [`DmaError::Unsupported`] when the backend has no 2-D transfers
    /// ([`DmaRaw::has_2d`]), [`DmaError::Length`] for a tile that does not fit the slices or
    /// one command.
    pub fn copy_in_2d(
        &'s self,
        ext: &'s [u8],
        stride: usize,
        row_len: usize,
        loc: &'s mut [u8],
    ) -> Result<Transfer<'s, 'env, R, N>, DmaError> {
        let st = self.state;
        // SAFETY: as in `start`: no other reference to the engine is live.
        let raw: &mut R = unsafe { &mut **st.raw.get() };
        if !raw.has_2d() {
            return Err(DmaError::Unsupported);
        }
        let len = loc.len();
        if len == 0 {
            return Ok(Transfer {
                state: st,
                slots: 0,
            });
        }
        let rows = len.checked_div(row_len).unwrap_or(0);
        if row_len == 0
            || rows * row_len != len
            || stride < row_len
            || stride >= 1 << 16
            || len > raw.max_len()
            || (rows - 1)
                .checked_mul(stride)
                .and_then(|v| v.checked_add(row_len))
                .is_none_or(|end| end > ext.len())
        {
            return Err(DmaError::Length);
        }
        if !raw.is_local(loc.as_ptr() as usize, len) {
            return Err(DmaError::NotLocal);
        }
        let busy = st.busy.get();
        let mut slot = 0;
        while slot < N && busy & (1 << slot) != 0 {
            slot += 1;
        }
        let Some(cell) = st.cmds.get(slot) else {
            return Err(DmaError::Busy);
        };
        // SAFETY: slot `slot` is free (its bit is clear); the write initialises it.
        let cmd: &mut R::Cmd = unsafe { (*cell.get()).write(R::new_cmd()) };
        // SAFETY: `ext` covers every line of the tile (checked above) and `loc` exactly its
        // packed bytes; both are borrowed for `'s` (shared / exclusive, so they cannot overlap)
        // and the scope waits for this command before it ends. `loc` passed `is_local`, `0 <
        // len <= max_len`, `row_len <= stride < 65536`; the record stays in place while its busy
        // bit is set (see `start`).
        unsafe {
            raw.start_2d(
                Dir::ExtToLoc,
                ext.as_ptr() as *mut u8,
                loc.as_mut_ptr(),
                row_len,
                rows,
                stride,
                cmd,
            )
        };
        st.busy.set(busy | 1 << slot);
        Ok(Transfer {
            state: st,
            slots: 1 << slot,
        })
    }

    /// Transfers currently in flight.
    pub fn in_flight(&self) -> usize {
        self.state.busy.get().count_ones() as usize
    }
}

impl<R: DmaRaw, const N: usize> ScopeState<'_, R, N> {
    /// Waits for the commands of the slots in `mask` that are still in flight.
    #[inline(always)]
    fn wait_slots(&self, mask: u32) {
        let mut pending = self.busy.get() & mask;
        let mut slot = 0;
        while pending != 0 {
            if pending & 1 != 0 {
                self.busy.set(self.busy.get() & !(1 << slot));
                // SAFETY: the slot's busy bit was set by `start` on this engine with this record
                // (initialised there) and is cleared here, so the command is waited on exactly
                // once; no other reference to the engine or the record is live (see `start`).
                unsafe {
                    let cmd = (*self.cmds[slot].get()).assume_init_mut();
                    (**self.raw.get()).wait(cmd);
                    (*self.cmds[slot].get()).assume_init_drop();
                }
            }
            pending >>= 1;
            slot += 1;
        }
    }
}

impl<R: DmaRaw, const N: usize> Drop for ScopeState<'_, R, N> {
    #[inline(always)]
    fn drop(&mut self) {
        self.wait_slots(u32::MAX);
    }
}

impl<R: DmaRaw, const N: usize> Transfer<'_, '_, R, N> {
    /// Waits until this transfer is complete.
    pub fn wait(self) {
        self.state.wait_slots(self.slots);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    extern crate std;
    use std::vec::Vec;

    /// A synchronous-at-wait engine that logs what it is asked to do.
    #[derive(Default)]
    struct Log {
        started: usize,
        waited: usize,
        /// The most commands in flight at once.
        most_in_flight: usize,
    }
    struct Cmd(Option<(Dir, *mut u8, *mut u8, usize)>);
    // SAFETY: copies at wait, touching exactly the two ranges given to `start`.
    unsafe impl DmaRaw for Log {
        type Cmd = Cmd;
        fn new_cmd() -> Cmd {
            Cmd(None)
        }
        fn max_len(&self) -> usize {
            1024
        }
        fn is_local(&self, _: usize, _: usize) -> bool {
            true
        }
        unsafe fn start(
            &mut self,
            dir: Dir,
            ext: *mut u8,
            loc: *mut u8,
            len: usize,
            cmd: &mut Cmd,
        ) {
            assert!(cmd.0.is_none(), "record reused while in flight");
            self.started += 1;
            self.most_in_flight = self.most_in_flight.max(self.started - self.waited);
            cmd.0 = Some((dir, ext, loc, len));
        }
        unsafe fn wait(&mut self, cmd: &mut Cmd) {
            let (dir, ext, loc, len) = cmd.0.take().expect("waited on a command never started");
            self.waited += 1;
            // SAFETY: per `start`'s contract.
            unsafe {
                match dir {
                    Dir::ExtToLoc => core::ptr::copy_nonoverlapping(ext, loc, len),
                    Dir::LocToExt => core::ptr::copy_nonoverlapping(loc, ext, len),
                }
            }
        }
    }

    #[test]
    #[allow(clippy::forget_non_drop)] // the point: forgetting a handle must be harmless
    fn scope_waits_for_dropped_and_forgotten_transfers() {
        let mut dma = Dma::new(Log::default());
        let src: Vec<u8> = (0..100).collect();
        let mut a = [0u8; 100];
        let mut b = [0u8; 100];
        dma.scope(|s| {
            let t = s.copy_in(&src, &mut a).unwrap();
            core::mem::forget(t);
            let _ = s.copy_in(&src, &mut b).unwrap();
            assert_eq!(s.in_flight(), 2);
        });
        assert_eq!(a[..], src[..]);
        assert_eq!(b[..], src[..]);
        assert_eq!((dma.raw().started, dma.raw().waited), (2, 2));
    }

    #[test]
    fn zero_length_issues_nothing_and_errors_start_nothing() {
        let mut dma = Dma::new(Log::default());
        let mut a = [0u8; 2000];
        dma.copy_in(&[], &mut a[..0]).unwrap();
        assert_eq!(dma.copy_in(&[1, 2], &mut a[..3]), Err(DmaError::Length));
        assert_eq!((dma.raw().started, dma.raw().waited), (0, 0));
        // Longer than one command (1024): split into two, both waited for.
        let big: Vec<u8> = (0..2000).map(|i| i as u8).collect();
        dma.copy_in(&big, &mut a).unwrap();
        assert_eq!(a[..], big[..]);
        assert_eq!((dma.raw().started, dma.raw().waited), (2, 2));
        // A chunk size splits further; a transfer that needs more slots than are free starts nothing.
        dma.set_chunk(200);
        a.fill(0);
        dma.copy_in(&big, &mut a).unwrap();
        assert_eq!(a[..], big[..]);
        assert_eq!((dma.raw().started, dma.raw().waited), (12, 12));
        dma.set_chunk(100); // 20 commands > 16 slots: a scope starts none of them
        let r = dma.scope(|s| s.copy_in(&big, &mut a).map(|_| ()));
        assert_eq!(r, Err(DmaError::Busy));
        assert_eq!((dma.raw().started, dma.raw().waited), (12, 12));
        // A blocking copy goes in two waves, 16 and 4 commands.
        a.fill(0);
        dma.copy_in(&big, &mut a).unwrap();
        assert_eq!(a[..], big[..]);
        assert_eq!((dma.raw().started, dma.raw().waited), (32, 32));
        assert_eq!(dma.raw().most_in_flight, 16);
    }

    #[test]
    fn cluster_wide_budget() {
        assert_eq!(slots_per_handle(8, 1), 2);
        assert_eq!(slots_per_handle(8, 2), 1);
        assert_eq!(slots_per_handle(4, 1), 4);
        assert_eq!(slots_per_handle(1, 1), SCOPE_SLOTS);
        assert_eq!(slots_per_handle(9, 2), 0);
        for cores in 1..=8 {
            for handles in 1..=2 {
                let n = slots_per_handle(cores, handles);
                assert!(n >= 1 && n * cores * handles <= CLUSTER_DMA_IDS);
            }
        }
        // A handle with the per-core share never has more commands in flight: a scope refuses a
        // transfer that needs more (nothing started), a blocking copy goes in waves.
        let mut dma = Dma::new(Log::default()).with_slots::<{ slots_per_handle(8, 1) }>();
        dma.set_chunk(100);
        let src: Vec<u8> = (0..301).map(|i| i as u8).collect();
        let mut dst: Vec<u8> = src.iter().map(|_| 0).collect();
        let r = dma.scope(|s| s.copy_in(&src, &mut dst).map(|_| ()));
        assert_eq!(r, Err(DmaError::Busy));
        assert_eq!(dma.raw().started, 0);
        assert_eq!(dma.copy_in(&src, &mut dst), Ok(()));
        assert_eq!(dst, src);
        assert_eq!(
            (
                dma.raw().started,
                dma.raw().waited,
                dma.raw().most_in_flight
            ),
            (4, 4, 2)
        );
        let back = dst.clone();
        dst.fill(0);
        assert_eq!(dma.copy_out(&back, &mut dst), Ok(()));
        assert_eq!(dst, src);
        assert_eq!(dma.copy_in(&src, &mut dst[..300]), Err(DmaError::Length));
    }

    #[test]
    fn slots_are_bounded_and_reusable_after_wait() {
        let mut dma = Dma::new(Log::default());
        let src = [7u8; 8];
        let mut bufs = [[0u8; 8]; SCOPE_SLOTS + 1];
        dma.scope(|s| {
            let (last, rest) = bufs.split_last_mut().unwrap();
            let mut ts = Vec::new();
            for b in rest.iter_mut() {
                ts.push(s.copy_in(&src, b).unwrap());
            }
            assert_eq!(s.copy_in(&src, last).err(), Some(DmaError::Busy));
            ts.pop().unwrap().wait();
            assert_eq!(s.in_flight(), SCOPE_SLOTS - 1);
        });
        assert_eq!(
            (dma.raw().started, dma.raw().waited),
            (SCOPE_SLOTS, SCOPE_SLOTS)
        );
    }

    #[test]
    fn small_scopes_have_their_own_bound() {
        let mut dma = Dma::new(Log::default()).with_slots::<2>();
        let src = [3u8; 8];
        let mut bufs = [[0u8; 8]; 3];
        dma.scope(|s| {
            let [a, b, c] = &mut bufs;
            s.copy_in(&src, a).unwrap();
            s.copy_in(&src, b).unwrap();
            assert_eq!(s.copy_in(&src, c).err(), Some(DmaError::Busy));
        });
        assert_eq!(bufs, [[3; 8], [3; 8], [0; 8]]);
        assert_eq!((dma.raw().started, dma.raw().waited), (2, 2));
    }

    #[test]
    fn overlap_runs_work_between_start_and_wait() {
        let mut dma = Dma::new(Log::default());
        let l2_in: Vec<u8> = (0..64).collect();
        let mut l2_out = [0u8; 32];
        let l1_out = [9u8; 32];
        let mut l1_in = [0u8; 64];
        let seen = dma
            .overlap((&l1_out, &mut l2_out), (&l2_in, &mut l1_in), || 42)
            .unwrap();
        assert_eq!(seen, 42);
        assert_eq!(l2_out, [9; 32]);
        assert_eq!(l1_in[..], l2_in[..]);
        assert_eq!((dma.raw().started, dma.raw().waited), (2, 2));
        // Empty pairs issue nothing; errors start nothing and do not run `work`.
        let r = dma.overlap((&[], &mut []), (&[], &mut []), || 1).unwrap();
        assert_eq!(r, 1);
        assert_eq!((dma.raw().started, dma.raw().waited), (2, 2));
        let mut ran = false;
        let e = dma.overlap((&l1_out, &mut l2_out[..31]), (&[], &mut []), || ran = true);
        assert_eq!(e, Err(DmaError::Length));
        let big = [0u8; 1025];
        let mut big_l1 = [0u8; 1025];
        let e = dma.overlap((&[], &mut []), (&big, &mut big_l1), || ran = true);
        assert_eq!(e, Err(DmaError::TooLong));
        assert!(!ran);
        assert_eq!((dma.raw().started, dma.raw().waited), (2, 2));
    }

    #[test]
    fn overlap_waits_when_work_unwinds() {
        let mut dma = Dma::new(Log::default());
        let src = [5u8; 16];
        let mut dst = [0u8; 16];
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            let _ = dma.overlap((&[], &mut []), (&src, &mut dst), || panic!("work failed"));
        }));
        assert!(r.is_err());
        assert_eq!(dst, [5; 16]);
        assert_eq!((dma.raw().started, dma.raw().waited), (1, 1));
    }
}
