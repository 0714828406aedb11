//! `cargo xtask pulp-disasm`: builds `gap_rust_cipher_s` with feature `pulp` for
//! riscv32imc-unknown-none-elf and checks, in `riscv64-unknown-elf-objdump -d` of the object, that
//!
//! * the PULP ChaCha20 kernel (`gap_rust_cipher_s::chacha::pulp::blocks`) contains the PULP words:
//!   51 `p.ror`, 16 post-increment `p.lw`, 16 post-increment `p.sw`, and exactly the hardware-loop
//!   words its source asks for (expected words come from the `asm_macros` expansions, so this is
//!   also the check that LLVM assembled the macros' `.insn` lines into those words);
//! * they sit in the instruction stream (objdump shows an unknown 32-bit instruction as `.4byte`;
//!   data would be `.word`);
//! * the hardware-loop offsets land where intended: loop 0 starts at the first `add` of the double
//!   round and ends on its last `p.ror`, loop 1 ends on the counter increment, both bodies hold only
//!   32-bit instructions and start word-aligned;
//! * the radix-2^13 Poly1305 loop (`poly1305::pulp::Pulp13`) holds its 50 dot products and the
//!   other PULP words of its source, no `mulh*`, and its hardware loop ends on its last word;
//! * `gap_pulp_encoding_table`, one word per encoder form (edge registers and immediates), holds
//!   exactly the golden words of `asm_macros/tests/macros.rs`.
//!
//! It also builds `gapstream_jpeg` with feature `pulp` and checks its DCT kernel and block coder
//! for their PULP words and hardware loops (`check_jpeg`).
//!
//! QEMU cannot execute these instructions; GVSOC runs them (cluster-engine issue).
use std::process::Command;

use crate::qemu::TARGET;

/// One disassembled instruction.
#[derive(Debug, Clone)]
struct Insn {
    addr: u64,
    /// 16- or 32-bit encoding.
    word: u32,
    wide: bool,
    text: String,
}

fn word_of(expansion: &str) -> u32 {
    let hex = expansion
        .strip_prefix(".insn 4, 0x")
        .expect("asm_macros expands to `.insn 4, 0x...`");
    u32::from_str_radix(hex, 16).unwrap()
}

/// The golden table (`asm_macros/tests/common/golden.rs`, shared with the macros' own tests):
/// `golden_scalar()` is in the order of `gap_pulp_encoding_table` (chacha/pulp.rs).
mod golden {
    #![allow(dead_code)] // `golden_simd` is for the macros' tests
    use asm_macros::*;
    include!("../../asm_macros/tests/common/golden.rs");
    pub(super) fn encoding_table() -> Vec<(&'static str, u32)> {
        golden_scalar()
    }
}
use golden::encoding_table;

