//! Bare-metal backend: GAP8 without any SDK, by MMIO. Runs on the GAP8 GVSOC model (and is
//! written for the chip: the sequences follow gap_sdk's pmsis implementation for GAP8).
//!
//! | concern | how |
//! |---|---|
//! | start-up, traps, exit, `println!` | [`rt`]: vector table + `_start` (FC and cluster cores), GVSOC stdout, `CORESTATUS` |
//! | linker script | `gap8.x` (this crate's build script puts it on the link path; a program links with `-Tgap8.x`): code/data/bss in L2, cluster stacks in L1, the rest of L1 and L2 as heaps |
//! | cluster power-up and boot | [`BareCluster::take`]: APB SoC `CL_BYPASS` / `CL_ISOLATE` sequence, cluster icache on, boot addresses, fetch enable |
//! | offload (FC → core 0) | [`Cluster::run`]: a mailbox in L2 polled by cluster core 0, which also counts cycles / instructions of the job ([`BareCluster::last_run`]) |
//! | fork, barrier | [`Controller::fork_each`]: a descriptor in L2 and event-unit hardware barrier 0 (all 8 cores) to start and join; [`Team::barrier`]: hardware barrier 1 set to the team |
//! | DMA | [`BareDma`]: mchan v6 through the core-local demux |
//! | L1 / L2 | [`Arena`]s over the linker script's heap ranges ([`BareL1`], [`BareL2`]) |
//! | counters | [`perf`]: PULP performance counters (running cycles, instructions) and the cluster timer (elapsed cycles) |
//!
//! The FC runs the program's `main` ([`crate::bare_main!`]). Cluster core 0 waits for offloads;
//! cores 1..8 wait in barrier 0 for forks. Synchronisation words live in L2 and are accessed with
//! volatile loads and stores (single 32-bit words; RI5CY has no atomics and no data cache).
pub mod mmio;
pub mod perf;
pub mod rt;

use crate::cluster::{Cluster, ClusterError, Controller, ForkError, MAX_CORES, Team};
use crate::dma::{Dir, Dma, DmaRaw};
use crate::mem::{Arena, RawAlloc};
use core::alloc::Layout;
use core::cell::UnsafeCell;
use core::marker::PhantomData;
use core::ptr::NonNull;
use core::sync::atomic::{Ordering, compiler_fence};

/// A word shared between cores, accessed only with volatile 32-bit loads and stores.
struct Word(UnsafeCell<usize>);
// SAFETY: every access is a single volatile aligned word access, which the GAP8 interconnect
// performs atomically; there is no data cache.
unsafe impl Sync for Word {}
impl Word {
    const fn new() -> Word {
        Word(UnsafeCell::new(0))
    }
    fn get(&self) -> usize {
        // SAFETY: see `impl Sync`.
        unsafe { core::ptr::read_volatile(self.0.get()) }
    }
    fn set(&self, v: usize) {
        // SAFETY: see `impl Sync`.
        unsafe { core::ptr::write_volatile(self.0.get(), v) }
    }
}

// FC <-> cluster core 0 mailbox.
static JOB_FN: Word = Word::new();
static JOB_ARG: Word = Word::new();
static JOB_STATE: Word = Word::new(); // 0 idle, 1 posted, 2 done
static JOB_CYCLES: Word = Word::new();
static JOB_ACTIVE: Word = Word::new();
static JOB_INSTRS: Word = Word::new();
const JOB_POSTED: usize = 1;
const JOB_DONE: usize = 2;

// Core 0 -> cores 1..8 fork descriptor.
static FORK_FN: Word = Word::new();
static FORK_ARG: Word = Word::new();
static FORK_CORES: Word = Word::new();

// Boot handshake and ownership.
static READY: [Word; MAX_CORES] = [const { Word::new() }; MAX_CORES];
static POWERED: Word = Word::new();
static TAKEN: Word = Word::new();

