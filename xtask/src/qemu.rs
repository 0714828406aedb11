//! Building the `rv32_qemu` programs and running them on QEMU.
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};
use std::{fs, io::Read};

pub const TARGET: &str = "riscv32imc-unknown-none-elf";
const PROFILE: &str = "rv32";
const TIMEOUT: Duration = Duration::from_secs(300);

fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

/// Names of the programs in `rv32_qemu/src/bin`, sorted.
fn programs(filter: Option<&str>) -> Result<Vec<String>, String> {
    let dir = workspace_root().join("rv32_qemu/src/bin");
    let mut v: Vec<String> = fs::read_dir(&dir)
        .map_err(|e| format!("cannot list {}: {e}", dir.display()))?
        .filter_map(|e| e.ok())
        .filter_map(|e| {
            let p = e.path();
            (p.extension()? == "rs").then(|| p.file_stem().unwrap().to_string_lossy().into_owned())
        })
        .filter(|n| filter.is_none_or(|f| n.contains(f)))
        .collect();
    v.sort();
    Ok(v)
}

/// Builds the given programs of `rv32_qemu` (one cargo call; only those: each is a whole-program
/// LTO link, so the tests do not pay for the benchmarks and the other way round) and returns the
/// ELF directory.
pub fn build(progs: &[String]) -> Result<PathBuf, String> {
    let root = workspace_root();
    let mut args: Vec<&str> = vec![
        "build",
        "--quiet",
        "-p",
        "rv32_qemu",
        "--target",
        TARGET,
        "--profile",
        PROFILE,
    ];
    for p in progs {
        args.extend(["--bin", p]);
    }
    let status = Command::new(env!("CARGO"))
        .current_dir(&root)
        .args(&args)
        .status()
        .map_err(|e| format!("cannot run cargo: {e}"))?;
    if !status.success() {
        return Err("building the rv32 programs failed".into());
    }
    Ok(target_dir().join(TARGET).join(PROFILE))
}

fn target_dir() -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| workspace_root().join("target"))
}

pub struct Run {
    pub ok: bool,
    pub status: Option<i32>,
    pub log: String,
    pub wall: Duration,
}

