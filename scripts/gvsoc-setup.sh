#!/usr/bin/env bash
# make gvsoc-setup: the GAP8 GVSOC model (GreenWaves' GAP SDK), built outside the repository, in one
# idempotent step. What it does:
#   1. takes the SDK at the tested commit from GAP_SDK (a local git directory, bare or not, or a URL;
#      default: GreenWaves' public repository) and unpacks that commit into GVSOC_SDK_DIR (default
#      ~/.cache/gapstream/gap_sdk-<commit>): no submodules, no OpenOCD, no GreenWaves compiler;
#   2. installs the Debian packages the simulator needs, and a Python venv with the SDK's
#      requirements (Debian's pip refuses system-wide installs);
#   3. builds only what this project runs: GVSOC for GAP8 (ai_deck) with the DPI and camera models,
#      with the fixes Debian 12's g++ 12 + GraphicsMagick need;
#   4. writes .gvsoc/env.sh (git-ignored), which every `make gvsoc-*` target loads by itself.
# A second run finds the stamp of a finished build and only rewrites .gvsoc/env.sh (seconds).
# GVSOC_SETUP_FORCE=1 rebuilds. Build time: ~15 minutes on 2 cores.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD

SDK_COMMIT=a23026507efe57410b98c5945544cff3150eb996 # 2024-01-16, the commit every figure was measured with
GAP_SDK=${GAP_SDK:-https://github.com/GreenWaves-Technologies/gap_sdk.git}
SDK_DIR=${GVSOC_SDK_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/gapstream/gap_sdk-${SDK_COMMIT:0:12}}
STAMP=$SDK_DIR/.gapstream-gvsoc-built
ENV_FILE=$ROOT/.gvsoc/env.sh

say() { printf 'gvsoc-setup: %s\n' "$*"; }
die() { printf 'gvsoc-setup: error: %s\n' "$*" >&2; exit 1; }

write_env() {
    mkdir -p "$ROOT/.gvsoc"
    cat >"$ENV_FILE.tmp" <<EOF
# Written by \`make gvsoc-setup\` (scripts/gvsoc-setup.sh); loaded by every \`make gvsoc-*\` target.
# To use the simulator by hand in a shell: source .gvsoc/env.sh
export GAPSTREAM_GVSOC_SDK="$SDK_DIR"
if [ -z "\${GAP_SDK_HOME:-}" ] || [ "\$GAP_SDK_HOME" != "$SDK_DIR" ]; then
    # configs/ai_deck.sh reads unset variables: source it without -u.
    case \$- in *u*) _gs_u=1; set +u ;; *) _gs_u=0 ;; esac
    source "$SDK_DIR/configs/ai_deck.sh" >/dev/null
    [ "\$_gs_u" = 1 ] && set -u
    unset _gs_u
fi
export PATH="$SDK_DIR/.venv/bin:\$PATH"
export BUILD_DIR="$SDK_DIR/build"
EOF
    mv "$ENV_FILE.tmp" "$ENV_FILE"
}

if [ -f "$STAMP" ] && [ "$(cat "$STAMP")" = "$SDK_COMMIT" ] && [ "${GVSOC_SETUP_FORCE:-0}" != 1 ]; then
    write_env
    say "up to date: GVSOC for GAP8 from the GAP SDK ${SDK_COMMIT:0:12} in $SDK_DIR; wrote .gvsoc/env.sh"
    exit 0
fi
start=$(date +%s)

# --- 1. Debian packages -----------------------------------------------------------------------------
APT=(build-essential git cmake scons rsync pkg-config python3-venv python3-dev libsdl2-dev
     libsdl2-ttf-dev libsndfile1-dev libgraphicsmagick++1-dev libjpeg-dev libusb-1.0-0-dev
     flex bison autoconf automake libtool texinfo)
