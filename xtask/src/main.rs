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
//! * `gvsoc-bench [--quick] [filters]` — the cycle-level sweep on the GAP8 GVSOC model (`gvsoc.rs`):
//!   writes `target/bench/gvsoc.csv` and prints a summary; then the JPEG rows over the frame set
//!   (`gvsoc_jpeg.rs`, `target/bench/gvsoc-jpeg.csv`).
//! * `bench-report [--csv PATH]` — PNG plots and `target/bench/report.md` from the CSVs (`report.rs`).
mod gvsoc;
mod gvsoc_jpeg;
mod gvsoc_jpegls;
mod padding_bench;
mod pulp;
mod qemu;
mod report;

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
    /// Cycle-level benchmark sweep on the GAP8 GVSOC model; writes target/bench/gvsoc.csv.
    GvsocBench(GvsocBenchArgs),
    /// Length-hiding padding on the frame set: overhead and size entropy per setting (printed).
    BenchPadding,
    /// PNG plots and target/bench/report.md from the benchmark CSVs.
    BenchReport {
        /// The GVSOC CSV (default target/bench/gvsoc.csv).
        #[arg(long)]
        csv: Option<std::path::PathBuf>,
        /// Output directory (default target/bench).
        #[arg(long)]
        out: Option<std::path::PathBuf>,
    },
}

#[derive(clap::Args)]
struct GvsocBenchArgs {
    /// The subset that finishes in under two minutes.
    #[arg(long)]
    quick: bool,
    /// Only kernels whose `kernel/variant` contains this (e.g. `chacha20/pulp`).
    #[arg(long)]
    kernel: Option<String>,
    /// Only these core counts (comma-separated).
    #[arg(long, value_delimiter = ',')]
    cores: Vec<u32>,
    /// Only these payload sizes in bytes (comma-separated).
    #[arg(long, value_delimiter = ',')]
    bytes: Vec<u32>,
    /// Only these L1 buffer sizes in bytes (comma-separated).
    #[arg(long, value_delimiter = ',')]
    buffer: Vec<u32>,
    /// Only these modes: dma, fixed, nodma (comma-separated).
    #[arg(long, value_delimiter = ',')]
    mode: Vec<String>,
    /// Measure without the warm-up call.
    #[arg(long)]
    cold: bool,
    /// Run every point N times; the CSV keeps the median run (the spread is printed).
    #[arg(long, default_value_t = 1)]
    repeat: usize,
    /// GVSOC trace: `--trace REGEX FILE` (e.g. `--trace insn /tmp/t.log`); keep FILE outside the repository.
    #[arg(long, num_args = 2, value_names = ["REGEX", "FILE"])]
    trace: Vec<String>,
    /// CSV to write (default target/bench/gvsoc.csv; gvsoc-quick.csv with --quick, gvsoc-adhoc.csv when filtered).
    #[arg(long)]
    csv: Option<std::path::PathBuf>,
    /// JPEG rows: only these qualities (comma-separated; default 50,75,90).
    #[arg(long, value_delimiter = ',')]
    quality: Vec<u32>,
    /// JPEG rows: measure every point in this many code layouts (GVSOC_HOT_PAD 0, 128, ...) and keep the worst (0: all 8, or 1 with --quick / --trace).
    #[arg(long, default_value_t = 0)]
    layouts: usize,
    /// JPEG and JPEG-LS rows: only these pictures of the frame set (comma-separated names, e.g. camera,grass).
    #[arg(long, value_delimiter = ',')]
    pictures: Vec<String>,
    /// JPEG-LS rows: six made-up stress pictures instead of the frame set (long runs across lines, escape codes, noise, extremes): the assembly's rare paths checked on the model.
    #[arg(long)]
    stress: bool,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let r = match cli.cmd {
        Cmd::QemuTest { filter } => qemu::test(filter.as_deref()),
        Cmd::BenchQemu { filter } => qemu::bench(filter.as_deref()),
        Cmd::PulpDisasm => pulp::run(),
        Cmd::GvsocBench(a) => gvsoc::bench(&gvsoc::Options {
            quick: a.quick,
            kernel: a.kernel,
            cores: a.cores,
            bytes: a.bytes,
            buffer: a.buffer,
            mode: a.mode,
            cold: a.cold,
            repeat: a.repeat,
            trace: (a.trace.len() == 2).then(|| (a.trace[0].clone(), a.trace[1].clone().into())),
            csv: a.csv,
            quality: a.quality,
            layouts: a.layouts,
            pictures: a.pictures,
            stress: a.stress,
        }),
        Cmd::BenchReport { csv, out } => report::run(csv, out),
        Cmd::BenchPadding => padding_bench::run(),
    };
    match r {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("xtask: {e}");
            ExitCode::FAILURE
        }
    }
}
