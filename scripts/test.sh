#!/usr/bin/env bash
# Installs what is missing (apt), builds turbokv twice and runs every test:
#   build/release  optimized, warnings as errors, every Highway target
#                  compiled (the kernel tests force each in turn): runs the
#                  whole suite, including the tests labelled no_asan
#                  (peak-RSS and address-space-limit measurements, which the
#                  sanitizers' shadow memory would distort; timing ratios;
#                  the longest tkv-test-23M runs, whose code paths run
#                  sanitized on smaller models);
#   build/asan     ASan + UBSan, warnings as errors, -O1 and fewer Highway
#                  targets (see cmake/TurbokvOptions.cmake): runs the whole
#                  suite except the no_asan tests;
#   build/fuzz     clang + libFuzzer: every fuzz target for
#                  TURBOKV_FUZZ_SECONDS (default 20) from its kept corpus
#                  (scripts/fuzz.sh);
#   build/aarch64  cross-built for 64-bit ARM: the SIMD kernel tests, the
#                  stories260K end-to-end test and `turbokv run` under
#                  qemu-user (scripts/test-aarch64.sh).
# Test code itself is compiled at -O1 (-O0 in build/asan); the engine it
# tests keeps the build type's optimization.
# Shared fixtures come from $TURBOKV_MODELS (default ../shared/models) and
# $TURBOKV_SHARED (default ../shared: chat templates);
# tests that need an absent fixture skip and say why. TURBOKV_JOBS sets the
# build and test jobs (default: every core); docs/ENVIRONMENT.md lists the
# rest.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh

JOBS=${TURBOKV_JOBS:-$(nproc)}
export TURBOKV_MODELS=${TURBOKV_MODELS:-$(cd .. && pwd)/shared/models}
export TURBOKV_SHARED=${TURBOKV_SHARED:-$(cd .. && pwd)/shared}

phase() { echo "== [$((SECONDS / 60))m$((SECONDS % 60))s] $*"; }
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}

phase "configure + build (release, -Werror)"
cmake -S . -B build/release -DCMAKE_BUILD_TYPE=Release -DTURBOKV_WERROR=ON >/dev/null
cmake --build build/release -j"$JOBS"
phase "tests (release)"
ctest --test-dir build/release --output-on-failure -j"$JOBS"

phase "configure + build (ASan+UBSan, -Werror)"
cmake -S . -B build/asan -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTURBOKV_SANITIZE=ON \
  -DTURBOKV_WERROR=ON -DTURBOKV_BUILD_BENCHMARKS=OFF >/dev/null
cmake --build build/asan -j"$JOBS"
phase "tests (ASan+UBSan)"
ctest --test-dir build/asan --output-on-failure -j"$JOBS" -LE no_asan
phase "fuzz (${TURBOKV_FUZZ_SECONDS:-20} s per target)"
TURBOKV_JOBS="$JOBS" scripts/fuzz.sh "${TURBOKV_FUZZ_SECONDS:-20}"
phase "aarch64: cross build + kernel and end-to-end tests under qemu-user"
TURBOKV_JOBS="$JOBS" scripts/test-aarch64.sh
phase "turbokv: all tests passed"
