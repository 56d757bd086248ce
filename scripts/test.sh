#!/usr/bin/env bash
# Installs what is missing (apt), builds turbokv twice and runs every test:
#   build/asan     ASan + UBSan, warnings as errors: runs the whole suite
#                  except tests labelled no_asan;
#   build/release  optimized, warnings as errors: runs the no_asan tests
#                  (peak-RSS and address-space-limit measurements, which the
#                  sanitizers' shadow memory would distort) and is the binary
#                  the benchmarks use.
# Shared fixtures come from $TURBOKV_MODELS (default ../shared/models);
# tests that need an absent fixture skip and say why.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh

JOBS=${JOBS:-$(nproc)}
export TURBOKV_MODELS=${TURBOKV_MODELS:-$(cd .. && pwd)/shared/models}

echo "== configure + build (release, -Werror)"
cmake -S . -B build/release -DCMAKE_BUILD_TYPE=Release -DTURBOKV_WERROR=ON >/dev/null
cmake --build build/release -j"$JOBS"

echo "== configure + build (ASan+UBSan, -Werror)"
cmake -S . -B build/asan -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTURBOKV_SANITIZE=ON \
  -DTURBOKV_WERROR=ON -DTURBOKV_BUILD_BENCHMARKS=OFF >/dev/null
cmake --build build/asan -j"$JOBS"

export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}

echo "== tests (ASan+UBSan)"
ctest --test-dir build/asan --output-on-failure -j"$JOBS" -LE no_asan
echo "== tests (release: memory measurements)"
ctest --test-dir build/release --output-on-failure -j"$JOBS" -L no_asan --no-tests=ignore
echo "turbokv: all tests passed"
