const _: &str = asm_macros::lp_setupi!(x1, 0, 16);

fn main() {}
