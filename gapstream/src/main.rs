//! `gapstream` receiver CLI. See lib.rs for the module map.
fn main() {}