/// Waits about `n` cycles. (Not `core::hint::spin_loop`: its `pause` is a `fence` encoding, on
/// which the GAP8 model's FC stops for good.)
fn spin(n: u32) {
    for _ in 0..n {
        #[cfg(target_arch = "riscv32")]
        // SAFETY: a `nop`.
        unsafe {
            core::arch::asm!("nop", options(nomem, nostack, preserves_flags))
        };
        compiler_fence(Ordering::SeqCst);
    }
}

/// Hardware barrier `b` (0: all 8 cores, dispatch; 1: the current team).
#[inline(always)]
fn barrier_wait(b: usize) {
    compiler_fence(Ordering::SeqCst);
    // SAFETY: reading the barrier's trigger-wait-clear register through the core-local demux
    // makes this core arrive and sleep until the barrier completes; no memory is touched.
    unsafe { mmio::read(mmio::eu_barrier(b) + mmio::EU_HW_BARR_TRIGGER_WAIT_CLEAR) };
    compiler_fence(Ordering::SeqCst);
}

fn barrier_setup(b: usize, mask: u32) {
    // SAFETY: event-unit barrier configuration through the demux; only called while no core is
    // waiting in barrier `b` (at boot for barrier 0, between forks for barrier 1).
    unsafe {
        mmio::write(mmio::eu_barrier(b) + mmio::EU_HW_BARR_TRIGGER_MASK, mask);
        mmio::write(mmio::eu_barrier(b) + mmio::EU_HW_BARR_TARGET_MASK, mask);
    }
}

/// Entry of every cluster core (from `rt`'s `_start`).
#[cfg(target_arch = "riscv32")]
#[unsafe(no_mangle)]
extern "C" fn __bare_cluster_start(core: usize) -> ! {
    // SAFETY: this core's event mask and buffer (no memory effect): only the barrier event may end
    // a wait (a DMA end event, broadcast to all cores, must not wake a core that sleeps in a
    // barrier), and nothing stale is pending.
    unsafe {
        mmio::write(mmio::EU_CORE_MASK, 1 << mmio::EVT_BARRIER);
        mmio::write(mmio::EU_CORE_BUFFER_CLEAR, 0xFFFF_FFFF);
    }
    paint_stack(core);
    // Barrier 0 spans all 8 cores; every core writes the same masks (idempotent).
    barrier_setup(0, 0xFF);
    perf::start();
    if core == 0 {
        perf::wall_start();
    }
    READY[core].set(1);
    if core == 0 {
        controller_loop()
    } else {
        worker_loop(core)
    }
}

#[cfg(target_arch = "riscv32")]
fn controller_loop() -> ! {
    loop {
        while JOB_STATE.get() != JOB_POSTED {
            spin(32);
        }
        compiler_fence(Ordering::SeqCst);
        // SAFETY: `BareCluster::run` stored a `unsafe extern "C" fn(usize)` and its argument,
        // which it keeps alive until it sees `JOB_DONE`.
        let f: unsafe extern "C" fn(usize) = unsafe { core::mem::transmute(JOB_FN.get()) };
        let (w0, c0, i0) = (perf::wall_cycles(), perf::cycles(), perf::instructions());
        // SAFETY: see above.
        unsafe { f(JOB_ARG.get()) };
        let (w1, c1, i1) = (perf::wall_cycles(), perf::cycles(), perf::instructions());
        JOB_CYCLES.set(w1.wrapping_sub(w0) as usize);
        JOB_ACTIVE.set(c1.wrapping_sub(c0) as usize);
        JOB_INSTRS.set(i1.wrapping_sub(i0) as usize);
        compiler_fence(Ordering::SeqCst);
        JOB_STATE.set(JOB_DONE);
    }
}

