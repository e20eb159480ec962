"""Compiled rigid-body kernels of a fixed-base kinematic tree (URDF robots, issue 18).

The kernels of :mod:`cosim.models.kernels` for joint coordinates of a tree of
revolute and prismatic joints, written in spatial vectors in **world
coordinates** (Featherstone, *Rigid Body Dynamics Algorithms*, 2008, §5.3
RNEA and §6.2 CRBA "in base coordinates"; motion vectors (ω, v_O) with v_O
the velocity of the body point at the world origin, forces (n_O, f)):

    M(q) q'' = Q = sat(u) − rnea(q, q', 0) − d ∘ q' − f ∘ tanh(q'/v_s)

* M by the composite-rigid-body algorithm: M_ij = S_iᵀ I^c_j S_j for i an
  ancestor of j (no frame transforms: every vector is in world coordinates);
* rnea(q, q', q'') by the recursive Newton-Euler algorithm with the base
  accelerating at −g;
* Q_q, Q_v and (M a)_q = ∂rnea(q, 0, a; g = 0)/∂q analytically, O(n²), from
  one RNEA pass (:func:`_rnea_derivatives`): a change of q_j turns the
  subtree of joint j about S_j, so for a body k in it ∂X_k/∂q_j = S_j × X_k
  for its motion vectors and ∂I_k x = S_j ×* (I_k x) − I_k (S_j × x), which
  gives, with λ = the parent of j,
  ∂v_k = S_j × (v_k − v_λ),
  ∂a_k = S_j × (a_k − a_λ) − (S_j × v_λ) × (v_k − v_λ),
  ∂f_k = ∂I_k a_k + I_k ∂a_k + ∂v_k ×* I_k v_k + v_k ×* (∂I_k v_k + I_k ∂v_k),
  ∂τ_i = (S_j × S_i)·F_i + S_i·∂F_i in the subtree, S_i·∂F_j above it
  (F: forces summed over subtrees); for q'_j: ∂v_k = S_j,
  ∂a_k = S_j × (v_k − v_j) + v_j × S_j.  The joint terms' slopes analytically.

Parameter vector ``p`` (flat floats, :func:`tree_parameters` packs it from the joint
table pinocchio's URDF parser builds, which merges the links of fixed joints):
``p[0:HEAD] = (n, g_x, g_y, g_z, v_s)``, then per joint (parents before
children) a block of ``BLOCK`` numbers: parent index (−1 = the fixed base),
type (0 revolute, 1 prismatic), placement in the parent joint's frame
(rotation row-major, translation), the link's mass, centre of mass and
rotational inertia about it (joint frame, row-major), damping d, Coulomb
friction f and effort limit (0 = none).  Every joint frame is turned about its
origin so that its z axis is the joint axis (pinocchio's joint frame times the
rotation F of :func:`_axis_frame`): a joint then rotates about, or slides
along, its own z axis.  After the joint
blocks: the number m of mimic constraints, then per constraint (mimic joint i,
followed joint j, multiplier k, offset o), the holonomic constraint

    C = q_i − k q_j − o = 0     (URDF ``<mimic>``; C_q constant, C_t = γ = 0)

and last, one flag per joint: 1 when the joint is **held** by a position stop
(the joint and every joint of its mimic group, cosim.models.urdf), else 0.  A
held joint's acceleration is removed from the equations: its row and column
of M become the unit vector, its row of Q, Q_q, Q_v and (M a)_q is zero, so
q''_i = 0 exactly and the other joints move as with the joint locked (the
stop's reaction is the multiplier the event function computes in Python).
Every method runs the held system unchanged (the hold is in M and Q).

so every robot, with or without mimic joints or stops, runs the same kernels.

After the flags, a **kinematics cache** (work space, not a parameter): a valid
flag, the q it holds, the work arrays W (n × NW) and B (n × NB) of the last
:func:`_kinematics` call of this p, a scratch C (n × NB) for the composite inertias
and n zeros (:func:`_tree_work`).  A method evaluates M and Q (and the Jacobians)
at the same q one after the other; the second one finds the poses there instead of
recomputing them (same numbers: the result is bit-identical), and neither kernel
allocates.  Kinematics depend only on q and the tree in p, which no one changes in
place (new parameters make a new p); the held flags do not enter them.  The kernels
that run the RNEA on the cached W (:func:`tree_forces`, the stops' check) overwrite
only its velocity, acceleration and force columns, which no one reads from the cache.

Last, the **output frames** (:func:`tree_outputs`): their number F, then per frame
its parent joint (−1: the fixed base) and its placement in that joint's frame
(rotation row-major, translation): 13 numbers each.
"""
from __future__ import annotations

import math

import numpy as np

from ..jit import kernel_helper

HEAD = 5
BLOCK = 30
PARENT, TYPE, ROT, POS, MASS, COM, INERTIA, DAMPING, FRICTION, EFFORT = \
    0, 1, 2, 11, 14, 15, 18, 27, 28, 29
