"""Two-body planar pendulum in natural (Cartesian point) coordinates, seed 003 §4-5.

q = (x1, y1, x2, y2): the hinge points O1 (end of body 1) and O2 (end of
body 2); O0 = (0, 0) is fixed (seed 003 eq. 26).  Body i runs from O_{i−1}
to O_i, u_i = (r_i − r_{i−1}) / l_i (eq. 13) and the constraints are
(eq. 15, 27)

    Φ_i = ½ (u_iᵀ u_i − 1) = 0,   i = 1, 2.

Uniform rods: centre of mass at (l_i/2, 0) in the body frame, J_Gi =
m_i l_i²/12 (eq. 33); gravity g along −y, V = Σ m_i g y_Gi (eq. 29-30).

Mass matrix.  The seed's body mass matrix (eq. 19-21) is
M̄_i = M̄_Gi + M̄_Ri with M̄_Gi = m_i/4 [[I, I], [I, I]] (the OCR'd eq. 20
lacks a 1/l_i² factor — it follows from r_G = (r_{i−1} + r_i)/2) and the
q-dependent rotary part M̄_Ri = J_Gi D_i1ᵀ v_i v_iᵀ D_i1 with v_i = D_i2 x_i.
On the constraint manifold all M_γ = M + γ(I − S) give the same motion
(eq. 7-10).  ``mass`` returns the constant member of this family obtained
with γ_i = J_Gi per body (eq. 25):  M̄_i = m_i/6 [[2I, I], [I, 2I]], the
classical natural-coordinate rod matrix.  ``modified_mass(q, gamma)``
gives the seed's M_γ (eq. 25) with one common γ (γ = 0: the seed's
original M), and ``gamma_R`` / ``gamma_T`` its eq. 31-32 choices
(γ_T = 0.916667 for the default data, as quoted in seed 003 §5).

Initial condition (eq. 34): q0 = −[0, 2, 0, 5], q'0 = −[6π, 0, 15π, 0],
i.e. both links hanging down and rotating at −3π rad/s.
"""
import math

import numpy as np

from .base import Parameter, Signal
from .kernels import KernelModel, MultibodyKernels, no_mass_jacobian

# -- kernels: p = (m1, m2, l1, l2, g); outputs arrive zero-filled ----------------------


def mass(q, t, p, M):
    """Constant natural-coordinate rod matrix, γ_i = J_Gi in eq. 25: m_i/6 [[2I, I], [I, 2I]]."""
    M[0, 0] = M[1, 1] = p[0] / 3.0 + p[1] / 3.0
    M[0, 2] = M[2, 0] = M[1, 3] = M[3, 1] = p[1] / 6.0
    M[2, 2] = M[3, 3] = p[1] / 3.0


def forces(q, v, t, u, p, Q):
    """Gravity on the rods' centres (eq. 29-30): half of each rod's weight per end point."""
    Q[1] = -0.5 * (p[0] + p[1]) * p[4]
    Q[3] = -0.5 * p[1] * p[4]


def force_jacobians(q, v, t, u, p, Qq, Qv):
    """Constant forces: zero."""


def constraints(q, t, p, C):
    """Φ_i = ½ (u_iᵀ u_i − 1), u_i = (r_i − r_{i−1}) / l_i (eq. 13, 15, 27)."""
    d0, d1 = q[2] - q[0], q[3] - q[1]
    C[0] = 0.5 * ((q[0] ** 2 + q[1] ** 2) / p[2] ** 2 - 1.0)
    C[1] = 0.5 * ((d0 * d0 + d1 * d1) / p[3] ** 2 - 1.0)


def constraint_jacobian(q, t, p, G):
    l22 = p[3] ** 2
    d0, d1 = (q[2] - q[0]) / l22, (q[3] - q[1]) / l22
    G[0, 0] = q[0] / p[2] ** 2
    G[0, 1] = q[1] / p[2] ** 2
    G[1, 0] = -d0
    G[1, 1] = -d1
    G[1, 2] = d0
    G[1, 3] = d1


def constraint_dt(q, t, p, Ct):
    """Scleronomic: C_t = 0."""


def gamma(q, v, t, p, g):
    """C_q q'' = −(C_q v)_q v = −|u_i'|² (per unit length²)."""
    dv0, dv1 = v[2] - v[0], v[3] - v[1]
    g[0] = -(v[0] ** 2 + v[1] ** 2) / p[2] ** 2
    g[1] = -(dv0 * dv0 + dv1 * dv1) / p[3] ** 2


def constraint_force_jacobian(q, lam, t, p, H):
    a, b = lam[0] / p[2] ** 2, lam[1] / p[3] ** 2
    H[0, 0] = H[1, 1] = a + b
    H[0, 2] = H[2, 0] = H[1, 3] = H[3, 1] = -b
    H[2, 2] = H[3, 3] = b


def outputs(q, v, t, u, p, y):
    """Absolute angles of the two rods from the downward vertical; bob positions."""
    y[0] = math.atan2(q[0], -q[1])
    y[1] = math.atan2(q[2] - q[0], -(q[3] - q[1]))
    y[2] = q[2]
    y[3] = q[3]


KERNELS = MultibodyKernels(mass, forces, constraints, constraint_jacobian, constraint_dt, gamma,
                           force_jacobians, constraint_force_jacobian, no_mass_jacobian, outputs)


