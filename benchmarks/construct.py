"""Where the seconds of a warm start go: constructing a ``Simulation`` and a short
``cosim simulate`` run with every compiled kernel already in the disk cache.

Each figure is the smallest of ``--repeat`` fresh processes (wall seconds), so
that a busy machine inflates it as little as possible:

* ``import cosim``; then, on top of numpy, ``import numba`` and ``import scipy.linalg``
  (what the first compiled or Python integrator pulls in);
* ``cosim.Simulation(model, method)`` after ``import cosim``, on the compiled backend
  (``auto``: loads numba, initialises its typing context, loads the cached method and
  model entries) and on the Python backend;
* ``Simulation.derivative_report`` (on the compiled backend it compiles probe kernels);
  ``cosim simulate`` computes it only with ``--verbose``;
* the whole command ``cosim simulate MODEL --t-end 1``, and with ``--verbose``.

    python benchmarks/construct.py [--model pendulum] [--method generalized-alpha] [--repeat 5]

Run it once before measuring (the first run may compile and fill the cache).
"""
import argparse
import os
import subprocess
import sys
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

SNIPPET = """
import time
{pre}
t0 = time.perf_counter()
{code}
print(time.perf_counter() - t0)
"""


def timed(pre, code, env):
    out = subprocess.run([sys.executable, "-c", SNIPPET.format(pre=pre, code=code)], env=env,
                         capture_output=True, text=True, check=True).stdout
    return float(out.split()[-1])


def wall(argv, env):
    t0 = time.perf_counter()
    subprocess.run(argv, env=env, capture_output=True, check=True)
    return time.perf_counter() - t0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default="pendulum")
    ap.add_argument("--method", default="generalized-alpha")
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (REPO, env.get("PYTHONPATH")) if p)
    sim = f"cosim.Simulation(model={args.model!r}, method={args.method!r}, rtol=1e-6{{}})"
    rows = [
        ("import cosim", lambda: timed("", "import cosim", env)),
        ("import numba (after numpy)", lambda: timed("import numpy", "import numba", env)),
        ("import scipy.linalg (after numpy)", lambda: timed("import numpy", "import scipy.linalg", env)),
        (f"Simulation({args.model}, {args.method}), backend auto",
         lambda: timed("import cosim", sim.format(""), env)),
        (f"Simulation({args.model}, {args.method}), backend python",
         lambda: timed("import cosim", sim.format(", backend='python'"), env)),
        ("derivative report of that Simulation (backend auto)",
         lambda: timed("import cosim; s = " + sim.format(""), "s.derivative_report", env)),
        (f"cosim simulate {args.model} --t-end 1 (whole command)",
         lambda: wall([sys.executable, "-m", "cosim", "simulate", args.model, "--method", args.method,
                       "--t-end", "1"], env)),
        (f"cosim simulate {args.model} --t-end 1 --verbose",
         lambda: wall([sys.executable, "-m", "cosim", "simulate", args.model, "--method", args.method,
                       "--t-end", "1", "--verbose"], env)),
    ]
    print(f"warm start, smallest of {args.repeat} fresh processes [s]")
    for label, fn in rows:
        values = [fn() for _ in range(args.repeat)]
        print(f"  {label:<58s} {min(values):6.2f}   (median {sorted(values)[len(values) // 2]:.2f})",
              flush=True)


if __name__ == "__main__":
    main()