#[cfg(target_arch = "riscv32")]
fn worker_loop(core: usize) -> ! {
    loop {
        barrier_wait(0); // a fork starts
        let cores = FORK_CORES.get();
        if core < cores {
            // SAFETY: core 0 stored a `unsafe extern "C" fn(usize, usize)` and its argument before
            // arriving at barrier 0, and keeps both alive until the closing barrier below.
            let f: unsafe extern "C" fn(usize, usize) =
                unsafe { core::mem::transmute(FORK_FN.get()) };
            // SAFETY: see above.
            unsafe { f(FORK_ARG.get(), core) };
        }
        barrier_wait(0); // the fork ends
    }
}

const STACK_PAINT: u32 = 0x5AC5_5AC5;

/// `[bottom, top)` of cluster core `core`'s stack (linker script).
fn stack_range(core: usize) -> (usize, usize) {
    unsafe extern "C" {
        static __cl_stack0_bottom: u8;
        static __cl_stack0_top: u8;
        static __cl_slave_stacks: u8;
        static __cl_slave_stack_size: u8;
    }
    let size = core::ptr::addr_of!(__cl_slave_stack_size) as usize;
    if core == 0 {
        (
            core::ptr::addr_of!(__cl_stack0_bottom) as usize,
            core::ptr::addr_of!(__cl_stack0_top) as usize,
        )
    } else {
        let base = core::ptr::addr_of!(__cl_slave_stacks) as usize + (core - 1) * size;
        (base, base + size)
    }
}

/// Fills the unused part of this core's stack (below the current frame, minus a margin) with a
/// pattern, so that [`stack_used`] can report the high-water mark.
#[cfg(target_arch = "riscv32")]
fn paint_stack(core: usize) {
    paint_below_frame(stack_range(core).0);
}

/// Paints `[bottom, the current frame − 256 B)` of the calling core's own stack.
#[cfg(target_arch = "riscv32")]
#[inline(always)]
fn paint_below_frame(bottom: usize) {
    let marker = 0u32;
    let below = (&raw const marker as usize).saturating_sub(256) & !3;
    let mut p = bottom;
    while p < below {
        // SAFETY: `[bottom, below)` is the calling core's own stack below the live frames (a
        // 256-byte margin under the current local), not used by anyone yet.
        unsafe { core::ptr::write_volatile(p as *mut u32, STACK_PAINT) };
        p += 4;
    }
}

/// Bytes of `[bottom, top)` used so far: from the top down to the lowest word that lost the paint.
fn used_of(bottom: usize, top: usize) -> (usize, usize) {
    let mut p = bottom;
    // SAFETY: reading words of a stack region of the linker script (powered memory).
    while p < top && unsafe { core::ptr::read_volatile(p as *const u32) } == STACK_PAINT {
        p += 4;
    }
    (top - p, top - bottom)
}

/// Bytes of cluster core `core`'s stack used so far (high-water mark, from the paint), and its size.
pub fn stack_used(core: usize) -> (usize, usize) {
    let (bottom, top) = stack_range(core.min(MAX_CORES - 1));
    used_of(bottom, top)
}

/// `[bottom, top)` of the FC's stack (linker script: right after `.bss` in L2, so that an
/// overflow writes into the program's statics).
fn fc_stack_range() -> (usize, usize) {
    unsafe extern "C" {
        static __fc_stack_bottom: u8;
        static __fc_stack_top: u8;
    }
    (
        core::ptr::addr_of!(__fc_stack_bottom) as usize,
        core::ptr::addr_of!(__fc_stack_top) as usize,
    )
}

/// Paints the FC's stack below the start-up frame (called once by `rt` on the FC before `main`).
#[cfg(target_arch = "riscv32")]
pub(crate) fn paint_fc_stack() {
    paint_below_frame(fc_stack_range().0);
}

/// Bytes of the FC's stack used so far (high-water mark, from the paint of start-up), and its
/// size. The stack lies right above `.bss`: a program whose mark comes near the size is about to
/// overwrite its statics (seen once as a cluster job's state corrupted: "cluster already busy").
pub fn fc_stack_used() -> (usize, usize) {
    let (bottom, top) = fc_stack_range();
    used_of(bottom, top)
}

