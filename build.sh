#!/usr/bin/env bash
# loom's entry points on a fresh Debian 12 machine, run as root:
#   ./build.sh run       install what is missing, build the library and the Fashion-MNIST example
#                        (Release; no tests or benchmarks) and train its CNN for one epoch
#   ./build.sh test      install what is missing, build (Release), run the whole test suite (ctest),
#                        then the sanitizer pass below (what CI runs, .ci/run)
#   ./build.sh sanitize  install what is missing, build with ASan and UBSan (build-sanitize/,
#                        no benchmarks) and run the whole suite, fuzzer included, under them
#   ./build.sh compare   also install the bench-only peers (PyTorch, numpy, threadpoolctl,
#                        OpenBLAS's threaded build, without which torch falls back to the
#                        reference BLAS, and oneDNN and Eigen for bench/peers/bench_peers;
#                        oneDNN's CMake package needs OpenCL's headers), build, and run
#                        bench/compare (docs/performance.md)
set -euo pipefail
cd "$(dirname "$0")"
mode=${1:-run}

packages=(cmake make g++ llvm-19-dev libtbb-dev libfmt-dev libspdlog-dev doctest-dev libbenchmark-dev
  nlohmann-json3-dev zlib1g-dev libasan8 libubsan1 dataset-fashion-mnist fortunes libopenmpi-dev openmpi-bin procps
  ccache)
if [[ $mode == compare ]]; then
  packages+=(python3-torch python3-numpy python3-threadpoolctl libopenblas0-pthread libdnnl-dev
    ocl-icd-opencl-dev libeigen3-dev)
fi
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
# Each phase's wall time, so CI's log shows where its budget goes (docs/performance.md,
# "CI's time").
phase() {
  local start=$SECONDS status=0
  "$@" || status=$?
  echo "build.sh: $* took $((SECONDS - start)) s"
  return $status
}
# The compiler cache serves the second build (the sanitizer pass) every object the
# first made outside libloom: only libloom is instrumented, so the tests, interpreters,
# fuzzer, examples and tools compile with the same command line in both (CMakeLists.txt).
# It lives in the checkout, so a fresh clone starts cold; the base
# directory makes build/ and build-sanitize/'s paths compare equal, and the
# sloppiness lets it reuse the precompiled test headers (ccache's manual).
export CCACHE_DIR="$PWD/.cache/ccache" CCACHE_BASEDIR="$PWD" CCACHE_NOHASHDIR=1
export CCACHE_SLOPPINESS=pch_defines,time_macros,include_file_mtime,include_file_ctime
# $1: build directory; the rest: extra CMake options.
build() {
  local dir=$1
  shift
  cmake -S . -B "$dir" -DCMAKE_BUILD_TYPE=Release -DLOOM_UNITY_BUILD=ON -DCMAKE_CXX_COMPILER_LAUNCHER=ccache "$@"
  phase cmake --build "$dir" -j "$jobs"
}

# The whole suite, fuzzer included, under ASan and UBSan. Each test's sanitizer options
# and LeakSanitizer's documented suppressions come from tests/CMakeLists.txt; a report
# fails the test (docs/faults.md). The instrumented code compiles at -O1 (CMakeLists.txt).
sanitize() {
  build build-sanitize -DLOOM_SANITIZE=address,undefined -DLOOM_BUILD_BENCH=OFF
  phase ctest --test-dir build-sanitize --output-on-failure -j "$jobs"
}

case "$mode" in
  run)
    # Only what the example needs (libloom and the example): the tests and benchmarks
    # are most of a full build's time. The same build/ serves `test` afterwards.
    cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DLOOM_UNITY_BUILD=ON
    cmake --build build -j "$jobs" --target fashion_mnist
    ./build/examples/fashion_mnist --model cnn --epochs 1 --checkpoint build/fashion_mnist_cnn.safetensors
    ;;
  test)
    build build
    phase ctest --test-dir build --output-on-failure -j "$jobs"
    sanitize
    ;;
  sanitize) sanitize ;;
  compare) build build; /usr/bin/python3 bench/compare --build build ;;
  *) echo "usage: $0 [run|test|sanitize|compare]" >&2; exit 2 ;;
esac
