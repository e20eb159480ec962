"""What ``Simulation.do_step`` adds to the compiled call, and what a new input costs.

Cases (compiled backend, h = 1 ms, one communication step = one integrator step):
two_link with generalized-α and the Panda (9 joints) with rk4, without and with
its joint stops (``position_limits``; with them ``do_step`` also screens every
step for a stop event); then bdf at rtol 1e-6 on both (a communication step is one
or a few integrator steps; a new input's history shift is made in the step's call;
``--bdf``: these cases only).  Rows, µs per step
of CPU time (``time.process_time``: on a busy machine the preemption is left out),
blocks of N steps from the same state, the rows interleaved block by block:

* ``entry``: the method's compiled entry called directly on the record (the
  compiled call: numba's dispatch and the kernel);
* ``do_step``: ``Simulation.do_step`` with the inputs held;
* ``do_step + get_outputs``: what a master does per step;
* ``set_inputs + do_step``: a new input every step (alternating two vectors);
* for rk4 also ``entry, mode 3``: the entry restarting with a new input every
  step (RESTART_THEN_ADVANCE), and the model evaluations per step of each row.

The overhead lines are the median over the repetitions of (row − entry) in the
same repetition.  The kernel's time varies from block to block by more than
``do_step`` adds on a busy machine; the last table takes the kernel out: the
method's entry replaced by a no-op of the same signature (it sets t to the
target), so that ``do_step`` runs exactly its warm path around a call that costs
numba's dispatch only.  Its rows: ``entry`` (the no-op called through numba's
dispatcher), ``do_step`` and ``set_inputs + do_step`` (the Python share of a
step, and of a new input).

    python benchmarks/do_step_overhead.py [--steps N] [--repeat R]
"""
import argparse
import os
import statistics
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import cosim  # noqa: E402

H = 1e-3


def case(label, sim, u0, n, repeat, noop=False):
    """The rows of the module docstring (``noop``: the entry a no-op, three rows)."""
    integ = sim.integrator
    K = integ._kernel
    sim.set_inputs(u0)
    for _ in range(20):
        sim.do_step(sim.time, H)
    start = sim.get_state()
    if noop:
        noop_entry(integ)
    values = [np.asarray(u0) * (1.0 + 1e-3 * k) for k in range(2)]

    def entry(mode):
        def run():
            S, I, LU, fns, u, y = integ._S, integ._I, integ._LU, integ._fns, integ._u_c, integ._y_out
            p = integ._parameters()
            t0 = float(S[K.T])
            for k in range(1, n + 1):
                integ._entry(fns, mode, S, I, LU, u, p, t0 + k * H, 1_000_000, y)
            sim._time = float(integ.t)   # the stepper's clock follows the record
        return run

    def do_step():
        t = sim.time
        for _ in range(n):
            t = sim.do_step(t, H)

    def with_outputs():
        t = sim.time
        for _ in range(n):
            t = sim.do_step(t, H)
            sim.get_outputs()

    def new_input():
        t = sim.time
        for k in range(n):
            sim.set_inputs(values[k & 1])
            t = sim.do_step(t, H)

    rows = {"entry": entry(K.WHOLE_INTERVAL), "do_step": do_step,
            "do_step + get_outputs": with_outputs, "set_inputs + do_step": new_input}
    if noop:   # (the no-op computes no outputs)
        del rows["do_step + get_outputs"]
    elif hasattr(K, "RESTART_THEN_ADVANCE") and sim.method in ("rk4", "dopri5"):
        rows["entry, mode 3 (restart, advance)"] = entry(K.RESTART_THEN_ADVANCE)
    times = {name: [] for name in rows}
    evals = {}
    for _ in range(repeat):
        for name, run in rows.items():
            sim.set_state(start)
            before = integ.stats["residual_evaluations"]
            tic = time.process_time()
            run()
            times[name].append((time.process_time() - tic) / n * 1e6)
            evals[name] = (integ.stats["residual_evaluations"] - before) / n
    print(f"{label}")
    for name, t in times.items():
        extra = ""
        if name != "entry":
            d = statistics.median(a - b for a, b in zip(t, times["entry"]))
            extra = f"   over the entry {d:+6.2f}"
        extra += "" if noop else f"   {evals[name]:4.1f} evaluations/step"
        print(f"  {name:36s} {statistics.median(t):7.2f} µs (min {min(t):6.2f}){extra}", flush=True)


