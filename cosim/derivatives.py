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
    """∂fun/∂x column by column (``first_derivative`` along each coordinate)."""
    x = np.asarray(x, dtype=float)
    ref = np.maximum(np.abs(x), np.broadcast_to(np.asarray(scale, dtype=float), x.shape))
    cols = []
    for j in range(x.size):
        def phi(s, j=j):
            xp = x.copy()
            xp[j] += s
            return fun(xp)
        cols.append(first_derivative(phi, h * ref[j], levels))
    if not cols:
        return np.zeros((np.asarray(fun(x)).size, 0))
    return np.column_stack(cols)


def _scales(model, n):
    s = np.asarray(getattr(model, "coordinate_scale", 1.0), dtype=float)
    return np.broadcast_to(s, (n,)), float(getattr(model, "time_scale", 1.0))


def constraint_jacobian(model, q, t):
    """C_q(q, t) from C by differences."""
    q = np.asarray(q, dtype=float)
    s, _ = _scales(model, q.size)
    return jacobian(lambda qq: model.constraints(qq, t), q, s).reshape(model.n_c, q.size)


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
