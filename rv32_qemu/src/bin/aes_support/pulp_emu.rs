//! PULP instructions on QEMU: a machine-mode trap handler that emulates `p.ror`, `pv.srl.sci.b`,
//! `pv.sll.sci.b`, `pv.srl.b` and `pv.sll.b`, so the PULP AES-128-CTR kernel can be cross-checked and its instructions
//! counted on stock QEMU.
//!
//! Included with `#[path]` by `aes_vectors.rs` and `bench_aes.rs` (this directory has no
//! `main.rs`, so cargo and xtask do not treat it as a program).
//!
//! The handler accepts only illegal-instruction traps on those words (`p.ror`: funct7 0000100,
//! funct3 101, opcode 0110011, `p.ror a0, a0, a1` = 0x08B55533; `pv.srl.sci.b` / `pv.sll.sci.b`:
//! funct6 010000 / 010100, funct3 111, opcode 1010111, imm\[0\] in bit 25, imm\[5:1\] in bits
//! 24:20; `pv.srl.b` / `pv.sll.b`: the same funct6 with bit 25 clear and funct3 001, per-byte
//! amounts in bits 2:0 of each byte of rs2); anything else restores the runtime's trap vector and re-executes, so the runtime reports
//! it. Each kind has a fixed path, so every emulated instruction of a kind costs the same number of
//! retired instructions, which [`PulpEmu::install`] measures; [`PulpEmu::count`] turns a measured
//! region into the count a PULP core would retire (each emulated instruction = 1).
#![allow(dead_code)] // each including program uses a part

use rv32_qemu::count_instructions;

