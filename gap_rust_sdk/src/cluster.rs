//! The cluster: an open cluster ([`Cluster`], used from the fabric controller), its controller core
//! ([`Controller`], cluster core 0, which forks teams and drives the DMA) and a forked core ([`Team`]).
//!
//! ```text
//!  FC:           cluster.run(|ctrl| { ... })            one offload per call (pmsis: a cluster task)
//!  core 0:         ctrl.fork_each(n, &shared, &mut slots, |team, shared, slot| { ... })
//!  cores 0..n:       team.core_id(), team.barrier()    every core gets its own `&mut slot`
//! ```
use crate::dma::{Dma, DmaRaw};
use crate::mem::RawAlloc;

/// Cores of the GAP8 cluster.
pub const MAX_CORES: usize = 8;

/// A core inside a fork: its id, the team size and the team barrier.
pub trait Team {
    /// This core's index in the team, `0..self.cores()`; distinct for every core of one fork.
    fn core_id(&self) -> usize;
    /// Number of cores in the team.
    fn cores(&self) -> usize;
    /// Waits until every core of the team has reached the barrier. Every core of the team must call
    /// it the same number of times (otherwise the team deadlocks; on the host a panicking core
    /// poisons the barrier so the others panic instead of hanging).
    fn barrier(&self);
}

/// Why a fork did not run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ForkError {
    /// The core count is 0 or larger than the cluster has.
    Cores,
    /// `per_core` has fewer slots than the core count.
    Slots,
    /// A core panicked (host backend; on the chip a panic stops the program).
    Panicked,
}

impl core::fmt::Display for ForkError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(match self {
            ForkError::Cores => "core count out of range",
            ForkError::Slots => "fewer per-core slots than cores",
            ForkError::Panicked => "a cluster core panicked",
        })
    }
}

/// Why an offload to the cluster did not run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ClusterError {
    /// The SDK refused the cluster task (pmsis) or the cluster is not powered.
    Offload,
    /// The cluster is already running an offload (host: `run` re-entered from inside `run`).
    Busy,
}

impl core::fmt::Display for ClusterError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(match self {
            ClusterError::Offload => "cluster task could not be run",
            ClusterError::Busy => "cluster already busy",
        })
    }
}

/// Cluster core 0 while it runs an offloaded function: forks teams, hands out DMA handles.
pub trait Controller {
    /// What a forked core sees.
    type Team: Team;
    /// The cluster DMA engine of this backend.
    type DmaRaw: DmaRaw + Send;

    /// Cores the cluster has (8 on GAP8).
    fn max_cores(&self) -> usize;

    /// A handle on the cluster DMA (L2 ↔ L1). Several handles may exist; each has its own
    /// command records, but the engine's transfer ids are one pool for the cluster: handles
    /// used at once on the cores of a fork take their share
    /// ([`crate::dma::CLUSTER_DMA_IDS`], [`crate::dma::slots_per_handle`]).
    fn dma(&mut self) -> Dma<Self::DmaRaw>;

    /// Runs `f` on cores `0..cores` (core 0 is the calling core) and returns when all have finished.
    /// Core `i` gets `&mut per_core[i]`: per-core results and per-core mutable state without locks.
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
        F: Fn(&Self::Team, &T, &mut P) + Sync;

    /// Runs `f` on cores `0..cores` with a shared `&T` and returns when all have finished.
    fn fork<T, F>(&mut self, cores: usize, shared: &T, f: F) -> Result<(), ForkError>
    where
        T: Sync + ?Sized,
        F: Fn(&Self::Team, &T) + Sync,
    {
        let mut slots = [(); MAX_CORES];
        self.fork_each(cores, shared, &mut slots, |team, shared, _| f(team, shared))
    }
}

/// An open cluster, seen from the fabric controller (or, on the host, from the calling thread).
pub trait Cluster {
    /// Cluster core 0's context while it runs an offload.
    type Ctrl<'a>: Controller
    where
        Self: 'a;
    /// The cluster's L1 (TCDM) allocator.
    type L1: RawAlloc;

    /// The L1 allocator. Allocations borrow the cluster, so they cannot outlive it (on the chip L1
    /// loses its content when the cluster powers down).
    fn l1(&self) -> &Self::L1;

    /// Cores the cluster has (8 on GAP8).
    fn max_cores(&self) -> usize;

    /// Runs `f` on cluster core 0 and waits for its result.
    fn run<R, F>(&self, f: F) -> Result<R, ClusterError>
    where
        R: Send,
        F: for<'a> FnOnce(&mut Self::Ctrl<'a>) -> R + Send;
}
