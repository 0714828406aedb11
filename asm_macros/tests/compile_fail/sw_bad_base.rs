const _: &str = asm_macros::p_sw!(a0, a1(x32!));

fn main() {}
