//! `cargo xtask gvsoc-bench`: the cycle-level benchmark sweep on the GAP8 GVSOC model. "The paper"
//! below: F. Barchi et al., "RUST-Encoded Stream Ciphers on a RISC-V Parallel Ultra-Low-Power
//! Processor", PARMA-DITAM 2023.
//!
//! One ELF (`gvsoc/src/bin/gvsoc_bench.rs`) holds every kernel; this runner writes a list of runs
//! (kernel, mode, cores, L1 buffer, payload, expected output digest) into its
//! `GVSOC_BENCH_CONFIG` symbol, boots it on GVSOC (`gapy … run`), streams its output (a progress
//! line per run), checks every run's verdict and digest, writes
//! `target/bench/gvsoc.csv` (`kernel,variant,cores,buffer,bytes,cycles,instructions,cycles_per_byte`)
//! and prints a summary (cycles per byte per kernel and core count, speed-ups, DMA against no DMA,
//! the camera-frame budget, and the project's targets).
//!
//! The expected digests are computed here with RustCrypto (`chacha20`, `aes` + `ctr`) over the same
//! payload pattern the device writes (`gvsoc/src/common.rs`, shared by `include!`).
use cipher::{KeyIvInit, StreamCipher, StreamCipherSeek};
use std::collections::HashMap;
use std::fmt::Write as _;
use std::io::{BufRead, BufReader, IsTerminal, Write as _};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};
use std::{env, fs};

#[allow(dead_code)]
mod common {
    include!(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../gvsoc/src/common.rs"
    ));
}
use common::*;
pub use common::{BENCH_KERNELS, BENCH_MODES};

const TARGET: &str = crate::qemu::TARGET;
/// One GVSOC launch may not take longer than this.
const LAUNCH_TIMEOUT: Duration = Duration::from_secs(30 * 60);

/// The camera frame of the paper: 324 × 244 pixels, 8 bits each.
pub const FRAME_BYTES: u32 = 324 * 244;
/// Payload sizes of the sweep.
pub const SWEEP_BYTES: [u32; 10] = [
    1,
    64,
    1024,
    4 * 1024,
    8 * 1024,
    16 * 1024,
    24 * 1024,
    32 * 1024,
    64 * 1024,
    128 * 1024,
];
/// Core counts of the sweep.
pub const SWEEP_CORES: [u32; 4] = [1, 2, 4, 8];
/// L1 buffer sizes of the sweep.
pub const SWEEP_BUFFERS: [u32; 2] = [4 * 1024, 8 * 1024];
/// Cluster clocks of the frame budget, MHz.
pub const CLOCKS_MHZ: [u32; 3] = [50, 100, 150];

/// Options of `cargo xtask gvsoc-bench`.
#[derive(Debug, Default, Clone)]
pub struct Options {
    /// The subset that finishes in under two minutes.
    pub quick: bool,
    /// Only kernels whose `kernel/variant` contains this.
    pub kernel: Option<String>,
    /// Only these core counts / payloads / buffers / modes (empty: all of the plan).
    pub cores: Vec<u32>,
    pub bytes: Vec<u32>,
    pub buffer: Vec<u32>,
    pub mode: Vec<String>,
    /// No warm-up call before each measured run.
    pub cold: bool,
    /// Every point this many times (consecutive runs in one launch); the CSV keeps each point's
    /// median run and the summary prints the spread.
    pub repeat: usize,
    /// GVSOC trace: `(regex, file)`; the simulator's whole output goes to the file.
    pub trace: Option<(String, PathBuf)>,
    /// Where the CSV goes (default `target/bench/gvsoc.csv`; `gvsoc-quick.csv` with `--quick`,
    /// `gvsoc-adhoc.csv` when a filter is given). The codecs' rows go next to it, named by
    /// [`codec_csv`] (`out.csv`: `out-jpeg.csv`, `out-jpegls.csv`).
    pub csv: Option<PathBuf>,
    /// JPEG rows (`gvsoc_jpeg.rs`): only these qualities, code layouts measured per point (the
    /// worst is kept). Codec rows (JPEG and JPEG-LS): only these pictures of the frame set.
    pub quality: Vec<u32>,
    pub layouts: usize,
    pub pictures: Vec<String>,
    /// JPEG-LS rows: the stress pictures (`gvsoc_jpegls::stress_pictures`) instead of the frame
    /// set.
    pub stress: bool,
}

impl Options {
    fn filtered(&self) -> bool {
        self.kernel.is_some()
            || !self.cores.is_empty()
            || !self.bytes.is_empty()
            || !self.buffer.is_empty()
            || !self.mode.is_empty()
            || self.cold
            || self.trace.is_some()
            || !self.pictures.is_empty()
            || self.stress
    }
}

/// One point of the plan.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Point {
    pub kernel: usize,
    pub mode: usize,
    pub cores: u32,
    pub buffer: u32,
    pub bytes: u32,
}

pub(crate) const MODE_DMA: usize = 0;
const MODE_FIXED: usize = 1;
const MODE_NODMA: usize = 2;

fn kernel_index(kernel: &str, variant: &str) -> usize {
    BENCH_KERNELS
        .iter()
        .position(|&(k, v)| k == kernel && v == variant)
        .expect("kernel in BENCH_KERNELS")
}

fn is_chacha(kernel: usize) -> bool {
    BENCH_KERNELS[kernel].0.starts_with("chacha20")
}

fn is_aead(kernel: usize) -> bool {
    matches!(BENCH_KERNELS[kernel].0, "chacha20poly1305" | "aes128gcm")
}

fn is_gcm(kernel: usize) -> bool {
    BENCH_KERNELS[kernel].0 == "aes128gcm"
}

/// Points a kernel has: the RustCrypto AEAD anchor runs on one core only (the crate on cluster
/// core 0), in the engine's default mode.
fn exists(p: &Point) -> bool {
    if is_jpegls_kernel(p.kernel) {
        return false;
    }
    let anchor = matches!(
        BENCH_KERNELS[p.kernel],
        ("chacha20poly1305", "rustcrypto") | ("aes128gcm", "rustcrypto")
    );
    !(anchor && (p.cores != 1 || p.mode != MODE_DMA))
}

