//! `gapstream` receiver CLI. Filled in by issue 6.
fn main() {}
