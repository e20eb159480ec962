#!/usr/bin/env bash
# Set up, then run the main job: Andrews' squeezer (seed 000 §8.1) with
# generalized-alpha, and the pendulum under a multirate discrete PD scenario.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
mkdir -p out
.venv/bin/cosim simulate andrews --method generalized-alpha --rtol 1e-6 \
    --out out/andrews.csv --plot out/andrews.png
if [ -f scenarios/pendulum_pd.yaml ]; then
  .venv/bin/cosim run scenarios/pendulum_pd.yaml --plot out/pendulum_pd.png --out out/pendulum_pd.csv
fi