/// The full sweep: every kernel × cores × payload (+ the frame) × buffer with the engine's DMA
/// rounds; the paper's fixed rounds for the PULP kernels (to show what adapting the rounds to the
/// payload gains); no DMA (cores on L2 directly) for every kernel.
pub fn full_plan() -> Vec<Point> {
    let mut v = Vec::new();
    let sizes: Vec<u32> = SWEEP_BYTES.iter().copied().chain([FRAME_BYTES]).collect();
    for kernel in 0..BENCH_KERNELS.len() {
        for &buffer in &SWEEP_BUFFERS {
            for &cores in &SWEEP_CORES {
                for &bytes in &sizes {
                    v.push(Point {
                        kernel,
                        mode: MODE_DMA,
                        cores,
                        buffer,
                        bytes,
                    });
                }
            }
        }
    }
    for (k, var) in [("chacha20", "pulp"), ("aes128ctr", "pulp")] {
        let kernel = kernel_index(k, var);
        for &buffer in &SWEEP_BUFFERS {
            for &cores in &SWEEP_CORES {
                for &bytes in &sizes {
                    v.push(Point {
                        kernel,
                        mode: MODE_FIXED,
                        cores,
                        buffer,
                        bytes,
                    });
                }
            }
        }
    }
    for kernel in 0..BENCH_KERNELS.len() {
        for &cores in &SWEEP_CORES {
            for &bytes in &sizes {
                v.push(Point {
                    kernel,
                    mode: MODE_NODMA,
                    cores,
                    buffer: 0,
                    bytes,
                });
            }
        }
    }
    v.retain(exists);
    v
}

/// The quick subset: every kernel at 16 and 128 KiB on 1 and 8 cores, the PULP ChaCha20 sweep over
/// payloads on 1 and 8 cores (adaptive and fixed rounds), the frame, and DMA against no DMA (PULP
/// ChaCha20, and PULP AES-128-CTR, whose engine default on several cores is no DMA: so that every
/// target of the summary is evaluated on the mode it is met in).
pub fn quick_plan() -> Vec<Point> {
    let mut v = Vec::new();
    let b = 8 * 1024;
    for kernel in 0..BENCH_KERNELS.len() {
        for cores in [1, 8] {
            for bytes in [16 * 1024, 128 * 1024] {
                v.push(Point {
                    kernel,
                    mode: MODE_DMA,
                    cores,
                    buffer: b,
                    bytes,
                });
            }
        }
    }
    let pulp = kernel_index("chacha20", "pulp");
    for mode in [MODE_DMA, MODE_FIXED] {
        for cores in [1, 8] {
            for bytes in [1, 1024, 4 * 1024, 16 * 1024, 32 * 1024, FRAME_BYTES] {
                v.push(Point {
                    kernel: pulp,
                    mode,
                    cores,
                    buffer: b,
                    bytes,
                });
            }
        }
    }
    for cores in [2, 4] {
        v.push(Point {
            kernel: pulp,
            mode: MODE_DMA,
            cores,
            buffer: b,
            bytes: 128 * 1024,
        });
    }
    for kernel in [
        pulp,
        kernel_index("aes128ctr", "pulp"),
        kernel_index("aes128gcm", "pulp"),
    ] {
        for cores in [1, 8] {
            v.push(Point {
                kernel,
                mode: MODE_NODMA,
                cores,
                buffer: 0,
                bytes: 128 * 1024,
            });
        }
    }
    // The AEAD: the frame on 8 cores (128 KiB on 1 and 8 cores are in the loop above).
    v.push(Point {
        kernel: kernel_index("chacha20poly1305", "pulp"),
        mode: MODE_DMA,
        cores: 8,
        buffer: b,
        bytes: FRAME_BYTES,
    });
    v.retain(exists);
    let mut seen = std::collections::HashSet::new();
    v.retain(|p| seen.insert(*p));
    v
}

fn apply_filters(plan: Vec<Point>, o: &Options) -> Vec<Point> {
    // `--kernel chacha20/pulp` means exactly that kernel; a partial name matches every kernel
    // containing it.
    let exact = o
        .kernel
        .as_ref()
        .is_some_and(|f| BENCH_KERNELS.iter().any(|(k, v)| format!("{k}/{v}") == *f));
    plan.into_iter()
        .filter(|p| {
            let (k, var) = BENCH_KERNELS[p.kernel];
            let name = format!("{k}/{var}");
            o.kernel.as_ref().is_none_or(|f| {
                if exact {
                    name == *f
                } else {
                    name.contains(f.as_str())
                }
            }) && (o.cores.is_empty() || o.cores.contains(&p.cores))
                && (o.bytes.is_empty() || o.bytes.contains(&p.bytes))
                && (o.buffer.is_empty() || o.buffer.contains(&p.buffer) || p.mode == MODE_NODMA)
                && (o.mode.is_empty() || o.mode.iter().any(|m| m == BENCH_MODES[p.mode]))
        })
        .collect()
}

/// Keystream offset of a run: ChaCha20 from block 1 (RFC 8439's AEAD payload), AES-CTR from block 1
/// (GCM's payload after `J0`).
fn offset_of(kernel: usize) -> u32 {
    if is_chacha(kernel) { 64 } else { 16 }
}

/// Digest of the expected output of an AEAD run (ciphertext and tag), computed with RustCrypto
/// `chacha20poly1305`.
fn expected_aead_digest(bytes: u32) -> u64 {
    use chacha20poly1305::aead::{AeadInOut, KeyInit};
    let mut data: Vec<u8> = (0..bytes as usize).map(pattern).collect();
    let r = chacha20poly1305::ChaCha20Poly1305::new(&CHECK_KEY.into());
    let tag = r
        .encrypt_inout_detached(&CHECK_NONCE.into(), &BENCH_AAD, data.as_mut_slice().into())
        .expect("payload within the AEAD's limit");
    aead_digest(&data, &tag.into())
}

/// Digest of the expected output of a run, computed with RustCrypto.
fn expected_digest(chacha: bool, bytes: u32, offset: u32) -> u64 {
    let mut data: Vec<u8> = (0..bytes as usize).map(pattern).collect();
    if chacha {
        let mut c = chacha20::ChaCha20::new(&CHECK_KEY.into(), &CHECK_NONCE.into());
        c.seek(offset);
        c.apply_keystream(&mut data);
    } else {
        let mut c = ctr::Ctr128BE::<aes::Aes128>::new(&BENCH_AES_KEY.into(), &BENCH_AES_IV.into());
        c.seek(offset);
        c.apply_keystream(&mut data);
    }
    digest(&data)
}

/// Digest of the expected output of an AES-128-GCM run (ciphertext and tag), computed with
/// RustCrypto `aes-gcm`.
fn expected_gcm_digest(bytes: u32) -> u64 {
    use aes_gcm::aead::{AeadInOut, KeyInit};
    let mut data: Vec<u8> = (0..bytes as usize).map(pattern).collect();
    let nonce: [u8; 12] = bench_gcm_j0()[..12].try_into().unwrap();
    let tag = aes_gcm::Aes128Gcm::new(&BENCH_AES_KEY.into())
        .encrypt_inout_detached(&nonce.into(), &BENCH_AAD, data.as_mut_slice().into())
        .expect("within GCM's length limit");
    aead_digest(&data, &tag.into())
}

