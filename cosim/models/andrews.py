"""Andrews' squeezer: the seven-body mechanism of seed 000 §8.1 (Tables 3-4).

Formulation and every constant follow Hairer & Wanner, *Solving ODEs II*,
§VII.7 and the IVP test set problem "andrews" (Mazzia & Magherini,
https://archimede.uniba.it/~testset/problems/andrews.php, file andrews.f):
q = (β, Θ, γ, Φ, δ, Ω, ε), 6 closing-loop constraints, driving torque
``mom`` = 0.033 N·m on β, spring c0 between point D of body 3 and the
ground point C.

Differences from the OCR'd seed table (checked, the test-set value wins):
  * y_A = −0.00227 m (seed Table 3 reads −0.00277).  With −0.00227 the
    published initial state satisfies C(q0) = 0 to ~1e-16; with −0.00277
    it violates it by 5e-4 m.
  * x_B = −0.03635 m (seed Table 3 reads −0.036335).
The equations are written as  M(q) q'' + C_qᵀ λ = Q(q, q', u)  (seed 000
eq. 1); Q contains the torque, the spring force and the velocity-dependent
(Coriolis/centrifugal) terms of the test-set formulation.
"""
import math

import numpy as np

from ..jit import kernel_helper
from .base import Parameter, Signal
from .kernels import KernelModel, MultibodyKernels

# (name, default, unit, description) — the IVP test-set data set
_DATA = (
    ("m1", 0.04325, "kg", "mass of body 1"),
    ("m2", 0.00365, "kg", "mass of body 2"),
    ("m3", 0.02373, "kg", "mass of body 3"),
    ("m4", 0.00706, "kg", "mass of body 4"),
    ("m5", 0.07050, "kg", "mass of body 5"),
    ("m6", 0.00706, "kg", "mass of body 6"),
    ("m7", 0.05498, "kg", "mass of body 7"),
    ("i1", 2.194e-6, "kg.m2", "moment of inertia of body 1"),
    ("i2", 4.410e-7, "kg.m2", "moment of inertia of body 2"),
    ("i3", 5.255e-6, "kg.m2", "moment of inertia of body 3"),
    ("i4", 5.667e-7, "kg.m2", "moment of inertia of body 4"),
    ("i5", 1.169e-5, "kg.m2", "moment of inertia of body 5"),
    ("i6", 5.667e-7, "kg.m2", "moment of inertia of body 6"),
    ("i7", 1.912e-5, "kg.m2", "moment of inertia of body 7"),
    ("xa", -0.06934, "m", "ground point A, x"),
    ("ya", -0.00227, "m", "ground point A, y (HW / test set; seed table OCR: -0.00277)"),
    ("xb", -0.03635, "m", "ground point B, x"),
    ("yb", 0.03273, "m", "ground point B, y"),
    ("xc", 0.014, "m", "spring anchor C, x"),
    ("yc", 0.072, "m", "spring anchor C, y"),
    ("c0", 4530.0, "N/m", "spring stiffness"),
    ("l0", 0.07785, "m", "spring free length"),
    ("d", 0.028, "m", "geometry d"),
    ("da", 0.0115, "m", "geometry da"),
    ("e", 0.02, "m", "geometry e"),
    ("ea", 0.01421, "m", "geometry ea"),
    ("rr", 0.007, "m", "geometry rr"),
    ("ra", 0.00092, "m", "geometry ra"),
    ("ss", 0.035, "m", "geometry ss"),
    ("sa", 0.01874, "m", "geometry sa"),
    ("sb", 0.01043, "m", "geometry sb"),
    ("sc", 0.018, "m", "geometry sc"),
    ("sd", 0.02, "m", "geometry sd"),
    ("ta", 0.02308, "m", "geometry ta"),
    ("tb", 0.00916, "m", "geometry tb"),
    ("u", 0.04, "m", "geometry u"),
    ("ua", 0.01228, "m", "geometry ua"),
    ("ub", 0.00449, "m", "geometry ub"),
    ("zf", 0.02, "m", "geometry zf"),
    ("zt", 0.04, "m", "geometry zt"),
    ("fa", 0.01421, "m", "geometry fa"),
)

