#!/usr/bin/env bash
# Create .venv (Python 3.11) and install cosim with every extra (editable;
# COSIM_EXTRAS=fmu,test installs fewer).
# Idempotent: a second run only checks.  One line per phase with its elapsed
# time; pip's own output goes to .venv/setup.log (shown when it fails).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
T0=$SECONDS
say() { printf '[setup %3ds] %s\n' "$((SECONDS - T0))" "$*"; }
trap 'echo "[setup] FAILED at scripts/setup.sh line $LINENO: $BASH_COMMAND" >&2' ERR

PY=${PYTHON:-python3.11}
command -v "$PY" >/dev/null 2>&1 || PY=python3
if ! command -v "$PY" >/dev/null 2>&1; then
  echo "setup: no python3.11 (or python3) on PATH; install Python 3.11 or set PYTHON=/path/to/python3.11" >&2
  exit 1
fi
if ! "$PY" -c 'import sys; sys.exit(sys.version_info < (3, 11))'; then
  echo "setup: $("$PY" --version 2>&1) at $(command -v "$PY") is too old: cosim needs Python >= 3.11 (set PYTHON=...)" >&2
  exit 1
fi

# run "$@" with its output in the log; on a terminal show the last line pip
# printed (package being collected/installed), else a line every 8 s (at most ~9 s of
# silence with the 1 s poll)
LOG=.venv/setup.log
run_logged() {
  local what=$1; shift
  local start=$SECONDS
  "$@" >>"$LOG" 2>&1 &
  local pid=$! last=$SECONDS
  while kill -0 "$pid" 2>/dev/null; do
    sleep 1
    local line
    line=$(grep -E '^ *(Collecting|Downloading|Processing|Installing|Building|Using cached)' "$LOG" 2>/dev/null \
           | tail -n 1 | sed -e 's/^ *//' -e 's/ (from .*//' \
             -e 's/^Installing collected packages:.*/unpacking the downloaded packages into .venv/' | cut -c1-60 || true)
    if [ -t 1 ]; then
      printf '\r[setup %3ds]   %s ... %-60s' "$((SECONDS - T0))" "$what" "$line"
    elif [ $((SECONDS - last)) -ge 8 ]; then
      last=$SECONDS
      printf '[setup %3ds]   %s ... still running, %d packages so far; pip: %s\n' "$((SECONDS - T0))" "$what" \
        "$(grep -cE '^(Collecting|Processing)' "$LOG" 2>/dev/null || true)" "$line"
    fi
  done
  [ -t 1 ] && printf '\r%-100s\r' ''
  if ! wait "$pid"; then
    say "FAILED: $what; the last lines of $ROOT/$LOG:"
    tail -n 25 "$LOG" >&2
    exit 1
  fi
  say "$what: done in $((SECONDS - start)) s"
}

if [ ! -x .venv/bin/python ]; then
  say "creating .venv with $("$PY" --version 2>&1) ($(command -v "$PY"))"
  if ! "$PY" -m venv .venv; then
    rm -rf .venv
    echo "setup: '$PY -m venv' failed; on Debian/Ubuntu install the venv module: sudo apt install python3.11-venv" >&2
    exit 1
  fi
  : >"$LOG"
  say "created $ROOT/.venv"
fi
touch "$LOG"
stamp=.venv/.cosim-installed
if [ ! -f "$stamp" ] || [ pyproject.toml -nt "$stamp" ]; then
  run_logged "upgrading pip" .venv/bin/python -m pip install --upgrade pip
  EXTRAS=${COSIM_EXTRAS-all}
  say "installing cosim[$EXTRAS] (all = numpy, scipy, numba, fmpy, pythonfmu, libcosimpy, rclpy, pytest, ...);"
  say "  a first install of [all] downloads about 400 MB and takes 1-2 minutes"
  # the distribution was called "cosim" before it became cosim-mbs: drop that install
  if .venv/bin/python -m pip show cosim >/dev/null 2>&1; then
    run_logged "removing the former distribution name cosim" .venv/bin/python -m pip uninstall -y cosim
  fi
  run_logged "pip install -e .[$EXTRAS]" .venv/bin/python -m pip install --progress-bar off -e ".[$EXTRAS]"
  touch "$stamp"
else
  say ".venv is up to date (delete .venv/.cosim-installed to reinstall)"
fi
.venv/bin/python - "$ROOT" <<'EOF'
import importlib.metadata as md, sys
root = sys.argv[1]
def v(name):
    try:
        return md.version(name)
    except md.PackageNotFoundError:
        return "not installed"
print(f"[setup] installed: cosim {v('cosim-mbs')} (distribution cosim-mbs, editable, source {root}) in {root}/.venv")
print("[setup]   with " + ", ".join(f"{n} {v(n)}" for n in
      ("numpy", "scipy", "numba", "fmpy", "pythonfmu", "libcosimpy", "ros-rclpy", "pytest")))
print(f"[setup]   commands: {root}/.venv/bin/cosim, {root}/.venv/bin/cosim-ros "
      "(or: source .venv/bin/activate)")
EOF
# the FMU binary (fmu/native): compiled once here, so that `cosim fmu build` needs no
# compiler later (a binary shipped in the package by `python -m fmu.native prebuild` is used as is)
if .venv/bin/python -c "import fmu.native, pythonfmu" >/dev/null 2>&1; then
  say "the FMU binary for cosim fmu build (compiled once, about 10 s)"
  if out=$(.venv/bin/python -c "from fmu.native import native_library; print(native_library())" 2>&1); then
    say "  $out"
  else
    say "  not compiled now (cosim fmu build will try again): ${out##*$'\n'}"
  fi
fi
if .venv/bin/python -c "import numba" >/dev/null 2>&1; then
  say "compiling the integration methods once for this machine (first set-up: a few minutes; later: seconds)"
  # two methods at a time where there are two cores (each is its own cache file)
  jobs=$(.venv/bin/python -c "import os; print(max(1, min(2, os.cpu_count() or 1)))")
  # each line passed on as it comes (sed would hold them in its buffer when the output
  # is not a terminal: a log, a pipe)
  .venv/bin/cosim warmup --methods -j "$jobs" | while IFS= read -r line; do printf '[setup]   %s\n' "$line"; done
fi
say "set-up finished"