/// The cluster, seen from the FC. Only one exists at a time ([`BareCluster::take`]).
pub struct BareCluster {
    l1: BareL1,
    _not_send: PhantomData<*mut ()>,
}

/// Cycles and instructions of the last [`Cluster::run`] job, measured on cluster core 0.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RunStats {
    /// Elapsed cluster clock cycles from the start to the end of the job (cluster timer).
    pub cycles: u32,
    /// Cycles core 0 was running in the job (PULP performance counter: excludes the cycles it
    /// slept in barriers waiting for the other cores).
    pub active_cycles: u32,
    /// Instructions core 0 retired in the job (PULP performance counter).
    pub instructions: u32,
}

impl BareCluster {
    /// On the FC: powers up and boots the cluster (first call), returns the handle. `None` when
    /// not called on the FC, when a handle already exists, or when the cores do not come up.
    pub fn take() -> Option<BareCluster> {
        if !mmio::is_fc() || TAKEN.get() != 0 {
            return None;
        }
        if POWERED.get() == 0 {
            power_up()?;
            POWERED.set(1);
        }
        TAKEN.set(1);
        Some(BareCluster {
            l1: BareL1 { _p: PhantomData },
            _not_send: PhantomData,
        })
    }

    /// Elapsed cycles, core 0's running cycles and instructions of the last [`Cluster::run`] job.
    pub fn last_run(&self) -> RunStats {
        RunStats {
            cycles: JOB_CYCLES.get() as u32,
            active_cycles: JOB_ACTIVE.get() as u32,
            instructions: JOB_INSTRS.get() as u32,
        }
    }
}

impl Drop for BareCluster {
    fn drop(&mut self) {
        // The cluster stays powered with its cores idle; every L1 `Buf` borrowed `self` and is gone.
        TAKEN.set(0);
    }
}

/// `pmsis` GAP8 `__pi_pmu_cluster_power_on` sequence (model: GVSOC `apb_soc_impl.cpp`), then
/// icache on, boot addresses, fetch enable, and wait for the 8 cores' ready words.
fn power_up() -> Option<()> {
    unsafe extern "C" {
        static __vectors: u8;
    }
    // SAFETY: APB SoC and cluster control registers of GAP8, written in the SDK's order; the
    // boot address is our vector table (cores start at +0x80, `_start`).
    unsafe {
        let mut byp = mmio::read(mmio::APB_SOC_CL_BYPASS);
        byp |= mmio::BYP_POW | mmio::BYP_CLK | mmio::CL_RST;
        mmio::write(mmio::APB_SOC_CL_BYPASS, byp);
        byp |= mmio::CL_CG;
        mmio::write(mmio::APB_SOC_CL_BYPASS, byp);
        byp |= mmio::CL_STATE;
        mmio::write(mmio::APB_SOC_CL_BYPASS, byp);
        mmio::write(mmio::APB_SOC_CL_ISOLATE, 0);
        byp &= !mmio::CL_RST;
        mmio::write(mmio::APB_SOC_CL_BYPASS, byp);
        byp &= !mmio::CL_CG;
        mmio::write(mmio::APB_SOC_CL_BYPASS, byp);
        mmio::write(mmio::CL_ICACHE_CTRL, 0xFFFF_FFFF);
        let boot = core::ptr::addr_of!(__vectors) as u32;
        for i in 0..MAX_CORES {
            mmio::write(mmio::CL_CTRL_BOOTADDR + 4 * i, boot);
        }
        mmio::write(mmio::CL_CTRL_FETCH_EN, 0xFF);
    }
    for _ in 0..100_000 {
        if READY.iter().all(|r| r.get() != 0) {
            return Some(());
        }
        spin(16);
    }
    None
}

struct Offload<R, F> {
    f: Option<F>,
    r: Option<R>,
}