# Consistent initial positions of the test set (velocities zero); with these
# and the default data |C(q0)| ~ 1e-16.
INITIAL_Q = np.array([
    -0.0617138900142764496358948458001,
    0.0,
    0.455279819163070380255912382449,
    0.222668390165885884674473185609,
    0.487364979543842550225598953530,
    -0.222668390165885884674473185609,
    1.23054744454982119249735015568,
])

# Test-set reference solution at t = 0.03 (PSIDE, rtol = atol = 1e-14): q, q'.
REFERENCE_T = 0.03
REFERENCE_Q = np.array([
    0.1581077119629904e+2, -0.1575637105984298e+2, 0.4082224013073101e-1,
    -0.5347301163226948e+0, 0.5244099658805304e+0, 0.5347301163226948e+0,
    0.1048080741042263e+1])
REFERENCE_V = np.array([
    0.1139920302151208e+4, -0.1424379294994111e+4, 0.1103291221937134e+2,
    0.1929337464421385e+2, 0.5735699284790808e+0, -0.1929337464421385e+2,
    0.3231791658026955e+0])


# -- kernels: p = the _DATA values in order, then k2, k4, k6 and the constant part
# of M (7×7, row-major); outputs arrive zero-filled ---------------------------------
(M1, M2, M3, M4, M5, M6, M7, I1, I2, I3, I4, I5, I6, I7, XA, YA, XB, YB, XC, YC, C0, L0, D, DA,
 E, EA, RR, RA, SS, SA, SB, SC, SD, TA, TB, U, UA, UB, ZF, ZT, FA) = range(len(_DATA))
K2, K4, K6 = len(_DATA), len(_DATA) + 1, len(_DATA) + 2
M0 = len(_DATA) + 3


@kernel_helper
def spring(gam, p):
    """Spring attachment point D relative to C: (r, dr/dγ) and the length L."""
    cg, sg = math.cos(gam), math.sin(gam)
    sd, sc = p[SD], p[SC]
    r0 = sd * cg + sc * sg + p[XB] - p[XC]
    r1 = sd * sg - sc * cg + p[YB] - p[YC]
    dr0 = -sd * sg + sc * cg
    dr1 = sd * cg + sc * sg
    return r0, r1, dr0, dr1, math.hypot(r0, r1)


def mass(q, t, p, M):
    for i in range(7):
        for j in range(7):
            M[i, j] = p[M0 + 7 * i + j]
    cth, sph, som = math.cos(q[1]), math.sin(q[3]), math.sin(q[5])
    M[0, 0] -= 2.0 * p[K2] * cth
    M[0, 1] = M[0, 1] - p[K2] * cth
    M[1, 0] = M[0, 1]
    M[3, 4] = M[3, 4] + p[K4] * sph
    M[4, 3] = M[3, 4]
    M[4, 4] += 2.0 * p[K4] * sph
    M[5, 6] = M[5, 6] - p[K6] * som
    M[6, 5] = M[5, 6]
    M[6, 6] -= 2.0 * p[K6] * som


def mass_jacobian_term(q, a, t, p, J):
    """(M(q) a)_q: M depends on Θ, Φ, Ω only."""
    s2 = p[K2] * math.sin(q[1])
    J[0, 1] = 2.0 * s2 * a[0] + s2 * a[1]
    J[1, 1] = s2 * a[0]
    c4 = p[K4] * math.cos(q[3])
    J[3, 3] = c4 * a[4]
    J[4, 3] = c4 * a[3] + 2.0 * c4 * a[4]
    c6 = -p[K6] * math.cos(q[5])
    J[5, 5] = c6 * a[6]
    J[6, 5] = c6 * a[5] + 2.0 * c6 * a[6]


