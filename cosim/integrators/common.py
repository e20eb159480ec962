"""Shared numerical helpers: error weights, finite-difference
Jacobians, consistent accelerations (seed 000 eq. 10), LU with a
singularity check."""

import numpy as np

from .. import derivatives
from ..errors import SingularMatrixError
from .dense_lu import scaled_pivot_ratio

EPS = np.finfo(float).eps
_LAPACK = []   # [dgetrf, dgetrs] once the first LU needs them (cosim.lapack: without scipy.linalg)


def _lapack():
    if not _LAPACK:
        from ..lapack import function  # noqa: PLC0415
        _LAPACK[:] = (function("dgetrf"), function("dgetrs"))
    return _LAPACK


def error_weights(y, rtol, atol):
    """W_k = RTOL·|y_k| + ATOL_k (seed 000 eq. 35; the norms in them are
    :mod:`.kernel_common`'s)."""
    return rtol * np.abs(y) + atol


# forward-difference Jacobian: one helper for the integrators and cosim.derivatives
fd_jacobian = derivatives.forward_jacobian


def force_jacobians(model, q, v, t, u):
    """(Q_q, Q_v) analytic if the model gives them, else automatic
    (:func:`cosim.derivatives.force_jacobians`: complex step, hyper-dual or differences)."""
    jac = model.force_jacobians(q, v, t, u)
    if jac is not None:
        return jac
    return derivatives.force_jacobians(getattr(model, "full_model", model), q, v, t, u)


def constraint_force_jacobian(model, q, lam, t):
    """(C_q^T λ)_q analytic if given, else automatic (complex step / hyper-dual / differences)."""
    if lam.size == 0:
        return np.zeros((q.size, q.size))
    jac = model.constraint_force_jacobian(q, lam, t)
    if jac is not None:
        return jac
    full = getattr(model, "full_model", None)  # cosim.ic.ReducedConstraints view
    if full is not None:
        lam_full = np.zeros(full.n_c)
        lam_full[model._keep] = lam
        return derivatives.constraint_force_jacobian(full, q, lam_full, t)
    return derivatives.constraint_force_jacobian(model, q, lam, t)


def mass_term_jacobian(model, q, a, t):
    """(M(q) a)_q: zero for constant mass, analytic if given, else automatic."""
    if model.constant_mass:
        return None
    jac = model.mass_jacobian_term(q, a, t)
    if jac is not None:
        return jac
    return derivatives.mass_jacobian_term(getattr(model, "full_model", model), q, a, t)


def lu_factor(matrix, what="iteration matrix", t=None, h=None):
    """LU factorisation that raises :class:`SingularMatrixError` naming the matrix."""
    if not np.isfinite(matrix).all():
        raise SingularMatrixError(f"{what} contains NaN/inf at t={t}, h={h}", t=t, h=h,
                                  cause="non-finite matrix")
    # LAPACK getrf directly: the numbers of scipy.linalg.lu_factor without its
    # ~25 µs wrapper overhead (and without its LinAlgWarning: checked below)
    lu, piv, info = _lapack()[0](matrix)
    d = np.abs(np.diagonal(lu))
    if d.size and (d.min() <= 1e-14 * max(d.max(), 1e-300)):
        ratio = d.min() / max(d.max(), 1e-300)
        if info == 0:  # the same factors judged scale-free (a heavy body is not singular)
            ratio = scaled_pivot_ratio(lu, piv)
        if ratio <= 1e-14:
            raise SingularMatrixError(
                f"{what} is numerically singular at t={t}, h={h} "
                f"(pivot ratio {ratio:.1e})", t=t, h=h, cause="singular matrix")
    return lu, piv


def lu_solve(factor, rhs):
    """Solve with an ``lu_factor`` result.  Calls LAPACK getrs directly: same
    numbers as ``scipy.linalg.lu_solve`` without its ~8 µs Python overhead."""
    x, info = _lapack()[1](factor[0], factor[1], rhs)
    if info != 0:
        raise ValueError(f"getrs failed with info={info}")
    return x


def augmented_matrix(M, Cq):
    """[[M, C_qᵀ], [C_q, 0]]."""
    n, m = M.shape[0], Cq.shape[0]
    K = np.zeros((n + m, n + m))
    K[:n, :n] = M
    K[:n, n:] = Cq.T
    K[n:, :n] = Cq
    return K


