#!/usr/bin/env python3
"""Generates the AES-128-CTR pair kernels `rv32.rs` (rv32imc) and `pulp.rs` (p.ror) next to it.

    python3 gap_rust_cipher_s/src/aes/asm/gen.py          # rewrite the two files
    python3 gap_rust_cipher_s/src/aes/asm/gen.py --check  # exit 1 if they are out of date

The kernels run the same computation as `ctr::xor_pairs_generic` (see `ctr.rs`), which the tests
compare with the reference crates: per group of 8 blocks, two S-boxes give the round-2 S-box
outputs of its four pairs; per pair, rebuild the round-2 state (`C2 ^ MC_0(ror(z, 8p) & P)`),
run rounds 3..=10 (fixsliced: one S-box subroutine, four MixColumns+AddRoundKey blocks), unpack,
XOR into the data.

The S-box gate list is read from `slice.rs` (`sub_bytes`), so the Rust and assembly circuits are
the same text. Straight-line blocks are written on virtual registers and given machine registers
by a small linear-scan allocator (with spills to the stack frame if it ever runs out); the script
prints per-block instruction counts and fails if a block no longer fits.
"""
import os
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
SLICE_RS = os.path.join(HERE, "..", "slice.rs")

ABI = {1: "ra", 5: "t0", 6: "t1", 7: "t2", 8: "s0", 9: "s1"}
ABI.update({10 + i: "a%d" % i for i in range(8)})
ABI.update({18 + i: "s%d" % (2 + i) for i in range(10)})
ABI.update({28 + i: "t%d" % (3 + i) for i in range(4)})


def rname(r):
    return ABI[r]


# Registers x8..x15 first: two-operand ops on them compress to 16 bits.
ALL_REGS = list(range(8, 16)) + [5, 6, 7] + list(range(16, 32))

# ---------------------------------------------------------------------------------------------
# Stack frame of the kernel (words from sp). Cluster cores have 2 KiB stacks: keep it small.
F_MV = 0  # VARYING_MASK
F_M1, F_M2, F_M3 = 1, 2, 3  # 0x3F3F3F3F, 0x0F0F0F0F, 0x03030303
F_M55, F_M33 = 4, 5  # 0x55555555, 0x33333333 (0x0F0F0F0F is F_M2)
F_R23, F_NR3 = 6, 7  # group layout rows 2-3 (0x3C3C3C3C) and all but row 3 (0xF3F3F3F3)
F_RKCUR = 8  # current round-key pointer
F_RK3 = 9  # &rk[3]
F_RUN = 10  # &RunCtx
F_DATA = 11
F_V = 12  # low byte of the current pair's first block
F_VEND = 13  # low byte after the last pair
F_CNT = 14
F_SPILL = 15  # 4 spill slots
N_SPILL = 4
F_SAVE = 19  # s0..s11, ra: 13 words
FRAME_WORDS = 32  # 128 bytes, 16-byte aligned
# RunCtx (ctr.rs): c2 at word 0, bconst at 8, yin at 16.
RUN_C2, RUN_BCONST, RUN_YIN, RUN_ZBASE, RUN_Z = 0, 8, 16, 24, 25
CALLEE_SAVED = [8, 9] + list(range(18, 28)) + [1]


# ---------------------------------------------------------------------------------------------
class Block:
    """A straight-line block on virtual registers (strings)."""

    def __init__(self, name):
        self.name = name
        self.ops = []  # (op, dst, srcs, imm)
        self.n = 0

    def tmp(self, hint="t"):
        self.n += 1
        return "%%%s%d" % (hint, self.n)

    def emit(self, op, dst, srcs=(), imm=None):
        self.ops.append((op, dst, tuple(srcs), imm))
        return dst

    # arithmetic helpers returning the new vreg
    def xor(self, a, b, d=None):
        return self.emit("xor", d or self.tmp(), (a, b))

    def and_(self, a, b, d=None):
        return self.emit("and", d or self.tmp(), (a, b))

    def or_(self, a, b, d=None):
        return self.emit("or", d or self.tmp(), (a, b))

    def srli(self, a, n):
        return self.emit("srli", self.tmp(), (a,), n)

    def slli(self, a, n):
        return self.emit("slli", self.tmp(), (a,), n)

    def li(self, v):
        return self.emit("li", self.tmp("k"), (), v)

    def lw(self, base, off, d=None):
        return self.emit("lw", d or self.tmp("m"), (base,), off)

    def lwsp(self, slot, d=None):
        return self.emit("lw", d or self.tmp("m"), ("sp",), 4 * slot)

    def sw(self, v, base, off):
        self.emit("sw", None, (v, base), off)

    def swsp(self, v, slot):
        self.emit("sw", None, (v, "sp"), 4 * slot)

    def addi(self, a, imm):
        return self.emit("addi", self.tmp(), (a,), imm)

    def andi(self, a, imm):
        return self.emit("andi", self.tmp(), (a,), imm)

    def neg(self, a):
        return self.emit("neg", self.tmp(), (a,))

    def srl(self, a, n):
        return self.emit("srl", self.tmp(), (a, n))

    def sll(self, a, n):
        return self.emit("sll", self.tmp(), (a, n))

    def pror(self, a, amt):
        return self.emit("p.ror", self.tmp(), (a, amt))

    def pv(self, op, a, imm):
        return self.emit(op, self.tmp(), (a,), imm)


def is_phys(v):
    """`sp` and `$name` operands are machine registers the allocator does not manage (`$t6`: t6)."""
    return v == "sp" or v.startswith("$")


def phys_name(v):
    return v[1:] if v.startswith("$") else v


