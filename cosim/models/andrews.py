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
import numpy as np

from .base import MultibodyModel, Parameter, Signal

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


class Andrews(MultibodyModel):
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

    positive_parameters = ("m1", "m2", "m3", "m4", "m5", "m6", "m7", "i1", "i2", "i3", "i4", "i5",
                           "i6", "i7", "c0", "l0")

    def setup(self):
        p = self.params
        for key, value in p.items():
            setattr(self, "_" + key, value)
        # velocity-term coefficients of Q and q-dependent mass entries
        self._k2 = p["m2"] * p["da"] * p["rr"]
        self._k4 = p["m4"] * p["zt"] * (p["e"] - p["ea"])
        self._k6 = p["m6"] * p["u"] * (p["zf"] - p["fa"])
        m = p
        self._M0 = np.zeros((7, 7))  # constant part of M
        M0 = self._M0
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

    # -- state ------------------------------------------------------------------
    def initial_state(self):
        return INITIAL_Q.copy(), np.zeros(7)

    # -- dynamics ---------------------------------------------------------------
    def mass(self, q, t):
        M = self._M0.copy()
        cth, sph, som = np.cos(q[1]), np.sin(q[3]), np.sin(q[5])
        M[0, 0] -= 2.0 * self._k2 * cth
        M[0, 1] = M[1, 0] = M[0, 1] - self._k2 * cth
        M[3, 4] = M[4, 3] = M[3, 4] + self._k4 * sph
        M[4, 4] += 2.0 * self._k4 * sph
        M[5, 6] = M[6, 5] = M[5, 6] - self._k6 * som
        M[6, 6] -= 2.0 * self._k6 * som
        return M

    def mass_jacobian_term(self, q, a, t):
        """(M(q) a)_q: M depends on Θ, Φ, Ω only."""
        J = np.zeros((7, 7))
        s2 = self._k2 * np.sin(q[1])
        J[0, 1] = 2.0 * s2 * a[0] + s2 * a[1]
        J[1, 1] = s2 * a[0]
        c4 = self._k4 * np.cos(q[3])
        J[3, 3] = c4 * a[4]
        J[4, 3] = c4 * a[3] + 2.0 * c4 * a[4]
        c6 = -self._k6 * np.cos(q[5])
        J[5, 5] = c6 * a[6]
        J[6, 5] = c6 * a[5] + 2.0 * c6 * a[6]
        return J

    def _spring(self, gam):
        """Spring attachment point D, its γ-derivatives, and length."""
        cg, sg = np.cos(gam), np.sin(gam)
        sd, sc = self._sd, self._sc
        r = np.array([sd * cg + sc * sg + self._xb - self._xc,
                      sd * sg - sc * cg + self._yb - self._yc])
        dr = np.array([-sd * sg + sc * cg, sd * cg + sc * sg])
        return r, dr, float(np.hypot(r[0], r[1]))

    def forces(self, q, v, t, u):
        sth, cph, com = np.sin(q[1]), np.cos(q[3]), np.cos(q[5])
        bep, thp, php, dep, omp, epp = v[0], v[1], v[3], v[4], v[5], v[6]
        r, dr, L = self._spring(q[2])
        force = -self._c0 * (L - self._l0) / L
        return np.array([
            u[0] - self._k2 * thp * (thp + 2.0 * bep) * sth,
            self._k2 * bep * bep * sth,
            force * (r @ dr),
            self._k4 * dep * dep * cph,
            -self._k4 * php * (php + 2.0 * dep) * cph,
            -self._k6 * epp * epp * com,
            self._k6 * omp * (omp + 2.0 * epp) * com,
        ])

    def force_jacobians(self, q, v, t, u):
        sth, cth = np.sin(q[1]), np.cos(q[1])
        sph, cph = np.sin(q[3]), np.cos(q[3])
        som, com = np.sin(q[5]), np.cos(q[5])
        bep, thp, php, dep, omp, epp = v[0], v[1], v[3], v[4], v[5], v[6]
        k2, k4, k6 = self._k2, self._k4, self._k6
        Qq = np.zeros((7, 7))
        Qv = np.zeros((7, 7))
        Qq[0, 1] = -k2 * thp * (thp + 2.0 * bep) * cth
        Qv[0, 0] = -2.0 * k2 * thp * sth
        Qv[0, 1] = -k2 * (2.0 * thp + 2.0 * bep) * sth
        Qq[1, 1] = k2 * bep * bep * cth
        Qv[1, 0] = 2.0 * k2 * bep * sth
        # spring: Q3 = -dV/dγ, V = c0/2 (L - l0)^2
        r, dr, L = self._spring(q[2])
        ddr = -(r + np.array([self._xc - self._xb, self._yc - self._yb]))
        rdr = r @ dr
        c0, l0 = self._c0, self._l0
        Qq[2, 2] = -c0 * ((l0 / L ** 3) * rdr * rdr + (1.0 - l0 / L) * (dr @ dr + r @ ddr))
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
        return Qq, Qv

    # -- constraints (test set g, gp) --------------------------------------------
    def constraints(self, q, t):
        b, th, ga, ph, de, om, ep = q
        rr, d = self._rr, self._d
        bx = rr * np.cos(b) - d * np.cos(b + th)
        by = rr * np.sin(b) - d * np.sin(b + th)
        return np.array([
            bx - self._ss * np.sin(ga) - self._xb,
            by + self._ss * np.cos(ga) - self._yb,
            bx - self._e * np.sin(ph + de) - self._zt * np.cos(de) - self._xa,
            by + self._e * np.cos(ph + de) - self._zt * np.sin(de) - self._ya,
            bx - self._zf * np.cos(om + ep) - self._u * np.sin(ep) - self._xa,
            by - self._zf * np.sin(om + ep) + self._u * np.cos(ep) - self._ya,
        ])

    def constraint_jacobian(self, q, t):
        b, th, ga, ph, de, om, ep = q
        rr, d, ss, e, zt, zf, u = self._rr, self._d, self._ss, self._e, self._zt, self._zf, self._u
        sb, cb = np.sin(b), np.cos(b)
        sbt, cbt = np.sin(b + th), np.cos(b + th)
        spd, cpd = np.sin(ph + de), np.cos(ph + de)
        soe, coe = np.sin(om + ep), np.cos(om + ep)
        G = np.zeros((6, 7))
        G[0::2, 0] = -rr * sb + d * sbt
        G[0::2, 1] = d * sbt
        G[1::2, 0] = rr * cb - d * cbt
        G[1::2, 1] = -d * cbt
        G[0, 2] = -ss * np.cos(ga)
        G[1, 2] = -ss * np.sin(ga)
        G[2, 3] = -e * cpd
        G[2, 4] = -e * cpd + zt * np.sin(de)
        G[3, 3] = -e * spd
        G[3, 4] = -e * spd - zt * np.cos(de)
        G[4, 5] = zf * soe
        G[4, 6] = zf * soe - u * np.cos(ep)
        G[5, 5] = -zf * coe
        G[5, 6] = -zf * coe - u * np.sin(ep)
        return G

    def constraint_dt(self, q, t):
        return np.zeros(6)

    def gamma(self, q, v, t):
        # seed 000 eq. 5: each term a·f(φ) (f = sin or cos) contributes
        # +a·f(φ)·φ'² to γ = -(C_q v)_q v, since f'' = -f.
        b, th, ga, ph, de, om, ep = q
        bp, thp, gap, php, dep, omp, epp = v
        rr, d = self._rr, self._d
        bt2 = (bp + thp) ** 2
        bx = rr * np.cos(b) * bp * bp - d * np.cos(b + th) * bt2
        by = rr * np.sin(b) * bp * bp - d * np.sin(b + th) * bt2
        pd2 = (php + dep) ** 2
        oe2 = (omp + epp) ** 2
        return np.array([
            bx - self._ss * np.sin(ga) * gap * gap,
            by + self._ss * np.cos(ga) * gap * gap,
            bx - self._e * np.sin(ph + de) * pd2 - self._zt * np.cos(de) * dep * dep,
            by + self._e * np.cos(ph + de) * pd2 - self._zt * np.sin(de) * dep * dep,
            bx - self._zf * np.cos(om + ep) * oe2 - self._u * np.sin(ep) * epp * epp,
            by - self._zf * np.sin(om + ep) * oe2 + self._u * np.cos(ep) * epp * epp,
        ])

    def constraint_force_jacobian(self, q, lam, t):
        # Σ_i λ_i ∇²C_i; a term a·f(c·q) of C_i has Hessian −a·f(c·q) c cᵀ.
        b, th, ga, ph, de, om, ep = q
        rr, d = self._rr, self._d
        lx, ly = lam[0] + lam[2] + lam[4], lam[1] + lam[3] + lam[5]
        H = np.zeros((7, 7))
        hbt = d * (lx * np.cos(b + th) + ly * np.sin(b + th))
        H[0, 0] = hbt - rr * (lx * np.cos(b) + ly * np.sin(b))
        H[0, 1] = H[1, 0] = H[1, 1] = hbt
        H[2, 2] = self._ss * (lam[0] * np.sin(ga) - lam[1] * np.cos(ga))
        hpd = self._e * (lam[2] * np.sin(ph + de) - lam[3] * np.cos(ph + de))
        H[3, 3] = H[3, 4] = H[4, 3] = hpd
        H[4, 4] = hpd + self._zt * (lam[2] * np.cos(de) + lam[3] * np.sin(de))
        hoe = self._zf * (lam[4] * np.cos(om + ep) + lam[5] * np.sin(om + ep))
        H[5, 5] = H[5, 6] = H[6, 5] = hoe
        H[6, 6] = hoe + self._u * (lam[4] * np.sin(ep) - lam[5] * np.cos(ep))
        return H

    # -- outputs / energy -------------------------------------------------------------
    def outputs_qv(self, t, q, v, u):
        _, _, L = self._spring(q[2])
        return np.array([q[0], v[0], L, self._c0 * (L - self._l0)])

    def potential_energy(self, q, t=0.0):
        """Spring energy c0/2 (L − l0)²; the driving torque is not conservative."""
        _, _, L = self._spring(q[2])
        return 0.5 * self._c0 * (L - self._l0) ** 2
