#!/usr/bin/env bash
# Pins the PULP instruction words that firmware/include/gap_gcc_compat.h emits for a stock RISC-V
# GCC: assembles each mnemonic through the header's macros (assembly and C inline-asm paths) and
# compares the words with the RI5CY encodings (GAP SDK gvsoc isa_riscv_gen.py):
#   p.elw  t0, 60(s0)      LOAD funct3=110                    -> 0x03c46283
#   p.elw  a0, 0(s1)                                          -> 0x0004e503
#   p.cnt  t4, t5          0001000 00000 rs1 011 rd 0110011   -> 0x100f3eb3
#   p.bclr t0, t0, 0, 0    11 Is3 Is2 rs1 011 rd 0110011      -> 0xc002b2b3
#   p.bclr a0, a1, 3, 5    (clear 4 bits from bit 5)          -> 0xc655b533
set -euo pipefail
cd "$(dirname "$0")/.."
CC=${CC_RV32:-riscv64-unknown-elf-gcc}
OBJDUMP=${OBJDUMP_RV32:-riscv64-unknown-elf-objdump}
if ! command -v "$CC" >/dev/null; then
  echo "compat_insn: skipped: $CC is not installed"; exit 0
fi
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
cat > "$tmp/a.S" <<'ASM'
    .text
    p.elw t0, 60(s0)
    p.elw a0, 0(s1)
    p.cnt t4, t5
    p.bclr t0, t0, 0, 0
    p.bclr a0, a1, 3, 5
ASM
cat > "$tmp/c.c" <<'C'
unsigned f(unsigned x) { unsigned r; __asm__ volatile("p.cnt %0, %1" : "=r"(r) : "r"(x)); return r; }
C
flags="-march=rv32imc -misa-spec=2.2 -mabi=ilp32 -include include/gap_gcc_compat.h -c"
"$CC" $flags -x assembler-with-cpp "$tmp/a.S" -o "$tmp/a.o"
"$CC" $flags -O2 --specs=picolibc.specs "$tmp/c.c" -o "$tmp/c.o"
words=$("$OBJDUMP" -d "$tmp/a.o" | awk '/^ +[0-9a-f]+:/ { print $2 }' | tr '\n' ' ')
want="03c46283 0004e503 100f3eb3 c002b2b3 c655b533 "
if [ "$words" != "$want" ]; then
  echo "compat_insn: FAIL: assembly words '$words', expected '$want'"; exit 1
fi
# The C inline-asm path: a p.cnt word (funct7 0001000, rs2 0, funct3 011, opcode 0110011).
found=0
for w in $("$OBJDUMP" -d "$tmp/c.o" | awk '/^ +[0-9a-f]+:/ && length($2) == 8 { print $2 }'); do
  [ $(( 0x$w & 0xFFF0707F )) -eq $(( 0x10003033 )) ] && found=1
done
if [ $found != 1 ]; then
  echo "compat_insn: FAIL: no p.cnt word in the C inline-asm object"; "$OBJDUMP" -d "$tmp/c.o"; exit 1
fi
echo "compat_insn: p.elw / p.cnt / p.bclr words as RI5CY encodes them (asm and C inline asm)"
