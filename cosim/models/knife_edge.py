"""Planar knife edge (skate) on an inclined plane: a nonholonomic test model
(seed 000 §7, eq. 93).

q = (x, y, θ): contact point in the plane (x points down the slope) and the
heading of the blade.  The blade cannot slide sideways:

    G = B(q) v = −sin θ · x' + cos θ · y' = 0      (B v + b with b = 0)

M = diag(m, m, J); gravity pulls down the slope with m g sin α along +x.
Inputs: a push force along the blade and a steering torque about the
vertical.

With no inputs θ' = ω stays constant, and the speed along the blade
u = cos θ x' + sin θ y' obeys u' = g sin α cos θ, so (θ0 = 0)

    x(t) = x0 + (u0/ω) sin ωt + g sin α/(2ω²) sin² ωt
    y(t) = y0 + (u0/ω)(1 − cos ωt) + g sin α/(2ω) (t − sin 2ωt/(2ω))

(Neimark & Fufaev, *Dynamics of Nonholonomic Systems*; Bloch,
*Nonholonomic Mechanics and Control* §1.6) — see :meth:`exact_solution`.
The energy T + V with V = −m g sin α · x is conserved.
"""
import numpy as np

from .base import Parameter, Signal
from .kernels import KernelModel, MultibodyKernels, no_mass_jacobian
from .ranges import POSITIVE

# -- kernels: p = (m, J, g, alpha); outputs arrive zero-filled ---------------------------
# ``np.sin``/``np.cos`` (not ``math``): the Python methods derived from these kernels
# give the bits of the former numpy methods and accept complex / hyper-dual numbers.


def mass(q, t, p, M):
    """M = diag(m, m, J)."""
    M[0, 0] = M[1, 1] = p[0]
    M[2, 2] = p[1]


def forces(q, v, t, u, p, Q):
    """Gravity down the slope (+x), the push along the blade, the steering torque."""
    c, s = np.cos(q[2]), np.sin(q[2])
    Q[0] = p[0] * p[2] * np.sin(p[3]) + u[0] * c
    Q[1] = u[0] * s
    Q[2] = u[1]


def force_jacobians(q, v, t, u, p, Qq, Qv):
    """Only the push direction depends on θ; Q_v = 0."""
    Qq[0, 2] = -u[0] * np.sin(q[2])
    Qq[1, 2] = u[0] * np.cos(q[2])


def constraints(q, t, p, C):
    """No holonomic constraints (n_c = 0)."""


def constraint_jacobian(q, t, p, Cq):
    """No holonomic constraints."""


def constraint_dt(q, t, p, Ct):
    """No holonomic constraints."""


def gamma(q, v, t, p, g):
    """No holonomic constraints."""


def constraint_force_jacobian(q, lam, t, p, H):
    """No holonomic constraints."""


def outputs(q, v, t, u, p, y):
    """Heading, speed along the blade, velocity across it (side slip)."""
    c, s = np.cos(q[2]), np.sin(q[2])
    y[0] = q[2]
    y[1] = c * v[0] + s * v[1]
    y[2] = -s * v[0] + c * v[1]


# -- nonholonomic constraint G = B(q) v + b = 0 (seed 000 eq. 93) -------------------------
def nonholonomic_matrix(q, t, p, B):
    """B = [−sin θ, cos θ, 0]: no velocity across the blade."""
    B[0, 0] = -np.sin(q[2])
    B[0, 1] = np.cos(q[2])


def nonholonomic_offset(q, t, p, b):
    """b = 0."""


def nonholonomic_gamma(q, v, t, p, g):
    """γ_G = −(B' v + b') so that B q'' = γ_G: here θ'(cos θ x' + sin θ y')."""
    c, s = np.cos(q[2]), np.sin(q[2])
    g[0] = v[2] * (c * v[0] + s * v[1])


def nonholonomic_force_jacobian(q, mu, t, p, H):
    """(Bᵀ μ)_q."""
    c, s = np.cos(q[2]), np.sin(q[2])
    H[0, 2] = -c * mu[0]
    H[1, 2] = -s * mu[0]


def nonholonomic_velocity_jacobian(q, v, t, p, J):
    """(B v + b)_q."""
    c, s = np.cos(q[2]), np.sin(q[2])
    J[0, 2] = -c * v[0] - s * v[1]


KERNELS = MultibodyKernels(mass, forces, constraints, constraint_jacobian, constraint_dt, gamma,
                           force_jacobians, constraint_force_jacobian, no_mass_jacobian, outputs,
                           nonholonomic_matrix, nonholonomic_offset, nonholonomic_gamma,
                           nonholonomic_force_jacobian, nonholonomic_velocity_jacobian)


class KnifeEdge(KernelModel):
    name = "knife_edge"
    description = "planar knife edge on an inclined plane, one nonholonomic constraint (seed 000 §7)"
    coordinates = ("x", "y", "theta")
    constraint_names = ()
    nonholonomic_names = ("no_side_slip",)
    parameters = (
        Parameter("m", 1.0, "kg", "mass"),
        Parameter("J", 0.1, "kg.m2", "moment of inertia about the vertical"),
        Parameter("g", 9.81, "m/s2", "gravitational acceleration"),
        Parameter("alpha", 0.3, "rad", "inclination of the plane"),
        Parameter("u0", 1.0, "m/s", "initial speed along the blade"),
        Parameter("omega0", 2.0, "rad/s", "initial turning rate"),
        Parameter("theta0", 0.0, "rad", "initial heading"),
    )
    parameter_ranges = {"m": POSITIVE, "J": POSITIVE}
    inputs = (
        Signal("push", "N", "force along the blade"),
        Signal("steer", "N.m", "torque about the vertical"),
    )
    outputs = (
        Signal("heading", "rad"),
        Signal("speed", "m/s", "speed along the blade"),
        Signal("side_slip", "m/s", "velocity across the blade (0 when the constraint holds)"),
    )
    constant_mass = True
    conservative = True  # with zero inputs: `cosim check` checks dE/dt = 0
    kernel_set = KERNELS

    def kernel_parameters(self):
        p = self.params
        return [p["m"], p["J"], p["g"], p["alpha"]]

    def initial_state(self):
        p = self.params
        th, u0 = p["theta0"], p["u0"]
        q = np.array([0.0, 0.0, th])
        v = np.array([u0 * np.cos(th), u0 * np.sin(th), p["omega0"]])
        return q, v

    # -- energy, exact solution ---------------------------------------------------------
    def potential_energy(self, q, t=0.0):
        p = self.params
        return -p["m"] * p["g"] * np.sin(p["alpha"]) * q[0]

    def exact_solution(self, t):
        """(q, v) at time t with zero inputs from the default initial state
        (θ0 = 0, ω ≠ 0); closed form above."""
        p = self.params
        if p["theta0"] != 0.0 or p["omega0"] == 0.0:
            raise ValueError("exact_solution needs theta0 = 0 and omega0 != 0")
        w, u0, k = p["omega0"], p["u0"], p["g"] * np.sin(p["alpha"])
        th = w * t
        x = u0 / w * np.sin(th) + k / (2 * w * w) * np.sin(th) ** 2
        y = u0 / w * (1 - np.cos(th)) + k / (2 * w) * (t - np.sin(2 * th) / (2 * w))
        speed = u0 + k / w * np.sin(th)
        q = np.array([x, y, th])
        v = np.array([speed * np.cos(th), speed * np.sin(th), w])
        return q, v
