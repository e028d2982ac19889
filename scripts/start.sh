#!/usr/bin/env bash
# Set up (idempotent), then start the lab. Arguments go to `python -m lab serve`.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

bash scripts/setup.sh
exec .venv/bin/python -m lab serve "$@"
