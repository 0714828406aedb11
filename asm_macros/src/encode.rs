//! Pure encoders: operands in, 32-bit instruction word out (or an error naming the bad operand).
//!
//! Encodings are the RI5CY / PULPv2 ("Xpulpv2", as in the GAP8) ones, from the RI5CY User Manual
//! rev. 4.4 (ETH Zürich / Univ. of Bologna, March 2020), chapter "Instruction Set Extensions":
//! "Post-Incrementing Load & Store Instructions > Encoding", "Hardware Loops > Encoding" and
//! "ALU > General ALU Operations > Encoding". They agree with GreenWaves' GAP8 binutils
//! (`include/opcode/riscv-opc.h`: `MATCH_LWPOST 0x200b`, `MATCH_LWRRPOST 0x2000700b`,
//! `MATCH_SWPOST 0x202b`, `MATCH_SWRRPOST 0x602b`, `MATCH_ROR 0x08005033`,
//! `MATCH_HWLP_STARTI 0x7b` … `MATCH_HWLP_SETUPI 0x507b`). They are *not* the later CV32E40P
//! "Xcorev" encodings (`cv.*`), which moved these instructions to other opcodes.

/// Opcode `custom-0` (0001011): post-increment loads.
pub const OP_LOAD_POST: u32 = 0b000_1011;
/// Opcode `custom-1` (0101011): post-increment stores.
pub const OP_STORE_POST: u32 = 0b010_1011;
/// Opcode `OP` (0110011): `p.ror` shares it with the RV32I/M register-register ALU operations.
pub const OP_OP: u32 = 0b011_0011;
/// Opcode `custom-3` (1111011): hardware loops.
pub const OP_HWLOOP: u32 = 0b111_1011;

/// Register number from an ABI name (`zero`, `ra`, `sp`, `gp`, `tp`, `t0`-`t6`, `s0`-`s11`, `fp`,
/// `a0`-`a7`) or an architectural name (`x0`-`x31`).
pub fn reg_number(name: &str) -> Option<u32> {
    const ABI: [&str; 32] = [
        "zero", "ra", "sp", "gp", "tp", "t0", "t1", "t2", "s0", "s1", "a0", "a1", "a2", "a3", "a4",
        "a5", "a6", "a7", "s2", "s3", "s4", "s5", "s6", "s7", "s8", "s9", "s10", "s11", "t3", "t4",
        "t5", "t6",
    ];
    if name == "fp" {
        return Some(8);
    }
    if let Some(i) = ABI.iter().position(|&n| n == name) {
        return Some(i as u32);
    }
    let digits = name.strip_prefix('x')?;
    // No leading zeros or signs: `x05` and `x+5` are not register names.
    if digits.is_empty() || (digits.len() > 1 && digits.starts_with('0')) {
        return None;
    }
    if !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let n: u32 = digits.parse().ok()?;
    (n < 32).then_some(n)
}

/// An operand that does not fit: which one, and why (turned into a compile error by the macros).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OperandError {
    pub operand: &'static str,
    pub message: String,
}

fn err<T>(operand: &'static str, message: String) -> Result<T, OperandError> {
    Err(OperandError { operand, message })
}

fn check_range(operand: &'static str, v: i64, lo: i64, hi: i64) -> Result<(), OperandError> {
    if v < lo || v > hi {
        return err(operand, format!("{v} is out of range {lo}..={hi}"));
    }
    Ok(())
}

fn check_even(operand: &'static str, v: i64) -> Result<(), OperandError> {
    if v % 2 != 0 {
        return err(
            operand,
            format!("{v} is odd; hardware-loop offsets are byte offsets in halfword units"),
        );
    }
    Ok(())
}

fn check_loop(l: u32) -> Result<(), OperandError> {
    if l > 1 {
        return err(
            "L",
            format!("loop level {l} does not exist (RI5CY has loops 0 and 1)"),
        );
    }
    Ok(())
}

fn r_type(funct7: u32, rs2: u32, rs1: u32, funct3: u32, rd: u32, opcode: u32) -> u32 {
    (funct7 << 25) | (rs2 << 20) | (rs1 << 15) | (funct3 << 12) | (rd << 7) | opcode
}

fn i_type(imm12: u32, rs1: u32, funct3: u32, rd: u32, opcode: u32) -> u32 {
    ((imm12 & 0xfff) << 20) | (rs1 << 15) | (funct3 << 12) | (rd << 7) | opcode
}

/// `p.ror rD, rs1, rs2`: rD = rs1 rotated right by rs2[4:0].
/// `0000100 | rs2 | rs1 | 101 | rD | 0110011`.
pub fn p_ror(rd: u32, rs1: u32, rs2: u32) -> u32 {
    r_type(0b000_0100, rs2, rs1, 0b101, rd, OP_OP)
}

/// `p.min rD, rs1, rs2`: rD = min(rs1, rs2), signed. `0000010 | rs2 | rs1 | 100 | rD | 0110011`.
pub fn p_min(rd: u32, rs1: u32, rs2: u32) -> u32 {
    r_type(0b000_0010, rs2, rs1, 0b100, rd, OP_OP)
}

/// `p.minu rD, rs1, rs2`: unsigned minimum. `0000010 | rs2 | rs1 | 101 | rD | 0110011`.
pub fn p_minu(rd: u32, rs1: u32, rs2: u32) -> u32 {
    r_type(0b000_0010, rs2, rs1, 0b101, rd, OP_OP)
}

/// `p.max rD, rs1, rs2`: rD = max(rs1, rs2), signed. `0000010 | rs2 | rs1 | 110 | rD | 0110011`.
pub fn p_max(rd: u32, rs1: u32, rs2: u32) -> u32 {
    r_type(0b000_0010, rs2, rs1, 0b110, rd, OP_OP)
}

/// `p.maxu rD, rs1, rs2`: unsigned maximum. `0000010 | rs2 | rs1 | 111 | rD | 0110011`.
pub fn p_maxu(rd: u32, rs1: u32, rs2: u32) -> u32 {
    r_type(0b000_0010, rs2, rs1, 0b111, rd, OP_OP)
}

/// `p.abs rD, rs1`: rD = |rs1|. `0000010 | 00000 | rs1 | 000 | rD | 0110011`.
pub fn p_abs(rd: u32, rs1: u32) -> u32 {
    r_type(0b000_0010, 0, rs1, 0b000, rd, OP_OP)
}

/// `p.fl1 rD, rs1`: rD = index of the most significant 1 of rs1 (32 when rs1 = 0).
/// `0001000 | 00000 | rs1 | 001 | rD | 0110011`.
pub fn p_fl1(rd: u32, rs1: u32) -> u32 {
    r_type(0b000_1000, 0, rs1, 0b001, rd, OP_OP)
}

/// `p.cnt rD, rs1`: rD = the number of set bits of rs1.
/// `0001000 | 00000 | rs1 | 011 | rD | 0110011`.
pub fn p_cnt(rd: u32, rs1: u32) -> u32 {
    r_type(0b000_1000, 0, rs1, 0b011, rd, OP_OP)
}

/// `p.clb rD, rs1`: rD = the number of leading bits of rs1 equal to its sign bit, minus one
/// (GCC's `__builtin_clrsb`; 0 when rs1 is 0): `30 - fl1(x)` for `x > 0`.
/// `0001000 | 00000 | rs1 | 010 | rD | 0110011`.
pub fn p_clb(rd: u32, rs1: u32) -> u32 {
    r_type(0b000_1000, 0, rs1, 0b010, rd, OP_OP)
}

/// `p.bclr rD, rs1, rs2` (register form): rD = rs1 with `rs2[9:5] + 1` bits cleared from bit
/// `rs2[4:0]` up (one bit when `rs2 < 32`). `1000000 | rs2 | rs1 | 011 | rD | 0110011`.
pub fn p_bclr(rd: u32, rs1: u32, rs2: u32) -> u32 {
    r_type(0b100_0000, rs2, rs1, 0b011, rd, OP_OP)
}

/// `p.clipu rD, rs1, Is2`: rD = rs1 clipped to 0..=2^(Is2−1)−1 (Is2 0..=31; 9 clips to a byte).
/// `0001010 | Is2 | rs1 | 010 | rD | 0110011`.
pub fn p_clipui(rd: u32, rs1: u32, is2: i64) -> Result<u32, OperandError> {
    check_range("Is2", is2, 0, 31)?;
    Ok(r_type(0b000_1010, is2 as u32, rs1, 0b010, rd, OP_OP))
}

/// `p.lw rD, Imm(rs1!)`: rD = Mem32(rs1); rs1 += Imm (Imm signed 12 bits).
/// `imm[11:0] | rs1 | 010 | rD | 0001011`.
pub fn p_lw_imm(rd: u32, imm: i64, rs1: u32) -> Result<u32, OperandError> {
    check_range("Imm", imm, -2048, 2047)?;
    Ok(i_type(imm as u32, rs1, 0b010, rd, OP_LOAD_POST))
}

