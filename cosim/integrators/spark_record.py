"""The record of spark (:mod:`cosim.integrators.spark_kernel`): the algorithm's
constants, status codes and entry modes, the slots of ``S`` and ``I``, the layout
of the arrays in ``S`` (state, then the tableau and the natural-coordinate bodies,
written once at set-up) and of the work arrays of one advance call."""
import numpy as np

EPS = 2.220446049250313e-16

# -- algorithm constants (the stage solve of seed 003, as symplectic.py had them) --
NEWTON_MAX_ITER = 30
NEWTON_TOL = 1.0         # ‖Δz‖ / (newton_tol·(1 + ‖z0‖∞)) below this: converged
NEWTON_ERR_TOL = 1.0     # σ/(1−σ)‖Δz‖ below this: converged
FD_SCALE = 1e-3          # difference steps of the stage matrix: √ε·max(|z_j|, this·(1 + ‖z‖∞), 1e-3)
GAUSS_LOBATTO = 0        # I[SCHEME]: s Gauss stages + s + 1 Lobatto constraint stages (Jay 2007)
LOBATTO = 1              # I[SCHEME]: Lobatto IIIA-IIIB, s + 1 stages (s = 1: RATTLE)

# -- status codes ----------------------------------------------------------------
OK = 0
NEWTON_FAILED = 1        # "stage equations did not converge" (reason in I[REASON])
STAGE_MATRIX = 2         # the stage matrix is singular / not finite (kernel_common factor status
                         # in I[REASON], pivot ratio in S[F_INFO])
END_MATRIX = 3           # [[M_γ, C_qᵀ], [C_q, 0]] of the velocity constraint (at S[F_CT])
ACCEL_MATRIX = 4         # [[M, C_qᵀ], [C_q, 0]] of the consistent accelerations (at S[F_CT])
STEP_UNDERFLOW = 5       # the step no longer moves t
STEP_BUDGET = 6          # max_steps steps without reaching the target (record restored)
# entry modes
WHOLE_INTERVAL = 0       # advance to the target within max_steps, else STEP_BUDGET
RESTART = 1              # forget the last step (t_prev = t, y_prev = y, q''_prev = q'')
ONE_STEP = 2             # at most max_steps steps towards the target
# Newton failure reasons
R_RESIDUAL = 1           # "residual is not finite"
R_UPDATE = 2             # "Newton update is not finite"
R_NO_CONVERGENCE = 3     # "no convergence in 30 iterations"

# -- scalar slots of S -----------------------------------------------------------------
T, T_PREV, H, H_LAST, GAMMA, SIGMA, H_JAC, RELAX, NEWTON_REL, MAX_STEP = range(10)
F_T, F_H, F_INFO, F_CT = range(10, 14)
N_SCALARS = 14
FAILURE_SLOTS = (T, F_T, F_H, F_INFO, F_CT)   # advance failed: F_T ← t, these and I[REASON] kept
# -- slots of I ----------------------------------------------------------------------
I_N, I_M, I_S, I_NV, SCHEME, FIXED, CONST_MASS, NEED_JAC, HAS_FACTOR, REASON = range(10)
CHAIN = 10               # 1: a planar natural-coordinate chain (body-wise M_γ, seed 003 eqs. 22-25)
I_NB = 11                # its number of bodies
STATS = 12               # steps, rejected, newton_iterations, residual_evaluations,
N_STATS = 6              # jacobian_evaluations, lu_factorizations (base.STAT_KEYS order)
ST_STEPS, ST_REJ, ST_NEWTON, ST_RES, ST_JAC, ST_LU = range(STATS, STATS + N_STATS)
MATRIX_INTS, MATRIX_FLOATS = (HAS_FACTOR, ST_LU, NEED_JAC), (H_JAC, RELAX)   # matrix_formed's
BODIES = STATS + N_STATS  # per body: index of x of the first point (−1: the fixed origin), of the second


def matrix_size(n, m, s, nv):
    """Unknowns of the stage solve: the nv stage velocities and the s impulses h·Λ_j."""
    return nv * n + s * m


def offsets(n, m, s, nv, nb):
    """Start of each array in S: y, y_prev, q'', q''_prev, λ, then the tableau c (nv),
    A (nv × nv), b (nv), Â (nl × nv), Ã (s × nl), c̃ (nl), b̃ (nl), then the bodies'
    lengths l and J_G (nb each), and the total length."""
    nl = s + 1
    o_y = N_SCALARS
    o_yp = o_y + 2 * n
    o_qdd = o_yp + 2 * n
    o_qddp = o_qdd + n
    o_lam = o_qddp + n
    o_c = o_lam + m
    o_a = o_c + nv
    o_b = o_a + nv * nv
    o_ah = o_b + nv
    o_at = o_ah + nl * nv
    o_cl = o_at + s * nl
    o_bl = o_cl + nl
    o_l = o_bl + nl
    o_j = o_l + nb
    return o_y, o_yp, o_qdd, o_qddp, o_lam, o_c, o_a, o_b, o_ah, o_at, o_cl, o_bl, o_l, o_j, o_j + nb


def int_length(nb, N):
    """Length of I: the slots above, the bodies' point indices (2 nb), the LU pivots."""
    return BODIES + 2 * nb + N


def pivots(nb):
    """Start of the LU pivots in I."""
    return BODIES + 2 * nb


def workspace(n, m, s, nv, extra=0):
    """Work arrays of one advance() call, so the step loop allocates nothing:
    0-7 the stage solve's z, z0, δ, F, z + h e_j, F(z), F(z + h e_j), its matrix;
    8-10 q_n, v_n, p_n; 11 Q (nv × n), 12 Q̃ (nl × n), 13 stage forces (nv × n),
    14 C_qᵀ h Λ (s × n); 15 M, 16 C_q, 17 C, 18 C_t, 19 g (∂T_γ/∂q), 20 Q (forces),
    21 (M v)_q, 22 C_q C_qᵀ, 23 (C_q C_qᵀ)⁻¹ C_q, 24 its pivots, 25 w, 26 (C_qᵀ w)_q,
    27 n-scratch, 28 the (n+m)² end matrix, 29 its LU, 30 right-hand side, 31 pivots,
    32-36 q_{n+1}, p̃_{n+1}, v_{n+1}, q''_{n+1}, λ_{n+1}; 37 m-scratch; 38 the last
    stage's force; 39 ``extra`` floats (advance(): room for the snapshot of S and LU)."""
    nl = s + 1
    N = matrix_size(n, m, s, nv)
    k = n + m
    return (np.zeros(N), np.zeros(N), np.zeros(N), np.zeros(N), np.zeros(N), np.zeros(N), np.zeros(N),
            np.zeros((N, N)),
            np.zeros(n), np.zeros(n), np.zeros(n), np.zeros((nv, n)), np.zeros((nl, n)),
            np.zeros((nv, n)), np.zeros((s, n)),
            np.zeros((n, n)), np.zeros((m, n)), np.zeros(m), np.zeros(m), np.zeros(n), np.zeros(n),
            np.zeros((n, n)), np.zeros((m, m)), np.zeros((m, n)), np.zeros(m, dtype=np.int64),
            np.zeros(m), np.zeros((n, n)), np.zeros(n),
            np.zeros((k, k)), np.zeros((k, k)), np.zeros(k), np.zeros(k, dtype=np.int64),
            np.zeros(n), np.zeros(n), np.zeros(n), np.zeros(n), np.zeros(m), np.zeros(m), np.zeros(n),
            np.zeros(extra))