def noop_entry(integ):
    """Replace ``integ``'s compiled entry by a no-op of its signature (t := target)."""
    import numba

    T = integ._kernel.T

    @numba.njit
    def noop(fns, mode, S, I, LU, u, p, t_target, max_steps, y_out):
        S[T] = t_target
        return 0
    noop.compile(integ._entry.signatures[0])
    integ._entry = noop
    if getattr(integ, "_direct", None) is not None:   # the warm path's direct call
        from cosim.integrators.record import direct_entry
        integ._direct = direct_entry(noop)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--steps", type=int, default=1000)
    ap.add_argument("--repeat", type=int, default=31)
    ap.add_argument("--bdf", action="store_true", help="only the BDF cases")
    args = ap.parse_args(argv)
    print(f"CPU µs per 1 ms step, median of {args.repeat} interleaved blocks of {args.steps} steps")
    from cosim.models.urdf import example_robot_path, load_urdf
    if not args.bdf:
        main_cases(args, load_urdf, example_robot_path)
    # BDF (adaptive, rtol 1e-6: a communication step is one or a few integrator steps; a new
    # input shifts the history in the same compiled call)
    sim = cosim.Simulation(model="two_link", method="bdf", rtol=1e-6, atol=1e-8, backend="numba")
    case("two_link, bdf, rtol 1e-6", sim, [0.1, -0.05], args.steps, args.repeat)
    for limits, what in ((False, "position_limits=False"), (True, "its joint stops on (default)")):
        sim = cosim.Simulation(load_urdf(example_robot_path(), position_limits=limits), method="bdf",
                               rtol=1e-6, atol=1e-8, backend="numba")
        case(f"Panda (9 joints), bdf, rtol 1e-6, {what}", sim, np.full(sim.model.n_inputs, 0.1),
             args.steps, args.repeat)
    sim = cosim.Simulation(model="two_link", method="bdf", rtol=1e-6, atol=1e-8, backend="numba")
    case("two_link, bdf, the entry a no-op", sim, [0.1, -0.05], args.steps, args.repeat, noop=True)


def main_cases(args, load_urdf, example_robot_path):
    sim = cosim.Simulation(model="two_link", method="generalized-alpha", h=H, backend="numba")
    case("two_link, generalized-alpha, h = 1 ms", sim, [0.1, -0.05], args.steps, args.repeat)
    for limits, what in ((False, "position_limits=False"), (True, "its joint stops on (default)")):
        sim = cosim.Simulation(load_urdf(example_robot_path(), position_limits=limits), method="rk4",
                               h=H, backend="numba")
        case(f"Panda (9 joints), rk4, h = 1 ms, {what}", sim, np.full(sim.model.n_inputs, 0.1),
             args.steps, args.repeat)
    print("The Python share: the same steps with the method's entry a no-op of its signature")
    sim = cosim.Simulation(model="two_link", method="generalized-alpha", h=H, backend="numba")
    case("two_link, generalized-alpha, the entry a no-op", sim, [0.1, -0.05], args.steps,
         args.repeat, noop=True)
    sim = cosim.Simulation(load_urdf(example_robot_path(), position_limits=False), method="rk4",
                           h=H, backend="numba")
    case("Panda (9 joints), rk4, position_limits=False, the entry a no-op", sim,
         np.full(sim.model.n_inputs, 0.1), args.steps, args.repeat, noop=True)


if __name__ == "__main__":
    main()