unsafe extern "C" fn offload_entry<R, F>(arg: usize)
where
    F: for<'a> FnOnce(&mut BareCtrl<'a>) -> R,
{
    // SAFETY: `arg` is the `Offload` on the FC's stack in `run`, which waits for `JOB_DONE` (set
    // after this returns) before touching or freeing it.
    let job = unsafe { &mut *(arg as *mut Offload<R, F>) };
    if let Some(f) = job.f.take() {
        job.r = Some(f(&mut BareCtrl { _p: PhantomData }));
    }
}

impl Cluster for BareCluster {
    type Ctrl<'a> = BareCtrl<'a>;
    type L1 = BareL1;

    fn l1(&self) -> &BareL1 {
        &self.l1
    }

    fn max_cores(&self) -> usize {
        MAX_CORES
    }

    fn run<R, F>(&self, f: F) -> Result<R, ClusterError>
    where
        R: Send,
        F: for<'a> FnOnce(&mut BareCtrl<'a>) -> R + Send,
    {
        if JOB_STATE.get() != 0 {
            return Err(ClusterError::Busy);
        }
        let mut job: Offload<R, F> = Offload {
            f: Some(f),
            r: None,
        };
        JOB_FN.set(offload_entry::<R, F> as *const () as usize);
        JOB_ARG.set(&raw mut job as usize);
        compiler_fence(Ordering::SeqCst);
        JOB_STATE.set(JOB_POSTED);
        while JOB_STATE.get() != JOB_DONE {
            spin(64);
        }
        compiler_fence(Ordering::SeqCst);
        JOB_STATE.set(0);
        job.r.ok_or(ClusterError::Offload)
    }
}

/// Cluster core 0 inside an offload.
pub struct BareCtrl<'a> {
    _p: PhantomData<&'a mut *mut ()>,
}

/// A forked core.
pub struct BareTeam {
    id: usize,
    cores: usize,
}

impl Team for BareTeam {
    fn core_id(&self) -> usize {
        self.id
    }
    fn cores(&self) -> usize {
        self.cores
    }
    #[inline(always)]
    fn barrier(&self) {
        barrier_wait(1)
    }
}

struct ForkCtx<'a, T: ?Sized, P, F> {
    shared: &'a T,
    slots: *mut P,
    cores: usize,
    f: &'a F,
}