# columns of the per-joint work array W: pose (R, o), motion subspace, velocity,
# acceleration, force; inertia array B: mass, first moment, inertia about O
NW = 36
W_R, W_O, W_S, W_V, W_A, W_F = 0, 9, 12, 18, 24, 30
NB = 13
MIMIC = 4  # numbers per mimic constraint: mimic joint, followed joint, multiplier, offset


@kernel_helper(inline=True)
def _mul33(a, b):
    """The 3×3 product a b of two row-major 9-tuples, each entry summed left to right."""
    return (a[0] * b[0] + a[1] * b[3] + a[2] * b[6], a[0] * b[1] + a[1] * b[4] + a[2] * b[7],
            a[0] * b[2] + a[1] * b[5] + a[2] * b[8], a[3] * b[0] + a[4] * b[3] + a[5] * b[6],
            a[3] * b[1] + a[4] * b[4] + a[5] * b[7], a[3] * b[2] + a[4] * b[5] + a[5] * b[8],
            a[6] * b[0] + a[7] * b[3] + a[8] * b[6], a[6] * b[1] + a[7] * b[4] + a[8] * b[7],
            a[6] * b[2] + a[7] * b[5] + a[8] * b[8])


@kernel_helper(inline=True)
def _nine(x, k):
    """x[k:k + 9] as a tuple (a rotation, row-major)."""
    return (x[k], x[k + 1], x[k + 2], x[k + 3], x[k + 4], x[k + 5], x[k + 6], x[k + 7], x[k + 8])


@kernel_helper  # (large: compiled once, on its own, not inlined)
def _kinematics(q, p, n, W, B):
    """World pose R, origin o and motion subspace S = (z, o × z) or (0, z) (z: the axis)
    of every joint frame, and the link's spatial inertia about the world origin
    (mass, first moment h = m c, I_O = R I_c Rᵀ + m(|c|² 1 − c cᵀ)).  The joint
    axis is the frame's z axis (module docstring): R = A Rot_z(q) turns the first
    two columns of A = R_parent E only.  Computed in local variables and written
    once (W and B are views of p: a store into them would make every later read
    of p a load)."""
    for i in range(n):
        b = HEAD + BLOCK * i
        k = int(p[b + PARENT])
        t0, t1, t2 = p[b + POS], p[b + POS + 1], p[b + POS + 2]
        # A = R_parent E, o = o_parent + R_parent t
        if k < 0:
            A = _nine(p, b + ROT)
            ox, oy, oz = t0, t1, t2
        else:
            P = (W[k, 0], W[k, 1], W[k, 2], W[k, 3], W[k, 4], W[k, 5], W[k, 6], W[k, 7], W[k, 8])
            A = _mul33(P, _nine(p, b + ROT))
            ox = W[k, W_O] + P[0] * t0 + P[1] * t1 + P[2] * t2
            oy = W[k, W_O + 1] + P[3] * t0 + P[4] * t1 + P[5] * t2
            oz = W[k, W_O + 2] + P[6] * t0 + P[7] * t1 + P[8] * t2
        zx, zy, zz = A[2], A[5], A[8]
        if p[b + TYPE] == 0.0:
            # R = A Rot_z(q): columns (c a_x + s a_y, c a_y − s a_x, a_z)
            co, si = math.cos(q[i]), math.sin(q[i])
            R = (co * A[0] + si * A[1], co * A[1] - si * A[0], zx,
                 co * A[3] + si * A[4], co * A[4] - si * A[3], zy,
                 co * A[6] + si * A[7], co * A[7] - si * A[6], zz)
            S = (zx, zy, zz, oy * zz - oz * zy, oz * zx - ox * zz, ox * zy - oy * zx)
        else:
            R = A
            ox += zx * q[i]
            oy += zy * q[i]
            oz += zz * q[i]
            S = (0.0, 0.0, 0.0, zx, zy, zz)
        for r in range(9):
            W[i, r] = R[r]
        W[i, W_O], W[i, W_O + 1], W[i, W_O + 2] = ox, oy, oz
        for r in range(6):
            W[i, W_S + r] = S[r]
        # the link's inertia in world coordinates about the origin: R I_c Rᵀ (symmetric:
        # T = R I_c, then the upper triangle of T Rᵀ), then m(|c|² 1 − c cᵀ)
        m = p[b + MASS]
        lx, ly, lz = p[b + COM], p[b + COM + 1], p[b + COM + 2]
        cx = ox + R[0] * lx + R[1] * ly + R[2] * lz
        cy = oy + R[3] * lx + R[4] * ly + R[5] * lz
        cz = oz + R[6] * lx + R[7] * ly + R[8] * lz
        c2 = cx * cx + cy * cy + cz * cz
        T = _mul33(R, _nine(p, b + INERTIA))
        mx, my = m * cx, m * cy
        ixy = T[0] * R[3] + T[1] * R[4] + T[2] * R[5] - mx * cy
        ixz = T[0] * R[6] + T[1] * R[7] + T[2] * R[8] - mx * cz
        iyz = T[3] * R[6] + T[4] * R[7] + T[5] * R[8] - my * cz
        B[i, 0] = m
        B[i, 1], B[i, 2], B[i, 3] = mx, my, m * cz
        B[i, 4] = T[0] * R[0] + T[1] * R[1] + T[2] * R[2] + m * (c2 - cx * cx)
        B[i, 5] = ixy
        B[i, 6] = ixz
        B[i, 7] = ixy
        B[i, 8] = T[3] * R[3] + T[4] * R[4] + T[5] * R[5] + m * (c2 - cy * cy)
        B[i, 9] = iyz
        B[i, 10] = ixz
        B[i, 11] = iyz
        B[i, 12] = T[6] * R[6] + T[7] * R[7] + T[8] * R[8] + m * (c2 - cz * cz)


