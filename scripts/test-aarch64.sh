#!/usr/bin/env bash
# Cross-builds turbokv for 64-bit ARM Linux into build/aarch64 (Debian's
# g++-aarch64-linux-gnu, the arm64 multiarch dev packages and
# cmake/aarch64-linux-gnu.cmake) and runs under qemu-user, on QEMU's "max"
# CPU (SVE2, dotprod, ...):
#   tensor_test, kv_codec_test   the weight and KV-codec kernels: each test
#                                forces in turn every Highway target the build
#                                compiled and the emulated CPU supports;
#   softmax_test, model_ops_test, sample_test
#                                the other SIMD kernels (attention's online
#                                softmax, RMSNorm, SiLU, the sampler's logit
#                                scans) on the default target;
#   common_test                  thread pool (its aarch64 spin-wait), sizes,
#                                peak-RSS fallbacks;
#   model_stories_test           stories260K end to end: greedy text and
#                                logits against the reference;
#   cli_test's CliRun.*          `turbokv run` on stories260K through the real
#                                binary (TURBOKV_AARCH64_CLI=0 skips it and
#                                the app's build);
# then tensor_test again on cortex-a72 (ARMv8.0: no dotprod, no SVE), the
# weight kernels' plain NEON CPU. TURBOKV_ARM_SVE=ON also compiles Highway's
# SVE targets (cmake/TurbokvOptions.cmake) and adds kernel-test runs with
# 128- and 256-bit SVE vectors, where SVE2_128 and SVE_256 run. The rest of the suite (tokenizer, GGUF,
# KV cache, bench, ...) is portable C++ and runs natively in scripts/test.sh.
# Installs what is missing (apt, as root or through sudo). Shared fixtures
# come from $TURBOKV_MODELS (default ../shared/models); TURBOKV_JOBS sets the
# build jobs (default: every core). Exits non-zero on any failure.
set -euo pipefail
cd "$(dirname "$0")/.."

phase() { echo "== aarch64 [$((SECONDS / 60))m$((SECONDS % 60))s] $*"; }

# --- packages ---------------------------------------------------------------
# Host tools, then the arm64 libraries the build links (each :arm64 package
# co-installs with its amd64 twin; nlohmann-json is header-only, arch all).
PACKAGES=(
  cmake make pkg-config g++-aarch64-linux-gnu qemu-user nlohmann-json3-dev
  libhwy-dev:arm64 libpcre2-dev:arm64 libxxhash-dev:arm64 libgtest-dev:arm64 libgmock-dev:arm64
  libcpp-httplib-dev:arm64
)
SUDO=""
[ "$(id -u)" -ne 0 ] && SUDO="sudo"
missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  phase "installing ${missing[*]}"
  if ! dpkg --print-foreign-architectures | grep -qx arm64; then
    $SUDO dpkg --add-architecture arm64
  fi
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# --- build ------------------------------------------------------------------
JOBS=${TURBOKV_JOBS:-$(nproc)}
BUILD=build/aarch64
export TURBOKV_MODELS=${TURBOKV_MODELS:-$(cd .. && pwd)/shared/models}
export TURBOKV_SHARED=${TURBOKV_SHARED:-$(cd .. && pwd)/shared}
BUILD_TARGETS=(tensor_test kv_codec_test softmax_test model_ops_test sample_test common_test
  model_stories_test)
CLI=${TURBOKV_AARCH64_CLI:-1}
SVE=${TURBOKV_ARM_SVE:-OFF}
[ "$CLI" = 1 ] && BUILD_TARGETS+=(cli_test)

phase "configure (cross, Release, -Werror, no benchmarks)"
cmake -S . -B "$BUILD" -DCMAKE_TOOLCHAIN_FILE=cmake/aarch64-linux-gnu.cmake \
  -DCMAKE_BUILD_TYPE=Release -DTURBOKV_WERROR=ON -DTURBOKV_BUILD_BENCHMARKS=OFF \
  -DTURBOKV_ARM_SVE="$SVE" >/dev/null
