"""Derivatives a model does not have to write (seed 000 eqs. 2-5).

A :class:`~cosim.models.base.MultibodyModel` must give M(q, t), Q(q, v, t, u)
and C(q, t).  When it does not give C_q, C_t or γ, the base class computes
them here from C alone, by central differences with Richardson
extrapolation (steps h, h/2, h/4; error O(h⁶) plus rounding ~ε/h, ~ε/h²):

* C_q: column j = ∂C/∂q_j, step h_j = H₁·max(|q_j|, s_j);
* C_t = ∂C/∂t, step H₁·T;
* γ = −(C_q v)_q v − 2 C_qt v − C_tt (eq. 5) is exactly −φ''(0) for
  φ(σ) = C(q + σv, t + σ): one directional second difference, step H₂·τ
  with τ = min(T, min_j s_j/|v_j|) (the time to move one coordinate scale).
  When the model gives C_q and C_t, γ = −d/dσ [C_q v + C_t](q + σv, t + σ)
  instead (a first derivative of analytic terms: more accurate).

``s_j`` is the model's ``coordinate_scale`` (default 1, a length in m or an
angle in rad) and ``T`` its ``time_scale`` (default 1 s).  The error
measured against the analytic library models is printed by
``python benchmarks/auto_derivatives.py``.

The same helpers give the reference values of the model checker
(:mod:`cosim.model_check`).
"""
from __future__ import annotations

import warnings

import numpy as np

from . import hyperdual

EPS = np.finfo(float).eps
LEVELS = 3  # Richardson levels: h, h/2, h/4
# Largest steps (relative to the scales below; the smallest is a quarter of
# it).  Chosen by measurement on the library models, whose analytic terms
# they reproduce to ~1e-13 (C_q) and ~1e-11 (γ from C alone): see
# benchmarks/auto_derivatives.py.
H_FIRST = 2.0 ** -5
H_SECOND = 2.0 ** -3


def _pow2(h):
    """The power of two nearest ``h`` (h/2, h/4 and x ± h are then exact scalings)."""
    return float(2.0 ** np.round(np.log2(h)))


def _extrapolate(values, order):
    """Richardson table of estimates at h, h/2, h/4, ... with error expansion in h^order, h^(2 order)..."""
    table = [np.asarray(v, dtype=float) for v in values]
    p = order
    while len(table) > 1:
        f = 2.0 ** p
        table = [(f * table[k + 1] - table[k]) / (f - 1.0) for k in range(len(table) - 1)]
        p += order
    return table[0]


def first_derivative(phi, h, levels=LEVELS):
    """φ'(0) of a vector function of one scalar: central differences at h/2^k, extrapolated."""
    h = _pow2(h)
    est = []
    for k in range(levels):
        hk = h / 2.0 ** k
        est.append((np.asarray(phi(hk), dtype=float) - np.asarray(phi(-hk), dtype=float)) / (2.0 * hk))
    return _extrapolate(est, 2)


def second_derivative(phi, h, f0=None, levels=LEVELS):
    """φ''(0): central second differences at h/2^k, extrapolated."""
    h = _pow2(h)
    f0 = np.asarray(phi(0.0) if f0 is None else f0, dtype=float)
    est = []
    for k in range(levels):
        hk = h / 2.0 ** k
        est.append((np.asarray(phi(hk), dtype=float) - 2.0 * f0 + np.asarray(phi(-hk), dtype=float))
                   / (hk * hk))
    return _extrapolate(est, 2)


