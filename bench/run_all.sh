#!/usr/bin/env bash
# Run every memcli benchmark in turn; figures go to stdout. Extra arguments are not passed on.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-.venv/bin/python}
for script in import_throughput search_latency cold_search sync_nochange; do
  echo "==================== bench/$script.py"
  "$PY" "bench/$script.py"
  echo
done
