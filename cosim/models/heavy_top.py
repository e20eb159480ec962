"""Heavy symmetric top about a fixed point, in Euler parameters (issue 12 item 6).

q = p = (e0, e1, e2, e3), the unit quaternion of the body frame; one holonomic
constraint C = pᵀp − 1 = 0, so M(q) depends on q — the model on which a method
that re-splits the forces (spark's momentum form, seed 003) must take the
protocol's Q as it is.  Body angular velocity ω' = 2 G(p) ṗ with (Nikravesh,
*Computer-Aided Analysis of Mechanical Systems*, §6.3)

    G = [[-e1,  e0,  e3, -e2],
         [-e2, -e3,  e0,  e1],
         [-e3,  e2, -e1,  e0]],

principal moments about the fixed point J' = diag(A, A, C) (symmetry axis =
body z, which carries the centre of mass at distance L), gravity along −Z.

Kinetic energy.  ½ω'ᵀJ'ω' = 2ṗᵀGᵀJ'Gṗ has a mass matrix 4GᵀJ'G that is singular
along p (G p = 0).  We use T = 2A|p|²|ṗ|² + 2(C − A)(g₃ᵀṗ)² with g₃ = K p the
third row of G: on the constraint manifold (|p| = 1, pᵀṗ = 0) it equals the
rigid body's kinetic energy, its Lagrange equations differ from the rigid
body's only by terms along p (taken up by λ), and its mass matrix

    M = 4A|p|² I + 4(C − A) g₃g₃ᵀ        (eigenvalues 4A|p|² ×3, 4C|p|²)

is positive definite.  Q is the protocol's (cosim.models.base): applied forces
plus ∂T/∂q − Ṁq',

    Q = −∂V/∂p + 2τ_Z Z p + 2τ₃ K p + 4A|ṗ|² p − 8A(pᵀṗ) ṗ − 8(C − A)(g₃ᵀṗ) K ṗ,

V = m g L R₃₃(p), R₃₃ = e0² − e1² − e2² + e3² (the body axis' vertical
component), Z p = (−e3, −e2, e1, e0) the generator of rotations about the
vertical (inertial torque τ_Z → 2τ_Z Z p), K p = g₃ = (−e3, e2, −e1, e0) that
of spins about the body axis (body torque τ₃ → 2τ₃ K p).  Z and K are constant
and antisymmetric.  With zero inputs the vertical angular momentum
L_Z = ½ πᵀZp and the spin momentum L₃ = ½ πᵀKp (π = Mṗ) are conserved (Noether:
T and V are invariant under both rotations, and the constraint force 2λp has
no component along an antisymmetric generator), as is the energy.
"""
import math

import numpy as np

from .base import Parameter, Signal
from .kernels import KernelModel, MultibodyKernels

# -- kernels: p = (m, L, A, C, g); outputs arrive zero-filled; plain scalar code
# (numba compiles each kernel alone: no calls to helpers of this module) --------


def mass(q, t, p, M):
    """M = 4A|p|² I + 4(C − A) g₃g₃ᵀ, g₃ = (−e3, e2, −e1, e0)."""
    a4 = 4.0 * p[2] * (q[0] * q[0] + q[1] * q[1] + q[2] * q[2] + q[3] * q[3])
    c4 = 4.0 * (p[3] - p[2])
    g0, g1, g2, g3 = -q[3], q[2], -q[1], q[0]
    gg = (g0, g1, g2, g3)
    for i in range(4):
        for j in range(4):
            M[i, j] = c4 * gg[i] * gg[j]
        M[i, i] += a4


def mass_jacobian_term(q, a, t, p, J):
    """(M a)_q = 8A a pᵀ + 4(C − A)[(g₃ᵀa) K − g₃ (K a)ᵀ]."""
    A8 = 8.0 * p[2]
    c4 = 4.0 * (p[3] - p[2])
    g = (-q[3], q[2], -q[1], q[0])
    ka = (-a[3], a[2], -a[1], a[0])  # K a
    s = g[0] * a[0] + g[1] * a[1] + g[2] * a[2] + g[3] * a[3]
    for i in range(4):
        for j in range(4):
            J[i, j] = A8 * a[i] * q[j] - c4 * g[i] * ka[j]
    # + 4(C − A) s K, K = [[0,0,0,−1],[0,0,1,0],[0,−1,0,0],[1,0,0,0]]
    J[0, 3] -= c4 * s
    J[1, 2] += c4 * s
    J[2, 1] -= c4 * s
    J[3, 0] += c4 * s


