"""Seed 000 (Ren & Zhou 2020) Tables 5 and 6: steps and wall times of the
generalized-α, explicit and BDF integrators on the seven-body mechanism
(Andrews' squeezer, t ∈ [0, 0.03] s) and on the flexible crank-slider.

    python benchmarks/seed000.py [--quick] [--with-rkc]

Seed settings (§8): rtol 1e-6 for generalized-α, 1e-4 for BDF; the explicit
representative is "a fourth-order explicit integrator" (no tolerance given;
we run dopri5 — 5(4) with projection — and rk4 with step doubling at rtol 1e-6).
atol is not given in the seed: we use atol = rtol (Andrews' coordinates are
angles of order 1); for the crank-slider, whose elastic coordinates are ~1e-5 m,
the full run adds rows with atol = 1e-3·rtol.  Table 6 has no explicit column (seed: the model is stiff, "只能用隐式
积分器来计算"); our dopri5 row there is an extra, showing the stability-bound
step count.  The seed does not state the crank-slider horizon; we use the IVP
test set's [0, 0.1] s, whose reference solution gives the error column.

Errors: Andrews — max |q − q_ref| at t = 0.03 against the IVP test-set
reference (PSIDE, tol 1e-14); crank-slider — max |q − q_ref| of the rigid
coordinates and the max error of the elastic coordinates relative to their
largest reference magnitude, at t = 0.1 against the test-set reference.
Wall times are of this machine (shared, loaded) and not comparable to the
seed's; only ratios mean something.  Methods missing from
``cosim.available_methods()`` print "not available".
"""
import argparse
import time

import numpy as np

import cosim
from cosim.integrators import make_integrator
from cosim.models import load_model

# seed 000 Table 5 (Andrews) and Table 6 (crank-slider): steps, time [s]
TABLE5 = {"generalized-alpha": (3148, 2.81), "explicit": (946, 1.56), "bdf": (568, 0.48)}
TABLE6 = {"generalized-alpha": (494, 2.38), "bdf": (436, 2.91), "bdf-i2": (444, 3.17)}


def run(model_name, method, t_end, **options):
    model = load_model(model_name)
    it = make_integrator(model, method, **options)
    it.initialize(0.0)
    t0 = time.perf_counter()
    it.advance(t_end)
    wall = time.perf_counter() - t0
    q = it.y[: model.n_q]
    return it.stats, wall, q


def row(label, seed, rtol, atol, stats, wall, errs):
    seed_steps, seed_time = seed if seed else ("", "")
    err_txt = " ".join(f"{e:10.2e}" for e in errs)
    return (f"{label:<24s} {rtol:7.0e} {atol:7.0e} {stats['steps']:6d} {str(seed_steps):>6s} "
            f"{stats['rejected']:5d} {stats['residual_evaluations']:7d} {stats['lu_factorizations']:6d} "
            f"{wall:8.2f} {str(seed_time):>6s} {err_txt}")


def header(err_names):
    return (f"{'method':<24s} {'rtol':>7s} {'atol':>7s} {'steps':>6s} {'seed':>6s} {'rej':>5s} "
            f"{'f-evals':>7s} {'LU':>6s} {'wall[s]':>8s} {'seed s':>6s} "
            + " ".join(f"{n:>10s}" for n in err_names))


def andrews(quick, with_rkc=False):
    from cosim.models.andrews import REFERENCE_Q, REFERENCE_T
    print(f"Seven-body mechanism (Andrews' squeezer), t in [0, {REFERENCE_T}] s — seed 000 Table 5")
    print(header(["err q"]))
    runs = [("generalized-alpha", "generalized-alpha", 1e-6, TABLE5["generalized-alpha"]),
            ("dopri5 (explicit)", "dopri5", 1e-6, TABLE5["explicit"]),
            ("rk4 step-doubling", "rk4", 1e-6, TABLE5["explicit"]),
            ("bdf (index 3)", "bdf", 1e-4, TABLE5["bdf"])]
    if not quick:
        runs.insert(2, ("dopri5 (explicit)", "dopri5", 1e-4, None))
        runs.append(("bdf (index 3)", "bdf", 1e-6, None))
    if with_rkc:  # slow: the physical modes lie near the imaginary axis, outside RKC's region
        runs.append(("rkc-penalty (extra)", "rkc-penalty", 1e-6, None))
    available = cosim.available_methods()
    for label, method, rtol, seed in runs:
        if method not in available:
            print(f"{label:<24s} not available")
            continue
        stats, wall, q = run("andrews", method, REFERENCE_T, rtol=rtol, atol=rtol)
        print(row(label, seed, rtol, rtol, stats, wall, [float(np.max(np.abs(q - REFERENCE_Q)))]))
    # the DASSL / IDA weighting of the velocities (RTOL|v_k| + ATOL instead of W_q^k)
    for rtol in (1e-4,) if quick else (1e-4, 1e-7):
        stats, wall, q = run("andrews", "bdf", REFERENCE_T, rtol=rtol, atol=rtol,
                             velocity_weights="velocity")
        print(row("bdf [velocity weights]", None, rtol, rtol, stats, wall,
                  [float(np.max(np.abs(q - REFERENCE_Q)))]))


def crank_slider(quick):
    try:
        from cosim.models.crank_slider import REFERENCE_Q, REFERENCE_T
    except ImportError:
        print("crank-slider model not available")
        return
    print(f"Flexible crank-slider, t in [0, {REFERENCE_T}] s — seed 000 Table 6 "
          "(generalized-alpha / BDF-I3 / BDF-I2; no explicit column in the seed)")
    print(header(["err rigid", "rel err el"]))
    runs = [("generalized-alpha", "generalized-alpha", 1e-6, TABLE6["generalized-alpha"]),
            ("bdf (index 3)", "bdf", 1e-4, TABLE6["bdf"]),
            ("bdf-i2 (index 2)", "bdf-i2", 1e-4, TABLE6["bdf-i2"]),
            ("dopri5 (extra)", "dopri5", 1e-6, None)]
    runs = [r + (1.0,) for r in runs]
    if not quick:
        runs += [r[:4] + (1e-3,) for r in runs]
    available = cosim.available_methods()
    el = slice(3, 7)
    for label, method, rtol, seed, atol_factor in runs:
        if method not in available:
            print(f"{label:<24s} not available")
            continue
        atol = atol_factor * rtol
        try:
            stats, wall, q = run("crank_slider", method, REFERENCE_T, rtol=rtol, atol=atol)
        except cosim.CosimError as exc:
            print(f"{label:<24s} failed: {exc}")
            continue
        e_rigid = float(np.max(np.abs(q[:3] - REFERENCE_Q[:3])))
        e_el = float(np.max(np.abs(q[el] - REFERENCE_Q[el])) / np.max(np.abs(REFERENCE_Q[el])))
        print(row(label, seed, rtol, atol, stats, wall, [e_rigid, e_el]))


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="seed settings only, no extra rows")
    parser.add_argument("--with-rkc", action="store_true",
                        help="add an rkc-penalty row for Andrews (about a minute)")
    args = parser.parse_args(argv)
    andrews(args.quick, args.with_rkc)
    print()
    crank_slider(args.quick)


if __name__ == "__main__":
    main()
