//! pmsis backend: the GAP SDK's cluster API on GAP8 (FreeRTOS port), through FFI.
//!
//! | trait | pmsis |
//! |---|---|
//! | [`Cluster`] | [`PmsisCluster`]: `pi_cluster_conf_init` + `pi_open_from_conf` + `pi_cluster_open`; `Drop` = `pi_cluster_close` |
//! | [`Cluster::run`] | a `pi_cluster_task` sent with `pi_cluster_send_task_to_cl` (blocks the FC until done) |
//! | [`Controller::fork_each`] | `pi_cl_team_fork` (C shim) with a monomorphised trampoline |
//! | [`Team::barrier`] | `pi_cl_team_barrier` (C shim: the event unit's hardware barrier) |
//! | L1 / L2 | `pi_cl_l1_malloc[_align]` / `pi_cl_l1_free`, `pi_l2_malloc[_align]` / `pi_l2_free` |
//! | [`DmaRaw`] | `pi_cl_dma_cmd` / `pi_cl_dma_cmd_2d` / `pi_cl_dma_cmd_wait` (C shims), one `pi_cl_dma_cmd_t` per transfer |
//!
//! The C shims come from `gap_rust_sdk_w`, built against the SDK headers when `GAP_SDK_HOME` is
//! set. Layouts: see [`ffi`].
pub mod ffi;

use crate::cluster::{Cluster, ClusterError, Controller, ForkError, MAX_CORES, Team};
use crate::dma::{Dir, Dma, DmaRaw};
use crate::mem::RawAlloc;
use core::alloc::Layout;
use core::ffi::c_void;
use core::marker::PhantomData;
use core::ptr::NonNull;
use ffi::*;

/// GAP8 cluster L1 (TCDM) as seen from everywhere: 64 KiB at 0x1000_0000.
pub const L1_BASE: usize = 0x1000_0000;
/// Size of the GAP8 cluster L1.
pub const L1_SIZE: usize = 64 * 1024;

/// Why the cluster could not be opened.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OpenError {
    /// No L2 for the device structures.
    OutOfMemory,
    /// `pi_cluster_open` failed.
    Open,
}

/// Stack sizes of a cluster task (bytes; 0 = the SDK's default).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PmsisConfig {
    /// Stack of the cluster controller (`pi_cluster_conf.cc_stack_size`).
    pub cc_stack_size: u32,
    /// Stack of core 0 while it runs an offload (`pi_cluster_task.stack_size`).
    pub master_stack: u32,
    /// Stack of each of cores 1..8 (`pi_cluster_task.slave_stack_size`).
    pub slave_stack: u32,
}

impl Default for PmsisConfig {
    fn default() -> Self {
        PmsisConfig {
            cc_stack_size: 0,
            master_stack: 4096,
            slave_stack: 2048,
        }
    }
}

/// The device structures; they must stay at one address while the cluster is open, so they live
/// in an L2 allocation owned by [`PmsisCluster`].
#[repr(C)]
struct State {
    dev: pi_device,
    conf: pi_cluster_conf,
}

/// An open cluster. Not `Send`/`Sync`: the SDK's cluster device is driven from one FC task.
pub struct PmsisCluster {
    state: NonNull<State>,
    l1: PmsisL1,
    cfg: PmsisConfig,
    _not_send: PhantomData<*mut ()>,
}

impl PmsisCluster {
    /// Powers up and opens cluster 0.
    pub fn open(cfg: PmsisConfig) -> Result<PmsisCluster, OpenError> {
        let size = core::mem::size_of::<State>() as i32;
        // SAFETY: plain allocation call.
        let p = unsafe { pi_l2_malloc(size) } as *mut State;
        let state = NonNull::new(p).ok_or(OpenError::OutOfMemory)?;
        // SAFETY: `p` is a fresh L2 block of `size_of::<State>()` bytes (pmsis' allocator aligns to
        // 8); zeroing it makes every field valid (all-zero is valid for these integer / pointer
        // fields); then the SDK fills the configuration and opens the device, which keeps pointers
        // to `dev` and `conf`: both stay put until `Drop` closes the device.
        unsafe {
            core::ptr::write_bytes(p, 0, 1);
            pi_cluster_conf_init(&raw mut (*p).conf);
            (*p).conf.id = 0;
            if cfg.cc_stack_size != 0 {
                (*p).conf.cc_stack_size = cfg.cc_stack_size;
            }
            pi_open_from_conf(&raw mut (*p).dev, (&raw mut (*p).conf).cast::<c_void>());
            if pi_cluster_open(&raw mut (*p).dev) != 0 {
                pi_l2_free(p.cast(), size);
                return Err(OpenError::Open);
            }
        }
        // SAFETY: `state` is open and outlives `l1` (dropped before the device is closed).
        let dev = unsafe { &raw mut (*p).dev };
        Ok(PmsisCluster {
            state,
            l1: PmsisL1 { dev },
            cfg,
            _not_send: PhantomData,
        })
    }