def forces(q, v, t, u, p, Q):
    """Torque on β, spring force on γ, velocity-dependent terms of the test set."""
    sth, cph, com = math.sin(q[1]), math.cos(q[3]), math.cos(q[5])
    bep, thp, php, dep, omp, epp = v[0], v[1], v[3], v[4], v[5], v[6]
    k2, k4, k6 = p[K2], p[K4], p[K6]
    r0, r1, dr0, dr1, L = spring(q[2], p)
    force = -p[C0] * (L - p[L0]) / L
    Q[0] = u[0] - k2 * thp * (thp + 2.0 * bep) * sth
    Q[1] = k2 * bep * bep * sth
    Q[2] = force * (r0 * dr0 + r1 * dr1)
    Q[3] = k4 * dep * dep * cph
    Q[4] = -k4 * php * (php + 2.0 * dep) * cph
    Q[5] = -k6 * epp * epp * com
    Q[6] = k6 * omp * (omp + 2.0 * epp) * com


def force_jacobians(q, v, t, u, p, Qq, Qv):
    sth, cth = math.sin(q[1]), math.cos(q[1])
    sph, cph = math.sin(q[3]), math.cos(q[3])
    som, com = math.sin(q[5]), math.cos(q[5])
    bep, thp, php, dep, omp, epp = v[0], v[1], v[3], v[4], v[5], v[6]
    k2, k4, k6 = p[K2], p[K4], p[K6]
    Qq[0, 1] = -k2 * thp * (thp + 2.0 * bep) * cth
    Qv[0, 0] = -2.0 * k2 * thp * sth
    Qv[0, 1] = -k2 * (2.0 * thp + 2.0 * bep) * sth
    Qq[1, 1] = k2 * bep * bep * cth
    Qv[1, 0] = 2.0 * k2 * bep * sth
    # spring: Q3 = -dV/dγ, V = c0/2 (L - l0)^2
    r0, r1, dr0, dr1, L = spring(q[2], p)
    ddr0 = -(r0 + (p[XC] - p[XB]))
    ddr1 = -(r1 + (p[YC] - p[YB]))
    rdr = r0 * dr0 + r1 * dr1
    c0, l0 = p[C0], p[L0]
    Qq[2, 2] = -c0 * ((l0 / L ** 3) * rdr * rdr
                      + (1.0 - l0 / L) * ((dr0 * dr0 + dr1 * dr1) + (r0 * ddr0 + r1 * ddr1)))
    Qq[3, 3] = -k4 * dep * dep * sph
    Qv[3, 4] = 2.0 * k4 * dep * cph
    Qq[4, 3] = k4 * php * (php + 2.0 * dep) * sph
    Qv[4, 3] = -k4 * (2.0 * php + 2.0 * dep) * cph
    Qv[4, 4] = -2.0 * k4 * php * cph
    Qq[5, 5] = k6 * epp * epp * som
    Qv[5, 6] = -2.0 * k6 * epp * com
    Qq[6, 5] = -k6 * omp * (omp + 2.0 * epp) * som
    Qv[6, 5] = k6 * (2.0 * omp + 2.0 * epp) * com
    Qv[6, 6] = 2.0 * k6 * omp * com


def constraints(q, t, p, C):
    """The test set's g: three loops closing at B and A."""
    b, th, ga, ph, de, om, ep = q[0], q[1], q[2], q[3], q[4], q[5], q[6]
    rr, d = p[RR], p[D]
    bx = rr * math.cos(b) - d * math.cos(b + th)
    by = rr * math.sin(b) - d * math.sin(b + th)
    C[0] = bx - p[SS] * math.sin(ga) - p[XB]
    C[1] = by + p[SS] * math.cos(ga) - p[YB]
    C[2] = bx - p[E] * math.sin(ph + de) - p[ZT] * math.cos(de) - p[XA]
    C[3] = by + p[E] * math.cos(ph + de) - p[ZT] * math.sin(de) - p[YA]
    C[4] = bx - p[ZF] * math.cos(om + ep) - p[U] * math.sin(ep) - p[XA]
    C[5] = by - p[ZF] * math.sin(om + ep) + p[U] * math.cos(ep) - p[YA]


