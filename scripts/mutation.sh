#!/usr/bin/env bash
# Mutation testing of the core modules against their own tests (not in CI: ~15-30 min on 2 cores).
# Usage: bash scripts/mutation.sh [MODULE ...] [--list] [--children N] [--out DIR]; see scripts/mutation.py.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON="${PYTHON:-python3}"
exec "$PYTHON" scripts/mutation.py "$@"