missing=()
for p in "${APT[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if [ "${#missing[@]}" -gt 0 ]; then
    SUDO=""
    if [ "$(id -u)" != 0 ]; then
        command -v sudo >/dev/null 2>&1 || die "need root or sudo to install: ${missing[*]}"
        SUDO=sudo
    fi
    say "installing Debian packages: ${missing[*]}"
    $SUDO env DEBIAN_FRONTEND=noninteractive apt-get update -qq
    $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# --- 2. the SDK tree at the tested commit ------------------------------------------------------------
# A scratch git directory borrows the objects of GAP_SDK (alternates) or fetches the one commit from a
# URL; the tree is unpacked with `git archive`. Blobs a mirror lacks are left out when they are among
# the files this build does not use (libbfd.a is linked only with USE_TRDB, which we do not set).
OPTIONAL_BLOBS=(gvsoc/gvsoc/models/cpu/iss/sa/ext/libbfd.a)
if [ ! -f "$SDK_DIR/.gapstream-unpacked" ] || [ "$(cat "$SDK_DIR/.gapstream-unpacked")" != "$SDK_COMMIT" ]; then
    say "unpacking the GAP SDK ${SDK_COMMIT:0:12} from $GAP_SDK into $SDK_DIR"
    rm -rf "$SDK_DIR"
    mkdir -p "$SDK_DIR"
    scratch=$(mktemp -d)
    trap 'rm -rf "$scratch"' EXIT
    if [ -d "$GAP_SDK" ]; then
        objects=$(unset GIT_DIR; git -C "$GAP_SDK" rev-parse --path-format=absolute --git-path objects) \
            || die "GAP_SDK=$GAP_SDK is not a git directory"
    fi
    export GIT_DIR=$scratch/git
    git init -q --bare "$GIT_DIR"
    if [ -d "$GAP_SDK" ]; then
        echo "$objects" >"$GIT_DIR/objects/info/alternates"
    else
        git fetch -q --depth 1 "$GAP_SDK" "$SDK_COMMIT" || die "cannot fetch $SDK_COMMIT from $GAP_SDK"
    fi
    git cat-file -e "$SDK_COMMIT^{commit}" 2>/dev/null || die "$GAP_SDK does not have commit $SDK_COMMIT"
    export GIT_INDEX_FILE=$scratch/index
    git read-tree "$SDK_COMMIT"
    absent=$(git ls-files -s | awk '{print $2}' | git cat-file --batch-check | awk '$2 == "missing" {print $1}')
    if [ -n "$absent" ]; then
        while read -r obj; do
            path=$(git ls-files -s | awk -v o="$obj" '$2 == o {print $4}')
            for ok in "${OPTIONAL_BLOBS[@]}"; do
                if [ "$path" = "$ok" ]; then say "the source lacks $path (not needed: left out)"; git rm -q --cached "$path"; continue 2; fi
            done
            die "the source lacks $path (object $obj), which the build needs"
        done <<<"$absent"
    fi
    git archive --format=tar "$(git write-tree)" | tar -x -C "$SDK_DIR"
    unset GIT_DIR GIT_INDEX_FILE
    rm -rf "$scratch"
    trap - EXIT
    echo "$SDK_COMMIT" >"$SDK_DIR/.gapstream-unpacked"
fi

# --- 3. Python venv with the SDK's requirements -------------------------------------------------------
if [ ! -x "$SDK_DIR/.venv/bin/python" ] || ! "$SDK_DIR/.venv/bin/python" -c 'import elftools, prettytable' 2>/dev/null; then
    say "creating the Python venv ($SDK_DIR/.venv) with the SDK's requirements.txt"
    python3 -m venv "$SDK_DIR/.venv"
    "$SDK_DIR/.venv/bin/pip" install -q --disable-pip-version-check -r "$SDK_DIR/requirements.txt" >/dev/null
fi

# --- 4. build GVSOC for GAP8 ------------------------------------------------------------------------
log=$SDK_DIR/gvsoc-build.log
say "building GVSOC for GAP8 (~15 min on 2 cores; log: $log)"
(
    set +u
    export PATH="$SDK_DIR/.venv/bin:$PATH"
    source "$SDK_DIR/configs/ai_deck.sh" >/dev/null
    export BUILD_DIR=$SDK_DIR/build
    # Debian 12: g++ 12 warns about std::unary_function in GraphicsMagick's headers and the camera
    # models build with -Werror.
    export CXX="g++ -Wno-deprecated-declarations"
    cd "$SDK_DIR"
    set -e
    # json-tools, the configs, the DPI models (the camera among them) and the runner (gapy's back end)
    ./gvsoc/gvsoc-build
    # The models include the GAP8 archi headers; the SDK's full flow installs them with pulp-os (which
    # needs GreenWaves' compiler): point at them in the tree instead.
    archi=$SDK_DIR/gap8/rtos/pulp/archi_pulp/include
    jobs=$(nproc 2>/dev/null || echo 2)
    make -C gvsoc/gvsoc build -j"$jobs" BUILD_DIR="$BUILD_DIR/gvsoc" INSTALL_DIR="$INSTALL_DIR" \
        TARGET_INSTALL_DIR="$SDK_DIR/install" ARCHI_DIR="$archi"
    make -C gvsoc/gvsoc_gap build -j"$jobs" BUILD_DIR="$BUILD_DIR/gvsoc_gap" INSTALL_DIR="$INSTALL_DIR" \
        TARGET_INSTALL_DIR="$SDK_DIR/install" ARCHI_DIR="$archi"
) >"$log" 2>&1 || { tail -n 30 "$log" >&2; die "the GVSOC build failed (log: $log)"; }

echo "$SDK_COMMIT" >"$STAMP"
write_env
# Check the result the way the project uses it: gapy on PATH, the GAP8 platform loads.
( set +u; source "$ENV_FILE"; command -v gapy >/dev/null ) || die "the build finished but gapy is not on PATH"
say "done in $(( ($(date +%s) - start) / 60 )) min: GVSOC for GAP8 in $SDK_DIR; wrote .gvsoc/env.sh"