/// `p.lw rD, rs2(rs1!)`: rD = Mem32(rs1); rs1 += rs2.
/// `0010000 | rs2 | rs1 | 111 | rD | 0001011`.
pub fn p_lw_reg(rd: u32, rs2: u32, rs1: u32) -> u32 {
    r_type(0b001_0000, rs2, rs1, 0b111, rd, OP_LOAD_POST)
}

/// `p.sw rs2, Imm(rs1!)`: Mem32(rs1) = rs2; rs1 += Imm (Imm signed 12 bits).
/// `imm[11:5] | rs2 | rs1 | 010 | imm[4:0] | 0101011`.
pub fn p_sw_imm(rs2: u32, imm: i64, rs1: u32) -> Result<u32, OperandError> {
    check_range("Imm", imm, -2048, 2047)?;
    let imm = imm as u32 & 0xfff;
    Ok(((imm >> 5) << 25)
        | (rs2 << 20)
        | (rs1 << 15)
        | (0b010 << 12)
        | ((imm & 0x1f) << 7)
        | OP_STORE_POST)
}

/// `p.sw rs2, rs3(rs1!)`: Mem32(rs1) = rs2; rs1 += rs3. The offset register rs3 sits in the rD field.
/// `0000000 | rs2 | rs1 | 110 | rs3 | 0101011`.
pub fn p_sw_reg(rs2: u32, rs3: u32, rs1: u32) -> u32 {
    r_type(0, rs2, rs1, 0b110, rs3, OP_STORE_POST)
}

/// Opcode `LOAD` (0000011): the register-register loads share it with the RV32I loads.
pub const OP_LOAD: u32 = 0b000_0011;

/// `p.lbu rD, Imm(rs1!)`: rD = zero-extended Mem8(rs1); rs1 += Imm (signed 12 bits).
/// `imm[11:0] | rs1 | 100 | rD | 0001011`. Binutils: MATCH_LBUPOST 0x400b.
pub fn p_lbu_imm(rd: u32, imm: i64, rs1: u32) -> Result<u32, OperandError> {
    check_range("Imm", imm, -2048, 2047)?;
    Ok(i_type(imm as u32, rs1, 0b100, rd, OP_LOAD_POST))
}

/// `p.lb rD, Imm(rs1!)`: rD = sign-extended Mem8(rs1); rs1 += Imm (signed 12 bits).
/// `imm[11:0] | rs1 | 000 | rD | 0001011`. Binutils: MATCH_LBPOST 0x000b.
pub fn p_lb_imm(rd: u32, imm: i64, rs1: u32) -> Result<u32, OperandError> {
    check_range("Imm", imm, -2048, 2047)?;
    Ok(i_type(imm as u32, rs1, 0b000, rd, OP_LOAD_POST))
}

/// `p.lbu rD, rs2(rs1)`: rD = zero-extended Mem8(rs1 + rs2) (no increment).
/// `0100000 | rs2 | rs1 | 111 | rD | 0000011`. Binutils: MATCH_LBURR 0x40007003.
pub fn p_lbu_rr(rd: u32, rs2: u32, rs1: u32) -> u32 {
    r_type(0b010_0000, rs2, rs1, 0b111, rd, OP_LOAD)
}

/// `p.lb rD, rs2(rs1)`: rD = sign-extended Mem8(rs1 + rs2) (no increment).
/// `0000000 | rs2 | rs1 | 111 | rD | 0000011`. Binutils: MATCH_LBRR 0x00007003.
pub fn p_lb_rr(rd: u32, rs2: u32, rs1: u32) -> u32 {
    r_type(0, rs2, rs1, 0b111, rd, OP_LOAD)
}

/// `p.sb rs2, Imm(rs1!)`: Mem8(rs1) = rs2; rs1 += Imm (signed 12 bits).
/// `imm[11:5] | rs2 | rs1 | 000 | imm[4:0] | 0101011`. Binutils: MATCH_SBPOST 0x002b.
pub fn p_sb_imm(rs2: u32, imm: i64, rs1: u32) -> Result<u32, OperandError> {
    check_range("Imm", imm, -2048, 2047)?;
    let imm = imm as u32 & 0xfff;
    Ok(((imm >> 5) << 25) | (rs2 << 20) | (rs1 << 15) | ((imm & 0x1f) << 7) | OP_STORE_POST)
}

/// `p.mac rD, rs1, rs2`: rD += rs1 · rs2 (low 32 bits). `0100001 | rs2 | rs1 | 000 | rD | 0110011`.
/// Binutils: MATCH_MAC32 0x42000033.
pub fn p_mac(rd: u32, rs1: u32, rs2: u32) -> u32 {
    r_type(0b010_0001, rs2, rs1, 0b000, rd, OP_OP)
}

/// `p.msu rD, rs1, rs2`: rD −= rs1 · rs2 (low 32 bits). `0100001 | rs2 | rs1 | 001 | rD | 0110011`.
/// Binutils: MATCH_MSU32 0x42001033.
pub fn p_msu(rd: u32, rs1: u32, rs2: u32) -> u32 {
    r_type(0b010_0001, rs2, rs1, 0b001, rd, OP_OP)
}

/// `p.clip rD, rs1, Is2` (immediate form, `p.clipi` in GVSOC's decoder): rs1 clipped to
/// −2^(Is2−1)..=2^(Is2−1)−1 (Is2 0..=31; 8 clips to a signed byte).
/// `0001010 | Is2 | rs1 | 001 | rD | 0110011`. Binutils: MATCH_CLIP 0x14001033.
pub fn p_clipi(rd: u32, rs1: u32, is2: i64) -> Result<u32, OperandError> {
    check_range("Is2", is2, 0, 31)?;
    Ok(r_type(0b000_1010, is2 as u32, rs1, 0b001, rd, OP_OP))
}

/// `p.clipur rD, rs1, rs2` (register form, `p.clipu` R-form in GVSOC's decoder): rs1 clipped to
/// 0..=rs2. `0001010 | rs2 | rs1 | 110 | rD | 0110011`. Binutils: MATCH_CLIPUR 0x14006033.
pub fn p_clipur(rd: u32, rs1: u32, rs2: u32) -> u32 {
    r_type(0b000_1010, rs2, rs1, 0b110, rd, OP_OP)
}

/// `p.extbs rD, rs1`: rD = rs1\[7:0\] sign-extended. `0001000 | 00000 | rs1 | 110 | rD | 0110011`.
/// Binutils: MATCH_EXTBS 0x10006033.
pub fn p_extbs(rd: u32, rs1: u32) -> u32 {
    r_type(0b000_1000, 0, rs1, 0b110, rd, OP_OP)
}

/// Byte offset of a PC-relative hardware-loop address -> the halfword immediate (`uimmL`).
fn hw_offset(
    operand: &'static str,
    bytes: i64,
    min: i64,
    max_halfwords: i64,
) -> Result<u32, OperandError> {
    check_even(operand, bytes)?;
    check_range(operand, bytes, min, 2 * max_halfwords)?;
    Ok((bytes / 2) as u32)
}

/// `lp.starti L, uimmL`: lpstart[L] = PC + (uimmL << 1). `offset` is in bytes (even, 0..=8190).
/// `uimmL[11:0] | 00000 | 000 | 0000 | L | 1111011`.
pub fn lp_starti(l: u32, offset: i64) -> Result<u32, OperandError> {
    check_loop(l)?;
    let u = hw_offset("uimmL", offset, 0, 0xfff)?;
    Ok(i_type(u, 0, 0b000, l, OP_HWLOOP))
}

/// `lp.endi L, uimmL`: lpend[L] = PC + (uimmL << 1), the address of the loop's last instruction.
/// `offset` is in bytes (even, 0..=8190). `uimmL[11:0] | 00000 | 001 | 0000 | L | 1111011`.
pub fn lp_endi(l: u32, offset: i64) -> Result<u32, OperandError> {
    check_loop(l)?;
    let u = hw_offset("uimmL", offset, 0, 0xfff)?;
    Ok(i_type(u, 0, 0b001, l, OP_HWLOOP))
}

/// `lp.count L, rs1`: lpcount[L] = rs1. `000000000000 | rs1 | 010 | 0000 | L | 1111011`.
pub fn lp_count(l: u32, rs1: u32) -> Result<u32, OperandError> {
    check_loop(l)?;
    Ok(i_type(0, rs1, 0b010, l, OP_HWLOOP))
}

/// `lp.counti L, uimmL`: lpcount[L] = uimmL (1..=4095; the body always runs at least once, so 0
/// is rejected). `uimmL[11:0] | 00000 | 011 | 0000 | L | 1111011`.
pub fn lp_counti(l: u32, count: i64) -> Result<u32, OperandError> {
    check_loop(l)?;
    check_range("uimmL", count, 1, 0xfff)?;
    Ok(i_type(count as u32, 0, 0b011, l, OP_HWLOOP))
}

