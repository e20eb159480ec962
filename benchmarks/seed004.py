"""Seed 004 (Li, Ding & Li 2019) Tables 1-5: L-stable block methods on the planar
two-link manipulator (m1 = 1, m2 = 2, θ1 = π/3, θ2 = −π/6, at rest; link
lengths 1 m and 2 m from seed 002 — seed 004 does not state them), 10 s.

    python benchmarks/seed004.py [--quick]

Columns: wall time of the integration loop (s), max |H − H0| over the run, and
the max over the run of the constraint residuals at position (Φ), velocity
(Φ_t) and acceleration (Φ_tt) level (max-abs norms; Φ_tt uses the method's own
accelerations).  The seed's numbers (MATLAB, their machine) are printed beside
ours; wall times are not comparable across machines, only their ratios.
Tables 1-3 use the index-1 form (the seed's Table 1 row equals its Table 4
index-1 row).  "RK4" is plain classical Runge-Kutta on the index-1 form
without any projection (the seed's comparison; written here because the
project's "rk4" method always projects onto the constraints — it is shown as
an extra row).  --quick: 2 s instead of 10 s, fewer rows, no 100 s run.
"""
import argparse
import time

import numpy as np

from cosim.integrators import make_integrator
from cosim.integrators.common import consistent_accelerations
from cosim.models import load_model

# seed 004 (OCR): runtime T/s, Hmax, Φ, Φ_t, Φ_tt
SEED = {
    "h=0.01": (5.8906, 7.0007e-5, 6.8459e-7, 3.7480e-7, 5.6595e-12),
    "h=0.005": (10.8750, 8.8078e-7, 1.9154e-9, 6.6686e-9, 1.9846e-12),
    "h=0.001": (42.6406, 5.5074e-11, 7.6766e-13, 4.1800e-13, 1.4211e-13),
    "r=3": (1.6875, 0.0021, 5.8212e-5, 3.9267e-4, 6.2625e-12),
    "r=4": (5.8906, 7.0007e-5, 6.8459e-7, 3.7480e-7, 5.6595e-12),
    "L-stable": (5.8906, 7.0007e-5, 6.8459e-7, 3.7480e-7, 5.6595e-12),
    "Runge-Kutta": (0.3906, 0.2628, 0.0087, 0.0021, 9.2371e-14),
    "index-1": (5.8906, 7.0007e-5, 6.8459e-7, 3.7480e-7, 5.6595e-12),
    "index-2": (5.4219, 3.2163e-5, 4.3949e-9, 1.8498e-14, 0.0704),
    "index-3": (5.6094, 0.0011, 2.6645e-15, 5.9405e-4, 0.9854),
    "uniform": (5.6094, 0.0011, 2.7756e-15, 5.9405e-4, 0.9854),
    "Chebyshev": (5.2188, 4.3245e-5, 2.7200e-15, 1.8094e-4, 0.6880),
    "Legendre": (5.1094, 2.5327e-4, 2.8866e-15, 2.9047e-4, 0.7560),
}


def run_block(T, h, r=4, index=1, nodes="equidistant"):
    model = load_model("two_link")
    it = make_integrator(model, "block-lstable", h=h, r=r, index=index, nodes=nodes)
    it.initialize(0.0)
    m = it.model
    E0 = m.energy(0.0, it.y)
    emax, res = 0.0, np.zeros(3)
    n = int(round(T / h))
    w = time.perf_counter()
    for k in range(1, n + 1):
        it.advance(k * h)
        emax = max(emax, abs(m.energy(it.t, it.y) - E0))
        res = np.maximum(res, m.residual_levels(it.t, it.y, it.qdd))
    return (time.perf_counter() - w, emax, *res)


def run_rk4_plain(T, h, energy_at=()):
    """Classical RK4 on the index-1 form, no projection (seed 004 Table 3)."""
    model = load_model("two_link")
    nq, u = model.n_q, model.default_inputs()

    def f(y):
        a, _ = consistent_accelerations(model, 0.0, y[:nq], y[nq:], u)
        return np.concatenate([y[nq:], a]), a

    y = model.initial_y()
    E0 = model.energy(0.0, y)
    emax, res, marks = 0.0, np.zeros(3), {}
    n = int(round(T / h))
    w = time.perf_counter()
    for k in range(1, n + 1):
        k1, _ = f(y)
        k2, _ = f(y + 0.5 * h * k1)
        k3, _ = f(y + 0.5 * h * k2)
        k4, _ = f(y + h * k3)
        y = y + h / 6 * (k1 + 2 * k2 + 2 * k3 + k4)
        _, a = f(y)
        emax = max(emax, abs(model.energy(0.0, y) - E0))
        res = np.maximum(res, model.residual_levels(k * h, y, a))
        if k in energy_at:
            marks[k] = model.energy(0.0, y) - E0
    return (time.perf_counter() - w, emax, *res), marks


