"""Seed 002 §6: the local equivalent index-1 method on the planar two-link arm.

l1 = 1 m, l2 = 2 m, m1 = m2 = 1 kg, q0 = [0.5, 0, 0, 2, 0, 0] (both links
horizontal, at rest, falling under gravity), trapezoidal (improved Euler)
rule with h = 1e-3, null-space basis by QR and by Gaussian elimination.

    python benchmarks/seed002.py [--quick] [--t-end 2.0]

The seed's figures (Fig. 2: a coordinate vs time, Fig. 3: its error vs time)
survive the OCR only as axes; its reference was "the QR method with
h = 0.001".  We print the error curve against an independent reference
instead: scipy DOP853 at rtol = atol = 1e-12 on the index-1 ODE
(tests/reference.py, no cosim integrator involved).  Columns: max |Δq| over
all six coordinates, |Δθ1|, |Δθ2| (rad), max |Δq'|, and the constraint
residuals |C| and |C_q q'| of our solution.  Then the observed order from a
step-size sweep at t = 1 s, and wall time / Newton iterations per step.
"""
import argparse
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests"))

from reference import index1_solution  # noqa: E402

from cosim.integrators import make_integrator  # noqa: E402
from cosim.models import load_model  # noqa: E402

SEED002 = dict(m1=1.0, m2=1.0, l1=1.0, l2=2.0, theta1_0=0.0, theta2_0=0.0)


def error_curve(t_end, h, nullspace, every):
    model = load_model("two_link", **SEED002)
    ref = index1_solution(model, t_end)
    it = make_integrator(model, "local-index1", h=h, nullspace=nullspace)
    it.initialize()
    rows = []
    n_out = int(round(t_end / every))
    t0 = time.perf_counter()
    for k in range(1, n_out + 1):
        it.advance(k * every)
        r = ref.sol(it.t)
        dq = np.abs(it.y[:6] - r[:6])
        dv = np.abs(it.y[6:] - r[6:])
        pos, vel, _ = model.residual_levels(it.t, it.y)
        rows.append((it.t, dq.max(), dq[2], dq[5], dv.max(), pos, vel))
    wall = time.perf_counter() - t0
    return rows, it.stats, wall


def order_sweep(T, hs, nullspace):
    model = load_model("two_link", **SEED002)
    ref = index1_solution(model, T).y[:, -1]
    errs = []
    for h in hs:
        it = make_integrator(model, "local-index1", h=h, nullspace=nullspace)
        it.initialize()
        it.advance(T)
        errs.append(float(np.max(np.abs(it.y[:6] - ref[:6]))))
    return errs


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="t_end = 1 s, coarser table")
    parser.add_argument("--t-end", type=float, default=None)
    args = parser.parse_args(argv)
    t_end = args.t_end or (1.0 if args.quick else 2.0)
    every = 0.1 if args.quick else 0.1
    h = 1e-3
    print("Seed 002 two-link example: l1=1, l2=2, m1=m2=1, q0=[0.5,0,0,2,0,0], h=1e-3, "
          "trapezoidal rule on the local equivalent index-1 system")
    print("reference: scipy DOP853, rtol=atol=1e-12, index-1 ODE (independent of cosim)")
    for nullspace in ("qr", "gauss"):
        rows, stats, wall = error_curve(t_end, h, nullspace, every)
        print()
        print(f"null-space basis: {nullspace}   steps {stats['steps']}, Newton iterations "
              f"{stats['newton_iterations']} ({stats['newton_iterations'] / stats['steps']:.2f}/step), "
              f"LU {stats['lu_factorizations']}, wall {wall:.2f} s")
        print(f"{'t[s]':>6s} {'max|dq|':>10s} {'|dth1|':>10s} {'|dth2|':>10s} {'max|dv|':>10s} "
              f"{'|C|':>10s} {'|Cq v|':>10s}")
        for t, eq, e1, e2, ev, pos, vel in rows:
            print(f"{t:6.2f} {eq:10.2e} {e1:10.2e} {e2:10.2e} {ev:10.2e} {pos:10.1e} {vel:10.1e}")
    hs = [4e-3, 2e-3, 1e-3, 5e-4]
    print()
    print("step-size sweep, max |dq| at t = 1 s")
    for nullspace in ("qr", "gauss"):
        errs = order_sweep(1.0, hs, nullspace)
        order = np.polyfit(np.log(hs), np.log(errs), 1)[0]
        print(f"{nullspace:>6s} " + " ".join(f"h={h_:.0e}: {e:9.2e}" for h_, e in zip(hs, errs))
              + f"   observed order {order:.2f} (theory 2)")


if __name__ == "__main__":
    main()