core::arch::global_asm!(
    r#".section .bss.aes_pulp_emu,"aw",@nobits"#,
    r#".p2align 4"#,
    r#"aes_pulp_emu_regs: .zero 128"#,
    r#".globl aes_pulp_emu_traps"#,
    r#"aes_pulp_emu_traps: .zero 44"#,
    // Hardware loop 0 as set by lp.starti / lp.endi / lp.counti: start, end, count.
    r#".globl aes_pulp_emu_lp"#,
    r#"aes_pulp_emu_lp: .zero 12"#,
    r#".globl aes_pulp_emu_old_mtvec"#,
    r#"aes_pulp_emu_old_mtvec: .zero 4"#,
    r#".section .text.aes_pulp_emu,"ax",@progbits"#,
    r#".p2align 4"#,
    r#".globl aes_pulp_emu_trap"#,
    r#"aes_pulp_emu_trap:"#,
    r#"    csrrw sp, mscratch, sp"#,
    r#"    sw x1, 4(sp)"#,
    r#"    .irp r, 3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20,21,22,23,24,25,26,27,28,29,30,31"#,
    r#"    sw x\r, (\r*4)(sp)"#,
    r#"    .endr"#,
    r#"    csrr t0, mscratch"#,
    r#"    sw t0, 8(sp)"#,
    r#"    sw zero, 0(sp)"#,
    r#"    csrr t0, mcause"#,
    r#"    li t1, 2"#,
    r#"    bne t0, t1, 9f"#,
    r#"    csrr t0, mepc"#,
    r#"    lhu t1, 0(t0)"#,
    r#"    lhu t2, 2(t0)"#,
    r#"    slli t2, t2, 16"#,
    r#"    or t1, t1, t2"#,
    // t2 = value of rs1
    r#"    srli t2, t1, 15"#,
    r#"    andi t2, t2, 31"#,
    r#"    slli t2, t2, 2"#,
    r#"    add t2, t2, sp"#,
    r#"    lw t2, 0(t2)"#,
    // The hardware-loop marker `p.ror zero, zero, zero` (before the generic p.ror)
    r#"    li t4, 0x08005033"#,
    r#"    beq t1, t4, 20f"#,
    // p.lw rd, imm(rs1!): opcode 0001011, funct3 010
    r#"    li t4, 0x707F"#,
    r#"    and t3, t1, t4"#,
    r#"    li t4, 0x200B"#,
    r#"    beq t3, t4, 21f"#,
    // lp.starti / lp.endi / lp.counti: opcode 1111011, funct3 000 / 001 / 011
    r#"    li t4, 0x007B"#,
    r#"    beq t3, t4, 22f"#,
    r#"    li t4, 0x107B"#,
    r#"    beq t3, t4, 23f"#,
    r#"    li t4, 0x307B"#,
    r#"    beq t3, t4, 24f"#,
    // p.ror: funct7 0000100, funct3 101, opcode 0110011
    r#"    li t4, 0xFE00707F"#,
    r#"    and t3, t1, t4"#,
    r#"    li t4, 0x08005033"#,
    r#"    beq t3, t4, 1f"#,
    // pv.srl.sci.b / pv.sll.sci.b: funct6 010000 / 010100, funct3 111, opcode 1010111
    r#"    li t4, 0xFC00707F"#,
    r#"    and t3, t1, t4"#,
    r#"    li t4, 0x40007057"#,
    r#"    beq t3, t4, 2f"#,
    r#"    li t4, 0x50007057"#,
    r#"    beq t3, t4, 3f"#,
    // pv.srl.b / pv.sll.b: funct6 010000 / 010100, bit 25 clear, funct3 001, opcode 1010111
    r#"    li t4, 0xFE00707F"#,
    r#"    and t3, t1, t4"#,
    r#"    li t4, 0x40001057"#,
    r#"    beq t3, t4, 4f"#,
    r#"    li t4, 0x50001057"#,
    r#"    beq t3, t4, 5f"#,
    r#"    j 9f"#,
    // p.ror rd, rs1, rs2
    r#"1:  srli t3, t1, 20"#,
    r#"    andi t3, t3, 31"#,
    r#"    slli t3, t3, 2"#,
    r#"    add t3, t3, sp"#,
    r#"    lw t3, 0(t3)"#,
    r#"    srl t4, t2, t3"#,
    r#"    neg t5, t3"#,
    r#"    sll t5, t2, t5"#,
    r#"    or t4, t4, t5"#,
    r#"    li t6, 0"#,
    r#"    j 8f"#,
    // imm = insn[25] | insn[24:20] << 1; byte shifts use imm[2:0]
    r#"2:  srli t3, t1, 19"#,
    r#"    andi t3, t3, 62"#,
    r#"    srli t5, t1, 25"#,
    r#"    andi t5, t5, 1"#,
    r#"    or t3, t3, t5"#,
    r#"    andi t3, t3, 7"#,
    r#"    srl t4, t2, t3"#,
    r#"    li t5, 0xff"#,
    r#"    srl t5, t5, t3"#,
    r#"    li t3, 0x01010101"#,
    r#"    mul t5, t5, t3"#,
    r#"    and t4, t4, t5"#,
    r#"    li t6, 4"#,
    r#"    j 8f"#,
    r#"3:  srli t3, t1, 19"#,
    r#"    andi t3, t3, 62"#,
    r#"    srli t5, t1, 25"#,
    r#"    andi t5, t5, 1"#,
    r#"    or t3, t3, t5"#,
    r#"    andi t3, t3, 7"#,
    r#"    sll t4, t2, t3"#,
    r#"    li t5, 0xff"#,
    r#"    sll t5, t5, t3"#,
    r#"    andi t5, t5, 0xff"#,
    r#"    li t3, 0x01010101"#,
    r#"    mul t5, t5, t3"#,
    r#"    and t4, t4, t5"#,
    r#"    li t6, 8"#,
    r#"    j 8f"#,
    // Per-byte shifts: byte i of rs1 (t2) by bits 2:0 of byte i of rs2 (t3), four fixed rounds.
    r#"4:  li t6, 12"#,
    r#"    j 6f"#,
    r#"5:  li t6, 16"#,
    r#"6:  srli t3, t1, 20"#,
    r#"    andi t3, t3, 31"#,
    r#"    slli t3, t3, 2"#,
    r#"    add t3, t3, sp"#,
    r#"    lw t3, 0(t3)"#,
    r#"    li t4, 0"#,
    r#"    li a0, 0"#,
    r#"61: srl a1, t2, a0"#,
    r#"    andi a1, a1, 0xff"#,
    r#"    srl a2, t3, a0"#,
    r#"    andi a2, a2, 7"#,
    r#"    srl a3, a1, a2"#,
    r#"    sll a1, a1, a2"#,
    r#"    andi a1, a1, 0xff"#,
    r#"    li a4, 12"#,
    r#"    beq t6, a4, 62f"#,
    r#"    mv a3, a1"#,
    r#"62: sll a3, a3, a0"#,
    r#"    or t4, t4, a3"#,
    r#"    addi a0, a0, 8"#,
    r#"    li a4, 32"#,
    r#"    bne a0, a4, 61b"#,
    r#"    j 8f"#,
    // p.lw: t4 = Mem32(rs1); rs1 += sext(imm[11:0]) (written before rd)
    r#"21: lw t4, 0(t2)"#,
    r#"    srai t3, t1, 20"#,
    r#"    add t3, t3, t2"#,
    r#"    srli a0, t1, 15"#,
    r#"    andi a0, a0, 31"#,
    r#"    slli a0, a0, 2"#,
    r#"    add a0, a0, sp"#,
    r#"    sw t3, 0(a0)"#,
    r#"    li t6, 20"#,
    r#"    j 8f"#,
    // lp.starti / lp.endi x0, uimm: pc + 2 * uimm; lp.counti x0, uimm. Loop 1 is not emulated.
    r#"22: li t6, 24"#,
    r#"    li a1, 0"#,
    r#"    j 25f"#,
    r#"23: li t6, 28"#,
    r#"    li a1, 4"#,
    r#"25: srli a0, t1, 20"#,
    r#"    slli a0, a0, 1"#,
    r#"    add a0, a0, t0"#,
    r#"    j 26f"#,
    r#"24: li t6, 32"#,
    r#"    li a1, 8"#,
    r#"    srli a0, t1, 20"#,
    r#"26: andi t3, t1, 0x80"#,
    r#"    bnez t3, 9f"#,
    r#"    la t3, aes_pulp_emu_lp"#,
    r#"    add t3, t3, a1"#,
    r#"    sw a0, 0(t3)"#,
    r#"    li t4, 0"#,
    r#"    j 8f"#,
    // Marker right after the loop end: the end instruction just ran; jump back to the start
    // while the count stays above 1 (GAP8 does this in hardware), else fall through. Both ways
    // take the same number of instructions.
    r#"20: la t3, aes_pulp_emu_lp"#,
    r#"    lw a0, 4(t3)"#,
    r#"    addi a0, a0, 4"#,
    r#"    bne a0, t0, 9f"#,
    r#"    lw a1, 8(t3)"#,
    r#"    li a2, 1"#,
    r#"    li t4, 0"#,
    r#"    bgeu a2, a1, 27f"#,
    r#"    addi a1, a1, -1"#,
    r#"    sw a1, 8(t3)"#,
    r#"    lw t0, 0(t3)"#,
    r#"    addi t0, t0, -4"#,
    r#"    li t6, 36"#,
    r#"    j 8f"#,
    r#"27: sw zero, 8(t3)"#,
    r#"    mv t0, t0"#,
    r#"    nop"#,
    r#"    nop"#,
    r#"    li t6, 40"#,
    r#"    j 8f"#,
    // write rd, count, skip the instruction
    r#"8:  srli t1, t1, 7"#,
    r#"    andi t1, t1, 31"#,
    r#"    slli t1, t1, 2"#,
    r#"    add t1, t1, sp"#,
    r#"    sw t4, 0(t1)"#,
    r#"    addi t0, t0, 4"#,
    r#"    csrw mepc, t0"#,
    r#"    la t0, aes_pulp_emu_traps"#,
    r#"    add t0, t0, t6"#,
    r#"    lw t1, 0(t0)"#,
    r#"    addi t1, t1, 1"#,
    r#"    sw t1, 0(t0)"#,
    r#"    j 7f"#,
    // Not emulated: hand the trap back to the runtime (re-executing the instruction).
    r#"9:  la t0, aes_pulp_emu_old_mtvec"#,
    r#"    lw t0, 0(t0)"#,
    r#"    csrw mtvec, t0"#,
    r#"7:  lw x1, 4(sp)"#,
    r#"    .irp r, 3,4,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20,21,22,23,24,25,26,27,28,29,30,31"#,
    r#"    lw x\r, (\r*4)(sp)"#,
    r#"    .endr"#,
    r#"    lw t0, 8(sp)"#,
    r#"    csrw mscratch, t0"#,
    r#"    lw t0, 20(sp)"#,
    r#"    csrrw sp, mscratch, sp"#,
    r#"    mret"#,
);

