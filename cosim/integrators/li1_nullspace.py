"""Null-space bases of the first r rows of C_q for local-index1 (seed 002 §5): the
Householder QR basis (§5.1) and the Gauss-Jordan basis with complete pivoting (§5.2),
for kernels.  Pasted into the compiled method (``helpers`` of
:func:`cosim.jit.method_entry`, after :mod:`.li1_record`) and called by
:mod:`.li1_kernel`.
"""
import math

from .li1_record import RANK_TOL


def nullspace_qr(C, r, n, V, A, tau):
    """Orthonormal basis of null(C[:r]) from the full Householder QR of C[:r]ᵀ
    (seed 002 §5.1; LAPACK's reflector convention, dgeqrf/dorgqr): V = Q[:, r:].
    Work: A (n × ≥r), tau (≥r).  Returns False when C[:r] is rank deficient
    (min |R_kk| ≤ RANK_TOL·max |R_kk|)."""
    if r > n:
        return False
    for i in range(n):
        for k in range(r):
            A[i, k] = C[k, i]
    dmin, dmax = math.inf, 0.0
    for k in range(r):
        alpha = A[k, k]
        s = 0.0
        for i in range(k + 1, n):
            s += A[i, k] * A[i, k]
        xnorm = math.sqrt(s)
        if xnorm == 0.0:
            tau[k] = 0.0
            beta = alpha
        else:
            beta = -math.copysign(math.hypot(alpha, xnorm), alpha)
            tau[k] = (beta - alpha) / beta
            scal = 1.0 / (alpha - beta)
            for i in range(k + 1, n):
                A[i, k] *= scal
            A[k, k] = beta
        d = abs(beta)
        dmin = min(dmin, d)
        dmax = max(dmax, d)
        tk = tau[k]
        if tk != 0.0:                       # H_k = I − τ v vᵀ, v = [1; A[k+1:, k]]
            for j in range(k + 1, r):
                s = A[k, j]
                for i in range(k + 1, n):
                    s += A[i, k] * A[i, j]
                s *= tk
                A[k, j] -= s
                for i in range(k + 1, n):
                    A[i, j] -= s * A[i, k]
    if r > 0 and not dmin > RANK_TOL * max(dmax, 1e-300):
        return False
    # V = H_0 H_1 … H_{r−1} [0; I]
    for i in range(n):
        for j in range(n - r):
            V[i, j] = 1.0 if i == r + j else 0.0
    for k in range(r - 1, -1, -1):
        tk = tau[k]
        if tk == 0.0:
            continue
        for j in range(n - r):
            s = V[k, j]
            for i in range(k + 1, n):
                s += A[i, k] * V[i, j]
            s *= tk
            V[k, j] -= s
            for i in range(k + 1, n):
                V[i, j] -= s * A[i, k]
    return True


def nullspace_gauss(C, r, n, V, A, cols):
    """Basis V = Π [−W; I] of null(C[:r]) by Gauss-Jordan elimination with complete
    pivoting, P C Π → [I, W] (seed 002 §5.2).  Work: A (≥r × n), cols (int, n).
    Returns False when C[:r] is rank deficient (pivot ≤ RANK_TOL·max |C|)."""
    if r > n:
        return False
    scale = 0.0
    for i in range(r):
        for j in range(n):
            A[i, j] = C[i, j]
            scale = max(scale, abs(C[i, j]))
    if r == 0:
        scale = 1.0
    for j in range(n):
        cols[j] = j
    for k in range(r):
        best, bi, bj = -1.0, k, k
        for i in range(k, r):
            for j in range(k, n):
                a = abs(A[i, j])
                if a > best:
                    best, bi, bj = a, i, j
        if not best > RANK_TOL * scale:
            return False
        if bi != k:
            for j in range(n):
                A[k, j], A[bi, j] = A[bi, j], A[k, j]
        if bj != k:
            for i in range(r):
                A[i, k], A[i, bj] = A[i, bj], A[i, k]
            cols[k], cols[bj] = cols[bj], cols[k]
        pivot = A[k, k]
        for j in range(n):
            A[k, j] /= pivot
        for i in range(r):
            if i != k:
                c = A[i, k]
                for j in range(n):
                    A[i, j] -= c * A[k, j]
    for j in range(n - r):
        for i in range(r):
            V[cols[i], j] = -A[i, r + j]
        for i in range(n - r):
            V[cols[r + i], j] = 1.0 if i == j else 0.0
    return True
