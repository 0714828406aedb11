//! Host backend: the cluster simulated with threads, for tests and for the host simulation of the
//! drone.
//!
//! | chip | host |
//! |---|---|
//! | cores 0..8 | the calling thread (core 0) and a persistent pool of 7 threads |
//! | event-unit barrier | a poisonable condition-variable barrier per fork |
//! | 64 KiB L1 TCDM | a 64 KiB [`Arena`] over one heap block; allocations beyond it fail as on the chip |
//! | L2 | the process heap ([`HostL2`]) |
//! | cluster DMA | [`HostDma`]: `start` fills the destination with [`POISON`]; the bytes are copied only by `wait` |
//!
//! The DMA model makes ordering bugs visible and deterministic, without data races: a transfer that
//! is never waited on leaves poison in its destination, a destination read before its wait reads
//! poison, and a source changed between `start` and `wait` is copied in its changed state.
//! With the `fault-injection` feature, [`HostCluster::inject`] makes the DMA skip waits so tests
//! can prove that the engine's equality checks catch such bugs.
mod pool;

use crate::cluster::{Cluster, ClusterError, Controller, ForkError, MAX_CORES, Team};
use crate::dma::{Dir, Dma, DmaRaw};
use crate::mem::{Arena, RawAlloc};
use core::alloc::Layout;
use core::ptr::NonNull;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

/// Size of the simulated L1 (as GAP8's cluster TCDM).
pub const L1_SIZE: usize = 64 * 1024;

/// Byte written over a DMA destination when the transfer starts.
pub const POISON: u8 = 0xA5;

/// Faults the host DMA can be told to inject (feature `fault-injection`).
#[cfg(feature = "fault-injection")]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fault {
    /// Behave correctly.
    None,
    /// Every `n`-th wait returns without the transfer ever landing (`n >= 1`).
    SkipWait(usize),
}

#[derive(Default)]
struct Counters {
    started: AtomicUsize,
    waited: AtomicUsize,
    bytes: AtomicUsize,
    waited_idle: AtomicUsize,
    #[cfg(feature = "fault-injection")]
    skip_every: AtomicUsize,
    #[cfg(feature = "fault-injection")]
    waits: AtomicUsize,
}

/// What the DMA of a [`HostCluster`] was asked to do (see [`HostCluster::dma_stats`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DmaStats {
    /// Transfers started.
    pub started: usize,
    /// Waits on started transfers.
    pub waited: usize,
    /// Bytes of all started transfers.
    pub bytes: usize,
    /// Waits on a command record that had no transfer in flight (a bug in the caller).
    pub waited_idle: usize,
}

/// The simulated 64 KiB L1: one heap block managed by an [`Arena`].
pub struct HostL1 {
    mem: NonNull<u8>,
    layout: Layout,
    arena: Mutex<Arena>,
}

// SAFETY: the block is only reached through allocations handed out by the arena (behind a mutex),
// each owned by one `Buf`.
unsafe impl Send for HostL1 {}
// SAFETY: as above.
unsafe impl Sync for HostL1 {}

impl HostL1 {
    fn new(size: usize) -> HostL1 {
        // 64 KiB alignment: the simulated L1 is as aligned as the real one (0x1000_0000).
        let layout = Layout::from_size_align(size.max(1), 64 * 1024).expect("L1 layout");
        // SAFETY: the layout has a non-zero size.
        let mem = NonNull::new(unsafe { std::alloc::alloc(layout) })
            .unwrap_or_else(|| std::alloc::handle_alloc_error(layout));
        let arena = Mutex::new(Arena::new(mem.as_ptr() as usize, size));
        HostL1 { mem, layout, arena }
    }

    /// Address range `[start, end)` of the simulated L1.
    pub fn range(&self) -> (usize, usize) {
        let a = self.arena.lock().unwrap_or_else(|e| e.into_inner());
        (a.base(), a.base() + a.size())
    }

    /// Bytes currently allocated (to check that everything allocated was freed).
    pub fn allocated(&self) -> usize {
        self.arena
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .allocated()
    }
}

