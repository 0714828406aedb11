const _: &str = asm_macros::lp_setup!(x0, a1, 4);

fn main() {}
