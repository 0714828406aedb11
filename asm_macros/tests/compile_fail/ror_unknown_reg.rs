const _: &str = asm_macros::p_ror!(a0, a0, q1);

fn main() {}