unsafe extern "C" fn fork_entry<T, P, F>(arg: usize, core: usize)
where
    T: Sync + ?Sized,
    P: Send,
    F: Fn(&BareTeam, &T, &mut P) + Sync,
{
    // SAFETY: `arg` is the `ForkCtx` on core 0's stack in `fork_each`, which returns only after the
    // closing barrier, i.e. after every core left this function; it is only read.
    let ctx = unsafe { &*(arg as *const ForkCtx<'_, T, P, F>) };
    // SAFETY: each core of the fork runs this once with its own `core < ctx.cores <=
    // per_core.len()` (checked in `fork_each`), so slot `core` has exactly one user.
    let slot = unsafe { &mut *ctx.slots.add(core) };
    (ctx.f)(
        &BareTeam {
            id: core,
            cores: ctx.cores,
        },
        ctx.shared,
        slot,
    );
}

impl Controller for BareCtrl<'_> {
    type Team = BareTeam;
    type DmaRaw = BareDma;

    fn max_cores(&self) -> usize {
        MAX_CORES
    }

    fn dma(&mut self) -> Dma<BareDma> {
        Dma::new(BareDma { _p: PhantomData })
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
        F: Fn(&BareTeam, &T, &mut P) + Sync,
    {
        if cores == 0 || cores > MAX_CORES {
            return Err(ForkError::Cores);
        }
        if per_core.len() < cores {
            return Err(ForkError::Slots);
        }
        let ctx = ForkCtx {
            shared,
            slots: per_core.as_mut_ptr(),
            cores,
            f: &f,
        };
        FORK_FN.set(fork_entry::<T, P, F> as *const () as usize);
        FORK_ARG.set(&raw const ctx as usize);
        FORK_CORES.set(cores);
        // No core is in barrier 1 between forks: set it to this team.
        barrier_setup(1, (1u32 << cores) - 1);
        barrier_wait(0); // release cores 1..8
        // SAFETY: we are core 0; `ctx` lives until the closing barrier.
        unsafe { fork_entry::<T, P, F>(&raw const ctx as usize, 0) };
        barrier_wait(0); // every core has left `fork_entry`
        Ok(())
    }
}

/// The cluster DMA (mchan v6) through the calling core's demux.
pub struct BareDma {
    _p: PhantomData<*mut ()>,
}

// SAFETY: the handle carries no state; transfer ids are global to the DMA.
unsafe impl Send for BareDma {}

/// A bare DMA command record: the transfer id while in flight.
#[derive(Debug, Default)]
pub struct BareCmd {
    tid: Option<u32>,
}

/// mchan's direction bit of a command word (gap_sdk `mchan_v6.h`: set for L2 -> L1).
#[inline(always)]
fn mchan_dir(dir: Dir) -> u32 {
    match dir {
        Dir::ExtToLoc => mmio::DMA_EXT2LOC,
        Dir::LocToExt => 0,
    }
}

// SAFETY: one mchan command moves exactly `len` bytes between `loc` (checked to be L1) and
// `ext` (a 2-D one `rows` lines of `row_len` bytes, `stride` apart at `ext`); `wait` polls the
// id's status bit, then frees the id.
unsafe impl DmaRaw for BareDma {
    type Cmd = BareCmd;

    fn new_cmd() -> BareCmd {
        BareCmd::default()
    }

    fn max_len(&self) -> usize {
        mmio::DMA_MAX_LEN
    }

    #[inline(always)]
    fn is_local(&self, addr: usize, len: usize) -> bool {
        addr >= mmio::L1_BASE
            && addr
                .checked_add(len)
                .is_some_and(|e| e <= mmio::L1_BASE + mmio::L1_SIZE)
    }

    #[inline(always)]
    unsafe fn start(
        &mut self,
        dir: Dir,
        ext: *mut u8,
        loc: *mut u8,
        len: usize,
        cmd: &mut BareCmd,
    ) {
        let ty = mchan_dir(dir);
        compiler_fence(Ordering::SeqCst);
        // SAFETY: the demux command queue of this core: read allocates an id, then the command
        // word, L1 address and L2 address are pushed. The caller guarantees the ranges.
        let tid = unsafe {
            let tid = mmio::read(mmio::MCHAN_CMD);
            mmio::write(mmio::MCHAN_CMD, len as u32 | ty | mmio::DMA_INCR);
            mmio::write(mmio::MCHAN_CMD, loc as u32);
            mmio::write(mmio::MCHAN_CMD, ext as u32);
            tid
        };
        cmd.tid = Some(tid);
    }

    fn has_2d(&self) -> bool {
        true
    }

    #[inline(always)]
    unsafe fn start_2d(
        &mut self,
        dir: Dir,
        ext: *mut u8,
        loc: *mut u8,
        row_len: usize,
        rows: usize,
        stride: usize,
        cmd: &mut BareCmd,
    ) {
        let ty = mchan_dir(dir);
        compiler_fence(Ordering::SeqCst);
        // SAFETY: as in `start`, with the 2-D word (gap_sdk `mchan_v6.h`:
        // `plp_dma_cmd_push_2d`: stride in bits 31:16, line length in 15:0) after the addresses.
        let tid = unsafe {
            let tid = mmio::read(mmio::MCHAN_CMD);
            mmio::write(
                mmio::MCHAN_CMD,
                (rows * row_len) as u32 | ty | mmio::DMA_INCR | mmio::DMA_2D,
            );
            mmio::write(mmio::MCHAN_CMD, loc as u32);
            mmio::write(mmio::MCHAN_CMD, ext as u32);
            mmio::write(mmio::MCHAN_CMD, (stride as u32) << 16 | row_len as u32);
            tid
        };
        cmd.tid = Some(tid);
    }

    #[inline(always)]
    unsafe fn wait(&mut self, cmd: &mut BareCmd) {
        if let Some(tid) = cmd.tid.take() {
            let bit = 1u32 << (tid & 0x1F);
            // SAFETY: status register of the DMA; writing the bit frees the transfer id.
            unsafe {
                while mmio::read(mmio::MCHAN_STATUS) & bit != 0 {}
                mmio::write(mmio::MCHAN_STATUS, bit);
            }
            compiler_fence(Ordering::SeqCst);
        }
    }
}

/// A static arena, used from one core at a time (the FC, or cluster core 0 while the FC waits in
/// [`Cluster::run`]).
struct StaticArena(UnsafeCell<Option<Arena>>);
// SAFETY: see the type's docs; `alloc` / `dealloc` refuse to run on cores 1..8.
unsafe impl Sync for StaticArena {}

static L1_ARENA: StaticArena = StaticArena(UnsafeCell::new(None));
static L2_ARENA: StaticArena = StaticArena(UnsafeCell::new(None));

impl StaticArena {
    fn with<R>(&self, init: impl FnOnce() -> Arena, f: impl FnOnce(&mut Arena) -> R) -> Option<R> {
        if !(mmio::is_fc() || mmio::core_id() == 0) {
            return None;
        }
        // SAFETY: only the FC or cluster core 0 get here, never at the same time (see above).
        let a = unsafe { &mut *self.0.get() };
        Some(f(a.get_or_insert_with(init)))
    }
}

fn l1_arena() -> Arena {
    unsafe extern "C" {
        static __l1_heap_start: u8;
    }
    let start = core::ptr::addr_of!(__l1_heap_start) as usize;
    Arena::new(start, mmio::L1_BASE + mmio::L1_SIZE - start)
}

fn l2_arena() -> Arena {
    unsafe extern "C" {
        static __l2_heap_start: u8;
    }
    let start = core::ptr::addr_of!(__l2_heap_start) as usize;
    Arena::new(start, mmio::L2_BASE + mmio::L2_SIZE - start)
}

/// L1 heap: the part of the cluster's TCDM after the cluster stacks. Allocation and freeing work
/// on the FC and on cluster core 0 only (elsewhere `alloc` returns `None` and `dealloc` leaks).
pub struct BareL1 {
    _p: PhantomData<()>,
}

// SAFETY: the arena hands out disjoint aligned ranges of the L1 heap (linker script), each once
// until freed with the same size.
unsafe impl RawAlloc for BareL1 {
    fn alloc(&self, layout: Layout) -> Option<NonNull<u8>> {
        let addr = L1_ARENA.with(l1_arena, |a| a.alloc(layout.size(), layout.align()).ok())??;
        NonNull::new(addr as *mut u8)
    }
    unsafe fn dealloc(&self, ptr: NonNull<u8>, layout: Layout) {
        L1_ARENA.with(l1_arena, |a| a.free(ptr.as_ptr() as usize, layout.size()));
    }
}

/// L2 heap: L2 after the program's sections and the FC stack.
#[derive(Clone, Copy, Debug, Default)]
pub struct BareL2;

// SAFETY: as for `BareL1`, over the L2 heap.
unsafe impl RawAlloc for BareL2 {
    fn alloc(&self, layout: Layout) -> Option<NonNull<u8>> {
        let addr = L2_ARENA.with(l2_arena, |a| a.alloc(layout.size(), layout.align()).ok())??;
        NonNull::new(addr as *mut u8)
    }
    unsafe fn dealloc(&self, ptr: NonNull<u8>, layout: Layout) {
        L2_ARENA.with(l2_arena, |a| a.free(ptr.as_ptr() as usize, layout.size()));
    }
}
