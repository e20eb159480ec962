"""Nonholonomic rows for the compiled generalized-α, index 3 and GGL (seed 000
§7, eqs. 93-94): the hooks of :mod:`cosim.integrators.ga_kernel`, written for
G = B(q, t) v + b(q, t) = 0.

Pasted by :mod:`cosim.jit` after ``ga_kernel`` into the entry of a model that
declares nonholonomic rows only (``extras=``); its definitions replace the
empty hooks of the same names there and nothing else, so every other model's
entry (and its cached machine code) keeps the holonomic-only kernel.  Same
algorithm as :meth:`GeneralizedAlpha._attempt` and
:meth:`GeneralizedAlphaIndex2._attempt` with ``_n_g`` > 0:

* residual: Bᵀν in the force rows, rows (B v + b)/(γ h) last;
* iteration matrix: (Bᵀν)_q in K, Bᵀ under ν, the G rows
  B + (β/γ) h (B v + b)_q (index 3) or (β/γ)(B v + b)_q under x and B under y (GGL);
* norms, consistent accelerations (B q'' = γ_G) and the velocity projection
  (B Δv = 0) through the rows [C_q; B] (``_nh_rows``, ``_nh_gamma``).

Record: ``I[I_M]`` = m (holonomic rows); λ in S holds [λ; ν] (m + n_g, as the
reference's ``lam``); the last slot of ``I`` (after the pivots) holds n_g.
Kernels ``fns[10]`` … ``fns[14]``: :data:`cosim.models.kernels.NONHOLONOMIC_FIELDS`.
"""
import numpy as np


def n_nonholonomic(I):
    """n_g, kept in the last slot of I."""
    return I[I.shape[0] - 1]


def _nh_rows(fns, p, m, q, t, Cq):
    """B(q, t) into rows m: of Cq (zero-filled by the caller)."""
    fns[10](q, t, p, Cq[m:])


def _nh_gamma(fns, p, m, q, v, t, g):
    """γ_G into g[m:] (zero-filled by the caller)."""
    fns[12](q, v, t, p, g[m:])


def _nh_residual(fns, p, n, m, t1, q, v, lam_hat, delta, c_nu, r_force, gh, F):
    """F[r_force:r_force + n] += Bᵀν, last n_g rows of F = (B v + b)/(γ h)."""
    ng = lam_hat.shape[0] - m
    r_g = F.shape[0] - ng
    B = np.zeros((ng, n))
    fns[10](q, t1, p, B)
    b = np.zeros(ng)
    fns[11](q, t1, p, b)
    for j in range(n):
        s = 0.0
        for k in range(ng):
            s += B[k, j] * (lam_hat[m + k] + delta[c_nu + k])
        F[r_force + j] += s
    inv_gh = 1.0 / gh
    for k in range(ng):
        s = 0.0
        for j in range(n):
            s += B[k, j] * v[j]
        F[r_g + k] = inv_gh * (s + b[k])


def _nh_jacobian(fns, p, n, m, t1, q, v, lam_hat, delta, c_nu, r_force, c_y, cg, K, J):
    """K += (Bᵀν)_q; J[force rows, ν columns] = Bᵀ; last n_g rows: index 3
    (c_y < 0) B + cg (B v + b)_q, GGL cg (B v + b)_q under x and B under y."""
    ng = lam_hat.shape[0] - m
    r_g = J.shape[0] - ng
    nu = np.empty(ng)
    for k in range(ng):
        nu[k] = lam_hat[m + k] + delta[c_nu + k]
    H = np.zeros((n, n))
    fns[13](q, nu, t1, p, H)
    for i in range(n):
        for j in range(n):
            K[i, j] += H[i, j]
    B = np.zeros((ng, n))
    fns[10](q, t1, p, B)
    Jv = np.zeros((ng, n))
    fns[14](q, v, t1, p, Jv)
    for k in range(ng):
        for j in range(n):
            J[r_force + j, c_nu + k] = B[k, j]
            if c_y < 0:
                J[r_g + k, j] = B[k, j] + cg * Jv[k, j]
            else:
                J[r_g + k, j] = cg * Jv[k, j]
                J[r_g + k, c_y + j] = B[k, j]