/// `lp.setup L, rs1, uimmL`: lpstart[L] = PC + 4, lpend[L] = PC + (uimmL << 1), lpcount[L] = rs1.
/// `offset` (bytes, even) reaches the loop's last instruction; at least 8 (two-instruction body).
/// `uimmL[11:0] | rs1 | 100 | 0000 | L | 1111011`.
pub fn lp_setup(l: u32, rs1: u32, offset: i64) -> Result<u32, OperandError> {
    check_loop(l)?;
    let u = hw_offset("uimmL", offset, 8, 0xfff)?;
    Ok(i_type(u, rs1, 0b100, l, OP_HWLOOP))
}

/// `lp.setupi L, uimmL, uimmS`: lpstart[L] = PC + 4, lpend[L] = PC + (uimmS << 1),
/// lpcount[L] = uimmL. Assembler operand order (GNU as, RI5CY manual): count first, then the end
/// offset. `count` 1..=4095; `offset` in bytes, even, 8..=62.
/// `uimmL[11:0] | uimmS[4:0] | 101 | 0000 | L | 1111011`.
pub fn lp_setupi(l: u32, count: i64, offset: i64) -> Result<u32, OperandError> {
    check_loop(l)?;
    check_range("uimmL", count, 1, 0xfff)?;
    let s = hw_offset("uimmS", offset, 8, 0x1f)?;
    Ok(i_type(count as u32, s, 0b101, l, OP_HWLOOP))
}

/// Opcode 1010111 (`OP-V` in standard RISC-V): the PULP packed-SIMD ALU operations (`pv.*`).
pub const OP_PULP_SIMD: u32 = 0b101_0111;
/// Opcode `custom-2` (1011011): `p.addRN` and the other add/multiply-with-normalisation forms.
pub const OP_PULP_MAC: u32 = 0b101_1011;

/// funct6 of `pv.srl.*` (logical right shift of each element).
const F6_PV_SRL: u32 = 0b01_0000;
/// funct6 of `pv.sll.*` (left shift of each element).
const F6_PV_SLL: u32 = 0b01_0100;
/// funct3 of the byte forms: vector-vector `.b` and scalar-immediate `.sci.b`.
const F3_B: u32 = 0b001;
const F3_SCI_B: u32 = 0b111;

/// Packed-SIMD vector-vector form: `funct6 | 0 | rs2 | rs1 | funct3 | rD | 1010111`.
fn pv_rr(funct6: u32, rd: u32, rs1: u32, rs2: u32, funct3: u32) -> u32 {
    r_type(funct6 << 1, rs2, rs1, funct3, rd, OP_PULP_SIMD)
}

/// Packed-SIMD scalar-immediate form (`.sci`): the 6-bit immediate is split, `Imm6[0]` in bit 25
/// and `Imm6[5:1]` in bits 24:20 (the rs2 field):
/// `funct6 | Imm6[0] | Imm6[5:1] | rs1 | funct3 | rD | 1010111`. For byte elements only
/// `Imm6[2:0]` is a shift amount, so anything outside 0..=7 is rejected.
fn pv_sci_b(funct6: u32, rd: u32, rs1: u32, imm: i64) -> Result<u32, OperandError> {
    check_range("Imm6", imm, 0, 7)?;
    let imm = imm as u32;
    Ok((funct6 << 26)
        | ((imm & 1) << 25)
        | ((imm >> 1) << 20)
        | (rs1 << 15)
        | (F3_SCI_B << 12)
        | (rd << 7)
        | OP_PULP_SIMD)
}

/// `pv.srl.sci.b rD, rs1, Imm6`: each byte of rs1 shifted right (logical) by Imm6 (0..=7).
/// `010000 | Imm6[0] | Imm6[5:1] | rs1 | 111 | rD | 1010111`.
pub fn pv_srl_sci_b(rd: u32, rs1: u32, imm: i64) -> Result<u32, OperandError> {
    pv_sci_b(F6_PV_SRL, rd, rs1, imm)
}

/// `pv.sll.sci.b rD, rs1, Imm6`: each byte of rs1 shifted left by Imm6 (0..=7), bits shifted out
/// of a byte are lost. `010100 | Imm6[0] | Imm6[5:1] | rs1 | 111 | rD | 1010111`.
pub fn pv_sll_sci_b(rd: u32, rs1: u32, imm: i64) -> Result<u32, OperandError> {
    pv_sci_b(F6_PV_SLL, rd, rs1, imm)
}

/// `pv.srl.b rD, rs1, rs2`: byte `i` of rs1 shifted right (logical) by bits 2:0 of byte `i` of
/// rs2. `010000 | 0 | rs2 | rs1 | 001 | rD | 1010111`.
pub fn pv_srl_b(rd: u32, rs1: u32, rs2: u32) -> u32 {
    pv_rr(F6_PV_SRL, rd, rs1, rs2, F3_B)
}

/// `pv.sll.b rD, rs1, rs2`: byte `i` of rs1 shifted left by bits 2:0 of byte `i` of rs2.
/// `010100 | 0 | rs2 | rs1 | 001 | rD | 1010111`.
pub fn pv_sll_b(rd: u32, rs1: u32, rs2: u32) -> u32 {
    pv_rr(F6_PV_SLL, rd, rs1, rs2, F3_B)
}

/// funct6 and funct3 of the 16-bit packed-SIMD arithmetic used by the Poly1305 kernel (GAP8
/// GVSOC decoder `isa_riscv_gen.py`: `pv.add.h '000000- ... 000 ... 1010111'`, `pv.dotsp.h
/// '100110- ...'`, `pv.sdotsp.h '101110- ...'`, `pv.pack.h '1101000 ...'`).
const F6_PV_ADD: u32 = 0b00_0000;
const F6_PV_DOTSP: u32 = 0b10_0110;
const F6_PV_SDOTSP: u32 = 0b10_1110;
const F6_PV_PACK: u32 = 0b11_0100;
/// funct3 of the halfword vector-vector forms (`.h`).
const F3_H: u32 = 0b000;

/// `pv.add.h rD, rs1, rs2`: each halfword rD\[i\] = rs1\[i\] + rs2\[i\] (mod 2^16).
/// `000000 | 0 | rs2 | rs1 | 000 | rD | 1010111`.
pub fn pv_add_h(rd: u32, rs1: u32, rs2: u32) -> u32 {
    pv_rr(F6_PV_ADD, rd, rs1, rs2, F3_H)
}

/// `pv.dotsp.h rD, rs1, rs2`: rD = rs1\[0\]·rs2\[0\] + rs1\[1\]·rs2\[1\] (signed halfwords).
/// `100110 | 0 | rs2 | rs1 | 000 | rD | 1010111`.
pub fn pv_dotsp_h(rd: u32, rs1: u32, rs2: u32) -> u32 {
    pv_rr(F6_PV_DOTSP, rd, rs1, rs2, F3_H)
}

/// `pv.sdotsp.h rD, rs1, rs2`: rD += rs1\[0\]·rs2\[0\] + rs1\[1\]·rs2\[1\] (signed halfwords).
/// `101110 | 0 | rs2 | rs1 | 000 | rD | 1010111`.
pub fn pv_sdotsp_h(rd: u32, rs1: u32, rs2: u32) -> u32 {
    pv_rr(F6_PV_SDOTSP, rd, rs1, rs2, F3_H)
}

/// `pv.pack.h rD, rs1, rs2`: rD = rs1\[15:0\] << 16 | rs2\[15:0\].
/// `110100 | 0 | rs2 | rs1 | 000 | rD | 1010111`.
pub fn pv_pack_h(rd: u32, rs1: u32, rs2: u32) -> u32 {
    pv_rr(F6_PV_PACK, rd, rs1, rs2, F3_H)
}

/// funct6 of `pv.sdotup` and funct3 of the halfword scalar-replication form `.sc.h` (GAP8 GVSOC
/// decoder `isa_riscv_gen.py`: `pv.sdotup.h.sc '101000- ----- ----- 100 ----- 1010111'`).
const F6_PV_SDOTUP: u32 = 0b10_1000;
const F3_SC_H: u32 = 0b100;

/// `pv.sdotup.sc.h rD, rs1, rs2`: rD += rs1\[0\]·rs2\[0\] + rs1\[1\]·rs2\[0\] (unsigned
/// halfwords; rs2's low halfword times both halves of rs1).
/// `101000 | 0 | rs2 | rs1 | 100 | rD | 1010111`.
pub fn pv_sdotup_sc_h(rd: u32, rs1: u32, rs2: u32) -> u32 {
    pv_rr(F6_PV_SDOTUP, rd, rs1, rs2, F3_SC_H)
}

/// funct6 of `pv.sub.h` and of the halfword shuffle with an immediate selector (GAP8 GVSOC decoder
/// `isa_riscv_gen.py`: `pv.sub.h '000010- ----- ----- 000 ----- 1010111'`, `pv.shuffle.h.sci 'RRU'
/// '110000- ----- ----- 110 ----- 1010111'`), used by the JPEG DCT kernel.
const F6_PV_SUB: u32 = 0b00_0010;
const F6_PV_SHUFFLE: u32 = 0b11_0000;
/// funct3 of the halfword scalar-immediate forms (`.sci.h`).
const F3_SCI_H: u32 = 0b110;