@kernel_helper(inline=True)
def kinematics_cache(p, n):
    """Index in p of the kinematics cache (after the held flags; module docstring)."""
    return held_flags(p, n) + n


@kernel_helper(inline=True)
def cache_length(n):
    """Floats of the kinematics cache of an n-joint tree: valid flag, q, W, B, C, zeros."""
    return 1 + n + n * (NW + 2 * NB) + n


@kernel_helper(inline=True)
def _rows(x, k, rows, cols):
    """x[k:k + rows·cols] as a (rows, cols) array, a view of x (any stride: numba's
    reshape takes contiguous arrays only, and a kernel's p is typed without layout)."""
    st = x.strides[0]
    return np.lib.stride_tricks.as_strided(x[k:k + rows * cols], shape=(rows, cols), strides=(cols * st, st))


@kernel_helper(inline=True)
def _tree_work(q, p, n):
    """(W, B, C, z): the work arrays in the kinematics cache at the end of p (module
    docstring), W's kinematic columns (pose, origin, motion subspace) and B
    those of q — computed there unless the cache holds this q already; C scratch, z
    n zeros.  In a fresh buffer for a p without the cache."""
    c = kinematics_cache(p, n)
    w = p
    if p.shape[0] < c + cache_length(n):  # (a p without the cache)
        w, c = np.zeros(cache_length(n)), 0
    k = c + 1 + n
    W = _rows(w, k, n, NW)
    k += n * NW
    B = _rows(w, k, n, NB)
    k += n * NB
    C = _rows(w, k, n, NB)
    z = w[k + n * NB:k + n * NB + n]
    for i in range(n):
        z[i] = 0.0
    hit = w[c] == 1.0
    if hit:
        for i in range(n):
            if w[c + 1 + i] != q[i]:
                hit = False
                break
    if not hit:
        w[c] = 0.0
        _kinematics(q, p, n, W, B)
        for i in range(n):
            w[c + 1 + i] = q[i]
        w[c] = 1.0
    return W, B, C, z


@kernel_helper(inline=True)
def _kinematics_at(q, p, n, W, B):
    """:func:`_kinematics` through the cache (:func:`_tree_work`) into the caller's W
    (its kinematic columns) and B."""
    Wc, Bc, _, _ = _tree_work(q, p, n)
    for i in range(n):
        for r in range(W_V):
            W[i, r] = Wc[i, r]
        for r in range(NB):
            B[i, r] = Bc[i, r]


@kernel_helper(inline=True)
def frame_table(p, n):
    """Index in p of the output frames' table (after the kinematics cache)."""
    return kinematics_cache(p, n) + cache_length(n)


FRAME = 13  # numbers per output frame: parent joint, rotation (9), translation (3)


@kernel_helper(inline=True)
def _quaternion(R, y, o):
    """The unit quaternion (x, y, z, w) of the rotation matrix R (9 numbers, row-major)
    into y[o:o + 4], by Eigen's branches (what pinocchio's ``Quaternion(R)`` does)."""
    t = R[0] + R[4] + R[8]
    if t > 0.0:
        t = math.sqrt(t + 1.0)
        w = 0.5 * t
        t = 0.5 / t
        y[o] = (R[7] - R[5]) * t
        y[o + 1] = (R[2] - R[6]) * t
        y[o + 2] = (R[3] - R[1]) * t
        y[o + 3] = w
        return
    i = 0
    if R[4] > R[0]:
        i = 1
    if R[8] > R[4 * i]:
        i = 2
    j = (i + 1) % 3
    k = (j + 1) % 3
    t = math.sqrt(R[4 * i] - R[4 * j] - R[4 * k] + 1.0)
    y[o + i] = 0.5 * t
    t = 0.5 / t
    y[o + 3] = (R[3 * k + j] - R[3 * j + k]) * t
    y[o + j] = (R[3 * j + i] + R[3 * i + j]) * t
    y[o + k] = (R[3 * k + i] + R[3 * i + k]) * t


