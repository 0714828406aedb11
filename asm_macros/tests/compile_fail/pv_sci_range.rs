const _: &str = asm_macros::pv_srl_sci_b!(a0, a1, 8);

fn main() {}