/// `pv.sub.h rD, rs1, rs2`: each halfword rD\[i\] = rs1\[i\] − rs2\[i\] (mod 2^16).
/// `000010 | 0 | rs2 | rs1 | 000 | rD | 1010111`.
pub fn pv_sub_h(rd: u32, rs1: u32, rs2: u32) -> u32 {
    pv_rr(F6_PV_SUB, rd, rs1, rs2, F3_H)
}

/// `pv.shuffle.b rD, rs1, rs2`: byte `i` of rD is byte `rs2[8 i + 1 : 8 i]` of rs1 (`rs2 =
/// 0x00010203` reverses the bytes). `110000 | 0 | rs2 | rs1 | 001 | rD | 1010111`.
pub fn pv_shuffle_b(rd: u32, rs1: u32, rs2: u32) -> u32 {
    pv_rr(F6_PV_SHUFFLE, rd, rs1, rs2, F3_B)
}

/// `pv.shuffle2.b rD, rs1, rs2`: byte `i` of rD is byte `rs2[8 i + 1 : 8 i]` of rs1 when
/// `rs2[8 i + 2]` is set, else of the old rD (rD is read too).
/// `110010 | 0 | rs2 | rs1 | 001 | rD | 1010111`.
pub fn pv_shuffle2_b(rd: u32, rs1: u32, rs2: u32) -> u32 {
    pv_rr(0b11_0010, rd, rs1, rs2, F3_B)
}

/// `pv.shuffle.sci.h rD, rs1, Imm6`: rD\[0\] = rs1\[Imm6\[0\]\], rD\[1\] = rs1\[Imm6\[1\]\]
/// (halfwords; `1` swaps them). Only `Imm6[1:0]` select, so 0..=3.
/// `110000 | Imm6[0] | Imm6[5:1] | rs1 | 110 | rD | 1010111`.
pub fn pv_shuffle_sci_h(rd: u32, rs1: u32, imm: i64) -> Result<u32, OperandError> {
    check_range("Imm6", imm, 0, 3)?;
    let imm = imm as u32;
    Ok((F6_PV_SHUFFLE << 26)
        | ((imm & 1) << 25)
        | ((imm >> 1) << 20)
        | (rs1 << 15)
        | (F3_SCI_H << 12)
        | (rd << 7)
        | OP_PULP_SIMD)
}

/// `pv.cmpeq.sci.b rD, rs1, Imm6`: each byte rD\[i\] = all ones if rs1\[i\] equals the
/// sign-extended Imm6 (−32..=31), else 0 (`-1`: which bytes are `0xFF`).
/// `000001 | Imm6[0] | Imm6[5:1] | rs1 | 111 | rD | 1010111`.
pub fn pv_cmpeq_sci_b(rd: u32, rs1: u32, imm: i64) -> Result<u32, OperandError> {
    check_range("Imm6", imm, -32, 31)?;
    let imm = (imm as u32) & 0x3f;
    Ok((0b00_0001 << 26)
        | ((imm & 1) << 25)
        | ((imm >> 1) << 20)
        | (rs1 << 15)
        | (0b111 << 12)
        | (rd << 7)
        | OP_PULP_SIMD)
}

/// `pv.abs.h rD, rs1`: each halfword rD\[i\] = |rs1\[i\]| (mod 2^16).
/// `011100 | 0 | 00000 | rs1 | 000 | rD | 1010111`.
pub fn pv_abs_h(rd: u32, rs1: u32) -> u32 {
    pv_rr(0b01_1100, rd, rs1, 0, F3_H)
}

/// `p.lh rD, rs2(rs1)`: rD = sign-extended Mem16(rs1 + rs2) (register offset, no post-increment).
/// `0001000 | rs2 | rs1 | 111 | rD | 0000011`.
pub fn p_lh_rr(rd: u32, rs2: u32, rs1: u32) -> u32 {
    r_type(0b000_1000, rs2, rs1, 0b111, rd, 0b000_0011)
}

/// `p.lhu rD, rs2(rs1)`: rD = zero-extended Mem16(rs1 + rs2) (register offset, no
/// post-increment). `0101000 | rs2 | rs1 | 111 | rD | 0000011`.
pub fn p_lhu_rr(rd: u32, rs2: u32, rs1: u32) -> u32 {
    r_type(0b010_1000, rs2, rs1, 0b111, rd, 0b000_0011)
}

/// `p.lw rD, rs2(rs1)`: rD = Mem32(rs1 + rs2) (register offset, no post-increment).
/// `0010000 | rs2 | rs1 | 111 | rD | 0000011`.
pub fn p_lw_rr(rd: u32, rs2: u32, rs1: u32) -> u32 {
    r_type(0b001_0000, rs2, rs1, 0b111, rd, 0b000_0011)
}

/// `p.sh rs2, rs3(rs1)`: Mem16(rs1 + rs3) = rs2\[15:0\] (register offset, no post-increment; the
/// offset register sits in the rD field). `0000000 | rs2 | rs1 | 101 | rs3 | 0100011`.
pub fn p_sh_rr(rs2: u32, rs3: u32, rs1: u32) -> u32 {
    r_type(0, rs2, rs1, 0b101, rs3, 0b010_0011)
}

/// `p.ff1 rD, rs1`: the index of the least significant set bit of rs1 (32 when rs1 is 0).
/// `0001000 | 00000 | rs1 | 000 | rD | 0110011`.
pub fn p_ff1(rd: u32, rs1: u32) -> u32 {
    r_type(0b000_1000, 0, rs1, 0b000, rd, OP_OP)
}

/// Bit-manipulation immediate form (ALU > Bit Manipulation > Encoding):
/// `11 | Is3 | Is2 | rs1 | funct3 | rD | 0110011`, Is3 = width − 1, Is2 = position.
fn bit_imm(funct3: u32, rd: u32, rs1: u32, is3: i64, is2: i64) -> Result<u32, OperandError> {
    check_range("Is3", is3, 0, 31)?;
    check_range("Is2", is2, 0, 31)?;
    Ok((0b11 << 30)
        | ((is3 as u32) << 25)
        | ((is2 as u32) << 20)
        | (rs1 << 15)
        | (funct3 << 12)
        | (rd << 7)
        | OP_OP)
}

/// `p.extract rD, rs1, Is3, Is2`: rD = sign-extended rs1\[Is2 + Is3 : Is2\].
/// `11 | Is3 | Is2 | rs1 | 000 | rD | 0110011`.
pub fn p_extracti(rd: u32, rs1: u32, is3: i64, is2: i64) -> Result<u32, OperandError> {
    bit_imm(0b000, rd, rs1, is3, is2)
}

/// `p.extractu rD, rs1, Is3, Is2`: rD = zero-extended rs1\[Is2 + Is3 : Is2\].
/// `11 | Is3 | Is2 | rs1 | 001 | rD | 0110011`.
pub fn p_extractui(rd: u32, rs1: u32, is3: i64, is2: i64) -> Result<u32, OperandError> {
    bit_imm(0b001, rd, rs1, is3, is2)
}

/// `p.insert rD, rs1, Is3, Is2`: rD\[Is2 + Is3 : Is2\] = rs1\[Is3 : 0\], the other bits of rD kept.
/// `11 | Is3 | Is2 | rs1 | 010 | rD | 0110011`.
pub fn p_inserti(rd: u32, rs1: u32, is3: i64, is2: i64) -> Result<u32, OperandError> {
    bit_imm(0b010, rd, rs1, is3, is2)
}

/// `p.addRN rD, rs1, rs2, Is3`: rD = (rs1 + rs2 + 2^(Is3 − 1)) >>a Is3 (rounded, arithmetic;
/// Is3 = 0: the plain sum). `00 | Is3 | rs2 | rs1 | 110 | rD | 1011011`.
pub fn p_addrni(rd: u32, rs1: u32, rs2: u32, is3: i64) -> Result<u32, OperandError> {
    check_range("Is3", is3, 0, 31)?;
    Ok(((is3 as u32) << 25) | (rs2 << 20) | (rs1 << 15) | (0b110 << 12) | (rd << 7) | OP_PULP_MAC)
}

/// The base opcode BRANCH of RV32I, which `p.beqimm` / `p.bneimm` share.
pub const OP_BRANCH: u32 = 0b110_0011;