/// Builds the PULP variant of `package` and returns the path of the rlib cargo produced for it.
fn build(package: &str) -> Result<String, String> {
    let out = Command::new(env!("CARGO"))
        .current_dir(
            std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
                .parent()
                .unwrap(),
        )
        .args([
            "build",
            "--quiet",
            "--release",
            "-p",
            package,
            "--features",
            "pulp",
        ])
        .args(["--target", TARGET, "--message-format=json"])
        .output()
        .map_err(|e| format!("cannot run cargo: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "building {package} --features pulp for {TARGET} failed:\n{}",
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    let stdout = String::from_utf8_lossy(&out.stdout);
    // `{"reason":"compiler-artifact",...,"target":{..."name":"gap_rust_cipher_s"...},...,"filenames":["…/libgap_rust_cipher_s-<hash>.rlib", …]`
    let name = format!("\"name\":\"{package}\"");
    for line in stdout
        .lines()
        .filter(|l| l.contains("\"compiler-artifact\"") && l.contains(&name))
    {
        if let Some(i) = line.find("\"filenames\":[\"") {
            let rest = &line[i + 14..];
            if let Some(j) = rest.find('"') {
                let path = &rest[..j];
                if path.ends_with(".rlib") {
                    return Ok(path.to_string());
                }
            }
        }
    }
    Err(format!("cargo did not report the {package} rlib"))
}

/// `objdump -d -C` of the rlib, split into functions: (symbol, instructions).
fn disassemble(rlib: &str) -> Result<Vec<(String, Vec<Insn>)>, String> {
    let out = Command::new("riscv64-unknown-elf-objdump")
        .args(["-d", "-C", rlib])
        .output()
        .map_err(|e| format!("cannot run riscv64-unknown-elf-objdump (run `make setup`): {e}"))?;
    // objdump also meets the rlib's metadata member and says so on stderr; that is fine.
    let text = String::from_utf8_lossy(&out.stdout);
    let mut funcs: Vec<(String, Vec<Insn>)> = Vec::new();
    for line in text.lines() {
        // "00000000 <gap_rust_cipher_s::chacha::pulp::blocks>:"
        if let Some(name) = line
            .strip_suffix(">:")
            .and_then(|l| l.split_once(" <"))
            .map(|(_, n)| n)
        {
            funcs.push((name.to_string(), Vec::new()));
            continue;
        }
        // "  34:\t0a00007b          \t.4byte\t0xa00007b"
        let mut cols = line.split('\t');
        let (Some(addr), Some(hex), Some(mnem)) = (cols.next(), cols.next(), cols.next()) else {
            continue;
        };
        let Some(addr) = addr.trim().strip_suffix(':') else {
            continue;
        };
        let Ok(addr) = u64::from_str_radix(addr, 16) else {
            continue;
        };
        let hex = hex.trim();
        let Ok(word) = u32::from_str_radix(hex, 16) else {
            continue;
        };
        let rest: Vec<&str> = cols.collect();
        if let Some((_, insns)) = funcs.last_mut() {
            insns.push(Insn {
                addr,
                word,
                wide: hex.len() == 8,
                text: format!("{} {}", mnem.trim(), rest.join(" "))
                    .trim()
                    .to_string(),
            });
        }
    }
    Ok(funcs)
}

fn is_p_ror(w: u32) -> bool {
    w & 0xFE00_707F == 0x0800_5033
}
fn is_p_lw_post(w: u32) -> bool {
    w & 0x707F == 0x200B
}
fn is_p_sw_post(w: u32) -> bool {
    w & 0x707F == 0x202B
}
fn is_hwloop(w: u32) -> bool {
    w & 0x7F == 0x7B
}

/// The radix-2^13 Poly1305 loop (`poly1305::pulp::Pulp13`): 4 post-increment loads, 10
/// `pv.dotsp.h` and 40 `pv.sdotsp.h` (one per limb product pair), 5 `pv.add.h`, 10 `pv.pack.h`,
/// 11 `p.addRN` and 11 `p.extract` (the signed carries), one `lp.setup` whose loop ends on the
/// function's last `pv.pack.h`, no `mulh*` anywhere in the function, every PULP word in the
/// instruction stream.
fn check_poly1305_13(insns: &[Insn]) -> Result<String, String> {
    let field = |w: u32, mask: u32, want: u32| w & mask == want;
    let kinds: [(&str, u32, u32, usize); 8] = [
        ("p.lw rD, 4(t6!)", 0xFFFF_F07F, 0x004F_A00B, 4),
        ("pv.dotsp.h", 0xFC00_707F, 0x9800_0057, 10),
        ("pv.sdotsp.h", 0xFC00_707F, 0xB800_0057, 40),
        ("pv.add.h", 0xFC00_707F, 0x0000_0057, 5),
        ("pv.pack.h", 0xFE00_707F, 0xD000_0057, 10),
        ("p.addRN Is3 = 13", 0xFE00_707F, 0x1A00_605B, 11),
        ("p.extract Is3 = 12, Is2 = 0", 0xFFF0_707F, 0xD800_0033, 11),
        ("lp.setup x0", 0x0000_7FFF, 0x0000_407B, 1),
    ];
    let mut seen = Vec::new();
    for (name, mask, want, n) in kinds {
        let hits: Vec<&Insn> = insns
            .iter()
            .filter(|i| i.wide && field(i.word, mask, want))
            .collect();
        if hits.len() != n {
            return Err(format!(
                "Pulp13: {} `{name}` words, the source has {n}",
                hits.len()
            ));
        }
        if let Some(i) = hits.iter().find(|i| !i.text.starts_with(".4byte")) {
            return Err(format!(
                "Pulp13: `{name}` at {:#x} is not an instruction-stream word: `{}`",
                i.addr, i.text
            ));
        }
        seen.push(format!("{n} {name}"));
    }
    if let Some(i) = insns.iter().find(|i| {
        i.wide
            && i.word & 0xFE00_007F == 0x0200_0033
            && i.word & 0x4000 == 0
            && i.word & 0x3000 != 0
    }) {
        return Err(format!("Pulp13: a `mulh*` at {:#x}: `{}`", i.addr, i.text));
    }
    let setup = insns
        .iter()
        .find(|i| i.wide && i.word & 0x7FFF == 0x407B)
        .ok_or("Pulp13: no lp.setup")?;
    let end = setup.addr + 2 * (setup.word >> 20) as u64;
    let last = insns
        .iter()
        .find(|i| i.addr == end)
        .ok_or("Pulp13: the hardware loop's end is not an instruction")?;
    if last.word & 0xFE00_707F != 0xD000_0057 {
        return Err(format!(
            "Pulp13: the hardware loop ends on `{}`, not on the last pv.pack.h",
            last.text
        ));
    }
    if let Some(c) = insns
        .iter()
        .find(|i| i.addr > setup.addr && i.addr <= end && !i.wide)
    {
        return Err(format!(
            "Pulp13: compressed instruction `{}` inside the hardware loop",
            c.text
        ));
    }
    Ok(format!(
        "poly1305 radix-2^13 loop: {}; {} instructions per block, no mulh*",
        seen.join(", "),
        (end - setup.addr) / 4
    ))
}

fn check_kernel(insns: &[Insn]) -> Result<Vec<String>, String> {
    let mut report = Vec::new();
    let count = |f: fn(u32) -> bool| insns.iter().filter(|i| i.wide && f(i.word)).count();
    let (ror, lw, sw) = (count(is_p_ror), count(is_p_lw_post), count(is_p_sw_post));
    // 13 quarter-rounds in the source (column 0, a diagonal round, the 8 of the loop body), 4 each,
    // less the first rotate of diagonal (2,7,8,13), which the per-message context holds.
    if ror != 51 || lw != 16 || sw != 16 {
        return Err(format!(
            "kernel has {ror} p.ror (want 51), {lw} p.lw post-inc (want 16), {sw} p.sw post-inc (want 16)"
        ));
    }
    report.push(format!(
        "kernel: {ror} p.ror, {lw} p.lw rD, 4(rs1!), {sw} p.sw rs2, 4(rs1!)"
    ));
    for i in insns.iter().filter(|i| {
        i.wide
            && (is_p_ror(i.word)
                || is_p_lw_post(i.word)
                || is_p_sw_post(i.word)
                || is_hwloop(i.word))
    }) {
        if !i.text.starts_with(".4byte") && !i.text.starts_with(".insn") {
            return Err(format!(
                "PULP word {:#010x} at {:#x} is not in the instruction stream: `{}`",
                i.word, i.addr, i.text
            ));
        }
    }
    let hw: Vec<&Insn> = insns
        .iter()
        .filter(|i| i.wide && is_hwloop(i.word))
        .collect();
    let want = [
        asm_macros::lp_starti!(x0, 296),
        asm_macros::lp_endi!(x0, 672),
        asm_macros::lp_setup!(x1, t1, 980),
        asm_macros::lp_counti!(x0, 9),
    ];
    let got: Vec<u32> = hw.iter().map(|i| i.word).collect();
    let want_words: Vec<u32> = want.iter().map(|s| word_of(s)).collect();
    if got != want_words {
        return Err(format!(
            "kernel hardware-loop words {got:08x?}, want {want_words:08x?} ({want:?})"
        ));
    }
    report.push(format!("kernel: hardware-loop words {got:08x?} = {want:?}"));
    // Resolve the loop addresses as the hardware will: pc + (uimm << 1).
    let at = |addr: u64| insns.iter().find(|i| i.addr == addr);
    let starti = hw[0];
    let endi = hw[1];
    let setup = hw[2];
    let l0_start = starti.addr + 2 * u64::from(starti.word >> 20);
    let l0_end = endi.addr + 2 * u64::from(endi.word >> 20);
    let l1_start = setup.addr + 4;
    let l1_end = setup.addr + 2 * u64::from(setup.word >> 20);
    let first = at(l0_start).ok_or("loop 0 start is not an instruction boundary")?;
    let last0 = at(l0_end).ok_or("loop 0 end is not an instruction boundary")?;
    let last1 = at(l1_end).ok_or("loop 1 end is not an instruction boundary")?;
    if !first.text.starts_with("add") || !first.text.contains("a0,a0,a4") {
        return Err(format!(
            "loop 0 starts on `{}`, want the first `add a0,a0,a4` of the double round",
            first.text
        ));
    }
    if !is_p_ror(last0.word) {
        return Err(format!(
            "loop 0 ends on `{}` ({:#010x}), want the round's last p.ror",
            last0.text, last0.word
        ));
    }
    if last1.word != 0x0012_8293 {
        return Err(format!(
            "loop 1 ends on `{}`, want `addi t0,t0,1` (the block counter)",
            last1.text
        ));
    }
    if (l0_end - l0_start) / 4 + 1 != 96 {
        return Err(format!(
            "loop 0 body is {} instructions, want 96",
            (l0_end - l0_start) / 4 + 1
        ));
    }
    if l0_start % 4 != 0 || l1_start % 4 != 0 {
        return Err("a hardware loop does not start word-aligned".into());
    }
    if let Some(c) = insns
        .iter()
        .find(|i| i.addr >= setup.addr && i.addr <= l1_end && !i.wide)
    {
        return Err(format!(
            "compressed instruction `{}` at {:#x} inside the hardware loops",
            c.text, c.addr
        ));
    }
    let per_block = (l1_end - l1_start) / 4 + 1 + 96 * 8;
    report.push(format!(
        "kernel: loop 0 = {l0_start:#x}..={l0_end:#x} (96 instructions x 9), loop 1 = {l1_start:#x}..={l1_end:#x}; {per_block} instructions per 64-byte block ({:.2}/byte)",
        per_block as f64 / 64.0
    ));
    Ok(report)
}

/// Counts words of each kind in a function: `(name, mask, value, count)`; every one must be in
/// the instruction stream.
fn check_words(
    what: &str,
    insns: &[Insn],
    kinds: &[(&str, u32, u32, usize)],
) -> Result<String, String> {
    let mut seen = Vec::new();
    for &(name, mask, want, n) in kinds {
        let hits: Vec<&Insn> = insns
            .iter()
            .filter(|i| i.wide && i.word & mask == want)
            .collect();
        if hits.len() != n {
            return Err(format!(
                "{what}: {} `{name}` words, the source has {n}",
                hits.len()
            ));
        }
        if let Some(i) = hits.iter().find(|i| !i.text.starts_with(".4byte")) {
            return Err(format!(
                "{what}: `{name}` at {:#x} is not an instruction-stream word: `{}`",
                i.addr, i.text
            ));
        }
        seen.push(format!("{n} {name}"));
    }
    Ok(seen.join(", "))
}

/// The JPEG kernels of `gapstream_jpeg::pulp`: the DCT (`kernel`: 16 `pv.dotsp.h` and 8
/// `pv.sdotsp.h`, 8 `p.addRN` of each pass, the butterflies, the zig-zag stores, two hardware
/// loops of 47 and 46 instructions without compressed ones) and the block coder (`block`).
fn check_jpeg(funcs: &[(String, Vec<Insn>)]) -> Result<Vec<String>, String> {
    let find = |n: &str| {
        funcs
            .iter()
            .find(|(f, _)| f == n)
            .map(|(_, i)| i)
            .ok_or(format!("no {n} in the PULP build of gapstream_jpeg"))
    };
    let kernel = find("gapstream_jpeg::pulp::kernel")?;
    let mut report = vec![format!(
        "jpeg dct: {}",
        check_words(
            "jpeg dct",
            kernel,
            &[
                ("pv.dotsp.h", 0xFC00_707F, 0x9800_0057, 16),
                ("pv.sdotsp.h", 0xFC00_707F, 0xB800_0057, 8),
                ("p.addRN Is3 = 11", 0xFE00_707F, 0x1600_605B, 8),
                ("p.addRN Is3 = 16", 0xFE00_707F, 0x2000_605B, 8),
                ("pv.sub.h", 0xFE00_707F, 0x0800_0057, 6),
                ("pv.add.h", 0xFE00_707F, 0x0000_0057, 3),
                ("pv.shuffle.sci.h", 0xFC00_707F, 0xC000_6057, 6),
                ("p.lbu a0, 1(a2!)", 0xFFFF_FFFF, 0x0016_450B, 8),
                ("p.sh t5, a0(a1)", 0xFFFF_FFFF, 0x01E5_D523, 8),
                ("p.lw rD, 4(rs1!)", 0xFFF0_707F, 0x0040_200B, 6),
                ("lp.setup x0", 0x0000_7FFF, 0x0000_407B, 2),
            ],
        )?
    )];
    // Pass 1 (47 instructions), then pass 2 (46).
    for (setup, want) in kernel
        .iter()
        .filter(|i| i.wide && i.word & 0x7FFF == 0x407B)
        .zip([47, 46])
    {
        let end = setup.addr + 2 * (setup.word >> 20) as u64;
        if (end - setup.addr) / 4 != want {
            return Err(format!(
                "jpeg dct: a hardware loop of {} instructions, want {want}",
                (end - setup.addr) / 4
            ));
        }
        if let Some(c) = kernel
            .iter()
            .find(|i| i.addr > setup.addr && i.addr <= end && !i.wide)
        {
            return Err(format!(
                "jpeg dct: compressed `{}` inside a hardware loop",
                c.text
            ));
        }
    }
    report.push("jpeg dct: hardware loops of 47 and 46 instructions (8 rows each)".into());
    let block = find("gapstream_jpeg::pulp::block")?;
    report.push(format!(
        "jpeg block coder: {}",
        check_words(
            "jpeg block coder",
            block,
            &[
                ("p.abs", 0xFFF0_707F, 0x0400_0033, 3),
                ("p.ff1", 0xFFF0_707F, 0x1000_0033, 2),
                ("p.fl1", 0xFFF0_707F, 0x1000_1033, 1),
                ("p.clb t1, t0", 0xFFFF_FFFF, 0x1002_A333, 1),
                ("p.bclr s8, s8, t0", 0xFFFF_FFFF, 0x805C_3C33, 1),
                ("p.cnt t1, s8", 0xFFFF_FFFF, 0x100C_3333, 1),
                ("p.extractu t3, t3, 26, 0", 0xFFFF_FFFF, 0xF40E_1E33, 4),
                ("p.lh t2, t2(a0)", 0xFFFF_FFFF, 0x1075_7383, 1),
                ("p.lw rD, rs2(rs1)", 0xFE00_707F, 0x2000_7003, 4),
                ("p.lbu rD, rs2(rs1)", 0xFE00_707F, 0x4000_7003, 1),
                ("lp.setup x0, t1, 104", 0xFFFF_FFFF, 0x0343_407B, 1),
                ("p.msu t6, t1, a5", 0xFFFF_FFFF, 0x42F3_1FB3, 1),
                ("pv.sdotup.sc.h t3, t4, t0", 0xFFFF_FFFF, 0xA05E_CE57, 1),
                ("pv.sdotup.sc.h t1, t2, t4", 0xFFFF_FFFF, 0xA1D3_C357, 1),
                ("pv.cmpeq.sci.b t1, t2, -1", 0xFFFF_FFFF, 0x07F3_F357, 2),
                ("pv.shuffle.b t2, t2, s7", 0xFFFF_FFFF, 0xC173_93D7, 2),
                ("p.sw t2, 4(a6!)", 0xFFFF_FFFF, 0x0078_222B, 2),
            ],
        )?
    ));
    // The AC loop: no compressed instruction inside, its last instruction the `p.ff1` that
    // finds the next coefficient.
    let setup = block
        .iter()
        .find(|i| i.wide && i.word == 0x0343_407B)
        .ok_or("jpeg block coder: no lp.setup")?;
    let end = setup.addr + 104;
    if let Some(c) = block
        .iter()
        .find(|i| i.addr > setup.addr && i.addr <= end && !i.wide)
    {
        return Err(format!(
            "jpeg block coder: compressed `{}` inside the hardware loop",
            c.text
        ));
    }
    match block.iter().find(|i| i.addr == end) {
        Some(i) if i.wide && i.word & 0xFFF0_707F == 0x1000_0033 => {}
        _ => return Err("jpeg block coder: the AC loop does not end at a p.ff1".into()),
    }
    report.push("jpeg block coder: the AC loop is hardware loop 0 (26 instructions)".into());
    // The run loop (what the cluster encoder's strips use): the DCT, the zero mask and the
    // block coder above, the same words in one function, no compressed instruction anywhere,
    // hardware loops of 47 and 46 (the DCT's passes), 22 and 22 (the zero mask's halves) and 26
    // instructions (the AC loop).
    let run = find("gapstream_jpeg::pulp::run")?;
    report.push(format!(
        "jpeg run loop: {}",
        check_words(
            "jpeg run loop",
            run,
            &[
                ("pv.dotsp.h", 0xFC00_707F, 0x9800_0057, 16),
                ("pv.sdotsp.h", 0xFC00_707F, 0xB800_0057, 8),
                ("p.addRN Is3 = 11", 0xFE00_707F, 0x1600_605B, 8),
                ("p.addRN Is3 = 16", 0xFE00_707F, 0x2000_605B, 8),
                ("p.sh t5, a0(a1)", 0xFFFF_FFFF, 0x01E5_D523, 8),
                ("p.msu t6, t1, a5", 0xFFFF_FFFF, 0x42F3_1FB3, 1),
                ("pv.sdotup.sc.h t3, t4, t0", 0xFFFF_FFFF, 0xA05E_CE57, 1),
                ("p.cnt t1, s8", 0xFFFF_FFFF, 0x100C_3333, 1),
                ("lp.setup x0", 0x0000_7FFF, 0x0000_407B, 5),
            ],
        )?
    ));
    // The asm: from its `addi sp, sp, -48` to its `addi sp, sp, 48` (the compiler's prologue
    // and epilogue around it may be compressed).
    let at = |w: u32| run.iter().position(|i| i.wide && i.word == w);
    let (Some(from), Some(to)) = (at(0xFD01_0113), at(0x0301_0113)) else {
        return Err("jpeg run loop: no addi sp, sp, -48 ... addi sp, sp, 48".into());
    };
    if let Some(c) = run[from..=to].iter().find(|i| !i.wide) {
        return Err(format!(
            "jpeg run loop: compressed `{}` at {:#x}",
            c.text, c.addr
        ));
    }
    let mut loops: Vec<u64> = run
        .iter()
        .filter(|i| i.word & 0x7FFF == 0x407B)
        .map(|i| (i.word >> 20) as u64 * 2 / 4)
        .collect();
    loops.sort_unstable();
    if loops != [22, 22, 26, 46, 47] {
        return Err(format!(
            "jpeg run loop: hardware loops of {loops:?} instructions, want [22, 22, 26, 46, 47]"
        ));
    }
    report.push(
        "jpeg run loop: no compressed instruction, hardware loops of 47, 46 (DCT), 22, 22 (zero mask), 26 (AC)"
            .into(),
    );
    Ok(report)
}

pub fn run() -> Result<(), String> {
    let jrlib = build("gapstream_jpeg")?;
    for line in check_jpeg(&disassemble(&jrlib)?)? {
        println!("pulp-disasm {line}");
    }
    let rlib = build("gap_rust_cipher_s")?;
    let funcs = disassemble(&rlib)?;
    let kernel = funcs
        .iter()
        .find(|(n, _)| n == "gap_rust_cipher_s::chacha::pulp::blocks")
        .ok_or("no gap_rust_cipher_s::chacha::pulp::blocks in the PULP build")?;
    for line in check_kernel(&kernel.1)? {
        println!("pulp-disasm {line}");
    }
    let poly = funcs
        .iter()
        .find(|(n, _)| n.contains("Pulp13") && n.ends_with("::words"))
        .ok_or("no <gap_rust_cipher_s::poly1305::pulp::Pulp13 as BlockKernel>::words in the PULP build")?;
    println!("pulp-disasm {}", check_poly1305_13(&poly.1)?);
    let table = funcs
        .iter()
        .find(|(n, _)| n == "gap_pulp_encoding_table")
        .ok_or("no gap_pulp_encoding_table in the PULP build")?;
    let want = encoding_table();
    for (s, w) in &want {
        if word_of(s) != *w {
            return Err(format!(
                "asm_macros expansion `{s}` is not the golden word {w:#010x}"
            ));
        }
    }
    let got: Vec<u32> = table.1.iter().map(|i| i.word).collect();
    let want_words: Vec<u32> = want.iter().map(|&(_, w)| w).collect();
    if got != want_words {
        return Err(format!(
            "gap_pulp_encoding_table words\n  {got:08x?}\nwant\n  {want_words:08x?}"
        ));
    }
    if let Some(i) = table
        .1
        .iter()
        .find(|i| !i.wide || !i.text.starts_with(".4byte"))
    {
        return Err(format!(
            "encoding table entry at {:#x} is not a 32-bit instruction-stream word: `{}`",
            i.addr, i.text
        ));
    }
    println!(
        "pulp-disasm encoding table: {} words assembled by rustc's LLVM = golden words",
        got.len()
    );
    println!("pulp-disasm: ok ({rlib})");
    Ok(())
}