def jacobian(fun, x, scale=1.0, h=H_FIRST, levels=LEVELS):
    """∂fun/∂x: per column j, central differences at h_j/2^k (h_j = h·max(|x_j|, scale_j))
    extrapolated as in :func:`first_derivative` (all columns at once)."""
    x = np.asarray(x, dtype=float)
    n = x.size
    ref = np.maximum(np.abs(x), np.broadcast_to(np.asarray(scale, dtype=float), x.shape))
    steps = 2.0 ** np.round(np.log2(h * ref)) if n else ref
    est = []
    xp = x.copy()
    for k in range(levels):
        cols = []
        for j in range(n):
            hk = steps[j] / 2.0 ** k
            xp[j] = x[j] + hk
            fp = np.asarray(fun(xp), dtype=float)
            xp[j] = x[j] - hk
            fm = np.asarray(fun(xp), dtype=float)
            xp[j] = x[j]
            cols.append((fp - fm) / (2.0 * hk))
        est.append(np.column_stack(cols) if cols else np.zeros((np.asarray(fun(x)).size, 0)))
    return _extrapolate(est, 2)


def hessian(fun, x, scale=1.0):
    """∂²fun/∂x² of a scalar function by plain central differences (step ε^(1/4)·max(|x_j|, s_j),
    error ~1e-8 relative): the Newton-matrix term (C_qᵀλ)_q = ∂²(λᵀC)/∂q² when C_q is automatic."""
    x = np.asarray(x, dtype=float)
    n = x.size
    ref = np.maximum(np.abs(x), np.broadcast_to(np.asarray(scale, dtype=float), x.shape))
    h = 2.0 ** np.round(np.log2(EPS ** 0.25 * ref))
    f0 = float(fun(x))
    H = np.empty((n, n))
    xp = x.copy()

    def at(i, si, j=None, sj=0.0):
        xp[:] = x
        xp[i] += si
        if j is not None:
            xp[j] += sj
        return float(fun(xp))

    for i in range(n):
        H[i, i] = (at(i, 2 * h[i]) - 2.0 * f0 + at(i, -2 * h[i])) / (4.0 * h[i] * h[i])
        for j in range(i):
            H[i, j] = H[j, i] = (at(i, h[i], j, h[j]) - at(i, h[i], j, -h[j])
                                 - at(i, -h[i], j, h[j]) + at(i, -h[i], j, -h[j])) / (4.0 * h[i] * h[j])
    return H


def _scales(model, n):
    s = np.asarray(getattr(model, "coordinate_scale", 1.0), dtype=float)
    return np.broadcast_to(s, (n,)), float(getattr(model, "time_scale", 1.0))


# -- exact paths: complex step and hyper-dual numbers -------------------------------------
# Complex step (Squire & Trapp 1998): f'(x) = Im f(x + ih)/h + O(h²), no subtraction, so
# with h = 1e-20 x the result is exact to rounding.  Hyper-dual numbers
# (cosim.hyperdual) give first and mixed second derivatives exactly.  Each automatic
# term tries its exact paths in order on the model's own numpy code; the first one that
# runs (no TypeError / ComplexWarning, finite) and agrees with differences at the first
# state it is asked for (PROBE_RTOL) is kept for that model instance; otherwise the term
# is computed by differences.  derivative_report(model) lists the choice per term.
ANALYTIC, COMPLEX_STEP, HYPER_DUAL, DIFFERENCES = "analytic", "complex-step", "hyper-dual", "differences"
CS_H = 1e-20
PROBE_RTOL = 1e-6
PROBE_ATOL = 1e-9
TERMS = ("C_q", "C_t", "gamma", "Q_q, Q_v", "(C_q^T lam)_q", "(M a)_q")


def _exact(out):
    """A model result as an array; an object array (a HyperDual leaked into a float path
    or vice versa) or a ComplexWarning is an error (the path is not usable)."""
    arr = np.asarray(out)
    if arr.dtype == object:
        raise TypeError("the model returned an object array")
    return arr


def cs_jacobian(fun, x, scale=1.0):
    """∂fun/∂x by complex steps, one evaluation per column."""
    x = np.asarray(x, dtype=float)
    ref = np.maximum(np.abs(x), np.broadcast_to(np.asarray(scale, dtype=float), x.shape))
    h = CS_H * ref
    cols = []
    for j in range(x.size):
        z = x.astype(complex)
        z[j] += 1j * h[j]
        cols.append(np.imag(_exact(fun(z))).reshape(-1) / h[j])
    if not cols:
        return np.zeros((np.asarray(fun(x)).size, 0))
    return np.column_stack(cols)


