#!/usr/bin/env bash
# Set up (scripts/setup.sh), then run the main job, `cosim demo`: Andrews'
# squeezer (seed 000 §8.1) with generalized-alpha, and the pendulum under the
# multirate discrete PD scenario.  Ends with a summary and the paths of the
# plots and CSV files it wrote (in out/).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
echo
echo "[demo] .venv/bin/cosim demo --out-dir out"
exec .venv/bin/cosim demo --out-dir out "$@"