/// An SB-format branch of RI5CY's immediate compares: `imm[12|10:5] | Imm5 | rs1 | funct3 |
/// imm[4:1|11] | 1100011`, Imm5 (−16..=15, sign-extended) in the rs2 field, the target at
/// pc + `off` (even, −4096..=4094). The macros branch to labels ([`branch_imm5_prefix`]); the
/// words are what the golden tests pin.
#[cfg(test)]
fn branch_imm5(funct3: u32, rs1: u32, imm5: i64, off: i64) -> Result<u32, OperandError> {
    check_range("Imm5", imm5, -16, 15)?;
    check_range("Imm12", off, -4096, 4094)?;
    if off % 2 != 0 {
        return err("Imm12", format!("{off} is odd; branch offsets are even"));
    }
    let o = off as u32;
    Ok((((o >> 12) & 1) << 31)
        | (((o >> 5) & 0x3F) << 25)
        | (((imm5 as u32) & 0x1F) << 20)
        | (rs1 << 15)
        | (funct3 << 12)
        | (((o >> 1) & 0xF) << 8)
        | (((o >> 11) & 1) << 7)
        | OP_BRANCH)
}

/// `p.beqimm rs1, Imm5, Imm12`: branch to pc + Imm12 if rs1 = Imm5 (RI5CY "Immediate
/// branching"; GAP8 binutils MATCH_P_BEQIMM 0x2063). funct3 010.
#[cfg(test)]
pub fn p_beqimm(rs1: u32, imm5: i64, off: i64) -> Result<u32, OperandError> {
    branch_imm5(0b010, rs1, imm5, off)
}

/// `p.bneimm rs1, Imm5, Imm12`: branch to pc + Imm12 if rs1 ≠ Imm5 (MATCH_P_BNEIMM 0x3063).
/// funct3 011.
#[cfg(test)]
pub fn p_bneimm(rs1: u32, imm5: i64, off: i64) -> Result<u32, OperandError> {
    branch_imm5(0b011, rs1, imm5, off)
}

/// The assembler text of an immediate-compare branch to a label (`p_beqimm!(rs1, imm)` with
/// the label appended by the caller): the SB-format `.insn b` directive with the fields of
/// [`p_beqimm`] / [`p_bneimm`] (BRANCH, funct3, rs1, and Imm5 as the rs2 field's register
/// number); the assembler fills in the label's offset.
pub fn branch_imm5_prefix(funct3: u32, rs1: u32, imm5: i64) -> Result<String, OperandError> {
    check_range("Imm5", imm5, -16, 15)?;
    Ok(format!(
        ".insn b {OP_BRANCH:#x}, {funct3}, x{rs1}, x{}, ",
        (imm5 as u32) & 0x1F
    ))
}

/// The assembler text for one word: `.insn 4, 0x........` keeps the word in the instruction
/// stream (code mapping), so disassemblers decode it as an instruction rather than data.
pub fn insn_directive(word: u32) -> String {
    format!(".insn 4, {word:#010x}")
}

#[cfg(test)]
mod tests {
    //! Golden words. Each is derived by hand from the bit layout in the RI5CY User Manual rev. 4.4,
    //! chapter "Instruction Set Extensions" (the table named in each test), and where a GAP8
    //! binutils `MATCH_*` value exists the word with all operand fields zero equals it.
    use super::*;

    fn r(n: &str) -> u32 {
        reg_number(n).unwrap()
    }

    #[test]
    fn register_names() {
        assert_eq!(reg_number("zero"), Some(0));
        assert_eq!(reg_number("x0"), Some(0));
        assert_eq!(reg_number("ra"), Some(1));
        assert_eq!(reg_number("fp"), Some(8));
        assert_eq!(reg_number("s0"), Some(8));
        assert_eq!(reg_number("a0"), Some(10));
        assert_eq!(reg_number("s11"), Some(27));
        assert_eq!(reg_number("t6"), Some(31));
        assert_eq!(reg_number("x31"), Some(31));
        for bad in ["x32", "x", "x05", "x-1", "a8", "t7", "s12", "A0", "r1", ""] {
            assert_eq!(reg_number(bad), None, "{bad}");
        }
    }

    /// ALU > General ALU Operations > Encoding: `0000100 src2 src1 101 dest 0110011 p.ror`.
    /// GAP8 binutils: MATCH_ROR 0x08005033.
    #[test]
    fn alu_words_golden() {
        // RI5CY User Manual rev. 4.4, "Bit manipulation" / "General ALU" encodings (cross-checked
        // against the GAP8 GVSOC decoder, isa_riscv_gen.py); words assembled by hand from them.
        assert_eq!(p_min(r("a0"), r("a1"), r("a2")), 0x04C5_C533);
        assert_eq!(p_minu(r("a0"), r("a1"), r("a2")), 0x04C5_D533);
        assert_eq!(p_max(r("a0"), r("a1"), r("a2")), 0x04C5_E533);
        assert_eq!(p_maxu(r("a0"), r("a1"), r("a2")), 0x04C5_F533);
        assert_eq!(p_max(r("x31"), r("x0"), r("x31")), 0x05F0_6FB3);
        assert_eq!(p_abs(r("a0"), r("a1")), 0x0405_8533);
        assert_eq!(p_abs(r("x31"), r("x31")), 0x040F_8FB3);
        assert_eq!(p_fl1(r("a0"), r("a1")), 0x1005_9533);
        assert_eq!(p_fl1(r("t0"), r("t1")), 0x1003_12B3);
        assert_eq!(p_clipui(r("a0"), r("a1"), 9), Ok(0x1495_A533));
        assert_eq!(p_clipui(r("x1"), r("x2"), 31), Ok(0x15F1_20B3));
        assert!(p_clipui(r("a0"), r("a1"), 32).is_err());
    }

    /// The scalar forms of the JPEG-LS line coder: words from the GAP8 GVSOC decoder's patterns
    /// (`isa_riscv_gen.py`: LBU_POSTINC, LB_POSTINC, LBU_RR, LB_RR, SB_POSTINC, p.mac, p.msu,
    /// p.clipi, p.clipu R-form, p.extbs) and PULP binutils' MATCH_* values, assembled by hand.
    #[test]
    fn codec_words_golden() {
        assert_eq!(p_lbu_imm(r("t0"), 1, r("a1")), Ok(0x0015_C28B));
        assert_eq!(p_lbu_imm(r("x31"), 2047, r("x31")), Ok(0x7FFF_CF8B));
        assert_eq!(p_lbu_imm(r("ra"), -2048, r("zero")), Ok(0x8000_408B));
        assert!(p_lbu_imm(0, 2048, 0).is_err());
        assert_eq!(p_lb_imm(r("a0"), -1, r("a1")), Ok(0xFFF5_850B));
        assert_eq!(p_lbu_rr(r("a0"), r("a1"), r("a2")), 0x40B6_7503);
        assert_eq!(p_lbu_rr(r("x31"), r("x31"), r("x31")), 0x41FF_FF83);
        assert_eq!(p_lb_rr(r("t2"), r("t2"), r("a2")), 0x0076_7383);
        assert_eq!(p_lb_rr(r("x31"), r("zero"), r("x31")), 0x000F_FF83);
        assert_eq!(p_sb_imm(r("t2"), 1, r("a6")), Ok(0x0078_00AB));
        assert_eq!(p_sb_imm(r("x31"), 2047, r("x31")), Ok(0x7FFF_8FAB));
        assert_eq!(p_sb_imm(r("zero"), -2048, r("ra")), Ok(0x8000_802B));
        assert!(p_sb_imm(0, -2049, 0).is_err());
        assert_eq!(p_mac(r("s4"), r("t2"), r("s5")), 0x4353_8A33);
        assert_eq!(p_mac(r("x31"), r("x31"), r("x31")), 0x43FF_8FB3);
        assert_eq!(p_msu(r("s10"), r("ra"), r("t3")), 0x43C0_9D33);
        assert_eq!(p_msu(r("x31"), r("x31"), r("x31")), 0x43FF_9FB3);
        assert_eq!(p_clipi(r("s11"), r("s11"), 8), Ok(0x148D_9DB3));
        assert_eq!(p_clipi(r("x31"), r("x31"), 31), Ok(0x15FF_9FB3));
        assert!(p_clipi(0, 0, 32).is_err());
        assert_eq!(p_clipur(r("s10"), r("s10"), r("t6")), 0x15FD_6D33);
        assert_eq!(p_clipur(r("x31"), r("x31"), r("x31")), 0x15FF_EFB3);
        assert_eq!(p_extbs(r("s0"), r("s0")), 0x1004_6433);
        assert_eq!(p_extbs(r("x31"), r("ra")), 0x1000_EFB3);
    }