def hd_jacobian(fun, x):
    """∂fun/∂x by hyper-dual numbers (the ε₁ part), one evaluation per column."""
    x = np.asarray(x, dtype=float)
    cols = []
    for j in range(x.size):
        e = np.zeros(x.size)
        e[j] = 1.0
        cols.append(hyperdual.parts(fun(hyperdual.seed(x, e, np.zeros(x.size))))[1].reshape(-1))
    if not cols:
        return np.zeros((np.asarray(fun(x)).size, 0))
    return np.column_stack(cols)


def hd_hessian(fun, x):
    """∂²fun/∂x² of a scalar function by hyper-dual numbers, n(n+1)/2 evaluations."""
    x = np.asarray(x, dtype=float)
    n = x.size
    H = np.empty((n, n))
    eye = np.eye(n)
    for i in range(n):
        for j in range(i + 1):
            H[i, j] = H[j, i] = hyperdual.parts(fun(hyperdual.seed(x, eye[i], eye[j])))[3]
    return H


def _store(model, term, path, note):
    model.__dict__.setdefault("_derivative_paths", {})[term] = path
    model.__dict__.setdefault("_derivative_notes", {})[term] = note


def select(model, term, candidates, fallback, reference=None, rtol=PROBE_RTOL, atol=PROBE_ATOL):
    """The value of automatic ``term`` by the path chosen for ``model`` (chosen now, at
    this state, when it is the first call): ``candidates`` are (path, thunk) in order of
    preference, ``fallback`` the differences, ``reference`` the differences the probe
    compares with (default ``fallback``)."""
    chosen = model.__dict__.get("_derivative_paths", {}).get(term)
    if chosen is not None:
        for path, fn in candidates:
            if path == chosen:
                try:
                    with warnings.catch_warnings():  # a float cast of a complex: not exact
                        warnings.simplefilter("error", np.exceptions.ComplexWarning)
                        return np.asarray(_exact(fn()), dtype=float)
                except (TypeError, np.exceptions.ComplexWarning) as exc:
                    # a branch taken only at this state casts to float
                    _store(model, term, DIFFERENCES, f"{path} failed at a later state "
                           f"({type(exc).__name__}: {str(exc)[:60]})")
                    return np.asarray(fallback(), dtype=float)
        return fallback()
    notes, ref = [], None
    for path, fn in candidates:
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("error", np.exceptions.ComplexWarning)
                val = np.asarray(_exact(fn()), dtype=float)
        except Exception as exc:  # the model's code is not safe for this number type
            notes.append(f"{path} not usable ({type(exc).__name__}: {str(exc)[:60]})")
            continue
        if ref is None:
            ref = np.asarray((reference or fallback)(), dtype=float)
        if val.shape != ref.shape or not np.all(np.isfinite(val)):
            notes.append(f"{path} gave shape {val.shape} / non-finite values")
            continue
        err = float(np.max(np.abs(val - ref))) if val.size else 0.0
        size = max(float(np.max(np.abs(val))), float(np.max(np.abs(ref)))) if val.size else 0.0
        if err <= rtol * size + atol:
            _store(model, term, path, "; ".join(notes + [f"{path}: agrees with differences to "
                                                          f"{err:.1e} at the first state"]))
            return val
        notes.append(f"{path} differs from differences by {err:.1e} (code not {path}-safe)")
    _store(model, term, DIFFERENCES, "; ".join(notes))
    if ref is not None and reference is None:
        return ref
    return np.asarray(fallback(), dtype=float)


def paths(model):
    """term → path chosen so far for ``model`` (only the automatic terms already used)."""
    return dict(model.__dict__.get("_derivative_paths", {}))


