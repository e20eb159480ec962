"""Generated derivative kernels on the compiled backend (cosim.models.auto_kernels):
accuracy against the analytic library kernels, the γ schemes compared, and cost
per call and per step with analytic vs generated kernels.

    python benchmarks/auto_kernels.py [--tables accuracy gamma calls steps]

* accuracy: worst relative error over 6 states per term and the path taken
  (two_link and andrews call math.cos, so their terms use differences; the
  "np" variants are the same kernels with math.* replaced by numpy.*, which
  compile for complex numbers);
* gamma: the compiled γ schemes from C alone on the complex-safe models —
  Cauchy contour (N points, radius r·τ), complex step of the first derivative
  + Richardson differences, 45° complex step (Lai & Crassidis), second
  differences — worst relative error;
* calls: µs per call of each compiled kernel, analytic vs generated (best of 5);
* steps: µs per step of a whole compiled run, analytic vs generated kernels
  (the entries of tests/test_auto_kernels.py: pendulum and two_link
  generalized-α h = 1 ms 2 s, andrews BDF rtol 1e-6 to 0.03 s), CPU time best of 9.
"""
import argparse
import importlib.util
import inspect
import os
import sys
import tempfile
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from cosim import derivatives  # noqa: E402
from cosim.models.andrews import Andrews  # noqa: E402
from cosim.models.auto_kernels import complete, without_derivative_kernels  # noqa: E402
from cosim.models.double_pendulum_natural import DoublePendulumNatural  # noqa: E402
from cosim.models.pendulum import Pendulum  # noqa: E402
from cosim.models.two_link import TwoLink  # noqa: E402

REPEAT = 9  # whole runs per row (the best is printed: a shared machine)
TERMS = ("C_q", "C_t", "gamma", "Q_q", "Q_v", "H", "Ma_q")
FIELD = {"C_q": "constraint_jacobian", "C_t": "constraint_dt", "gamma": "gamma", "Q_q": "force_jacobians",
         "Q_v": "force_jacobians", "H": "constraint_force_jacobian", "Ma_q": "mass_jacobian_term"}