    /// The immediate-compare branches: the RI5CY manual's SB layout with Imm5 in the rs2 field;
    /// with every operand zero the words are GAP8 binutils' MATCH_P_BEQIMM / MATCH_P_BNEIMM, and
    /// `p.beqimm a0, -1, -4` / `p.bneimm a0, 1, 8` are the words LLVM assembles from
    /// `.insn b 0x63, 2, a0, x31, <4 bytes back>` / `.insn b 0x63, 3, a0, x1, <8 bytes on>` (the
    /// text [`branch_imm5_prefix`] writes), checked with llvm-objdump.
    #[test]
    fn branch_imm5_golden() {
        assert_eq!(p_beqimm(0, 0, 0), Ok(0x0000_2063));
        assert_eq!(p_bneimm(0, 0, 0), Ok(0x0000_3063));
        assert_eq!(p_beqimm(r("a0"), -1, -4), Ok(0xFFF5_2EE3));
        assert_eq!(p_bneimm(r("a0"), 1, 8), Ok(0x0015_3463));
        assert_eq!(p_beqimm(r("x31"), 15, 4094), Ok(0x7EFF_AFE3));
        assert_eq!(p_bneimm(r("x1"), -16, -4096), Ok(0x8100_B063));
        assert!(p_beqimm(0, 16, 0).is_err());
        assert!(p_beqimm(0, -17, 0).is_err());
        assert!(p_beqimm(0, 0, 3).is_err());
        assert!(p_bneimm(0, 0, 4096).is_err());
        assert_eq!(
            branch_imm5_prefix(0b010, r("s3"), -1).unwrap(),
            ".insn b 0x63, 2, x19, x31, "
        );
        assert_eq!(
            branch_imm5_prefix(0b011, r("t6"), 1).unwrap(),
            ".insn b 0x63, 3, x31, x1, "
        );
        assert!(branch_imm5_prefix(0b010, 0, 16).is_err());
    }

    #[test]
    fn p_ror_golden() {
        assert_eq!(p_ror(0, 0, 0), 0x0800_5033);
        // The anchor word from the platform notes.
        assert_eq!(p_ror(r("a0"), r("a0"), r("a1")), 0x08B5_5533);
        assert_eq!(p_ror(r("x31"), r("x31"), r("x31")), 0x09FF_DFB3);
        assert_eq!(p_ror(r("x0"), r("x31"), r("x1")), 0x081F_D033);
        assert_eq!(p_ror(r("t6"), r("zero"), r("s11")), 0x09B0_5FB3);
    }

    /// Post-Incrementing Load & Store > Encoding: `offset base 010 dest 0001011 p.lw rD, Imm(rs1!)`.
    /// GAP8 binutils: MATCH_LWPOST 0x200b.
    #[test]
    fn p_lw_imm_golden() {
        assert_eq!(p_lw_imm(0, 0, 0).unwrap(), 0x0000_200B);
        assert_eq!(p_lw_imm(r("a2"), 4, r("a3")).unwrap(), 0x0046_A60B);
        assert_eq!(p_lw_imm(r("x31"), 2047, r("x31")).unwrap(), 0x7FFF_AF8B);
        assert_eq!(p_lw_imm(r("x1"), -2048, r("x0")).unwrap(), 0x8000_208B);
        assert_eq!(p_lw_imm(r("t0"), -4, r("sp")).unwrap(), 0xFFC1_228B);
        assert!(p_lw_imm(1, 2048, 2).is_err());
        assert!(p_lw_imm(1, -2049, 2).is_err());
    }

    /// Post-Incrementing Load & Store > Encoding: `0010000 offset base 111 dest 0001011
    /// p.lw rD, rs2(rs1!)`. GAP8 binutils: MATCH_LWRRPOST 0x2000700b.
    #[test]
    fn p_lw_reg_golden() {
        assert_eq!(p_lw_reg(0, 0, 0), 0x2000_700B);
        assert_eq!(p_lw_reg(r("a0"), r("a1"), r("a2")), 0x20B6_750B);
        assert_eq!(p_lw_reg(r("x31"), r("x31"), r("x31")), 0x21FF_FF8B);
        assert_eq!(p_lw_reg(r("x1"), r("x0"), r("x31")), 0x200F_F08B);
    }

    /// Post-Incrementing Load & Store > Encoding: `offset[11:5] src base 010 offset[4:0] 0101011
    /// p.sw rs2, Imm(rs1!)`. GAP8 binutils: MATCH_SWPOST 0x202b.
    #[test]
    fn p_sw_imm_golden() {
        assert_eq!(p_sw_imm(0, 0, 0).unwrap(), 0x0000_202B);
        assert_eq!(p_sw_imm(r("a2"), 4, r("a3")).unwrap(), 0x00C6_A22B);
        assert_eq!(p_sw_imm(r("x31"), 2047, r("x31")).unwrap(), 0x7FFF_AFAB);
        assert_eq!(p_sw_imm(r("x0"), -2048, r("x1")).unwrap(), 0x8000_A02B);
        assert_eq!(p_sw_imm(r("a0"), 64, r("ra")).unwrap(), 0x04A0_A02B);
        assert!(p_sw_imm(1, 2048, 2).is_err());
    }

    /// Post-Incrementing Load & Store > Encoding: `0000000 src base 110 offset 0101011
    /// p.sw rs2, rs3(rs1!)` (rs3 in the rD field). GAP8 binutils (Xpulpv2/Xgap8 rows):
    /// MATCH_SWRRPOST 0x602b with MASK_PALU, operands "t,d(s!)".
    #[test]
    fn p_sw_reg_golden() {
        assert_eq!(p_sw_reg(0, 0, 0), 0x0000_602B);
        assert_eq!(p_sw_reg(r("a0"), r("a1"), r("a2")), 0x00A6_65AB);
        assert_eq!(p_sw_reg(r("x31"), r("x31"), r("x31")), 0x01FF_EFAB);
        assert_eq!(p_sw_reg(r("x0"), r("x31"), r("x1")), 0x0000_EFAB);
    }

    /// Hardware Loops > Encoding: `uimmL[11:0] 00000 000 0000 L 1111011 lp.starti L, uimmL`.
    /// GAP8 binutils: MATCH_HWLP_STARTI 0x7b.
    #[test]
    fn lp_starti_golden() {
        assert_eq!(lp_starti(0, 0).unwrap(), 0x0000_007B);
        assert_eq!(lp_starti(1, 8).unwrap(), 0x0040_00FB);
        assert_eq!(lp_starti(0, 8190).unwrap(), 0xFFF0_007B);
        assert_eq!(lp_starti(1, 4096).unwrap(), 0x8000_00FB);
        assert!(lp_starti(0, 8192).is_err());
        assert!(lp_starti(0, 3).is_err());
        assert!(lp_starti(2, 8).is_err());
    }

    /// Hardware Loops > Encoding: `uimmL[11:0] 00000 001 0000 L 1111011 lp.endi L, uimmL`.
    /// GAP8 binutils: MATCH_HWLP_ENDI 0x107b.
    #[test]
    fn lp_endi_golden() {
        assert_eq!(lp_endi(0, 0).unwrap(), 0x0000_107B);
        assert_eq!(lp_endi(1, 384).unwrap(), 0x0C00_10FB);
        assert_eq!(lp_endi(0, 8190).unwrap(), 0xFFF0_107B);
        assert!(lp_endi(1, -2).is_err());
    }

    /// Hardware Loops > Encoding: `000000000000 src1 010 0000 L 1111011 lp.count L, rs1`.
    /// GAP8 binutils: MATCH_HWLP_COUNT 0x207b.
    #[test]
    fn lp_count_golden() {
        assert_eq!(lp_count(0, 0).unwrap(), 0x0000_207B);
        assert_eq!(lp_count(1, r("a0")).unwrap(), 0x0005_20FB);
        assert_eq!(lp_count(0, r("x31")).unwrap(), 0x000F_A07B);
        assert_eq!(lp_count(1, r("x31")).unwrap(), 0x000F_A0FB);
    }

    /// Hardware Loops > Encoding: `uimmL[11:0] 00000 011 0000 L 1111011 lp.counti L, uimmL`.
    /// GAP8 binutils: MATCH_HWLP_COUNTI 0x307b.
    #[test]
    fn lp_counti_golden() {
        assert_eq!(lp_counti(0, 9).unwrap(), 0x0090_307B);
        assert_eq!(lp_counti(1, 1).unwrap(), 0x0010_30FB);
        assert_eq!(lp_counti(0, 4095).unwrap(), 0xFFF0_307B);
        assert!(lp_counti(0, 0).is_err());
        assert!(lp_counti(0, 4096).is_err());
    }

    /// Hardware Loops > Encoding: `uimmL[11:0] src1 100 0000 L 1111011 lp.setup L, rs1, uimmL`.
    /// GAP8 binutils: MATCH_HWLP_SETUP 0x407b.
    #[test]
    fn lp_setup_golden() {
        assert_eq!(lp_setup(1, r("t1"), 8).unwrap(), 0x0043_40FB);
        assert_eq!(lp_setup(0, r("a1"), 384).unwrap(), 0x0C05_C07B);
        assert_eq!(lp_setup(0, r("x31"), 8190).unwrap(), 0xFFFF_C07B);
        assert_eq!(lp_setup(1, r("x0"), 8).unwrap(), 0x0040_40FB);
        assert!(lp_setup(0, 1, 4).is_err());
        assert!(lp_setup(0, 1, 8192).is_err());
    }