@kernel_helper(inline=True)
def _cross(ax, ay, az, bx, by, bz):
    return ay * bz - az * by, az * bx - ax * bz, ax * by - ay * bx


@kernel_helper(inline=True)
def _inertia_row(B, i):
    """Row i of an inertia array as a tuple: mass, first moment h, I_O (row-major)."""
    return (B[i, 0], B[i, 1], B[i, 2], B[i, 3], B[i, 4], B[i, 5], B[i, 6], B[i, 7], B[i, 8],
            B[i, 9], B[i, 10], B[i, 11], B[i, 12])


@kernel_helper(inline=True)
def _inertia_apply(b, w0, w1, w2, v0, v1, v2):
    """(n_O, f) = I (ω, v_O) for the inertia b (:func:`_inertia_row`):
    n_O = I_O ω + h × v_O, f = m v_O + ω × h."""
    hx, hy, hz = b[1], b[2], b[3]
    c0, c1, c2 = _cross(hx, hy, hz, v0, v1, v2)
    n0 = b[4] * w0 + b[5] * w1 + b[6] * w2 + c0
    n1 = b[7] * w0 + b[8] * w1 + b[9] * w2 + c1
    n2 = b[10] * w0 + b[11] * w1 + b[12] * w2 + c2
    d0, d1, d2 = _cross(w0, w1, w2, hx, hy, hz)
    m = b[0]
    return n0, n1, n2, m * v0 + d0, m * v1 + d1, m * v2 + d2


@kernel_helper(inline=True)
def _inertia_times(B, i, w0, w1, w2, v0, v1, v2):
    """(n_O, f) = I (ω, v_O) for the inertia in row i of B (:func:`_inertia_apply`)."""
    return _inertia_apply(_inertia_row(B, i), w0, w1, w2, v0, v1, v2)


@kernel_helper  # (large: compiled once, on its own, not inlined)
def _rnea(p, n, W, B, qd, qdd, gx, gy, gz, tau):
    """τ = rnea(q, q', q'') (Featherstone Table 5.1 in world coordinates) for the
    poses in W; the base accelerates at −g.  Each body's terms in local variables,
    its v, a and f written once (W is a view of p, as in :func:`_kinematics`)."""
    for i in range(n):
        k = int(p[HEAD + BLOCK * i + PARENT])
        S = (W[i, W_S], W[i, W_S + 1], W[i, W_S + 2], W[i, W_S + 3], W[i, W_S + 4], W[i, W_S + 5])
        qi, ai = qd[i], qdd[i]
        s0, s1, s2, u0, u1, u2 = S[0] * qi, S[1] * qi, S[2] * qi, S[3] * qi, S[4] * qi, S[5] * qi
        if k < 0:
            w0, w1, w2, v0, v1, v2 = s0, s1, s2, u0, u1, u2
            a0, a1, a2 = S[0] * ai, S[1] * ai, S[2] * ai
            a3, a4, a5 = S[3] * ai - gx, S[4] * ai - gy, S[5] * ai - gz
        else:
            w0, w1, w2 = W[k, W_V] + s0, W[k, W_V + 1] + s1, W[k, W_V + 2] + s2
            v0, v1, v2 = W[k, W_V + 3] + u0, W[k, W_V + 4] + u1, W[k, W_V + 5] + u2
            a0, a1, a2 = W[k, W_A] + S[0] * ai, W[k, W_A + 1] + S[1] * ai, W[k, W_A + 2] + S[2] * ai
            a3, a4, a5 = W[k, W_A + 3] + S[3] * ai, W[k, W_A + 4] + S[4] * ai, W[k, W_A + 5] + S[5] * ai
        # a += v × (S q'): (ω1, v1) × (ω2, v2) = (ω1 × ω2, ω1 × v2 + v1 × ω2)
        c0, c1, c2 = _cross(w0, w1, w2, s0, s1, s2)
        a0 += c0
        a1 += c1
        a2 += c2
        c0, c1, c2 = _cross(w0, w1, w2, u0, u1, u2)
        d0, d1, d2 = _cross(v0, v1, v2, s0, s1, s2)
        a3 += c0 + d0
        a4 += c1 + d1
        a5 += c2 + d2
        # f = I a + v ×* I v, (ω, v) ×* (n, f) = (ω × n + v × f, ω × f)
        bi = _inertia_row(B, i)
        fa = _inertia_apply(bi, a0, a1, a2, a3, a4, a5)
        m = _inertia_apply(bi, w0, w1, w2, v0, v1, v2)
        c0, c1, c2 = _cross(w0, w1, w2, m[0], m[1], m[2])
        d0, d1, d2 = _cross(v0, v1, v2, m[3], m[4], m[5])
        e0, e1, e2 = _cross(w0, w1, w2, m[3], m[4], m[5])
        W[i, W_V], W[i, W_V + 1], W[i, W_V + 2] = w0, w1, w2
        W[i, W_V + 3], W[i, W_V + 4], W[i, W_V + 5] = v0, v1, v2
        W[i, W_A], W[i, W_A + 1], W[i, W_A + 2] = a0, a1, a2
        W[i, W_A + 3], W[i, W_A + 4], W[i, W_A + 5] = a3, a4, a5
        W[i, W_F] = fa[0] + c0 + d0
        W[i, W_F + 1] = fa[1] + c1 + d1
        W[i, W_F + 2] = fa[2] + c2 + d2
        W[i, W_F + 3] = fa[3] + e0
        W[i, W_F + 4] = fa[4] + e1
        W[i, W_F + 5] = fa[5] + e2
    for i in range(n - 1, -1, -1):
        f0, f1, f2, f3, f4, f5 = (W[i, W_F], W[i, W_F + 1], W[i, W_F + 2], W[i, W_F + 3],
                                  W[i, W_F + 4], W[i, W_F + 5])
        tau[i] = (W[i, W_S] * f0 + W[i, W_S + 1] * f1 + W[i, W_S + 2] * f2 + W[i, W_S + 3] * f3
                  + W[i, W_S + 4] * f4 + W[i, W_S + 5] * f5)
        k = int(p[HEAD + BLOCK * i + PARENT])
        if k >= 0:
            W[k, W_F] += f0
            W[k, W_F + 1] += f1
            W[k, W_F + 2] += f2
            W[k, W_F + 3] += f3
            W[k, W_F + 4] += f4
            W[k, W_F + 5] += f5


