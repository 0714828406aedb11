//! The macros end to end: what they expand to (golden words, see `src/encode.rs` for where each
//! comes from), and that both assemblers that matter turn the expansion into exactly that word.
use asm_macros::{
    lp_count, lp_counti, lp_endi, lp_setup, lp_setupi, lp_starti, p_abs, p_addrni, p_bclr,
    p_beqimm, p_bneimm, p_clb, p_clipi, p_clipur, p_cnt, p_extbs, p_extracti, p_extractui, p_ff1,
    p_fl1, p_inserti, p_lb, p_lbu, p_lh_rr, p_lhu_rr, p_lw, p_lw_rr, p_mac, p_msu, p_ror, p_sb,
    p_sh, p_sw, pv_abs_h, pv_add_h, pv_cmpeq_sci_b, pv_dotsp_h, pv_pack_h, pv_sdotsp_h,
    pv_sdotup_sc_h, pv_shuffle_b, pv_shuffle_sci_h, pv_shuffle2_b, pv_sll_b, pv_sll_sci_b,
    pv_srl_b, pv_srl_sci_b, pv_sub_h,
};
use std::path::PathBuf;
use std::process::Command;

// The golden table (shared with `cargo xtask pulp-disasm`).
include!("common/golden.rs");

/// (macro expansion, intended word) for every form.
fn table() -> Vec<(&'static str, u32)> {
    let mut t = golden_scalar();
    t.extend(golden_simd());
    t.extend(golden_jpegls());
    t
}

#[test]
fn expansions_are_insn_directives_with_the_golden_words() {
    for (text, word) in table() {
        assert_eq!(text, format!(".insn 4, {word:#010x}"), "{text}");
    }
}

/// Assembles `text` for rv32imc with Debian's `riscv64-unknown-elf-as` (installed by `make
/// setup`) in a folder `name` of the test scratch space; returns the object file.
fn gnu_as(name: &str, text: &str, what: &str) -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(name);
    std::fs::create_dir_all(&dir).unwrap();
    let (src, obj) = (dir.join("words.s"), dir.join("words.o"));
    std::fs::write(&src, text).unwrap();
    let st = Command::new("riscv64-unknown-elf-as")
        .args(["-march=rv32imc", "-mabi=ilp32", "-o"])
        .arg(&obj)
        .arg(&src)
        .status()
        .expect("riscv64-unknown-elf-as not found: run `make setup` (package binutils-riscv64-unknown-elf)");
    assert!(st.success(), "GNU as rejected {what}");
    obj
}

/// Debian's `riscv64-unknown-elf-as` (installed by `make setup`) assembles every expansion to the
/// intended bytes, and `riscv64-unknown-elf-objdump` shows them in the instruction stream
/// (a 32-bit `.4byte` unit per word, not bytes of a data region).
#[test]
fn gnu_as_assembles_the_expansions_to_the_golden_words() {
    let mut text = String::from(".text\n.globl words\nwords:\n");
    for (line, _) in table() {
        text.push_str(line);
        text.push('\n');
    }
    let obj = gnu_as("asm_macros_gnu_as", &text, "the expansions");
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

/// The immediate-compare branches (`p_beqimm!` / `p_bneimm!` + a label): GNU as fills in the
/// label's offset and writes the words of the RI5CY manual's SB layout with Imm5 in the rs2
/// field (`encode::p_beqimm(a0, -1, 0)`, `encode::p_bneimm(t6, 1, 8)`).
#[test]
fn gnu_as_assembles_the_immediate_branches_to_labels() {
    let text = format!(
        ".text\n.option norvc\nwords:\n{}words\n{}1f\nnop\n1:\n",
        p_beqimm!(a0, -1),
        p_bneimm!(t6, 1)
    );
    let obj = gnu_as("asm_macros_gnu_as_branch", &text, "the branches");
    let bin_path = obj.with_extension("bin");
    let out = Command::new("riscv64-unknown-elf-objcopy")
        .args(["-O", "binary", "-j", ".text"])
        .arg(&obj)
        .arg(&bin_path)
        .status()
        .expect("objcopy");
    assert!(out.success());
    let bin = std::fs::read(&bin_path).unwrap();
    let words: Vec<u32> = bin
        .chunks(4)
        .map(|c| u32::from_le_bytes(c.try_into().unwrap()))
        .collect();
    assert_eq!(words, [0x01F5_2063, 0x001F_B463, 0x0000_0013]);
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
