// The golden words of asm_macros, one table for everything that checks them: included by
// `asm_macros/tests/macros.rs` (expansions, GNU as, LLVM) and by `xtask/src/pulp.rs` (the words
// LLVM assembled into the PULP kernels' rlib). Each word comes from the RI5CY / PULP manuals; see
// `asm_macros/src/encode.rs` for the field layout of every form. The macros must be in scope where
// this file is included.

/// (macro expansion, intended word) of the post-increment loads/stores, `p.ror` and the hardware
/// loops, edge registers and edge immediates included, in the order of the ChaCha20 PULP kernel's
/// `gap_pulp_encoding_table` (`gap_rust_cipher_s/src/chacha/pulp.rs`).
fn golden_scalar() -> Vec<(&'static str, u32)> {
    vec![
        (p_ror!(a0, a0, a1), 0x08B5_5533),
        (p_ror!(x31, x31, x31), 0x09FF_DFB3),
        (p_ror!(zero, t6, ra), 0x081F_D033),
        (p_lw!(a2, 4(a3!)), 0x0046_A60B),
        (p_lw!(x31, 2047(x31!)), 0x7FFF_AF8B),
        (p_lw!(ra, -2048(zero!)), 0x8000_208B),
        (p_lw!(t0, -4(sp!)), 0xFFC1_228B),
        (p_lw!(a0, a1(a2!)), 0x20B6_750B),
        (p_lw!(x31, x31(x31!)), 0x21FF_FF8B),
        (p_lw!(x1, x0(x31!)), 0x200F_F08B),
        (p_sw!(a2, 4(a3!)), 0x00C6_A22B),
        (p_sw!(x31, 2047(x31!)), 0x7FFF_AFAB),
        (p_sw!(zero, -2048(ra!)), 0x8000_A02B),
        (p_sw!(a0, a1(a2!)), 0x00A6_65AB),
        (p_sw!(x31, x31(x31!)), 0x01FF_EFAB),
        (p_sw!(x0, x31(x1!)), 0x0000_EFAB),
        (lp_starti!(x0, 0), 0x0000_007B),
        (lp_starti!(1, 8), 0x0040_00FB),
        (lp_starti!(x0, 8190), 0xFFF0_007B),
        (lp_endi!(x0, 0), 0x0000_107B),
        (lp_endi!(x1, 384), 0x0C00_10FB),
        (lp_endi!(0, 8190), 0xFFF0_107B),
        (lp_count!(x0, zero), 0x0000_207B),
        (lp_count!(x1, a0), 0x0005_20FB),
        (lp_count!(x0, x31), 0x000F_A07B),
        (lp_counti!(x0, 9), 0x0090_307B),
        (lp_counti!(x1, 1), 0x0010_30FB),
        (lp_counti!(x0, 4095), 0xFFF0_307B),
        (lp_setup!(x1, t1, 8), 0x0043_40FB),
        (lp_setup!(x0, a1, 384), 0x0C05_C07B),
        (lp_setup!(x0, x31, 8190), 0xFFFF_C07B),
        (lp_setupi!(x0, 10, 16), 0x00A4_507B),
        (lp_setupi!(x1, 4095, 62), 0xFFFF_D0FB),
        (lp_setupi!(0, 1, 8), 0x0012_507B),
        // The PULP Poly1305 block loop's own words (gap_rust_cipher_s/src/poly1305/pulp.rs).
        (p_lw!(t0, 4(t6!)), 0x004F_A28B),
        (p_lw!(t2, 4(t6!)), 0x004F_A38B),
        (p_lw!(t3, 4(t6!)), 0x004F_AE0B),
        (p_lw!(t4, 4(t6!)), 0x004F_AE8B),
        (lp_setup!(x0, t1, 544), 0x1103_407B),
    ]
}

