//! The macros end to end: what they expand to (golden words, see `src/encode.rs` for where each
//! comes from), and that both assemblers that matter turn the expansion into exactly that word.
use asm_macros::{
    lp_count, lp_counti, lp_endi, lp_setup, lp_setupi, lp_starti, p_lw, p_ror, p_sw, pv_sll_b,
    pv_sll_sci_b, pv_srl_b, pv_srl_sci_b,
};
use std::path::PathBuf;
use std::process::Command;

/// (macro expansion, intended word) for every form, edge registers and edge immediates included.
fn table() -> Vec<(&'static str, u32)> {
    vec![
        (p_ror!(a0, a0, a1), 0x08B5_5533),
        (p_ror!(x31, x31, x31), 0x09FF_DFB3),
        (p_ror!(zero, t6, ra), 0x081F_D033),
        (p_lw!(a2, 4(a3!)), 0x0046_A60B),
        (p_lw!(x31, 2047(x31!)), 0x7FFF_AF8B),
        (p_lw!(ra, -2048(zero!)), 0x8000_208B),
        (p_lw!(t0, -4(sp!)), 0xFFC1_228B),
        (p_lw!(a0, a1(a2!)), 0x20B6_750B),
        (p_lw!(x31, x31(x31!)), 0x21FF_FF8B),
        (p_lw!(x1, x0(x31!)), 0x200F_F08B),
        (p_sw!(a2, 4(a3!)), 0x00C6_A22B),
        (p_sw!(x31, 2047(x31!)), 0x7FFF_AFAB),
        (p_sw!(zero, -2048(ra!)), 0x8000_A02B),
        (p_sw!(a0, a1(a2!)), 0x00A6_65AB),
        (p_sw!(x31, x31(x31!)), 0x01FF_EFAB),
        (p_sw!(x0, x31(x1!)), 0x0000_EFAB),
        (lp_starti!(x0, 0), 0x0000_007B),
        (lp_starti!(1, 8), 0x0040_00FB),
        (lp_starti!(x0, 8190), 0xFFF0_007B),
        (lp_endi!(x0, 0), 0x0000_107B),
        (lp_endi!(x1, 384), 0x0C00_10FB),
        (lp_endi!(0, 8190), 0xFFF0_107B),
        (lp_count!(x0, zero), 0x0000_207B),
        (lp_count!(x1, a0), 0x0005_20FB),
        (lp_count!(x0, x31), 0x000F_A07B),
        (lp_counti!(x0, 9), 0x0090_307B),
        (lp_counti!(x1, 1), 0x0010_30FB),
        (lp_counti!(x0, 4095), 0xFFF0_307B),
        (lp_setup!(x1, t1, 8), 0x0043_40FB),
        (lp_setup!(x0, a1, 384), 0x0C05_C07B),
        (lp_setup!(x0, x31, 8190), 0xFFFF_C07B),
        (lp_setupi!(x0, 10, 16), 0x00A4_507B),
        (lp_setupi!(x1, 4095, 62), 0xFFFF_D0FB),
        (lp_setupi!(0, 1, 8), 0x0012_507B),
        (pv_srl_sci_b!(a0, a1, 2), 0x4015_F557),
        (pv_srl_sci_b!(x31, x31, 7), 0x423F_FFD7),
        (pv_srl_sci_b!(ra, zero, 1), 0x4200_70D7),
        (pv_sll_sci_b!(a0, a1, 6), 0x5035_F557),
        (pv_sll_sci_b!(ra, zero, 4), 0x5020_70D7),
        (pv_sll_sci_b!(t6, t6, 7), 0x523F_FFD7),
        (pv_srl_b!(a0, a1, a2), 0x40C5_9557),
        (pv_srl_b!(x31, x31, x31), 0x41FF_9FD7),
        (pv_srl_b!(ra, t6, zero), 0x400F_90D7),
        (pv_sll_b!(a0, a1, a2), 0x50C5_9557),
        (pv_sll_b!(x31, x31, x31), 0x51FF_9FD7),
        (pv_sll_b!(zero, ra, t6), 0x51F0_9057),
    ]
}

#[test]
fn expansions_are_insn_directives_with_the_golden_words() {
    for (text, word) in table() {
        assert_eq!(text, format!(".insn 4, {word:#010x}"), "{text}");
    }
}

/// Debian's `riscv64-unknown-elf-as` (installed by `make setup`) assembles every expansion to the
/// intended bytes, and `riscv64-unknown-elf-objdump` shows them in the instruction stream
/// (a 32-bit `.4byte` unit per word, not bytes of a data region).
#[test]
fn gnu_as_assembles_the_expansions_to_the_golden_words() {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("asm_macros_gnu_as");
    std::fs::create_dir_all(&dir).unwrap();
    let src = dir.join("words.s");
    let obj = dir.join("words.o");
    let mut text = String::from(".text\n.globl words\nwords:\n");
    for (line, _) in table() {
        text.push_str(line);
        text.push('\n');
    }
    std::fs::write(&src, text).unwrap();
    let st = Command::new("riscv64-unknown-elf-as")
        .args(["-march=rv32imc", "-mabi=ilp32", "-o"])
        .arg(&obj)
        .arg(&src)
        .status()
        .expect("riscv64-unknown-elf-as not found: run `make setup` (package binutils-riscv64-unknown-elf)");
    assert!(st.success(), "GNU as rejected the expansions");
    let out = Command::new("riscv64-unknown-elf-objdump")
        .arg("-d")
        .arg(&obj)
        .output()
        .expect("objdump");
    assert!(out.status.success());
    let dis = String::from_utf8_lossy(&out.stdout);
    // Lines look like "   0:\t08b55533          \t.4byte\t0x8b55533".
    let words: Vec<u32> = dis
        .lines()
        .filter_map(|l| {
            let mut cols = l.split('\t');
            let addr = cols.next()?;
            if !addr.trim_end().ends_with(':') {
                return None;
            }
            u32::from_str_radix(cols.next()?.trim(), 16).ok()
        })
        .collect();
    let want: Vec<u32> = table().iter().map(|&(_, w)| w).collect();
    assert_eq!(words, want, "objdump of the assembled expansions:\n{dis}");
}

// LLVM (the assembler behind `asm!`) is checked on the rv32 build: `cargo xtask pulp-disasm`
// compiles every form above into the PULP build of gap_rust_cipher_s and compares the words in
// the object with these expansions. (A system `llvm-mc` is a different LLVM from rustc's; LLVM 14
// does not even know `.insn <length>, <value>`.)

/// Out-of-range immediates, unknown registers and malformed operands are compile errors that
/// name the instruction and the operand (expected messages in `tests/compile_fail/*.stderr`).
#[test]
fn bad_operands_are_compile_errors_naming_the_operand() {
    let t = trybuild::TestCases::new();
    t.compile_fail("tests/compile_fail/*.rs");
}
