#!/usr/bin/env bash
# Set up (scripts/setup.sh), then run the whole test suite (real FMUs, real
# rclpy over loopback DDS).  Extra arguments go to pytest (e.g. -x, -k NAME).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
export ROS_AUTOMATIC_DISCOVERY_RANGE=LOCALHOST
echo
echo "[test] .venv/bin/python -m pytest -q $* (a few minutes; one dot per test)"
exec .venv/bin/python -m pytest -q "$@"
