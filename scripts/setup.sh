#!/usr/bin/env bash
# Installs the Debian packages turbokv needs, skipping those already present,
# and the openai npm client the server's end-to-end tests use (tests/server/
# node, pinned by its package-lock.json; into its node_modules, which git
# ignores). Sourced by demo.sh and test.sh; safe to run on its own.
set -euo pipefail

TURBOKV_PACKAGES=(
  build-essential cmake pkg-config
  libhwy-dev nlohmann-json3-dev libpcre2-dev libcpp-httplib-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  libxxhash-dev
  gnuplot-nox
  clang libclang-rt-14-dev lld
)
# node runs the server's end-to-end tests; Debian's nodejs comes without npm.
command -v node >/dev/null 2>&1 || TURBOKV_PACKAGES+=(nodejs)
command -v npm >/dev/null 2>&1 || TURBOKV_PACKAGES+=(npm)

missing=()
for p in "${TURBOKV_PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "turbokv: installing ${missing[*]}" >&2
  SUDO=""
  [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# The tests' npm packages: `npm ci` when node_modules is absent or was
# installed from another package-lock.json (the stamp holds its checksum).
node_dir="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)/tests/server/node"
lock_sum=$(sha256sum "$node_dir/package-lock.json" | cut -d' ' -f1)
stamp="$node_dir/node_modules/.turbokv-lock-sha256"
# Without the registry the rest of the build goes on; those tests then skip
# (or fail, under TURBOKV_REQUIRE_FIXTURES=1).
if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$lock_sum" ]; then
  echo "turbokv: npm ci in tests/server/node" >&2
  if (cd "$node_dir" && npm ci --no-audit --no-fund --loglevel=error >/dev/null); then
    echo "$lock_sum" >"$stamp"
  else
    echo "turbokv: warning: npm ci failed in $node_dir: the server's end-to-end tests cannot run" >&2
  fi
fi
