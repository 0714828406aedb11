//! Proc-macros that encode PULP-only RI5CY instructions as `.insn` words for `asm!` templates.
//! (Filled in by the kernel work.)