    /// Hardware Loops > Encoding: `uimmL[11:0] uimmS[4:0] 101 0000 L 1111011
    /// lp.setupi L, uimmL, uimmS`. GAP8 binutils: MATCH_HWLP_SETUPI 0x507b.
    #[test]
    fn lp_setupi_golden() {
        assert_eq!(lp_setupi(0, 10, 16).unwrap(), 0x00A4_507B);
        assert_eq!(lp_setupi(1, 4095, 62).unwrap(), 0xFFFF_D0FB);
        assert_eq!(lp_setupi(0, 1, 8).unwrap(), 0x0012_507B);
        assert!(lp_setupi(0, 10, 64).is_err());
        assert!(lp_setupi(0, 0, 16).is_err());
        assert!(lp_setupi(0, 4096, 16).is_err());
    }

    /// Packed-SIMD > Encoding (`pv.srl`: `01000 0 ...`, `pv.sll`: `01010 0 ...`; funct3 001 `.b`,
    /// 111 `.sci.b`; opcode 1010111), cross-checked against the GAP8 GVSOC decoder
    /// (`gvsoc/models/cpu/iss/isa_gen/isa_riscv_gen.py`, `pulp_v2_insns`:
    /// `pv.srl.sci.b 'RRU' '010000- ----- ----- 111 ----- 1010111'`, format RRU = `Imm6[0]` in bit
    /// 25, `Imm6[5:1]` in bits 24:20).
    #[test]
    fn pv_srl_sci_b_golden() {
        assert_eq!(pv_srl_sci_b(0, 0, 0).unwrap(), 0x4000_7057);
        assert_eq!(pv_srl_sci_b(r("a0"), r("a1"), 2).unwrap(), 0x4015_F557);
        assert_eq!(pv_srl_sci_b(r("x31"), r("x31"), 7).unwrap(), 0x423F_FFD7);
        assert_eq!(pv_srl_sci_b(r("t0"), r("t0"), 2).unwrap(), 0x4012_F2D7);
        assert_eq!(pv_srl_sci_b(r("ra"), r("zero"), 1).unwrap(), 0x4200_70D7);
        assert!(pv_srl_sci_b(1, 1, 8).is_err());
        assert!(pv_srl_sci_b(1, 1, -1).is_err());
    }

    /// As above: `pv.sll.sci.b 'RRU' '010100- ----- ----- 111 ----- 1010111'`.
    #[test]
    fn pv_sll_sci_b_golden() {
        assert_eq!(pv_sll_sci_b(0, 0, 0).unwrap(), 0x5000_7057);
        assert_eq!(pv_sll_sci_b(r("a0"), r("a1"), 6).unwrap(), 0x5035_F557);
        assert_eq!(pv_sll_sci_b(r("ra"), r("zero"), 4).unwrap(), 0x5020_70D7);
        assert_eq!(pv_sll_sci_b(r("x31"), r("x31"), 7).unwrap(), 0x523F_FFD7);
        assert_eq!(pv_sll_sci_b(r("t0"), r("t0"), 6).unwrap(), 0x5032_F2D7);
        assert!(pv_sll_sci_b(1, 1, 8).is_err());
    }

    /// As above, vector-vector form: `pv.srl.b 'R' '010000- ----- ----- 001 ----- 1010111'`.
    #[test]
    fn pv_srl_b_golden() {
        assert_eq!(pv_srl_b(0, 0, 0), 0x4000_1057);
        assert_eq!(pv_srl_b(r("a0"), r("a1"), r("a2")), 0x40C5_9557);
        assert_eq!(pv_srl_b(r("x31"), r("x31"), r("x31")), 0x41FF_9FD7);
        assert_eq!(pv_srl_b(r("ra"), r("t6"), r("zero")), 0x400F_90D7);
    }

    /// `pv.sll.b 'R' '010100- ----- ----- 001 ----- 1010111'`.
    #[test]
    fn pv_sll_b_golden() {
        assert_eq!(pv_sll_b(0, 0, 0), 0x5000_1057);
        assert_eq!(pv_sll_b(r("a0"), r("a1"), r("a2")), 0x50C5_9557);
        assert_eq!(pv_sll_b(r("x31"), r("x31"), r("x31")), 0x51FF_9FD7);
        assert_eq!(pv_sll_b(r("zero"), r("ra"), r("t6")), 0x51F0_9057);
    }

    /// GVSOC decoder (`isa_riscv_gen.py`): `pv.add.h '000000- ----- ----- 000 ----- 1010111'`,
    /// `pv.dotsp.h '100110- ...'`, `pv.sdotsp.h '101110- ...'`, `pv.pack.h '1101000 ...'`.
    #[test]
    fn pv_halfword_golden() {
        assert_eq!(pv_add_h(0, 0, 0), 0x0000_0057);
        assert_eq!(pv_add_h(r("a0"), r("a1"), r("a2")), 0x00C5_8557);
        assert_eq!(pv_dotsp_h(0, 0, 0), 0x9800_0057);
        assert_eq!(pv_dotsp_h(r("x31"), r("x31"), r("x31")), 0x99FF_8FD7);
        assert_eq!(pv_sdotsp_h(0, 0, 0), 0xB800_0057);
        assert_eq!(pv_sdotsp_h(r("a0"), r("a1"), r("a2")), 0xB8C5_8557);
        assert_eq!(pv_pack_h(0, 0, 0), 0xD000_0057);
        assert_eq!(pv_pack_h(r("t6"), r("ra"), r("zero")), 0xD000_8FD7);
    }

    /// GVSOC decoder: `pv.sdotup.h.sc 'RRRR' '101000- ----- ----- 100 ----- 1010111'`; the RI5CY
    /// manual's `pv.sdotup.sc.h`: `101000 0 rs2 rs1 100 rD 1010111`.
    #[test]
    fn pv_sdotup_sc_h_golden() {
        assert_eq!(pv_sdotup_sc_h(0, 0, 0), 0xA000_4057);
        assert_eq!(pv_sdotup_sc_h(r("a0"), r("a1"), r("a2")), 0xA0C5_C557);
        assert_eq!(pv_sdotup_sc_h(r("x31"), r("x31"), r("x31")), 0xA1FF_CFD7);
        assert_eq!(pv_sdotup_sc_h(r("t3"), r("t4"), r("t0")), 0xA05E_CE57);
    }

    /// GVSOC decoder: `p.extracti '11----- ----- ----- 000 ----- 0110011'` (I4U: ui0 = Is3 in
    /// 29:25, ui1 = Is2 in 24:20), `p.extractui … 001 …`, `p.inserti … 010 …`,
    /// `p.addRNi '00----- ----- ----- 110 ----- 1011011'` (Is3 in 29:25).
    #[test]
    fn bit_manipulation_and_round_golden() {
        assert_eq!(p_extracti(0, 0, 0, 0).unwrap(), 0xC000_0033);
        assert_eq!(p_extracti(r("a0"), r("a1"), 12, 0).unwrap(), 0xD805_8533);
        assert_eq!(p_extractui(r("a0"), r("a1"), 12, 13).unwrap(), 0xD8D5_9533);
        assert_eq!(p_extractui(0, 0, 31, 31).unwrap(), 0xFFF0_1033);
        assert_eq!(p_inserti(r("a0"), r("a1"), 6, 6).unwrap(), 0xCC65_A533);
        assert_eq!(
            p_addrni(r("a0"), r("a1"), r("zero"), 13).unwrap(),
            0x1A05_E55B
        );
        assert_eq!(p_addrni(0, 0, 0, 0).unwrap(), 0x0000_605B);
        assert!(p_extracti(1, 1, 32, 0).is_err());
        assert!(p_inserti(1, 1, 0, 32).is_err());
        assert!(p_addrni(1, 1, 1, 32).is_err());
    }

