#!/usr/bin/env bash
# Installs the Debian packages turbokv needs, skipping those already present.
# Sourced by demo.sh and test.sh; safe to run on its own.
set -euo pipefail

TURBOKV_PACKAGES=(
  build-essential cmake pkg-config
  libhwy-dev nlohmann-json3-dev libpcre2-dev libcpp-httplib-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  libxxhash-dev
  gnuplot-nox
  clang libclang-rt-14-dev
)

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