// SAFETY: the arena hands out disjoint, aligned ranges inside the block, which lives as long as
// `self`; a block is handed out again only after `dealloc`.
unsafe impl RawAlloc for HostL1 {
    fn alloc(&self, layout: Layout) -> Option<NonNull<u8>> {
        let mut a = self.arena.lock().unwrap_or_else(|e| e.into_inner());
        let addr = a.alloc(layout.size(), layout.align()).ok()?;
        let off = addr - a.base();
        // SAFETY: `off + size <= L1 size`, inside the block (keeps the block's provenance).
        NonNull::new(unsafe { self.mem.as_ptr().add(off) })
    }

    unsafe fn dealloc(&self, ptr: NonNull<u8>, layout: Layout) {
        let freed = self
            .arena
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .free(ptr.as_ptr() as usize, layout.size());
        debug_assert!(
            freed,
            "L1 free of a block that was not allocated with this layout"
        );
    }
}

impl Drop for HostL1 {
    fn drop(&mut self) {
        // SAFETY: allocated in `new` with `self.layout`; every `Buf` borrowed `self`, so none is left.
        unsafe { std::alloc::dealloc(self.mem.as_ptr(), self.layout) };
    }
}

/// L2 on the host: the process heap.
#[derive(Clone, Copy, Debug, Default)]
pub struct HostL2;

// SAFETY: forwards to the global allocator, which satisfies the same contract.
unsafe impl RawAlloc for HostL2 {
    fn alloc(&self, layout: Layout) -> Option<NonNull<u8>> {
        // SAFETY: `Buf` only asks for `layout.size() > 0`.
        NonNull::new(unsafe { std::alloc::alloc(layout) })
    }
    unsafe fn dealloc(&self, ptr: NonNull<u8>, layout: Layout) {
        // SAFETY: caller contract of `RawAlloc::dealloc`.
        unsafe { std::alloc::dealloc(ptr.as_ptr(), layout) }
    }
}

/// Configuration of a [`HostCluster`].
#[derive(Clone, Copy, Debug)]
pub struct HostConfig {
    /// Cores (threads) of the simulated cluster, 1..=8.
    pub cores: usize,
    /// Size of the simulated L1.
    pub l1_size: usize,
}

impl Default for HostConfig {
    fn default() -> Self {
        HostConfig {
            cores: MAX_CORES,
            l1_size: L1_SIZE,
        }
    }
}

/// The simulated cluster.
pub struct HostCluster {
    l1: HostL1,
    pool: Pool,
    cores: usize,
    busy: Mutex<()>,
    owner: Mutex<Option<std::thread::ThreadId>>,
    counters: Arc<Counters>,
}

use pool::{Barrier, Pool};

impl HostCluster {
    /// An 8-core cluster with a 64 KiB L1.
    pub fn new() -> HostCluster {
        HostCluster::with_config(HostConfig::default())
    }

    /// A cluster as configured (`cores` is clamped to 1..=8).
    pub fn with_config(cfg: HostConfig) -> HostCluster {
        let cores = cfg.cores.clamp(1, MAX_CORES);
        HostCluster {
            l1: HostL1::new(cfg.l1_size),
            pool: Pool::new(cores),
            cores,
            busy: Mutex::new(()),
            owner: Mutex::new(None),
            counters: Arc::new(Counters::default()),
        }
    }

    /// Counts of the DMA commands issued on this cluster so far.
    pub fn dma_stats(&self) -> DmaStats {
        let c = &self.counters;
        DmaStats {
            started: c.started.load(Ordering::SeqCst),
            waited: c.waited.load(Ordering::SeqCst),
            bytes: c.bytes.load(Ordering::SeqCst),
            waited_idle: c.waited_idle.load(Ordering::SeqCst),
        }
    }

