#!/usr/bin/env bash
# Runs every libFuzzer target for SECONDS each (default 60):
#   scripts/fuzz.sh [SECONDS]
# Targets (tests/fuzz): gguf (the GGUF reader, model config and weight
# binding), tokenizer (every vocabulary fixture), template (the chat-template
# interpreter: parse and render), session (the KV session loader),
# server_request (the server's request parser and response serializer),
# gbnf and json_schema (the GBNF parser and the JSON Schema compiler, each
# with the matcher over its input).
# Builds them with clang into build/fuzz (ASan + UBSan + coverage), starts
# each from its kept corpus tests/fuzz/corpus/<target>/ (read only: new
# inputs go to build/fuzz/corpus/<target>/) and stops at the first crash,
# leaving the input in build/fuzz/crashes/. Fix the bug, then add the input
# to tests/fuzz/corpus/<target>/ so that ctest's replay keeps it fixed.
# TURBOKV_JOBS sets the build jobs (default: every core).
# Exit status: 0 when no target crashed.
set -euo pipefail
cd "$(dirname "$0")/.."
SECONDS_EACH=${1:-60}
case "$SECONDS_EACH" in
  '' | *[!0-9]*) echo "usage: scripts/fuzz.sh [SECONDS]  (a whole number)" >&2; exit 2 ;;
esac
scripts/setup.sh

JOBS=${TURBOKV_JOBS:-$(nproc)}
export TURBOKV_MODELS=${TURBOKV_MODELS:-$(cd .. && pwd)/shared/models}
export TURBOKV_SHARED=${TURBOKV_SHARED:-$(cd .. && pwd)/shared}
TARGETS=(gguf tokenizer template session server_request gbnf json_schema reply_parser)

echo "== fuzz: build (clang, libFuzzer + ASan + UBSan) into build/fuzz" >&2
cmake -S . -B build/fuzz -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_C_COMPILER=clang \
  -DCMAKE_CXX_COMPILER=clang++ -DTURBOKV_FUZZ=ON -DTURBOKV_BUILD_BENCHMARKS=OFF >/dev/null
cmake --build build/fuzz -j"$JOBS" --target "${TARGETS[@]/#/fuzz_}"

mkdir -p build/fuzz/crashes
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
failed=()
for t in "${TARGETS[@]}"; do
  work=build/fuzz/corpus/$t
  mkdir -p "$work"
  echo "== fuzz: $t for ${SECONDS_EACH}s" >&2
  if ! build/fuzz/tests/fuzz/fuzz_"$t" -max_total_time="$SECONDS_EACH" -timeout=10 \
      -rss_limit_mb=2048 -print_final_stats=1 -artifact_prefix=build/fuzz/crashes/"$t"- \
      "$work" tests/fuzz/corpus/"$t" 2> build/fuzz/"$t".log; then
    failed+=("$t")
    tail -40 build/fuzz/"$t".log >&2
    echo "fuzz: $t found a failing input: build/fuzz/crashes/$t-* (log build/fuzz/$t.log)" >&2
  else
    grep -E "^stat::number_of_executed_units|^stat::new_units_added" build/fuzz/"$t".log \
      | sed "s/^/  $t: /" >&2 || true
  fi
done
if [ ${#failed[@]} -gt 0 ]; then
  echo "fuzz: failures in: ${failed[*]}" >&2
  exit 1
fi
echo "fuzz: ${#TARGETS[@]} targets, ${SECONDS_EACH}s each, no failure" >&2