def forces(q, v, t, u, p, Q):
    """Gravity, the inputs τ_Z (vertical, inertial) and τ₃ (body axis), and the
    quadratic-velocity terms ∂T/∂q − Ṁq' (module docstring)."""
    mgl2 = 2.0 * p[0] * p[4] * p[1]
    A, CA = p[2], p[3] - p[2]
    vv = v[0] * v[0] + v[1] * v[1] + v[2] * v[2] + v[3] * v[3]
    pv = q[0] * v[0] + q[1] * v[1] + q[2] * v[2] + q[3] * v[3]
    s = -q[3] * v[0] + q[2] * v[1] - q[1] * v[2] + q[0] * v[3]  # g₃ᵀṗ = ω₃/2
    kv = (-v[3], v[2], -v[1], v[0])
    zp = (-q[3], -q[2], q[1], q[0])
    kp = (-q[3], q[2], -q[1], q[0])
    sign = (1.0, -1.0, -1.0, 1.0)  # ∂R₃₃/∂p = 2 (e0, −e1, −e2, e3)
    for i in range(4):
        Q[i] = (-mgl2 * sign[i] * q[i] + 2.0 * u[0] * zp[i] + 2.0 * u[1] * kp[i]
                + 4.0 * A * vv * q[i] - 8.0 * A * pv * v[i] - 8.0 * CA * s * kv[i])


def force_jacobians(q, v, t, u, p, Qq, Qv):
    mgl2 = 2.0 * p[0] * p[4] * p[1]
    A, CA = p[2], p[3] - p[2]
    vv = v[0] * v[0] + v[1] * v[1] + v[2] * v[2] + v[3] * v[3]
    pv = q[0] * v[0] + q[1] * v[1] + q[2] * v[2] + q[3] * v[3]
    s = -q[3] * v[0] + q[2] * v[1] - q[1] * v[2] + q[0] * v[3]  # g₃ᵀṗ = ω₃/2
    kv = (-v[3], v[2], -v[1], v[0])
    kp = (-q[3], q[2], -q[1], q[0])
    sign = (1.0, -1.0, -1.0, 1.0)
    for i in range(4):
        for j in range(4):
            # Q_q: −8A ṗṗᵀ + 8(C − A)(Kṗ)(Kṗ)ᵀ (+ diagonal below)
            Qq[i, j] = -8.0 * A * v[i] * v[j] + 8.0 * CA * kv[i] * kv[j]
            # Q_v: 8A p ṗᵀ − 8A ṗ pᵀ − 8(C − A)(Kṗ) g₃ᵀ (− 8A(pᵀṗ) I − 8(C − A) s K below)
            Qv[i, j] = 8.0 * A * (q[i] * v[j] - v[i] * q[j]) - 8.0 * CA * kv[i] * kp[j]
        Qq[i, i] += 4.0 * A * vv - mgl2 * sign[i]
        Qv[i, i] -= 8.0 * A * pv
    # the inputs' terms 2τ_Z Z + 2τ₃ K in Q_q, and −8(C − A) s K in Q_v
    tz, t3, c = 2.0 * u[0], 2.0 * u[1], 8.0 * CA * s
    Qq[0, 3] += -tz - t3
    Qq[1, 2] += -tz + t3
    Qq[2, 1] += tz - t3
    Qq[3, 0] += tz + t3
    Qv[0, 3] += c
    Qv[1, 2] -= c
    Qv[2, 1] += c
    Qv[3, 0] -= c


def constraints(q, t, p, C):
    """Unit quaternion: pᵀp − 1 = 0."""
    C[0] = q[0] * q[0] + q[1] * q[1] + q[2] * q[2] + q[3] * q[3] - 1.0


def constraint_jacobian(q, t, p, G):
    for j in range(4):
        G[0, j] = 2.0 * q[j]


def constraint_dt(q, t, p, Ct):
    """Scleronomic: C_t = 0."""


def gamma(q, v, t, p, g):
    """Seed 000 eq. 5: γ = −(C_q v)_q v = −2 ṗᵀṗ."""
    g[0] = -2.0 * (v[0] * v[0] + v[1] * v[1] + v[2] * v[2] + v[3] * v[3])


def constraint_force_jacobian(q, lam, t, p, H):
    for i in range(4):
        H[i, i] = 2.0 * lam[0]


