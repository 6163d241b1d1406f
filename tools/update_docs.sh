#!/bin/bash
# Rewrites every checked listing in README.md and docs/*.md from its command
# (docs/loom-dump.md "Checked listings"), after building the tools it runs.
#   tools/update_docs.sh [BUILD_DIR]   (default: build)
set -euo pipefail
src=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$src/build}
cmake --build "$build" --target loom-dump loom-docs-check demo
"$build/tools/loom-docs-check" --root "$src" --bin "$build/tools" --bin "$build/examples" --update
