#!/usr/bin/env bash
# The repository stands alone: tracked files name no issue numbers, no internal notes folders and
# no paths of the machines it was built on
# (part of `make test`, mk/docs.mk). Outside a git checkout there is nothing to check.
set -euo pipefail
cd "$(dirname "$0")/.."
if ! git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
  echo "docs-check: skipped (not a git checkout)"; exit 0
fi
if hits=$(git grep -nE 'shared/(seeds|notes)|\.\./shared|[Ii]ssue [0-9]|[/]work[/]|[/]root[/]|gapsdk[/](env[.]sh|NOTES[.]md)' -- . ':!Cargo.lock'); then
  echo "docs-check: tracked files refer to issue numbers, internal notes or build-machine paths:" >&2
  echo "$hits" >&2
  exit 1
fi
echo "docs-check: ok (no issue numbers, internal notes folders or build-machine paths in tracked files)"