/// The `BenchConfig` bytes for `runs` (at most `BENCH_MAX_RUNS`).
pub(crate) fn config_bytes(runs: &[(Point, u64)], cold: bool) -> Vec<u8> {
    assert!(runs.len() <= BENCH_MAX_RUNS);
    let mut w: Vec<u32> = vec![
        BENCH_MAGIC,
        BENCH_VERSION,
        runs.len() as u32,
        if cold { BENCH_FLAG_COLD } else { 0 },
    ];
    for (p, d) in runs {
        w.extend([
            p.kernel as u32,
            p.mode as u32,
            p.cores,
            p.buffer.max(1),
            p.bytes,
            offset_of(p.kernel),
            *d as u32,
            (*d >> 32) as u32,
        ]);
    }
    w.resize(BENCH_CONFIG_BYTES / 4, 0);
    w.iter().flat_map(|x| x.to_le_bytes()).collect()
}

fn u16_at(b: &[u8], at: usize) -> Result<u16, String> {
    b.get(at..at + 2)
        .map(|s| u16::from_le_bytes([s[0], s[1]]))
        .ok_or_else(|| "ELF truncated".to_string())
}

fn u32_at(b: &[u8], at: usize) -> Result<u32, String> {
    b.get(at..at + 4)
        .map(|s| u32::from_le_bytes([s[0], s[1], s[2], s[3]]))
        .ok_or_else(|| "ELF truncated".to_string())
}

/// Overwrites the initial contents of symbol `name` (a static in a loaded section) in a 32-bit
/// little-endian ELF with `bytes`.
pub fn patch_symbol(elf: &mut [u8], name: &str, bytes: &[u8]) -> Result<(), String> {
    if elf.get(..6) != Some(&[0x7f, b'E', b'L', b'F', 1, 1][..]) {
        return Err("not a 32-bit little-endian ELF".into());
    }
    let shoff = u32_at(elf, 0x20)? as usize;
    let shentsize = u16_at(elf, 0x2E)? as usize;
    let shnum = u16_at(elf, 0x30)? as usize;
    let sh = |i: usize, field: usize| u32_at(elf, shoff + i * shentsize + field);
    let symtab = (0..shnum)
        .find(|&i| sh(i, 4) == Ok(2))
        .ok_or("ELF without a symbol table")?;
    let strtab = sh(symtab, 24)? as usize;
    let (sym_off, sym_size) = (sh(symtab, 16)? as usize, sh(symtab, 20)? as usize);
    let str_off = sh(strtab, 16)? as usize;
    for k in 0..sym_size / 16 {
        let s = sym_off + 16 * k;
        let name_at = str_off + u32_at(elf, s)? as usize;
        let end = elf[name_at..]
            .iter()
            .position(|&c| c == 0)
            .ok_or("bad string table")?;
        if &elf[name_at..name_at + end] != name.as_bytes() {
            continue;
        }
        let (value, size) = (u32_at(elf, s + 4)? as usize, u32_at(elf, s + 8)? as usize);
        let shndx = u16_at(elf, s + 14)? as usize;
        if size < bytes.len() || shndx == 0 || shndx >= shnum {
            return Err(format!(
                "symbol {name}: size {size} or section {shndx} does not fit {} bytes",
                bytes.len()
            ));
        }
        if sh(shndx, 4)? != 1 {
            return Err(format!("symbol {name} is not in a section with contents"));
        }
        let at = sh(shndx, 16)? as usize + (value - sh(shndx, 12)? as usize);
        elf.get_mut(at..at + bytes.len())
            .ok_or("symbol outside the file")?
            .copy_from_slice(bytes);
        return Ok(());
    }
    Err(format!("symbol {name} not found"))
}

/// A measured run (one CSV row).
#[derive(Clone, Debug, PartialEq)]
pub struct Row {
    pub kernel: String,
    /// Kernel variant, `+fixed` (paper's fixed rounds) or `+nodma` (no DMA) appended for those modes.
    pub variant: String,
    pub cores: u32,
    pub buffer: u32,
    pub bytes: u32,
    pub cycles: u64,
    pub instructions: u64,
}

impl Row {
    pub fn cpb(&self) -> f64 {
        self.cycles as f64 / self.bytes.max(1) as f64
    }
}

pub const CSV_HEADER: &str =
    "kernel,variant,cores,buffer,bytes,cycles,instructions,cycles_per_byte";

pub fn to_csv(rows: &[Row]) -> String {
    let mut s = format!("{CSV_HEADER}\n");
    for r in rows {
        let _ = writeln!(
            s,
            "{},{},{},{},{},{},{},{:.4}",
            r.kernel,
            r.variant,
            r.cores,
            r.buffer,
            r.bytes,
            r.cycles,
            r.instructions,
            r.cpb()
        );
    }
    s
}

pub fn parse_csv(text: &str) -> Result<Vec<Row>, String> {
    let mut lines = text.lines();
    let header = lines.next().ok_or("empty CSV")?;
    if header.trim() != CSV_HEADER {
        return Err(format!(
            "unexpected CSV header {header:?} (want {CSV_HEADER:?})"
        ));
    }
    let mut rows = Vec::new();
    for (n, line) in lines.enumerate().filter(|(_, l)| !l.trim().is_empty()) {
        let f: Vec<&str> = line.split(',').collect();
        let bad = || format!("CSV line {}: {line:?}", n + 2);
        if f.len() != 8 {
            return Err(bad());
        }
        let num = |i: usize| f[i].trim().parse::<u64>().map_err(|_| bad());
        rows.push(Row {
            kernel: f[0].to_string(),
            variant: f[1].to_string(),
            cores: num(2)? as u32,
            buffer: num(3)? as u32,
            bytes: num(4)? as u32,
            cycles: num(5)?,
            instructions: num(6)?,
        });
    }
    Ok(rows)
}

/// A parsed `bench i=…` line of the device.
#[derive(Debug)]
pub(crate) struct DeviceLine {
    pub(crate) index: usize,
    pub(crate) cycles: u64,
    pub(crate) instructions: u64,
    pub(crate) digest: u64,
    pub(crate) ok: bool,
    pub(crate) verdict: String,
    /// Stack high-water marks so far, `(used, size)`: cluster core 0, the most used of 1..7.
    stacks: Option<[(u32, u32); 2]>,
    /// The FC's stack high-water mark so far, `(used, size)`.
    fc_stack: Option<(u32, u32)>,
}

/// The largest stack high-water marks a sweep saw, `(used, size)`: cluster core 0, cores 1..7,
/// the FC.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StackMarks(pub [(u32, u32); 3]);

impl StackMarks {
    fn add(&mut self, d: &DeviceLine) {
        let seen = d.stacks.map(|[a, b]| [Some(a), Some(b), d.fc_stack]);
        for (m, s) in self
            .0
            .iter_mut()
            .zip(seen.unwrap_or([None, None, d.fc_stack]))
        {
            if let Some((u, z)) = s {
                *m = (m.0.max(u), z);
            }
        }
    }
}

