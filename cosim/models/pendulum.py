"""Ideal planar pendulum in Cartesian coordinates, index 3 (seed 001 §3.8).

q = (x, y), constraint x² + y² − l² = 0 (eq. 3.48), gravity along −y.
Input: a torque about the pivot (N·m) applied as the tangential force
τ/l² · (−y, x), plus horizontal/vertical forces on the bob.
"""
import numpy as np

from .base import MultibodyModel, Parameter, Signal


class Pendulum(MultibodyModel):
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
    positive_parameters = ("m", "l")

    def setup(self):
        m = self.params["m"]
        self._M = np.diag([m, m])

    def initial_state(self):
        l, phi, w = self.params["l"], self.params["phi0"], self.params["omega0"]
        q = np.array([l * np.sin(phi), -l * np.cos(phi)])
        v = np.array([l * w * np.cos(phi), l * w * np.sin(phi)])
        return q, v

    def mass(self, q, t):
        return self._M

    def forces(self, q, v, t, u):
        m, g, l = self.params["m"], self.params["g"], self.params["l"]
        tau, fx, fy = u[0], u[1], u[2]
        s = tau / (l * l)
        return np.array([fx - s * q[1], fy - m * g + s * q[0]])

    def force_jacobians(self, q, v, t, u):
        l = self.params["l"]
        s = u[0] / (l * l)
        return np.array([[0.0, -s], [s, 0.0]]), np.zeros((2, 2))

    def constraints(self, q, t):
        l = self.params["l"]
        return np.array([q[0] * q[0] + q[1] * q[1] - l * l])

    def constraint_jacobian(self, q, t):
        return np.array([[2.0 * q[0], 2.0 * q[1]]])

    def constraint_dt(self, q, t):
        return np.zeros(1)

    def gamma(self, q, v, t):
        # C_q q'' = -(C_q v)_q v = -2 v·v
        return np.array([-2.0 * (v[0] * v[0] + v[1] * v[1])])

    def constraint_force_jacobian(self, q, lam, t):
        return 2.0 * lam[0] * np.eye(2)

    def outputs_qv(self, t, q, v, u):
        l = self.params["l"]
        angle = np.arctan2(q[0], -q[1])
        omega = (q[0] * v[1] - q[1] * v[0]) / (l * l)
        # tension from energy-free formula: m(v²/l) + m g cosφ − radial input force
        m, g = self.params["m"], self.params["g"]
        radial_in = (u[1] * q[0] + u[2] * q[1]) / l
        tension = m * (v @ v) / l + m * g * (-q[1] / l) + radial_in
        return np.array([angle, omega, tension])

    def potential_energy(self, q, t=0.0):
        return self.params["m"] * self.params["g"] * q[1]
