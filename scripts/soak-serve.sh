#!/usr/bin/env bash
# The server's soak (tests/server/node/soak.mjs) in its long form: a live
# `turbokv serve` on loopback under 500 idle connections, slowloris
# connections, malformed and abusive requests and streams cut off mid-way,
# with a well-behaved client beside them, for SECONDS (default 120) on
# tkv-test-23M. Fails on a crash, a hang, a failed request of the good
# client, its /health p99 over TURBOKV_SOAK_HEALTH_P99_MS (default 200) or RSS
# growth past TURBOKV_SOAK_RSS_GROWTH_MIB (default 64). Writes its
# figures, command, machine, commit and date to docs/results/serve-soak.md
# (TURBOKV_SOAK_RESULTS=path to write elsewhere, TURBOKV_SOAK_RESULTS= to
# write nothing; TURBOKV_JOBS: build jobs). ctest runs
# the same test for 8 s on stories260K (server_node_soak).
#   scripts/soak-serve.sh [SECONDS]
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-120}
scripts/setup.sh
cmake -S . -B build/release -DCMAKE_BUILD_TYPE=Release -DTURBOKV_WERROR=ON >/dev/null
cmake --build build/release -j"${TURBOKV_JOBS:-$(nproc)}" --target turbokv >/dev/null

export TURBOKV_BIN=$PWD/build/release/apps/turbokv/turbokv
export TURBOKV_MODELS=${TURBOKV_MODELS:-$(cd .. && pwd)/shared/models}
export TURBOKV_SOAK_SECONDS=$seconds TURBOKV_SOAK_MODEL=${TURBOKV_SOAK_MODEL:-tkv-test-23M.gguf}
export TURBOKV_SOAK_HEALTH_P99_MS=${TURBOKV_SOAK_HEALTH_P99_MS:-200}
log=$(mktemp)
trap 'rm -f "$log"' EXIT
status=0
node tests/server/node/soak.mjs >"$log" 2>&1 || status=$?
grep -v '^\[serve ' "$log" | tail -20
figures=$(sed -n 's/^soak: //p' "$log")
results=${TURBOKV_SOAK_RESULTS-docs/results/serve-soak.md}
if [ -n "$figures" ] && [ -n "$results" ]; then
  mkdir -p "$(dirname "$results")"
  {
    echo "# serve soak"
    echo
    echo "Hostile and careless clients beside a well-behaved one (tests/server/node/soak.mjs)."
    echo
    echo "- command: \`scripts/soak-serve.sh $seconds\` (TURBOKV_SOAK_MODEL=$TURBOKV_SOAK_MODEL)"
    echo "- result: $([ "$status" = 0 ] && echo passed || echo "FAILED (exit $status)")"
    echo "- machine: $(lscpu | sed -n 's/^Model name: *//p' | head -1), $(nproc) CPUs"
    echo "- commit: $(git rev-parse --short HEAD)$(git diff --quiet HEAD -- src apps tests || echo ' (with local changes)')"
    echo "- date: $(date -u +%Y-%m-%d)"
    echo
    echo "| figure | value |"
    echo "|---|---|"
    node -e 'for (const [k, v] of Object.entries(JSON.parse(process.argv[1])))
               console.log(`| ${k} | ${typeof v === "number" ? +v.toFixed(1) : v} |`)' "$figures"
  } >"$results"
  echo "turbokv: figures in $results" >&2
fi
exit "$status"
