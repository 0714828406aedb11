const _: &str = asm_macros::p_sw!(a0, 4(a1));

fn main() {}
