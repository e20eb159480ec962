"""Mechanisms of the tests' own making (not in the library), written as user models
from M, Q and C only (the library derives C_q, C_t, γ): planar parallelogram
linkages whose motion is the pendulum φ'' = -(g/r) sin(φ - φ_g) of one crank angle,
and that equation solved with scipy at rtol 1e-12 as the independent reference.

* :class:`RedundantParallelogram` — a four-bar parallelogram with a third crank
  pivoted off the ground line, attached to the coupler: one constraint is redundant
  wherever the linkage is not singular.  The four-bar alone is singular where the
  cranks are horizontal, the full set is not (the third crank's row has a vertical
  part there): the independent subset chosen at t = 0 without the third crank loses
  rank whenever the cranks pass the horizontal.
* :class:`ParallelogramChain` — N parallelogram four-bars in a row (N + 1 cranks on
  the ground line, N couplers).  Singular where the cranks are horizontal: C_q has
  rank N + 1 there instead of 2N + 1.
"""
from __future__ import annotations

import numpy as np
from scipy.integrate import solve_ivp

from cosim.models import MultibodyModel


class RedundantParallelogram(MultibodyModel):
    """Coordinates: the crank tips P1 = (x1, y1), P2 = (x2, y2) (point masses m; the
    coupler P1-P2 of length a is massless).  Cranks of length r pivot at (0, 0) and
    (a, 0); a third crank of length r pivots at (b, c) and holds the coupler point
    P1 + (b/a)(P2 - P1) + (c/a) R90 (P2 - P1).  Gravity g along +x: the cranks swing
    about the horizontal (φ = 0), crossing it mid-swing."""

    name = "redundant_parallelogram"
    coordinates = ("x1", "y1", "x2", "y2")
    # the third crank first: the IC analysis's pivoted QR keeps the best-conditioned
    # rows, and with this start it drops "coupler" (the four-bar subset stays)
    constraint_names = ("crank1", "crank2", "coupler", "crank3")
    r, a, b, c, m, g = 1.0, 2.0, 1.0, 1.0, 1.0, 9.81
    phi0, omega0 = 1.0, 0.0

    def _p3(self, q):
        a, b, c = self.a, self.b, self.c
        d = q[2:4] - q[0:2]
        return q[0:2] + (b / a) * d + (c / a) * np.array([-d[1], d[0]])

    def mass(self, q, t):
        return self.m * np.eye(4)

    def forces(self, q, v, t, u):
        return self.m * np.array([self.g, 0.0, self.g, 0.0])

    def constraints(self, q, t):
        r, a, b, c = self.r, self.a, self.b, self.c
        p3 = self._p3(q)
        return np.array([q[0] ** 2 + q[1] ** 2 - r * r,
                         (q[2] - a) ** 2 + q[3] ** 2 - r * r,
                         (q[2] - q[0]) ** 2 + (q[3] - q[1]) ** 2 - a * a,
                         (p3[0] - b) ** 2 + (p3[1] - c) ** 2 - r * r])

    def state_at(self, phi, omega):
        r, a = self.r, self.a
        cs, sn = np.cos(phi), np.sin(phi)
        q = np.array([r * cs, r * sn, a + r * cs, r * sn])
        v = omega * np.array([-r * sn, r * cs, -r * sn, r * cs])
        return q, v

    def initial_state(self):
        return self.state_at(self.phi0, self.omega0)

    def crank_angle(self, y):
        return np.arctan2(y[1], y[0])

    def reference(self, times):
        """(φ, φ') at ``times`` from the minimal-coordinate ODE φ'' = -(g/r) sin φ."""
        return pendulum_reference(self.g / self.r, 0.0, self.phi0, self.omega0, times)


class ParallelogramChain(MultibodyModel):
    """N parallelogram four-bars in a row: ground pivots A_i = (i a, 0), i = 0..N,
    cranks of length r with tip masses m at P_i, couplers |P_{i+1} - P_i| = a.
    Gravity g along -y.  Coordinates (x0, y0, ..., xN, yN)."""

    name = "parallelogram_chain"
    r, a, m, g = 1.0, 1.5, 1.0, 9.81
    n_loops = 2
    phi0, omega0 = 0.0, 3.0

    def __init__(self, n_loops=None, phi0=None, omega0=None, **params):
        if n_loops is not None:
            self.n_loops = int(n_loops)
        if phi0 is not None:
            self.phi0 = float(phi0)
        if omega0 is not None:
            self.omega0 = float(omega0)
        n = self.n_loops
        self.coordinates = tuple(f"{xy}{i}" for i in range(n + 1) for xy in "xy")
        self.constraint_names = tuple([f"crank{i}" for i in range(n + 1)] +
                                      [f"coupler{i}" for i in range(n)])
        super().__init__(**params)

    def mass(self, q, t):
        return self.m * np.eye(2 * self.n_loops + 2)

    def forces(self, q, v, t, u):
        f = np.zeros(2 * self.n_loops + 2)
        f[1::2] = -self.m * self.g
        return f

    def constraints(self, q, t):
        n, r, a = self.n_loops, self.r, self.a
        x, y = q[0::2], q[1::2]
        cranks = (x - a * np.arange(n + 1)) ** 2 + y ** 2 - r * r
        couplers = np.diff(x) ** 2 + np.diff(y) ** 2 - a * a
        return np.concatenate([cranks, couplers])

    def state_at(self, phi, omega):
        n, r, a = self.n_loops, self.r, self.a
        cs, sn = np.cos(phi), np.sin(phi)
        q = np.zeros(2 * n + 2)
        v = np.zeros(2 * n + 2)
        q[0::2] = a * np.arange(n + 1) + r * cs
        q[1::2] = r * sn
        v[0::2] = -omega * r * sn
        v[1::2] = omega * r * cs
        return q, v

    def initial_state(self):
        return self.state_at(self.phi0, self.omega0)

    def crank_angle(self, y):
        return np.arctan2(y[1], y[0])

    def reference(self, times):
        """(φ, φ'): all cranks turn alike, φ'' = -(g/r) cos φ (gravity along -y)."""
        return pendulum_reference(self.g / self.r, -0.5 * np.pi, self.phi0, self.omega0, times)


def pendulum_reference(k, phi_g, phi0, omega0, times):
    """φ'' = -k sin(φ - φ_g) from (φ0, ω0), solved by scipy's DOP853 at rtol 1e-12."""
    sol = solve_ivp(lambda t, s: [s[1], -k * np.sin(s[0] - phi_g)], (0.0, float(np.max(times))),
                    [phi0, omega0], method="DOP853", rtol=1e-12, atol=1e-12, dense_output=True)
    return sol.sol(np.asarray(times, dtype=float))


def position_error(model, times, ys):
    """Max over ``times`` of the largest coordinate error against the reference (m)."""
    phi, omega = model.reference(times)
    err = 0.0
    for ph, om, y in zip(phi, omega, ys):
        q, _ = model.state_at(ph, om)
        err = max(err, float(np.max(np.abs(np.asarray(y)[:model.n_q] - q))))
    return err
