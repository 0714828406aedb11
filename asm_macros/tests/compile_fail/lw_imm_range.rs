const _: &str = asm_macros::p_lw!(a0, 2048(a1!));

fn main() {}