unsafe extern "C" {
    static aes_pulp_emu_traps: [u32; KINDS];
    static mut aes_pulp_emu_old_mtvec: u32;
    static aes_pulp_emu_regs: u8;
    fn aes_pulp_emu_trap();
}

/// The emulated kinds: `p.ror`, `pv.srl.sci.b`, `pv.sll.sci.b`, `pv.srl.b`, `pv.sll.b`, `p.lw`
/// (post-increment), `lp.starti`, `lp.endi`, `lp.counti`, and the hardware-loop marker
/// (`p.ror zero, zero, zero` right after a loop's last instruction) jumping back / falling
/// through.
const KINDS: usize = 11;
/// Kind of a marker that jumped back: a GAP8 core retires nothing for it.
const LOOP_BACK: usize = 9;

/// While alive, the emulated PULP instructions execute instead of ending the program.
pub struct PulpEmu {
    /// Retired instructions one emulated instruction of each kind adds (trap entry to `mret`),
    /// beyond the 1 a PULP core retires for it.
    extra: [u64; KINDS],
}

fn traps() -> [u64; KINDS] {
    // SAFETY: words in .bss written only by the trap handler, which runs synchronously on this
    // single hart; volatile reads see their last values.
    let t = unsafe { core::ptr::read_volatile(core::ptr::addr_of!(aes_pulp_emu_traps)) };
    t.map(u64::from)
}

