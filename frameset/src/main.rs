//! `frameset --out DIR [--size WxH]`: writes the picture set as PGM files (NAME.pgm).

use std::path::PathBuf;
use std::process::ExitCode;

fn main() -> ExitCode {
    let mut out: Option<PathBuf> = None;
    let (mut w, mut h) = (frameset::WIDTH, frameset::HEIGHT);
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--out" => out = args.next().map(PathBuf::from),
            "--size" => {
                let Some((a, b)) = args.next().and_then(|s| {
                    let (a, b) = s.split_once('x')?;
                    Some((a.parse().ok()?, b.parse().ok()?))
                }) else {
                    eprintln!("frameset: error: --size wants WIDTHxHEIGHT, e.g. 324x244");
                    return ExitCode::from(2);
                };
                (w, h) = (a, b);
            }
            _ => {
                eprintln!(
                    "frameset: error: unknown argument {a} (usage: frameset --out DIR [--size WxH])"
                );
                return ExitCode::from(2);
            }
        }
    }
    let Some(out) = out else {
        eprintln!("frameset: error: --out DIR is required");
        return ExitCode::from(2);
    };
    let run = || -> Result<usize, frameset::FramesetError> {
        std::fs::create_dir_all(&out).map_err(|source| frameset::FramesetError::Io {
            path: out.clone(),
            source,
        })?;
        let mut set = frameset::photos(w, h)?;
        set.push(frameset::synthetic(w, h, 1)?);
        for p in &set {
            frameset::write_pgm(&out.join(format!("{}.pgm", p.name)), p)?;
        }
        Ok(set.len())
    };
    match run() {
        Ok(n) => {
            println!(
                "frameset: {n} pictures of {w}x{h} written to {}",
                out.display()
            );
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("frameset: error: {e}");
            ExitCode::FAILURE
        }
    }
}
