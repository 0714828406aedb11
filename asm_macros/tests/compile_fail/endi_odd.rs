const _: &str = asm_macros::lp_endi!(x1, 7);

fn main() {}