    /// Makes the DMA of this cluster misbehave (tests only).
    #[cfg(feature = "fault-injection")]
    pub fn inject(&self, fault: Fault) {
        let n = match fault {
            Fault::None => 0,
            Fault::SkipWait(n) => n.max(1),
        };
        self.counters.skip_every.store(n, Ordering::SeqCst);
        self.counters.waits.store(0, Ordering::SeqCst);
    }
}

impl Default for HostCluster {
    fn default() -> Self {
        HostCluster::new()
    }
}

impl Cluster for HostCluster {
    type Ctrl<'a> = HostCtrl<'a>;
    type L1 = HostL1;

    fn l1(&self) -> &HostL1 {
        &self.l1
    }

    fn max_cores(&self) -> usize {
        self.cores
    }

    fn run<R, F>(&self, f: F) -> Result<R, ClusterError>
    where
        R: Send,
        F: for<'a> FnOnce(&mut HostCtrl<'a>) -> R + Send,
    {
        // Another thread waits for the cluster; the thread already running on it gets `Busy`.
        let me = std::thread::current().id();
        if *self.owner.lock().unwrap_or_else(|e| e.into_inner()) == Some(me) {
            return Err(ClusterError::Busy);
        }
        let _guard = self.busy.lock().unwrap_or_else(|e| e.into_inner());
        *self.owner.lock().unwrap_or_else(|e| e.into_inner()) = Some(me);
        struct Release<'a>(&'a Mutex<Option<std::thread::ThreadId>>);
        impl Drop for Release<'_> {
            fn drop(&mut self) {
                *self.0.lock().unwrap_or_else(|e| e.into_inner()) = None;
            }
        }
        let _release = Release(&self.owner);
        let mut ctrl = HostCtrl { cluster: self };
        Ok(f(&mut ctrl))
    }
}

/// Cluster core 0 on the host (the thread that called [`Cluster::run`]).
pub struct HostCtrl<'a> {
    cluster: &'a HostCluster,
}

/// A forked core on the host.
pub struct HostTeam<'a> {
    id: usize,
    cores: usize,
    barrier: &'a Barrier,
}

impl Team for HostTeam<'_> {
    fn core_id(&self) -> usize {
        self.id
    }
    fn cores(&self) -> usize {
        self.cores
    }
    fn barrier(&self) {
        self.barrier.wait()
    }
}

/// Poisons the team barrier if the core's closure unwinds, so the other cores do not hang in it.
struct PoisonOnUnwind<'a>(&'a Barrier);
impl Drop for PoisonOnUnwind<'_> {
    fn drop(&mut self) {
        if std::thread::panicking() {
            self.0.poison();
        }
    }
}

/// Per-core slots as the workers see them: a base pointer, each core takes its own index.
struct Slots<P>(*mut P);
impl<P> Slots<P> {
    /// # Safety
    /// `id` is in bounds and no other reference to slot `id` is live.
    #[allow(clippy::mut_from_ref)]
    unsafe fn get(&self, id: usize) -> &mut P {
        // SAFETY: caller contract.
        unsafe { &mut *self.0.add(id) }
    }
}
// SAFETY: each core dereferences only its own, distinct index (see `fork_each`), so this is like
// handing one `&mut P` to each thread, which needs `P: Send`.
unsafe impl<P: Send> Sync for Slots<P> {}

impl<'c> Controller for HostCtrl<'c> {
    type Team = HostTeam<'static>;
    type DmaRaw = HostDma;

    fn max_cores(&self) -> usize {
        self.cluster.cores
    }

    fn dma(&mut self) -> Dma<HostDma> {
        let (start, end) = self.cluster.l1.range();
        Dma::new(HostDma {
            l1_start: start,
            l1_end: end,
            counters: self.cluster.counters.clone(),
        })
    }

