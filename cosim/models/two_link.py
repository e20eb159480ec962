"""Planar two-link manipulator in absolute coordinates (seeds 002 and 004).

q = (x1, y1, θ1, x2, y2, θ2): centres of mass and absolute link angles
measured from the +x axis, uniform links (I_i = m_i l_i² / 12),
M = diag(m1, m1, I1, m2, m2, I2), gravity along −y.  Revolute joints at the
ground (origin) and between the links give the 4 constraints of seed 002 §6:

    x1 − (l1/2) cos θ1 = 0,            y1 − (l1/2) sin θ1 = 0,
    x2 − l1 cos θ1 − (l2/2) cos θ2 = 0, y2 − l1 sin θ1 − (l2/2) sin θ2 = 0.

Defaults: the seed 004 benchmark (m1 = 1 kg, m2 = 2 kg, θ1 = π/3,
θ2 = −π/6 absolute, at rest, 10 s).  Seed 004 does not state the link
lengths; we take l1 = 1 m, l2 = 2 m from seed 002 (whose example is
m1 = m2 = 1 kg, θ1 = θ2 = 0, i.e. q0 = [0.5, 0, 0, 2, 0, 0] — pass
``m2=1, theta1_0=0, theta2_0=0``).
Inputs: joint torques τ1 (ground → link 1) and τ2 (link 1 → link 2).
"""
import math

import numpy as np

from .base import Parameter, Signal
from .kernels import KernelModel, MultibodyKernels, no_mass_jacobian

# -- kernels: p = (m1, m2, l1, l2, g); outputs arrive zero-filled --------------


def mass(q, t, p, M):
    """M = diag(m1, m1, m1 l1²/12, m2, m2, m2 l2²/12)."""
    M[0, 0] = M[1, 1] = p[0]
    M[2, 2] = p[0] * p[2] * p[2] / 12.0
    M[3, 3] = M[4, 4] = p[1]
    M[5, 5] = p[1] * p[3] * p[3] / 12.0


def forces(q, v, t, u, p, Q):
    """Gravity along −y; joint torques τ1 (ground → link 1), τ2 (link 1 → link 2)."""
    Q[1] = -p[0] * p[4]
    Q[2] = u[0] - u[1]
    Q[4] = -p[1] * p[4]
    Q[5] = u[1]


def force_jacobians(q, v, t, u, p, Qq, Qv):
    """Q does not depend on q or v."""


def constraints(q, t, p, C):
    l1, l2 = p[2], p[3]
    c1, s1, c2, s2 = math.cos(q[2]), math.sin(q[2]), math.cos(q[5]), math.sin(q[5])
    C[0] = q[0] - 0.5 * l1 * c1
    C[1] = q[1] - 0.5 * l1 * s1
    C[2] = q[3] - l1 * c1 - 0.5 * l2 * c2
    C[3] = q[4] - l1 * s1 - 0.5 * l2 * s2


def constraint_jacobian(q, t, p, G):
    l1, l2 = p[2], p[3]
    c1, s1, c2, s2 = math.cos(q[2]), math.sin(q[2]), math.cos(q[5]), math.sin(q[5])
    G[0, 0] = 1.0
    G[0, 2] = 0.5 * l1 * s1
    G[1, 1] = 1.0
    G[1, 2] = -0.5 * l1 * c1
    G[2, 2] = l1 * s1
    G[2, 3] = 1.0
    G[2, 5] = 0.5 * l2 * s2
    G[3, 2] = -l1 * c1
    G[3, 4] = 1.0
    G[3, 5] = -0.5 * l2 * c2


def constraint_dt(q, t, p, Ct):
    """Scleronomic: C_t = 0."""


def gamma(q, v, t, p, g):
    """Seed 000 eq. 5: γ = −(C_q v)_q v."""
    l1, l2 = p[2], p[3]
    c1, s1, c2, s2 = math.cos(q[2]), math.sin(q[2]), math.cos(q[5]), math.sin(q[5])
    w1, w2 = v[2] * v[2], v[5] * v[5]
    g[0] = -0.5 * l1 * c1 * w1
    g[1] = -0.5 * l1 * s1 * w1
    g[2] = -l1 * c1 * w1 - 0.5 * l2 * c2 * w2
    g[3] = -l1 * s1 * w1 - 0.5 * l2 * s2 * w2


