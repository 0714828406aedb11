//! C shims for the GAP SDK's `static inline` pmsis functions.
//!
//! Rust cannot call a C `static inline` function: it has no symbol. `csrc/shims.c` wraps each one
//! the pmsis backend of `gap_rust_sdk` needs in an exported function (`gap_rust_sdk_w_*`), and
//! repeats gap_rust_sdk's layout checks with `_Static_assert` against the real headers.
//!
//! | shim | SDK function (GAP8 FreeRTOS port) |
//! |---|---|
//! | `gap_rust_sdk_w_cl_team_fork` | `pi_cl_team_fork` |
//! | `gap_rust_sdk_w_cl_team_barrier` | `pi_cl_team_barrier` |
//! | `gap_rust_sdk_w_cl_team_nb_cores` | `pi_cl_team_nb_cores` |
//! | `gap_rust_sdk_w_core_id`, `gap_rust_sdk_w_cluster_id` | `pi_core_id`, `pi_cluster_id` |
//! | `gap_rust_sdk_w_cl_dma_cmd`, `_cl_dma_cmd_2d`, `_cl_dma_cmd_wait`, `_cl_dma_flush` | `pi_cl_dma_cmd`, `pi_cl_dma_cmd_2d`, `pi_cl_dma_cmd_wait`, `pi_cl_dma_flush` |
//! | `gap_rust_sdk_w_cluster_task`, `_cluster_task_stacks` | `pi_cluster_task`, `pi_cluster_task_stacks` |
//!
//! The build script compiles the shims with the `cc` crate when `GAP_SDK_HOME` points at a GAP SDK
//! and the target is 32-bit RISC-V (compiler: `riscv64-unknown-elf-gcc -march=rv32imc
//! -misa-spec=2.2 -mabi=ilp32` unless `CC_riscv32imc_unknown_none_elf` says otherwise). Without the
//! SDK it says so in one `cargo:warning` line and builds nothing: the Rust side still compiles, and
//! a program that calls the shims then fails to link.
//!
//! The Rust declarations of the shims live next to the struct layouts in `gap_rust_sdk::pmsis::ffi`.
#![no_std]

/// True when the build script compiled and linked the shims (the GAP SDK was found).
pub const SHIMS_BUILT: bool = cfg!(gap_rust_sdk_w_shims);
