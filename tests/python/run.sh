#!/usr/bin/env bash
# Runs a Python reference check in the tests' venv: run.sh PYTHON SCRIPT ARGS...
set -euo pipefail
py=$1; shift
if [[ ! -x $py ]]; then
  echo "$py is missing: make the tests' Python environment with scripts/python-env.sh (the README's test command does)" >&2
  exit 1
fi
exec "$py" "$@"