def constraint_jacobian(model, q, t):
    """C_q(q, t) from C: complex step, hyper-dual or differences (the last result is kept:
    integrators ask for C_q at one point several times per step)."""
    q = np.asarray(q, dtype=float)
    key = (q.tobytes(), float(t), repr(sorted(model.params.items())))
    cache = model.__dict__.get("_auto_cq")
    if cache is not None and cache[0] == key:
        return cache[1].copy()
    s, _ = _scales(model, q.size)
    shape = (model.n_c, q.size)
    Cq = select(model, "C_q", [
        (COMPLEX_STEP, lambda: cs_jacobian(lambda qq: model.constraints(qq, t), q, s).reshape(shape)),
        (HYPER_DUAL, lambda: hd_jacobian(lambda qq: model.constraints(qq, t), q).reshape(shape))],
        lambda: jacobian(lambda qq: model.constraints(qq, t), q, s).reshape(shape))
    model.__dict__["_auto_cq"] = (key, Cq)
    return Cq.copy()


def forget(model):
    """Drop the kept C_q (after a jump map that may change the constraints' mode)."""
    model.__dict__.pop("_auto_cq", None)


def constraint_dt(model, q, t):
    """C_t(q, t) = ∂C/∂t (eq. 3) from C: complex step, hyper-dual or differences."""
    _, T = _scales(model, np.size(q))
    h = CS_H * max(abs(float(t)), T)
    return select(model, "C_t", [
        (COMPLEX_STEP, lambda: np.imag(_exact(model.constraints(q, complex(t, h)))) / h),
        (HYPER_DUAL, lambda: hyperdual.parts(model.constraints(
            np.asarray(q, dtype=float), hyperdual.HyperDual(float(t), 1.0, 0.0)))[1])],
        lambda: first_derivative(lambda s: model.constraints(q, t + s), H_FIRST * T))


def _line_time(model, q, v):
    """τ: the time in which q + σv moves one coordinate scale (bounded by ``time_scale``)."""
    s, T = _scales(model, np.size(q))
    ref = np.maximum(np.abs(q), s)
    speed = np.abs(v) / ref
    fastest = float(np.max(speed)) if speed.size else 0.0
    return T if fastest * T <= 1.0 else 1.0 / fastest


def _gamma_hd(model, q, v, t):
    """−φ''(0), φ(σ) = C(q + σv, t + σ): one hyper-dual evaluation along (v, 1)."""
    qd = hyperdual.seed(q, v)
    td = hyperdual.HyperDual(float(t), 1.0, 1.0)
    return -hyperdual.parts(model.constraints(qd, td))[3]


def _gamma_cs(model, q, v, t, tau):
    """−φ''(0) by the complex step at 45° (Lai & Crassidis 2008):
    Im[φ(hw) + φ(−hw)]/h² = φ'' − φ⁽⁶⁾h⁴/360 + …, w = e^{iπ/4} (no subtraction of φ(0)),
    extrapolated over h, h/2, h/4 (error terms h⁴, h⁸)."""
    w = np.exp(0.25j * np.pi)
    h = _pow2(H_SECOND * tau)
    est = []
    for k in range(LEVELS):
        z = h / 2.0 ** k * w
        f = _exact(model.constraints(q + z * v, t + z)) + _exact(model.constraints(q - z * v, t - z))
        est.append(np.imag(f) / (h / 2.0 ** k) ** 2)
    return -_extrapolate(est, 4)


