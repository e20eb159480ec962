"""Fixed-step generalized-α: error against h on library models and URDF robots.

For each model and rtol, h = 2, 1, 0.5, 0.25, 0.125, 0.0625 ms from t = 0 (zero
inputs, the model's initial state) to ``--t-end``: error max_k |q_k − q_ref,k| /
max(1, |q_ref,k|) against scipy DOP853 on the index-1 ODE (M q'' + C_qᵀλ = Q,
C_q q'' = γ) at rtol = atol = 1e-13, the ratio to the previous h (4 for order 2),
and Newton iterations and LU factorisations per step.  In fixed-step mode rtol
only sets the Newton norm's weights; the iteration stops relative to the step's
own innovation (ga_kernel.FIXED_NEWTON_REL), so the error falls as h² whatever
rtol.  Robots need pinocchio and example-robot-data (the ``robots`` extra).

    python benchmarks/fixed_step_floor.py                              # all below
    python benchmarks/fixed_step_floor.py --models ur5 --rtols 1e-3 1e-6 --t-end 1
    python benchmarks/fixed_step_floor.py --models two_link --t-end 0.2 --backend numba
"""
import argparse
import os
import sys
import time

import numpy as np
from scipy.integrate import solve_ivp

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from cosim.integrators import make_integrator  # noqa: E402
from cosim.models import load_model  # noqa: E402

ROBOTS = {"panda": "panda_description/urdf/panda.urdf",
          "ur5": "ur_description/urdf/ur5_robot.urdf"}
STEPS = (2e-3, 1e-3, 5e-4, 2.5e-4, 1.25e-4, 6.25e-5)


def model_named(name):
    if name in ROBOTS:
        from cosim.models.urdf import example_robot_path, load_urdf
        return load_urdf(str(example_robot_path(ROBOTS[name])))()
    return load_model(name)


def reference(model, t_end, u, t0=0.0, y0=None, tol=1e-13):
    """q at t_end of the index-1 ODE from (t0, y0) (default: 0 and the model's initial
    state) by scipy DOP853 at rtol = atol = tol."""
    n, m = model.n_q, model.n_c

    def rhs(t, y):
        q, v = y[:n], y[n:]
        M, Q = model.mass(q, t), model.forces(q, v, t, u)
        if m == 0:
            return np.concatenate([v, np.linalg.solve(M, Q)])
        Cq = model.constraint_jacobian(q, t)
        K = np.block([[M, Cq.T], [Cq, np.zeros((m, m))]])
        a = np.linalg.solve(K, np.concatenate([Q, model.gamma(q, v, t)]))[:n]
        return np.concatenate([v, a])
    y0 = model.initial_y() if y0 is None else y0
    return solve_ivp(rhs, (t0, t_end), y0, method="DOP853", rtol=tol, atol=tol).y[:n, -1]


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--models", nargs="+", default=["two_link", "pendulum", "panda", "ur5"])
    p.add_argument("--rtols", nargs="+", type=float, default=[1e-3, 1e-6])
    p.add_argument("--t-end", type=float, default=None,
                   help="end time (default: 0.2 s two_link and panda, 1 s pendulum and ur5)")
    p.add_argument("--h", nargs="+", type=float, default=list(STEPS))
    p.add_argument("--backend", choices=("python", "numba"), default="python")
    args = p.parse_args(argv)
    for name in args.models:
        model = model_named(name)
        t_end = args.t_end or (0.2 if name in ("two_link", "panda") else 1.0)
        u = np.asarray(model.default_inputs(), dtype=float)
        q_ref = reference(model, t_end, u)
        for rtol in args.rtols:
            print(f"\n{name} (n_q {model.n_q}, n_c {model.n_c}), t_end {t_end:g}, rtol {rtol:g}, "
                  f"backend {args.backend}", flush=True)
            print(f"{'h':>9} {'error':>9} {'ratio':>6} {'Newton/step':>11} {'LU/step':>7} {'s':>5}")
            prev = None
            for h in args.h:
                t0 = time.perf_counter()
                ig = make_integrator(model, "generalized-alpha", backend=args.backend, h=h,
                                     rtol=rtol, atol=rtol / 100)
                ig.initialize(0.0, None, u)
                ig.advance(t_end)
                err = float(np.max(np.abs(ig.q - q_ref) / np.maximum(1.0, np.abs(q_ref))))
                st = ig.stats
                ratio = "" if prev is None else f"{prev / err:.2f}"
                print(f"{h:9.3g} {err:9.2e} {ratio:>6} {st['newton_iterations'] / st['steps']:11.2f} "
                      f"{st['lu_factorizations'] / st['steps']:7.2f} {time.perf_counter() - t0:5.1f}",
                      flush=True)
                prev = err


if __name__ == "__main__":
    main()
