"""Where an adaptive run spends its steps, and where perturbed starts part (issue 12).

Runs one method on a model from two starts whose q0 differ by 1e-15 (as
benchmarks/work_precision.py perturbs them), one accepted step at a time, and
prints per time window: the smallest and the median step, the share of all
steps taken in the window, and the difference of the two starts' first
coordinate at the window's end (cubic Hermite interpolation of each run's
accepted (t, q_1, v_1)).

    python benchmarks/step_windows.py --method generalized-alpha-i2 --rtol 1e-10

(Andrews, atol = rtol/100, backend numba: ~1 min per start at rtol 1e-10.)
"""
import argparse
import os
import sys

import numpy as np
from scipy.interpolate import CubicHermiteSpline

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from work_precision import perturbed_y0  # noqa: E402

from cosim.integrators import make_integrator  # noqa: E402
from cosim.models import load_model  # noqa: E402


def run(model_name, method, rtol, atol, t_end, seed, backend):
    model = load_model(model_name)
    integ = make_integrator(model, method, backend=backend, rtol=rtol, atol=atol)
    integ.initialize(0.0, perturbed_y0(model, seed))
    n = model.n_q
    ts, q1, v1 = [0.0], [float(integ.q[0])], [float(integ.y[n])]
    while integ.t < t_end:
        integ.step(t_end)
        ts.append(integ.t)
        q1.append(float(integ.q[0]))
        v1.append(float(integ.y[n]))
    return np.array(ts), np.array(q1), np.array(v1), integ.stats["steps"], integ.stats["rejected"]


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="andrews")
    ap.add_argument("--method", default="generalized-alpha-i2")
    ap.add_argument("--rtol", type=float, default=1e-10)
    ap.add_argument("--atol", type=float, default=None, help="default rtol/100")
    ap.add_argument("--t-end", type=float, default=0.03)
    ap.add_argument("--window", type=float, default=0.001)
    ap.add_argument("--backend", default="numba", choices=("python", "numba", "auto"))
    args = ap.parse_args(argv)
    atol = args.rtol / 100 if args.atol is None else args.atol
    runs = [run(args.model, args.method, args.rtol, atol, args.t_end, seed, args.backend) for seed in (1, 2)]
    print(f"{args.model} {args.method} rtol {args.rtol:g} atol {atol:g} backend {args.backend}: "
          f"start 1 {runs[0][3]} steps ({runs[0][4]} rejected), start 2 {runs[1][3]} ({runs[1][4]})")
    ts, q1, v1, steps, _ = runs[0]
    h = np.diff(ts)
    splines = [CubicHermiteSpline(r[0], r[1], r[2]) for r in runs]
    edges = np.arange(0.0, args.t_end + 0.5 * args.window, args.window)
    print(f"{'window [s]':>19} {'h min':>9} {'h median':>9} {'% steps':>8} {'q1(2) - q1(1) at end':>21}")
    for a, b in zip(edges[:-1], edges[1:]):
        sel = (ts[1:] > a) & (ts[1:] <= b)
        if not sel.any():
            continue
        dq = float(splines[1](b) - splines[0](b))
        print(f"{a:9.4f}-{b:9.4f} {h[sel].min():9.2e} {np.median(h[sel]):9.2e} "
              f"{100.0 * sel.sum() / len(h):8.1f} {dq:21.2e}")


if __name__ == "__main__":
    main()