@kernel_helper(inline=True)
def _crba(p, n, W, B, C, M):
    """M by composite rigid bodies (Featherstone Table 6.2 in world coordinates)."""
    for i in range(n):
        for r in range(NB):
            C[i, r] = B[i, r]
    for i in range(n - 1, -1, -1):
        k = int(p[HEAD + BLOCK * i + PARENT])
        if k >= 0:
            for r in range(NB):
                C[k, r] += C[i, r]
    for j in range(n):
        F = _inertia_times(C, j, W[j, W_S], W[j, W_S + 1], W[j, W_S + 2],
                           W[j, W_S + 3], W[j, W_S + 4], W[j, W_S + 5])
        k = j
        while k >= 0:
            s = W[k, W_S] * F[0]
            for r in range(1, 6):
                s += W[k, W_S + r] * F[r]
            M[k, j] = s
            M[j, k] = s
            k = int(p[HEAD + BLOCK * k + PARENT])


@kernel_helper(inline=True)
def _sv_mcross(a, b):
    """Spatial motion cross product (ω1, v1) × (ω2, v2) = (ω1 × ω2, ω1 × v2 + v1 × ω2)."""
    c0, c1, c2 = _cross(a[0], a[1], a[2], b[0], b[1], b[2])
    d0, d1, d2 = _cross(a[0], a[1], a[2], b[3], b[4], b[5])
    e0, e1, e2 = _cross(a[3], a[4], a[5], b[0], b[1], b[2])
    return (c0, c1, c2, d0 + e0, d1 + e1, d2 + e2)


@kernel_helper(inline=True)
def _sv_fcross(a, f):
    """Spatial force cross product (ω, v) ×* (n, f) = (ω × n + v × f, ω × f)."""
    c0, c1, c2 = _cross(a[0], a[1], a[2], f[0], f[1], f[2])
    d0, d1, d2 = _cross(a[3], a[4], a[5], f[3], f[4], f[5])
    e0, e1, e2 = _cross(a[0], a[1], a[2], f[3], f[4], f[5])
    return (c0 + d0, c1 + d1, c2 + d2, e0, e1, e2)


@kernel_helper(inline=True)
def _sv_row(W, i, c):
    return (W[i, c], W[i, c + 1], W[i, c + 2], W[i, c + 3], W[i, c + 4], W[i, c + 5])


@kernel_helper(inline=True)
def _sv_inertia(B, i, x):
    return _inertia_times(B, i, x[0], x[1], x[2], x[3], x[4], x[5])


@kernel_helper(inline=True)
def _sv_add(a, b):
    return (a[0] + b[0], a[1] + b[1], a[2] + b[2], a[3] + b[3], a[4] + b[4], a[5] + b[5])


@kernel_helper(inline=True)
def _sv_sub(a, b):
    return (a[0] - b[0], a[1] - b[1], a[2] - b[2], a[3] - b[3], a[4] - b[4], a[5] - b[5])


@kernel_helper(inline=True)
def _sv_dot(a, b):
    return a[0] * b[0] + a[1] * b[1] + a[2] * b[2] + a[3] * b[3] + a[4] * b[4] + a[5] * b[5]


