//! With feature `bare` on a riscv32 target: puts `gap8.x` (the GAP8 bare-metal link script) on the
//! link search path, so a program links with `-Tgap8.x`.
use std::{env, fs, path::PathBuf};

fn main() {
    println!("cargo:rerun-if-changed=gap8.x");
    if env::var_os("CARGO_FEATURE_BARE").is_some()
        && env::var("CARGO_CFG_TARGET_ARCH").as_deref() == Ok("riscv32")
    {
        let out = PathBuf::from(env::var_os("OUT_DIR").expect("OUT_DIR"));
        fs::copy("gap8.x", out.join("gap8.x")).expect("copy gap8.x");
        println!("cargo:rustc-link-search={}", out.display());
    }
}