    /// Vectorial ALU > Encoding: `00001 0 0 src2 src1 000 dest 1010111 pv.sub.h`; Vectorial
    /// shuffle: `11000 0 Imm6[0] Imm6[5:1] src1 110 dest 1010111 pv.shuffle.sci.h` (GVSOC decoder:
    /// `pv.sub.h '000010- ...'`, `pv.shuffle.h.sci 'RRU' '110000- ----- ----- 110 ...'`); Bit
    /// Manipulation > Encoding: `0001000 00000 src1 001 dest 0110011 p.fl1` (GVSOC: `p.fl1 'R1'
    /// '0001000 00000 ----- 001 ----- 0110011'`).
    #[test]
    fn jpeg_kernel_words_golden() {
        assert_eq!(pv_sub_h(0, 0, 0), 0x0800_0057);
        assert_eq!(pv_sub_h(r("a0"), r("a1"), r("a2")), 0x08C5_8557);
        assert_eq!(pv_sub_h(r("x31"), r("x31"), r("x31")), 0x09FF_8FD7);
        assert_eq!(pv_shuffle_sci_h(0, 0, 0).unwrap(), 0xC000_6057);
        assert_eq!(pv_shuffle_sci_h(r("a0"), r("a1"), 1).unwrap(), 0xC205_E557);
        assert_eq!(pv_shuffle_sci_h(r("t6"), r("t6"), 3).unwrap(), 0xC21F_EFD7);
        assert!(pv_shuffle_sci_h(1, 1, 4).is_err());
        assert!(pv_shuffle_sci_h(1, 1, -1).is_err());
        assert_eq!(p_fl1(0, 0), 0x1000_1033);
        assert_eq!(p_fl1(r("a0"), r("a1")), 0x1005_9533);
        assert_eq!(p_fl1(r("x31"), r("x31")), 0x100F_9FB3);
        // `pv.abs.h '0111000 ----- ----- 000 ----- 1010111'` (rs2 unused: 0), `p.ff1 'R1'
        // '0001000 00000 ----- 000 ----- 0110011'`; manual: `01110 0 0 00000 src1 000 dest
        // 1010111 pv.abs.h`, `0001000 00000 src1 000 dest 0110011 p.ff1`.
        assert_eq!(pv_abs_h(0, 0), 0x7000_0057);
        assert_eq!(pv_abs_h(r("a0"), r("a1")), 0x7005_8557);
        assert_eq!(pv_abs_h(r("x31"), r("x31")), 0x700F_8FD7);
        assert_eq!(p_ff1(0, 0), 0x1000_0033);
        assert_eq!(p_ff1(r("a0"), r("a1")), 0x1005_8533);
        assert_eq!(p_ff1(r("x31"), r("x31")), 0x100F_8FB3);
        // Bit Manipulation > Encoding: `0001000 00000 src1 011 dest 0110011 p.cnt` (GVSOC:
        // `p.cnt 'R1' '0001000 00000 ----- 011 ----- 0110011'`).
        // Vectorial shuffle: `11000 0 0 src2 src1 001 dest 1010111 pv.shuffle.b` (GVSOC:
        // `pv.shuffle.b 'R' '110000- ----- ----- 001 ----- 1010111'`).
        assert_eq!(pv_shuffle_b(0, 0, 0), 0xC000_1057);
        assert_eq!(pv_shuffle_b(r("a0"), r("a1"), r("a2")), 0xC0C5_9557);
        assert_eq!(pv_shuffle_b(r("t2"), r("t2"), r("s7")), 0xC173_93D7);
        assert_eq!(pv_shuffle_b(r("x31"), r("x31"), r("x31")), 0xC1FF_9FD7);
        // `110010- ----- ----- 001 ----- 1010111 pv.shuffle2.b` (GVSOC pulp_v2, format `RRRR`:
        // rD is read as well).
        assert_eq!(pv_shuffle2_b(r("a0"), r("a1"), r("a2")), 0xC8C5_9557);
        assert_eq!(pv_shuffle2_b(r("t0"), r("t5"), r("a3")), 0xC8DF_12D7);
        assert_eq!(pv_shuffle2_b(r("x31"), r("x31"), r("x31")), 0xC9FF_9FD7);
        assert_eq!(p_cnt(0, 0), 0x1000_3033);
        assert_eq!(p_cnt(r("a0"), r("a1")), 0x1005_B533);
        assert_eq!(p_cnt(r("t1"), r("s8")), 0x100C_3333);
        assert_eq!(p_cnt(r("x31"), r("x31")), 0x100F_BFB3);
        // Load/Store > register-register: `0000000 src base 101 offset 0100011 p.sh rs2,
        // rs3(rs1)` (GVSOC pulp_v2: `SH_RR 'SR' '0000000 ----- ----- 101 ----- 0100011'`, the
        // offset register in bits 11:7).
        // Post-Incrementing Load & Store > Encoding: `offset base 100 dest 0001011 p.lbu rD,
        // Imm(rs1!)` (GVSOC: `LBU_POSTINC 'LPOST' '------- ----- ----- 100 ----- 0001011'`).
        assert_eq!(p_lbu_imm(0, 0, 0).unwrap(), 0x0000_400B);
        assert_eq!(p_lbu_imm(r("a0"), 1, r("a2")).unwrap(), 0x0016_450B);
        assert_eq!(p_lbu_imm(r("x31"), 2047, r("x31")).unwrap(), 0x7FFF_CF8B);
        assert_eq!(p_lbu_imm(r("ra"), -2048, r("zero")).unwrap(), 0x8000_408B);
        assert!(p_lbu_imm(1, 2048, 2).is_err());
        // Load > register-register: `0001000 offset base 111 dest 0000011 p.lh rD, rs2(rs1)`,
        // `0010000 ... p.lw` (GVSOC pulp_v2: `LH_RR 'LR' '0001000 ----- ----- 111 ----- 0000011'`,
        // `LW_RR '0010000 ...'`).
        assert_eq!(p_lh_rr(0, 0, 0), 0x1000_7003);
        assert_eq!(p_lh_rr(r("a0"), r("a1"), r("a2")), 0x10B6_7503);
        // `LHU_RR '0101000 ----- ----- 111 ----- 0000011'` (GVSOC pulp_v2).
        assert_eq!(p_lhu_rr(0, 0, 0), 0x5000_7003);
        assert_eq!(p_lhu_rr(r("a0"), r("a1"), r("a2")), 0x50B6_7503);
        assert_eq!(p_lhu_rr(r("t4"), r("t1"), r("s5")), 0x506A_FE83);
        assert_eq!(p_lhu_rr(r("x31"), r("x31"), r("x31")), 0x51FF_FF83);
        assert_eq!(p_lh_rr(r("x31"), r("x31"), r("x31")), 0x11FF_FF83);
        assert_eq!(p_lw_rr(0, 0, 0), 0x2000_7003);
        assert_eq!(p_lw_rr(r("a0"), r("a1"), r("a2")), 0x20B6_7503);
        assert_eq!(p_lw_rr(r("x31"), r("x31"), r("x31")), 0x21FF_FF83);
        assert_eq!(p_sh_rr(0, 0, 0), 0x0000_5023);
        assert_eq!(p_sh_rr(r("t5"), r("a0"), r("a1")), 0x01E5_D523);
        assert_eq!(p_sh_rr(r("x31"), r("x31"), r("x31")), 0x01FF_DFA3);
        assert_eq!(p_sh_rr(r("a0"), r("a1"), r("a2")), 0x00A6_55A3);
        // General ALU > Encoding: `0000010 00000 src1 000 dest 0110011 p.abs` (GVSOC pulp_v2:
        // `p.abs 'R1' '0000010 00000 ----- 000 ----- 0110011'`).
        assert_eq!(p_abs(0, 0), 0x0400_0033);
        assert_eq!(p_abs(r("a0"), r("a1")), 0x0405_8533);
        assert_eq!(p_abs(r("x31"), r("x31")), 0x040F_8FB3);
        // Bit Manipulation > Encoding: `0001000 00000 src1 010 dest 0110011 p.clb` and
        // `1000000 src2 src1 011 dest 0110011 p.bclr` (GVSOC pulp_v2: `p.clb 'R1'
        // '0001000 00000 ----- 010 ----- 0110011'`, `p.bclr 'R' '1000000 ----- ----- 011 -----
        // 0110011'`, width rs2[9:5] + 1 from bit rs2[4:0]).
        assert_eq!(p_clb(0, 0), 0x1000_2033);
        assert_eq!(p_clb(r("a0"), r("a1")), 0x1005_A533);
        assert_eq!(p_clb(r("t1"), r("t0")), 0x1002_A333);
        assert_eq!(p_clb(r("x31"), r("x31")), 0x100F_AFB3);
        assert_eq!(p_bclr(0, 0, 0), 0x8000_3033);
        assert_eq!(p_bclr(r("a0"), r("a1"), r("a2")), 0x80C5_B533);
        assert_eq!(p_bclr(r("s8"), r("s8"), r("t0")), 0x805C_3C33);
        assert_eq!(p_bclr(r("x31"), r("x31"), r("x31")), 0x81FF_BFB3);
        // SIMD > Comparison: `000001 Imm6[0] Imm6[5:1] src1 111 dest 1010111 pv.cmpeq.sci.b`
        // (GVSOC pulp_v2: `pv.cmpeq.sci.b 'RRS' '000001- ----- ----- 111 ----- 1010111'`, the
        // immediate signed).
        assert_eq!(pv_cmpeq_sci_b(0, 0, 0).unwrap(), 0x0400_7057);
        assert_eq!(pv_cmpeq_sci_b(r("t1"), r("t2"), -1).unwrap(), 0x07F3_F357);
        assert_eq!(pv_cmpeq_sci_b(r("a0"), r("a1"), 1).unwrap(), 0x0605_F557);
        assert_eq!(
            pv_cmpeq_sci_b(r("x31"), r("x31"), -32).unwrap(),
            0x050F_FFD7
        );
        assert!(pv_cmpeq_sci_b(1, 1, 32).is_err());
        assert!(pv_cmpeq_sci_b(1, 1, -33).is_err());
    }

    #[test]
    fn directive_text() {
        assert_eq!(insn_directive(0x08B5_5533), ".insn 4, 0x08b55533");
        assert_eq!(insn_directive(0x7B), ".insn 4, 0x0000007b");
    }
}
