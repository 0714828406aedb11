//! The small set of types and traits a parallel kernel needs from the GAP8 cluster, with three
//! backends that run the same code: the GAP SDK (`pmsis`), no SDK at all (`bare`, GAP8 / GVSOC by
//! MMIO) and the host (`host`, threads as cores).
//!
//! The traits follow embedded-hal's style: small, one concern each, errors as plain enums.
//!
//! | module | what |
//! |---|---|
//! | [`cluster`] | [`Cluster`] (an open cluster, seen from the fabric controller), [`Controller`] (cluster core 0: fork, DMA handle), [`Team`] (a forked core: id, count, barrier) |
//! | [`mem`] | [`RawAlloc`] (L1 / L2 allocators), [`Buf`] (an aligned allocation that frees exactly what it allocated), [`Arena`] (bounded first-fit allocator used by the host and bare backends) |
//! | [`dma`] | [`DmaRaw`] (a backend's transfer engine), [`Dma`] and [`dma::Scope`] (transfers L2 ↔ L1 whose buffers stay borrowed until the transfer is complete) |
//! | [`host`] (feature `host`) | threads as cores (a persistent pool), 64 KiB L1 arena that fails like the chip, a DMA whose copies land only at `wait` |
//! | [`pmsis`] (feature `pmsis`) | FFI to the GAP SDK (GAP8, FreeRTOS port): `#[repr(C)]` layouts checked against gap_sdk's headers, cluster open/close, team fork, cluster DMA |
//! | [`bare`] (feature `bare`) | no SDK: cluster power-up and boot, event-unit barrier, mchan DMA, PULP performance counters, stdout / exit on GVSOC |
//!
//! # Safety model
//! `unsafe` lives only at the hardware / FFI edge (the backends) and in three safe abstractions
//! built on top of it, each block with a `// SAFETY:` comment:
//! - [`Controller::fork_each`] hands slot `i` of a `&mut [P]` to core `i` only (core ids are
//!   distinct inside one fork) and returns after every core has finished;
//! - [`Buf`] frees with the exact pointer and layout it allocated with;
//! - a [`dma::Scope`] borrows both buffers of every transfer for the whole scope and waits for all
//!   transfers started in it before returning (also when unwinding), so `mem::forget` of a transfer
//!   handle cannot end a borrow while the DMA still touches the memory.
#![cfg_attr(not(feature = "std"), no_std)]
#![deny(unsafe_op_in_unsafe_fn)]
#![warn(missing_docs)]

pub mod cluster;
pub mod dma;
pub mod mem;

#[cfg(feature = "host")]
pub mod host;

#[cfg(feature = "pmsis")]
pub mod pmsis;

#[cfg(feature = "bare")]
pub mod bare;

pub use cluster::{Cluster, ClusterError, Controller, ForkError, MAX_CORES, Team};
pub use dma::{Dir, Dma, DmaError, DmaRaw};
pub use mem::{AllocError, Arena, Buf, RawAlloc};
