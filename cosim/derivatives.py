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

import numpy as np

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


def constraint_jacobian(model, q, t):
    """C_q(q, t) from C by differences (the last result is kept: integrators ask
    for C_q at one point several times per step)."""
    q = np.asarray(q, dtype=float)
    key = (q.tobytes(), float(t), repr(sorted(model.params.items())))
    cache = model.__dict__.get("_auto_cq")
    if cache is not None and cache[0] == key:
        return cache[1].copy()
    s, _ = _scales(model, q.size)
    Cq = jacobian(lambda qq: model.constraints(qq, t), q, s).reshape(model.n_c, q.size)
    model.__dict__["_auto_cq"] = (key, Cq)
    return Cq.copy()


def forget(model):
    """Drop the kept C_q (after a jump map that may change the constraints' mode)."""
    model.__dict__.pop("_auto_cq", None)


def constraint_dt(model, q, t):
    """C_t(q, t) = ∂C/∂t (eq. 3) from C by differences."""
    _, T = _scales(model, np.size(q))
    return first_derivative(lambda s: model.constraints(q, t + s), H_FIRST * T)


def _line_time(model, q, v):
    """τ: the time in which q + σv moves one coordinate scale (bounded by ``time_scale``)."""
    s, T = _scales(model, np.size(q))
    ref = np.maximum(np.abs(q), s)
    speed = np.abs(v) / ref
    fastest = float(np.max(speed)) if speed.size else 0.0
    return T if fastest * T <= 1.0 else 1.0 / fastest


def gamma(model, q, v, t, analytic_velocity_terms=False):
    """γ(q, v, t), eq. 5, as −φ''(0) with φ(σ) = C(q + σv, t + σ); with
    ``analytic_velocity_terms`` as −d/dσ [C_q v + C_t] along the same line."""
    q = np.asarray(q, dtype=float)
    v = np.asarray(v, dtype=float)
    tau = _line_time(model, q, v)
    if analytic_velocity_terms:
        def vel(s):
            qs = q + s * v
            return model.constraint_jacobian(qs, t + s) @ v + model.constraint_dt(qs, t + s)
        return -first_derivative(vel, H_FIRST * tau)
    return -second_derivative(lambda s: model.constraints(q + s * v, t + s), H_SECOND * tau)


def without_analytic_derivatives(cls, terms=("constraint_jacobian", "constraint_dt", "gamma")):
    """A subclass of model class ``cls`` whose ``terms`` fall back to this module
    (tests and ``benchmarks/auto_derivatives.py`` compare it with ``cls``)."""
    from .models.base import MultibodyModel

    body = {t: getattr(MultibodyModel, t) for t in terms}
    return type(cls.__name__ + "Auto", (cls,), body)
