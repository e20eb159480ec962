"""The state of block-lstable, declared once (:mod:`cosim.integrators.state_decl`): the
layout block of :mod:`.block_record` (``python cosim/integrators/state_decl.py`` writes
it), the state dictionary of :class:`~.block.LStableBlock`, its write-back and its
schema are generated from :data:`RECORD`.  (Imports nothing of the method, so the
layout can be written before the record module exists.)"""
from .state_decl import Record
from .state_fields import (LAST_STEP, NONNEGATIVE, STEP, TIME, array, int_array, integer, matrix,
                           newton, newton_scalars, scalar, statistics, times)

RECORD = Record("cosim.integrators.block_state", [
    *times(),
    scalar("H", "the fixed step", "method_state.h", STEP),
    scalar("H_LAST", "the last step's size (-1: none)", "method_state.h_last", LAST_STEP),
    *newton_scalars(),
    scalar("RTOL"), scalar("ATOL"), scalar("MAX_STEP"),
    scalar("NEWTON_SCALE", "option newton_tol"),
    scalar("STAGE_T0", "start of the step the stage data belong to (NaN: none)", "method_state.stage_t0", TIME),
    scalar("ERR_EST", "the optional error estimate of the last step", "method_state.error_estimate", NONNEGATIVE),
    scalar("F_T", "a failure's t"), scalar("F_H", "a failure's h"), scalar("F_INFO", "a failure's pivot ratio"),
    scalar("FIXED_ERR", "the largest local error estimate of the steps so far (user's weights)"),
    array("y", "2 * n", key="y"),
    array("yp", "2 * n", key="y_prev"),
    array("qdd", "n", key="qdd"),
    array("lam", "m", key="lam"),
    # the coefficients (set-up data): nodes c, d, B (r×r), B², B d, the quadrature weights b̂
    array("c", "r"), array("d", "r"), array("B", "r * r"), array("B2", "r * r"), array("Bd", "r"), array("bh", "r"),
    # the stage positions and velocities of the last step (the dense output)
    matrix("sq", "r", "n", key="method_state.stage_q"),
    matrix("sv", "r", "n", key="method_state.stage_v"),
    integer("I_N", "n coordinates"),
    integer("I_M", "m constraints"),
    integer("I_R", "r block nodes"),
    integer("INDEX", "option index (1, 2, 3)"),
    integer("FIXED", "1: a fixed step was given"),
    integer("ERROR_EST", "1: compute the error estimate"),
    integer("NEED_JAC", "1: form the iteration matrix at the next solve"),
    integer("HAS_FACTOR", "1: the LU of the iteration matrix is kept"),
    integer("CONST_MASS", "1: the model's mass matrix is constant"),
    integer("REASON", "why Newton failed (R_*)"),
    statistics(),
    int_array("PIV", "r * (n + m)", "the LU pivots (r accelerations and r multiplier vectors)"),
    newton("method_state.newton", "PIV"),
], sizes={"n": "I_N", "m": "I_M", "r": "I_R"},
    order={"method_state": ("h", "h_last", "stage_q", "stage_v", "stage_t0", "error_estimate", "newton")})
