//! Bare-metal GAP8 programs for the GVSOC model, on gap_rust_sdk's `bare` backend.
//!
//! | program | what |
//! |---|---|
//! | `gvsoc_hello` | powers the cluster, forks 8 cores, each prints its id; barrier and DMA smoke test |
//! | `gvsoc_engine_check` | `make gvsoc-check`: the cluster engine over 128 KiB in L2 on 1, 2, 4, 8 cores, output digest checked against the host's, cycles from the PULP counters |
//! | `gvsoc_bench` | `make gvsoc-bench`: runs a list of configurations (kernel, mode, cores, L1 buffer, payload) that `cargo xtask gvsoc-bench` patches into the ELF, each output checked against a host digest and guard bytes |
//!
//! Build: `cargo build -p gvsoc --target riscv32imc-unknown-none-elf --profile rv32 [--features pulp]`;
//! run: `gvsoc/run.sh <program>` with the GAP SDK environment loaded (see `mk/gvsoc.mk`).
#![no_std]

include!("common.rs");
include!(concat!(env!("OUT_DIR"), "/expected.rs"));