/// (macro expansion, intended word) of the packed-SIMD byte shifts (`pv.*.b`, the AES kernel).
fn golden_simd() -> Vec<(&'static str, u32)> {
    vec![
        (pv_srl_sci_b!(a0, a1, 2), 0x4015_F557),
        (pv_srl_sci_b!(x31, x31, 7), 0x423F_FFD7),
        (pv_srl_sci_b!(ra, zero, 1), 0x4200_70D7),
        (pv_sll_sci_b!(a0, a1, 6), 0x5035_F557),
        (pv_sll_sci_b!(ra, zero, 4), 0x5020_70D7),
        (pv_sll_sci_b!(t6, t6, 7), 0x523F_FFD7),
        (pv_srl_b!(a0, a1, a2), 0x40C5_9557),
        (pv_srl_b!(x31, x31, x31), 0x41FF_9FD7),
        (pv_srl_b!(ra, t6, zero), 0x400F_90D7),
        (pv_sll_b!(a0, a1, a2), 0x50C5_9557),
        (pv_sll_b!(x31, x31, x31), 0x51FF_9FD7),
        (pv_sll_b!(zero, ra, t6), 0x51F0_9057),
        // Halfword SIMD, bit manipulation and p.addRN (the Poly1305 radix-2^13 kernel).
        (pv_add_h!(a0, a1, a2), 0x00C5_8557),
        (pv_dotsp_h!(x31, x31, x31), 0x99FF_8FD7),
        (pv_sdotsp_h!(a0, a1, a2), 0xB8C5_8557),
        (pv_pack_h!(t6, ra, zero), 0xD000_8FD7),
        (p_extracti!(a0, a1, 12, 0), 0xD805_8533),
        (p_extractui!(a0, a1, 12, 13), 0xD8D5_9533),
        (p_inserti!(a0, a1, 6, 6), 0xCC65_A533),
        (p_addrni!(a0, a1, zero, 13), 0x1A05_E55B),
        // The JPEG DCT kernel and entropy coder (gapstream_jpeg/src/pulp.rs).
        (pv_sub_h!(a0, a1, a2), 0x08C5_8557),
        (pv_sub_h!(x31, x31, x31), 0x09FF_8FD7),
        (pv_shuffle_sci_h!(a0, a1, 1), 0xC205_E557),
        (pv_shuffle_sci_h!(t6, t6, 3), 0xC21F_EFD7),
        (p_fl1!(a0, a1), 0x1005_9533),
        (p_fl1!(x31, x31), 0x100F_9FB3),
        (p_ff1!(a0, a1), 0x1005_8533),
        (p_ff1!(x31, x31), 0x100F_8FB3),
        (pv_abs_h!(a0, a1), 0x7005_8557),
        (pv_abs_h!(x31, x31), 0x700F_8FD7),
        (p_abs!(a0, a1), 0x0405_8533),
        (p_abs!(x31, x31), 0x040F_8FB3),
        (p_lbu!(a0, 1(a2!)), 0x0016_450B),
        (p_lbu!(x31, 2047(x31!)), 0x7FFF_CF8B),
        (p_lh_rr!(a0, a1(a2)), 0x10B6_7503),
        (p_lh_rr!(x31, x31(x31)), 0x11FF_FF83),
        (p_lw_rr!(a0, a1(a2)), 0x20B6_7503),
        (p_lw_rr!(x31, x31(x31)), 0x21FF_FF83),
        (p_sh!(t5, a0(a1)), 0x01E5_D523),
        (p_sh!(x31, x31(x31)), 0x01FF_DFA3),
        // The block coder's AC loop: `p.cnt` for its count, the coder entries' 27 code bits.
        (p_cnt!(a0, a1), 0x1005_B533),
        (p_cnt!(t1, s8), 0x100C_3333),
        (p_cnt!(x31, x31), 0x100F_BFB3),
        (p_extractui!(t3, t3, 26, 0), 0xF40E_1E33),
        (lp_setup!(x0, t1, 136), 0x0443_407B),
        (p_lh_rr!(t2, t2(a0)), 0x1075_7383),
        // The AC loop's quantiser: |x| times both halves of (shift + 256 at, recip - that).
        (pv_sdotup_sc_h!(a0, a1, a2), 0xA0C5_C557),
        (pv_sdotup_sc_h!(t3, t4, t0), 0xA05E_CE57),
        // A full word of the bit writer stored big-endian at once (bytes reversed).
        (pv_shuffle_b!(a0, a1, a2), 0xC0C5_9557),
        (pv_shuffle_b!(t2, t2, s7), 0xC173_93D7),
        (pv_shuffle_b!(x31, x31, x31), 0xC1FF_9FD7),
        // The AC loop's bit clear and category (`p.bclr`, `p.clb`), the 0xFF-byte test of a
        // full word (`pv.cmpeq.sci.b`) and its post-increment store.
        (p_bclr!(a0, a1, a2), 0x80C5_B533),
        (p_bclr!(s8, s8, t0), 0x805C_3C33),
        (p_bclr!(x31, x31, x31), 0x81FF_BFB3),
        (p_clb!(a0, a1), 0x1005_A533),
        (p_clb!(t1, t0), 0x1002_A333),
        (p_clb!(x31, x31), 0x100F_AFB3),
        (pv_cmpeq_sci_b!(t1, t2, -1), 0x07F3_F357),
        (pv_cmpeq_sci_b!(a0, a1, 1), 0x0605_F557),
        (pv_cmpeq_sci_b!(x31, x31, -32), 0x050F_FFD7),
        (p_sw!(t2, 4(a6!)), 0x0078_222B),
        (lp_setup!(x0, t1, 120), 0x03C3_407B),
        (p_mac!(t3, t0, t4), 0x43D2_8E33),
        (p_mac!(t1, t4, t2), 0x427E_8333),
        // The zero mask: the sign bytes of two words of compare results in one.
        (pv_shuffle2_b!(a0, a1, a2), 0xC8C5_9557),
        (pv_shuffle2_b!(t0, t5, a3), 0xC8DF_12D7),
        (pv_shuffle2_b!(x31, x31, x31), 0xC9FF_9FD7),
        // The AC loop's quantiser fields by register offset from four bases.
        (p_lhu_rr!(a0, a1(a2)), 0x50B6_7503),
        (p_lhu_rr!(t4, t1(s5)), 0x506A_FE83),
        (p_lhu_rr!(x31, x31(x31)), 0x51FF_FF83),
        (p_lbu!(t2, t1(a3)), 0x4066_F383),
        (p_lbu!(t5, t1(s6)), 0x406B_7F03),
        (p_lw_rr!(t3, t1(s4)), 0x206A_7E03),
        (lp_setup!(x0, t1, 116), 0x03A3_407B),
    ]
}