class DoublePendulumNatural(KernelModel):
    name = "double_pendulum_natural"
    description = "two-body planar pendulum, natural coordinates (seed 003 §4-5)"
    coordinates = ("x1", "y1", "x2", "y2")
    constraint_names = ("length1", "length2")
    parameters = (
        Parameter("m1", 1.0, "kg", "mass of body 1"),
        Parameter("m2", 1.0, "kg", "mass of body 2"),
        Parameter("l1", 2.0, "m", "length of body 1"),
        Parameter("l2", 3.0, "m", "length of body 2"),
        Parameter("g", 9.81, "m/s2", "gravitational acceleration (along -y)"),
        Parameter("theta1_0", 0.0, "rad", "initial angle of body 1 from the downward vertical"),
        Parameter("theta2_0", 0.0, "rad", "initial angle of body 2 from the downward vertical"),
        Parameter("omega1_0", -3.0 * np.pi, "rad/s", "initial angular velocity of body 1"),
        Parameter("omega2_0", -3.0 * np.pi, "rad/s", "initial (absolute) angular velocity of body 2"),
    )
    outputs = (
        Signal("theta1", "rad", "angle of body 1 from the downward vertical"),
        Signal("theta2", "rad", "angle of body 2 from the downward vertical"),
        Signal("x2", "m", "x of the tip O2"),
        Signal("y2", "m", "y of the tip O2"),
    )
    constant_mass = True
    conservative = True  # with zero inputs: `cosim check` checks dE/dt = 0

    positive_parameters = ("m1", "m2", "l1", "l2")

    kernel_set = KERNELS

    def kernel_parameters(self):
        p = self.params
        return [p["m1"], p["m2"], p["l1"], p["l2"], p["g"]]

    def setup(self):
        super().setup()
        p = self.params
        self.J = (p["m1"] * p["l1"] ** 2 / 12.0, p["m2"] * p["l2"] ** 2 / 12.0)

    def initial_state(self):
        p = self.params
        l1, l2 = p["l1"], p["l2"]
        t1, t2, w1, w2 = p["theta1_0"], p["theta2_0"], p["omega1_0"], p["omega2_0"]
        r1 = l1 * np.array([np.sin(t1), -np.cos(t1)])
        r2 = r1 + l2 * np.array([np.sin(t2), -np.cos(t2)])
        v1 = l1 * w1 * np.array([np.cos(t1), np.sin(t1)])
        v2 = v1 + l2 * w2 * np.array([np.cos(t2), np.sin(t2)])
        return np.concatenate([r1, r2]), np.concatenate([v1, v2])

    # -- seed 003 modified mass matrix -------------------------------------------------
    def modified_mass(self, q, gamma):
        """M_γ of seed 003 eq. 25 assembled over both bodies (common γ).

        Body i: M̄_i,γ = M̄_Gi + (1 − γ/J_i) M̄_Ri + (γ/l_i²) [[I, −I], [−I, I]],
        M̄_Ri = J_i D1ᵀ v vᵀ D1, v = D2 x_i (eq. 14, 21); the fixed point O0
        is removed from body 1.  γ = J_i reproduces ``mass``.
        """
        p = self.params
        out = np.zeros((4, 4))
        pts = [np.zeros(2), q[:2], q[2:]]
        for i, (m, l, J) in enumerate(((p["m1"], p["l1"], self.J[0]),
                                       (p["m2"], p["l2"], self.J[1]))):
            x = np.concatenate([pts[i], pts[i + 1]])
            D1 = np.array([[-1.0, 0.0, 1.0, 0.0], [0.0, -1.0, 0.0, 1.0]]) / l
            D2 = np.array([[0.0, 1.0, 0.0, -1.0], [-1.0, 0.0, 1.0, 0.0]]) / l
            vv = D2 @ x
            MG = (m / 4.0) * np.kron(np.ones((2, 2)), np.eye(2))
            MR = J * np.outer(D1.T @ vv, D1.T @ vv)
            Mi = MG + (1.0 - gamma / J) * MR + gamma * (D1.T @ D1)
            if i == 0:
                out[:2, :2] += Mi[2:, 2:]
            else:
                out += Mi
        return out

    def natural_chain(self):
        """Bodies as (index of x of the first point or None for O0, index of x of
        the second point, length, J_G) — the hook the symplectic integrator reads."""
        p = self.params
        return [(None, 0, p["l1"], self.J[0]), (0, 2, p["l2"], self.J[1])]

    def gamma_R(self):
        """γ_R = mean moment of inertia (seed 003 eq. 31)."""
        return 0.5 * (self.J[0] + self.J[1])

    def gamma_T(self):
        """γ_T = γ_R + Tr(M̄_G) / (2N) (seed 003 eq. 32), M̄_G assembled on q."""
        p = self.params
        trace = 0.5 * p["m1"] + p["m2"]  # m1/4·2 (O1 only) + m2/4·4
        return self.gamma_R() + trace / 4.0

    # -- outputs / energy --------------------------------------------------------------
    def potential_energy(self, q, t=0.0):
        p = self.params
        return p["g"] * (0.5 * p["m1"] * q[1] + 0.5 * p["m2"] * (q[1] + q[3]))
