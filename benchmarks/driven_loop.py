"""Cost and accuracy of a driven run: a new input at every 1 ms communication step
(an FMU host, the ROS node, a discrete controller), 0.5 s (Andrews: 0.03 s), per method.

This is the measurement behind the default rule's driven choice (cosim.method_choice:
dopri5).  bdf keeps its order and step across a new input (its history moved onto
the new input's past: four solves of eq. 10, docs/methods/bdf.md); a one-step
method restarts at no cost, and dopri5 (order 5, FSAL reset only) takes about one
step per communication step where generalized-alpha
(order 2, an error test on h^2) needs more, and far more on a model with fast
components (Andrews).

Prints per model and method: steps, residual (RHS) evaluations, wall seconds of
the communication steps (Simulation, backend ``--backend``; a first
communication step of a throwaway simulation beforehand loads the compiled
kernels), and the error: max over the communication points of
max_k |q_k − q_ref,k| / max(1, |q_ref,k|) against the same driven run with rk4 at
a fixed step of 1e-5 s (none of the methods compared), whose distance to dopri5 at
rtol 1e-12, atol 1e-14 is printed with it.  The input is 0.1·sin(10 t) on
the model's first input, new at every communication step.  Models: library
names, or ur5 / panda (example-robot-data URDFs) and three_link_urdf (the
planar arm benchmarks/three_link.urdf).  A run over ``--budget`` seconds is
stopped and printed "budget".

    python benchmarks/driven_loop.py [--models pendulum two_link ur5] [--backend auto]
    python benchmarks/driven_loop.py --models pendulum two_link crank_slider andrews ur5 panda \
        --backend auto --rtols 1e-4 1e-6 1e-8 --repeat 3     # docs/methods/index.md
"""
import argparse
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from cosim import Simulation  # noqa: E402
from cosim.method_choice import default_method  # noqa: E402

DT = 1e-3
# 0.5 s, but Andrews its usual 0.03 s: by 0.5 s the motor has spun the crank up to
# ~2200 rad, where references at rtol 1e-10 and 1e-12 differ by 1e-4
T_END = {"andrews": 0.03}


class _Budget(Exception):
    pass


def driven_run(model, method, backend, rtol, atol, budget=None, warm=True, h=None):
    """(steps, residual evaluations, wall seconds, q at every communication point)."""
    from work_precision import any_model

    def make():
        return Simulation(any_model(model), method=method, backend=backend, rtol=rtol,
                          atol=atol, h=h)
    if warm:   # load the compiled kernels outside the timed loop
        make().do_step(0.0, DT)
    sim = make()
    names = sim.model.input_names
    qs = []
    t0, t = time.perf_counter(), 0.0
    for k in range(round(T_END.get(model, 0.5) / DT)):
        if names:
            sim.set_inputs({names[0]: 0.1 * np.sin(10 * t)})
        sim.do_step(t, DT)
        t = (k + 1) * DT
        qs.append(np.array(sim.integrator.q, dtype=float))
        if budget is not None and time.perf_counter() - t0 > budget:
            raise _Budget(sim.stats["steps"])
    wall = time.perf_counter() - t0
    st = sim.stats
    return st["steps"], st["residual_evaluations"], wall, np.array(qs)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--models", nargs="+", default=["pendulum", "two_link"])
    p.add_argument("--methods", nargs="+", default=["generalized-alpha", "bdf", "dopri5"])
    p.add_argument("--backend", choices=("python", "numba", "auto"), default="python")
    p.add_argument("--rtols", nargs="+", type=float, default=[1e-6])
    p.add_argument("--repeat", type=int, default=1,
                   help="runs per method, interleaved; wall: the least (default 1)")
    p.add_argument("--budget", type=float, default=120.0, help="seconds per run (default 120)")
    args = p.parse_args(argv)
    print(f"0.5 s (andrews 0.03 s) in 1 ms communication steps, new input each, atol = rtol/100, "
          f"backend {args.backend}, wall: least of {args.repeat}; error against rk4 at h = 1e-5")
    print(f"{'model':14s} {'rtol':>6s} {'method':18s} {'steps':>8s} {'res':>8s} {'wall[s]':>8s} "
          f"{'error':>9s}   driven default")
    from work_precision import any_model
    for model in args.models:
        # the reference: rk4 at a fixed step of 1e-5 s (none of the methods compared),
        # checked against dopri5 at rtol 1e-12
        ref = driven_run(model, "rk4", args.backend, 1e-6, 1e-8, warm=False, h=1e-5)[3]
        check_steps, _, _, check = driven_run(model, "dopri5", args.backend, 1e-12, 1e-14,
                                              warm=False)
        ref_err = float(np.max(np.abs(check - ref) / np.maximum(1.0, np.abs(ref))))
        print(f"{model}: reference rk4 h = 1e-5; dopri5 at rtol 1e-12 ({check_steps} steps) "
              f"is {ref_err:.1e} from it", flush=True)
        chosen = default_method(any_model(model), driven=True)
        for rtol in args.rtols:
            rows = {}
            for rep in range(args.repeat):
                for method in args.methods:
                    if rows.get(method, ()) is None:
                        continue   # over the budget once
                    try:
                        steps, res, wall, qs = driven_run(model, method, args.backend, rtol,
                                                          rtol / 100, budget=args.budget,
                                                          warm=rep == 0)
                    except _Budget as b:
                        print(f"{model:14s} {rtol:6.0e} {method:18s} {'budget':>8s} "
                              f"({b.args[0]} steps in {args.budget:g} s)", flush=True)
                        rows[method] = None
                        continue
                    err = float(np.max(np.abs(qs - ref) / np.maximum(1.0, np.abs(ref))))
                    if method in rows:
                        assert rows[method][:2] == (steps, res), (model, method, "not repeatable")
                        wall = min(wall, rows[method][2])
                    rows[method] = (steps, res, wall, err)
            for method, row in rows.items():
                if row is not None:
                    steps, res, wall, err = row
                    mark = "  <- default" if method == chosen else ""
                    print(f"{model:14s} {rtol:6.0e} {method:18s} {steps:8d} {res:8d} {wall:8.3f} "
                          f"{err:9.2e}{mark}", flush=True)


if __name__ == "__main__":
    main()
