"""spark's record, declared once (:mod:`cosim.integrators.state_decl`): from
:data:`RECORD` come the layout block of :mod:`.spark_record`, and the state dictionary,
write-back and schema of :class:`~.symplectic.PreadjustedSPARK`."""
from .state_decl import Record
from .state_fields import (LAST_STEP, STEP, array, bounded, int_array, integer, newton, scalar, statistics,
                           times)

RECORD = Record("cosim.integrators.spark_state", [
    *times(),
    scalar("H", "the (fixed) step size", "method_state.h", STEP),
    scalar("H_LAST", "the last step taken (-1: none)", "method_state.h_last", LAST_STEP),
    bounded("GAMMA", "the preadjustment parameter γ", "method_state.gamma", "DEFAULT"),
    scalar("SIGMA", "Newton's contraction estimate"),
    scalar("H_JAC", "h of the stage matrix (-1: none)"),
    scalar("RELAX", "relaxation of the kept matrix's updates"),
    scalar("NEWTON_REL", "option newton_tol"),
    scalar("MAX_STEP"),
    scalar("F_T", "a failure's t"), scalar("F_H", "a failure's h"),
    scalar("F_INFO", "a failure's pivot ratio"), scalar("F_CT", "t of a failed end or acceleration matrix"),
    scalar("RTOL"), scalar("ATOL"),
    scalar("FIXED_ERR", "the largest local error estimate of the steps so far (user's weights)"),
    array("y", "2 * n", key="y"),
    array("yp", "2 * n", key="y_prev"),
    array("qdd", "n", key="qdd"),
    array("qddp", "n", key="method_state.qdd_prev"),
    array("lam", "m", key="lam"),
    # the tableau, written once at set-up: c, A, b of the nv dynamics stages, Â (s + 1 × nv),
    # Ã (s × s + 1), c̃ and b̃ of the s + 1 constraint stages
    array("c", "nv"), array("a", "nv * nv"), array("b", "nv"), array("ah", "(s + 1) * nv"),
    array("at", "s * (s + 1)"), array("cl", "s + 1"), array("bl", "s + 1"),
    # a natural-coordinate chain's bodies, written once at set-up: their lengths l and J_G,
    # and per body the start in q of its previous point (-1: the fixed origin) and of its
    # next point (integers, held as floats beside the lengths)
    array("l", "nb"), array("j", "nb"), array("pts", "2 * nb"),
    integer("I_N", "n coordinates"),
    integer("I_M", "m constraints"),
    integer("I_S", "s stages"),
    integer("I_NV", "nv dynamics stages"),
    integer("SCHEME", "GAUSS_LOBATTO or LOBATTO"),
    integer("FIXED", "1: a fixed step was asked for"),
    integer("CONST_MASS", "1: the model's mass matrix is constant"),
    integer("NEED_JAC", "1: form the stage matrix at the next solve"),
    integer("HAS_FACTOR", "1: the LU of the stage matrix is kept"),
    integer("REASON", "why Newton or a matrix failed (R_*, kernel_common's factor status)"),
    integer("CHAIN", "1: a planar natural-coordinate chain (body-wise M_γ, seed 003 eqs. 22-25)"),
    integer("I_NB", "its number of bodies"),
    statistics(),
    int_array("PIV", "nv * n + s * m", "the pivots of the stage matrix's LU (matrix_size(n, m, s, nv))"),
    newton("method_state.newton", "PIV"),
], sizes={"n": "I_N", "m": "I_M", "s": "I_S", "nv": "I_NV", "nb": "I_NB"},
    order={"method_state": ("h", "gamma", "h_last", "qdd_prev", "newton")},
    # after a step, (y, q'', λ) are its end point's consistent accelerations (seed 000 eq. 10)
    # with the state's inputs; after a restart (t_prev = t) they are only Newton's start
    solved=("y", "qdd", "lam"), solved_after_step=True)
