#!/usr/bin/env bash
# Mutation testing of the core modules against their own tests (not in CI: a full pass takes hours on 2 cores, docs/testing.md).
# Usage: bash scripts/mutation.sh [MODULE ...] [--list] [--children N] [--out DIR]; see scripts/mutation.py.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON="${PYTHON:-python3}"
exec "$PYTHON" scripts/mutation.py "$@"
