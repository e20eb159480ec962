"""How long a fresh process takes to import cosim, construct a ``Simulation`` and make
its first communication step, with every compiled method and model kernel already in
the disk cache (a warm start).

Each case runs in ``--repeat`` fresh Python processes (the cases interleaved, so a
busy machine slows them alike); the table gives the median wall seconds of each
phase and, in brackets, the median CPU seconds of the process (less sensitive to other
load on the machine).  "construct" is ``cosim.Simulation(...)``; "first step" is one
``do_step`` of 10 ms right after it — a cost moved out of the constructor into the
first step shows up there.  Child processes may write Python's bytecode cache
(``PYTHONDONTWRITEBYTECODE`` is dropped for them), as an installed package has it.

    python benchmarks/construct_time.py [--repeat 7] [--cases two_link,andrews_bdf] [--breakdown]
                                        [--source DIR]

``--breakdown`` adds a table that splits the construct's CPU time into ``import numba``
(imported by the first compiled ``Simulation``), loading the method's and the model's
machine code from numba's cache,
the first call of the loaded code (numba types its arguments: ~25 ms of it is numba
importing ``numpy.ma`` to rule out a masked array) and the rest (the initial-condition
analysis, generating and importing the cached modules, setting the model up), and says
whether the construct imported pinocchio (a URDF robot on a warm cache does not); ``--source``
times another checkout of cosim, e.g. to compare two versions.

Run it once before measuring: the first run of a case may compile and fill the cache.
The Panda case needs the robots extra (pinocchio, example-robot-data) and is left out
without it.
"""
import argparse
import os
import statistics
import subprocess
import sys
import tempfile

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

CHILD = """
import time, sys
T, C = time.perf_counter, time.process_time
t0, c0 = T(), C()
import cosim
t1, c1 = T(), C()
s = cosim.Simulation({args})
t2, c2 = T(), C()
s.do_step(0.0, 0.01)
t3, c3 = T(), C()
print("TIMES", t1 - t0, t2 - t1, t3 - t2, c1 - c0, c2 - c1, c3 - c2)
"""

# --breakdown: the construct split into what it imports first, loading the machine code,
# its first call and the rest (CPU s)
CHILD_BREAKDOWN = """
import time
C = time.process_time
import cosim
c0 = C()
import numba
c1 = C()
from numba.core.dispatcher import Dispatcher
from cosim.integrators.record import RecordIntegrator
spent = {{"load": 0.0, "call": 0.0}}
def timed(fn, key):
    def run(*a, **k):
        t = C()
        try:
            return fn(*a, **k)
        finally:
            spent[key] += C() - t
    return run
Dispatcher.compile = timed(Dispatcher.compile, "load")
RecordIntegrator._load_machine_code = timed(RecordIntegrator._load_machine_code, "call")
c3 = C()
s = cosim.Simulation({args})
c4 = C()
import sys
print("TIMES", c1 - c0, spent["load"], spent["call"], c4 - c3 - spent["load"] - spent["call"],
      float("pinocchio" in sys.modules))
"""

CASES = {
    "two_link": ("two_link, default method (dopri5)", "model='two_link'"),
    "two_link_ga": ("two_link, generalized-alpha", "model='two_link', method='generalized-alpha'"),
    "andrews_bdf": ("andrews, bdf", "model='andrews', method='bdf'"),
    "panda_rk4": ("Panda URDF (example-robot-data), rk4, h = 1 ms",
                  "model={panda!r}, method='rk4', h=1e-3"),
}


def child_env(source):
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPATH"] = os.pathsep.join(p for p in (source, env.get("PYTHONPATH")) if p)
    return env


def panda_path(env):
    """The Panda URDF path, or None without the robots extra."""
    with tempfile.TemporaryDirectory(prefix="cosim-construct-") as cwd:
        out = subprocess.run([sys.executable, "-c", "from cosim.models.urdf import example_robot_path; "
                              "print(example_robot_path())"], env=env, cwd=cwd, capture_output=True,
                             text=True)
    return out.stdout.strip() if out.returncode == 0 else None