/// Retired instructions of the marker `p.ror zero, zero, zero` after a hardware loop's end with
/// `count` left (2: jumps back, 1: falls through), minus a `nop` in its place. Both sequences
/// set the loop state with the same (emulated) lp.starti / lp.endi / lp.counti words.
fn marker_extra(count: u32) -> u64 {
    macro_rules! seq {
        ($counti:literal, $last:literal) => {{
            // SAFETY: lp.* only set the emulator's loop state; the marker then continues at the
            // instruction after itself either way (the loop start is set there).
            count_instructions(|| unsafe {
                core::arch::asm!(
                    ".option push",
                    ".option norvc",
                    ".insn 4, 0x00a0007b", // lp.starti x0, 20: start = 5 words on
                    ".insn 4, 0x0040107b", // lp.endi x0, 8: end = the addi
                    $counti,
                    "addi zero, zero, 0",
                    $last,
                    ".option pop",
                    options(nomem, nostack)
                )
            })
            .1
        }};
    }
    let (with, without) = if count == 2 {
        (
            seq!(".insn 4, 0x0020307b", ".insn 4, 0x08005033"),
            seq!(".insn 4, 0x0020307b", "addi zero, zero, 0"),
        )
    } else {
        (
            seq!(".insn 4, 0x0010307b", ".insn 4, 0x08005033"),
            seq!(".insn 4, 0x0010307b", "addi zero, zero, 0"),
        )
    };
    with - without
}

/// Retired instructions of `insn` (one word, `t0 = op(t0, t1)`) minus those of `addi t0, t0, 0`
/// in the same place, and whether it produced `want` from `x` and `n`.
macro_rules! probe {
    ($word:literal, $x:expr, $n:expr, $want:expr) => {{
        let mut v: u32 = $x;
        // SAFETY: a register-only instruction, emulated by the handler just installed.
        let (_, with) = count_instructions(|| unsafe {
            core::arch::asm!(concat!(".insn 4, ", $word), inout("t0") v, in("t1") $n,
                options(nomem, nostack))
        });
        let mut w: u32 = $x;
        // SAFETY: a register-only instruction.
        let (_, without) = count_instructions(|| unsafe {
            core::arch::asm!("addi t0, t0, 0", inout("t0") w, in("t1") $n, options(nomem, nostack))
        });
        core::hint::black_box(&mut w);
        (with - without, v == $want)
    }};
}

