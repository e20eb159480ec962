"""Small dense LU with partial pivoting for compiled kernels (and L D Lᵀ of a
symmetric positive definite matrix, a mass matrix, in the same storage).

Same pivot choice (first largest |a_ik| of the column) and pivot format as
LAPACK ``dgetrf`` through scipy (0-based row interchanges, applied in order),
so a factorisation stored by one backend can be used by the other.  Written
as plain loops so numba compiles it: no BLAS call, hence no BLAS threads and
the same bits whatever ``OPENBLAS_NUM_THREADS`` says (issue 13, item 6).

These functions are jitted by :mod:`cosim.jit`; they also run as plain Python
(slowly), which the tests use to check them against LAPACK.
"""
import math

import numpy as np


def lu_factor_inplace(A, piv):
    """Overwrite the n×n matrix ``A`` with L (unit lower, below the diagonal)
    and U, ``piv[k]`` = row swapped with row k.  Returns LAPACK's ``info``:
    0, or k+1 when column k has no nonzero pivot (then A is left partly
    factored, as ``dgetrf`` would leave it)."""
    n = A.shape[0]
    for k in range(n):
        p = k
        amax = abs(A[k, k])
        for i in range(k + 1, n):
            ai = abs(A[i, k])
            if ai > amax:
                amax = ai
                p = i
        piv[k] = p
        if amax == 0.0:
            return k + 1
        if p != k:
            for j in range(n):
                tmp = A[k, j]
                A[k, j] = A[p, j]
                A[p, j] = tmp
        inv = 1.0 / A[k, k]
        for i in range(k + 1, n):
            A[i, k] *= inv
        for i in range(k + 1, n):
            lik = A[i, k]
            if lik != 0.0:
                for j in range(k + 1, n):
                    A[i, j] -= lik * A[k, j]
    return 0


def lu_solve_inplace(LU, piv, b):
    """Solve A x = b with the factors of :func:`lu_factor_inplace`; b is
    overwritten with x."""
    n = LU.shape[0]
    for k in range(n):
        p = piv[k]
        if p != k:
            tmp = b[k]
            b[k] = b[p]
            b[p] = tmp
    for i in range(n):
        s = b[i]
        for j in range(i):
            s -= LU[i, j] * b[j]
        b[i] = s
    for i in range(n - 1, -1, -1):
        s = b[i]
        for j in range(i + 1, n):
            s -= LU[i, j] * b[j]
        b[i] = s / LU[i, i]


def ldl_factor_inplace(A, piv):
    """A symmetric positive definite n×n ``A`` = L D Lᵀ, factored without pivoting
    (half the flops of :func:`lu_factor_inplace`, no pivot search) and stored as
    its LU factors: L (unit lower, below the diagonal) and U = D Lᵀ, ``piv[k]`` = k,
    so :func:`lu_solve_inplace` and :func:`pivot_ratio` (min/max d_k: the squared
    diagonal of the Cholesky factor) take it as they are.  Returns 0, or k+1 when
    column k shows A is not symmetric (a_ik ≠ a_ki exactly) or not positive definite
    (d_k ≤ 0, or NaN); A is then partly overwritten and the caller factors the
    matrix again with :func:`lu_factor_inplace`."""
    n = A.shape[0]
    for k in range(n):
        piv[k] = k
    for k in range(n):
        d = A[k, k]
        for j in range(k):
            d -= A[k, j] * A[j, k]    # l_kj u_jk = l_kj² d_j
        if not d > 0.0:
            return k + 1
        A[k, k] = d
        inv = 1.0 / d
        for i in range(k + 1, n):
            s = A[i, k]
            if s != A[k, i]:          # a_ik: still the matrix's own entry here
                return k + 1
            for j in range(k):
                s -= A[i, j] * A[j, k]
            A[k, i] = s               # u_ki = d_k l_ik
            A[i, k] = s * inv         # l_ik
    return 0


def pivot_ratio(LU):
    """min |u_kk| / max |u_kk| (the singularity test of common.lu_factor)."""
    n = LU.shape[0]
    dmin = math.inf
    dmax = 0.0
    for k in range(n):
        d = abs(LU[k, k])
        if d < dmin:
            dmin = d
        if d > dmax:
            dmax = d
    if n == 0:
        return 1.0
    return dmin / max(dmax, 1e-300)


def scaled_pivot_ratio(LU, piv):
    """:func:`pivot_ratio` of the same factorisation seen on the equilibrated
    matrix D_r A D_c: a singularity test that a change of units cannot fool.

    The unscaled ratio mixes units: on [[M, C_qᵀ], [C_q, 0]] the pivots are M's
    (~m) and those of its Schur complement C_q M⁻¹ C_qᵀ (~|C_q|²/m), so a regular
    pendulum of mass 3e7 kg reads 4e-15.  A is multiplied back from the factors
    (row perm[k] of A is row k of P A = L U, perm from the interchanges ``piv``),
    so a matrix factored in place can be judged, and a stored factor too (equal to
    the factored matrix to rounding, which leaves the scales as they are).  D_r,
    D_c come from Ruiz's iteration (every row and column scaled by 1/sqrt of its
    largest entry until all are ~1); P D_r A D_c = L' U' has u'_kk = d_r[perm k]
    u_kk d_c[k], so the ratio needs no second factorisation.  Called only when the
    unscaled ratio fails: a matrix the unscaled test accepts is never re-judged."""
    n = LU.shape[0]
    if n == 0:
        return 1.0
    perm = np.empty(n, dtype=np.int64)
    for k in range(n):
        perm[k] = k
    for k in range(n):
        p = piv[k]
        tmp = perm[k]
        perm[k] = perm[p]
        perm[p] = tmp
    A = np.zeros((n, n))
    for i in range(n):
        for j in range(n):
            s = LU[i, j] if i <= j else 0.0   # L[i, i] = 1
            for k in range(min(i, j + 1)):
                s += LU[i, k] * LU[k, j]
            A[perm[i], j] = s
    dr = np.ones(n)
    dc = np.ones(n)
    rmax = np.empty(n)
    cmax = np.empty(n)
    for _sweep in range(40):
        done = True
        for i in range(n):
            rmax[i] = 0.0
            cmax[i] = 0.0
        for i in range(n):
            for j in range(n):
                a = abs(dr[i] * A[i, j] * dc[j])
                if a > rmax[i]:
                    rmax[i] = a
                if a > cmax[j]:
                    cmax[j] = a
        for i in range(n):
            if rmax[i] > 0.0:
                if abs(rmax[i] - 1.0) > 0.5:
                    done = False
                dr[i] /= math.sqrt(rmax[i])
            if cmax[i] > 0.0:
                if abs(cmax[i] - 1.0) > 0.5:
                    done = False
                dc[i] /= math.sqrt(cmax[i])
        if done:
            break
    dmin = math.inf
    dmax = 0.0
    for k in range(n):
        d = abs(dr[perm[k]] * LU[k, k] * dc[k])
        if d < dmin:
            dmin = d
        if d > dmax:
            dmax = d
    return dmin / max(dmax, 1e-300)


def pivots_valid(piv, n):
    """True when ``piv`` is a legal interchange sequence for n rows (k ≤ piv[k] < n):
    what a restored state must satisfy before a compiled solve indexes with it."""
    if piv.shape[0] != n:
        return False
    for k in range(n):
        if piv[k] < k or piv[k] >= n:
            return False
    return True