    fn dev(&self) -> *mut pi_device {
        // SAFETY: `state` is valid while `self` lives.
        unsafe { &raw mut (*self.state.as_ptr()).dev }
    }
}

impl Drop for PmsisCluster {
    fn drop(&mut self) {
        // SAFETY: the device was opened in `open`; every L1 `Buf` borrowed `self` and is gone, and
        // `run` is blocking, so nothing runs on the cluster any more. The L2 block is freed with
        // the size it was allocated with.
        unsafe {
            pi_cluster_close(self.dev());
            pi_l2_free(
                self.state.as_ptr().cast(),
                core::mem::size_of::<State>() as i32,
            );
        }
    }
}

/// The job an offload runs on cluster core 0.
struct Offload<R, F> {
    f: Option<F>,
    r: Option<R>,
}

unsafe extern "C" fn offload_entry<R, F>(arg: *mut c_void)
where
    F: for<'a> FnOnce(&mut PmsisCtrl<'a>) -> R,
{
    // SAFETY: `arg` is the `Offload` that `run` keeps alive on its stack until
    // `pi_cluster_send_task_to_cl` returns, which is after this function returned; only this core
    // touches it meanwhile (the FC is blocked).
    let job = unsafe { &mut *(arg as *mut Offload<R, F>) };
    if let Some(f) = job.f.take() {
        let mut ctrl = PmsisCtrl { _p: PhantomData };
        job.r = Some(f(&mut ctrl));
    }
}

impl Cluster for PmsisCluster {
    type Ctrl<'a> = PmsisCtrl<'a>;
    type L1 = PmsisL1;

    fn l1(&self) -> &PmsisL1 {
        &self.l1
    }

    fn max_cores(&self) -> usize {
        MAX_CORES
    }

    fn run<R, F>(&self, f: F) -> Result<R, ClusterError>
    where
        R: Send,
        F: for<'a> FnOnce(&mut PmsisCtrl<'a>) -> R + Send,
    {
        let mut job: Offload<R, F> = Offload {
            f: Some(f),
            r: None,
        };
        // SAFETY: all-zero is a valid `pi_cluster_task` (null pointers, zero sizes); the shim then
        // sets entry and argument as `pi_cluster_task()` does. `job` and `task` live on this stack
        // until `pi_cluster_send_task_to_cl` returns, which blocks until the cluster finished the
        // task; `F: Send` / `R: Send` because they cross from the FC to cluster core 0 and back.
        unsafe {
            let mut task: pi_cluster_task = core::mem::zeroed();
            gap_rust_sdk_w_cluster_task(
                &raw mut task,
                offload_entry::<R, F>,
                (&raw mut job).cast::<c_void>(),
            );
            task.stack_size = self.cfg.master_stack;
            task.slave_stack_size = self.cfg.slave_stack;
            task.nb_cores = MAX_CORES as i32;
            if pi_cluster_send_task_to_cl(self.dev(), &raw mut task) != 0 {
                return Err(ClusterError::Offload);
            }
        }
        job.r.ok_or(ClusterError::Offload)
    }
}

/// Cluster core 0 inside an offload.
pub struct PmsisCtrl<'a> {
    _p: PhantomData<&'a mut *mut ()>,
}

/// A forked core.
pub struct PmsisTeam {
    id: usize,
    cores: usize,
}

