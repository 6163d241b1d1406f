#!/usr/bin/env bash
# loom's two entry points on a fresh Debian 12 machine, run as root:
#   ./build.sh run    install what is missing, build (Release), train the moons example
#   ./build.sh test   install what is missing, build (Release), run the whole test suite (ctest)
set -euo pipefail
cd "$(dirname "$0")"
mode=${1:-run}

packages=(cmake make g++ llvm-19-dev libtbb-dev libfmt-dev libspdlog-dev doctest-dev libbenchmark-dev
  nlohmann-json3-dev)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "build.sh: installing ${missing[*]}"
  apt-get -o DPkg::Lock::Timeout=600 update -qq
  DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 install -y -qq \
    --no-install-recommends "${missing[@]}"
fi

jobs=$(nproc)
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release
cmake --build build -j "$jobs"

case "$mode" in
  run) ./build/examples/moons ;;
  test) ctest --test-dir build --output-on-failure -j "$jobs" ;;
  *) echo "usage: $0 [run|test]" >&2; exit 2 ;;
esac