def gamma(model, q, v, t, analytic_velocity_terms=False):
    """γ(q, v, t), eq. 5 = −φ''(0) with φ(σ) = C(q + σv, t + σ).  With the model's
    C_q and C_t: −Im[C_q v + C_t](q + ihv, t + ih)/h (complex step of the analytic
    velocity terms); otherwise hyper-dual numbers through C, the 45° complex step,
    or differences."""
    q = np.asarray(q, dtype=float)
    v = np.asarray(v, dtype=float)
    tau = _line_time(model, q, v)
    if analytic_velocity_terms:
        def vel(s):
            qs = q + s * v
            return model.constraint_jacobian(qs, t + s) @ v + model.constraint_dt(qs, t + s)
        h = CS_H * tau
        return select(model, "gamma", [
            (COMPLEX_STEP, lambda: -np.imag(_exact(vel(1j * h))) / h),
            (HYPER_DUAL, lambda: _gamma_hd(model, q, v, t))],
            lambda: -first_derivative(vel, H_FIRST * tau))
    return select(model, "gamma", [
        (HYPER_DUAL, lambda: _gamma_hd(model, q, v, t)),
        (COMPLEX_STEP, lambda: _gamma_cs(model, q, v, t, tau))],
        lambda: -second_derivative(lambda s: model.constraints(q + s * v, t + s), H_SECOND * tau))


def gamma_by_differences(model, q, v, t):
    """γ from C by second differences only (the model checker's independent reference)."""
    q = np.asarray(q, dtype=float)
    v = np.asarray(v, dtype=float)
    tau = _line_time(model, q, v)
    return -second_derivative(lambda s: model.constraints(q + s * v, t + s), H_SECOND * tau)


# -- the Newton-matrix terms (cosim.integrators.common asks for them when the model
# returns None) ---------------------------------------------------------------------
def forward_jacobian(fun, x, f0=None, scale=None):
    """Forward-difference Jacobian (the cheap fall-back of the Newton-matrix terms)."""
    x = np.asarray(x, dtype=float)
    f0 = np.asarray(fun(x) if f0 is None else f0, dtype=float)
    jac = np.empty((f0.size, x.size))
    sq = np.sqrt(EPS)
    ref = np.abs(x) if scale is None else np.maximum(np.abs(x), scale)
    for j in range(x.size):
        h = sq * max(ref[j], 1e-3)
        xp = x.copy()
        xp[j] += h
        h = xp[j] - x[j]  # exactly representable step
        jac[:, j] = (np.asarray(fun(xp), dtype=float) - f0) / h
    return jac


def force_jacobians(model, q, v, t, u):
    """(Q_q, Q_v) from Q: complex step, hyper-dual or forward differences."""
    n = np.size(q)
    s, _ = _scales(model, n)
    f = model.forces

    def stack(jq, jv):
        return np.hstack([jq, jv])

    both = select(model, "Q_q, Q_v", [
        (COMPLEX_STEP, lambda: stack(cs_jacobian(lambda qq: f(qq, v, t, u), q, s),
                                     cs_jacobian(lambda vv: f(q, vv, t, u), v, 1.0))),
        (HYPER_DUAL, lambda: stack(hd_jacobian(lambda qq: f(qq, v, t, u), q),
                                   hd_jacobian(lambda vv: f(q, vv, t, u), v)))],
        lambda: stack(forward_jacobian(lambda qq: f(qq, v, t, u), q),
                      forward_jacobian(lambda vv: f(q, vv, t, u), v)),
        reference=lambda: stack(jacobian(lambda qq: f(qq, v, t, u), q, s),
                                jacobian(lambda vv: f(q, vv, t, u), v, 1.0 + np.abs(v))))
    return both[:, :n], both[:, n:]


def constraint_force_jacobian(model, q, lam, t):
    """(C_qᵀλ)_q: through the model's C_q (complex step, hyper-dual, forward differences)
    or, when C_q is automatic, ∂²(λᵀC)/∂q² (hyper-dual, or differences)."""
    from .models.base import provides
    s, _ = _scales(model, np.size(q))
    if provides(model, "constraint_jacobian"):
        g = lambda qq: np.asarray(model.constraint_jacobian(qq, t)).T @ lam  # noqa: E731
        return select(model, "(C_q^T lam)_q", [(COMPLEX_STEP, lambda: cs_jacobian(g, q, s)),
                                               (HYPER_DUAL, lambda: hd_jacobian(g, q))],
                      lambda: forward_jacobian(g, q), reference=lambda: jacobian(g, q, s))
    return select(model, "(C_q^T lam)_q",
                  [(HYPER_DUAL, lambda: hd_hessian(lambda qq: lam @ model.constraints(qq, t), q))],
                  lambda: hessian(lambda qq: lam @ model.constraints(qq, t), q, s), rtol=1e-4)