impl Team for PmsisTeam {
    fn core_id(&self) -> usize {
        self.id
    }
    fn cores(&self) -> usize {
        self.cores
    }
    fn barrier(&self) {
        // SAFETY: called from a core of the current team (a `PmsisTeam` exists only inside a fork).
        unsafe { gap_rust_sdk_w_cl_team_barrier() }
    }
}

struct ForkCtx<'a, T: ?Sized, P, F> {
    shared: &'a T,
    slots: *mut P,
    cores: usize,
    f: &'a F,
}

unsafe extern "C" fn fork_entry<T, P, F>(arg: *mut c_void)
where
    T: Sync + ?Sized,
    P: Send,
    F: Fn(&PmsisTeam, &T, &mut P) + Sync,
{
    // SAFETY: `arg` is the `ForkCtx` on the stack of `fork_each`, which returns only after
    // `pi_cl_team_fork` has joined every core; the context is only read.
    let ctx = unsafe { &*(arg as *const ForkCtx<'_, T, P, F>) };
    // SAFETY: reading the core id has no side effect.
    let id = unsafe { gap_rust_sdk_w_core_id() } as usize;
    if id >= ctx.cores {
        return;
    }
    // SAFETY: the team mask is `(1 << cores) - 1`, so the cores running this are exactly ids
    // `0..cores`, each once; slot `id` is therefore borrowed by one core only, and
    // `cores <= per_core.len()` was checked.
    let slot = unsafe { &mut *ctx.slots.add(id) };
    (ctx.f)(
        &PmsisTeam {
            id,
            cores: ctx.cores,
        },
        ctx.shared,
        slot,
    );
}

impl Controller for PmsisCtrl<'_> {
    type Team = PmsisTeam;
    type DmaRaw = PmsisDma;

    fn max_cores(&self) -> usize {
        MAX_CORES
    }

    fn dma(&mut self) -> Dma<PmsisDma> {
        Dma::new(PmsisDma { _p: PhantomData })
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
        F: Fn(&PmsisTeam, &T, &mut P) + Sync,
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
        // SAFETY: we are cluster core 0 inside an offload (a `PmsisCtrl` exists only there);
        // `pi_cl_team_fork` runs the entry on cores `0..cores` and returns after all finished, so
        // `ctx` (and what it borrows) outlives every use.
        unsafe {
            gap_rust_sdk_w_cl_team_fork(
                cores as i32,
                fork_entry::<T, P, F>,
                (&raw const ctx).cast_mut().cast::<c_void>(),
            )
        };
        Ok(())
    }
}

/// L1 allocator of an open cluster (`pi_cl_l1_malloc`).
pub struct PmsisL1 {
    dev: *mut pi_device,
}

// SAFETY: pmsis returns blocks of at least `size` bytes from the cluster's L1 heap, aligned to 8
// (its chunk size) or to `align` with `pi_cl_l1_malloc_align`; we check the alignment anyway. The
// block is freed with the same size (pmsis' free needs it).
unsafe impl RawAlloc for PmsisL1 {
    fn alloc(&self, layout: Layout) -> Option<NonNull<u8>> {
        let size = i32::try_from(layout.size()).ok()?;
        // SAFETY: plain allocation calls on an open device.
        let p = unsafe {
            if layout.align() <= 8 {
                pi_cl_l1_malloc(self.dev, size as u32)
            } else {
                pi_cl_l1_malloc_align(self.dev, size, layout.align() as i32)
            }
        } as *mut u8;
        let p = NonNull::new(p)?;
        if (p.as_ptr() as usize) % layout.align() != 0 {
            // SAFETY: just allocated with this size.
            unsafe { pi_cl_l1_free(self.dev, p.as_ptr().cast(), size) };
            return None;
        }
        Some(p)
    }

    unsafe fn dealloc(&self, ptr: NonNull<u8>, layout: Layout) {
        // SAFETY: caller contract: allocated by `alloc` with this layout (so the size fits i32).
        unsafe { pi_cl_l1_free(self.dev, ptr.as_ptr().cast(), layout.size() as i32) }
    }
}

/// L2 allocator (`pi_l2_malloc`).
#[derive(Clone, Copy, Debug, Default)]
pub struct PmsisL2;

// SAFETY: as for `PmsisL1`, on the L2 heap.
unsafe impl RawAlloc for PmsisL2 {
    fn alloc(&self, layout: Layout) -> Option<NonNull<u8>> {
        let size = i32::try_from(layout.size()).ok()?;
        // SAFETY: plain allocation calls.
        let p = unsafe {
            if layout.align() <= 8 {
                pi_l2_malloc(size)
            } else {
                pi_l2_malloc_align(size, layout.align() as i32)
            }
        } as *mut u8;
        let p = NonNull::new(p)?;
        if (p.as_ptr() as usize) % layout.align() != 0 {
            // SAFETY: just allocated with this size.
            unsafe { pi_l2_free(p.as_ptr().cast(), size) };
            return None;
        }
        Some(p)
    }

    unsafe fn dealloc(&self, ptr: NonNull<u8>, layout: Layout) {
        // SAFETY: caller contract.
        unsafe { pi_l2_free(ptr.as_ptr().cast(), layout.size() as i32) }
    }
}

/// The cluster DMA through pmsis (usable from any cluster core; each has its own command queue).
pub struct PmsisDma {
    _p: PhantomData<*mut ()>,
}

// SAFETY: the handle carries no state; the SDK's per-core DMA queue is used by whichever cluster
// core calls it.
unsafe impl Send for PmsisDma {}

/// The SDK's direction value of a transfer.
fn pi_dir(dir: Dir) -> u32 {
    match dir {
        Dir::ExtToLoc => PI_CL_DMA_DIR_EXT2LOC,
        Dir::LocToExt => PI_CL_DMA_DIR_LOC2EXT,
    }
}

// SAFETY: `pi_cl_dma_cmd` programs one 1D mchan transfer of `len < 32 KiB` bytes between `ext`
// and `loc` (longer ones are refused by `max_len`), `pi_cl_dma_cmd_2d` one 2-D transfer of as
// many bytes (lines `stride < 65536` bytes apart at `ext`; the SDK issues one 2-D command for a
// stride below 32 KiB and splits longer ones into 1D commands on its DMA FIFO, waited for through
// its event), and `pi_cl_dma_cmd_wait` waits for either.
unsafe impl DmaRaw for PmsisDma {
    type Cmd = pi_cl_dma_cmd_t;

    fn new_cmd() -> pi_cl_dma_cmd_t {
        pi_cl_dma_cmd_t {
            tid: 0,
            cmd: 0,
            size: 0,
            stride: 0,
            length: 0,
            loc: 0,
            ext: 0,
            next: core::ptr::null_mut(),
        }
    }

    fn max_len(&self) -> usize {
        // Below the SDK's 1D limit (1 << 15): longer transfers take its interrupt-driven FIFO path.
        (1 << 15) - 1
    }

    fn is_local(&self, addr: usize, len: usize) -> bool {
        addr >= L1_BASE
            && addr
                .checked_add(len)
                .is_some_and(|e| e <= L1_BASE + L1_SIZE)
    }

    unsafe fn start(
        &mut self,
        dir: Dir,
        ext: *mut u8,
        loc: *mut u8,
        len: usize,
        cmd: &mut pi_cl_dma_cmd_t,
    ) {
        let d = pi_dir(dir);
        // SAFETY: caller contract of `DmaRaw::start` (valid ranges, pinned record, len in range).
        unsafe { gap_rust_sdk_w_cl_dma_cmd(ext as u32, loc as u32, len as u32, d, cmd) }
    }

    unsafe fn wait(&mut self, cmd: &mut pi_cl_dma_cmd_t) {
        // SAFETY: caller contract: `cmd` was started and not waited on.
        unsafe { gap_rust_sdk_w_cl_dma_cmd_wait(cmd) }
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
        cmd: &mut pi_cl_dma_cmd_t,
    ) {
        let d = pi_dir(dir);
        // SAFETY: caller contract of `DmaRaw::start_2d` (valid ranges, pinned record, `rows *
        // row_len <= max_len`, `row_len <= stride < 65536`).
        unsafe {
            gap_rust_sdk_w_cl_dma_cmd_2d(
                ext as u32,
                loc as u32,
                (rows * row_len) as u32,
                stride as u32,
                row_len as u32,
                d,
                cmd,
            )
        }
    }
}
