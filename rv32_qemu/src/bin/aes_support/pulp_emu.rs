//! `p.ror` on QEMU: a machine-mode trap handler that emulates the PULP rotate, so the PULP
//! AES-128-CTR kernel can be cross-checked and its instructions counted on stock QEMU.
//!
//! Included with `#[path]` by `aes_vectors.rs` and `bench_aes.rs` (this directory has no
//! `main.rs`, so cargo and xtask do not treat it as a program).
//!
//! The handler accepts only illegal-instruction traps on a `p.ror` word (funct7 0000100,
//! funct3 101, opcode 0110011; `p.ror a0, a0, a1` = 0x08B55533); anything else restores the
//! runtime's trap vector and re-executes, so the runtime reports it. Its path is branch-free, so
//! every emulated `p.ror` costs the same number of retired instructions, which
//! [`PulpEmu::calibrate`] measures; [`PulpEmu::count`] turns a measured region into the count a
//! PULP core would retire (each `p.ror` = 1).
#![allow(dead_code)] // each including program uses a part

use rv32_qemu::count_instructions;

core::arch::global_asm!(
    r#".section .bss.aes_pulp_emu,"aw",@nobits"#,
    r#".p2align 4"#,
    r#"aes_pulp_emu_regs: .zero 128"#,
    r#".globl aes_pulp_emu_traps"#,
    r#"aes_pulp_emu_traps: .zero 4"#,
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
    r#"    bne t0, t1, 1f"#,
    r#"    csrr t0, mepc"#,
    r#"    lhu t1, 0(t0)"#,
    r#"    lhu t2, 2(t0)"#,
    r#"    slli t2, t2, 16"#,
    r#"    or t1, t1, t2"#,
    r#"    li t2, 0xFE00707F"#,
    r#"    and t3, t1, t2"#,
    r#"    li t2, 0x08005033"#,
    r#"    bne t3, t2, 1f"#,
    r#"    srli t2, t1, 15"#,
    r#"    andi t2, t2, 31"#,
    r#"    slli t2, t2, 2"#,
    r#"    add t2, t2, sp"#,
    r#"    lw t2, 0(t2)"#,
    r#"    srli t3, t1, 20"#,
    r#"    andi t3, t3, 31"#,
    r#"    slli t3, t3, 2"#,
    r#"    add t3, t3, sp"#,
    r#"    lw t3, 0(t3)"#,
    r#"    srl t4, t2, t3"#,
    r#"    neg t5, t3"#,
    r#"    sll t5, t2, t5"#,
    r#"    or t4, t4, t5"#,
    r#"    srli t1, t1, 7"#,
    r#"    andi t1, t1, 31"#,
    r#"    slli t1, t1, 2"#,
    r#"    add t1, t1, sp"#,
    r#"    sw t4, 0(t1)"#,
    r#"    addi t0, t0, 4"#,
    r#"    csrw mepc, t0"#,
    r#"    la t0, aes_pulp_emu_traps"#,
    r#"    lw t1, 0(t0)"#,
    r#"    addi t1, t1, 1"#,
    r#"    sw t1, 0(t0)"#,
    r#"    j 2f"#,
    // Not a p.ror: hand the trap back to the runtime (re-executing the instruction).
    r#"1:  la t0, aes_pulp_emu_old_mtvec"#,
    r#"    lw t0, 0(t0)"#,
    r#"    csrw mtvec, t0"#,
    r#"2:  lw x1, 4(sp)"#,
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
    static aes_pulp_emu_traps: u32;
    static mut aes_pulp_emu_old_mtvec: u32;
    static aes_pulp_emu_regs: u8;
    fn aes_pulp_emu_trap();
}

/// While alive, `p.ror` executes (emulated) instead of ending the program.
pub struct PulpEmu {
    /// Retired instructions of one emulated `p.ror` (trap entry to `mret`), minus the 1 a PULP
    /// core retires for it.
    extra: u64,
}

fn traps() -> u64 {
    // SAFETY: a word in .bss written only by the trap handler, which runs synchronously on this
    // single hart; a volatile read sees its last value.
    u64::from(unsafe { core::ptr::read_volatile(core::ptr::addr_of!(aes_pulp_emu_traps)) })
}

impl PulpEmu {
    /// Installs the handler; the runtime's vector is restored on drop.
    pub fn install() -> Result<Self, &'static str> {
        let old: u32;
        // SAFETY: machine mode on QEMU virt; the handler saves and restores every register,
        // keeps its own save area (mscratch) and only changes mepc past an emulated `p.ror`.
        unsafe {
            core::arch::asm!("csrr {0}, mtvec", out(reg) old);
            core::ptr::write_volatile(core::ptr::addr_of_mut!(aes_pulp_emu_old_mtvec), old);
            let regs = core::ptr::addr_of!(aes_pulp_emu_regs) as usize;
            core::arch::asm!("csrw mscratch, {0}", in(reg) regs);
            core::arch::asm!("csrw mtvec, {0}", in(reg) aes_pulp_emu_trap as *const () as usize);
        }
        // Check the emulation, then measure its cost: the same code with the `p.ror`
        // (`p.ror t0, t0, t1` = 0x0862D2B3) and with a one-instruction stand-in.
        let t0 = traps();
        let mut x = 0x1234_5678u32;
        // SAFETY: a register-only instruction, emulated by the handler just installed.
        let (_, with_pror) = count_instructions(|| unsafe {
            core::arch::asm!(".insn 4, 0x0862d2b3", inout("t0") x, in("t1") 8u32, options(nomem, nostack))
        });
        if x != 0x7812_3456 || traps() != t0 + 1 {
            return Err("p.ror emulation does not work");
        }
        let mut y = 0u32;
        // SAFETY: a register-only instruction.
        let (_, with_addi) = count_instructions(|| unsafe {
            core::arch::asm!("addi t0, t0, 0", inout("t0") y, in("t1") 8u32, options(nomem, nostack))
        });
        core::hint::black_box(&mut y);
        Ok(PulpEmu {
            extra: with_pror - with_addi,
        })
    }

    /// Instructions a PULP core retires for `f` (each emulated `p.ror` counted once).
    pub fn count<R>(&self, f: impl FnOnce() -> R) -> (R, u64) {
        let t0 = traps();
        let (r, n) = count_instructions(f);
        let k = traps() - t0;
        (r, n - k * self.extra)
    }

    /// Number of `p.ror` executed so far.
    pub fn traps(&self) -> u64 {
        traps()
    }

    /// Retired instructions one emulated `p.ror` adds.
    pub fn extra(&self) -> u64 {
        self.extra
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
