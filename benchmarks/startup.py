"""Cold and warm start of a whole command-line run (issue 13 item 5): the wall
time of ``cosim simulate MODEL`` as a new process

* cold: an empty compile cache (``COSIM_CACHE_DIR`` = a fresh folder): numba
  compiles the model's entry and caches it;
* warm: the same cache again (numba loads the machine code);
* python: ``--backend python`` (no numba at all), for reference.

    python benchmarks/startup.py [--model andrews] [--method generalized-alpha] [--t-end 0.03]
"""
import argparse
import os
import subprocess
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def run(args, env):
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "cosim.cli", "simulate", *args], env=env,
                          capture_output=True, text=True, cwd=REPO)
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        raise SystemExit(f"cosim simulate {' '.join(args)} failed:\n{proc.stderr}")
    return wall, "compiling kernels" in proc.stderr


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="andrews")
    parser.add_argument("--method", default="generalized-alpha")
    parser.add_argument("--t-end", default="0.03")
    parser.add_argument("--repeat", type=int, default=3, help="warm runs (median printed)")
    a = parser.parse_args(argv)
    args = [a.model, "--method", a.method, "--t-end", a.t_end, "--json"]
    env = dict(os.environ, PYTHONPATH=REPO + os.pathsep + os.environ.get("PYTHONPATH", ""))
    print(f"cosim simulate {' '.join(args)} as a new process (wall s, load {os.getloadavg()[0]:.1f})")
    with tempfile.TemporaryDirectory() as cache:
        env["COSIM_CACHE_DIR"] = cache
        cold, compiled = run([*args, "--backend", "numba"], env)
        print(f"  cold (empty cache, compiles: {compiled}): {cold:7.2f}")
        warm = sorted(run([*args, "--backend", "numba"], env)[0] for _ in range(a.repeat))
        print(f"  warm (cached machine code):          {warm[len(warm) // 2]:7.2f}   (min {warm[0]:.2f})")
    py = sorted(run([*args, "--backend", "python"], env)[0] for _ in range(a.repeat))
    print(f"  python backend:                      {py[len(py) // 2]:7.2f}   (min {py[0]:.2f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