def mass_jacobian_term(model, q, a, t):
    """(M(q) a)_q: complex step, hyper-dual or forward differences."""
    s, _ = _scales(model, np.size(q))
    g = lambda qq: model.mass(qq, t) @ a  # noqa: E731
    return select(model, "(M a)_q", [(COMPLEX_STEP, lambda: cs_jacobian(g, q, s)),
                                     (HYPER_DUAL, lambda: hd_jacobian(g, q))],
                  lambda: forward_jacobian(g, q), reference=lambda: jacobian(g, q, s))


def derivative_report(model, q=None, v=None, t=0.0, u=None):
    """[(term, path, note)] for every derivative of the multibody protocol: "analytic"
    (the model gives it), "constant" / "none" where it vanishes, else the automatic path,
    chosen here (at the initial state unless q, v, t, u are given) if not chosen yet."""
    from .models.base import provides
    if q is None:
        q, v = model.initial_state()
    q, v = np.asarray(q, dtype=float), np.asarray(v, dtype=float)
    u = model.default_inputs() if u is None else u
    m = model.n_c
    rows = []

    def auto(term, call):
        chosen = model.__dict__.get("_derivative_paths", {}).get(term)
        if chosen is None:
            call()
        rows.append((term, model._derivative_paths[term], model._derivative_notes.get(term, "")))

    for term, method, call in (("C_q", "constraint_jacobian", lambda: constraint_jacobian(model, q, t)),
                               ("C_t", "constraint_dt", lambda: constraint_dt(model, q, t))):
        if not m:
            rows.append((term, "none", "no constraints"))
        elif provides(model, method):
            rows.append((term, ANALYTIC, ""))
        else:
            auto(term, call)
    if not m:
        rows.append(("gamma", "none", "no constraints"))
    elif provides(model, "gamma"):
        rows.append(("gamma", ANALYTIC, ""))
    else:
        auto("gamma", lambda: model.gamma(q, v, t))
    if model.force_jacobians(q, v, t, u) is not None:
        rows.append(("Q_q, Q_v", ANALYTIC, ""))
    else:
        auto("Q_q, Q_v", lambda: force_jacobians(model, q, v, t, u))
    lam = np.linspace(1.0, 2.0, m)
    if not m:
        rows.append(("(C_q^T lam)_q", "none", "no constraints"))
    elif model.constraint_force_jacobian(q, lam, t) is not None:
        rows.append(("(C_q^T lam)_q", ANALYTIC, ""))
    else:
        auto("(C_q^T lam)_q", lambda: constraint_force_jacobian(model, q, lam, t))
    if model.constant_mass:
        rows.append(("(M a)_q", "constant", "constant_mass = True"))
    elif model.mass_jacobian_term(q, v, t) is not None:
        rows.append(("(M a)_q", ANALYTIC, ""))
    else:
        auto("(M a)_q", lambda: mass_jacobian_term(model, q, np.ones(q.size), t))
    return rows


NEWTON_TERMS = ("force_jacobians", "constraint_force_jacobian", "mass_jacobian_term")
ALL_TERMS = ("constraint_jacobian", "constraint_dt", "gamma") + NEWTON_TERMS


def without_analytic_derivatives(cls, terms=("constraint_jacobian", "constraint_dt", "gamma")):
    """A subclass of model class ``cls`` whose ``terms`` fall back to this module
    (tests and ``benchmarks/auto_derivatives.py`` compare it with ``cls``);
    ``terms=ALL_TERMS`` also removes the Newton-matrix terms."""
    from .models.base import MultibodyModel

    body = {t: getattr(MultibodyModel, t) for t in terms}
    return type(cls.__name__ + "Auto", (cls,), body)