    fn fork_each<T, P, F>(
        &mut self,
        cores: usize,
        shared: &T,
        per_core: &mut [P],
        f: F,
    ) -> Result<(), ForkError>
    where
        T: Sync + ?Sized,
        P: Send,
        F: Fn(&HostTeam<'static>, &T, &mut P) + Sync,
    {
        if cores == 0 || cores > self.cluster.cores {
            return Err(ForkError::Cores);
        }
        if per_core.len() < cores {
            return Err(ForkError::Slots);
        }
        // Leaked per fork would be wasteful; the barrier lives on this stack frame and the team
        // handle borrows it only while the job runs (the `'static` in `Self::Team` is erased below).
        let barrier = Barrier::new(cores);
        let slots = Slots(per_core.as_mut_ptr());
        let job = |id: usize| {
            let _poison = PoisonOnUnwind(&barrier);
            // SAFETY: `Team` values never escape the job (the closure `f` only gets `&HostTeam`),
            // and the pool returns only after every job has finished, so the barrier outlives every
            // use of this reference.
            let barrier: &'static Barrier = unsafe { &*(&barrier as *const Barrier) };
            let team = HostTeam { id, cores, barrier };
            // SAFETY: `id < cores <= per_core.len()`, and the pool calls the job exactly once per
            // id, so each slot is borrowed mutably by one core only, for the duration of the fork.
            let slot = unsafe { slots.get(id) };
            f(&team, shared, slot)
        };
        if self.cluster.pool.run(cores, &job) {
            Ok(())
        } else {
            Err(ForkError::Panicked)
        }
    }
}

/// The host DMA (see the module docs for its model).
pub struct HostDma {
    l1_start: usize,
    l1_end: usize,
    counters: Arc<Counters>,
}

/// A host DMA command record.
#[derive(Debug, Default)]
pub struct HostCmd {
    pending: Option<(Dir, *mut u8, *mut u8, usize)>,
    /// A 2-D transfer: `(line length, line stride on the external side)`.
    tile: Option<(usize, usize)>,
}

// SAFETY: `start` only records the transfer and fills the destination (which the contract makes
// exclusively the transfer's) with poison; `wait` copies exactly `len` bytes from source to
// destination. Nothing else is touched.
unsafe impl DmaRaw for HostDma {
    type Cmd = HostCmd;

    fn new_cmd() -> HostCmd {
        HostCmd::default()
    }

    fn max_len(&self) -> usize {
        // As the GAP SDK's single 1D command (larger ones are split in software by the SDK).
        32 * 1024 - 1
    }

    fn is_local(&self, addr: usize, len: usize) -> bool {
        addr >= self.l1_start && addr.checked_add(len).is_some_and(|e| e <= self.l1_end)
    }

    unsafe fn start(
        &mut self,
        dir: Dir,
        ext: *mut u8,
        loc: *mut u8,
        len: usize,
        cmd: &mut HostCmd,
    ) {
        let dst = match dir {
            Dir::ExtToLoc => loc,
            Dir::LocToExt => ext,
        };
        // SAFETY: the contract makes `dst` valid and exclusively the transfer's for `len` bytes.
        unsafe { core::ptr::write_bytes(dst, POISON, len) };
        cmd.pending = Some((dir, ext, loc, len));
        cmd.tile = None;
        self.counters.started.fetch_add(1, Ordering::SeqCst);
        self.counters.bytes.fetch_add(len, Ordering::SeqCst);
    }

    fn has_2d(&self) -> bool {
        true
    }

    unsafe fn start_2d(
        &mut self,
        dir: Dir,
        ext: *mut u8,
        loc: *mut u8,
        row_len: usize,
        rows: usize,
        stride: usize,
        cmd: &mut HostCmd,
    ) {
        // Poison the destination's lines (the local side is packed, the external side strided).
        for r in 0..rows {
            let dst = match dir {
                // SAFETY: line `r` of the tile lies inside the ranges the contract makes the
                // transfer's.
                Dir::ExtToLoc => unsafe { loc.add(r * row_len) },
                Dir::LocToExt => unsafe { ext.add(r * stride) },
            };
            // SAFETY: as above, `row_len` bytes of the destination, exclusively the transfer's.
            unsafe { core::ptr::write_bytes(dst, POISON, row_len) };
        }
        cmd.pending = Some((dir, ext, loc, rows * row_len));
        cmd.tile = Some((row_len, stride));
        self.counters.started.fetch_add(1, Ordering::SeqCst);
        self.counters
            .bytes
            .fetch_add(rows * row_len, Ordering::SeqCst);
    }

