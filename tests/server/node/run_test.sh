#!/bin/sh
# ctest runs every end-to-end server test through this wrapper: it needs node
# and the openai package that scripts/setup.sh installs with `npm ci` into
# node_modules here. When either is absent the test is skipped (exit 77)
# with a message, or fails under TURBOKV_REQUIRE_FIXTURES=1 (CI), so a green
# CI run means these tests ran.
here=$(dirname "$0")
missing=""
if ! command -v node >/dev/null 2>&1; then
  missing="node is not installed (scripts/setup.sh installs it)"
elif [ ! -f "$here/node_modules/openai/package.json" ]; then
  missing="$here/node_modules has no openai package (run scripts/setup.sh: npm ci)"
fi
if [ -n "$missing" ]; then
  if [ "${TURBOKV_REQUIRE_FIXTURES:-}" = "1" ]; then
    echo "FAIL: $missing (TURBOKV_REQUIRE_FIXTURES=1)" >&2
    exit 1
  fi
  echo "SKIP: $missing"
  exit 77
fi
exec node "$@"