def schedule(block):
    """Reorders a block so that no instruction uses the result of the load just before it (RI5CY
    stalls one cycle on a load-use), keeping the original order wherever possible (register
    pressure). Loads and stores keep their relative order around stores; a write of a machine
    register (`$name`) stays after its earlier reads."""
    ops = block.ops
    n = len(ops)
    deps = [set() for _ in range(n)]
    last_def = {}
    reads = {}
    last_store = None
    mem_since_store = []
    for i, (op, d, srcs, imm) in enumerate(ops):
        for s in srcs:
            if s in last_def:
                deps[i].add(last_def[s])
            if s.startswith("$"):
                reads.setdefault(s, []).append(i)
        if d is not None and d.startswith("$"):
            deps[i].update(j for j in reads.get(d, []) if j != i)
            if d in last_def:
                deps[i].add(last_def[d])
        if op == "sw":
            if last_store is not None:
                deps[i].add(last_store)
            deps[i].update(mem_since_store)
            last_store = i
            mem_since_store = []
        elif op in ("lw", "p.lw"):
            if op == "p.lw":
                # Post-increment: writes its base register; keeps its order with the base's uses.
                base = srcs[0]
                deps[i].update(j for j in reads.get(base, []) if j != i)
                if base in last_def:
                    deps[i].add(last_def[base])
                last_def[base] = i
            if last_store is not None:
                deps[i].add(last_store)
            mem_since_store.append(i)
        if d is not None:
            last_def[d] = i
    done = [False] * n
    order = []
    prev_load_dst = None
    while len(order) < n:
        ready = [i for i in range(n) if not done[i] and all(done[j] for j in deps[i])]
        pick = None
        for i in ready:
            if prev_load_dst is None or prev_load_dst not in ops[i][2]:
                pick = i
                break
        if pick is None:
            pick = ready[0]
        done[pick] = True
        order.append(pick)
        op, d = ops[pick][0], ops[pick][1]
        prev_load_dst = d if op in ("lw", "p.lw") else None
    block.ops = [ops[i] for i in order]


def stalls(code):
    """Load-use stalls of straight-line allocated code."""
    k = 0
    for a, b in zip(code, code[1:]):
        if a[0] in ("lw", "p.lw") and a[1] in b[2]:
            k += 1
    return k


def allocate(block, avail, pin_in, pin_out, keep=()):
    """Linear-scan allocation of `block`.

    `pin_in`: vreg -> register holding it on entry. `pin_out`: vreg -> register it must be in on
    exit (moves are added if the allocator put it elsewhere). `keep`: vregs live on exit wherever
    they are. Returns (instructions, {vreg: register} for pin_out and keep).
    """
    schedule(block)
    ops = block.ops
    n = len(ops)
    uses = {}
    for i, (op, d, srcs, imm) in enumerate(ops):
        for s in srcs:
            if not is_phys(s):
                uses.setdefault(s, []).append(i)
    for v in list(pin_out) + list(keep):
        uses.setdefault(v, []).append(n)
    reg_of = dict(pin_in)
    owner = {r: v for v, r in pin_in.items()}
    free = [r for r in avail if r not in owner]
    spilled = {}
    slots = list(range(N_SPILL))
    out = []
    targets = dict(pin_out)

    def next_use(v, i):
        for u in uses.get(v, []):
            if u >= i:
                return u
        return None

    def release(v):
        r = reg_of.pop(v)
        del owner[r]
        free.append(r)

    def spill_one(i, protect):
        cands = sorted(((next_use(v, i) or n + 1), v) for v in reg_of if v not in protect)
        if not cands:
            raise SystemExit("%s: out of registers" % block.name)
        _, v = cands[-1]
        if not slots:
            raise SystemExit("%s: out of spill slots" % block.name)
        slot = slots.pop(0)
        out.append(("sw", None, (rname(reg_of[v]), "sp"), 4 * (F_SPILL + slot)))
        spilled[v] = slot
        release(v)

    def pick(i, prefer, protect):
        pending = {t for v, t in targets.items() if v not in reg_of and v not in spilled}
        for r in prefer:
            if r in free:
                free.remove(r)
                return r
        for r in free:
            if r not in pending:
                free.remove(r)
                return r
        if free:
            return free.pop(0)
        spill_one(i, protect)
        return pick(i, prefer, protect)

    for i, (op, d, srcs, imm) in enumerate(ops):
        protect = set(srcs)
        for s in srcs:
            if not is_phys(s) and s in spilled:
                slot = spilled.pop(s)
                r = pick(i, (), protect)
                out.append(("lw", rname(r), ("sp",), 4 * (F_SPILL + slot)))
                slots.append(slot)
                reg_of[s] = r
                owner[r] = s
        sregs = tuple(phys_name(s) if is_phys(s) else rname(reg_of[s]) for s in srcs)
        dying = []
        for s in dict.fromkeys(srcs):
            if not is_phys(s) and next_use(s, i + 1) is None:
                dying.append(reg_of[s])
                release(s)
        dreg = None
        if d is not None and is_phys(d):
            dreg = phys_name(d)
        elif d is not None:
            prefer = ([targets[d]] if d in targets else []) + dying
            r = pick(i, prefer, protect)
            reg_of[d] = r
            owner[r] = d
            dreg = rname(r)
            if next_use(d, i + 1) is None:
                raise SystemExit("%s: %s is never used" % (block.name, d))
        out.append((op, dreg, sregs, imm))
    result = {}
    for v in keep:
        result[v] = reg_of[v]
    moves = {}
    for v, t in targets.items():
        if v in spilled:
            raise SystemExit("%s: output %s spilled" % (block.name, v))
        if reg_of[v] != t:
            moves[t] = reg_of[v]
        result[v] = t
    while moves:
        ready = [t for t in moves if t not in moves.values()]
        if not ready:
            raise SystemExit("%s: cyclic output moves %r" % (block.name, moves))
        for t in ready:
            out.append(("mv", rname(t), (rname(moves.pop(t)),), None))
    return out, result


ABI_INV = {v: k for k, v in ABI.items()}
ABI_INV["zero"] = 0

# PULP words come from `asm_macros` (one proc-macro per instruction, golden-word tests there):
#   p.ror rd, rs1, rs2           asm_macros::p_ror!
#   p.lw rd, imm(rs1!)           asm_macros::p_lw!       (post-increment load)
#   pv.srl.b / pv.sll.b rd, rs1, rs2        asm_macros::pv_srl_b! / pv_sll_b!   (per-byte amounts)
#   pv.srl.sci.b / pv.sll.sci.b rd, rs1, k  asm_macros::pv_srl_sci_b! / pv_sll_sci_b!
# `encode_pulp` below builds the same words independently; `gen.py` checks every word it emits
# against it, and the Rust test `asm::tests::generated_pulp_words_match_asm_macros` checks the
# golden words of this script against the macros' expansions.
PULP_MACRO = {"p.ror": "p_ror", "p.lw": "p_lw", "pv.srl.b": "pv_srl_b", "pv.sll.b": "pv_sll_b",
              "pv.srl.sci.b": "pv_srl_sci_b", "pv.sll.sci.b": "pv_sll_sci_b"}