    unsafe fn wait(&mut self, cmd: &mut HostCmd) {
        let tile = cmd.tile.take();
        let Some((dir, ext, loc, len)) = cmd.pending.take() else {
            self.counters.waited_idle.fetch_add(1, Ordering::SeqCst);
            return;
        };
        self.counters.waited.fetch_add(1, Ordering::SeqCst);
        #[cfg(feature = "fault-injection")]
        {
            let every = self.counters.skip_every.load(Ordering::SeqCst);
            let n = self.counters.waits.fetch_add(1, Ordering::SeqCst) + 1;
            if every != 0 && n % every == 0 {
                return;
            }
        }
        if let Some((row_len, stride)) = tile {
            for r in 0..len / row_len.max(1) {
                // SAFETY: per `start_2d`'s contract line `r` of both sides is valid, the two do
                // not overlap, the source is not written and the destination is the transfer's.
                unsafe {
                    let (e, l) = (ext.add(r * stride), loc.add(r * row_len));
                    match dir {
                        Dir::ExtToLoc => core::ptr::copy_nonoverlapping(e as *const u8, l, row_len),
                        Dir::LocToExt => core::ptr::copy_nonoverlapping(l as *const u8, e, row_len),
                    }
                }
            }
            return;
        }
        // SAFETY: per `start`'s contract both ranges are still valid, disjoint, the source is not
        // written and the destination is not accessed by anyone else until this returns.
        unsafe {
            match dir {
                Dir::ExtToLoc => core::ptr::copy_nonoverlapping(ext as *const u8, loc, len),
                Dir::LocToExt => core::ptr::copy_nonoverlapping(loc as *const u8, ext, len),
            }
        }
    }
}

// SAFETY: a `HostDma` holds only addresses and an `Arc`; the raw pointers in `HostCmd` records
// belong to the scope that started them, which is `!Send`.
unsafe impl Send for HostDma {}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dma::DmaError;
    use crate::mem::Buf;

    #[test]
    fn l1_is_bounded_and_frees_exactly() {
        let cl = HostCluster::new();
        let a = Buf::zeroed(cl.l1(), 40 * 1024, 8).unwrap();
        assert!(
            Buf::zeroed(cl.l1(), 30 * 1024, 8).is_err(),
            "L1 over-allocation must fail"
        );
        let b = Buf::zeroed(cl.l1(), 24 * 1024, 4096).unwrap();
        assert_eq!(b.as_ptr() as usize % 4096, 0);
        assert_eq!(cl.l1().allocated(), 64 * 1024);
        drop(a);
        drop(b);
        assert_eq!(cl.l1().allocated(), 0);
    }

    /// A 2-D tile lands packed, poisoned until waited for; bad shapes start nothing.
    #[test]
    fn tiles_copy_lines_of_a_strided_source() {
        let cl = HostCluster::new();
        let src: Vec<u8> = (0..200).map(|i| i as u8).collect();
        let mut l1 = Buf::zeroed(cl.l1(), 64, 8).unwrap();
        cl.run(|ctrl| {
            let mut dma = ctrl.dma();
            dma.scope(|s| {
                // 4 lines of 8 bytes, 30 apart, from byte 5.
                let t = s
                    .copy_in_2d(&src[5..5 + 3 * 30 + 8], 30, 8, &mut l1[..32])
                    .unwrap();
                t.wait();
            });
            // Shapes that do not fit are refused before anything starts.
            dma.scope(|s| {
                let (a, b) = l1.split_at_mut(32);
                let (b, c) = b.split_at_mut(16);
                assert_eq!(
                    s.copy_in_2d(&src[..50], 30, 8, a).err(),
                    Some(DmaError::Length)
                );
                assert_eq!(s.copy_in_2d(&src, 4, 8, b).err(), Some(DmaError::Length));
                assert_eq!(s.copy_in_2d(&src, 30, 7, c).err(), Some(DmaError::Length));
                assert_eq!(s.in_flight(), 0);
            });
        })
        .unwrap();
        for r in 0..4 {
            assert_eq!(l1[8 * r..8 * r + 8], src[5 + 30 * r..5 + 30 * r + 8]);
        }
    }

