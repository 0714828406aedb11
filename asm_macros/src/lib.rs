//! Proc-macros that encode PULP-only RI5CY instructions (GAP8, "Xpulpv2") for `asm!` templates.
//!
//! rustc's assembler (LLVM) does not know the PULP mnemonics, so each macro here checks its
//! operands at compile time and expands to a string literal with the finished instruction word:
//!
//! ```
//! use asm_macros::{p_ror, p_lw, p_sw, lp_setupi};
//! assert_eq!(p_ror!(a0, a0, a1), ".insn 4, 0x08b55533");
//! assert_eq!(p_lw!(a2, 4(a3!)), ".insn 4, 0x0046a60b");
//! assert_eq!(p_sw!(a2, 4(a3!)), ".insn 4, 0x00c6a22b");
//! assert_eq!(lp_setupi!(x0, 10, 16), ".insn 4, 0x00a4507b");
//! ```
//!
//! The string goes straight into an `asm!` template (`asm!(p_ror!(a0, a0, a1), ...)`, or one line
//! among several). `.insn 4, <word>` is accepted by LLVM and by GNU as (2.38+); unlike `.4byte` it
//! keeps the word in the instruction stream, so `objdump` shows it as a (to it unknown)
//! instruction, not as data.
//!
//! | macro | instruction | operation |
//! |---|---|---|
//! | [`p_ror!`]`(rd, rs1, rs2)` | `p.ror` | rd = rs1 rotated right by rs2\[4:0\] |
//! | [`p_lw!`]`(rd, imm(rs1!))` | `p.lw rD, Imm(rs1!)` | rd = Mem32(rs1); rs1 += imm (−2048..=2047) |
//! | [`p_lw!`]`(rd, rs2(rs1!))` | `p.lw rD, rs2(rs1!)` | rd = Mem32(rs1); rs1 += rs2 |
//! | [`p_sw!`]`(rs2, imm(rs1!))` | `p.sw rs2, Imm(rs1!)` | Mem32(rs1) = rs2; rs1 += imm |
//! | [`p_sw!`]`(rs2, rs3(rs1!))` | `p.sw rs2, rs3(rs1!)` | Mem32(rs1) = rs2; rs1 += rs3 |
//! | [`lp_starti!`]`(L, off)` | `lp.starti` | lpstart\[L\] = pc + off |
//! | [`lp_endi!`]`(L, off)` | `lp.endi` | lpend\[L\] = pc + off (the loop's last instruction) |
//! | [`lp_count!`]`(L, rs1)` | `lp.count` | lpcount\[L\] = rs1 |
//! | [`lp_counti!`]`(L, n)` | `lp.counti` | lpcount\[L\] = n (1..=4095) |
//! | [`lp_setup!`]`(L, rs1, off)` | `lp.setup` | start = pc + 4, end = pc + off, count = rs1 |
//! | [`lp_setupi!`]`(L, n, off)` | `lp.setupi` | start = pc + 4, end = pc + off (8..=62), count = n |
//! | [`pv_srl_sci_b!`]`(rd, rs1, imm)` | `pv.srl.sci.b` | each byte: rd\[i\] = rs1\[i\] >> imm (0..=7, logical) |
//! | [`pv_sll_sci_b!`]`(rd, rs1, imm)` | `pv.sll.sci.b` | each byte: rd\[i\] = rs1\[i\] << imm (0..=7) |
//! | [`pv_srl_b!`]`(rd, rs1, rs2)` | `pv.srl.b` | each byte: rd\[i\] = rs1\[i\] >> (rs2\[i\] & 7) |
//! | [`pv_sll_b!`]`(rd, rs1, rs2)` | `pv.sll.b` | each byte: rd\[i\] = rs1\[i\] << (rs2\[i\] & 7) |
//! | [`pv_add_h!`]`(rd, rs1, rs2)` | `pv.add.h` | each halfword: rd\[i\] = rs1\[i\] + rs2\[i\] |
//! | [`pv_dotsp_h!`]`(rd, rs1, rs2)` | `pv.dotsp.h` | rd = rs1\[0\]·rs2\[0\] + rs1\[1\]·rs2\[1\] (signed halfwords) |
//! | [`pv_sdotsp_h!`]`(rd, rs1, rs2)` | `pv.sdotsp.h` | rd += rs1\[0\]·rs2\[0\] + rs1\[1\]·rs2\[1\] (signed halfwords) |
//! | [`pv_pack_h!`]`(rd, rs1, rs2)` | `pv.pack.h` | rd = rs1\[15:0\] << 16 \| rs2\[15:0\] |
//! | [`pv_sdotup_sc_h!`]`(rd, rs1, rs2)` | `pv.sdotup.sc.h` | rd += rs1\[0\]·rs2\[0\] + rs1\[1\]·rs2\[0\] (unsigned halfwords) |
//! | [`p_extracti!`]`(rd, rs1, Is3, Is2)` | `p.extract` | rd = sign-extended rs1\[Is2+Is3:Is2\] |
//! | [`p_extractui!`]`(rd, rs1, Is3, Is2)` | `p.extractu` | rd = zero-extended rs1\[Is2+Is3:Is2\] |
//! | [`p_inserti!`]`(rd, rs1, Is3, Is2)` | `p.insert` | rd\[Is2+Is3:Is2\] = rs1\[Is3:0\] |
//! | [`p_addrni!`]`(rd, rs1, rs2, Is3)` | `p.addRN` | rd = (rs1 + rs2 + 2^(Is3−1)) >>a Is3 |
//! | [`pv_sub_h!`]`(rd, rs1, rs2)` | `pv.sub.h` | each halfword: rd\[i\] = rs1\[i\] − rs2\[i\] |
//! | [`pv_shuffle_b!`]`(rd, rs1, rs2)` | `pv.shuffle.b` | rd byte i = rs1 byte (rs2 byte i & 3) |
//! | [`pv_shuffle2_b!`]`(rd, rs1, rs2)` | `pv.shuffle2.b` | rd byte i = (rs2 byte i bit 2 ? rs1 : old rd) byte (rs2 byte i & 3) |
//! | [`pv_shuffle_sci_h!`]`(rd, rs1, imm)` | `pv.shuffle.sci.h` | rd\[i\] = rs1\[imm bit i\] (halfwords; 1 swaps them) |
//! | [`p_lh_rr!`]`(rd, rs2(rs1))` | `p.lh rD, rs2(rs1)` | rd = Mem16(rs1 + rs2) sign-extended (register offset) |
//! | [`p_lhu_rr!`]`(rd, rs2(rs1))` | `p.lhu rD, rs2(rs1)` | rd = Mem16(rs1 + rs2) zero-extended (register offset) |
//! | [`p_lw_rr!`]`(rd, rs2(rs1))` | `p.lw rD, rs2(rs1)` | rd = Mem32(rs1 + rs2) (register offset) |
//! | [`p_sh!`]`(rs2, rs3(rs1))` | `p.sh rs2, rs3(rs1)` | Mem16(rs1 + rs3) = rs2 (register offset) |
//! | [`p_ff1!`]`(rd, rs1)` | `p.ff1` | rd = index of the lowest set bit of rs1 (32 for 0) |
//! | [`pv_abs_h!`]`(rd, rs1)` | `pv.abs.h` | each halfword: rd\[i\] = \|rs1\[i\]\| |
//! | [`p_min!`], [`p_max!`], [`p_minu!`], [`p_maxu!`]`(rd, rs1, rs2)` | `p.min` … | rd = min / max of rs1, rs2 (signed / unsigned) |
//! | [`p_abs!`]`(rd, rs1)` | `p.abs` | rd = \|rs1\| |
//! | [`p_fl1!`]`(rd, rs1)` | `p.fl1` | rd = index of the most significant 1 of rs1 (32 for 0) |
//! | [`p_cnt!`]`(rd, rs1)` | `p.cnt` | rd = the number of set bits of rs1 |
//! | [`p_clb!`]`(rd, rs1)` | `p.clb` | rd = leading bits equal to the sign bit, minus one (0 for 0) |
//! | [`p_bclr!`]`(rd, rs1, rs2)` | `p.bclr` (register form) | rd = rs1 with rs2\[9:5\]+1 bits cleared from bit rs2\[4:0\] |
//! | [`pv_cmpeq_sci_b!`]`(rd, rs1, imm)` | `pv.cmpeq.sci.b` | each byte: rd\[i\] = 0xFF if rs1\[i\] = imm (−32..=31), else 0 |
//! | [`p_clipui!`]`(rd, rs1, Is2)` | `p.clipu` (immediate) | rd = rs1 clipped to 0..=2^(Is2−1)−1 |
//! | [`p_clipi!`]`(rd, rs1, Is2)` | `p.clip` (immediate) | rd = rs1 clipped to −2^(Is2−1)..=2^(Is2−1)−1 |
//! | [`p_clipur!`]`(rd, rs1, rs2)` | `p.clipur` | rd = rs1 clipped to 0..=rs2 |
//! | [`p_extbs!`]`(rd, rs1)` | `p.extbs` | rd = rs1\[7:0\] sign-extended |
//! | [`p_mac!`], [`p_msu!`]`(rd, rs1, rs2)` | `p.mac`, `p.msu` | rd += / −= rs1 · rs2 |
//! | [`p_lbu!`]`(rd, imm(rs1!))`, [`p_lb!`]`(rd, imm(rs1!))` | `p.lbu`, `p.lb` | rd = Mem8(rs1) zero- / sign-extended; rs1 += imm |
//! | [`p_lbu!`]`(rd, rs2(rs1))`, [`p_lb!`]`(rd, rs2(rs1))` | `p.lbu`, `p.lb` | rd = Mem8(rs1 + rs2) zero- / sign-extended |
//! | [`p_sb!`]`(rs2, imm(rs1!))` | `p.sb` | Mem8(rs1) = rs2; rs1 += imm |
//! | [`p_beqimm!`], [`p_bneimm!`]`(rs1, imm)` + label | `p.beqimm`, `p.bneimm` | branch to the label if rs1 = / ≠ imm (−16..=15) |
//!
//! * Registers: ABI names (`zero ra sp gp tp t0-t6 s0-s11 fp a0-a7`) or `x0`-`x31`. The loop level
//!   `L` is `x0`/`x1` as in GNU as, or `0`/`1`.
//! * Errors: an unknown register, an out-of-range or odd immediate, or a missing `!` is a compile
//!   error that names the instruction and the operand (see `tests/compile_fail/`).
//!
//! ## Hardware-loop offsets
//!
//! `lp.starti`, `lp.endi`, `lp.setup` and `lp.setupi` hold PC-relative offsets. GNU as computes
//! them from labels, but LLVM's `.insn` only takes absolute immediates (a forward label difference
//! is rejected with "expected absolute expression"), so these macros take the **byte offset from
//! the `lp.*` instruction itself** as an integer literal (even; the word holds it in halfwords).
//! Write the loop with `.option norvc` so every instruction is 4 bytes and the offset is
//! 4 × (instructions from the `lp.*` to the loop's last instruction), and let the assembler check
//! it against labels after the loop, where both are backward references:
//!
//! ```text
//! "0:", lp_setup!(x0, a1, 384),      // loop end = the instruction 96 words further
//! ...95 instructions..., "1:", <last instruction>,
//! ".if (1b - 0b) != 384", ".error \"hardware loop end offset\"", ".endif",
//! ```
//!
//! Encodings: RI5CY User Manual rev. 4.4, chapter "Instruction Set Extensions" (cross-checked
//! against GreenWaves' GAP8 binutils `riscv-opc.h`, and for the packed-SIMD `pv.*` words against
//! the GAP8 GVSOC instruction decoder, `isa_riscv_gen.py`); see `encode.rs`, whose unit tests pin
//! every instruction to golden words.
use proc_macro::TokenStream;
use proc_macro2::{Delimiter, Span, TokenTree};
use syn::parse::ParseStream;
use syn::{Ident, LitInt, LitStr, Token};