def encode_pulp(op, rd, rs1, x):
    """The word of a PULP instruction (`x`: rs2 register number or immediate). Sources: RI5CY
    User Manual rev. 4.4, "Instruction Set Extensions"; GAP8 GVSOC decoder table
    (gap_sdk gvsoc/models/cpu/iss/isa_gen/isa_riscv_gen.py, pulp_v2_insns)."""
    if op == "p.ror":  # 0000100 rs2 rs1 101 rd 0110011
        return (0b0000100 << 25) | (x << 20) | (rs1 << 15) | (0b101 << 12) | (rd << 7) | 0b0110011
    if op == "p.lw":  # imm[11:0] rs1 010 rd 0001011
        return ((x & 0xFFF) << 20) | (rs1 << 15) | (0b010 << 12) | (rd << 7) | 0b0001011
    f6 = {"srl": 0b010000, "sll": 0b010100}[op.split(".")[1]]
    if op.endswith(".sci.b"):  # f6 imm[0] imm[5:1] rs1 111 rd 1010111
        assert 0 <= x < 8
        return (f6 << 26) | ((x & 1) << 25) | ((x >> 1) << 20) | (rs1 << 15) | (0b111 << 12) | (rd << 7) | 0b1010111
    # f6 0 rs2 rs1 001 rd 1010111
    return (f6 << 26) | (x << 20) | (rs1 << 15) | (0b001 << 12) | (rd << 7) | 0b1010111


GOLDEN = [
    (("pv.srl.sci.b", 10, 11, 2), 0x4015F557),  # pv.srl.sci.b a0, a1, 2
    (("pv.sll.sci.b", 10, 11, 6), 0x5035F557),  # pv.sll.sci.b a0, a1, 6
    (("pv.srl.sci.b", 31, 31, 7), 0x423FFFD7),  # edge registers, odd immediate
    (("pv.sll.sci.b", 1, 0, 4), 0x502070D7),    # ra, zero
    (("pv.srl.b", 10, 11, 12), 0x40C59557),     # pv.srl.b a0, a1, a2
    (("pv.srl.b", 31, 31, 31), 0x41FF9FD7),
    (("pv.sll.b", 10, 11, 12), 0x50C59557),     # pv.sll.b a0, a1, a2
    (("pv.sll.b", 0, 1, 31), 0x51F09057),
    (("p.ror", 10, 10, 11), 0x08B55533),        # p.ror a0, a0, a1
    (("p.lw", 12, 13, 4), 0x0046A60B),          # p.lw a2, 4(a3!)
    (("p.lw", 31, 31, 2047), 0x7FFFAF8B),
]
for (args, word) in GOLDEN:
    assert encode_pulp(*args) == word, (args, hex(encode_pulp(*args)), hex(word))


def encode_jal0(off):
    """`jal zero, off` (RV32I J-type: imm[20|10:1|11|19:12] rd 1101111)."""
    assert off % 2 == 0 and -(1 << 20) <= off < (1 << 20)
    u = off & 0x1FFFFF
    return (((u >> 20) & 1) << 31) | (((u >> 1) & 0x3FF) << 21) | (((u >> 11) & 1) << 20) \
        | (((u >> 12) & 0xFF) << 12) | 0b1101111


assert encode_jal0(8) == 0x0080006F and encode_jal0(2048) == 0x0010006F | (1 << 20) >> 20 << 20


def fmt(ins, pulp_macro):
    op, d, s, imm = ins
    if op in ("xor", "and", "or", "srl", "sll"):
        return "%s %s, %s, %s" % (op, d, s[0], s[1])
    if op == "neg":
        return "neg %s, %s" % (d, s[0])
    if op in ("srli", "slli", "srai", "addi", "andi"):
        return "%s %s, %s, %d" % (op, d, s[0], imm)
    if op == "li":
        return "li %s, 0x%x" % (d, imm)
    if op == "lw":
        return "lw %s, %d(%s)" % (d, imm, s[0])
    if op == "sw":
        return "sw %s, %d(%s)" % (s[0], imm, s[1])
    if op == "mv":
        return "mv %s, %s" % (d, s[0])
    if op in ("p.ror", "pv.srl.b", "pv.sll.b"):
        encode_pulp(op, ABI_INV[d], ABI_INV[s[0]], ABI_INV[s[1]])
        return pulp_macro(PULP_MACRO[op], "%s, %s, %s" % (d, s[0], s[1]))
    if op in ("pv.srl.sci.b", "pv.sll.sci.b"):
        encode_pulp(op, ABI_INV[d], ABI_INV[s[0]], imm)
        return pulp_macro(PULP_MACRO[op], "%s, %s, %d" % (d, s[0], imm))
    if op == "p.lw":
        # The post-incremented base is s[0]; the block writes it back through its `$` name.
            return pulp_macro("p_lw", "%s, %d(%s!)" % (d, imm, s[0]))
    raise ValueError(op)


# ---------------------------------------------------------------------------------------------
def sbox_gates():
    src = open(SLICE_RS).read()
    body = src[src.index("pub(crate) fn sub_bytes"):]
    body = body[: body.index("*s = [")]
    gates = re.findall(r"let (\w+) = (\w+) ([\^&]) (\w+);", body)
    assert len(gates) == 113, len(gates)
    return gates


def build_sbox(gates):
    b = Block("sbox")
    names = {}
    for k in range(8):  # u7 = plane 0 ... u0 = plane 7
        names["u%d" % (7 - k)] = "%%in%d" % k
    for d, x, o, y in gates:
        v = "%%%s" % d
        names[d] = v
        b.emit("xor" if o == "^" else "and", v, (names[x], names[y]))
    outs = [names["s%d" % (7 - k)] for k in range(8)]  # plane k = s(7-k)
    return b, ["%%in%d" % k for k in range(8)], outs