def consistent_accelerations(model, t, q, v, u, M=None, Cq=None):
    """Solve [[M, C_qᵀ], [C_q, 0]] [q''; λ] = [Q; γ] (seed 000 eq. 10).

    Nonholonomic constraints B v + b = 0 add rows B q'' = γ_G when the model
    provides ``nonholonomic_gamma``.  ``M``, ``Cq``: the model's values at (q, t)
    when the caller has them already.
    """
    M = model.mass(q, t) if M is None else M
    Q = model.forces(q, v, t, u)
    Cq = model.constraint_jacobian(q, t) if Cq is None else Cq
    gam = model.gamma(q, v, t)
    n_g = len(model.nonholonomic_names)
    if n_g:
        B = model.nonholonomic_matrix(q, t)
        Cq = np.vstack([Cq, B])
        gam = np.concatenate([gam, model.nonholonomic_gamma(q, v, t)])
    n = q.size
    K = augmented_matrix(M, Cq)
    rhs = np.concatenate([Q, gam])
    sol = lu_solve(lu_factor(K, "[[M, C_q^T], [C_q, 0]]", t=t), rhs)
    return sol[:n], sol[n:]


def hermite_interpolate(t, t0, t1, y0, f0, y1, f1):
    """Cubic Hermite interpolant on [t0, t1] from values y and slopes f at both ends."""
    h = t1 - t0
    s = (float(t) - t0) / h
    h00 = (1 + 2 * s) * (1 - s) ** 2
    h10 = s * (1 - s) ** 2
    h01 = s * s * (3 - 2 * s)
    h11 = s * s * (s - 1)
    return h00 * y0 + h10 * h * f0 + h01 * y1 + h11 * h * f1


def last_step_dense_output(integ, t, slope0, slope1):
    """Dense output over an integrator's last step [t_prev, t]: its end values
    at the ends, else the cubic Hermite from the slopes ``integ._dense[slope0]``
    and ``integ._dense[slope1]`` stored by the step."""
    return last_step_interpolant(integ, slope0, slope1)(t)


def last_step_interpolant(integ, slope0, slope1):
    """:func:`last_step_dense_output` as a function of t over the last step as it is
    now, the record read once (``Integrator.step_interpolant``: an event located on
    the step evaluates it many times)."""
    t0, t1 = integ.t_prev, integ.t
    d = integ._dense   # (read once: a record view builds it)
    if t1 == t0 or d is None:
        return step_interpolant(t0, t1, None, integ.y, None)
    y0, y1, f0, f1 = integ.y_prev, integ.y, d[slope0], d[slope1]

    def inner_j(t, j):  # component j alone: the same operations on its floats
        return hermite_interpolate(t, t0, t1, float(y0[j]), float(f0[j]), float(y1[j]), float(f1[j]))
    return step_interpolant(t0, t1, y0, y1, lambda t: hermite_interpolate(t, t0, t1, y0, f0, y1, f1),
                            inner_j)


def qv_hermite_interpolant(t0, t1, y0, y1, a0, a1, n):
    """A second-order method's dense output over its step from (t0, y0 = [q0, v0]) to
    (t1, y1): cubic Hermite in q from (q, q') and in v from (q', q'') at both ends (a0,
    a1 the q'' there), as a function of t with ``component(t, j)`` (entry j alone, the
    same operations on its floats)."""
    q0, v0, q1, v1 = y0[:n], y0[n:], y1[:n], y1[n:]

    def at(t):
        return np.concatenate([hermite_interpolate(t, t0, t1, q0, v0, q1, v1),
                               hermite_interpolate(t, t0, t1, v0, a0, v1, a1)])

    def component(t, j):
        if j < n:
            return hermite_interpolate(t, t0, t1, float(q0[j]), float(v0[j]), float(q1[j]), float(v1[j]))
        j -= n
        return hermite_interpolate(t, t0, t1, float(v0[j]), float(a0[j]), float(v1[j]), float(a1[j]))
    at.component = component
    return at


def step_interpolant(t0, t1, y0, y1, inner, inner_j=None):
    """A step's dense output as a function of t: y0 and y1 (copies) at its ends t0 and
    t1, ``inner(t)`` (t a float) between; ``inner`` None: y1 everywhere (no step).
    Its ``component(t, j)``: entry j of it as a float, from ``inner_j(t, j)`` where
    given (an event located on one coordinate evaluates no other)."""
    if inner is None:
        def at(t):
            return y1.copy()

        def component(t, j):
            return float(y1[j])
    else:
        def at(t):
            t = float(t)
            if t == t1:
                return y1.copy()
            if t == t0:
                return y0.copy()
            return inner(t)

        def component(t, j):
            if inner_j is None:
                return float(at(t)[j])
            t = float(t)
            if t == t1:
                return float(y1[j])
            if t == t0:
                return float(y0[j])
            return inner_j(t, j)
    at.component = component
    return at
