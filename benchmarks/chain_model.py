"""An N-link planar pendulum chain in absolute coordinates — the scaling model of
``benchmarks/scaling.py`` (issue 13).

Link i (0-based) has q = (x_i, y_i, θ_i): its centre of mass and its angle from
+x; uniform links of mass m and length l (I = m l²/12), gravity along −y, no
inputs.  Revolute joints: link 0 to the ground at the origin, link i to link
i − 1 end to end (2 constraints each, seed 000 eq. 2):

    x_0 − (l/2) cos θ_0 = 0,                       y_0 − (l/2) sin θ_0 = 0,
    x_i − x_{i−1} − (l/2)(cos θ_{i−1} + cos θ_i) = 0,  (same with y, sin).

n = 3N coordinates, m = 2N constraints; the mass matrix is constant and
diagonal, C_q is banded.  Kernels (p = (m, l, g)) loop over the links, so one
compilation serves every N.  Start: the chain horizontal along +x, at rest.
"""
import math

import numpy as np

from cosim.models.base import Parameter
from cosim.models.kernels import KernelModel, MultibodyKernels, no_mass_jacobian


def mass(q, t, p, M):
    for i in range(q.shape[0] // 3):
        M[3 * i, 3 * i] = M[3 * i + 1, 3 * i + 1] = p[0]
        M[3 * i + 2, 3 * i + 2] = p[0] * p[1] * p[1] / 12.0


def forces(q, v, t, u, p, Q):
    for i in range(q.shape[0] // 3):
        Q[3 * i + 1] = -p[0] * p[2]


def force_jacobians(q, v, t, u, p, Qq, Qv):
    """Gravity only: Q does not depend on q or v."""


def constraints(q, t, p, C):
    h = 0.5 * p[1]
    for i in range(q.shape[0] // 3):
        C[2 * i] = q[3 * i] - h * math.cos(q[3 * i + 2])
        C[2 * i + 1] = q[3 * i + 1] - h * math.sin(q[3 * i + 2])
        if i > 0:
            C[2 * i] -= q[3 * i - 3] + h * math.cos(q[3 * i - 1])
            C[2 * i + 1] -= q[3 * i - 2] + h * math.sin(q[3 * i - 1])


def constraint_jacobian(q, t, p, G):
    h = 0.5 * p[1]
    for i in range(q.shape[0] // 3):
        c, s = math.cos(q[3 * i + 2]), math.sin(q[3 * i + 2])
        G[2 * i, 3 * i] = 1.0
        G[2 * i, 3 * i + 2] = h * s
        G[2 * i + 1, 3 * i + 1] = 1.0
        G[2 * i + 1, 3 * i + 2] = -h * c
        if i > 0:
            cp, sp = math.cos(q[3 * i - 1]), math.sin(q[3 * i - 1])
            G[2 * i, 3 * i - 3] = -1.0
            G[2 * i, 3 * i - 1] = h * sp
            G[2 * i + 1, 3 * i - 2] = -1.0
            G[2 * i + 1, 3 * i - 1] = -h * cp


def constraint_dt(q, t, p, Ct):
    """Scleronomic: C_t = 0."""


def gamma(q, v, t, p, g):
    """Seed 000 eq. 5: γ = −(C_q v)_q v."""
    h = 0.5 * p[1]
    for i in range(q.shape[0] // 3):
        w = v[3 * i + 2] * v[3 * i + 2]
        g[2 * i] = -h * math.cos(q[3 * i + 2]) * w
        g[2 * i + 1] = -h * math.sin(q[3 * i + 2]) * w
        if i > 0:
            wp = v[3 * i - 1] * v[3 * i - 1]
            g[2 * i] -= h * math.cos(q[3 * i - 1]) * wp
            g[2 * i + 1] -= h * math.sin(q[3 * i - 1]) * wp


def constraint_force_jacobian(q, lam, t, p, H):
    """(C_qᵀ λ)_q: the angle column of link i appears in joints i and i + 1."""
    h = 0.5 * p[1]
    N = q.shape[0] // 3
    for i in range(N):
        c, s = math.cos(q[3 * i + 2]), math.sin(q[3 * i + 2])
        d = c * lam[2 * i] + s * lam[2 * i + 1]
        if i + 1 < N:
            d += c * lam[2 * i + 2] + s * lam[2 * i + 3]
        H[3 * i + 2, 3 * i + 2] = h * d


KERNELS = MultibodyKernels(mass, forces, constraints, constraint_jacobian, constraint_dt, gamma,
                           force_jacobians, constraint_force_jacobian, no_mass_jacobian)


def chain_model(n_links):
    """A model class for a chain of ``n_links`` links (instantiate it)."""
    N = int(n_links)

    class Chain(KernelModel):
        name = f"chain{N}"
        description = f"planar {N}-link pendulum chain, absolute coordinates (scaling benchmark)"
        coordinates = tuple(f"{c}{i}" for i in range(N) for c in ("x", "y", "theta"))
        constraint_names = tuple(f"joint{i}_{c}" for i in range(N) for c in ("x", "y"))
        parameters = (Parameter("m", 1.0, "kg", "mass of each link"),
                      Parameter("l", 1.0, "m", "length of each link"),
                      Parameter("g", 9.81, "m/s2", "gravitational acceleration (along -y)"))
        constant_mass = True
        kernel_set = KERNELS
        positive_parameters = ("m", "l")

        def kernel_parameters(self):
            p = self.params
            return [p["m"], p["l"], p["g"]]

        def initial_state(self):
            l = self.params["l"]
            q = np.zeros(3 * N)
            q[0::3] = l * (0.5 + np.arange(N))
            return q, np.zeros(3 * N)

        def potential_energy(self, q, t=0.0):
            return self.params["m"] * self.params["g"] * float(np.sum(q[1::3]))

    return Chain