def constraint_jacobian(q, t, p, G):
    b, th, ga, ph, de, om, ep = q[0], q[1], q[2], q[3], q[4], q[5], q[6]
    rr, d, ss, e, zt, zf, u = p[RR], p[D], p[SS], p[E], p[ZT], p[ZF], p[U]
    sb, cb = math.sin(b), math.cos(b)
    sbt, cbt = math.sin(b + th), math.cos(b + th)
    spd, cpd = math.sin(ph + de), math.cos(ph + de)
    soe, coe = math.sin(om + ep), math.cos(om + ep)
    for k in (0, 2, 4):
        G[k, 0] = -rr * sb + d * sbt
        G[k, 1] = d * sbt
        G[k + 1, 0] = rr * cb - d * cbt
        G[k + 1, 1] = -d * cbt
    G[0, 2] = -ss * math.cos(ga)
    G[1, 2] = -ss * math.sin(ga)
    G[2, 3] = -e * cpd
    G[2, 4] = -e * cpd + zt * math.sin(de)
    G[3, 3] = -e * spd
    G[3, 4] = -e * spd - zt * math.cos(de)
    G[4, 5] = zf * soe
    G[4, 6] = zf * soe - u * math.cos(ep)
    G[5, 5] = -zf * coe
    G[5, 6] = -zf * coe - u * math.sin(ep)


def constraint_dt(q, t, p, Ct):
    """Scleronomic: C_t = 0."""


def gamma(q, v, t, p, g):
    """Seed 000 eq. 5: each term a·f(φ) (f = sin or cos) contributes +a·f(φ)·φ'²
    to γ = −(C_q v)_q v, since f'' = −f."""
    b, th, ga, ph, de, om, ep = q[0], q[1], q[2], q[3], q[4], q[5], q[6]
    bp, thp, gap, php, dep, omp, epp = v[0], v[1], v[2], v[3], v[4], v[5], v[6]
    rr, d = p[RR], p[D]
    bt2 = (bp + thp) ** 2
    bx = rr * math.cos(b) * bp * bp - d * math.cos(b + th) * bt2
    by = rr * math.sin(b) * bp * bp - d * math.sin(b + th) * bt2
    pd2 = (php + dep) ** 2
    oe2 = (omp + epp) ** 2
    g[0] = bx - p[SS] * math.sin(ga) * gap * gap
    g[1] = by + p[SS] * math.cos(ga) * gap * gap
    g[2] = bx - p[E] * math.sin(ph + de) * pd2 - p[ZT] * math.cos(de) * dep * dep
    g[3] = by + p[E] * math.cos(ph + de) * pd2 - p[ZT] * math.sin(de) * dep * dep
    g[4] = bx - p[ZF] * math.cos(om + ep) * oe2 - p[U] * math.sin(ep) * epp * epp
    g[5] = by - p[ZF] * math.sin(om + ep) * oe2 + p[U] * math.cos(ep) * epp * epp


def constraint_force_jacobian(q, lam, t, p, H):
    """Σ_i λ_i ∇²C_i; a term a·f(c·q) of C_i has Hessian −a·f(c·q) c cᵀ."""
    b, th, ga, ph, de, om, ep = q[0], q[1], q[2], q[3], q[4], q[5], q[6]
    rr, d = p[RR], p[D]
    lx, ly = lam[0] + lam[2] + lam[4], lam[1] + lam[3] + lam[5]
    hbt = d * (lx * math.cos(b + th) + ly * math.sin(b + th))
    H[0, 0] = hbt - rr * (lx * math.cos(b) + ly * math.sin(b))
    H[0, 1] = H[1, 0] = H[1, 1] = hbt
    H[2, 2] = p[SS] * (lam[0] * math.sin(ga) - lam[1] * math.cos(ga))
    hpd = p[E] * (lam[2] * math.sin(ph + de) - lam[3] * math.cos(ph + de))
    H[3, 3] = H[3, 4] = H[4, 3] = hpd
    H[4, 4] = hpd + p[ZT] * (lam[2] * math.cos(de) + lam[3] * math.sin(de))
    hoe = p[ZF] * (lam[4] * math.cos(om + ep) + lam[5] * math.sin(om + ep))
    H[5, 5] = H[5, 6] = H[6, 5] = hoe
    H[6, 6] = hoe + p[U] * (lam[4] * math.sin(ep) - lam[5] * math.cos(ep))


