/*
 * gap_gcc_compat.h: lets the GAP SDK's FreeRTOS / pmsis sources build with a stock RISC-V GCC
 * (Debian's riscv64-unknown-elf-gcc -march=rv32imc -misa-spec=2.2 -mabi=ilp32) instead of
 * GreenWaves' PULP GCC. Force-included into every C and assembly file of the firmware build
 * (`-include` in firmware/Makefile); written for this project, nothing here is copied from the SDK.
 *
 * What the PULP GCC has and a stock GCC lacks, and what the GAP8 sources actually use:
 *  - C builtins `__builtin_pulp_*` (CSR access, event-unit loads, bit fields, min/max/abs, core
 *    count): defined below as macros or inline functions with the same results in plain RV32IMC.
 *  - three hand-written Xpulp mnemonics in the SDK's assembly and inline asm: `p.elw` (event-unit
 *    load that sleeps until the event), `p.cnt` (population count), `p.bclr` (bit-field clear,
 *    immediate form). Defined as GNU as macros emitting the RI5CY encodings as `.insn` words
 *    (encodings: gvsoc/gvsoc/models/cpu/iss/isa_gen/isa_riscv_gen.py of the GAP SDK; pinned by
 *    firmware/tests/compat_insn.sh).
 *  - the `%tiny(sym)` relocation operator (GAP8 "tiny" FC-TCDM data addressed from x0) is not
 *    handled here: firmware/Makefile assembles the one SDK file that uses it with
 *    `-D'tiny(x)=lo(x)'` and checks after linking that the symbol lies below 2 KiB.
 *
 * When the real PULP GCC is used (__riscv_xpulpv2 / __PULP__ defined), this header does nothing.
 */
#ifndef GAPSTREAM_GAP_GCC_COMPAT_H
#define GAPSTREAM_GAP_GCC_COMPAT_H

#if !defined(__riscv_xpulpv2) && !defined(__PULP__)

#ifdef __ASSEMBLER__

/* p.elw rd, off(rs1): LOAD opcode (0x03) with funct3 = 6. */
.macro p.elw rd, addr
    .insn i 0x03, 6, \rd, \addr
.endm

/* p.cnt rd, rs1: 0001000 00000 rs1 011 rd 0110011. */
.macro p.cnt rd, rs1
    .insn r 0x33, 3, 0x08, \rd, \rs1, x0
.endm

/* p.bclr rd, rs1, Is3, Is2 (PULPv2 immediate form, clears Is3+1 bits from bit Is2):
 * 11 Is3[4:0] Is2[4:0] rs1 011 rd 0110011, i.e. an I-type word whose 12-bit immediate is
 * 0b11 << 10 | Is3 << 5 | Is2 (negative as a signed 12-bit value). */
.macro p.bclr rd, rs1, is3, is2
    .insn i 0x33, 3, \rd, \rs1, ((0xC00 | ((\is3) << 5) | (\is2)) - 0x1000)
.endm

#else /* C */

#include <stdint.h>

/* The same three mnemonics for inline asm in C files ("p.cnt %0, %1" in cl_team_internal.h). One
 * definition per translation unit: GNU as rejects a macro defined twice, so guard with a symbol. */
__asm__(
    ".ifndef __gap_gcc_compat_macros\n"
    ".set __gap_gcc_compat_macros, 1\n"
    ".macro p.elw rd, addr\n .insn i 0x03, 6, \\rd, \\addr\n.endm\n"
    ".macro p.cnt rd, rs1\n .insn r 0x33, 3, 0x08, \\rd, \\rs1, x0\n.endm\n"
    ".macro p.bclr rd, rs1, is3, is2\n .insn i 0x33, 3, \\rd, \\rs1, ((0xC00 | ((\\is3) << 5) | (\\is2)) - 0x1000)\n.endm\n"
    ".endif\n");

/* CSR access (the PULP GCC calls them SPRs). `reg` is a compile-time constant. */
#define __builtin_pulp_spr_read(reg) \
    ({ uint32_t __gcv; __asm__ volatile("csrr %0, %1" : "=r"(__gcv) : "i"(reg)); __gcv; })
#define __builtin_pulp_spr_write(reg, val) \
    __asm__ volatile("csrw %0, %1" : : "i"(reg), "r"((uint32_t) (val)))
