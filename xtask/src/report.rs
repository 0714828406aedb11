//! `cargo xtask bench-report` (placeholder until the plots land).
use std::path::PathBuf;

pub fn run(_csv: Option<PathBuf>, _out: Option<PathBuf>) -> Result<(), String> {
    Err("bench-report: not implemented yet".into())
}
