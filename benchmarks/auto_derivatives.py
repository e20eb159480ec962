"""Automatic derivatives (cosim.derivatives) against the analytic terms of the
library models: the path chosen per term, accuracy, cost per call, and the
trajectories they give.

Table 1: per model and term, the path the automatic term took (complex-step,
hyper-dual or differences: chosen per term by cosim.derivatives), its max
relative error max|auto − analytic| / max|analytic| over the initial state and
5 random states near it (the states of tests/test_models.py), the error of the
differences alone on the same states, and the cost of one call (µs: analytic /
automatic / differences).
Table 2: each method run to t_end with fixed steps h with the analytic terms
and with every analytic derivative removed (Python backend): max |y_auto −
y_analytic| / max |y| at the end, and wall times.

    python benchmarks/auto_derivatives.py
    python benchmarks/auto_derivatives.py --quick     # table 1 only
"""
import argparse
import time

import numpy as np

from cosim import derivatives
from cosim.derivatives import ALL_TERMS, without_analytic_derivatives
from cosim.integrators import METHOD_REGISTRY
from cosim.models import model_class
from cosim.simulation import Simulation

MODELS = ["pendulum", "andrews", "two_link", "double_pendulum_natural", "crank_slider"]
# (t_end, fixed step h): fixed steps, so both runs take the same steps
RUNS = {"pendulum": (0.5, 1e-2), "andrews": (0.001, 1e-5), "two_link": (0.2, 1e-2),
        "double_pendulum_natural": (0.2, 1e-3), "crank_slider": (0.002, 1e-4)}
METHODS = sorted(m for m in METHOD_REGISTRY if m != "state-transition")


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
    a, b = np.hstack([np.ravel(x) for x in a]) if isinstance(a, tuple) else np.ravel(a), \
        np.hstack([np.ravel(x) for x in b]) if isinstance(b, tuple) else np.ravel(b)
    size = float(np.max(np.abs(b))) if b.size else 0.0
    err = float(np.max(np.abs(a - b))) if b.size else 0.0
    return err / size if size > 0 else err


def cost(fn, *args, repeat=100):
    fn(*args)
    t0 = time.perf_counter()
    for _ in range(repeat):
        fn(*args)
    return 1e6 * (time.perf_counter() - t0) / repeat


def _terms(model, lam, a):
    """term -> (analytic call, automatic call) on a model instance."""
    return {
        "C_q": (lambda q, v, t, u: model.constraint_jacobian(q, t),
                lambda q, v, t, u: derivatives.constraint_jacobian(model, q, t)),
        "C_t": (lambda q, v, t, u: model.constraint_dt(q, t),
                lambda q, v, t, u: derivatives.constraint_dt(model, q, t)),
        "gamma": (lambda q, v, t, u: model.gamma(q, v, t),
                  lambda q, v, t, u: derivatives.gamma(model, q, v, t)),
        "Q_q, Q_v": (lambda q, v, t, u: model.force_jacobians(q, v, t, u),
                     lambda q, v, t, u: derivatives.force_jacobians(model, q, v, t, u)),
        "(C_q^T lam)_q": (lambda q, v, t, u: model.constraint_force_jacobian(q, lam, t),
                          lambda q, v, t, u: derivatives.constraint_force_jacobian(model, q, lam, t)),
        "(M a)_q": (lambda q, v, t, u: model.mass_jacobian_term(q, a, t),
                    lambda q, v, t, u: derivatives.mass_jacobian_term(model, q, a, t)),
    }


def accuracy_table():
    print("automatic vs analytic terms: path chosen, max relative error, the differences' error,")
    print("cost per call in µs (analytic / automatic / differences), a new q each call (no cache)")
    print(f"{'model':<24s} {'term':<14s} {'path':<13s} {'rel.err':>9s} {'diff.err':>9s}   "
          f"{'µs ana/auto/diff':>22s}")
    worst = {}
    for name in MODELS:
        cls = model_class(name)
        ana = cls()
        n, m = ana.n_q, ana.n_c
        lam, a = np.linspace(1.0, 2.0, m), np.linspace(-1.0, 1.0, n)
        auto = without_analytic_derivatives(cls, ALL_TERMS)()
        diff = without_analytic_derivatives(cls, ALL_TERMS)()
        paths = {t: p for t, p, _ in derivatives.derivative_report(auto)}
        for term in derivatives.TERMS:
            diff.__dict__.setdefault("_derivative_paths", {})[term] = derivatives.DIFFERENCES
        A, B, D = _terms(ana, lam, a), _terms(auto, lam, a), _terms(diff, lam, a)
        for term in derivatives.TERMS:
            if paths[term] in ("constant", "none"):
                continue
            e_auto = e_diff = 0.0
            for q, v, t in states(ana):
                u = ana.default_inputs()
                ref = A[term][0](q, v, t, u)
                e_auto = max(e_auto, rel(B[term][1](q, v, t, u), ref))
                e_diff = max(e_diff, rel(D[term][1](q, v, t, u), ref))
            worst[paths[term]] = max(worst.get(paths[term], 0.0), e_auto)
            q, v, t = states(ana)[1]
            u = ana.default_inputs()
            qs = iter([q + 1e-9 * k for k in range(400)])
            c = [cost(lambda f=f: f(next(qs), v, t, u)) for f in (A[term][0], B[term][1], D[term][1])]
            print(f"{name:<24s} {term:<14s} {paths[term]:<13s} {e_auto:9.1e} {e_diff:9.1e}   "
                  f"{c[0]:6.1f}/{c[1]:7.1f}/{c[2]:7.1f}")
    print("worst relative error per path: " + ", ".join(f"{p} {e:.1e}" for p, e in sorted(worst.items())))


def trajectory_table():
    print()
    print("trajectories with every analytic derivative removed vs analytic (Python backend, fixed step h)")
    print(f"{'model':<24s} {'method':<22s} {'t_end':>7s} {'h':>7s} {'relative':>9s} "
          f"{'wall ana':>9s} {'wall auto':>9s}")
    worst = 0.0
    for name in MODELS:
        cls = model_class(name)
        for method in METHODS:
            out = []
            t_end, h = RUNS[name]
            try:
                for c in (cls, without_analytic_derivatives(cls, ALL_TERMS)):
                    sim = Simulation(c, method=method, h=h, backend="python")
                    t0 = time.perf_counter()
                    sim.do_step(0.0, t_end)
                    out.append((sim.y, time.perf_counter() - t0))
            except Exception as exc:  # noqa: BLE001 - a method that cannot run this model
                print(f"{name:<24s} {method:<22s} {t_end:7.3g} {h:7.0e} fails: {type(exc).__name__}: "
                      f"{str(exc)[:60]}")
                continue
            rdy = float(np.max(np.abs(out[0][0] - out[1][0]))) / float(np.max(np.abs(out[0][0])))
            if method != "rkc-penalty":
                worst = max(worst, rdy)
            print(f"{name:<24s} {method:<22s} {t_end:7.3g} {h:7.0e} {rdy:9.1e} "
                  f"{out[0][1]:9.3f} {out[1][1]:9.3f}")
    print(f"worst relative difference (all methods but rkc-penalty, whose adaptive penalty "
          f"steps differ) {worst:.1e}")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="accuracy table only")
    args = parser.parse_args(argv)
    accuracy_table()
    if not args.quick:
        trajectory_table()


if __name__ == "__main__":
    main()