#define __builtin_pulp_spr_bit_set(reg, val) \
    __asm__ volatile("csrs %0, %1" : : "i"(reg), "r"((uint32_t) (val)))
#define __builtin_pulp_spr_bit_clr(reg, val) \
    __asm__ volatile("csrc %0, %1" : : "i"(reg), "r"((uint32_t) (val)))
#define __builtin_pulp_read_then_spr_bit_set(reg, val) \
    ({ uint32_t __gcv; __asm__ volatile("csrrs %0, %1, %2" : "=r"(__gcv) : "i"(reg), "r"((uint32_t) (val))); __gcv; })
#define __builtin_pulp_read_then_spr_bit_clr(reg, val) \
    ({ uint32_t __gcv; __asm__ volatile("csrrc %0, %1, %2" : "=r"(__gcv) : "i"(reg), "r"((uint32_t) (val))); __gcv; })
#define __builtin_pulp_read_then_spr_write(reg, val) \
    ({ uint32_t __gcv; __asm__ volatile("csrrw %0, %1, %2" : "=r"(__gcv) : "i"(reg), "r"((uint32_t) (val))); __gcv; })

/* Event-unit load (p.elw): the core sleeps until the event arrives, then the load completes. */
static inline uint32_t __gap_gcc_compat_elw(const volatile void *base, int offset)
{
    uint32_t v;
    const volatile char *addr = (const volatile char *) base + offset;
    __asm__ volatile(".insn i 0x03, 6, %0, 0(%1)" : "=r"(v) : "r"(addr) : "memory");
    return v;
}
#define __builtin_pulp_event_unit_read(base, offset) \
    __gap_gcc_compat_elw((const volatile void *) (base), (int) (offset))
#define __builtin_pulp_event_unit_read_fenced(base, offset) \
    __gap_gcc_compat_elw((const volatile void *) (base), (int) (offset))

/* Plain load at base + offset. */
#define __builtin_pulp_OffsetedRead(base, offset) \
    (*(volatile uint32_t *) ((uintptr_t) (base) + (uintptr_t) (offset)))
#define __builtin_pulp_OffsetedWrite(value, base, offset) \
    (*(volatile uint32_t *) ((uintptr_t) (base) + (uintptr_t) (offset)) = (uint32_t) (value))

/* Core id / cluster id / number of cores, from mhartid (cluster_id << 5 | core_id). */
#define __builtin_pulp_CoreId() ((int) (__builtin_pulp_spr_read(0xF14) & 0x1f))
#define __builtin_pulp_ClusterId() ((int) ((__builtin_pulp_spr_read(0xF14) >> 5) & 0x3f))
#define __builtin_pulp_CoreCount() 8

/* Bit fields: extract `size` bits at `off` (sign- or zero-extended), insert. */
#define __builtin_pulp_bextract(src, size, off) \
    ((int32_t) ((uint32_t) (src) << (32 - (size) - (off))) >> (32 - (size)))
#define __builtin_pulp_bextractu(src, size, off) \
    (((uint32_t) (src) >> (off)) & (((size) >= 32) ? 0xffffffffu : ((1u << (size)) - 1u)))
#define __builtin_pulp_binsert(dst, not_mask, src, mask, off) \
    (((dst) & (not_mask)) | (((src) << (off)) & (mask)))

/* Scalar arithmetic. */
static inline int32_t __builtin_pulp_minsi(int32_t a, int32_t b) { return a < b ? a : b; }
static inline int32_t __builtin_pulp_maxsi(int32_t a, int32_t b) { return a > b ? a : b; }
static inline int32_t __builtin_pulp_abs(int32_t a) { return a < 0 ? -a : a; }
static inline int32_t __builtin_pulp_fl1(uint32_t a) { return a ? 31 - __builtin_clz(a) : 32; }
static inline int32_t __builtin_pulp_ff1(uint32_t a) { return a ? __builtin_ctz(a) : 32; }
static inline int32_t __builtin_pulp_cnt(uint32_t a) { return __builtin_popcount(a); }
static inline uint32_t __builtin_pulp_rotr(uint32_t a, uint32_t n)
{
    n &= 31;
    return n ? (a >> n) | (a << (32 - n)) : a;
}

#endif /* __ASSEMBLER__ */
#endif /* no PULP GCC */
#endif /* GAPSTREAM_GAP_GCC_COMPAT_H */