mod encode;

use encode::OperandError;

/// A register operand: identifier `a0`, `x31`, ...
struct Reg {
    num: u32,
}

fn parse_reg(input: ParseStream, insn: &str, operand: &str) -> syn::Result<Reg> {
    let ident: Ident = input.parse().map_err(|e| {
        syn::Error::new(
            e.span(),
            format!("{insn}: operand {operand} must be a register name (x0-x31 or an ABI name)"),
        )
    })?;
    let name = ident.to_string();
    match encode::reg_number(&name) {
        Some(num) => Ok(Reg { num }),
        None => Err(syn::Error::new(
            ident.span(),
            format!(
                "{insn}: unknown register `{name}` for operand {operand} (expected x0-x31 or an ABI name)"
            ),
        )),
    }
}

/// A signed integer literal, optionally preceded by `-`.
fn parse_int(input: ParseStream, insn: &str, operand: &str) -> syn::Result<(i64, Span)> {
    let neg = input.peek(Token![-]);
    let span = input.span();
    if neg {
        input.parse::<Token![-]>()?;
    }
    let lit: LitInt = input.parse().map_err(|e| {
        syn::Error::new(
            e.span(),
            format!("{insn}: operand {operand} must be an integer literal"),
        )
    })?;
    let v: i64 = lit.base10_parse().map_err(|_| {
        syn::Error::new(
            lit.span(),
            format!("{insn}: operand {operand}: `{lit}` is not a 64-bit integer"),
        )
    })?;
    Ok((if neg { -v } else { v }, span))
}

/// Loop level: `x0`/`x1` (GNU as syntax) or `0`/`1`.
fn parse_level(input: ParseStream, insn: &str) -> syn::Result<(u32, Span)> {
    let span = input.span();
    if input.peek(LitInt) {
        let (v, s) = parse_int(input, insn, "L")?;
        if !(0..=1).contains(&v) {
            return Err(syn::Error::new(
                s,
                format!("{insn}: operand L: loop level {v} does not exist (use 0/x0 or 1/x1)"),
            ));
        }
        return Ok((v as u32, s));
    }
    let ident: Ident = input.parse().map_err(|e| {
        syn::Error::new(
            e.span(),
            format!("{insn}: operand L must be x0, x1, 0 or 1"),
        )
    })?;
    match ident.to_string().as_str() {
        "x0" => Ok((0, span)),
        "x1" => Ok((1, span)),
        other => Err(syn::Error::new(
            ident.span(),
            format!("{insn}: operand L: `{other}` is not a loop level (use x0 or x1)"),
        )),
    }
}

