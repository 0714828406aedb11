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
    r#"aes_pulp_emu_traps: .zero 20"#,
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

/// The emulated instructions: `p.ror`, `pv.srl.sci.b`, `pv.sll.sci.b`, `pv.srl.b`, `pv.sll.b`.
const KINDS: usize = 5;

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
        let want = [2, 1, 1, 1, 1];
        if !(ok0 && ok1 && ok2 && ok3 && ok4 && ok5 && e5 == e0)
            || traps()
                .iter()
                .zip(t0)
                .zip(want)
                .any(|((a, b), w)| *a != b + w)
        {
            return Err("PULP instruction emulation does not work");
        }
        Ok(PulpEmu {
            extra: [e0, e1, e2, e3, e4],
        })
    }

    /// Instructions a PULP core retires for `f` (each emulated instruction counted once).
    pub fn count<R>(&self, f: impl FnOnce() -> R) -> (R, u64) {
        let t0 = traps();
        let (r, n) = count_instructions(f);
        let t1 = traps();
        let extra: u64 = (0..KINDS).map(|k| (t1[k] - t0[k]) * self.extra[k]).sum();
        (r, n - extra)
    }

    /// Emulated instructions so far: `p.ror`, `pv.srl.sci.b`, `pv.sll.sci.b`, `pv.srl.b`,
    /// `pv.sll.b`.
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