/// (macro expansion, intended word) of the JPEG-LS line coder's forms, in the order of
/// `gapstream_jpegls_pulp_encoding_table` (`gapstream_jpegls/src/pulp.rs`).
fn golden_jpegls() -> Vec<(&'static str, u32)> {
    vec![
        (p_lbu!(t0, 1(a1!)), 0x0015_C28B),
        (p_lbu!(x31, 2047(x31!)), 0x7FFF_CF8B),
        (p_lbu!(ra, -2048(zero!)), 0x8000_408B),
        (p_lbu!(a0, a1(a2)), 0x40B6_7503),
        (p_lbu!(x31, x31(x31)), 0x41FF_FF83),
        (p_lb!(t2, t2(a2)), 0x0076_7383),
        (p_lb!(x31, zero(x31)), 0x000F_FF83),
        (p_lb!(a0, -1(a1!)), 0xFFF5_850B),
        (p_sb!(t2, 1(a6!)), 0x0078_00AB),
        (p_sb!(x31, 2047(x31!)), 0x7FFF_8FAB),
        (p_sb!(zero, -2048(ra!)), 0x8000_802B),
        (p_mac!(s4, t2, s5), 0x4353_8A33),
        (p_mac!(x31, x31, x31), 0x43FF_8FB3),
        (p_msu!(s10, ra, t3), 0x43C0_9D33),
        (p_msu!(x31, x31, x31), 0x43FF_9FB3),
        (p_clipi!(s11, s11, 8), 0x148D_9DB3),
        (p_clipi!(x31, x31, 31), 0x15FF_9FB3),
        (p_clipur!(s10, s10, t6), 0x15FD_6D33),
        (p_clipur!(x31, x31, x31), 0x15FF_EFB3),
        (p_extbs!(s0, s0), 0x1004_6433),
        (p_extbs!(x31, ra), 0x1000_EFB3),
    ]
}