def numpy_variant(cls):
    """``cls`` with its kernel module's ``math.`` replaced by ``np.`` (complex-safe where
    numpy has the function), as a new module."""
    src = inspect.getsource(sys.modules[cls.__module__]).replace("math.", "np.")
    src = src.replace("from ..", "from cosim.").replace("from .", "from cosim.models.")
    path = os.path.join(tempfile.mkdtemp(), f"np_{cls.__name__.lower()}.py")
    with open(path, "w", encoding="utf-8") as fh:
        fh.write(src)
    spec = importlib.util.spec_from_file_location(f"np_{cls.__name__.lower()}", path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    new = getattr(mod, cls.__name__)
    new.kernel_name = f"np_{cls.name}"
    return new


def states(model, count=6, seed=3):
    rng = np.random.default_rng(seed)
    q0, v0 = model.initial_state()
    out = [(q0, v0 + 0.3, 0.0)]
    for _ in range(count - 1):
        out.append((q0 + 0.05 * np.maximum(np.abs(q0), 1e-2) * rng.standard_normal(q0.size),
                    v0 + (1.0 + np.abs(v0)) * 0.5 * rng.standard_normal(v0.size), 0.0123))
    return out


def evaluate(kernels, model, q, v, t):
    n, m, p, u = model.n_q, model.n_c, model._p, model.default_inputs()
    out = {"C_q": np.zeros((m, n)), "C_t": np.zeros(m), "gamma": np.zeros(m), "Q_q": np.zeros((n, n)),
           "Q_v": np.zeros((n, n)), "H": np.zeros((n, n)), "Ma_q": np.zeros((n, n))}
    kernels.constraint_jacobian(q, t, p, out["C_q"])
    kernels.constraint_dt(q, t, p, out["C_t"])
    kernels.gamma(q, v, t, p, out["gamma"])
    kernels.force_jacobians(q, v, t, u, p, out["Q_q"], out["Q_v"])
    kernels.constraint_force_jacobian(q, np.linspace(1.0, 2.0, m), t, p, out["H"])
    if not model.constant_mass:
        kernels.mass_jacobian_term(q, v, t, p, out["Ma_q"])
    return out


def models():
    return [Pendulum, DoublePendulumNatural, TwoLink, numpy_variant(TwoLink), Andrews, numpy_variant(Andrews)]


def accuracy():
    print("\nGenerated vs analytic kernels: worst relative error over 6 states (path)")
    print(f"{'model':<26s}" + "".join(f"{t:>24s}" for t in TERMS))
    for cls in models():
        ana, auto = cls(), without_derivative_kernels(cls)()
        kernels, rep = complete(auto)
        worst = dict.fromkeys(TERMS, 0.0)
        for q, v, t in states(ana):
            a, b = evaluate(ana.kernel_set, ana, q, v, t), evaluate(kernels, ana, q, v, t)
            for k in TERMS:
                size = float(np.max(np.abs(a[k]))) if a[k].size else 0.0
                err = float(np.max(np.abs(a[k] - b[k]))) if a[k].size else 0.0
                worst[k] = max(worst[k], err / size if size > 0 else err)
        cells = []
        for k in TERMS:
            path = rep.get(FIELD[k], ("constant",))[0]
            short = {"complex-step": "cs", "complex-contour": "contour", "differences": "fd"}.get(path, path)
            cells.append(f"{worst[k]:.1e} ({short})")
        label = getattr(cls, "kernel_name", cls.name)
        print(f"{label:<26s}" + "".join(f"{c:>24s}" for c in cells))


# -- γ schemes from C alone (Python evaluation of the complex-safe kernels: same arithmetic) ----
def gamma_schemes(model, q, v, t):
    p, m = model._p, model.n_c
    con = model.kernel_set.constraints
    tau = derivatives._line_time(model, q, v)

    def phi(s):
        c = np.zeros(m, dtype=complex)
        con(np.asarray(q + s * v, dtype=complex), t + s, p, c)
        return c

    out = {}
    for N in (8, 12, 16, 24):
        for r in (0.125, 0.25, 0.5):
            rr = r * tau
            acc = np.zeros(m)
            for j in range(N):
                w = np.exp(2j * np.pi * j / N)
                acc += (phi(rr * w) * np.conj(w * w)).real
            out[f"contour N={N} r={r}τ"] = -2.0 * acc / (N * rr * rr)
    h = derivatives.CS_H * tau
    for H in (2.0 ** -3, 2.0 ** -5, 2.0 ** -7):
        hh = derivatives._pow2(H * tau)
        est = []
        for k in range(3):
            hk = hh / 2 ** k
            est.append((phi(hk + 1j * h).imag - phi(-hk + 1j * h).imag) / h / (2 * hk))
        out[f"cs + Richardson h={H:g}τ"] = -derivatives._extrapolate(est, 2)
    w45 = np.exp(0.25j * np.pi)
    for H in (2.0 ** -3, 2.0 ** -5):
        hh = derivatives._pow2(H * tau)
        est = [(phi(hh / 2 ** k * w45) + phi(-hh / 2 ** k * w45)).imag / (hh / 2 ** k) ** 2 for k in range(3)]
        out[f"45° complex step h={H:g}τ"] = -derivatives._extrapolate(est, 4)
    hh = derivatives._pow2(derivatives.H_SECOND * tau)
    est = [((phi(hh / 2 ** k) - 2 * phi(0.0) + phi(-hh / 2 ** k)) / (hh / 2 ** k) ** 2).real for k in range(3)]
    out["second differences (real)"] = -derivatives._extrapolate(est, 2)
    return out


def gamma():
    print("\nγ from C alone on the complex-safe models: worst relative error over 6 states")
    cols = [c for c in models() if c in (Pendulum, DoublePendulumNatural) or c.__module__.startswith("np_")]
    worst = {}
    for cls in cols:
        model = cls()
        for q, v, t in states(model):
            ref = np.zeros(model.n_c)
            model.kernel_set.gamma(q, v, t, model._p, ref)
            for name, g in gamma_schemes(model, q, v, t).items():
                e = float(np.max(np.abs(g - ref))) / float(np.max(np.abs(ref)))
                key = (name, getattr(cls, "kernel_name", cls.name))
                worst[key] = max(worst.get(key, 0.0), e)
    names = list(dict.fromkeys(k[0] for k in worst))
    labels = [getattr(c, "kernel_name", c.name) for c in cols]
    print(f"{'scheme':<28s}" + "".join(f"{lab:>24s}" for lab in labels))
    for name in names:
        print(f"{name:<28s}" + "".join(f"{worst[(name, lab)]:24.1e}" for lab in labels))


def calls():
    import numba  # noqa: PLC0415
    from cosim import jit  # noqa: PLC0415
    print("\nCompiled kernels: µs per call, analytic / generated (best of 5 × 2000 calls)")
    print(f"{'model':<26s}" + "".join(f"{t:>20s}" for t in ("C_q", "C_t", "gamma", "Q_q,Q_v", "H", "Ma_q")))
    for cls in models():
        ana, auto = cls(), without_derivative_kernels(cls)()
        kernels, _ = complete(auto)
        q, v = ana.initial_state()
        v = v + 0.3
        n, m, p, u = ana.n_q, ana.n_c, ana._p, ana.default_inputs()
        lam = np.linspace(1.0, 2.0, m)
        row = []
        for field, args in (("constraint_jacobian", lambda: (q, 0.0, p, np.zeros((m, n)))),
                            ("constraint_dt", lambda: (q, 0.0, p, np.zeros(m))),
                            ("gamma", lambda: (q, v, 0.0, p, np.zeros(m))),
                            ("force_jacobians", lambda: (q, v, 0.0, u, p, np.zeros((n, n)), np.zeros((n, n)))),
                            ("constraint_force_jacobian", lambda: (q, lam, 0.0, p, np.zeros((n, n)))),
                            ("mass_jacobian_term", lambda: (q, v, 0.0, p, np.zeros((n, n))))):
            cell = []
            for ks in (ana.kernel_set, kernels):
                fn = getattr(ks, field)
                if fn is None:
                    cell.append(None)
                    continue
                jit._kernel_helpers([fn])
                for g in vars(sys.modules[fn.__module__]).values():  # the functions it calls
                    if callable(g) and getattr(g, "__module__", None) == fn.__module__ and \
                            inspect.isfunction(g) and g is not fn:
                        try:
                            from numba.extending import register_jitable  # noqa: PLC0415
                            if not getattr(g, "__cosim_registered__", False):
                                register_jitable(g)
                                g.__cosim_registered__ = True
                        except Exception:  # noqa: BLE001
                            pass
                a = args()

                @numba.njit
                def loop(f, a, reps):
                    for _ in range(reps):
                        f(*a)
                f = numba.njit(fn)
                loop(f, a, 1)
                best = np.inf
                for _ in range(5):
                    t0 = time.perf_counter()
                    loop(f, a, 2000)
                    best = min(best, (time.perf_counter() - t0) / 2000 * 1e6)
                cell.append(best)
            row.append("—" if cell[1] is None else f"{cell[0]:.2f} / {cell[1]:.2f}")
        print(f"{getattr(cls, 'kernel_name', cls.name):<26s}" + "".join(f"{c:>20s}" for c in row))


def steps():
    from cosim.simulation import Simulation  # noqa: PLC0415
    print(f"\nWhole compiled runs, analytic vs generated derivative kernels: CPU µs per step, best of {REPEAT} "
          f"(load {os.getloadavg()[0]:.1f})")
    print(f"{'run':<44s} {'analytic':>10s} {'generated':>10s} {'ratio':>7s} {'steps a/g':>12s} "
          f"{'jac evals a/g':>14s} {'max rel diff':>13s}")
    for cls, method, t_end, h in ((Pendulum, "generalized-alpha", 2.0, 1e-3),
                                  (TwoLink, "generalized-alpha", 2.0, 1e-3),
                                  (Andrews, "bdf", 0.03, None)):
        res = []
        for c in (cls, without_derivative_kernels(cls)):
            best = np.inf
            for _ in range(REPEAT):
                sim = Simulation(c, method=method, h=h, backend="numba")
                t0 = time.process_time()
                sim.do_step(0.0, t_end)
                best = min(best, time.process_time() - t0)
            res.append((best / sim.stats["steps"] * 1e6, sim.stats, sim.y))
        (ua, sa, ya), (ub, sb, yb) = res
        label = f"{cls.name} {method} " + (f"h={h:g}" if h else "rtol 1e-6") + f" to {t_end:g} s"
        print(f"{label:<44s} {ua:10.2f} {ub:10.2f} {ub / ua:7.2f} {sa['steps']:>5d}/{sb['steps']:<6d} "
              f"{sa['jacobian_evaluations']:>6d}/{sb['jacobian_evaluations']:<7d} "
              f"{float(np.max(np.abs(ya - yb)) / np.max(np.abs(ya))):13.1e}")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tables", nargs="+", default=["accuracy", "gamma", "calls", "steps"],
                    choices=["accuracy", "gamma", "calls", "steps"])
    args = ap.parse_args(argv)
    for name in args.tables:
        globals()[name]()


if __name__ == "__main__":
    main()