class Rot:
    """Rotation strategies."""

    def __init__(self, pulp, amount_regs=None):
        self.pulp = pulp
        self.amount_regs = amount_regs or {}
        self.amt = {}
        self.masks = {}

    def reset(self, b):
        self.b = b
        self.amt = {}
        self.masks = {}

    def amount(self, n):
        if n in self.amount_regs:
            return self.amount_regs[n]
        if n not in self.amt:
            self.amt[n] = self.b.li(n)
        return self.amt[n]

    def mask(self, slot):
        if slot not in self.masks:
            self.masks[slot] = self.b.lwsp(slot)
        return self.masks[slot]

    def ror(self, x, n):
        b = self.b
        if self.pulp:
            return b.pror(x, self.amount(n))
        lo = b.srli(x, n)
        hi = b.slli(x, 32 - n)
        return b.or_(lo, hi)

    def sel(self, t, u, m):
        """u where m is set, t elsewhere."""
        b = self.b
        return b.xor(t, b.and_(b.xor(t, u), m))

    def colrot(self, x, k, mslot):
        """Rotate each row's columns: (C_k a)(r, c) = a(r, c + k)."""
        b = self.b
        w = b.srli(x, 2 * k)
        v = b.slli(x, 8 - 2 * k)
        return self.sel(v, w, self.mask(mslot))

    def colrot_simd(self, x, k):
        """C_k with per-byte shifts (PULP SIMD): 3 instructions, no mask."""
        b = self.b
        return b.or_(b.pv("pv.srl.sci.b", x, 2 * k), b.pv("pv.sll.sci.b", x, 8 - 2 * k))

    def row(self, x, k):
        """R_k: next row, k columns further (R_k = ror8 ∘ C_k)."""
        if k == 0:
            return self.ror(x, 8)
        if self.pulp:
            return self.ror(self.colrot_simd(x, k), 8)
        mslot = {1: F_M1, 2: F_M2, 3: F_M3}[k]
        return self.ror(self.colrot(x, k, mslot), 8)

    def row2(self, x, k):
        if k % 2 == 0:
            return self.ror(x, 16)
        if self.pulp:
            return self.ror(self.colrot_simd(x, 2), 16)
        return self.ror(self.colrot(x, 2, F_M2), 16)


def mix_columns(b, rot, k, a, keys, out):
    """out_i = MC_k(a)_i ^ keys_i (fixsliced MixColumns, then AddRoundKey)."""
    bb = [None] * 8
    cc = [None] * 8
    bb[7] = rot.row(a[7], k)
    cc[7] = b.xor(a[7], bb[7])
    for i in range(8):
        if i < 7:
            bb[i] = rot.row(a[i], k)
            cc[i] = b.xor(a[i], bb[i])
        r2 = rot.row2(cc[i], k)
        acc = b.xor(bb[i], r2)
        if i > 0:
            acc = b.xor(acc, cc[i - 1])
        if i in (0, 1, 3, 4):
            acc = b.xor(acc, cc[7])
        b.xor(acc, keys[i], d=out[i])


def build_mc(k, rot, ark_off, advance):
    """MixColumns_k then AddRoundKey (round key at cursor + ark_off)."""
    b = Block("mc%d" % k)
    rot.reset(b)
    a = ["%%a%d" % i for i in range(8)]
    out = ["%%o%d" % i for i in range(8)]
    cur = b.lwsp(F_RKCUR)
    keys = [b.lw(cur, ark_off + 4 * i) for i in range(8)]
    if advance:
        b.swsp(b.addi(cur, advance), F_RKCUR)
    mix_columns(b, rot, k, a, keys, out)
    return b, a, out


def build_group_y():
    """Input planes of the group's first S-box: yin ^ bcast(bits of the group's low byte)."""
    b = Block("group_y")
    out = ["%%o%d" % i for i in range(8)]
    run = b.lwsp(F_RUN)
    v = b.lwsp(F_V)
    for i in range(8):
        if i < 3:
            b.lw(run, 4 * (RUN_YIN + i), d=out[i])
        else:
            y = b.lw(run, 4 * (RUN_YIN + i))
            # All ones if bit i (>= 3: a bit of the group's low byte) is set.
            bit = b.emit("srai", b.tmp(), (b.slli(v, 31 - i),), 31)
            b.xor(y, bit, d=out[i])
    return b, out


def build_group_z():
    """Input planes of the group's second S-box: y, y, 3y, 2y by row, ^ C1 on P."""
    b = Block("group_z")
    y = ["%%a%d" % i for i in range(8)]
    out = ["%%o%d" % i for i in range(8)]
    run = b.lwsp(F_RUN)
    m23 = b.lwsp(F_R23)
    nm3 = b.lwsp(F_NR3)
    x2 = [y[7], b.xor(y[0], y[7]), y[1], b.xor(y[2], y[7]), b.xor(y[3], y[7]), y[4], y[5], y[6]]
    for i in range(8):
        # y ^ (2y on rows 2-3) ^ (y on row 3) = (y off row 3) ^ (2y on rows 2-3)
        t = b.xor(b.and_(y[i], nm3), b.and_(x2[i], m23))
        b.xor(t, b.lw(run, 4 * (RUN_BCONST + i)), d=out[i])
    return b, y, out


def build_group_store():
    """The group's S-box outputs go to the run's group cache (kept across calls)."""
    b = Block("group_store")
    z = ["%%a%d" % i for i in range(8)]
    run = b.lwsp(F_RUN)
    for i in range(8):
        b.sw(z[i], run, 4 * (RUN_Z + i))
    b.sw(b.andi(b.lwsp(F_V), -8), run, 4 * RUN_ZBASE)
    return b, z


def build_pair(rot):
    """Round-2 state of the pair: C2 ^ MC_0(ror(z, 8p) & VARYING_MASK); resets the round loop."""
    b = Block("pair")
    rot.reset(b)
    out = ["%%o%d" % i for i in range(8)]
    n = b.slli(b.andi(b.lwsp(F_V), 6), 2)
    m = b.lwsp(F_MV)
    if rot.pulp:
        run_z = b.lwsp(F_RUN)
        d = [b.and_(b.pror(b.lw(run_z, 4 * (RUN_Z + i)), n), m) for i in range(8)]
    else:
        nn = b.neg(n)
        run_z = b.lwsp(F_RUN)
        d = []
        for i in range(8):
            z = b.lw(run_z, 4 * (RUN_Z + i))
            d.append(b.and_(b.or_(b.srl(z, n), b.sll(z, nn)), m))
    run = b.lwsp(F_RUN)
    keys = [b.lw(run, 4 * (RUN_C2 + i)) for i in range(8)]
    b.swsp(b.lwsp(F_RK3), F_RKCUR)
    b.swsp(b.li(2), F_CNT)
    mix_columns(b, rot, 0, d, keys, out)
    return b, out