pub(crate) fn parse_device_line(line: &str) -> Option<DeviceLine> {
    let rest = line.strip_prefix("bench i=")?;
    let field = |k: &str| {
        line.split_whitespace()
            .find_map(|kv| kv.strip_prefix(k).and_then(|v| v.strip_prefix('=')))
    };
    let index = rest.split_whitespace().next()?.parse().ok()?;
    let ok = line.trim_end().ends_with(" ok");
    let verdict = line
        .split_whitespace()
        .skip_while(|w| !w.starts_with("digest="))
        .skip(1)
        .collect::<Vec<_>>()
        .join(" ");
    let stack = |k: &str| {
        let (u, z) = field(k)?.split_once('/')?;
        Some((u.parse().ok()?, z.parse().ok()?))
    };
    Some(DeviceLine {
        index,
        cycles: field("cycles")?.parse().ok()?,
        instructions: field("instructions")?.parse().ok()?,
        digest: u64::from_str_radix(field("digest")?, 16).ok()?,
        ok,
        verdict,
        stacks: stack("stack0").zip(stack("stack")).map(|(a, b)| [a, b]),
        fc_stack: stack("fcstack"),
    })
}

pub(crate) fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

pub(crate) fn target_dir() -> PathBuf {
    env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| workspace_root().join("target"))
}

pub(crate) fn on_path(cmd: &str) -> bool {
    env::var_os("PATH").is_some_and(|p| env::split_paths(&p).any(|d| d.join(cmd).is_file()))
}

pub(crate) fn build_elf() -> Result<PathBuf, String> {
    let status = Command::new(env!("CARGO"))
        .current_dir(workspace_root())
        .args([
            "build",
            "--locked",
            "--quiet",
            "-p",
            "gvsoc",
            "--features",
            "pulp",
            "--bin",
            "gvsoc_bench",
        ])
        .args(["--target", TARGET, "--profile", "rv32"])
        .status()
        .map_err(|e| format!("cannot run cargo: {e}"))?;
    if !status.success() {
        return Err("building gvsoc_bench failed".into());
    }
    Ok(target_dir().join(TARGET).join("rv32").join("gvsoc_bench"))
}

struct Progress {
    total: usize,
    done: usize,
    start: Instant,
    tty: bool,
    last_line: Instant,
}

impl Progress {
    fn update(&mut self, p: &Point) {
        self.done += 1;
        let (k, v) = BENCH_KERNELS[p.kernel];
        let msg = format!(
            "[{:>4}/{}] {:>6.1}s  {k}/{v} {} {}c buf {} {} B",
            self.done,
            self.total,
            self.start.elapsed().as_secs_f64(),
            BENCH_MODES[p.mode],
            p.cores,
            p.buffer,
            p.bytes
        );
        if self.tty {
            eprint!("\r\x1b[2K{msg}");
            let _ = std::io::stderr().flush();
        } else if self.done == self.total || self.last_line.elapsed() > Duration::from_secs(10) {
            eprintln!("gvsoc-bench: {msg}");
            self.last_line = Instant::now();
        }
    }

    fn finish(&self) {
        if self.tty {
            eprintln!();
        }
    }
}

/// A line of the bench programs' own output (`bench ...`, `jpeg ...`).
fn is_device_line(line: &str) -> bool {
    line.starts_with("bench ") || line.starts_with("jpeg ")
}

/// Whether a line of GVSOC's output goes into a failed run's report: every line that is not the
/// program's (with a trace, only those without a `:`, which the trace's lines all have), and a
/// program line that reports a failure (`jpeg FAIL: ...`, which no run's parser takes: often
/// the only clue).
fn keep_for_report(line: &str, tracing: bool) -> bool {
    if is_device_line(line) {
        line.contains("FAIL")
    } else {
        !tracing || !line.contains(':')
    }
}

/// Boots `elf` on GVSOC, feeding every `bench` line to `on_line`; returns the exit status and the
/// other lines of the output (for error reports). With `trace`, the whole output goes to that file.
pub(crate) fn launch(
    elf: &Path,
    work: &Path,
    trace: Option<&(String, PathBuf)>,
    mut on_line: impl FnMut(&str),
) -> Result<(Option<i32>, Vec<String>), String> {
    let target = env::var("GAPY_TARGET").unwrap_or_else(|_| "ai_deck".into());
    let mut cmd = Command::new("stdbuf");
    cmd.args(["-oL", "-eL", "gapy"])
        .arg(format!("--target={target}"))
        .arg("--platform=gvsoc")
        .arg(format!("--work-dir={}", work.display()))
        .args(["run", "--image", "--flash", "--exec-prepare", "--exec"])
        .arg(format!("--binary={}", elf.display()));
    let mut trace_file = None;
    if let Some((re, file)) = trace {
        cmd.arg(format!("--trace={re}"));
        // e.g. GVSOC_TRACE_LEVEL=debug for the icache's refills and mchan's commands.
        if let Ok(level) = std::env::var("GVSOC_TRACE_LEVEL") {
            cmd.arg(format!("--trace-level={level}"));
        }
        trace_file = Some(
            fs::File::create(file).map_err(|e| format!("cannot create {}: {e}", file.display()))?,
        );
    }
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot start gapy: {e}"))?;
    let (tx, rx) = mpsc::channel::<String>();
    let out = child.stdout.take().unwrap();
    let err = child.stderr.take().unwrap();
    let tx2 = tx.clone();
    let t1 = std::thread::spawn(move || {
        for l in BufReader::new(out).split(b'\n').map_while(Result::ok) {
            if tx.send(String::from_utf8_lossy(&l).into_owned()).is_err() {
                break;
            }
        }
    });
    let t2 = std::thread::spawn(move || {
        for l in BufReader::new(err).split(b'\n').map_while(Result::ok) {
            if tx2.send(String::from_utf8_lossy(&l).into_owned()).is_err() {
                break;
            }
        }
    });
    let start = Instant::now();
    let mut other = Vec::new();
    let mut timed_out = false;
    loop {
        match rx.recv_timeout(Duration::from_millis(200)) {
            Ok(line) => {
                if let Some(f) = trace_file.as_mut() {
                    let _ = writeln!(f, "{line}");
                }
                if is_device_line(&line) {
                    on_line(&line);
                }
                if keep_for_report(&line, trace_file.is_some()) {
                    other.push(line);
                    if other.len() > 200 {
                        other.remove(0);
                    }
                }
            }
            Err(mpsc::RecvTimeoutError::Timeout) => {
                if start.elapsed() > LAUNCH_TIMEOUT {
                    let _ = child.kill();
                    timed_out = true;
                }
            }
            Err(mpsc::RecvTimeoutError::Disconnected) => break,
        }
    }
    let _ = t1.join();
    let _ = t2.join();
    let status = child.wait().map_err(|e| e.to_string())?;
    if timed_out {
        other.push(format!("(killed after {} s)", LAUNCH_TIMEOUT.as_secs()));
    }
    Ok((status.code(), other))
}

