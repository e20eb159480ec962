"""Automatic C_q, C_t, γ (cosim.derivatives) against the analytic terms of the
library models: accuracy, cost per call, and the trajectories they give.

Table 1: max relative error max|auto − analytic| / max|analytic| over the
initial state and 5 random states near it (the states of tests/test_models.py),
and the cost of one call (µs, analytic / automatic).
Table 2: each method run to t_end with fixed steps h with the analytic and
with the automatic terms (Python backend): max |y_auto − y_analytic| at the
end, the same divided by max |y|, and wall times.

    python benchmarks/auto_derivatives.py
    python benchmarks/auto_derivatives.py --quick     # table 1 only
"""
import argparse
import time

import numpy as np

from cosim.derivatives import without_analytic_derivatives
from cosim.models import model_class
from cosim.simulation import Simulation

MODELS = ["pendulum", "andrews", "two_link", "double_pendulum_natural", "crank_slider"]
# (t_end, fixed step h): fixed steps, so both runs take the same steps
RUNS = {"pendulum": (1.0, 1e-2), "andrews": (0.003, 1e-5), "two_link": (1.0, 1e-2),
        "double_pendulum_natural": (1.0, 1e-3), "crank_slider": (0.01, 1e-4)}
METHODS = ["generalized-alpha", "bdf", "dopri5"]


def states(model, n=5, seed=0):
    rng = np.random.default_rng(seed)
    q0, v0 = model.initial_state()
    out = [(q0, v0, 0.0)]
    for _ in range(n):
        scale = np.maximum(np.abs(q0), 1e-2)
        q = q0 + 0.05 * scale * rng.standard_normal(q0.size)
        v = v0 + (1.0 + np.abs(v0)) * 0.5 * rng.standard_normal(v0.size)
        out.append((q, v, 0.0123))
    return out


def rel(a, b):
    size = float(np.max(np.abs(b))) if np.size(b) else 0.0
    err = float(np.max(np.abs(np.asarray(a) - b))) if np.size(b) else 0.0
    return err / size if size > 0 else err


def cost(fn, *args, repeat=200):
    fn(*args)
    t0 = time.perf_counter()
    for _ in range(repeat):
        fn(*args)
    return 1e6 * (time.perf_counter() - t0) / repeat


def accuracy_table():
    print("automatic vs analytic terms (relative error; cost per call in µs, analytic/automatic)")
    print(f"{'model':<24s} {'C_q':>9s} {'C_t':>9s} {'gamma':>9s}   {'C_q µs':>13s} {'gamma µs':>13s}")
    worst = {"C_q": 0.0, "C_t": 0.0, "gamma": 0.0}
    for name in MODELS:
        cls = model_class(name)
        ana, auto = cls(), without_analytic_derivatives(cls)()
        e = {"C_q": 0.0, "C_t": 0.0, "gamma": 0.0}
        for q, v, t in states(ana):
            e["C_q"] = max(e["C_q"], rel(auto.constraint_jacobian(q, t), ana.constraint_jacobian(q, t)))
            e["C_t"] = max(e["C_t"], rel(auto.constraint_dt(q, t), ana.constraint_dt(q, t)))
            e["gamma"] = max(e["gamma"], rel(auto.gamma(q, v, t), ana.gamma(q, v, t)))
        for k in worst:
            worst[k] = max(worst[k], e[k])
        q, v, t = states(ana)[1]
        # a new q each call (no cache hit): the cost an integrator sees
        qs = [q + 1e-9 * k for k in range(201)]
        it = iter(qs)
        c_ana = cost(lambda: ana.constraint_jacobian(next(it), t))
        it = iter(qs)
        c_auto = cost(lambda: auto.constraint_jacobian(next(it), t))
        g_ana = cost(ana.gamma, q, v, t)
        g_auto = cost(auto.gamma, q, v, t)
        print(f"{name:<24s} {e['C_q']:9.1e} {e['C_t']:9.1e} {e['gamma']:9.1e}   "
              f"{c_ana:5.1f}/{c_auto:7.1f} {g_ana:5.1f}/{g_auto:7.1f}")
    print(f"{'worst':<24s} {worst['C_q']:9.1e} {worst['C_t']:9.1e} {worst['gamma']:9.1e}")


def trajectory_table():
    print()
    print("trajectories with automatic vs analytic C_q, C_t, gamma (Python backend, fixed step h)")
    print(f"{'model':<24s} {'method':<18s} {'t_end':>7s} {'h':>7s} {'max|dy|':>9s} {'relative':>9s} "
          f"{'wall ana':>9s} {'wall auto':>9s}")
    worst = 0.0
    for name in MODELS:
        cls = model_class(name)
        for method in METHODS:
            out = []
            t_end, h = RUNS[name]
            for c in (cls, without_analytic_derivatives(cls)):
                sim = Simulation(c, method=method, h=h, backend="python")
                t0 = time.perf_counter()
                sim.do_step(0.0, t_end)
                out.append((sim.y, time.perf_counter() - t0))
            dy = float(np.max(np.abs(out[0][0] - out[1][0])))
            rdy = dy / float(np.max(np.abs(out[0][0])))
            worst = max(worst, rdy)
            print(f"{name:<24s} {method:<18s} {t_end:7.3g} {h:7.0e} {dy:9.1e} {rdy:9.1e} "
                  f"{out[0][1]:9.3f} {out[1][1]:9.3f}")
    print(f"worst relative difference {worst:.1e}")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="accuracy table only")
    args = parser.parse_args(argv)
    accuracy_table()
    if not args.quick:
        trajectory_table()


if __name__ == "__main__":
    main()
