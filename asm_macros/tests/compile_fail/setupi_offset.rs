const _: &str = asm_macros::lp_setupi!(x0, 10, 64);

fn main() {}