@kernel_helper  # (large: compiled once, on its own, not inlined)
def _rnea_derivatives(p, n, W, B, gx, gy, gz, wrt_q, D, mark, dF):
    """D[i, j] = ∂τ_i/∂q_j (wrt_q) or ∂τ_i/∂q'_j after _rnea filled W (v, a per body,
    F summed over subtrees): a change of q_j turns the subtree of j about S_j."""
    zero = (0.0, 0.0, 0.0, 0.0, 0.0, 0.0)
    for j in range(n):
        Sj = _sv_row(W, j, W_S)
        pj = int(p[HEAD + BLOCK * j + PARENT])
        if pj >= 0:
            vp, ap = _sv_row(W, pj, W_V), _sv_row(W, pj, W_A)
        else:
            vp, ap = zero, (0.0, 0.0, 0.0, -gx, -gy, -gz)
        vj = _sv_row(W, j, W_V)
        Sv = _sv_mcross(Sj, vp)
        for k in range(n):
            mark[k] = 0
            for r in range(6):
                dF[k, r] = 0.0
        for k in range(j, n):
            pk = int(p[HEAD + BLOCK * k + PARENT])
            if k != j and (pk < 0 or mark[pk] == 0):
                continue
            mark[k] = 1
            vk, ak = _sv_row(W, k, W_V), _sv_row(W, k, W_A)
            Ivk = _sv_inertia(B, k, vk)
            if wrt_q:
                dv = _sv_mcross(Sj, _sv_sub(vk, vp))
                da = _sv_sub(_sv_mcross(Sj, _sv_sub(ak, ap)), _sv_mcross(Sv, _sv_sub(vk, vp)))
                # dI x = S ×* (I x) − I (S × x)
                dIa = _sv_sub(_sv_fcross(Sj, _sv_inertia(B, k, ak)), _sv_inertia(B, k, _sv_mcross(Sj, ak)))
                dIv = _sv_sub(_sv_fcross(Sj, Ivk), _sv_inertia(B, k, _sv_mcross(Sj, vk)))
                df = _sv_add(_sv_add(dIa, _sv_inertia(B, k, da)), _sv_add(_sv_fcross(dv, Ivk), _sv_fcross(vk, _sv_add(dIv, _sv_inertia(B, k, dv)))))
            else:
                dv = Sj
                da = _sv_add(_sv_mcross(Sj, _sv_sub(vk, vj)), _sv_mcross(vj, Sj))
                df = _sv_add(_sv_inertia(B, k, da), _sv_add(_sv_fcross(dv, Ivk), _sv_fcross(vk, _sv_inertia(B, k, dv))))
            for r in range(6):
                dF[k, r] = df[r]
        for k in range(n - 1, j, -1):
            if mark[k] == 1:
                pk = int(p[HEAD + BLOCK * k + PARENT])
                for r in range(6):
                    dF[pk, r] += dF[k, r]
        for i in range(j, n):
            if mark[i] == 1:
                Si = _sv_row(W, i, W_S)
                s = _sv_dot(Si, _sv_row(dF, i, 0))
                if wrt_q:
                    s += _sv_dot(_sv_mcross(Sj, Si), _sv_row(W, i, W_F))
                D[i, j] = s
        dFj = _sv_row(dF, j, 0)
        i = pj
        while i >= 0:
            D[i, j] = _sv_dot(_sv_row(W, i, W_S), dFj)
            i = int(p[HEAD + BLOCK * i + PARENT])


@kernel_helper(inline=True)
def joint_forces(v, u, p, n, Q):
    """Q_i += sat(u_i) − d_i v_i − f_i tanh(v_i / v_s): effort saturation, viscous
    damping and smoothed Coulomb friction (also the Python model's joint terms)."""
    vs = p[4]
    for i in range(n):
        b = HEAD + BLOCK * i
        x = u[i]
        lim = p[b + EFFORT]
        if lim > 0.0:
            x = min(max(x, -lim), lim)
        x = x - p[b + DAMPING] * v[i]
        fr = p[b + FRICTION]
        if fr != 0.0:  # (a joint without friction: no tanh)
            x = x - fr * math.tanh(v[i] / vs)
        Q[i] += x


@kernel_helper(inline=True)
def joint_force_slopes(v, p, n, Qv):
    """Qv_ii −= d_i + f_i / (v_s cosh²(v_i / v_s)): ∂/∂v of :func:`joint_forces`
    (1/cosh²x = 4e/(1 + e)², e = exp(−2|x|): no overflow)."""
    vs = p[4]
    for i in range(n):
        b = HEAD + BLOCK * i
        e = math.exp(-2.0 * abs(v[i] / vs))
        Qv[i, i] -= p[b + DAMPING] + p[b + FRICTION] / vs * (4.0 * e / ((1.0 + e) * (1.0 + e)))


@kernel_helper(inline=True)
def held_flags(p, n):
    """Index in p of the per-joint held flags (after the mimic constraints)."""
    b = HEAD + BLOCK * n
    return b + 1 + MIMIC * int(p[b])


