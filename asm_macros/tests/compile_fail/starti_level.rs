const _: &str = asm_macros::lp_starti!(x2, 8);

fn main() {}