/// `cargo xtask gvsoc-bench`.
/// Where a codec's rows go when `--csv PATH` is given to a run that also writes other rows (the
/// ciphers', the other codec's): PATH with `-<codec>` before its extension, so that one run never
/// overwrites its own rows. A run of one codec alone writes PATH itself.
pub fn codec_csv(path: &std::path::Path, codec: &str) -> PathBuf {
    let stem = path
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    let name = match path.extension() {
        Some(e) => format!("{stem}-{codec}.{}", e.to_string_lossy()),
        None => format!("{stem}-{codec}"),
    };
    path.with_file_name(name)
}

pub fn bench(o: &Options) -> Result<(), String> {
    if !on_path("gapy") {
        println!(
            "gvsoc-bench: skipped: the GAP8 GVSOC simulator is not set up (run: make gvsoc-setup; or load a GAP SDK environment with gapy on PATH)"
        );
        return Ok(());
    }
    let jpeg = crate::gvsoc_jpeg::selected(o);
    let plan: Vec<Point> = apply_filters(if o.quick { quick_plan() } else { full_plan() }, o)
        .into_iter()
        .flat_map(|p| std::iter::repeat_n(p, o.repeat.max(1)))
        .collect();
    // The codecs' rows: sweeps of their own over the frame set (gvsoc_jpeg.rs, gvsoc_jpegls.rs).
    let jpegls = crate::gvsoc_jpegls::selected(o);
    if plan.is_empty() && !jpeg && !jpegls {
        return Err("no benchmark point matches the filters".into());
    }
    // The options each codec's sweep gets: its own CSV when the run writes several.
    let shared = !plan.is_empty() || (jpeg && jpegls);
    let for_codec = |codec: &str| Options {
        csv: o.csv.as_deref().map(|p| {
            if shared {
                codec_csv(p, codec)
            } else {
                p.to_path_buf()
            }
        }),
        ..o.clone()
    };
    let codecs = || -> Result<(), String> {
        if jpeg {
            crate::gvsoc_jpeg::bench(&for_codec("jpeg"))?;
        }
        if jpegls {
            crate::gvsoc_jpegls::bench(&for_codec("jpegls"))?;
        }
        Ok(())
    };
    if plan.is_empty() {
        return codecs();
    }
    let csv_path = o.csv.clone().unwrap_or_else(|| {
        // Only the full sweep writes gvsoc.csv (what `make bench-report` reads): a quick or a
        // filtered run does not overwrite it.
        target_dir().join("bench").join(if o.filtered() {
            "gvsoc-adhoc.csv"
        } else if o.quick {
            "gvsoc-quick.csv"
        } else {
            "gvsoc.csv"
        })
    });
    let elf = build_elf()?;
    let image = fs::read(&elf).map_err(|e| format!("cannot read {}: {e}", elf.display()))?;
    // Patched copies and the simulator's work directory live outside the repository.
    let scratch = env::temp_dir().join(format!("gvsoc-bench-{}", std::process::id()));
    fs::create_dir_all(&scratch).map_err(|e| e.to_string())?;
    let mut stacks = StackMarks::default();
    let result = sweep(o, &plan, &image, &scratch, &mut stacks);
    let _ = fs::remove_dir_all(&scratch);
    let rows = median_of_repeats(result?, o.repeat.max(1));
    if let Some(dir) = csv_path.parent() {
        fs::create_dir_all(dir).map_err(|e| e.to_string())?;
    }
    fs::write(&csv_path, to_csv(&rows))
        .map_err(|e| format!("cannot write {}: {e}", csv_path.display()))?;
    print!("{}", summary(&rows));
    let [(u0, z0), (u1, z1), (uf, zf)] = stacks.0;
    println!(
        "cluster stacks (high-water, stack paint): core 0 {u0} of {z0} B, cores 1-7 at most {u1} of {z1} B"
    );
    println!(
        "gvsoc-bench: {} runs verified, wrote {}",
        rows.len(),
        csv_path.display()
    );
    println!("FC stack (high-water, stack paint): {uf} of {zf} B");
    codecs()
}

fn sweep(
    o: &Options,
    plan: &[Point],
    image: &[u8],
    scratch: &Path,
    stacks: &mut StackMarks,
) -> Result<Vec<Row>, String> {
    let mut digests: HashMap<(bool, u32, u32, bool), u64> = HashMap::new();
    let runs: Vec<(Point, u64)> = plan
        .iter()
        .map(|p| {
            // (chacha, bytes, offset, aead)
            let key = (
                is_chacha(p.kernel),
                p.bytes,
                offset_of(p.kernel),
                is_aead(p.kernel),
            );
            let d = *digests.entry(key).or_insert_with(|| {
                if is_gcm(p.kernel) {
                    expected_gcm_digest(key.1)
                } else if key.3 {
                    expected_aead_digest(key.1)
                } else {
                    expected_digest(key.0, key.1, key.2)
                }
            });
            (*p, d)
        })
        .collect();
    let mut progress = Progress {
        total: runs.len(),
        done: 0,
        start: Instant::now(),
        tty: std::io::stderr().is_terminal(),
        last_line: Instant::now(),
    };
    let mut rows = Vec::with_capacity(runs.len());
    let mut failures = Vec::new();
    // Launches of at most BENCH_MAX_RUNS runs, grouped so that a failing launch loses little.
    for (b, batch) in runs.chunks(BENCH_MAX_RUNS.min(128)).enumerate() {
        let mut elf = image.to_vec();
        patch_symbol(&mut elf, BENCH_SYMBOL, &config_bytes(batch, o.cold))?;
        let path = scratch.join(format!("gvsoc_bench_{b}.elf"));
        fs::write(&path, &elf).map_err(|e| e.to_string())?;
        let mut got: Vec<Option<DeviceLine>> = (0..batch.len()).map(|_| None).collect();
        let (status, other) = launch(&path, &scratch.join("work"), o.trace.as_ref(), |line| {
            if let Some(d) = parse_device_line(line) {
                stacks.add(&d);
                let i = d.index;
                if i < batch.len() {
                    progress.update(&batch[i].0);
                    got[i] = Some(d);
                }
            }
        })?;
        let _ = fs::remove_file(&path);
        for (i, (p, want)) in batch.iter().enumerate() {
            let (k, v) = BENCH_KERNELS[p.kernel];
            let what = format!(
                "{k}/{v} {} {} cores buffer {} {} B",
                BENCH_MODES[p.mode], p.cores, p.buffer, p.bytes
            );
            match &got[i] {
                Some(d) if d.ok && d.digest == *want => rows.push(Row {
                    kernel: k.to_string(),
                    variant: match p.mode {
                        MODE_FIXED => format!("{v}+fixed"),
                        MODE_NODMA => format!("{v}+nodma"),
                        _ => v.to_string(),
                    },
                    cores: p.cores,
                    buffer: p.buffer,
                    bytes: p.bytes,
                    cycles: d.cycles,
                    instructions: d.instructions,
                }),
                Some(d) => failures.push(format!(
                    "{what}: {} (digest {:016x}, want {want:016x})",
                    d.verdict, d.digest
                )),
                None => failures.push(format!("{what}: no result (launch exit status {status:?})")),
            }
        }
        if status != Some(0) && failures.is_empty() {
            failures.push(format!("launch {b} ended with status {status:?}"));
        }
        if !failures.is_empty() {
            progress.finish();
            let tail: Vec<&String> = other.iter().rev().take(20).collect();
            let mut msg = format!(
                "{} run(s) failed:\n  {}",
                failures.len(),
                failures.join("\n  ")
            );
            let _ = write!(msg, "\nlast simulator output:");
            for l in tail.into_iter().rev() {
                let _ = write!(msg, "\n  {l}");
            }
            return Err(msg);
        }
    }
    progress.finish();
    Ok(rows)
}

