#!/usr/bin/env bash
# Set up, then run the whole test suite (real FMUs, real rclpy over loopback DDS).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
export ROS_AUTOMATIC_DISCOVERY_RANGE=LOCALHOST
exec .venv/bin/python -m pytest -q "$@"
