const _: &str = asm_macros::lp_count!(x1, s12);

fn main() {}
