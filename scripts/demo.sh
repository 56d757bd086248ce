#!/usr/bin/env bash
# The turbokv demo (the README's first command). On a fresh Debian 12, as
# root or with sudo:
#   1. installs the missing Debian packages (scripts/setup.sh);
#   2. builds the Release binary into build/release;
#   3. synthesizes a model with llama-3.2-1b's shapes and random weights
#      (`turbokv synth --like llama-3.2-1b --layers 4`: every per-layer shape
#      and the 128K vocabulary of the real model, 4 of its 16 layers, ~1 GB),
#      or a smaller preset when memory or disk is short; kept in build/demo
#      and reused by later runs;
#   4. measures the f16 KV cache against k4v2 (TurboQuant 4-bit keys, 2-bit
#      values, 4 f16 sinks + 64 f16 recent tokens) with `turbokv bench memory`
#      and `turbokv bench speed`, each cell in a fresh process, and prints the
#      tables (reports and plots in build/demo/).
# Sized for a few minutes on 2 cores. Overrides: TURBOKV_DEMO_CTX (memory
# contexts, e.g. 1k,4k,16k), TURBOKV_DEMO_SPEED_CTX (time-to-first-token
# contexts), TURBOKV_DEMO_DEPTHS (decode depths), TURBOKV_THREADS (the
# benchmarks' threads), TURBOKV_JOBS (build jobs); docs/ENVIRONMENT.md.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh

JOBS=${TURBOKV_JOBS:-$(nproc)}
echo "== build (Release) into build/release" >&2
cmake -S . -B build/release -DCMAKE_BUILD_TYPE=Release -DTURBOKV_WERROR=ON >/dev/null
cmake --build build/release -j"$JOBS" --target turbokv >/dev/null
BIN=build/release/apps/turbokv/turbokv
mkdir -p build/demo

# Model size from what this machine has: the 1B-shape model needs ~1 GB of
# disk and ~2 GB of memory at the largest context here.
avail_mb=$(awk '/^MemAvailable:/ {print int($2 / 1024)}' /proc/meminfo)
disk_mb=$(df -Pm build/demo | awk 'NR == 2 {print $4}')
if [ "$avail_mb" -ge 4000 ] && [ "$disk_mb" -ge 2500 ]; then
  PRESET=llama-3.2-1b LAYERS=4
elif [ "$avail_mb" -ge 1500 ] && [ "$disk_mb" -ge 800 ]; then
  PRESET=qwen2.5-0.5b LAYERS=4
else
  PRESET=tiny LAYERS=0
fi
CTX=${TURBOKV_DEMO_CTX:-1k,4k}
SPEED_CTX=${TURBOKV_DEMO_SPEED_CTX:-512,2k}
DEPTHS=${TURBOKV_DEMO_DEPTHS:-0,2k}
MODEL=build/demo/$PRESET${LAYERS:+-l$LAYERS}.gguf
[ "$LAYERS" = 0 ] && MODEL=build/demo/$PRESET.gguf
if [ ! -s "$MODEL" ]; then
  echo "== synthesize $PRESET (${avail_mb} MB memory and ${disk_mb} MB disk available)" >&2
  layer_flag=()
  [ "$LAYERS" != 0 ] && layer_flag=(--layers "$LAYERS")
  "$BIN" synth --like "$PRESET" "${layer_flag[@]}" --out "$MODEL"
else
  echo "== reusing $MODEL" >&2
fi

# Threads: turbokv's default (physical cores) unless TURBOKV_THREADS is set.
threads=()
[ -n "${TURBOKV_THREADS:-}" ] && threads=(-t "$TURBOKV_THREADS")
echo "== bench memory: f16 vs k4v2 at contexts $CTX" >&2
"$BIN" bench memory -m "$MODEL" --kv f16,k4v2 --ctx "$CTX" "${threads[@]}" --out build/demo/memory
echo "== bench speed: f16 vs k4v2, decode at depths $DEPTHS" >&2
"$BIN" bench speed -m "$MODEL" --kv f16,k4v2 --ctx "$SPEED_CTX" --depths "$DEPTHS" "${threads[@]}" \
  --out build/demo/speed
echo >&2
echo "turbokv demo: reports and plots in build/demo/memory and build/demo/speed" >&2
