#!/usr/bin/env bash
# Regenerate requirements.lock, the pinned constraints every install uses (pip -c).
set -euo pipefail
cd "$(dirname "$0")/.."
python -m uv pip compile pyproject.toml --extra test --python-version 3.11 \
  --no-header --quiet -o requirements.lock
