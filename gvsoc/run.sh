#!/usr/bin/env bash
# gvsoc/run.sh ELF [WORK_DIR]: boots a GAP8 ELF on the GVSOC model (ROM + flash image, as the
# chip) and exits with the program's status. Needs the GAP SDK environment (gapy on PATH, e.g.
# `source .gvsoc/env.sh` after `make gvsoc-setup`, or the SDK's own configs/ai_deck.sh).
set -euo pipefail
elf=$(readlink -f "$1")
wd=$(readlink -m "${2:-$(dirname "$elf")/gvsoc_$(basename "$elf")}")
mkdir -p "$wd"
exec stdbuf -oL -eL gapy --target="${GAPY_TARGET:-ai_deck}" --platform=gvsoc --work-dir="$wd" \
    run --image --flash --exec-prepare --exec --binary="$elf"