/// With `n` consecutive runs per point: one row per point, the run with the median cycles (the
/// spread is printed).
fn median_of_repeats(rows: Vec<Row>, n: usize) -> Vec<Row> {
    if n <= 1 {
        return rows;
    }
    let mut out = Vec::new();
    for g in rows.chunks(n) {
        let mut v: Vec<&Row> = g.iter().collect();
        v.sort_by_key(|r| r.cycles);
        let m = v[v.len() / 2];
        println!(
            "gvsoc-bench: {}/{} {} cores buffer {} {} B: cB min {:.3} median {:.3} max {:.3} over {} runs",
            m.kernel,
            m.variant,
            m.cores,
            m.buffer,
            m.bytes,
            v[0].cpb(),
            m.cpb(),
            v[v.len() - 1].cpb(),
            v.len()
        );
        out.push(m.clone());
    }
    out
}

/// Finds the row of a point.
pub fn find<'a>(
    rows: &'a [Row],
    kernel: &str,
    variant: &str,
    cores: u32,
    buffer: u32,
    bytes: u32,
) -> Option<&'a Row> {
    rows.iter().find(|r| {
        r.kernel == kernel
            && r.variant == variant
            && r.cores == cores
            && r.buffer == buffer
            && r.bytes == bytes
    })
}

/// `(kernel, variant)` pairs present in `rows`, in sweep order.
pub fn series(rows: &[Row]) -> Vec<(String, String)> {
    let mut v: Vec<(String, String)> = Vec::new();
    for r in rows {
        if !v.iter().any(|(k, var)| *k == r.kernel && *var == r.variant) {
            v.push((r.kernel.clone(), r.variant.clone()));
        }
    }
    v
}

/// The project's targets, checked against the rows that exist: `(what, measured, limit, ok)`.
pub fn targets(rows: &[Row]) -> Vec<(String, String, bool)> {
    let mut t = Vec::new();
    let big = 128 * 1024;
    if let (Some(one), Some(eight)) = (
        find(rows, "chacha20", "pulp", 1, 8192, big),
        find(rows, "chacha20", "pulp", 8, 8192, big),
    ) {
        t.push((
            "PULP ChaCha20, 128 KiB in L2, 1 core <= 16.0 cB".into(),
            format!("{:.2} cB", one.cpb()),
            one.cpb() <= 16.0,
        ));
        t.push((
            "PULP ChaCha20, 128 KiB in L2, 8 cores <= 2.05 cB".into(),
            format!("{:.2} cB", eight.cpb()),
            eight.cpb() <= 2.05,
        ));
    }
    if let (Some(one), Some(eight)) = (
        find(rows, "chacha20", "pulp", 1, 8192, 16384),
        find(rows, "chacha20", "pulp", 8, 8192, 16384),
    ) {
        let s = one.cycles as f64 / eight.cycles as f64;
        t.push((
            "PULP ChaCha20, 16 KiB: 8 cores >= 7x 1 core".into(),
            format!("{s:.2}x"),
            s >= 7.0,
        ));
    }
    if let Some(f) = find(rows, "chacha20", "pulp", 8, 8192, FRAME_BYTES) {
        let ms = f.cycles as f64 / 150e3;
        t.push((
            "ChaCha20 frame (79,056 B) on 8 cores at 150 MHz <= 1.1 ms".into(),
            format!("{ms:.3} ms"),
            ms <= 1.1,
        ));
    }
    // The AEAD: the engine's fused pass (tag included, made in the cluster job).
    if let Some(r) = find(rows, "chacha20poly1305", "pulp", 1, 8192, big) {
        t.push((
            "ChaCha20-Poly1305 (fused), 128 KiB, 1 core <= 28 cB".into(),
            format!("{:.2} cB", r.cpb()),
            r.cpb() <= 28.0,
        ));
    }
    if let Some(r) = find(rows, "chacha20poly1305", "pulp", 8, 8192, big) {
        t.push((
            "ChaCha20-Poly1305 (fused), 128 KiB, 8 cores <= 3.6 cB".into(),
            format!("{:.2} cB", r.cpb()),
            r.cpb() <= 3.6,
        ));
    }
    if let Some(f) = find(rows, "chacha20poly1305", "pulp", 8, 8192, FRAME_BYTES) {
        t.push((
            "ChaCha20-Poly1305 frame (79,056 B + 36 B header, tag included) on 8 cores <= 300,000 cycles".into(),
            format!("{} cycles", f.cycles),
            f.cycles <= 300_000,
        ));
    }
    // The best constant-time AES-128-CTR among this crate's kernels, in any engine mode (DMA
    // rounds with 8 KiB buffers, the paper's fixed rounds, or no DMA, which is what
    // `ClusterEngine`'s `Transfer::Auto` picks for AES-128-CTR on several cores); the label
    // names the mode.
    let best = |cores: u32| {
        rows.iter()
            .filter(|r| r.kernel == "aes128ctr" && !r.variant.starts_with("rustcrypto"))
            .filter(|r| {
                r.cores == cores
                    && r.bytes == big
                    && (r.buffer == 8192 || (r.buffer == 0 && r.variant.ends_with("+nodma")))
            })
            .min_by(|a, b| a.cycles.cmp(&b.cycles))
    };
    if let Some(r) = best(1) {
        t.push((
            format!(
                "best constant-time AES-128-CTR ({}), 1 core <= 60 cB",
                r.variant
            ),
            format!("{:.2} cB", r.cpb()),
            r.cpb() <= 60.0,
        ));
    }
    if let Some(r) = best(8) {
        t.push((
            format!(
                "best constant-time AES-128-CTR ({}), 8 cores <= 8 cB",
                r.variant
            ),
            format!("{:.2} cB", r.cpb()),
            r.cpb() <= 8.0,
        ));
    }
    // AES-128-GCM with GHASH fused into the PULP AES-CTR pass, in the best engine mode.
    let gcm = rows
        .iter()
        .filter(|r| r.kernel == "aes128gcm" && r.variant.starts_with("pulp"))
        .filter(|r| {
            r.cores == 8
                && r.bytes == big
                && (r.buffer == 8192 || (r.buffer == 0 && r.variant.ends_with("+nodma")))
        })
        .min_by(|a, b| a.cycles.cmp(&b.cycles));
    if let Some(r) = gcm {
        t.push((
            format!(
                "AES-128-GCM ({}, tag included), 128 KiB, 8 cores <= 24 cB",
                r.variant
            ),
            format!("{:.2} cB", r.cpb()),
            r.cpb() <= 24.0,
        ));
    }
    t
}