def run_registry_rk4(T, h):
    model = load_model("two_link")
    it = make_integrator(model, "rk4", h=h)
    it.initialize(0.0)
    m = it.model
    E0 = m.energy(0.0, it.y)
    emax, res = 0.0, np.zeros(3)
    w = time.perf_counter()
    for k in range(1, int(round(T / h)) + 1):
        it.advance(k * h)
        emax = max(emax, abs(m.energy(it.t, it.y) - E0))
        res = np.maximum(res, m.residual_levels(it.t, it.y, it.qdd))
    return (time.perf_counter() - w, emax, *res)


HEAD = (f"{'':14s} {'wall s':>8s} {'Hmax':>10s} {'Phi':>10s} {'Phi_t':>10s} {'Phi_tt':>10s}   |  seed: "
        f"{'T/s':>7s} {'Hmax':>10s} {'Phi':>10s} {'Phi_t':>10s} {'Phi_tt':>10s}")


def row(label, ours, seed_key=None):
    s = f"{label:14s} {ours[0]:8.3f} {ours[1]:10.3e} {ours[2]:10.3e} {ours[3]:10.3e} {ours[4]:10.3e}   |  "
    if seed_key in SEED:
        sd = SEED[seed_key]
        s += f"{'':6s}{sd[0]:7.3f} {sd[1]:10.3e} {sd[2]:10.3e} {sd[3]:10.3e} {sd[4]:10.3e}"
    print(s, flush=True)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="2 s horizon, fewer rows, no 100 s run")
    args = ap.parse_args(argv)
    T = 2.0 if args.quick else 10.0
    t0 = time.perf_counter()
    print(f"two-link manipulator, t = 0..{T:g} s (seed: 10 s)\n")

    print("Table 1  r = 4 equidistant, index 1, step sizes")
    print(HEAD)
    for h in ((0.01, 0.005) if args.quick else (0.01, 0.005, 0.001)):
        row(f"h={h:g}", run_block(T, h), f"h={h:g}")

    print("\nTable 2  h = 0.01, index 1, equidistant node counts")
    print(HEAD)
    for r in ((3, 4) if args.quick else (2, 3, 4, 5)):
        row(f"r={r}", run_block(T, 0.01, r=r), f"r={r}")

    print("\nTable 3  h = 0.01: L-stable (r = 4, index 1) vs classical Runge-Kutta")
    print(HEAD)
    row("L-stable", run_block(T, 0.01), "L-stable")
    rk, _ = run_rk4_plain(T, 0.01)
    row("Runge-Kutta", rk, "Runge-Kutta")
    row("rk4+projection", run_registry_rk4(T, 0.01))

    print("\nTable 4  h = 0.01, r = 4 equidistant, DAE index")
    print(HEAD)
    for index in (1, 2, 3):
        row(f"index-{index}", run_block(T, 0.01, index=index), f"index-{index}")

    print("\nTable 5  h = 0.01, r = 4, index 3, node families")
    print(HEAD)
    for nodes, key in (("equidistant", "uniform"), ("chebyshev", "Chebyshev"), ("legendre", "Legendre")):
        row(key, run_block(T, 0.01, index=3, nodes=nodes), key)

    if not args.quick:
        print("\nFig. 6-7 trend  h = 0.01, energy error H(t) − H0 (100 s)")
        marks = (1000, 2500, 5000, 7500, 10000)
        _, rk_marks = run_rk4_plain(100.0, 0.01, energy_at=marks)
        model = load_model("two_link")
        it = make_integrator(model, "block-lstable", h=0.01, r=4, index=1)
        it.initialize(0.0)
        E0 = it.model.energy(0.0, it.y)
        print(f"{'t':>6s} {'L-stable':>12s} {'RK4 (plain)':>12s}")
        for k in marks:
            it.advance(k * 0.01)
            print(f"{k * 0.01:6.0f} {it.model.energy(it.t, it.y) - E0:12.3e} {rk_marks[k]:12.3e}")
    print(f"\ntotal {time.perf_counter() - t0:.1f} s")


if __name__ == "__main__":
    main()
