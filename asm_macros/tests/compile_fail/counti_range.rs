const _: &str = asm_macros::lp_counti!(x0, 4096);

fn main() {}