/// The text summary printed after a sweep (also embedded in the report).
pub fn summary(rows: &[Row]) -> String {
    let mut s = String::new();
    let big = 128 * 1024;
    for buffer in SWEEP_BUFFERS {
        let _ = writeln!(
            s,
            "\ncycles per byte, 128 KiB in L2, L1 buffer {} KiB:",
            buffer / 1024
        );
        let _ = writeln!(
            s,
            "  {:<24} {:>8} {:>8} {:>8} {:>8} {:>9}",
            "kernel/variant", "1 core", "2 cores", "4 cores", "8 cores", "8c vs 1c"
        );
        for (k, v) in series(rows) {
            let b = if v.ends_with("+nodma") { 0 } else { buffer };
            let c: Vec<Option<&Row>> = SWEEP_CORES
                .iter()
                .map(|&n| find(rows, &k, &v, n, b, big))
                .collect();
            if c.iter().all(Option::is_none) {
                continue;
            }
            let cell = |r: &Option<&Row>| r.map_or("-".to_string(), |r| format!("{:.2}", r.cpb()));
            let sp = match (c[0], c[3]) {
                (Some(a), Some(b)) => format!("{:.2}x", a.cycles as f64 / b.cycles as f64),
                _ => "-".into(),
            };
            let _ = writeln!(
                s,
                "  {:<24} {:>8} {:>8} {:>8} {:>8} {:>9}",
                format!("{k}/{v}"),
                cell(&c[0]),
                cell(&c[1]),
                cell(&c[2]),
                cell(&c[3]),
                sp
            );
        }
    }
    // Speed-up of 8 cores over 1 against the payload.
    let sizes: Vec<u32> = SWEEP_BYTES.iter().copied().chain([FRAME_BYTES]).collect();
    let _ = writeln!(
        s,
        "\n8 cores vs 1 core against the payload (L1 buffer 8 KiB):"
    );
    let _ = write!(s, "  {:<24}", "kernel/variant");
    for b in &sizes {
        let _ = write!(s, " {:>7}", human(*b));
    }
    let _ = writeln!(s);
    for (k, v) in series(rows) {
        let b = if v.ends_with("+nodma") { 0 } else { 8192 };
        let cells: Vec<String> = sizes
            .iter()
            .map(
                |&n| match (find(rows, &k, &v, 1, b, n), find(rows, &k, &v, 8, b, n)) {
                    (Some(a), Some(e)) => format!("{:.2}", a.cycles as f64 / e.cycles as f64),
                    _ => "-".into(),
                },
            )
            .collect();
        if cells.iter().all(|c| c == "-") {
            continue;
        }
        let _ = write!(s, "  {:<24}", format!("{k}/{v}"));
        for c in cells {
            let _ = write!(s, " {c:>7}");
        }
        let _ = writeln!(s);
    }
    // Frame budget.
    let _ = writeln!(
        s,
        "\nframe budget: one 324x244 8-bit frame ({FRAME_BYTES} B), L1 buffer 8 KiB:"
    );
    let _ = writeln!(
        s,
        "  {:<24} {:>5} {:>10} {:>8} {:>9} {:>9} {:>9}",
        "kernel/variant", "cores", "cycles", "cB", "@50MHz", "@100MHz", "@150MHz"
    );
    for (k, v) in series(rows) {
        let b = if v.ends_with("+nodma") { 0 } else { 8192 };
        for cores in [1, 8] {
            if let Some(r) = find(rows, &k, &v, cores, b, FRAME_BYTES) {
                let ms: Vec<String> = CLOCKS_MHZ
                    .iter()
                    .map(|&m| format!("{:.3} ms", r.cycles as f64 / (m as f64 * 1e3)))
                    .collect();
                let _ = writeln!(
                    s,
                    "  {:<24} {:>5} {:>10} {:>8.2} {:>9} {:>9} {:>9}",
                    format!("{k}/{v}"),
                    cores,
                    r.cycles,
                    r.cpb(),
                    ms[0],
                    ms[1],
                    ms[2]
                );
            }
        }
    }
    let _ = writeln!(
        s,
        "  (paper, ChaCha20 on 8 cores: 3.7 / 2.0 / 1.2 ms at 50 / 100 / 150 MHz)"
    );
    let t = targets(rows);
    if !t.is_empty() {
        let _ = writeln!(s, "\ntargets:");
        for (what, got, ok) in t {
            let _ = writeln!(
                s,
                "  {} {what}: {got}",
                if ok { "met   " } else { "MISSED" }
            );
        }
    }
    s
}