fn comma(input: ParseStream, insn: &str) -> syn::Result<()> {
    input
        .parse::<Token![,]>()
        .map(|_| ())
        .map_err(|e| syn::Error::new(e.span(), format!("{insn}: expected `,` between operands")))
}

fn end(input: ParseStream, insn: &str) -> syn::Result<()> {
    if !input.is_empty() {
        return Err(syn::Error::new(
            input.span(),
            format!("{insn}: unexpected extra operand"),
        ));
    }
    Ok(())
}

fn operand_error(insn: &str, span: Span, e: OperandError) -> syn::Error {
    syn::Error::new(
        span,
        format!("{insn}: operand {}: {}", e.operand, e.message),
    )
}

/// Runs an operand parser and turns its word into one `.insn` string literal, or its error into
/// a `compile_error!` at the offending operand.
fn expand(input: TokenStream, f: fn(ParseStream) -> syn::Result<u32>) -> TokenStream {
    match syn::parse::Parser::parse(f, input) {
        Ok(word) => {
            let lit = LitStr::new(&encode::insn_directive(word), Span::call_site());
            quote::quote!(#lit).into()
        }
        Err(e) => e.to_compile_error().into(),
    }
}

// ------------------------------------------------------------------------------------------------
// p.ror

fn parse_p_ror(input: ParseStream) -> syn::Result<u32> {
    const I: &str = "p.ror";
    let rd = parse_reg(input, I, "rD")?;
    comma(input, I)?;
    let rs1 = parse_reg(input, I, "rs1")?;
    comma(input, I)?;
    let rs2 = parse_reg(input, I, "rs2")?;
    end(input, I)?;
    Ok(encode::p_ror(rd.num, rs1.num, rs2.num))
}

/// `p.ror rD, rs1, rs2`: rotate right by register. `p_ror!(a0, a0, a1)` → `".insn 4, 0x08b55533"`.
///
/// An unknown register is a compile error naming the operand:
/// ```compile_fail
/// asm_macros::p_ror!(a0, a0, q1);
/// ```
#[proc_macro]
pub fn p_ror(input: TokenStream) -> TokenStream {
    expand(input, parse_p_ror)
}

// ------------------------------------------------------------------------------------------------
// p.lw / p.sw, post-increment: `reg, imm(base!)` or `reg, off_reg(base!)`

enum Offset {
    Imm(i64, Span),
    Reg(Reg),
}

const POSTINC_HINT: &str = "expected `(rs1!)` after the offset (post-increment form)";

/// Parses `imm(rs1!)` / `-imm(rs1!)` / `rs2(rs1!)`; returns (offset, base register).
fn parse_postinc(
    input: ParseStream,
    insn: &'static str,
    off_name: &str,
) -> syn::Result<(Offset, Reg)> {
    let off = if input.peek(Ident) {
        Offset::Reg(parse_reg(input, insn, off_name)?)
    } else {
        let (v, s) = parse_int(input, insn, "Imm")?;
        Offset::Imm(v, s)
    };
    let group = match input.parse::<TokenTree>() {
        Ok(TokenTree::Group(g)) if g.delimiter() == Delimiter::Parenthesis => g,
        Ok(other) => {
            return Err(syn::Error::new(
                other.span(),
                format!("{insn}: {POSTINC_HINT}"),
            ));
        }
        Err(e) => return Err(syn::Error::new(e.span(), format!("{insn}: {POSTINC_HINT}"))),
    };
    let gspan = group.span_close();
    let base = syn::parse::Parser::parse2(
        move |inner: ParseStream| -> syn::Result<Reg> {
            let base = parse_reg(inner, insn, "rs1")?;
            if !inner.peek(Token![!]) {
                return Err(syn::Error::new(
                    gspan,
                    format!(
                        "{insn}: operand rs1: only the post-increment form `(rs1!)` exists here; add `!`"
                    ),
                ));
            }
            inner.parse::<Token![!]>()?;
            if !inner.is_empty() {
                return Err(syn::Error::new(
                    inner.span(),
                    format!("{insn}: unexpected tokens after `rs1!`"),
                ));
            }
            Ok(base)
        },
        group.stream(),
    )?;
    Ok((off, base))
}

fn parse_p_lw(input: ParseStream) -> syn::Result<u32> {
    const I: &str = "p.lw";
    let rd = parse_reg(input, I, "rD")?;
    comma(input, I)?;
    let (off, base) = parse_postinc(input, I, "rs2")?;
    end(input, I)?;
    Ok(match off {
        Offset::Imm(v, span) => {
            encode::p_lw_imm(rd.num, v, base.num).map_err(|e| operand_error(I, span, e))?
        }
        Offset::Reg(rs2) => encode::p_lw_reg(rd.num, rs2.num, base.num),
    })
}

/// Post-increment load word: `p_lw!(rd, imm(rs1!))` (imm −2048..=2047) or `p_lw!(rd, rs2(rs1!))`.
///
/// ```compile_fail
/// asm_macros::p_lw!(a0, 2048(a1!));
/// ```
#[proc_macro]
pub fn p_lw(input: TokenStream) -> TokenStream {
    expand(input, parse_p_lw)
}

fn parse_p_sw(input: ParseStream) -> syn::Result<u32> {
    const I: &str = "p.sw";
    let rs2 = parse_reg(input, I, "rs2")?;
    comma(input, I)?;
    let (off, base) = parse_postinc(input, I, "rs3")?;
    end(input, I)?;
    Ok(match off {
        Offset::Imm(v, span) => {
            encode::p_sw_imm(rs2.num, v, base.num).map_err(|e| operand_error(I, span, e))?
        }
        Offset::Reg(rs3) => encode::p_sw_reg(rs2.num, rs3.num, base.num),
    })
}

/// Post-increment store word: `p_sw!(rs2, imm(rs1!))` (imm −2048..=2047) or `p_sw!(rs2, rs3(rs1!))`.
///
/// ```compile_fail
/// asm_macros::p_sw!(a0, 4(a1));
/// ```
#[proc_macro]
pub fn p_sw(input: TokenStream) -> TokenStream {
    expand(input, parse_p_sw)
}

// ------------------------------------------------------------------------------------------------
// hardware loops

/// Maps an encoder error to the span of the operand it names.
fn lp_error(insn: &str, e: OperandError, spans: &[(&str, Span)]) -> syn::Error {
    let span = spans
        .iter()
        .find(|(n, _)| *n == e.operand)
        .map(|(_, s)| *s)
        .unwrap_or_else(Span::call_site);
    operand_error(insn, span, e)
}

/// `L, imm` forms: lp.starti, lp.endi, lp.counti.
fn parse_l_imm(
    input: ParseStream,
    insn: &str,
    f: fn(u32, i64) -> Result<u32, OperandError>,
) -> syn::Result<u32> {
    let (l, lspan) = parse_level(input, insn)?;
    comma(input, insn)?;
    let (v, span) = parse_int(input, insn, "uimmL")?;
    end(input, insn)?;
    f(l, v).map_err(|e| lp_error(insn, e, &[("L", lspan), ("uimmL", span)]))
}

/// `lp.starti L, off`: loop L starts at this instruction's address + `off` bytes (even, 0..=8190).
#[proc_macro]
pub fn lp_starti(input: TokenStream) -> TokenStream {
    expand(input, |i| parse_l_imm(i, "lp.starti", encode::lp_starti))
}

/// `lp.endi L, off`: loop L's last instruction is at this instruction's address + `off` bytes
/// (even, 0..=8190).
///
/// ```compile_fail
/// asm_macros::lp_endi!(x1, 7);
/// ```
#[proc_macro]
pub fn lp_endi(input: TokenStream) -> TokenStream {
    expand(input, |i| parse_l_imm(i, "lp.endi", encode::lp_endi))
}

/// `lp.counti L, n`: loop L runs its body `n` times (1..=4095).
///
/// ```compile_fail
/// asm_macros::lp_counti!(x0, 4096);
/// ```
#[proc_macro]
pub fn lp_counti(input: TokenStream) -> TokenStream {
    expand(input, |i| parse_l_imm(i, "lp.counti", encode::lp_counti))
}

fn parse_lp_count(input: ParseStream) -> syn::Result<u32> {
    const I: &str = "lp.count";
    let (l, lspan) = parse_level(input, I)?;
    comma(input, I)?;
    let rs1 = parse_reg(input, I, "rs1")?;
    end(input, I)?;
    encode::lp_count(l, rs1.num).map_err(|e| lp_error(I, e, &[("L", lspan)]))
}

/// `lp.count L, rs1`: loop L runs its body `rs1` times (`rs1` must be non-zero at run time).
#[proc_macro]
pub fn lp_count(input: TokenStream) -> TokenStream {
    expand(input, parse_lp_count)
}

fn parse_lp_setup(input: ParseStream) -> syn::Result<u32> {
    const I: &str = "lp.setup";
    let (l, lspan) = parse_level(input, I)?;
    comma(input, I)?;
    let rs1 = parse_reg(input, I, "rs1")?;
    comma(input, I)?;
    let (off, span) = parse_int(input, I, "uimmL")?;
    end(input, I)?;
    encode::lp_setup(l, rs1.num, off).map_err(|e| lp_error(I, e, &[("L", lspan), ("uimmL", span)]))
}

/// `lp.setup L, rs1, off`: the loop body starts at the next instruction, its last instruction is
/// at this instruction's address + `off` bytes (even, 8..=8190), and it runs `rs1` times.
#[proc_macro]
pub fn lp_setup(input: TokenStream) -> TokenStream {
    expand(input, parse_lp_setup)
}

fn parse_lp_setupi(input: ParseStream) -> syn::Result<u32> {
    const I: &str = "lp.setupi";
    let (l, lspan) = parse_level(input, I)?;
    comma(input, I)?;
    let (count, cspan) = parse_int(input, I, "uimmL")?;
    comma(input, I)?;
    let (off, ospan) = parse_int(input, I, "uimmS")?;
    end(input, I)?;
    encode::lp_setupi(l, count, off)
        .map_err(|e| lp_error(I, e, &[("L", lspan), ("uimmL", cspan), ("uimmS", ospan)]))
}

/// `lp.setupi L, n, off`: like [`lp_setup!`] with an immediate count `n` (1..=4095) and a short
/// end offset `off` (bytes, even, 8..=62).
///
/// ```compile_fail
/// asm_macros::lp_setupi!(x0, 10, 64);
/// ```
#[proc_macro]
pub fn lp_setupi(input: TokenStream) -> TokenStream {
    expand(input, parse_lp_setupi)
}

// ------------------------------------------------------------------------------------------------
// packed SIMD: byte shifts

fn parse_pv_sci_b(
    input: ParseStream,
    insn: &str,
    f: fn(u32, u32, i64) -> Result<u32, OperandError>,
) -> syn::Result<u32> {
    let rd = parse_reg(input, insn, "rD")?;
    comma(input, insn)?;
    let rs1 = parse_reg(input, insn, "rs1")?;
    comma(input, insn)?;
    let (imm, span) = parse_int(input, insn, "Imm6")?;
    end(input, insn)?;
    f(rd.num, rs1.num, imm).map_err(|e| operand_error(insn, span, e))
}

fn parse_pv_rr(input: ParseStream, insn: &str, f: fn(u32, u32, u32) -> u32) -> syn::Result<u32> {
    let rd = parse_reg(input, insn, "rD")?;
    comma(input, insn)?;
    let rs1 = parse_reg(input, insn, "rs1")?;
    comma(input, insn)?;
    let rs2 = parse_reg(input, insn, "rs2")?;
    end(input, insn)?;
    Ok(f(rd.num, rs1.num, rs2.num))
}

/// `pv.srl.sci.b rD, rs1, imm`: every byte of rs1 shifted right (logical) by `imm` (0..=7).
/// `pv_srl_sci_b!(a0, a1, 2)` → `".insn 4, 0x4015f557"`.
///
/// ```compile_fail
/// asm_macros::pv_srl_sci_b!(a0, a1, 8);
/// ```
#[proc_macro]
pub fn pv_srl_sci_b(input: TokenStream) -> TokenStream {
    expand(input, |i| {
        parse_pv_sci_b(i, "pv.srl.sci.b", encode::pv_srl_sci_b)
    })
}

/// `pv.sll.sci.b rD, rs1, imm`: every byte of rs1 shifted left by `imm` (0..=7).
/// `pv_sll_sci_b!(a0, a1, 6)` → `".insn 4, 0x5035f557"`.
///
/// ```compile_fail
/// asm_macros::pv_sll_sci_b!(a0, a1, -1);
/// ```
#[proc_macro]
pub fn pv_sll_sci_b(input: TokenStream) -> TokenStream {
    expand(input, |i| {
        parse_pv_sci_b(i, "pv.sll.sci.b", encode::pv_sll_sci_b)
    })
}

/// `pv.srl.b rD, rs1, rs2`: byte `i` of rs1 shifted right (logical) by bits 2:0 of byte `i` of
/// rs2. `pv_srl_b!(a0, a1, a2)` → `".insn 4, 0x40c59557"`.
#[proc_macro]
pub fn pv_srl_b(input: TokenStream) -> TokenStream {
    expand(input, |i| parse_pv_rr(i, "pv.srl.b", encode::pv_srl_b))
}

/// `pv.sll.b rD, rs1, rs2`: byte `i` of rs1 shifted left by bits 2:0 of byte `i` of rs2.
/// `pv_sll_b!(a0, a1, a2)` → `".insn 4, 0x50c59557"`.
///
/// ```compile_fail
/// asm_macros::pv_sll_b!(a0, a1, 3);
/// ```
#[proc_macro]
pub fn pv_sll_b(input: TokenStream) -> TokenStream {
    expand(input, |i| parse_pv_rr(i, "pv.sll.b", encode::pv_sll_b))
}

// ------------------------------------------------------------------------------------------------
// packed SIMD halfword arithmetic, bit manipulation with immediates, rounded add-and-shift
// (the Poly1305 radix-2^13 kernel)

/// `pv.add.h rD, rs1, rs2`: halfword-wise sum. `pv_add_h!(a0, a1, a2)` → `".insn 4, 0x00c58557"`.
#[proc_macro]
pub fn pv_add_h(input: TokenStream) -> TokenStream {
    expand(input, |i| parse_pv_rr(i, "pv.add.h", encode::pv_add_h))
}

/// `pv.dotsp.h rD, rs1, rs2`: signed halfword dot product.
/// `pv_dotsp_h!(x31, x31, x31)` → `".insn 4, 0x99ff8fd7"`.
#[proc_macro]
pub fn pv_dotsp_h(input: TokenStream) -> TokenStream {
    expand(input, |i| parse_pv_rr(i, "pv.dotsp.h", encode::pv_dotsp_h))
}

/// `pv.sdotsp.h rD, rs1, rs2`: signed halfword dot product added to rD.
/// `pv_sdotsp_h!(a0, a1, a2)` → `".insn 4, 0xb8c58557"`.
#[proc_macro]
pub fn pv_sdotsp_h(input: TokenStream) -> TokenStream {
    expand(input, |i| {
        parse_pv_rr(i, "pv.sdotsp.h", encode::pv_sdotsp_h)
    })
}

/// `pv.pack.h rD, rs1, rs2`: rD = rs1\[15:0\] << 16 | rs2\[15:0\].
/// `pv_pack_h!(t6, ra, zero)` → `".insn 4, 0xd0008fd7"`.
#[proc_macro]
pub fn pv_pack_h(input: TokenStream) -> TokenStream {
    expand(input, |i| parse_pv_rr(i, "pv.pack.h", encode::pv_pack_h))
}

/// `pv.sdotup.sc.h rD, rs1, rs2`: rD += rs1\[0\]·rs2\[0\] + rs1\[1\]·rs2\[0\] (unsigned
/// halfwords). `pv_sdotup_sc_h!(a0, a1, a2)` → `".insn 4, 0xa0c5c557"`.
#[proc_macro]
pub fn pv_sdotup_sc_h(input: TokenStream) -> TokenStream {
    expand(input, |i| {
        parse_pv_rr(i, "pv.sdotup.sc.h", encode::pv_sdotup_sc_h)
    })
}

fn parse_bit_imm(
    input: ParseStream,
    insn: &str,
    f: fn(u32, u32, i64, i64) -> Result<u32, OperandError>,
) -> syn::Result<u32> {
    let rd = parse_reg(input, insn, "rD")?;
    comma(input, insn)?;
    let rs1 = parse_reg(input, insn, "rs1")?;
    comma(input, insn)?;
    let (is3, s3) = parse_int(input, insn, "Is3")?;
    comma(input, insn)?;
    let (is2, s2) = parse_int(input, insn, "Is2")?;
    end(input, insn)?;
    f(rd.num, rs1.num, is3, is2).map_err(|e| {
        let span = if e.operand == "Is3" { s3 } else { s2 };
        operand_error(insn, span, e)
    })
}

/// `p.extract rD, rs1, Is3, Is2`: the `Is3 + 1` bits of rs1 from bit `Is2`, sign-extended.
/// `p_extracti!(a0, a1, 12, 0)` → `".insn 4, 0xd8058533"`.
///
/// ```compile_fail
/// asm_macros::p_extracti!(a0, a1, 32, 0);
/// ```
#[proc_macro]
pub fn p_extracti(input: TokenStream) -> TokenStream {
    expand(input, |i| parse_bit_imm(i, "p.extract", encode::p_extracti))
}

/// `p.extractu rD, rs1, Is3, Is2`: the `Is3 + 1` bits of rs1 from bit `Is2`, zero-extended.
/// `p_extractui!(a0, a1, 12, 13)` → `".insn 4, 0xd8d59533"`.
#[proc_macro]
pub fn p_extractui(input: TokenStream) -> TokenStream {
    expand(input, |i| {
        parse_bit_imm(i, "p.extractu", encode::p_extractui)
    })
}

/// `p.insert rD, rs1, Is3, Is2`: the low `Is3 + 1` bits of rs1 into rD from bit `Is2`.
/// `p_inserti!(a0, a1, 6, 6)` → `".insn 4, 0xcc65a533"`.
#[proc_macro]
pub fn p_inserti(input: TokenStream) -> TokenStream {
    expand(input, |i| parse_bit_imm(i, "p.insert", encode::p_inserti))
}

/// `p.addRN rD, rs1, rs2, Is3`: (rs1 + rs2 + 2^(Is3 − 1)) shifted right arithmetically by Is3.
/// `p_addrni!(a0, a1, zero, 13)` → `".insn 4, 0x1a05e55b"`.
///
/// ```compile_fail
/// asm_macros::p_addrni!(a0, a1, zero, 32);
/// ```
#[proc_macro]
pub fn p_addrni(input: TokenStream) -> TokenStream {
    expand(input, |i| {
        let rd = parse_reg(i, "p.addRN", "rD")?;
        comma(i, "p.addRN")?;
        let rs1 = parse_reg(i, "p.addRN", "rs1")?;
        comma(i, "p.addRN")?;
        let rs2 = parse_reg(i, "p.addRN", "rs2")?;
        comma(i, "p.addRN")?;
        let (is3, span) = parse_int(i, "p.addRN", "Is3")?;
        end(i, "p.addRN")?;
        encode::p_addrni(rd.num, rs1.num, rs2.num, is3)
            .map_err(|e| operand_error("p.addRN", span, e))
    })
}

// ------------------------------------------------------------------------------------------------
// The JPEG forward DCT and entropy coder (gapstream_jpeg): halfword subtract and shuffle, find last 1

/// `pv.sub.h rD, rs1, rs2`: halfword-wise difference. `pv_sub_h!(a0, a1, a2)` → `".insn 4, 0x08c58557"`.
#[proc_macro]
pub fn pv_sub_h(input: TokenStream) -> TokenStream {
    expand(input, |i| parse_pv_rr(i, "pv.sub.h", encode::pv_sub_h))
}

/// `pv.shuffle2.b rD, rs1, rs2`: byte `i` of rD is byte `rs2[8 i + 1 : 8 i]` of rs1 if
/// `rs2[8 i + 2]` is set, else of the old rD. `pv_shuffle2_b!(a0, a1, a2)` →
/// `".insn 4, 0xc8c59557"`.
#[proc_macro]
pub fn pv_shuffle2_b(input: TokenStream) -> TokenStream {
    expand(input, |i| {
        parse_pv_rr(i, "pv.shuffle2.b", encode::pv_shuffle2_b)
    })
}

/// `pv.shuffle.b rD, rs1, rs2`: byte `i` of rD is byte `rs2[8 i + 1 : 8 i]` of rs1.
/// `pv_shuffle_b!(a0, a1, a2)` → `".insn 4, 0xc0c59557"`.
#[proc_macro]
pub fn pv_shuffle_b(input: TokenStream) -> TokenStream {
    expand(input, |i| {
        parse_pv_rr(i, "pv.shuffle.b", encode::pv_shuffle_b)
    })
}

/// `pv.shuffle.sci.h rD, rs1, imm`: halfword `i` of rD is halfword `imm` bit `i` of rs1 (0..=3;
/// 1 swaps the halves). `pv_shuffle_sci_h!(a0, a1, 1)` → `".insn 4, 0xc205e557"`.
///
/// ```compile_fail
/// asm_macros::pv_shuffle_sci_h!(a0, a1, 4);
/// ```
#[proc_macro]
pub fn pv_shuffle_sci_h(input: TokenStream) -> TokenStream {
    expand(input, |i| {
        let rd = parse_reg(i, "pv.shuffle.sci.h", "rD")?;
        comma(i, "pv.shuffle.sci.h")?;
        let rs1 = parse_reg(i, "pv.shuffle.sci.h", "rs1")?;
        comma(i, "pv.shuffle.sci.h")?;
        let (imm, span) = parse_int(i, "pv.shuffle.sci.h", "Imm6")?;
        end(i, "pv.shuffle.sci.h")?;
        encode::pv_shuffle_sci_h(rd.num, rs1.num, imm)
            .map_err(|e| operand_error("pv.shuffle.sci.h", span, e))
    })
}

/// `p.ff1 rD, rs1`: index of the least significant set bit of rs1 (32 for 0).
/// `p_ff1!(a0, a1)` → `".insn 4, 0x10058533"`.
#[proc_macro]
pub fn p_ff1(input: TokenStream) -> TokenStream {
    expand(input, |i| {
        let rd = parse_reg(i, "p.ff1", "rD")?;
        comma(i, "p.ff1")?;
        let rs1 = parse_reg(i, "p.ff1", "rs1")?;
        end(i, "p.ff1")?;
        Ok(encode::p_ff1(rd.num, rs1.num))
    })
}

/// `pv.abs.h rD, rs1`: halfword-wise absolute value. `pv_abs_h!(a0, a1)` → `".insn 4, 0x70058557"`.
#[proc_macro]
pub fn pv_abs_h(input: TokenStream) -> TokenStream {
    expand(input, |i| {
        let rd = parse_reg(i, "pv.abs.h", "rD")?;
        comma(i, "pv.abs.h")?;
        let rs1 = parse_reg(i, "pv.abs.h", "rs1")?;
        end(i, "pv.abs.h")?;
        Ok(encode::pv_abs_h(rd.num, rs1.num))
    })
}

/// `p.sh rs2, rs3(rs1)`: halfword store at `rs1 + rs3` (register offset, no post-increment).
/// `p_sh!(t5, a0(a1))` → `".insn 4, 0x01e5d523"`.
///
/// ```compile_fail
/// asm_macros::p_sh!(t5, a0(a1!));
/// ```
#[proc_macro]
pub fn p_sh(input: TokenStream) -> TokenStream {
    expand(input, |input| {
        const I: &str = "p.sh";
        let rs2 = parse_reg(input, I, "rs2")?;
        comma(input, I)?;
        let rs3 = parse_reg(input, I, "rs3")?;
        let group = match input.parse::<TokenTree>() {
            Ok(TokenTree::Group(g)) if g.delimiter() == Delimiter::Parenthesis => g,
            Ok(other) => {
                return Err(syn::Error::new(
                    other.span(),
                    "p.sh: expected `(rs1)` after the offset register",
                ));
            }
            Err(e) => {
                return Err(syn::Error::new(
                    e.span(),
                    "p.sh: expected `(rs1)` after the offset register",
                ));
            }
        };
        let base = syn::parse::Parser::parse2(
            |inner: ParseStream| -> syn::Result<Reg> {
                let base = parse_reg(inner, I, "rs1")?;
                if !inner.is_empty() {
                    return Err(syn::Error::new(
                        inner.span(),
                        "p.sh: only the register-offset form `rs3(rs1)` exists here",
                    ));
                }
                Ok(base)
            },
            group.stream(),
        )?;
        end(input, I)?;
        Ok(encode::p_sh_rr(rs2.num, rs3.num, base.num))
    })
}

/// Parses `rD, rs2(rs1)` (register offset, no post-increment) and encodes it with `f`.
fn parse_load_rr(
    input: ParseStream,
    insn: &'static str,
    f: fn(u32, u32, u32) -> u32,
) -> syn::Result<u32> {
    let rd = parse_reg(input, insn, "rD")?;
    comma(input, insn)?;
    let rs2 = parse_reg(input, insn, "rs2")?;
    let group = match input.parse::<TokenTree>() {
        Ok(TokenTree::Group(g)) if g.delimiter() == Delimiter::Parenthesis => g,
        Ok(other) => {
            return Err(syn::Error::new(
                other.span(),
                format!("{insn}: expected `(rs1)` after the offset register"),
            ));
        }
        Err(e) => {
            return Err(syn::Error::new(
                e.span(),
                format!("{insn}: expected `(rs1)` after the offset register"),
            ));
        }
    };
    let base = syn::parse::Parser::parse2(
        |inner: ParseStream| -> syn::Result<Reg> {
            let base = parse_reg(inner, insn, "rs1")?;
            if !inner.is_empty() {
                return Err(syn::Error::new(
                    inner.span(),
                    format!("{insn}: only the register-offset form `rs2(rs1)` exists here"),
                ));
            }
            Ok(base)
        },
        group.stream(),
    )?;
    end(input, insn)?;
    Ok(f(rd.num, rs2.num, base.num))
}

/// `p.lh rD, rs2(rs1)`: halfword load at `rs1 + rs2`, sign-extended (register offset).
/// `p_lh_rr!(a0, a1(a2))` → `".insn 4, 0x10b67503"`.
///
/// ```compile_fail
/// asm_macros::p_lh_rr!(a0, a1(a2!));
/// ```
#[proc_macro]
pub fn p_lh_rr(input: TokenStream) -> TokenStream {
    expand(input, |i| parse_load_rr(i, "p.lh", encode::p_lh_rr))
}

/// `p.lhu rD, rs2(rs1)`: halfword load at `rs1 + rs2`, zero-extended (register offset).
/// `p_lhu_rr!(a0, a1(a2))` → `".insn 4, 0x50b67503"`.
#[proc_macro]
pub fn p_lhu_rr(input: TokenStream) -> TokenStream {
    expand(input, |i| parse_load_rr(i, "p.lhu", encode::p_lhu_rr))
}

/// `p.lw rD, rs2(rs1)`: word load at `rs1 + rs2` (register offset).
/// `p_lw_rr!(a0, a1(a2))` → `".insn 4, 0x20b67503"`.
#[proc_macro]
pub fn p_lw_rr(input: TokenStream) -> TokenStream {
    expand(input, |i| parse_load_rr(i, "p.lw", encode::p_lw_rr))
}

// ------------------------------------------------------------------------------------------------
// ALU: p.min / p.max / p.minu / p.maxu, p.abs, p.fl1, p.clipu (immediate)

fn parse_rrr(input: ParseStream, insn: &str, f: fn(u32, u32, u32) -> u32) -> syn::Result<u32> {
    let rd = parse_reg(input, insn, "rD")?;
    comma(input, insn)?;
    let rs1 = parse_reg(input, insn, "rs1")?;
    comma(input, insn)?;
    let rs2 = parse_reg(input, insn, "rs2")?;
    end(input, insn)?;
    Ok(f(rd.num, rs1.num, rs2.num))
}

fn parse_rr(input: ParseStream, insn: &str, f: fn(u32, u32) -> u32) -> syn::Result<u32> {
    let rd = parse_reg(input, insn, "rD")?;
    comma(input, insn)?;
    let rs1 = parse_reg(input, insn, "rs1")?;
    end(input, insn)?;
    Ok(f(rd.num, rs1.num))
}

/// `p.min rD, rs1, rs2` (signed). `p_min!(a0, a1, a2)` → `".insn 4, 0x04c5c533"`.
#[proc_macro]
pub fn p_min(input: TokenStream) -> TokenStream {
    expand(input, |i| parse_rrr(i, "p.min", encode::p_min))
}

/// `p.minu rD, rs1, rs2` (unsigned). `p_minu!(a0, a1, a2)` → `".insn 4, 0x04c5d533"`.
#[proc_macro]
pub fn p_minu(input: TokenStream) -> TokenStream {
    expand(input, |i| parse_rrr(i, "p.minu", encode::p_minu))
}

/// `p.max rD, rs1, rs2` (signed). `p_max!(a0, a1, a2)` → `".insn 4, 0x04c5e533"`.
#[proc_macro]
pub fn p_max(input: TokenStream) -> TokenStream {
    expand(input, |i| parse_rrr(i, "p.max", encode::p_max))
}

/// `p.maxu rD, rs1, rs2` (unsigned). `p_maxu!(a0, a1, a2)` → `".insn 4, 0x04c5f533"`.
#[proc_macro]
pub fn p_maxu(input: TokenStream) -> TokenStream {
    expand(input, |i| parse_rrr(i, "p.maxu", encode::p_maxu))
}

/// `p.abs rD, rs1`. `p_abs!(a0, a1)` → `".insn 4, 0x04058533"`.
#[proc_macro]
pub fn p_abs(input: TokenStream) -> TokenStream {
    expand(input, |i| parse_rr(i, "p.abs", encode::p_abs))
}

/// `p.fl1 rD, rs1`: the index of rs1's most significant 1. `p_fl1!(a0, a1)` → `".insn 4, 0x10059533"`.
#[proc_macro]
pub fn p_fl1(input: TokenStream) -> TokenStream {
    expand(input, |i| parse_rr(i, "p.fl1", encode::p_fl1))
}

/// `p.cnt rD, rs1`: the number of set bits of rs1. `p_cnt!(a0, a1)` → `".insn 4, 0x1005b533"`.
#[proc_macro]
pub fn p_cnt(input: TokenStream) -> TokenStream {
    expand(input, |i| parse_rr(i, "p.cnt", encode::p_cnt))
}

/// `p.clb rD, rs1`: leading bits of rs1 equal to its sign bit, minus one (0 for 0; `30 - fl1`
/// of a positive value). `p_clb!(a0, a1)` → `".insn 4, 0x1005a533"`.
#[proc_macro]
pub fn p_clb(input: TokenStream) -> TokenStream {
    expand(input, |i| parse_rr(i, "p.clb", encode::p_clb))
}

/// `p.bclr rD, rs1, rs2` (register form): rs1 with `rs2[9:5] + 1` bits cleared from bit
/// `rs2[4:0]` (one bit for `rs2 < 32`). `p_bclr!(a0, a1, a2)` → `".insn 4, 0x80c5b533"`.
#[proc_macro]
pub fn p_bclr(input: TokenStream) -> TokenStream {
    expand(input, |i| parse_rrr(i, "p.bclr", encode::p_bclr))
}

/// `pv.cmpeq.sci.b rD, rs1, imm`: each byte all ones where rs1's byte equals `imm` (−32..=31,
/// sign-extended), else 0. `pv_cmpeq_sci_b!(t1, t2, -1)` → `".insn 4, 0x07f3f357"`.
///
/// ```compile_fail
/// asm_macros::pv_cmpeq_sci_b!(a0, a1, 32);
/// ```
#[proc_macro]
pub fn pv_cmpeq_sci_b(input: TokenStream) -> TokenStream {
    expand(input, |i| {
        let rd = parse_reg(i, "pv.cmpeq.sci.b", "rD")?;
        comma(i, "pv.cmpeq.sci.b")?;
        let rs1 = parse_reg(i, "pv.cmpeq.sci.b", "rs1")?;
        comma(i, "pv.cmpeq.sci.b")?;
        let (imm, span) = parse_int(i, "pv.cmpeq.sci.b", "Imm6")?;
        end(i, "pv.cmpeq.sci.b")?;
        encode::pv_cmpeq_sci_b(rd.num, rs1.num, imm)
            .map_err(|e| operand_error("pv.cmpeq.sci.b", span, e))
    })
}

/// `p.clipu rD, rs1, Is2` (immediate form, `p.clipui` in GVSOC's decoder): rs1 clipped to
/// 0..=2^(Is2−1)−1. `p_clipui!(a0, a1, 9)` → `".insn 4, 0x1495a533"`.
///
/// ```compile_fail
/// asm_macros::p_clipui!(a0, a1, 32);
/// ```
#[proc_macro]
pub fn p_clipui(input: TokenStream) -> TokenStream {
    expand(input, |i| {
        const I: &str = "p.clipu";
        let rd = parse_reg(i, I, "rD")?;
        comma(i, I)?;
        let rs1 = parse_reg(i, I, "rs1")?;
        comma(i, I)?;
        let (v, span) = parse_int(i, I, "Is2")?;
        end(i, I)?;
        encode::p_clipui(rd.num, rs1.num, v).map_err(|e| operand_error(I, span, e))
    })
}

// ------------------------------------------------------------------------------------------------
// The JPEG-LS line coder's forms: byte loads and stores (post-increment or register-register),
// multiply-accumulate, signed and register clips, byte sign extension

/// Parses `imm(rs1!)`, `-imm(rs1!)`, `rs2(rs1)` or `rs2(rs1!)`; returns (offset, base, `!`).
fn parse_mem(input: ParseStream, insn: &'static str) -> syn::Result<(Offset, Reg, bool, Span)> {
    let span = input.span();
    let off = if input.peek(Ident) {
        Offset::Reg(parse_reg(input, insn, "rs2")?)
    } else {
        let (v, s) = parse_int(input, insn, "Imm")?;
        Offset::Imm(v, s)
    };
    let group = match input.parse::<TokenTree>() {
        Ok(TokenTree::Group(g)) if g.delimiter() == Delimiter::Parenthesis => g,
        Ok(other) => {
            return Err(syn::Error::new(
                other.span(),
                format!("{insn}: expected `(rs1)` or `(rs1!)` after the offset"),
            ));
        }
        Err(e) => {
            return Err(syn::Error::new(
                e.span(),
                format!("{insn}: expected `(rs1)` or `(rs1!)` after the offset"),
            ));
        }
    };
    let (base, bang) = syn::parse::Parser::parse2(
        move |inner: ParseStream| -> syn::Result<(Reg, bool)> {
            let base = parse_reg(inner, insn, "rs1")?;
            let bang = inner.peek(Token![!]);
            if bang {
                inner.parse::<Token![!]>()?;
            }
            if !inner.is_empty() {
                return Err(syn::Error::new(
                    inner.span(),
                    format!("{insn}: unexpected tokens after the base register"),
                ));
            }
            Ok((base, bang))
        },
        group.stream(),
    )?;
    Ok((off, base, bang, span))
}

/// A byte load: `imm(rs1!)` (post-increment) or `rs2(rs1)` (register-register).
fn parse_byte_load(
    input: ParseStream,
    insn: &'static str,
    post: fn(u32, i64, u32) -> Result<u32, OperandError>,
    rr: fn(u32, u32, u32) -> u32,
) -> syn::Result<u32> {
    let rd = parse_reg(input, insn, "rD")?;
    comma(input, insn)?;
    let (off, base, bang, span) = parse_mem(input, insn)?;
    end(input, insn)?;
    match (off, bang) {
        (Offset::Imm(v, s), true) => {
            post(rd.num, v, base.num).map_err(|e| operand_error(insn, s, e))
        }
        (Offset::Reg(rs2), false) => Ok(rr(rd.num, rs2.num, base.num)),
        (Offset::Imm(..), false) => Err(syn::Error::new(
            span,
            format!(
                "{insn}: an immediate offset needs the post-increment form `imm(rs1!)` (plain `lb`/`lbu` are RV32I)"
            ),
        )),
        (Offset::Reg(_), true) => Err(syn::Error::new(
            span,
            format!(
                "{insn}: the register post-increment form `rs2(rs1!)` is not provided; use `rs2(rs1)`"
            ),
        )),
    }
}

/// Byte load, zero-extended: `p_lbu!(rd, imm(rs1!))` (post-increment, imm −2048..=2047) or
/// `p_lbu!(rd, rs2(rs1))` (address rs1 + rs2). `p_lbu!(t0, 1(a1!))` → `".insn 4, 0x0015c28b"`.
///
/// ```compile_fail
/// asm_macros::p_lbu!(a0, 4(a1));
/// ```
#[proc_macro]
pub fn p_lbu(input: TokenStream) -> TokenStream {
    expand(input, |i| {
        parse_byte_load(i, "p.lbu", encode::p_lbu_imm, encode::p_lbu_rr)
    })
}

/// Byte load, sign-extended: `p_lb!(rd, imm(rs1!))` or `p_lb!(rd, rs2(rs1))`.
/// `p_lb!(t2, t2(a2))` → `".insn 4, 0x00767383"`.
///
/// ```compile_fail
/// asm_macros::p_lb!(a0, a1(a2!));
/// ```
#[proc_macro]
pub fn p_lb(input: TokenStream) -> TokenStream {
    expand(input, |i| {
        parse_byte_load(i, "p.lb", encode::p_lb_imm, encode::p_lb_rr)
    })
}

/// Post-increment byte store: `p_sb!(rs2, imm(rs1!))` (imm −2048..=2047).
/// `p_sb!(t2, 1(a6!))` → `".insn 4, 0x007800ab"`.
///
/// ```compile_fail
/// asm_macros::p_sb!(a0, 1(a1));
/// ```
#[proc_macro]
pub fn p_sb(input: TokenStream) -> TokenStream {
    expand(input, |input| {
        const I: &str = "p.sb";
        let rs2 = parse_reg(input, I, "rs2")?;
        comma(input, I)?;
        let (off, base, bang, span) = parse_mem(input, I)?;
        end(input, I)?;
        match (off, bang) {
            (Offset::Imm(v, s), true) => {
                encode::p_sb_imm(rs2.num, v, base.num).map_err(|e| operand_error(I, s, e))
            }
            _ => Err(syn::Error::new(
                span,
                format!("{I}: only the post-increment form `imm(rs1!)` is provided"),
            )),
        }
    })
}

/// `p.mac rD, rs1, rs2`: rD += rs1 · rs2. `p_mac!(s4, t2, s5)` → `".insn 4, 0x43538a33"`.
#[proc_macro]
pub fn p_mac(input: TokenStream) -> TokenStream {
    expand(input, |i| parse_rrr(i, "p.mac", encode::p_mac))
}

/// `p.msu rD, rs1, rs2`: rD −= rs1 · rs2. `p_msu!(s10, ra, t3)` → `".insn 4, 0x43c09d33"`.
#[proc_macro]
pub fn p_msu(input: TokenStream) -> TokenStream {
    expand(input, |i| parse_rrr(i, "p.msu", encode::p_msu))
}

/// `p.clipur rD, rs1, rs2`: rs1 clipped to 0..=rs2. `p_clipur!(s10, s10, t6)` →
/// `".insn 4, 0x15fd6d33"`.
#[proc_macro]
pub fn p_clipur(input: TokenStream) -> TokenStream {
    expand(input, |i| parse_rrr(i, "p.clipur", encode::p_clipur))
}

/// `p.extbs rD, rs1`: the low byte sign-extended. `p_extbs!(s0, s0)` → `".insn 4, 0x10046433"`.
#[proc_macro]
pub fn p_extbs(input: TokenStream) -> TokenStream {
    expand(input, |i| parse_rr(i, "p.extbs", encode::p_extbs))
}

/// `p.clip rD, rs1, Is2` (immediate form, `p.clipi` in GVSOC's decoder): rs1 clipped to
/// −2^(Is2−1)..=2^(Is2−1)−1. `p_clipi!(s11, s11, 8)` → `".insn 4, 0x148d9db3"`.
///
/// ```compile_fail
/// asm_macros::p_clipi!(a0, a1, 32);
/// ```
#[proc_macro]
pub fn p_clipi(input: TokenStream) -> TokenStream {
    expand(input, |i| {
        const I: &str = "p.clip";
        let rd = parse_reg(i, I, "rD")?;
        comma(i, I)?;
        let rs1 = parse_reg(i, I, "rs1")?;
        comma(i, I)?;
        let (v, span) = parse_int(i, I, "Is2")?;
        end(i, I)?;
        encode::p_clipi(rd.num, rs1.num, v).map_err(|e| operand_error(I, span, e))
    })
}

// ------------------------------------------------------------------------------------------------
// p.beqimm / p.bneimm: compare with a 5-bit immediate and branch to a label

fn branch_imm5(input: TokenStream, insn: &'static str, funct3: u32) -> TokenStream {
    let parsed = syn::parse::Parser::parse(
        move |i: ParseStream| -> syn::Result<String> {
            let rs1 = parse_reg(i, insn, "rs1")?;
            comma(i, insn)?;
            let (imm, span) = parse_int(i, insn, "Imm5")?;
            end(i, insn)?;
            encode::branch_imm5_prefix(funct3, rs1.num, imm)
                .map_err(|e| operand_error(insn, span, e))
        },
        input,
    );
    match parsed {
        Ok(text) => {
            let lit = LitStr::new(&text, Span::call_site());
            quote::quote!(#lit).into()
        }
        Err(e) => e.to_compile_error().into(),
    }
}

/// `p.beqimm rs1, Imm5, label`: branch if rs1 equals `Imm5` (−16..=15, sign-extended). The
/// branch target is a label, which LLVM's `.insn` takes only in its format forms, so the macro
/// writes the SB-format directive up to the target and the caller appends the label
/// (`concat!(p_beqimm!(s3, -1), "42f\n")`): `p_beqimm!(s3, -1)` →
/// `".insn b 0x63, 2, x19, x31, "` (the word's fields: `encode::p_beqimm`, golden-tested).
///
/// ```compile_fail
/// asm_macros::p_beqimm!(a0, 16);
/// ```
#[proc_macro]
pub fn p_beqimm(input: TokenStream) -> TokenStream {
    branch_imm5(input, "p.beqimm", 0b010)
}

/// `p.bneimm rs1, Imm5, label`: branch if rs1 differs from `Imm5`; as [`p_beqimm!`].
/// `p_bneimm!(t6, -1)` → `".insn b 0x63, 3, x31, x31, "`.
#[proc_macro]
pub fn p_bneimm(input: TokenStream) -> TokenStream {
    branch_imm5(input, "p.bneimm", 0b011)
}