def run_case(args, env, child=CHILD):
    # from an empty folder: ``python -c`` puts the working directory first on sys.path,
    # which would shadow the PYTHONPATH checkout when run from another checkout
    with tempfile.TemporaryDirectory(prefix="cosim-construct-") as cwd:
        code = child.format(args=args)
        out = subprocess.run([sys.executable, "-c", code], env=env, cwd=cwd,
                             capture_output=True, text=True)
    if out.returncode != 0:
        raise RuntimeError(f"Simulation({args}) failed:\n{out.stderr[-2000:]}")
    line = next(ln for ln in out.stdout.splitlines() if ln.startswith("TIMES"))
    return [float(x) for x in line.split()[1:]]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeat", type=int, default=7, help="fresh processes per case (default 7)")
    ap.add_argument("--cases", default=",".join(CASES), help=f"comma-separated, of {', '.join(CASES)}")
    ap.add_argument("--breakdown", action="store_true",
                    help="also split the construct's CPU time: import numba, loading the machine "
                         "code, its first call, the rest")
    ap.add_argument("--source", default=REPO,
                    help="the cosim checkout to time (default: the one holding this script)")
    args = ap.parse_args()
    env = child_env(os.path.abspath(args.source))
    names = [c.strip() for c in args.cases.split(",") if c.strip()]
    unknown = [c for c in names if c not in CASES]
    if unknown:
        ap.error(f"unknown case(s) {', '.join(unknown)}; known: {', '.join(CASES)}")
    fmt = {}
    if "panda_rk4" in names:
        fmt["panda"] = panda_path(env)
        if fmt["panda"] is None:
            print("(Panda case left out: the robots extra is not installed)")
            names.remove("panda_rk4")
    calls = {c: CASES[c][1].format(**fmt) for c in names}
    for c in names:   # one run each first: compiles (or loads) anything not yet cached
        run_case(calls[c], env)
    samples = {c: [] for c in names}
    for _ in range(args.repeat):
        for c in names:
            samples[c].append(run_case(calls[c], env))
    print(f"warm start, median of {args.repeat} fresh processes: wall s (CPU s)")
    head = f"{'case':<48s} {'import cosim':>14s} {'construct':>14s} {'first step':>14s} {'total':>14s}"
    print(head)
    print("-" * len(head))
    for c in names:
        rows = samples[c]
        med = [statistics.median(r[k] for r in rows) for k in range(6)]
        tot_wall = statistics.median(r[0] + r[1] + r[2] for r in rows)
        tot_cpu = statistics.median(r[3] + r[4] + r[5] for r in rows)
        cells = [f"{med[k]:.2f} ({med[k + 3]:.2f})" for k in range(3)] + [f"{tot_wall:.2f} ({tot_cpu:.2f})"]
        print(f"{CASES[c][0]:<48s} " + " ".join(f"{x:>14s}" for x in cells), flush=True)
    if args.breakdown:
        parts = {c: [] for c in names}
        for _ in range(args.repeat):
            for c in names:
                parts[c].append(run_case(calls[c], env, CHILD_BREAKDOWN))
        print(f"\nconstruct, CPU s, median of {args.repeat}: importing numba, loading the "
              f"method's and the model's machine code from the cache, its first call, the rest "
              f"(IC analysis, generated modules, the model); whether it imported pinocchio")
        head = (f"{'case':<48s} {'import numba':>14s} {'load code':>14s} {'first call':>14s} "
                f"{'the rest':>14s} {'pinocchio':>10s}")
        print(head)
        print("-" * len(head))
        for c in names:
            med = [statistics.median(r[k] for r in parts[c]) for k in range(4)]
            pin = "yes" if any(r[4] for r in parts[c]) else "no"
            print(f"{CASES[c][0]:<48s} " + " ".join(f"{x:>14.2f}" for x in med) + f" {pin:>10s}",
                  flush=True)


if __name__ == "__main__":
    main()