def outputs(q, v, t, u, p, y):
    """β, β', the spring length L and its tension c0 (L − l0)."""
    L = spring(q[2], p)[4]
    y[0] = q[0]
    y[1] = v[0]
    y[2] = L
    y[3] = p[C0] * (L - p[L0])


KERNELS = MultibodyKernels(mass, forces, constraints, constraint_jacobian, constraint_dt, gamma,
                           force_jacobians, constraint_force_jacobian, mass_jacobian_term, outputs)


class Andrews(KernelModel):
    name = "andrews"
    description = "Andrews' squeezer, seven-body mechanism (seed 000 §8.1, HW II §VII.7)"
    coordinates = ("beta", "Theta", "gamma", "Phi", "delta", "Omega", "epsilon")
    constraint_names = ("loop_B_x", "loop_B_y", "loop_A1_x", "loop_A1_y",
                        "loop_A2_x", "loop_A2_y")
    parameters = tuple(Parameter(n, v, unit, desc) for n, v, unit, desc in _DATA)
    inputs = (Signal("torque", "N.m", "driving torque on body 1 (mom)", 0.033),)
    outputs = (
        Signal("beta", "rad", "crank angle β"),
        Signal("beta_rate", "rad/s", "crank angular velocity β'"),
        Signal("spring_length", "m", "length of the spring C-D"),
        Signal("spring_force", "N", "spring tension c0 (L - l0)"),
    )
    constant_mass = False
    kernel_set = KERNELS

    positive_parameters = ("m1", "m2", "m3", "m4", "m5", "m6", "m7", "i1", "i2", "i3", "i4", "i5",
                           "i6", "i7", "c0", "l0")

    def kernel_parameters(self):
        p = self.params
        k2 = p["m2"] * p["da"] * p["rr"]
        k4 = p["m4"] * p["zt"] * (p["e"] - p["ea"])
        k6 = p["m6"] * p["u"] * (p["zf"] - p["fa"])
        m = p
        M0 = np.zeros((7, 7))  # constant part of M
        M0[0, 0] = m["m1"] * m["ra"] ** 2 + m["m2"] * (m["rr"] ** 2 + m["da"] ** 2) + m["i1"] + m["i2"]
        M0[1, 0] = M0[0, 1] = m["m2"] * m["da"] ** 2 + m["i2"]
        M0[1, 1] = m["m2"] * m["da"] ** 2 + m["i2"]
        M0[2, 2] = m["m3"] * (m["sa"] ** 2 + m["sb"] ** 2) + m["i3"]
        ee = m["e"] - m["ea"]
        M0[3, 3] = m["m4"] * ee ** 2 + m["i4"]
        M0[4, 3] = M0[3, 4] = m["m4"] * ee ** 2 + m["i4"]
        M0[4, 4] = (m["m4"] * (m["zt"] ** 2 + ee ** 2) + m["m5"] * (m["ta"] ** 2 + m["tb"] ** 2)
                    + m["i4"] + m["i5"])
        ff = m["zf"] - m["fa"]
        M0[5, 5] = m["m6"] * ff ** 2 + m["i6"]
        M0[6, 5] = M0[5, 6] = m["m6"] * ff ** 2 + m["i6"]
        M0[6, 6] = (m["m6"] * (ff ** 2 + m["u"] ** 2) + m["m7"] * (m["ua"] ** 2 + m["ub"] ** 2)
                    + m["i6"] + m["i7"])
        return [p[name] for name, *_ in _DATA] + [k2, k4, k6] + M0.ravel().tolist()

    # -- state ------------------------------------------------------------------
    def initial_state(self):
        return INITIAL_Q.copy(), np.zeros(7)

    # -- outputs / energy -------------------------------------------------------------
    def potential_energy(self, q, t=0.0):
        """Spring energy c0/2 (L − l0)²; the driving torque is not conservative."""
        L = spring(float(q[2]), self._p)[4]
        return 0.5 * self.params["c0"] * (L - self.params["l0"]) ** 2