phase "build ${BUILD_TARGETS[*]}"
cmake --build "$BUILD" -j"$JOBS" --target "${BUILD_TARGETS[@]}"

# --- tests under qemu-user --------------------------------------------------
# ctest runs every TEST as its own process through CMAKE_CROSSCOMPILING_EMULATOR
# (qemu-aarch64); QEMU_CPU picks the emulated CPU.
run_tests() {  # run_tests QEMU_CPU CTEST_REGEX
  local cpu=$1 regex=$2
  # One short run to name the Highway targets the kernel tests visit here.
  local targets
  targets=$(QEMU_CPU=$cpu qemu-aarch64 "$BUILD/tests/tensor/tensor_test" \
    --gtest_filter=Dequantize.EveryCompiledTargetIsVisited 2>&1 |
    sed -n 's/.*targets compiled and supported here: *//p')
  if [ -z "$targets" ]; then
    echo "turbokv: tensor_test did not run under qemu-aarch64 (QEMU_CPU=$cpu)" >&2
    exit 1
  fi
  phase "tests on QEMU_CPU=$cpu (Highway targets: $targets): ctest -R '$regex'"
  # A failing run is recorded and the next CPU still runs; the script fails at the end.
  QEMU_CPU=$cpu ctest --test-dir "$BUILD" --output-on-failure --no-tests=error -j"$JOBS" \
    -R "$regex" -E "$not_emulated" || failed+=("$cpu")
}
# Tests whose figures are the process's own memory: under qemu-user the
# process is the emulator (its translation cache and its own libraries are
# most of the resident set), so what they check does not hold there.
not_emulated='^CliRun\.SummaryAccountsForPeakMemory$'
failed=()

# ctest -R regex of every gtest suite in the given test binaries (from the
# lists gtest_discover_tests wrote at build time).
suites_of() {
  local files=() t
  for t in "$@"; do files+=("$BUILD/tests/$t[1]_tests.cmake"); done
  echo "^($(sed -n 's/^add_test(\[=*\[\([^].]*\)\..*/\1/p' "${files[@]}" |
    sort -u | paste -sd'|'))\."
}
if [ "$CLI" = 1 ]; then
  # The CLI tests exec the turbokv binary: without binfmt_misc the kernel
  # cannot run an aarch64 executable, so they exec this wrapper instead.
  cat >"$BUILD/turbokv-qemu" <<'WRAPPER'
#!/bin/sh
exec qemu-aarch64 "$(dirname "$0")/apps/turbokv/turbokv" "$@"
WRAPPER
  chmod +x "$BUILD/turbokv-qemu"
  export TURBOKV_BIN=$PWD/$BUILD/turbokv-qemu
fi
forced_kernels=$(suites_of tensor/tensor_test kv_codec/kv_codec_test)
kernels="$forced_kernels|$(suites_of kv/softmax_test model/model_ops_test sample/sample_test \
  common/common_test)"
weight_kernels=$(suites_of tensor/tensor_test)
e2e=$(suites_of model/model_stories_test)
[ "$CLI" = 1 ] && e2e="$e2e|^CliRun\."

run_tests max "$kernels|$e2e"
if [ "$SVE" = ON ]; then
  # QEMU's max CPU has 512-bit SVE vectors; Highway's SVE2_128 and SVE_256
  # targets run only where they are exactly 128 and 256 bits.
  run_tests max,sve-default-vector-length=16 "$forced_kernels"
  run_tests max,sve-default-vector-length=32 "$forced_kernels"
fi
run_tests cortex-a72 "$weight_kernels"
if [ ${#failed[@]} -gt 0 ]; then
  phase "aarch64: tests FAILED on QEMU_CPU=${failed[*]}"
  exit 1
fi
phase "aarch64: all tests passed"
