//! `cargo xtask <command>`: host-side tasks around the bare-metal rv32 programs.
//!
//! * `qemu-test [FILTER]` — builds every program of `rv32_qemu` (`src/bin/*.rs`) for
//!   `riscv32imc-unknown-none-elf` and runs each on `qemu-system-riscv32 -machine virt -bios none`.
//!   Pass/fail comes from QEMU's exit status; a failing program's whole log is printed.
//!   Programs whose name starts with `bench_` are left to `bench-qemu`.
//! * `bench-qemu [FILTER]` — runs the `bench_*` programs under `-icount shift=0` (one count per
//!   retired instruction, deterministic), parses their `BENCH` lines, prints a table and writes
//!   `target/bench/qemu.csv` (`kernel,variant,bytes,instructions,instructions_per_byte`).
//! * `pulp-disasm` — builds the PULP variant of `gap_rust_cipher_s` for riscv32imc and checks its
//!   disassembly for the PULP words (see `pulp.rs`).
mod pulp;
mod qemu;

use clap::{Parser, Subcommand};
use std::process::ExitCode;

#[derive(Parser)]
#[command(about = "gapstream host-side tasks")]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Build and run the rv32 test programs on QEMU.
    QemuTest {
        /// Only programs whose name contains this.
        filter: Option<String>,
    },
    /// Run the rv32 instruction-count benchmarks on QEMU and write target/bench/qemu.csv.
    BenchQemu {
        /// Only programs whose name contains this.
        filter: Option<String>,
    },
    /// Build the PULP ChaCha20 kernel for riscv32imc and check its disassembly for the PULP words.
    PulpDisasm,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let r = match cli.cmd {
        Cmd::QemuTest { filter } => qemu::test(filter.as_deref()),
        Cmd::BenchQemu { filter } => qemu::bench(filter.as_deref()),
        Cmd::PulpDisasm => pulp::run(),
    };
    match r {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("xtask: {e}");
            ExitCode::FAILURE
        }
    }
}