def build_final(key_base=None, key_off=96):
    """AddRoundKey 10 (key at `key_base` + `key_off`; default: the round-key cursor + 96),
    unpack, XOR into the data, advance."""
    b = Block("final")
    a = ["%%a%d" % i for i in range(8)]
    cur = key_base or b.lwsp(F_RKCUR)
    w = [b.xor(a[i], b.lw(cur, key_off + 4 * i)) for i in range(8)]
    m55 = b.lwsp(F_M55)
    m33 = b.lwsp(F_M33)
    m0f = b.lwsp(F_M2)

    def swapmove(i, j, m, n):
        t = b.and_(b.xor(b.srli(w[i], n), w[j]), m)
        w[j] = b.xor(w[j], t)
        w[i] = b.xor(w[i], b.slli(t, n))

    for i, j in ((0, 1), (2, 3), (4, 5), (6, 7)):
        swapmove(i, j, m55, 1)
    for i, j in ((0, 2), (1, 3), (4, 6), (5, 7)):
        swapmove(i, j, m33, 2)
    dp = b.lwsp(F_DATA)
    data = []
    for i, j in ((0, 4), (1, 5), (2, 6), (3, 7)):
        swapmove(i, j, m0f, 4)
        # Load the data words early (no load-use stall at the XORs).
        data += [b.lw(dp, 8 * i), b.lw(dp, 8 * i + 4)]
    # Memory: block 0 columns 0..3 = w0 w2 w4 w6, block 1 = w1 w3 w5 w7.
    order = [0, 2, 4, 6, 1, 3, 5, 7]
    for k in range(8):
        b.sw(b.xor(data[k], w[order[k]]), dp, 4 * k)
    b.swsp(b.addi(dp, 32), F_DATA)
    return b, a


# ---------------------------------------------------------------------------------------------
# The PULP kernel: rounds 3..=10 with an explicit ShiftRows (round keys `Schedule::ShiftRows`),
# so every round is the same code: S-box, ShiftRows (per-byte rotations: `pv.srl.b` by bytes
# 0,2,4,6 and `pv.sll.b` by 0,6,4,2, ORed), MixColumns_0 + AddRoundKey. One loop body, no calls.
#
# Machine registers kept across the round loop (outside the allocator):
VA, VB, KP = "$t4", "$t5", "$t6"
# VA = 0x06040208: byte r = 2r, the pv.srl.b amount of row r (bits 2:0 of each byte); its bits
# 4:0 are 8, so `p.ror x, VA` is the rotation by 8 (p.ror uses rs2[4:0]). VB = 0x02040610: byte r
# = (8 - 2r) mod 8, the pv.sll.b amounts; bits 4:0 = 16 for `p.ror x, VB`.
VA_VALUE, VB_VALUE = 0x06040208, 0x02040610
assert VA_VALUE & 31 == 8 and VB_VALUE & 31 == 16
for _r in range(4):
    assert (VA_VALUE >> (8 * _r)) & 7 == 2 * _r and (VB_VALUE >> (8 * _r)) & 7 == (8 - 2 * _r) % 8
PULP_FIXED = [29, 30, 31]


def sbox_low_pressure(block, ins, outs, limit):
    """Reorders the S-box gates (a randomized greedy list schedule preferring gates that end a
    value's life, fixed seeds) until at most `limit` values are live at once: the round loop keeps
    three machine registers, so the S-box gets 25."""
    import random
    ops = block.ops
    n = len(ops)
    users = {}
    for i, (op, d, srcs, imm) in enumerate(ops):
        for x in srcs:
            users.setdefault(x, set()).add(i)
    outset = set(outs)

    def count0():
        c = {x: len(users.get(x, ())) + (x in outset) for x in ins}
        for (op, d, srcs, imm) in ops:
            c[d] = len(users.get(d, ())) + (d in outset)
        return c

    for seed in range(20000):
        rnd = random.Random(seed)
        scale = (0.3, 0.5, 0.9, 1.2)[seed % 4]
        remaining = count0()
        done = set(ins)
        placed = [False] * n
        order = []
        live = len(ins)
        peak = live
        while len(order) < n:
            best = None
            for i in range(n):
                if placed[i] or not all(x in done for x in ops[i][2]):
                    continue
                kills = sum(1 for x in set(ops[i][2]) if remaining[x] == 1)
                score = (1 - kills) + rnd.random() * scale
                if best is None or score < best[0]:
                    best = (score, i)
            i = best[1]
            placed[i] = True
            order.append(i)
            for x in set(ops[i][2]):
                remaining[x] -= 1
                if remaining[x] == 0:
                    live -= 1
            live += 1
            done.add(ops[i][1])
            peak = max(peak, live)
            if peak > limit:
                break
        if peak <= limit:
            block.ops = [ops[i] for i in order]
            return seed
    raise SystemExit("no S-box order with at most %d live values" % limit)


def build_sbox_sr(gates, limit, order=range(8)):
    """One round's S-box and ShiftRows on the planes (round-loop body, part 2; ShiftRows of the
    planes in `order`)."""
    b, ins, outs = build_sbox(gates)
    sbox_low_pressure(b, ins, outs, limit)
    b.n = 1000  # fresh names past the gate names (%t1.. are gates of the circuit)
    res = [None] * 8
    for k in order:
        x = outs[k]
        lo = b.emit("pv.srl.b", b.tmp("r"), (x, VA))
        hi = b.emit("pv.sll.b", b.tmp("l"), (x, VB))
        res[k] = b.or_(lo, hi)
    b.name = "sbox_sr"
    return b, ins, res


def build_mc_loop(rot):
    """MixColumns_0 + AddRoundKey of the round loop (part 1): round key at KP, loaded with
    post-increment (`p.lw k, 4(KP!)`), so KP moves on to the next round key."""
    b = Block("mc")
    rot.reset(b)
    a = ["%%a%d" % i for i in range(8)]
    out = ["%%o%d" % i for i in range(8)]
    keys = [b.emit("p.lw", b.tmp("m"), (KP,), 4) for i in range(8)]
    mix_columns(b, rot, 0, a, keys, out)
    return b, a, out