    #[test]
    fn fork_gives_each_core_its_slot_and_barrier_orders_phases() {
        let cl = HostCluster::new();
        for cores in 1..=8 {
            let mut slots = [0usize; 8];
            let hits = AtomicUsize::new(0);
            cl.run(|ctrl| {
                ctrl.fork_each(cores, &hits, &mut slots, |team, hits, slot| {
                    *slot = team.core_id() + 100;
                    hits.fetch_add(1, Ordering::SeqCst);
                    team.barrier();
                    // After the barrier every core has incremented.
                    assert_eq!(hits.load(Ordering::SeqCst), team.cores());
                    team.barrier();
                })
                .unwrap()
            })
            .unwrap();
            for (i, s) in slots.iter().enumerate() {
                assert_eq!(*s, if i < cores { i + 100 } else { 0 });
            }
        }
    }

    #[test]
    fn fork_rejects_bad_counts_and_reports_panics() {
        let cl = HostCluster::new();
        cl.run(|ctrl| {
            assert_eq!(ctrl.fork(0, &(), |_, _| {}), Err(ForkError::Cores));
            assert_eq!(ctrl.fork(9, &(), |_, _| {}), Err(ForkError::Cores));
            let mut two = [0u8; 2];
            assert_eq!(
                ctrl.fork_each(3, &(), &mut two, |_, _, _| {}),
                Err(ForkError::Slots)
            );
            // Core 3 panics while the others wait in the barrier: no hang, an error.
            let r = ctrl.fork(8, &(), |team, _| {
                if team.core_id() == 3 {
                    panic!("core 3 fails");
                }
                team.barrier();
            });
            assert_eq!(r, Err(ForkError::Panicked));
            // The pool still works afterwards.
            assert_eq!(ctrl.fork(8, &(), |team, _| team.barrier()), Ok(()));
        })
        .unwrap();
    }

    #[test]
    fn dma_lands_only_at_wait() {
        let cl = HostCluster::new();
        let mut l1 = Buf::zeroed(cl.l1(), 256, 8).unwrap();
        let l2: Vec<u8> = (0..=255).collect();
        cl.run(|ctrl| {
            let mut dma = ctrl.dma();
            let mut not_local = [0u8; 4];
            assert_eq!(
                dma.copy_in(&l2[..4], &mut not_local),
                Err(crate::DmaError::NotLocal)
            );
            dma.scope(|s| {
                let t = s.copy_in(&l2, &mut l1).unwrap();
                t.wait();
            });
        })
        .unwrap();
        assert_eq!(&l1[..], &l2[..]);
    }

    #[test]
    fn run_is_not_reentrant() {
        let cl = HostCluster::new();
        cl.run(|_| assert_eq!(cl.run(|_| ()).err(), Some(ClusterError::Busy)))
            .unwrap();
    }

    /// Prints what a fork costs on this machine (a figure for the docs, not a timed assertion).
    #[test]
    fn fork_cost_figure() {
        let cl = HostCluster::new();
        let n = 200;
        let t = std::time::Instant::now();
        cl.run(|ctrl| {
            for _ in 0..n {
                ctrl.fork(8, &(), |_, _| {}).unwrap();
            }
        })
        .unwrap();
        let pool = t.elapsed() / n;
        let t = std::time::Instant::now();
        for _ in 0..n {
            std::thread::scope(|s| {
                for _ in 1..8 {
                    s.spawn(|| {});
                }
            });
        }
        let spawn = t.elapsed() / n;
        println!("host fork of 8 cores: pool {pool:?}, scoped spawn {spawn:?}");
    }
}
