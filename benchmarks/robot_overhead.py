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

``--stops``: only the cost of the position-limit stops (on by default): the
same robot with its stops and with ``position_limits=False``, interleaved, CPU
time of this thread per ``do_step`` (median of 9 blocks of N/4 steps, each from
the same state), in three cases: at rest away from every limit (efforts equal
to the gravity torques, held), a PD loop about that pose (a new effort every
step), and the fingers resting on their stops (a closing effort on them: the
stops hold, their reactions checked after every step).  Then the event steps: every
joint driven by 0.1 N·m held for 3 s from rest (the arm and the fingers arrive at
their stops: bounces, holds, a sequence of ever shorter bounces), the 3 s run 5 times
from the same state: per communication step the least CPU time of the 5, and the
median over the steps with an event and over those without (with the stops off, the
same run has no event).

    python benchmarks/robot_overhead.py [--method rk4] [--steps N] [--stops]
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


def stops_cost(method, steps):
    """The --stops table (module docstring)."""
    print(f"Panda (9 joints), {method}, compiled, h = 1 ms: stops on (default) against "
          f"position_limits=False, CPU µs per do_step; compiling/warming up ...", flush=True)
    opts = dict(method=method, backend="numba", h=H)

    def make(limits, fingers):
        sim = Simulation(load_urdf(example_robot_path(), position_limits=limits), **opts)
        m = sim.model
        q0, v0 = m.initial_state()
        u = -m._free_forces(q0, v0, np.zeros(m.n_inputs))  # the gravity torques: at rest
        u[7:] += fingers
        sim.set_inputs(u)
        sim.do_step(0.0, H)
        if fingers:  # onto the stops first
            while sim.time < 0.3:
                sim.do_step(sim.time, H)
        return sim, sim.get_state(), u

    def held(sim, u, n):
        t = sim.time
        for _ in range(n):
            t = sim.do_step(t, H)

    def pd(sim, u, n):
        t, nq = sim.time, sim.model.n_q
        q_ref = sim.y[:nq]
        for _ in range(n):
            y = sim.y
            sim.set_inputs(u + 100.0 * (q_ref - y[:nq]) - 10.0 * y[nq:])
            t = sim.do_step(t, H)

    cases = [("at rest away from the limits, effort held", 0.0, held),
             ("PD loop away from the limits, new effort each step", 0.0, pd),
             ("fingers held on their stops, effort held", 5.0, held)]
    n = max(50, steps // 4)
    for name, fingers, run in cases:
        sims = {lim: make(lim, fingers) for lim in (False, True)}
        cost = {False: [], True: []}
        for _ in range(9):
            for lim in (False, True):
                sim, start, u = sims[lim]
                sim.set_state(start)
                t0 = time.thread_time()
                run(sim, u, n)
                cost[lim].append((time.thread_time() - t0) / n * 1e6)
        off, on = statistics.median(cost[False]), statistics.median(cost[True])
        events = sims[True][0].stats["events"]
        print(f"  {name:52s} off {off:6.2f}  on {on:6.2f} µs  on/off {on / off:5.3f}  "
              f"(events with stops: {events})", flush=True)
    event_steps(opts)


def event_steps(opts, seconds=3.0, rounds=5):
    """The event-step rows of --stops (module docstring)."""
    n = int(round(seconds / H))
    cost = {}
    for limits in (False, True):
        sim = Simulation(load_urdf(example_robot_path(), position_limits=limits), **opts)
        sim.set_inputs(np.full(sim.model.n_inputs, 0.1))
        sim.do_step(0.0, H)
        start = sim.get_state()
        best, events = np.full(n, np.inf), np.zeros(n, dtype=int)
        for _ in range(rounds):
            sim.set_state(start)
            t = sim.time
            for k in range(n):
                before = sim.stats["events"]
                t0 = time.thread_time()
                t = sim.do_step(t, H)
                best[k] = min(best[k], time.thread_time() - t0)
                events[k] = sim.stats["events"] - before
        cost[limits] = (best * 1e6, events)
    off, _ = cost[False]
    on, events = cost[True]
    plain, hit = np.median(on[events == 0]), on[events > 0]
    name = f"0.1 N·m held on every joint, {seconds:g} s, mean per step"
    print(f"  {name:52s} off {off.mean():6.2f}  on {on.mean():6.2f} µs  on/off "
          f"{on.mean() / off.mean():5.3f}  (events with stops: {events.sum()})", flush=True)
    if len(hit):
        print(f"    with stops: a step without an event {plain:.1f} µs; the {len(hit)} steps with "
              f"events: median {np.median(hit):.0f} µs (min {hit.min():.0f}, max {hit.max():.0f}), "
              f"{np.median(hit) / plain:.1f} × a step without", flush=True)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--method", default="rk4")
    ap.add_argument("--steps", type=int, default=2000)
    ap.add_argument("--stops", action="store_true",
                    help="only the stops' cost: on (default) against position_limits=False")
    args = ap.parse_args(argv)
    if args.stops:
        stops_cost(args.method, args.steps)
        return
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