def build_pair_sr(rot):
    """Round-2 state of the pair (as `build_pair`), and the round-key pointer KP = &rk[3]."""
    b = Block("pair")
    rot.reset(b)
    out = ["%%o%d" % i for i in range(8)]
    b.emit("lw", KP, ("sp",), 4 * F_RK3)
    n = b.slli(b.andi(b.lwsp(F_V), 6), 2)
    m = b.lwsp(F_MV)
    run = b.lwsp(F_RUN)
    d = [b.and_(b.pror(b.lw(run, 4 * (RUN_Z + i)), n), m) for i in range(8)]
    keys = [b.lw(run, 4 * (RUN_C2 + i)) for i in range(8)]
    mix_columns(b, rot, 0, d, keys, out)
    return b, out


def build_final_sr():
    """AddRoundKey 10 (key at KP), unpack, XOR into the data, advance."""
    b = build_final(KP, 0)[0]
    return b


def generate_pulp():
    sym = "gapstream_aes128ctr_pairs_pulp"
    # In the hot text of GAP8 programs (gap_rust_sdk's gap8.x sorts `.text.hot.*` first), after
    # the AES worker and its per-piece code.
    section = ".text.hot.2.aes.3.kernel"
    L = ".Laes_pulp_"
    lines = []
    counts = {}
    stall_counts = {}

    def asm(s):
        lines.append(s)

    def macro(name, args):
        return "\x00MACRO %s!(%s)" % (name, args)

    def put(block, out):
        counts[block.name] = counts.get(block.name, 0) + len(out)
        stall_counts[block.name] = stall_counts.get(block.name, 0) + stalls(out)
        for ins in out:
            asm("    " + fmt(ins, macro))

    gates = sbox_gates()
    s_in_regs = [ABI_INV[x] for x in ("a0", "a1", "a2", "a3", "a4", "a5", "s0", "s1")]
    # VA and VB (t4, t5) stay set for the whole call; KP (t6) is set per pair.
    blk_avail = [r for r in [1] + ALL_REGS if r not in (29, 30)]
    loop_avail = [r for r in blk_avail if r not in PULP_FIXED]
    final_avail = loop_avail
    # The group's two S-boxes: a subroutine (`jal ra`), all registers but ra, t4, t5.
    sb, sb_in, sb_out = build_sbox(gates)
    sbox_avail = [r for r in blk_avail if r != 1]
    sbox_low_pressure(sb, sb_in, sb_out, len(sbox_avail))
    sbox_code, where = allocate(sb, sbox_avail, dict(zip(sb_in, s_in_regs)), {}, keep=sb_out)
    sb_out_regs = [where[v] for v in sb_out]
    rot = Rot(True, {8: VA, 16: VB})

    # The round loop: part 1 MixColumns + AddRoundKey (Y regs -> X regs), part 2 (entered first)
    # S-box + ShiftRows (X regs -> Y regs). X and Y are iterated to a fixed point of the two
    # allocations, so that neither part ends with register moves.
    ssr, ssr_in, ssr_out = build_sbox_sr(gates, len(loop_avail))
    ssr_code, ssr_where = allocate(ssr, loop_avail, dict(zip(ssr_in, s_in_regs)), {},
                                   keep=ssr_out)
    y_regs = [ssr_where[v] for v in ssr_out]
    mb, ain, mout = build_mc_loop(rot)
    mc_code, mc_where = allocate(mb, loop_avail, dict(zip(ain, y_regs)), {}, keep=mout)
    x_regs = [mc_where[v] for v in mout]
    # The ShiftRows order decides whether the outputs land in Y without moves: try a few.
    import random
    rnd = random.Random(1)
    best = None
    for attempt in range(64):
        order = list(range(8))
        if attempt:
            rnd.shuffle(order)
        ssr, ssr_in, ssr_out = build_sbox_sr(gates, len(loop_avail), order)
        code, where = allocate(ssr, loop_avail, dict(zip(ssr_in, x_regs)),
                               dict(zip(ssr_out, y_regs)))
        moves = sum(1 for ins in code if ins[0] == "mv")
        if best is None or moves < best[0]:
            best = (moves, code, where)
        if moves == 0:
            break
    _, ssr_code, ssr_where = best

    asm('.section %s,"ax",@progbits' % section)
    asm(".globl %s" % sym)
    asm(".type %s,@function" % sym)
    asm(".p2align 2")
    asm("%s:" % sym)
    # Prologue: a0 = &rk[0][0], a1 = &RunCtx, a2 = first low byte (even), a3 = data, a4 = pairs.
    asm("    addi sp, sp, -%d" % (4 * FRAME_WORDS))
    for k, r in enumerate(CALLEE_SAVED):
        asm("    sw %s, %d(sp)" % (rname(r), 4 * (F_SAVE + k)))
    asm("    li t4, 0x%08x" % VA_VALUE)
    asm("    li t5, 0x%08x" % VB_VALUE)
    for slot, val in ((F_MV, 0x0C30C003),
                      (F_M2, 0x0F0F0F0F), (F_M55, 0x55555555), (F_M33, 0x33333333),
                      (F_R23, 0x3C3C3C3C), (F_NR3, 0xF3F3F3F3)):
        asm("    li t0, 0x%08x" % val)
        asm("    sw t0, %d(sp)" % (4 * slot))
    asm("    addi t0, a0, 96")
    asm("    sw t0, %d(sp)" % (4 * F_RK3))
    asm("    sw a1, %d(sp)" % (4 * F_RUN))
    asm("    sw a2, %d(sp)" % (4 * F_V))
    asm("    sw a3, %d(sp)" % (4 * F_DATA))
    asm("    slli t0, a4, 1")
    asm("    add t0, t0, a2")
    asm("    sw t0, %d(sp)" % (4 * F_VEND))
    asm("    beqz a4, %sdone" % L)
    # The run's group cache may already hold this group (a previous call of the same message).
    asm("    lw t0, %d(a1)" % (4 * RUN_ZBASE))
    asm("    andi t1, a2, -8")
    asm("    beq t0, t1, %slpset" % L)
    asm("%sgroup:" % L)
    gy, gy_out = build_group_y()
    put(gy, allocate(gy, blk_avail, {}, dict(zip(gy_out, s_in_regs)))[0])
    asm("    jal ra, %ssbox" % L)
    gz, gz_in, gz_out = build_group_z()
    put(gz, allocate(gz, blk_avail, dict(zip(gz_in, sb_out_regs)), dict(zip(gz_out, s_in_regs)))[0])
    asm("    jal ra, %ssbox" % L)
    gs, gs_in = build_group_store()
    put(gs, allocate(gs, blk_avail, dict(zip(gs_in, sb_out_regs)), {})[0])
    # Hardware loop 0 over the round loop, entered at `mid` (S-box of round 3): 8 arrivals at its
    # last instruction, the first 7 jump back to `loop` (MixColumns of rounds 3..=9). Its start
    # and end are set once per group (and at the start of a call), its count per pair. The code
    # from `lpset` to the loop end has no compressed instructions, so the offsets below are
    # 4 x instructions.
    pb, pout = build_pair_sr(rot)
    pair_code = allocate(pb, loop_avail, {}, dict(zip(pout, x_regs)))[0]
    n_pair, n_mc, n_ssr = len(pair_code), len(mc_code), len(ssr_code)
    off_start = 16 + 4 * n_pair
    off_end = off_start - 4 + 4 * (n_mc + n_ssr - 1)
    asm("    .option push")
    asm("    .option norvc")
    asm("%slpset:" % L)
    asm("    " + macro("lp_starti", "x0, %d" % off_start))
    asm("    " + macro("lp_endi", "x0, %d" % off_end))
    asm("%spair:" % L)
    put(pb, pair_code)
    asm("    " + macro("lp_counti", "x0, 8"))
    # `j mid` as a finished word (no relocation next to the loop).
    asm("%sjmid:" % L)
    asm("    .insn 4, 0x%08x # jal zero, %smid (+%d)" % (encode_jal0(4 + 4 * n_mc), L, 4 + 4 * n_mc))
    asm("%sloop:" % L)
    put(mb, mc_code)
    asm("%smid:" % L)
    put(ssr, ssr_code[:-1])
    asm("%slpend:" % L)
    put(ssr, ssr_code[-1:])
    # Executed once per pair on GAP8 (`p.ror zero, zero, zero` does nothing); on QEMU, where
    # every instruction here traps, the PULP emulator of rv32_qemu takes it as the end of the
    # hardware loop just passed (see `aes_support/pulp_emu.rs`).
    asm("    " + macro("p_ror", "zero, zero, zero"))
    # Every line of the region is one 4-byte instruction (no pseudo-instruction expands there).
    region = lines[lines.index("%slpset:" % L):]
    for l in region:
        assert l.endswith(":") or l.startswith("    .") or l.startswith("    \x00MACRO") \
            or l.split()[0] in ("xor", "and", "or", "lw", "andi", "slli", "mv"), l
    # (LLVM does not evaluate label differences here as absolute in the optimised builds, so the
    # offsets are not re-checked with `.if`; the QEMU emulator checks that the marker follows
    # the loop end and that the loop start follows the jump, and the cross-checks catch the rest.)
    asm("    .option pop")
    fb, fin = build_final(KP, 0)
    put(fb, allocate(fb, final_avail, dict(zip(fin, y_regs)), {})[0])
    # Next pair: low byte + 2; done at the end, a new group every 4 pairs.
    asm("    lw t1, %d(sp)" % (4 * F_V))
    asm("    lw t0, %d(sp)" % (4 * F_VEND))
    asm("    addi t1, t1, 2")
    asm("    sw t1, %d(sp)" % (4 * F_V))
    asm("    beq t1, t0, %sdone" % L)
    asm("    andi t1, t1, 7")
    asm("    bnez t1, %spair" % L)
    asm("    j %sgroup" % L)
    asm("%sdone:" % L)
    for k, r in enumerate(CALLEE_SAVED):
        asm("    lw %s, %d(sp)" % (rname(r), 4 * (F_SAVE + k)))
    asm("    addi sp, sp, %d" % (4 * FRAME_WORDS))
    asm("    ret")
    asm("%ssbox:" % L)
    put(sb, sbox_code)
    asm("    ret")
    asm(".size %s, .-%s" % (sym, sym))
    print("pulp load-use stalls: %s" % ", ".join("%s %d" % kv for kv in sorted(stall_counts.items())))
    return lines, counts