# -- the kernels ------------------------------------------------------------------------------
def tree_mass(q, t, p, M):
    n = int(p[0])
    W, B, C, _ = _tree_work(q, p, n)
    _crba(p, n, W, B, C, M)
    h = held_flags(p, n)
    for i in range(n):
        if p[h + i] != 0.0:  # a held joint: its row and column of M the unit vector
            for j in range(n):
                M[i, j] = 0.0
                M[j, i] = 0.0
            M[i, i] = 1.0


def tree_forces(q, v, t, u, p, Q):
    n = int(p[0])
    W, B, _, z = _tree_work(q, p, n)
    _rnea(p, n, W, B, v, z, p[1], p[2], p[3], Q)
    for i in range(n):
        Q[i] = -Q[i]
    joint_forces(v, u, p, n, Q)
    h = held_flags(p, n)
    for i in range(n):
        if p[h + i] != 0.0:
            Q[i] = 0.0


def tree_force_jacobians(q, v, t, u, p, Qq, Qv):
    """Q_q = −∂rnea(q, v, 0)/∂q, Q_v = −∂rnea/∂v − the joint terms' slopes."""
    n = int(p[0])
    W, B = np.zeros((n, NW)), np.zeros((n, NB))
    tau, mark, dF = np.zeros(n), np.zeros(n, dtype=np.int64), np.zeros((n, 6))
    _kinematics_at(q, p, n, W, B)
    _rnea(p, n, W, B, v, np.zeros(n), p[1], p[2], p[3], tau)
    _rnea_derivatives(p, n, W, B, p[1], p[2], p[3], True, Qq, mark, dF)
    _rnea_derivatives(p, n, W, B, p[1], p[2], p[3], False, Qv, mark, dF)
    for i in range(n):
        for j in range(n):
            Qq[i, j] = -Qq[i, j]
            Qv[i, j] = -Qv[i, j]
    joint_force_slopes(v, p, n, Qv)
    h = held_flags(p, n)
    for i in range(n):
        if p[h + i] != 0.0:
            for j in range(n):
                Qq[i, j] = 0.0
                Qv[i, j] = 0.0


def tree_mass_jacobian_term(q, a, t, p, J):
    """(M(q) a)_q = ∂rnea(q, 0, a; g = 0)/∂q (held joints: a_i = 0, row i zero)."""
    n = int(p[0])
    W, B = np.zeros((n, NW)), np.zeros((n, NB))
    tau, mark, dF = np.zeros(n), np.zeros(n, dtype=np.int64), np.zeros((n, 6))
    h = held_flags(p, n)
    a = a.copy()
    for i in range(n):
        if p[h + i] != 0.0:
            a[i] = 0.0
    _kinematics_at(q, p, n, W, B)
    _rnea(p, n, W, B, np.zeros(n), a, 0.0, 0.0, 0.0, tau)
    _rnea_derivatives(p, n, W, B, 0.0, 0.0, 0.0, True, J, mark, dF)
    for i in range(n):
        if p[h + i] != 0.0:
            for j in range(n):
                J[i, j] = 0.0


def tree_outputs(q, v, t, u, p, y):
    """The outputs of cosim.models.urdf: q, v, then per output frame its origin
    (x, y, z) and orientation quaternion (x, y, z, w) in the root frame: the parent
    joint's world pose (:func:`_kinematics`) times the frame's placement."""
    n = int(p[0])
    for i in range(n):
        y[i] = q[i]
        y[n + i] = v[i]
    f = frame_table(p, n)
    F = int(p[f])
    if F == 0:
        return
    W, B, _, _ = _tree_work(q, p, n)
    R = np.zeros(9)
    for r in range(F):
        b = f + 1 + FRAME * r
        j = int(p[b])
        o = 2 * n + 7 * r
        for a in range(3):
            if j < 0:
                y[o + a] = p[b + 10 + a]
            else:
                y[o + a] = (W[j, W_O + a] + W[j, 3 * a] * p[b + 10] + W[j, 3 * a + 1] * p[b + 11]
                            + W[j, 3 * a + 2] * p[b + 12])
            for c in range(3):
                if j < 0:
                    R[3 * a + c] = p[b + 1 + 3 * a + c]
                else:
                    R[3 * a + c] = (W[j, 3 * a] * p[b + 1 + c] + W[j, 3 * a + 1] * p[b + 4 + c]
                                    + W[j, 3 * a + 2] * p[b + 7 + c])
        _quaternion(R, y, o + 3)


def tree_constraints(q, t, p, C):
    """The mimic constraints C_k = q_i − k q_j − o (module docstring)."""
    b = HEAD + BLOCK * int(p[0])
    for r in range(int(p[b])):
        e = b + 1 + MIMIC * r
        C[r] = q[int(p[e])] - p[e + 2] * q[int(p[e + 1])] - p[e + 3]