/// `1 B`, `64 B`, `16K`, `77.2K`.
pub fn human(b: u32) -> String {
    if b < 1024 {
        format!("{b}B")
    } else if b % 1024 == 0 {
        format!("{}K", b / 1024)
    } else {
        format!("{:.1}K", b as f64 / 1024.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn config_layout_and_patch() {
        let runs = [(
            Point {
                kernel: 2,
                mode: 0,
                cores: 8,
                buffer: 8192,
                bytes: 1000,
            },
            0x1122_3344_5566_7788,
        )];
        let b = config_bytes(&runs, true);
        assert_eq!(b.len(), BENCH_CONFIG_BYTES);
        assert_eq!(
            &b[..16],
            &[0x47, 0x56, 0x42, 0x43, 1, 0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0]
        );
        assert_eq!(u32_at(&b, 16 + 4 * 4).unwrap(), 1000);
        assert_eq!(u32_at(&b, 16 + 6 * 4).unwrap(), 0x5566_7788);
        assert_eq!(u32_at(&b, 16 + 7 * 4).unwrap(), 0x1122_3344);
        // A minimal ELF: header, one PROGBITS section, a symbol table and its string table.
        let mut elf = vec![0u8; 0x400];
        elf[..6].copy_from_slice(&[0x7f, b'E', b'L', b'F', 1, 1]);
        let put =
            |e: &mut Vec<u8>, at: usize, v: u32| e[at..at + 4].copy_from_slice(&v.to_le_bytes());
        put(&mut elf, 0x20, 0x200);
        elf[0x2E] = 40;
        elf[0x30] = 4;
        let sec =
            |e: &mut Vec<u8>, i: usize, ty: u32, addr: u32, off: u32, size: u32, link: u32| {
                let b = 0x200 + 40 * i;
                put(e, b + 4, ty);
                put(e, b + 12, addr);
                put(e, b + 16, off);
                put(e, b + 20, size);
                put(e, b + 24, link);
            };
        sec(&mut elf, 1, 1, 0x1c00_1000, 0x100, 0x40, 0);
        sec(&mut elf, 2, 2, 0, 0x340, 32, 3);
        sec(&mut elf, 3, 3, 0, 0x380, 16, 0);
        elf[0x381..0x385].copy_from_slice(b"CONF");
        put(&mut elf, 0x350, 1);
        put(&mut elf, 0x354, 0x1c00_1010);
        put(&mut elf, 0x358, 8);
        elf[0x35E] = 1;
        patch_symbol(&mut elf, "CONF", &[1, 2, 3, 4, 5, 6, 7, 8]).unwrap();
        assert_eq!(&elf[0x110..0x118], &[1, 2, 3, 4, 5, 6, 7, 8]);
        assert!(patch_symbol(&mut elf, "CONF", &[0; 9]).is_err());
        assert!(patch_symbol(&mut elf, "NOPE", &[0; 1]).is_err());
    }

    #[test]
    fn codec_rows_go_next_to_the_given_csv() {
        use std::path::Path;
        assert_eq!(
            codec_csv(Path::new("out/run.csv"), "jpeg"),
            Path::new("out/run-jpeg.csv")
        );
        assert_eq!(
            codec_csv(Path::new("run"), "jpegls"),
            Path::new("run-jpegls")
        );
    }

    #[test]
    fn device_lines_and_csv_round_trip() {
        let l = "bench i=3 kernel=chacha20 variant=pulp mode=dma cores=8 buffer=8192 bytes=131072 cycles=268000 instructions=250000 rounds=16 digest=19dcb8dc651d76a5 ok";
        let d = parse_device_line(l).unwrap();
        assert_eq!(
            (d.index, d.cycles, d.instructions, d.digest, d.ok),
            (3, 268000, 250000, 0x19dc_b8dc_651d_76a5, true)
        );
        assert_eq!(d.stacks, None);
        let f = parse_device_line(&l.replace(" ok", " FAIL digest")).unwrap();
        assert!(!f.ok);
        assert_eq!(f.verdict, "FAIL digest");
        // Stack high-water marks, and the sweep's maximum of them.
        let s = l.replace(
            " digest=",
            " stack0=3600/8192 stack=1264/3072 fcstack=5000/8192 digest=",
        );
        let s = parse_device_line(&s.replace(" ok", " FAIL stack-near-overflow")).unwrap();
        assert_eq!(s.stacks, Some([(3600, 8192), (1264, 3072)]));
        assert_eq!(s.fc_stack, Some((5000, 8192)));
        assert_eq!(s.verdict, "FAIL stack-near-overflow");
        let t = l.replace(
            " digest=",
            " stack0=100/8192 stack=2000/3072 fcstack=4000/8192 digest=",
        );
        let t = parse_device_line(&t).unwrap();
        let mut m = StackMarks::default();
        m.add(&s);
        m.add(&t);
        m.add(&d);
        assert_eq!(m, StackMarks([(3600, 8192), (2000, 3072), (5000, 8192)]));
        let rows = vec![Row {
            kernel: "chacha20".into(),
            variant: "pulp+nodma".into(),
            cores: 8,
            buffer: 0,
            bytes: 64,
            cycles: 1000,
            instructions: 900,
        }];
        assert_eq!(parse_csv(&to_csv(&rows)).unwrap(), rows);
        assert!(parse_csv("a,b\n").is_err());
    }

    #[test]
    fn plans_are_within_the_device_limits() {
        for p in full_plan().into_iter().chain(quick_plan()) {
            assert!(p.bytes as usize <= BENCH_MAX_BYTES && (1..=8).contains(&p.cores));
        }
        assert!(quick_plan().len() < full_plan().len());
    }

    #[test]
    fn quick_plan_has_the_aead_targets() {
        let q = quick_plan();
        let pulp = kernel_index("chacha20poly1305", "pulp");
        for (cores, bytes) in [(1, 128 * 1024), (8, 128 * 1024), (8, FRAME_BYTES)] {
            assert!(
                q.iter().any(|p| p.kernel == pulp
                    && p.mode == MODE_DMA
                    && p.cores == cores
                    && p.bytes == bytes),
                "{cores} cores {bytes} B"
            );
        }
        // The RustCrypto anchor on one core only.
        let rc = kernel_index("chacha20poly1305", "rustcrypto");
        assert!(
            full_plan()
                .iter()
                .chain(&q)
                .filter(|p| p.kernel == rc)
                .all(|p| p.cores == 1)
        );
        // Ciphertext and tag both move the digest.
        assert_ne!(expected_aead_digest(1024), expected_digest(true, 1024, 64));
    }

    #[test]
    fn quick_plan_has_the_gcm_targets() {
        let q = quick_plan();
        let pulp = kernel_index("aes128gcm", "pulp");
        for cores in [1, 8] {
            for mode in [MODE_DMA, MODE_NODMA] {
                assert!(
                    q.iter().any(|p| p.kernel == pulp
                        && p.mode == mode
                        && p.cores == cores
                        && p.bytes == 128 * 1024),
                    "{cores} cores mode {mode}"
                );
            }
        }
        let rc = kernel_index("aes128gcm", "rustcrypto");
        assert!(
            full_plan()
                .iter()
                .chain(&q)
                .filter(|p| p.kernel == rc)
                .all(|p| p.cores == 1)
        );
        assert!(q.iter().any(|p| p.kernel == rc));
    }

    #[test]
    fn digests_follow_the_reference_ciphers() {
        // The ChaCha20 digest at 128 KiB from block 1 is the one gvsoc's build.rs computes too.
        assert_ne!(
            expected_digest(true, 4096, 64),
            expected_digest(true, 4096, 0)
        );
        assert_ne!(
            expected_digest(false, 4096, 16),
            digest(&(0..4096).map(pattern).collect::<Vec<u8>>())
        );
        // GCM: the tag is part of the digest (the ciphertext alone gives another one).
        let mut ct: Vec<u8> = (0..4096).map(pattern).collect();
        let mut c =
            ctr::Ctr128BE::<aes::Aes128>::new(&BENCH_AES_KEY.into(), &bench_gcm_j0().into());
        c.seek(16u64);
        c.apply_keystream(&mut ct);
        assert_ne!(expected_gcm_digest(4096), digest(&ct));
        assert_ne!(expected_gcm_digest(4096), expected_gcm_digest(4095));
    }
}

#[cfg(test)]
mod launch_tests {
    use super::keep_for_report;

    #[test]
    fn a_failing_device_line_reaches_the_report() {
        assert!(keep_for_report(
            "jpeg FAIL: the cluster did not boot",
            false
        ));
        assert!(keep_for_report("jpeg FAIL: encoder: Config", true));
        assert!(!keep_for_report(
            "jpeg i=0 cycles=1 instructions=1 bytes=1 digest=00 ok",
            false
        ));
        assert!(!keep_for_report("bench chacha20 cycles=5", false));
        assert!(keep_for_report("gvsoc: error somewhere", false));
        assert!(!keep_for_report("12345: 67: [pe0/insn] addi", true));
        assert!(keep_for_report("(no colon here)", true));
    }
}
