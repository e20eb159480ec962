"""The state of the BDF family (bdf, bdf-i2, bdf-i1), declared once
(:mod:`cosim.integrators.state_decl`): the layout block of :mod:`.bdf_record`
(``python cosim/integrators/state_decl.py`` writes it), the state dictionary of
:mod:`.bdf`'s integrators, its write-back and its schema are generated from
:data:`RECORD`.  (Imports nothing of the method, so the layout can be written before
the record module exists.)"""
from .state_decl import Record
from .state_fields import (STEP, array, constant, counts, differences, int_array, integer, leading_positive,
                           matrix, newton, newton_scalars, ranged, scalar, statistics,
                           step_option_scalars, times)

RECORD = Record("cosim.integrators.bdf_state", [
    constant("MAX_ORDER", 5, "the highest order"),
    constant("ROWS", "MAX_ORDER + 3", "rows of D / Dz, entries of τ"),
    constant("HIST", 256, "(t, k) ring buffer of accepted steps"),
    *times(),
    scalar("H_NEXT", "the next step size", "method_state.h_next", STEP),
    scalar("H", "the last step size", "method_state.h", STEP),
    *newton_scalars(),
    *step_option_scalars(),
    scalar("F_T", "a failure's t"), scalar("F_H", "a failure's h"), scalar("F_HHAT", "a failure's ĥ"),
    scalar("F_INFO", "a failure's number (error ratio, pivot ratio)"),
    scalar("FIXED_ERR", "fixed step: the largest local error estimate so far (user's weights)"),
    array("y", "2 * n", key="y"),
    array("yp", "2 * n", key="y_prev"),
    array("qdd", "n", key="qdd"),
    array("lam", "m", key="lam"),
    differences("D", "ROWS", "2 * n", ("y",), key="method_state.D"),             # ∇^j (q, v), eq. 59
    differences("Dz", "ROWS", "n + m", ("qdd", "lam"), key="method_state.Dz"),   # ∇^j (q'', λ), their predictor
    leading_positive("tau", "ROWS", 2, "step sums", key="method_state.tau"),   # τ_j, eq. 66
    # the iteration matrix of the kept LU (HAS_FACTOR), reused across steps
    matrix("J", "ns", "ns", key="method_state.J", flag=("HAS_J", "HAS_FACTOR"), factors=True),
    array("ht", "HIST"), array("hk", "HIST"),                  # the (t, k) ring buffer
    integer("I_N", "n coordinates"),
    integer("I_M", "m constraints"),
    integer("NEED_JAC", "1: form the iteration matrix at the next solve"),
    integer("HAS_FACTOR", "1: the LU of the iteration matrix is kept"),
    integer("HAS_J", "1: S holds the iteration matrix J"),
    ranged("K_NEXT", 1, "MAX_ORDER", "the next step's order", "method_state.k"),
    ranged("ORDER", 1, "MAX_ORDER", "the order reached", "method_state.order"),
    ranged("K_USED", 1, "MAX_ORDER", "the last step's order", "method_state.k_used"),
    ranged("VALID", 1, "MAX_ORDER + 2", "the highest row of D that holds a difference", "method_state.valid"),
    integer("N_STEPS", "steps since the start at order 1", "method_state.n_steps"),
    integer("MAX_ORD", "option max_order"),
    integer("REUSE", "1: keep the iteration matrix across steps"),
    integer("VEL_ERROR", "option velocity_error (VE_*)"),
    integer("POS_WEIGHTS", "1: velocities weighed as their positions"),
    integer("CONST_MASS", "1: the model's mass matrix is constant"),
    integer("REASON", "why Newton failed (R_*)"),
    integer("F_K", "a failure's order"),
    integer("NEWTON_FAILS"), integer("ERROR_FAILS"),
    integer("HIST_COUNT", "accepted steps written to the ring buffer"),
    integer("I_NS", "unknowns of the Newton system (system_size)"),
    integer("VARIANT", "INDEX3, INDEX2 or INDEX1"),
    integer("ERR_RMS", "1: the error test's RMS norm"),
    statistics(),
    counts("ORDER_COUNTS", "MAX_ORDER + 1", "steps taken at each order", "method_state.order_counts"),
    int_array("PIV", "ns", "the LU pivots"),
    newton("method_state.newton", "PIV"),
], sizes={"n": "I_N", "m": "I_M", "ns": "I_NS"},
    # (y, q'', λ) solve the model's equations at t, and so do the earlier points D and Dz
    # imply with the step sums τ (their rows 1 .. valid)
    solved=("y", "qdd", "lam"), steps=("method_state.tau", "method_state.valid"),
    order={"method_state": ("D", "Dz", "tau", "k", "order", "k_used", "valid", "n_steps", "h_next", "h",
                            "order_counts", "newton", "J")})
