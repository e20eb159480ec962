"""The heavy symmetric top in Euler parameters (M depends on q; issue 12 items 6 and 7).

Table 1, fixed step: spark (seed 003, s = 1 and 2) and other fixed-step methods at
h = 4, 2, 1 ms to t = 1: error of the nutation angle against Euler's equations in
rotation-matrix form (tests/reference.py, DOP853 at 1e-13; no cosim code), the
observed order, and the drift of the vertical and spin angular momenta and of the
energy (all three conserved by the exact flow).

Table 2, adaptive: the adaptive methods at rtol 1e-4, 1e-6, 1e-8 (atol = rtol/100):
steps, rejected, Newton iterations per step, the state error at t = 1 (max_k
|q_k − q_ref,k|, q a unit quaternion) against DOP853 on the index-1 ODE at 1e-13, the
error over rtol, and wall time (compiled backend where it exists, after a warm-up).
Table 3: scipy's BDF, LSODA and Radau on the index-1 ODE, the same measure.

    python benchmarks/heavy_top.py            # both tables (~1-2 min warm)
    python benchmarks/heavy_top.py --quick    # rtol 1e-4, 1e-6 only
"""
import argparse
import os
import sys
import time

import numpy as np

import cosim

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests"))
from reference import heavy_top_reference, index1_reference  # noqa: E402

T_END = 1.0
FIXED = [("spark", dict(stages=1)), ("spark", dict(stages=2)), ("generalized-alpha", {}),
         ("rk4", {}), ("block-lstable", {})]
ADAPTIVE = ("generalized-alpha", "generalized-alpha-i2", "bdf", "bdf-i2", "bdf-i1", "dopri5")


def run(method, backend="python", **kw):
    sim = cosim.Simulation(model="heavy_top", method=method, backend=backend, **kw)
    t0 = time.perf_counter()
    sim.do_step(0.0, T_END)
    return sim, time.perf_counter() - t0


def fixed_table():
    ref = heavy_top_reference(T_END)
    print(f"heavy_top, fixed step, t = {T_END:g}: nutation error vs Euler's equations (rotation "
          "matrix, DOP853 1e-13); drift = value(t) - value(0)")
    print(f"{'method':28s} {'h':>7s} {'nutation err':>13s} {'order':>6s} {'dL_vertical':>12s} "
          f"{'dL_spin':>10s} {'dE':>10s}")
    start = cosim.Simulation(model="heavy_top").get_output_dict()   # the values at t = 0
    for method, opts in FIXED:
        label = method + (f" s={opts['stages']}" if "stages" in opts else "")
        prev = None
        for h in (4e-3, 2e-3, 1e-3):
            try:
                out = run(method, h=h, method_options=opts)[0].get_output_dict()
            except cosim.CosimError as exc:
                print(f"{label:28s} {h:7.0e} failed: {exc}")
                break
            err = abs(out["nutation"] - ref["nutation"])
            order = f"{np.log2(prev / err):6.2f}" if prev else " " * 6
            prev = err
            print(f"{label:28s} {h:7.0e} {err:13.2e} {order} "
                  f"{out['momentum_vertical'] - start['momentum_vertical']:12.1e} "
                  f"{out['momentum_spin'] - start['momentum_spin']:10.1e} {out['energy'] - start['energy']:10.1e}")


def adaptive_table(rtols):
    q_ref = index1_reference(cosim.load_model("heavy_top"), T_END, rtol=1e-13, atol=1e-13)[0]
    print(f"\nheavy_top, adaptive, t = {T_END:g}, atol = rtol/100: state error max|q - q_ref| vs DOP853 1e-13")
    print(f"{'method':22s} {'rtol':>6s} {'steps':>7s} {'rej':>5s} {'it/step':>7s} {'error':>9s} "
          f"{'err/rtol':>8s} {'wall s':>7s} backend")
    for method in ADAPTIVE:
        for rtol in rtols:
            kw = dict(rtol=rtol, atol=rtol / 100)
            run(method, backend="auto", **kw)          # warm-up: compile or load the kernels
            sim, wall = run(method, backend="auto", **kw)
            st = sim.stats
            err = float(np.max(np.abs(sim.y[:4] - q_ref)))
            it = st["newton_iterations"] / max(st["steps"], 1)
            print(f"{method:22s} {rtol:6.0e} {st['steps']:7d} {st['rejected']:5d} {it:7.2f} {err:9.2e} "
                  f"{err / rtol:8.3f} {wall:7.3f} {sim.backend}")


def scipy_table(rtols):
    """scipy's solve_ivp on the index-1 ODE of the same model (tests/reference.py), the
    end quaternion normalised: what other codes' rtol buys on this undamped problem."""
    from scipy.integrate import solve_ivp

    from reference import index1_rhs
    model = cosim.load_model("heavy_top")
    q_ref = index1_reference(model, T_END, rtol=1e-13, atol=1e-13)[0]
    rhs, y0 = index1_rhs(model, np.zeros(model.n_inputs)), model.initial_y()
    print("\nscipy solve_ivp on the index-1 ODE, atol = rtol/100 (same error measure)")
    print(f"{'method':22s} {'rtol':>6s} {'steps':>7s} {'error':>9s} {'err/rtol':>8s}")
    for method in ("BDF", "LSODA", "Radau"):
        for rtol in rtols:
            sol = solve_ivp(rhs, (0.0, T_END), y0, method=method, rtol=rtol, atol=rtol / 100)
            q = sol.y[:4, -1] / np.linalg.norm(sol.y[:4, -1])
            err = float(np.max(np.abs(q - q_ref)))
            print(f"{'scipy ' + method:22s} {rtol:6.0e} {sol.t.size - 1:7d} {err:9.2e} {err / rtol:8.3f}")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="rtol 1e-4 and 1e-6 only")
    args = parser.parse_args(argv)
    fixed_table()
    rtols = [1e-4, 1e-6] if args.quick else [1e-4, 1e-6, 1e-8]
    adaptive_table(rtols)
    scipy_table(rtols)


if __name__ == "__main__":
    main()
