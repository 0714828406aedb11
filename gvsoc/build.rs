//! Links the GAP8 programs with gap_rust_sdk's `gap8.x`, and computes on the host (RustCrypto
//! `chacha20`) the digest the engine check must reproduce on the GAP8 model.
use chacha20::ChaCha20;
use chacha20::cipher::{KeyIvInit, StreamCipher, StreamCipherSeek};
use std::{env, fs, path::PathBuf};

#[allow(dead_code)]
mod common {
    include!("src/common.rs");
}
use common::*;

fn main() {
    println!("cargo:rerun-if-changed=src/common.rs");
    if env::var("CARGO_CFG_TARGET_ARCH").as_deref() == Ok("riscv32") {
        println!("cargo:rustc-link-arg-bins=-Tgap8.x");
    }
    let mut data: Vec<u8> = (0..CHECK_BYTES).map(pattern).collect();
    let mut c = ChaCha20::new(&CHECK_KEY.into(), &CHECK_NONCE.into());
    c.seek(CHECK_OFFSET);
    c.apply_keystream(&mut data);
    let out = PathBuf::from(env::var_os("OUT_DIR").unwrap());
    fs::write(
        out.join("expected.rs"),
        format!(
            "/// Digest of the ChaCha20 ciphertext of the check payload, computed on the host by build.rs.\n\
             pub const CHACHA20_DIGEST: u64 = {:#018x};\n\
             /// Digest of the plaintext (to detect an engine that wrote nothing).\n\
             pub const PLAIN_DIGEST: u64 = {:#018x};\n",
            digest(&data),
            digest(&(0..CHECK_BYTES).map(pattern).collect::<Vec<u8>>())
        ),
    )
    .unwrap();
}
