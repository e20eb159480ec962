"""CPU µs per step of every compiled method, through its compiled entry and through
``Simulation.do_step``, one communication step of 1 ms per call; with ``--tree`` two
copies of cosim A/B (a change to the kernels or to how they are compiled).

Cases (compiled backend): two_link with generalized-alpha, generalized-alpha-i2,
rk4, spark, local-index1 and block-lstable at h = 1 ms, with bdf and dopri5 at
rtol 1e-6 (atol 1e-8), and the pendulum with rkc-penalty (penalty 1e4) at
h = 1 ms; inputs held.  Each case runs in a fresh process (each tree's cosim
imported through ``PYTHONPATH``; its methods compiled or loaded from the cache
first), 21 blocks of 2000 steps, timed with ``time.process_time`` (on a busy
machine the preemption is left out).  Rows: the median block (and the lowest);
with two trees, old and new alternate case by case and their order flips every
round.

    python benchmarks/step_time.py [--methods bdf spark] [--rounds 1]
    python benchmarks/step_time.py --tree OLD_WORKTREE --tree NEW_WORKTREE [--rounds 3]
"""
import argparse
import os
import statistics
import subprocess
import sys

CASES = {
    "generalized-alpha": dict(model="two_link", h=1e-3),
    "generalized-alpha-i2": dict(model="two_link", h=1e-3),
    "rk4": dict(model="two_link", h=1e-3),
    "dopri5": dict(model="two_link", rtol=1e-6, atol=1e-8),
    "bdf": dict(model="two_link", rtol=1e-6, atol=1e-8),
    "spark": dict(model="two_link", h=1e-3),
    "local-index1": dict(model="two_link", h=1e-3),
    "block-lstable": dict(model="two_link", h=1e-3),
    "rkc-penalty": dict(model="pendulum", h=1e-3, method_options={"penalty": 1e4}),
}

CHILD = r'''
import ast, statistics, sys, time
import cosim
method, kw, blocks, n = sys.argv[1], ast.literal_eval(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
H = 1e-3
sim = cosim.Simulation(method=method, backend="numba", **kw)
integ = sim.integrator
K = integ._kernel
for _ in range(50):
    sim.do_step(sim.time, H)
S, I, LU, fns, u, y = integ._S, integ._I, integ._LU, integ._fns, integ._u_c, integ._y_out
p, entry = integ._parameters(), integ._entry


def through_entry():
    t0 = float(S[K.T])
    tic = time.process_time()
    for k in range(1, n + 1):
        entry(fns, K.WHOLE_INTERVAL, S, I, LU, u, p, t0 + k * H, 1_000_000, y)
    sim._time = float(integ.t)   # the stepper's clock follows the record
    return (time.process_time() - tic) / n * 1e6


def through_do_step():
    t = sim.time
    tic = time.process_time()
    for _ in range(n):
        t = sim.do_step(t, H)
    return (time.process_time() - tic) / n * 1e6


a, b = [], []
for _ in range(blocks):   # interleaved block by block
    a.append(through_entry())
    b.append(through_do_step())
print(statistics.median(a), min(a), statistics.median(b), min(b))
'''


def run(tree, method, blocks, n):
    """(entry median, min, do_step median, min) in µs of ``method``'s case, cosim from ``tree``."""
    env = dict(os.environ)
    if tree:
        env["PYTHONPATH"] = os.path.abspath(tree)
    # (run in the tree: ``python -c`` puts the working folder before PYTHONPATH)
    out = subprocess.run([sys.executable, "-c", CHILD, method, repr(CASES[method]), str(blocks), str(n)],
                         env=env, cwd=os.path.abspath(tree) if tree else None, capture_output=True,
                         text=True, check=False)
    if out.returncode != 0:
        raise SystemExit(f"{method} ({tree or 'this cosim'}) failed:\n{out.stderr[-2000:]}")
    return tuple(float(x) for x in out.stdout.split()[-4:])


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--methods", nargs="+", default=list(CASES), choices=list(CASES))
    ap.add_argument("--tree", action="append", default=[], help="a worktree (twice: old, new)")
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--blocks", type=int, default=21)
    ap.add_argument("--steps", type=int, default=2000)
    args = ap.parse_args(argv)
    trees = args.tree or [""]
    if len(trees) > 2:
        ap.error("at most two --tree")
    print(f"CPU µs per 1 ms step, median (lowest) of {args.blocks} blocks of {args.steps} steps, "
          f"{args.rounds} round(s)", flush=True)
    names = [os.path.basename(os.path.abspath(t)) if t else "this" for t in trees]
    results = {(m, t): [] for m in args.methods for t in range(len(trees))}
    for r in range(args.rounds):
        for m in args.methods:
            order = range(len(trees)) if r % 2 == 0 else reversed(range(len(trees)))
            for t in order:
                results[m, t].append(run(trees[t], m, args.blocks, args.steps))
    print(f"{'method':22s} {'tree':>10s} {'entry':>16s} {'do_step':>16s}")
    for m in args.methods:
        for t in range(len(trees)):
            rows = results[m, t]
            e = statistics.median(x[0] for x in rows)
            emin = min(x[1] for x in rows)
            d = statistics.median(x[2] for x in rows)
            dmin = min(x[3] for x in rows)
            print(f"{m:22s} {names[t]:>10s} {e:8.2f} ({emin:5.2f}) {d:8.2f} ({dmin:5.2f})", flush=True)


if __name__ == "__main__":
    main()