# ---------------------------------------------------------------------------------------------
def generate(variant):
    if variant == "pulp":
        return generate_pulp()
    pulp = False
    sym = "gapstream_aes128ctr_pairs_%s" % variant
    L = ".Laes_%s_" % variant
    lines = []
    counts = {}
    stall_counts = {}

    def asm(s):
        lines.append(s)

    def macro(name, args):
        return "\x00MACRO %s!(%s)" % (name, args)

    def put(block, out):
        counts[block.name] = counts.get(block.name, 0) + len(out)
        stall_counts[block.name] = stall_counts.get(block.name, 0) + stalls(out)
        for ins in out:
            asm("    " + fmt(ins, macro))

    rot = Rot(pulp)
    gates = sbox_gates()
    sb, sb_in, sb_out = build_sbox(gates)
    s_in_regs = [ABI_INV[x] for x in ("a0", "a1", "a2", "a3", "a4", "a5", "s0", "s1")]
    # The S-box runs inside `jal ra`: ra is off limits there.
    sbox_avail = [r for r in ALL_REGS if r != 1]
    sbox_code, where = allocate(sb, sbox_avail, dict(zip(sb_in, s_in_regs)), {}, keep=sb_out)
    sb_out_regs = [where[v] for v in sb_out]
    blk_avail = [1] + ALL_REGS

    asm('.section .text.%s,"ax",@progbits' % sym)
    asm(".globl %s" % sym)
    asm(".type %s,@function" % sym)
    asm(".p2align 2")
    asm("%s:" % sym)
    # Prologue: a0 = &rk[0][0], a1 = &RunCtx, a2 = first low byte (even), a3 = data, a4 = pairs.
    asm("    addi sp, sp, -%d" % (4 * FRAME_WORDS))
    for k, r in enumerate(CALLEE_SAVED):
        asm("    sw %s, %d(sp)" % (rname(r), 4 * (F_SAVE + k)))
    for slot, val in ((F_MV, 0x0C30C003), (F_M1, 0x3F3F3F3F), (F_M2, 0x0F0F0F0F),
                      (F_M3, 0x03030303), (F_M55, 0x55555555), (F_M33, 0x33333333),
                      (F_R23, 0x3C3C3C3C), (F_NR3, 0xF3F3F3F3)):
        asm("    li t0, 0x%08x" % val)
        asm("    sw t0, %d(sp)" % (4 * slot))
    asm("    addi t0, a0, 96")
    asm("    sw t0, %d(sp)" % (4 * F_RK3))
    asm("    sw a1, %d(sp)" % (4 * F_RUN))
    asm("    sw a2, %d(sp)" % (4 * F_V))
    asm("    sw a3, %d(sp)" % (4 * F_DATA))
    asm("    slli t0, a4, 1")
    asm("    add t0, t0, a2")
    asm("    sw t0, %d(sp)" % (4 * F_VEND))
    asm("    beqz a4, %sdone" % L)
    # The run's group cache may already hold this group (a previous call of the same message).
    asm("    lw t0, %d(a1)" % (4 * RUN_ZBASE))
    asm("    andi t1, a2, -8")
    asm("    beq t0, t1, %spair" % L)
    asm("%sgroup:" % L)
    gy, gy_out = build_group_y()
    put(gy, allocate(gy, blk_avail, {}, dict(zip(gy_out, s_in_regs)))[0])
    asm("    jal ra, %ssbox" % L)
    gz, gz_in, gz_out = build_group_z()
    put(gz, allocate(gz, blk_avail, dict(zip(gz_in, sb_out_regs)), dict(zip(gz_out, s_in_regs)))[0])
    asm("    jal ra, %ssbox" % L)
    gs, gs_in = build_group_store()
    put(gs, allocate(gs, blk_avail, dict(zip(gs_in, sb_out_regs)), {})[0])
    asm("%spair:" % L)
    pb, pout = build_pair(rot)
    put(pb, allocate(pb, blk_avail, {}, dict(zip(pout, s_in_regs)))[0])
    asm("%sround:" % L)
    for k, off, adv in ((1, 0, 0), (2, 32, 0), (3, 64, 0)):
        asm("    jal ra, %ssbox" % L)
        mb, ain, mout = build_mc(k, rot, off, adv)
        put(mb, allocate(mb, blk_avail, dict(zip(ain, sb_out_regs)), dict(zip(mout, s_in_regs)))[0])
    asm("    lw t0, %d(sp)" % (4 * F_CNT))
    asm("    addi t0, t0, -1")
    asm("    sw t0, %d(sp)" % (4 * F_CNT))
    asm("    beqz t0, %slast" % L)
    asm("    jal ra, %ssbox" % L)
    mb, ain, mout = build_mc(0, rot, 96, 128)
    put(mb, allocate(mb, blk_avail, dict(zip(ain, sb_out_regs)), dict(zip(mout, s_in_regs)))[0])
    asm("    j %sround" % L)
    asm("%slast:" % L)
    asm("    jal ra, %ssbox" % L)
    fb, fin = build_final()
    put(fb, allocate(fb, blk_avail, dict(zip(fin, sb_out_regs)), {})[0])
    # Next pair: low byte + 2; done at the end, a new group every 4 pairs.
    asm("    lw t1, %d(sp)" % (4 * F_V))
    asm("    lw t0, %d(sp)" % (4 * F_VEND))
    asm("    addi t1, t1, 2")
    asm("    sw t1, %d(sp)" % (4 * F_V))
    asm("    beq t1, t0, %sdone" % L)
    asm("    andi t1, t1, 7")
    asm("    bnez t1, %spair" % L)
    asm("    j %sgroup" % L)
    asm("%sdone:" % L)
    for k, r in enumerate(CALLEE_SAVED):
        asm("    lw %s, %d(sp)" % (rname(r), 4 * (F_SAVE + k)))
    asm("    addi sp, sp, %d" % (4 * FRAME_WORDS))
    asm("    ret")
    asm("%ssbox:" % L)
    put(sb, sbox_code)
    asm("    ret")
    asm(".size %s, .-%s" % (sym, sym))
    print("%s load-use stalls: %s" % (variant, ", ".join("%s %d" % kv for kv in sorted(stall_counts.items()))))
    return lines, counts


