"""Ideal planar pendulum in Cartesian coordinates, index 3 (seed 001 §3.8).

q = (x, y), constraint x² + y² − l² = 0 (eq. 3.48), gravity along −y.
Input: a torque about the pivot (N·m) applied as the tangential force
τ/l² · (−y, x), plus horizontal/vertical forces on the bob.
"""
import math

import numpy as np

from .base import Parameter, Signal
from .kernels import KernelModel, MultibodyKernels, no_mass_jacobian

# -- kernels: p = (m, l, g); outputs arrive zero-filled ------------------------


def mass(q, t, p, M):
    M[0, 0] = M[1, 1] = p[0]


def forces(q, v, t, u, p, Q):
    """Gravity, the pivot torque τ as the tangential force τ/l² (−y, x), bob forces."""
    s = u[0] / (p[1] * p[1])
    Q[0] = u[1] - s * q[1]
    Q[1] = u[2] - p[0] * p[2] + s * q[0]


def force_jacobians(q, v, t, u, p, Qq, Qv):
    s = u[0] / (p[1] * p[1])
    Qq[0, 1] = -s
    Qq[1, 0] = s


def constraints(q, t, p, C):
    """Eq. 3.48 of seed 001: x² + y² − l² = 0."""
    C[0] = q[0] * q[0] + q[1] * q[1] - p[1] * p[1]


def constraint_jacobian(q, t, p, G):
    G[0, 0] = 2.0 * q[0]
    G[0, 1] = 2.0 * q[1]


def constraint_dt(q, t, p, Ct):
    """Scleronomic: C_t = 0."""


def gamma(q, v, t, p, g):
    """C_q q'' = −(C_q v)_q v = −2 v·v (seed 000 eq. 5)."""
    g[0] = -2.0 * (v[0] * v[0] + v[1] * v[1])


def constraint_force_jacobian(q, lam, t, p, H):
    H[0, 0] = H[1, 1] = 2.0 * lam[0]


def outputs(q, v, t, u, p, y):
    """Angle from the downward vertical, angular rate, and the rod tension from
    the radial balance m v²/l + m g cos φ + radial input force (no λ needed)."""
    m, l, g = p[0], p[1], p[2]
    x, yy, vx, vy = q[0], q[1], v[0], v[1]
    y[0] = math.atan2(x, -yy)
    y[1] = (x * vy - yy * vx) / (l * l)
    y[2] = m * (vx * vx + vy * vy) / l + m * g * (-yy / l) + (u[1] * x + u[2] * yy) / l


KERNELS = MultibodyKernels(mass, forces, constraints, constraint_jacobian, constraint_dt, gamma,
                           force_jacobians, constraint_force_jacobian, no_mass_jacobian, outputs)


class Pendulum(KernelModel):
    name = "pendulum"
    description = "ideal planar pendulum, Cartesian coordinates, index-3 DAE (seed 001 §3.8)"
    coordinates = ("x", "y")
    constraint_names = ("length",)
    parameters = (
        Parameter("m", 1.0, "kg", "bob mass"),
        Parameter("l", 1.0, "m", "rod length"),
        Parameter("g", 9.81, "m/s2", "gravitational acceleration"),
        Parameter("phi0", np.pi / 4, "rad", "initial angle from the downward vertical"),
        Parameter("omega0", 0.0, "rad/s", "initial angular velocity"),
    )
    inputs = (
        Signal("torque", "N.m", "torque about the pivot"),
        Signal("fx", "N", "horizontal force on the bob"),
        Signal("fy", "N", "vertical force on the bob"),
    )
    outputs = (
        Signal("angle", "rad", "angle from the downward vertical"),
        Signal("angular_velocity", "rad/s"),
        Signal("rod_force", "N", "tension in the rod (from the multiplier)"),
    )
    constant_mass = True
    conservative = True  # with zero inputs: `cosim check` checks dE/dt = 0
    kernel_set = KERNELS
    positive_parameters = ("m", "l")

    def kernel_parameters(self):
        p = self.params
        return [p["m"], p["l"], p["g"]]

    def initial_state(self):
        l, phi, w = self.params["l"], self.params["phi0"], self.params["omega0"]
        q = np.array([l * np.sin(phi), -l * np.cos(phi)])
        v = np.array([l * w * np.cos(phi), l * w * np.sin(phi)])
        return q, v

    def potential_energy(self, q, t=0.0):
        return self.params["m"] * self.params["g"] * q[1]