/// Runs one ELF on QEMU `virt` (machine mode, no firmware), `-icount shift=0`, with a timeout.
pub fn run_elf(elf: &Path) -> Result<Run, String> {
    let start = Instant::now();
    let mut child = Command::new("qemu-system-riscv32")
        .args([
            "-machine",
            "virt",
            "-bios",
            "none",
            "-m",
            "128M",
            "-nographic",
            "-monitor",
            "none",
        ])
        .args(["-serial", "stdio", "-icount", "shift=0"])
        .arg("-kernel")
        .arg(elf)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot start qemu-system-riscv32 (run `make setup`): {e}"))?;
    let mut out = child.stdout.take().unwrap();
    let mut err = child.stderr.take().unwrap();
    let reader = std::thread::spawn(move || {
        let mut s = Vec::new();
        let _ = out.read_to_end(&mut s);
        let mut e = Vec::new();
        let _ = err.read_to_end(&mut e);
        s.extend_from_slice(&e);
        String::from_utf8_lossy(&s).replace('\r', "")
    });
    let status = loop {
        if let Some(st) = child.try_wait().map_err(|e| e.to_string())? {
            break Some(st);
        }
        if start.elapsed() > TIMEOUT {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    let mut log = reader.join().unwrap_or_default();
    let code = status.and_then(|s| s.code());
    if status.is_none() {
        let _ = writeln!(log, "(killed after {}s timeout)", TIMEOUT.as_secs());
    }
    let ok = code == Some(0) && log.contains("RESULT pass");
    Ok(Run {
        ok,
        status: code,
        log,
        wall: start.elapsed(),
    })
}

pub fn test(filter: Option<&str>) -> Result<(), String> {
    let progs: Vec<String> = programs(filter)?
        .into_iter()
        .filter(|p| !p.starts_with("bench_"))
        .collect();
    if progs.is_empty() {
        return Err("no rv32 test programs matched".into());
    }
    let dir = build(&progs)?;
    let mut failed = Vec::new();
    for p in &progs {
        let r = run_elf(&dir.join(p))?;
        if r.ok {
            println!("qemu-rv32 {p:<28} ok    ({:.1}s)", r.wall.as_secs_f64());
        } else {
            println!("qemu-rv32 {p:<28} FAIL  (exit status {:?})", r.status);
            println!("---- log of {p} ----\n{}---- end of log ----", r.log);
            failed.push(p.clone());
        }
    }
    if failed.is_empty() {
        println!("qemu-rv32: {} programs passed", progs.len());
        Ok(())
    } else {
        Err(format!(
            "{} of {} rv32 programs failed: {}",
            failed.len(),
            progs.len(),
            failed.join(", ")
        ))
    }
}

/// One `BENCH` line.
#[derive(Debug, Clone, PartialEq)]
pub struct BenchRow {
    pub kernel: String,
    pub variant: String,
    pub bytes: u64,
    pub instructions: u64,
}

/// Parses `BENCH kernel=.. variant=.. bytes=.. instructions=..` lines of a log.
pub fn parse_bench(log: &str) -> Result<Vec<BenchRow>, String> {
    let mut rows = Vec::new();
    for line in log.lines().filter(|l| l.starts_with("BENCH ")) {
        let field = |k: &str| {
            line.split_whitespace()
                .find_map(|kv| kv.strip_prefix(k).and_then(|v| v.strip_prefix('=')))
                .ok_or_else(|| format!("BENCH line without {k}: {line}"))
        };
        let num = |k: &str| -> Result<u64, String> {
            field(k)?.parse().map_err(|_| format!("bad {k} in: {line}"))
        };
        rows.push(BenchRow {
            kernel: field("kernel")?.to_string(),
            variant: field("variant")?.to_string(),
            bytes: num("bytes")?,
            instructions: num("instructions")?,
        });
    }
    Ok(rows)
}

pub fn bench(filter: Option<&str>) -> Result<(), String> {
    let progs: Vec<String> = programs(filter)?
        .into_iter()
        .filter(|p| p.starts_with("bench_"))
        .collect();
    if progs.is_empty() {
        return Err("no rv32 benchmark programs matched".into());
    }
    let dir = build(&progs)?;
    let mut rows = Vec::new();
    let mut metrics = Vec::new();
    for p in &progs {
        eprintln!("bench-qemu: running {p} ...");
        let r = run_elf(&dir.join(p))?;
        if !r.ok {
            return Err(format!(
                "benchmark {p} failed (exit status {:?}):\n{}",
                r.status, r.log
            ));
        }
        rows.extend(parse_bench(&r.log)?);
        metrics.extend(
            r.log
                .lines()
                .filter(|l| l.starts_with("METRIC "))
                .map(str::to_owned),
        );
    }
    let mut csv = String::from("kernel,variant,bytes,instructions,instructions_per_byte\n");
    println!(
        "{:<14} {:<12} {:>8} {:>14} {:>10}",
        "kernel", "variant", "bytes", "instructions", "instr/B"
    );
    for r in &rows {
        let ipb = r.instructions as f64 / r.bytes.max(1) as f64;
        println!(
            "{:<14} {:<12} {:>8} {:>14} {:>10.2}",
            r.kernel, r.variant, r.bytes, r.instructions, ipb
        );
        let _ = writeln!(
            csv,
            "{},{},{},{},{:.3}",
            r.kernel, r.variant, r.bytes, r.instructions, ipb
        );
    }
    for m in &metrics {
        println!("{m}");
    }
    let out = target_dir().join("bench");
    fs::create_dir_all(&out).map_err(|e| e.to_string())?;
    let path = out.join(csv_name(filter));
    fs::write(&path, csv).map_err(|e| e.to_string())?;
    println!("wrote {}", path.display());
    Ok(())
}

/// `qemu.csv` for all benchmarks (what `make bench-report` reads); a filtered run (`make
/// bench-protocol`, `xtask bench-qemu aes`) writes `qemu-<filter>.csv` instead of overwriting it
/// with its subset.
fn csv_name(filter: Option<&str>) -> String {
    match filter {
        None => "qemu.csv".into(),
        Some(f) => {
            let f: String = f
                .chars()
                .map(|c| {
                    if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                        c
                    } else {
                        '_'
                    }
                })
                .collect();
            format!("qemu-{f}.csv")
        }
    }
}

#[cfg(test)]
mod tests {

    #[test]
    fn filtered_runs_do_not_overwrite_the_full_csv() {
        assert_eq!(super::csv_name(None), "qemu.csv");
        assert_eq!(
            super::csv_name(Some("bench_protocol")),
            "qemu-bench_protocol.csv"
        );
        assert_eq!(super::csv_name(Some("a/b c")), "qemu-a_b_c.csv");
    }
    use super::*;

    #[test]
    fn parses_bench_lines_and_rejects_malformed_ones() {
        let log =
            "noise\nBENCH kernel=chacha20 variant=rv32 bytes=64 instructions=1700\nRESULT pass\n";
        let rows = parse_bench(log).unwrap();
        assert_eq!(
            rows,
            vec![BenchRow {
                kernel: "chacha20".into(),
                variant: "rv32".into(),
                bytes: 64,
                instructions: 1700
            }]
        );
        assert!(parse_bench("BENCH kernel=x variant=y bytes=z instructions=1").is_err());
        assert!(parse_bench("BENCH kernel=x bytes=1 instructions=1").is_err());
    }
}
