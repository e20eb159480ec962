"""Where the time of one ``Simulation.do_step`` goes for a robot at 1 kHz.

The Panda from ``example-robot-data`` (9 joints, the finger mimic constraint),
compiled backend, h = 1 ms, one communication step per integrator step.  Rows
(µs per 1 ms step, median of 5 blocks of N steps, each block from the same state
at t = 1 ms: the cost depends on the state):

* ``do_step``, input held (the stepper's fast path);
* the integrator's own entry (``integrator._advance_checked``): what do_step calls;
* one ``do_step`` covering 50 steps, divided by 50 (the compiled loop alone);
* ``set_inputs`` (a new effort vector) + ``do_step``: a restart per step;
* ``set_inputs`` alone, and ``integrator.restart()`` + advance;
* the cost of one ``do_step`` covering k = 1, 2, 5, 20, 50 steps, fitted as
  a + b·k: a is the per-call cost (Python wrapper, numba's dispatch and the
  compiled entry's work per call), b the cost of one step inside the loop;
* the compiled entry called for a zero-length interval (its dispatch and fixed
  cost) and an empty numba function of the same ten arguments (dispatch alone).

Then a cProfile of ``set_inputs`` + ``do_step`` (the Python functions that take
the time; the compiled call is one line).

    python benchmarks/robot_overhead.py [--method rk4] [--steps N]
"""
import argparse
import cProfile
import io
import os
import pstats
import statistics
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from cosim import Simulation  # noqa: E402
from cosim.models.urdf import example_robot_path, load_urdf  # noqa: E402

H = 1e-3


def per_step(fn, n, blocks=5, reset=None):
    out = []
    for _ in range(blocks):
        if reset is not None:
            reset()
        t0 = time.perf_counter()
        fn(n)
        out.append((time.perf_counter() - t0) / n * 1e6)
    return statistics.median(out)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--method", default="rk4")
    ap.add_argument("--steps", type=int, default=2000)
    args = ap.parse_args(argv)
    cls = load_urdf(example_robot_path())
    opts = dict(method=args.method, backend="numba")
    if args.method == "dopri5":
        opts.update(rtol=1e-8, atol=1e-10)
    else:
        opts.update(h=H)
    print(f"Panda (9 joints), {args.method}, compiled, h = 1 ms; compiling/warming up ...",
          flush=True)
    sim = Simulation(cls, **opts)
    n_u = sim.model.n_inputs
    u = np.full(n_u, 0.1)
    sim.set_inputs(u)
    sim.do_step(0.0, H)
    integ = sim.integrator
    start = sim.get_state()  # every block starts here (the cost depends on the state)

    def reset():
        sim.set_state(start)

    def held(n):
        t = sim.time
        for _ in range(n):
            t = sim.do_step(t, H)

    def bare(n):
        t = integ.t
        for _ in range(n):
            t += H
            integ._advance_checked(t)
        sim._time = float(integ.t)  # keep the stepper's clock with the integrator

    def long_call(n):
        sim.do_step(sim.time, 50 * H)

    values = [u * (1.0 + 1e-3 * k) for k in range(2)]

    def new_input(n):
        t = sim.time
        for k in range(n):
            sim.set_inputs(values[k & 1])
            t = sim.do_step(t, H)

    def inputs_only(n):
        for k in range(n):
            sim.set_inputs(values[k & 1])

    def restart_advance(n):
        t = integ.t
        for _ in range(n):
            integ.restart()
            t += H
            integ._advance_checked(t)
        sim._time = float(integ.t)

    n = args.steps
    rows = [("do_step, input held", per_step(held, n, reset=reset)),
            ("integrator._advance_checked alone", per_step(bare, n, reset=reset)),
            ("one do_step over 50 steps, / 50", per_step(long_call, 1, reset=reset) / 50),
            ("set_inputs (new effort) + do_step", per_step(new_input, n, reset=reset)),
            ("set_inputs alone (new effort)", per_step(inputs_only, n, reset=reset)),
            ("integrator.restart() + _advance_checked", per_step(restart_advance, n, reset=reset))]
    for name, us in rows:
        print(f"  {name:42s} {us:7.2f} µs", flush=True)
    ks = (1, 2, 5, 20, 50)
    costs = []
    for k in ks:
        def calls(m, k=k):
            t = sim.time
            for _ in range(m):
                t = sim.do_step(t, k * H)
        costs.append(per_step(calls, max(20, n // k), reset=reset))
    b, a = np.polyfit(ks, costs, 1)
    print(f"  do_step over k steps: {', '.join(f'k={k}: {c:.1f}' for k, c in zip(ks, costs))} µs "
          f"per call -> {a:.1f} µs per call + {b:.1f} µs per step", flush=True)
    import numba
    reset()
    K, S, I, LU = integ._kernel, integ._S, integ._I, integ._LU
    args = (integ._fns, K.WHOLE_INTERVAL, S, I, LU, integ._u_c, integ._parameters(), float(S[K.T]),
            100, integ._y_out)

    @numba.njit
    def empty(fns, mode, S, I, LU, u, p, t, n, y):
        return 0

    empty(*args)
    zero = per_step(lambda m: [integ._entry(*args) for _ in range(m)], n)
    dispatch = per_step(lambda m: [empty(*args) for _ in range(m)], n)
    print(f"  compiled entry, zero-length interval {zero:7.2f} µs; empty njit, same arguments "
          f"{dispatch:7.2f} µs", flush=True)
    reset()
    prof = cProfile.Profile()
    prof.enable()
    new_input(n)
    prof.disable()
    s = io.StringIO()
    pstats.Stats(prof, stream=s).sort_stats("tottime").print_stats(12)
    print(f"cProfile of {n} × (set_inputs + do_step), by own time:")
    print("\n".join(s.getvalue().splitlines()[:30]))


if __name__ == "__main__":
    main()