impl PulpEmu {
    /// Installs the handler and calibrates it; the runtime's vector is restored on drop.
    pub fn install() -> Result<Self, &'static str> {
        let old: u32;
        // SAFETY: machine mode on QEMU virt; the handler saves and restores every register,
        // keeps its own save area (mscratch) and only changes mepc past an emulated instruction.
        unsafe {
            core::arch::asm!("csrr {0}, mtvec", out(reg) old);
            core::ptr::write_volatile(core::ptr::addr_of_mut!(aes_pulp_emu_old_mtvec), old);
            let regs = core::ptr::addr_of!(aes_pulp_emu_regs) as usize;
            core::arch::asm!("csrw mscratch, {0}", in(reg) regs);
            core::arch::asm!("csrw mtvec, {0}", in(reg) aes_pulp_emu_trap as *const () as usize);
        }
        let t0 = traps();
        // p.ror t0, t0, t1 = 0x0862D2B3; pv.srl.sci.b t0, t0, 2 = 0x4012F2D7;
        // pv.sll.sci.b t0, t0, 6 = 0x5032F2D7 (fields as in gen.py's encoder).
        let (e0, ok0) = probe!("0x0862d2b3", 0x1234_5678, 8u32, 0x7812_3456);
        let (e1, ok1) = probe!("0x4012f2d7", 0x1234_56f8, 0u32, 0x040d_153e);
        let (e2, ok2) = probe!("0x5032f2d7", 0x1234_5679, 0u32, 0x8000_8040);
        // pv.srl.b t0, t0, t1 = 0x406292D7; pv.sll.b t0, t0, t1 = 0x506292D7, with the AES
        // kernel's ShiftRows amount words (gen.py VA_VALUE / VB_VALUE).
        let (e3, ok3) = probe!("0x406292d7", 0x1234_5678, 0x0604_0208u32, 0x0003_1578);
        let (e4, ok4) = probe!("0x506292d7", 0x1234_5678, 0x0204_0610u32, 0x4840_8078);
        // p.ror rotates by rs2[4:0]: the kernel rotates by VA_VALUE (bits 4:0 = 8).
        let (e5, ok5) = probe!("0x0862d2b3", 0x1234_5678, 0x0604_0208u32, 0x7812_3456);
        // p.lw t0, 4(t1!) = 0x0043228B: t0 = *t1, t1 += 4.
        let word = [0x5a5a_1234u32, 0];
        let mut ptr = word.as_ptr();
        let mut v = 0u32;
        // SAFETY: loads the word `ptr` points at (emulated) and advances `ptr` by 4, still inside
        // `word`.
        let (_, with) = count_instructions(|| unsafe {
            core::arch::asm!(".insn 4, 0x0043228b", inout("t0") v, inout("t1") ptr,
                options(nostack, readonly))
        });
        let ok6 = v == 0x5a5a_1234 && ptr == word[1..].as_ptr();
        let mut w = 0u32;
        let mut ptr2 = word.as_ptr();
        // SAFETY: a register-only instruction (same operands as the measured p.lw).
        let (_, without) = count_instructions(|| unsafe {
            core::arch::asm!("addi t0, t0, 0", inout("t0") w, inout("t1") ptr2,
                options(nostack, readonly))
        });
        core::hint::black_box((&mut w, &mut ptr2));
        let e6 = with - without;
        // lp.starti x0, 20 / lp.endi x0, 8 / lp.counti x0, 1 (state only).
        let (e7, _) = probe!("0x00a0007b", 0, 0u32, 0);
        let (e8, _) = probe!("0x0040107b", 0, 0u32, 0);
        let (e9, _) = probe!("0x0010307b", 0, 0u32, 0);
        // The marker, jumping back (count 2) and falling through (count 1): loop state set so
        // that the end is the instruction before the marker and the start the one after it.
        let (e10, e11) = (marker_extra(2), marker_extra(1));
        let want = [2, 1, 1, 1, 1, 1, 1 + 4, 1 + 4, 1 + 4, 1, 1];
        if !(ok0 && ok1 && ok2 && ok3 && ok4 && ok5 && ok6 && e5 == e0)
            || traps()
                .iter()
                .zip(t0)
                .zip(want)
                .any(|((a, b), w)| *a != b + w)
        {
            return Err("PULP instruction emulation does not work");
        }
        let mut extra = [e0, e1, e2, e3, e4, e6, e7, e8, e9, e10, e11];
        // A marker that jumps back stands for no instruction at all on GAP8.
        extra[LOOP_BACK] += 1;
        Ok(PulpEmu { extra })
    }

    /// Instructions a PULP core retires for `f` (each emulated instruction counted once).
    pub fn count<R>(&self, f: impl FnOnce() -> R) -> (R, u64) {
        let t0 = traps();
        let (r, n) = count_instructions(f);
        let t1 = traps();
        let extra: u64 = (0..KINDS).map(|k| (t1[k] - t0[k]) * self.extra[k]).sum();
        (r, n - extra)
    }

    /// Emulated instructions so far, by kind (see `KINDS`).
    pub fn traps(&self) -> [u64; KINDS] {
        traps()
    }

    /// Retired instructions one emulated `p.ror` adds.
    pub fn extra(&self) -> u64 {
        self.extra[0]
    }
}

impl Drop for PulpEmu {
    fn drop(&mut self) {
        // SAFETY: puts back the runtime's trap vector saved by `install`.
        unsafe {
            let old = core::ptr::read_volatile(core::ptr::addr_of!(aes_pulp_emu_old_mtvec));
            core::arch::asm!("csrw mtvec, {0}", in(reg) old);
        }
    }
}