def to_rust(variant, lines, counts):
    doc = {
        "rv32": "rv32imc (no PULP instructions): rotations are `srli`/`slli`/`or`.",
        "pulp": "PULP (`p.ror`, `pv.srl.b`, `pv.sll.b` from `asm_macros`; ShiftRows executed in rounds 3..=10, one round-loop body); the rest is rv32imc.",
    }[variant]
    cfg = {
        "rv32": '#![cfg(target_arch = "riscv32")]',
        "pulp": '#![cfg(all(\n    target_arch = "riscv32",\n    any(feature = "pulp", feature = "aes-pulp-kernel")\n))]',
    }[variant]
    total = sum(counts.values())
    out = []
    out.append("//! GENERATED by `gen.py` in this directory; do not edit. AES-128-CTR pair kernel, %s" % doc)
    out.append("//!")
    out.append("//! Instructions per block (static): %s; total %d."
               % (", ".join("%s %d" % kv for kv in sorted(counts.items())), total))
    out.append(cfg)
    out.append("")
    out.append("core::arch::global_asm!(")
    for l in lines:
        if l.startswith("    \x00MACRO "):
            m = l[len("    \x00MACRO "):]
            out.append("    asm_macros::%s," % m)
        else:
            out.append('    r#"%s"#,' % l)
    out.append(");")
    return "\n".join(out) + "\n"


def main():
    check = "--check" in sys.argv
    stale = False
    for variant in ("rv32", "pulp"):
        lines, counts = generate(variant)
        text = to_rust(variant, lines, counts)
        path = os.path.join(HERE, "%s.rs" % variant)
        old = open(path).read() if os.path.exists(path) else None
        print("%s: %s" % (variant, ", ".join("%s %d" % kv for kv in sorted(counts.items()))))
        if check:
            if old != text:
                print("%s is out of date: run %s" % (path, sys.argv[0]))
                stale = True
        elif old != text:
            open(path, "w").write(text)
    sys.exit(1 if stale else 0)


if __name__ == "__main__":
    main()
