//! Writes the seed corpus: `fuzz-corpus [DIR]` (default `fuzz/corpus`) replaces every
//! `DIR/<target>/seed-*` file with the seeds generated from real messages
//! (`gapstream_fuzz_targets::seeds`). Other files there (regression inputs) are kept.
use std::path::PathBuf;
use std::process::ExitCode;

fn main() -> ExitCode {
    let dir = PathBuf::from(
        std::env::args()
            .nth(1)
            .unwrap_or_else(|| "fuzz/corpus".into()),
    );
    let seeds = gapstream_fuzz_targets::seeds::all();
    let run = || -> std::io::Result<()> {
        for (target, _) in gapstream_fuzz_targets::TARGETS {
            let d = dir.join(target);
            std::fs::create_dir_all(&d)?;
            for e in std::fs::read_dir(&d)? {
                let p = e?.path();
                if p.file_name()
                    .is_some_and(|n| n.to_string_lossy().starts_with("seed-"))
                {
                    std::fs::remove_file(p)?;
                }
            }
        }
        for s in &seeds {
            std::fs::write(
                dir.join(s.target).join(format!("seed-{}", s.name)),
                &s.bytes,
            )?;
        }
        Ok(())
    };
    match run() {
        Ok(()) => {
            println!(
                "fuzz-corpus: {} seeds for {} targets in {}",
                seeds.len(),
                gapstream_fuzz_targets::TARGETS.len(),
                dir.display()
            );
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("fuzz-corpus: cannot write {}: {e}", dir.display());
            ExitCode::FAILURE
        }
    }
}
