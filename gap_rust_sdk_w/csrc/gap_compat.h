/* The PULP GCC builtins that the GAP8 pmsis headers expand to in the functions shims.c wraps,
 * written for a stock RISC-V GCC (Debian's riscv64-unknown-elf-gcc -march=rv32imc).
 * The GAP toolchain's own GCC defines them natively; this header then does nothing. */
#ifndef GAP_RUST_SDK_W_COMPAT_H
#define GAP_RUST_SDK_W_COMPAT_H
#if !defined(__riscv_xpulpv2) && !defined(__PULP__)
#define __builtin_pulp_spr_read(reg) \
    ({ unsigned int __v; __asm__ volatile("csrr %0, %1" : "=r"(__v) : "i"(reg)); __v; })
#define __builtin_pulp_spr_write(reg, val) \
    __asm__ volatile("csrw %0, %1" : : "i"(reg), "r"(val))
/* p.elw (event-unit load: sleeps until the event) = LOAD opcode with funct3 110. */
static inline unsigned int __gap_compat_elw(void *base, int offset)
{
    unsigned int v;
    char *addr = (char *) base + offset;
    __asm__ volatile(".insn i 0x03, 6, %0, 0(%1)" : "=r"(v) : "r"(addr) : "memory");
    return v;
}
#define __builtin_pulp_event_unit_read(base, offset) __gap_compat_elw((void *) (base), (offset))
#define __builtin_pulp_event_unit_read_fenced(base, offset) __gap_compat_elw((void *) (base), (offset))
#define __builtin_pulp_bextract(src, size, off) \
    ((int) ((unsigned int) (src) << (32 - (size) - (off))) >> (32 - (size)))
#define __builtin_pulp_binsert(dst, not_mask, src, mask, off) \
    (((dst) & (not_mask)) | (((src) << (off)) & (mask)))
#endif
#endif
