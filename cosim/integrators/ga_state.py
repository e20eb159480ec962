"""The state of generalized-α (index 3 and GGL), declared once
(:mod:`cosim.integrators.state_decl`): the layout block of :mod:`.ga_record`
(``python cosim/integrators/state_decl.py`` writes it), the state dictionary of
:mod:`.generalized_alpha`'s integrators, its write-back and its schema are generated
from :data:`RECORD`.  (Imports nothing of the method, so the layout can be written
before the record module exists.)"""
from .state_decl import Record
from .state_fields import (LAST_STEP, STEP, array, int_array, integer, newton, newton_scalars,
                           scalar, statistics, step_option_scalars, times)

RECORD = Record("cosim.integrators.ga_state", [
    *times(),
    scalar("H_NEXT", "the next step size", "method_state.h_next", STEP),
    scalar("H_LAST", "the step a belongs to (0: a = q'')", "method_state.h_last", LAST_STEP),
    *newton_scalars(),
    *step_option_scalars(),
    scalar("ALPHA_M"), scalar("ALPHA_F"), scalar("GAMMA"), scalar("BETA"), scalar("ETA"),
    scalar("F_H", "a failure's h"), scalar("F_INFO", "a failure's number (Ξ, pivot ratio)"),
    scalar("F_T", "a failure's t"),
    scalar("ERR_SCALE", "error-test weights s·W"),
    scalar("ERR_TANGENT", "1.0: option tangent_estimate (floor on the normal part of h² x only)"),
    scalar("FIXED_ERR", "fixed step: the largest local error estimate so far (user's weights)"),
    array("y", "2 * n", key="y"),
    array("yp", "2 * n", key="y_prev"),
    array("qdd", "n", key="qdd"),
    array("qddp", "n", key="method_state.qdd_prev"),
    array("lam", "mz", key="lam"),                        # multipliers [λ; ν]
    array("a", "n", key="method_state.a"),                # Algorithm 3's a
    array("xr", "n", key="method_state.x_rate"),
    array("lr", "mz", key="method_state.lam_rate"),
    array("mid", "n"),                                    # diagonal of M⁻¹ (constant mass)
    array("mix", "n"),                                    # M⁻¹ exact (constant mass)
    integer("I_N", "n coordinates"),
    integer("I_M", "m holonomic constraints"),
    integer("NEED_JAC", "1: form the iteration matrix at the next solve"),
    integer("HAS_FACTOR", "1: the LU of the iteration matrix is kept"),
    integer("PROJECT", "1: project velocities"),
    integer("CONST_MASS", "1: the model's mass matrix is constant"),
    integer("MINV_EXACT"), integer("MINV_DIAG"),
    integer("FIXED"),
    integer("REASON", "why Newton failed (R_*)"),
    integer("GGL", "formulation: 0 index 3 (eqs. 32-34), 1 GGL index 2 (eqs. 37-39)"),
    integer("I_NG", "n_g: nonholonomic rows (seed 000 §7)"),
    statistics(),
    int_array("PIV", "n + m + ng + ggl * (n + m)", "the LU pivots (matrix_size(n, m, ggl, ng) of them)"),
    newton("method_state.newton", "PIV"),
], sizes={"n": "I_N", "mz": "I_M + I_NG", "m": "I_M", "ggl": "GGL", "ng": "I_NG"},
    solved=("y", "qdd", "lam"),   # (y, q'', [λ; ν]) solve the model's equations at t
    # and so did the point before the last step; a = q''_prev + x, x_rate = x/h, λ_rate = Δλ/h
    last_step=("method_state.h_last", {"method_state.x_rate": ("method_state.a", "method_state.qdd_prev"),
                                       "method_state.lam_rate": ("lam", None)}, "method_state.qdd_prev"),
    order={"method_state": ("a", "qdd_prev", "h_next", "h_last", "x_rate", "lam_rate", "newton")})