def outputs(q, v, t, u, p, y):
    """Nutation angle, precession angle, spin rate ω₃, the two momenta, the energy."""
    e0, e1, e2, e3 = q[0], q[1], q[2], q[3]
    r13 = 2.0 * (e1 * e3 + e0 * e2)
    r23 = 2.0 * (e2 * e3 - e0 * e1)
    r33 = e0 * e0 - e1 * e1 - e2 * e2 + e3 * e3
    y[0] = math.atan2(math.sqrt(r13 * r13 + r23 * r23), r33)
    y[1] = math.atan2(r13, -r23)  # the line of nodes' direction, as Euler's ψ
    s = -q[3] * v[0] + q[2] * v[1] - q[1] * v[2] + q[0] * v[3]  # g₃ᵀṗ = ω₃/2
    y[2] = 2.0 * s
    # π = M ṗ = 4A|p|² ṗ + 4(C − A) s g₃; L_Z = ½ πᵀ Z p, L₃ = ½ πᵀ K p
    A, CA = p[2], p[3] - p[2]
    pp = e0 * e0 + e1 * e1 + e2 * e2 + e3 * e3
    zp = (-e3, -e2, e1, e0)
    kp = (-e3, e2, -e1, e0)
    lz = 0.0
    l3 = 0.0
    vv = 0.0
    for i in range(4):
        pi = 4.0 * A * pp * v[i] + 4.0 * CA * s * kp[i]
        lz += 0.5 * pi * zp[i]
        l3 += 0.5 * pi * kp[i]
        vv += pi * v[i]
    y[3] = lz
    y[4] = l3
    y[5] = 0.5 * vv + p[0] * p[4] * p[1] * r33


KERNELS = MultibodyKernels(mass, forces, constraints, constraint_jacobian, constraint_dt, gamma,
                           force_jacobians, constraint_force_jacobian, mass_jacobian_term, outputs)


class HeavyTop(KernelModel):
    name = "heavy_top"
    description = ("heavy symmetric top about a fixed point, Euler parameters: M depends on q, "
                   "vertical and spin angular momenta conserved")
    coordinates = ("e0", "e1", "e2", "e3")
    constraint_names = ("unit_quaternion",)
    parameters = (
        Parameter("m", 1.0, "kg", "mass"),
        Parameter("L", 0.5, "m", "distance from the fixed point to the centre of mass"),
        Parameter("A", 0.4, "kg.m2", "transverse moment of inertia about the fixed point"),
        Parameter("C", 0.2, "kg.m2", "moment of inertia about the symmetry axis"),
        Parameter("g", 9.81, "m/s2", "gravitational acceleration (along -Z)"),
        Parameter("theta0", np.pi / 6, "rad", "initial nutation: the symmetry axis' angle from +Z"),
        Parameter("spin0", 30.0, "rad/s", "initial angular velocity about the symmetry axis"),
        Parameter("precession0", 0.0, "rad/s", "initial angular velocity about the vertical"),
    )
    inputs = (
        Signal("torque_vertical", "N.m", "torque about the vertical (inertial Z) axis"),
        Signal("torque_spin", "N.m", "torque about the symmetry (body z) axis"),
    )
    outputs = (
        Signal("nutation", "rad", "angle of the symmetry axis from the vertical"),
        Signal("precession", "rad", "azimuth of the line of nodes (Euler angle psi)"),
        Signal("spin_rate", "rad/s", "angular velocity about the symmetry axis"),
        Signal("momentum_vertical", "kg.m2/s", "angular momentum about the vertical"),
        Signal("momentum_spin", "kg.m2/s", "angular momentum about the symmetry axis"),
        Signal("energy", "J", "kinetic + potential energy"),
    )
    constant_mass = False
    conservative = True  # with zero inputs: `cosim check` checks dE/dt = 0
    kernel_set = KERNELS
    positive_parameters = ("m", "L", "A", "C")

    def kernel_parameters(self):
        p = self.params
        return [p["m"], p["L"], p["A"], p["C"], p["g"]]

    def initial_state(self):
        """p0 = rotation by theta0 about the inertial x axis; ṗ0 = ½ Gᵀω' with the body
        angular velocity ω' = Rᵀ(precession0 · Z) + spin0 · z (pᵀṗ = 0)."""
        th = self.params["theta0"]
        q = np.array([math.cos(th / 2), math.sin(th / 2), 0.0, 0.0])
        e0, e1, e2, e3 = q
        G = np.array([[-e1, e0, e3, -e2], [-e2, -e3, e0, e1], [-e3, e2, -e1, e0]])
        w_body = self.params["precession0"] * np.array([0.0, math.sin(th), math.cos(th)])
        w_body[2] += self.params["spin0"]
        return q, 0.5 * G.T @ w_body

    def potential_energy(self, q, t=0.0):
        p = self.params
        return p["m"] * p["g"] * p["L"] * (q[0] ** 2 - q[1] ** 2 - q[2] ** 2 + q[3] ** 2)