def tree_constraint_jacobian(q, t, p, Cq):
    """C_q of the mimic constraints: +1 at the mimic joint, −k at the joint it follows."""
    b = HEAD + BLOCK * int(p[0])
    for r in range(int(p[b])):
        e = b + 1 + MIMIC * r
        Cq[r, int(p[e])] += 1.0
        Cq[r, int(p[e + 1])] -= p[e + 2]


def no_constraints(q, t, p, out):
    """C_t of the mimic constraints: zero (out arrives zero-filled)."""


def no_constraint_terms(q, x, t, p, out):
    """γ(q, v) and (C_qᵀλ)_q of constraints linear in q with constant coefficients: zero."""


def tree_kernels():
    from .kernels import MultibodyKernels  # noqa: PLC0415
    return MultibodyKernels(tree_mass, tree_forces, tree_constraints, tree_constraint_jacobian,
                            no_constraints, no_constraint_terms, tree_force_jacobians,
                            no_constraint_terms, tree_mass_jacobian_term, tree_outputs)


# -- packing ------------------------------------------------------------------------------------
def _axis_frame(axis):
    """The rotation F (3×3) whose z column is the unit ``axis``: columns f_x, f_y = z × f_x,
    z, f_x from the unit vector least aligned with the axis (Gram-Schmidt).  A joint
    frame times F has the joint axis as its z axis; for an axis along ±e_x, ±e_y or
    ±e_z, F is a signed permutation (exact: the packed numbers are the table's, moved)."""
    z = np.asarray(axis, dtype=float) / np.linalg.norm(axis)
    e = np.zeros(3)
    e[int(np.argmin(np.abs(z)))] = 1.0
    x = e - (e @ z) * z
    x /= np.linalg.norm(x)
    return np.column_stack([x, np.cross(z, x), z])


def tree_parameters(joints, frames, gravity, velocity_scale, damping, friction, effort, mimics=(),
                    held=()):
    """The flat ``p`` of a fixed-base tree with one-dof revolute and prismatic joints
    (URDF continuous joints arrive as revolute) from its joint table ``joints``
    (:mod:`cosim.models.urdf_structure`: per joint parent, type, axis, placement, mass,
    centre of mass, inertia, as pinocchio builds them); ``frames``: the output frames'
    rows of that module's frame table (parent joint, placement); ``mimics``: the mimic
    constraints as (mimic joint index, followed joint index, multiplier, offset);
    ``held``: the indices of the joints a position stop holds.  The kinematics cache
    starts empty.  Every joint frame is the table's times F = :func:`_axis_frame` of
    its axis (module docstring): placements, centres of mass, inertias and output
    frames are packed in the turned frames."""
    n = len(joints)
    c = HEAD + BLOCK * n + 1 + MIMIC * len(mimics) + n + cache_length(n)
    p = np.zeros(c + 1 + FRAME * len(frames))
    b = HEAD + BLOCK * n
    p[b] = len(mimics)
    for r, (i, j, k, o) in enumerate(mimics):
        p[b + 1 + MIMIC * r: b + 1 + MIMIC * (r + 1)] = (i, j, k, o)
    for i in held:
        p[b + 1 + MIMIC * len(mimics) + int(i)] = 1.0
    p[0] = n
    p[1:4] = gravity
    p[4] = velocity_scale
    turns = [np.eye(3)] * n  # F per joint (parents first)
    for i in range(n):
        row = np.asarray(joints[i], dtype=float)  # the table's columns (urdf_structure)
        k = int(row[0])
        F, Fk = _axis_frame(row[2:5]), turns[k] if k >= 0 else np.eye(3)
        turns[i] = F
        I_c = F.T @ row[21:30].reshape(3, 3) @ F
        b = HEAD + BLOCK * i
        p[b + PARENT] = k
        p[b + TYPE] = row[1]
        p[b + ROT:b + ROT + 9] = (Fk.T @ row[5:14].reshape(3, 3) @ F).reshape(9)
        p[b + POS:b + POS + 3] = Fk.T @ row[14:17]
        p[b + MASS] = row[17]
        p[b + COM:b + COM + 3] = F.T @ row[18:21]
        p[b + INERTIA:b + INERTIA + 9] = (0.5 * (I_c + I_c.T)).reshape(9)
        p[b + DAMPING] = damping[i]
        p[b + FRICTION] = friction[i]
        p[b + EFFORT] = effort[i]
    p[c] = len(frames)
    for r, row in enumerate(frames):
        row = np.asarray(row, dtype=float)
        j = int(row[0])
        Fj = turns[j] if j >= 0 else np.eye(3)
        f = c + 1 + FRAME * r
        p[f] = j
        p[f + 1:f + 10] = (Fj.T @ row[1:10].reshape(3, 3)).reshape(9)
        p[f + 10:f + 13] = Fj.T @ row[10:13]
    return p