def constraint_force_jacobian(q, lam, t, p, H):
    """(C_qᵀ λ)_q: only the angle columns of C_q depend on q."""
    l1, l2 = p[2], p[3]
    c1, s1, c2, s2 = math.cos(q[2]), math.sin(q[2]), math.cos(q[5]), math.sin(q[5])
    H[2, 2] = 0.5 * l1 * (c1 * lam[0] + s1 * lam[1]) + l1 * (c1 * lam[2] + s1 * lam[3])
    H[5, 5] = 0.5 * l2 * (c2 * lam[2] + s2 * lam[3])


def outputs(q, v, t, u, p, y):
    """Joint angles and rates (θ1, θ2 − θ1, …) and the tip position."""
    t1, t2 = q[2], q[5]
    y[0] = t1
    y[1] = t2 - t1
    y[2] = v[2]
    y[3] = v[5] - v[2]
    y[4] = p[2] * math.cos(t1) + p[3] * math.cos(t2)
    y[5] = p[2] * math.sin(t1) + p[3] * math.sin(t2)


KERNELS = MultibodyKernels(mass, forces, constraints, constraint_jacobian, constraint_dt, gamma,
                           force_jacobians, constraint_force_jacobian, no_mass_jacobian, outputs)


class TwoLink(KernelModel):
    name = "two_link"
    description = "planar two-link manipulator, absolute coordinates (seeds 002, 004)"
    coordinates = ("x1", "y1", "theta1", "x2", "y2", "theta2")
    constraint_names = ("joint1_x", "joint1_y", "joint2_x", "joint2_y")
    parameters = (
        Parameter("m1", 1.0, "kg", "mass of link 1"),
        Parameter("m2", 2.0, "kg", "mass of link 2 (seed 004; seed 002 uses 1)"),
        Parameter("l1", 1.0, "m", "length of link 1"),
        Parameter("l2", 2.0, "m", "length of link 2"),
        Parameter("g", 9.81, "m/s2", "gravitational acceleration (along -y)"),
        Parameter("theta1_0", np.pi / 3, "rad", "initial absolute angle of link 1 from +x"),
        Parameter("theta2_0", -np.pi / 6, "rad", "initial absolute angle of link 2 from +x"),
        Parameter("omega1_0", 0.0, "rad/s", "initial absolute angular velocity of link 1"),
        Parameter("omega2_0", 0.0, "rad/s", "initial absolute angular velocity of link 2"),
    )
    inputs = (
        Signal("tau1", "N.m", "torque of joint 1 (ground on link 1)"),
        Signal("tau2", "N.m", "torque of joint 2 (link 1 on link 2)"),
    )
    outputs = (
        Signal("joint1_angle", "rad", "link 1 angle from +x (= joint 1 angle)"),
        Signal("joint2_angle", "rad", "relative joint 2 angle θ2 − θ1"),
        Signal("joint1_rate", "rad/s", "joint 1 angular rate"),
        Signal("joint2_rate", "rad/s", "relative joint 2 rate θ2' − θ1'"),
        Signal("tip_x", "m", "end-effector x"),
        Signal("tip_y", "m", "end-effector y"),
    )
    constant_mass = True
    conservative = True  # with zero inputs: `cosim check` checks dE/dt = 0
    kernel_set = KERNELS

    positive_parameters = ("m1", "m2", "l1", "l2")

    def kernel_parameters(self):
        p = self.params
        return [p["m1"], p["m2"], p["l1"], p["l2"], p["g"]]

    def initial_state(self):
        p = self.params
        l1, l2 = p["l1"], p["l2"]
        t1, t2, w1, w2 = p["theta1_0"], p["theta2_0"], p["omega1_0"], p["omega2_0"]
        c1, s1, c2, s2 = np.cos(t1), np.sin(t1), np.cos(t2), np.sin(t2)
        q = np.array([0.5 * l1 * c1, 0.5 * l1 * s1, t1,
                      l1 * c1 + 0.5 * l2 * c2, l1 * s1 + 0.5 * l2 * s2, t2])
        v = np.array([-0.5 * l1 * s1 * w1, 0.5 * l1 * c1 * w1, w1,
                      -l1 * s1 * w1 - 0.5 * l2 * s2 * w2, l1 * c1 * w1 + 0.5 * l2 * c2 * w2, w2])
        return q, v

    def potential_energy(self, q, t=0.0):
        p = self.params
        return p["g"] * (p["m1"] * q[1] + p["m2"] * q[4])
