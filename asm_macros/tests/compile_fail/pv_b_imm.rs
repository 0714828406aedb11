const _: &str = asm_macros::pv_sll_b!(a0, a1, 3);

fn main() {}
