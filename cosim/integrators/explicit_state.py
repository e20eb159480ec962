"""The state of dopri5/rk4, declared once (:mod:`cosim.integrators.state_decl`): the
layout block of :mod:`.explicit_record` (``python cosim/integrators/state_decl.py``
writes it), the state dictionary of :mod:`.explicit`'s integrators, its write-back and
its schema are generated from :data:`RECORD`.  (Imports nothing of the method, so the
layout can be written before the record module exists.)"""
from .state_decl import STEP, Record, array, int_array, integer, scalar, statistics, times

RECORD = Record("cosim.integrators.explicit_state", [
    *times(),
    scalar("H_NEXT", "the next step size", "method_state.h_next", STEP),
    scalar("RTOL"), scalar("ATOL"),
    scalar("H_FIXED", "the fixed step (0: adaptive)"),
    scalar("MAX_STEP"),
    scalar("DENSE_H", "h of the dense output's step"),
    scalar("F_T", "a failure's t"), scalar("F_H", "a failure's h"),
    scalar("F_ERR", "a rejected step's error ratio"),
    scalar("F_CT", "t of a failed evaluation or projection"),
    scalar("F_CINFO", "pivot ratio of a singular J"),
    scalar("FIXED_ERR", "fixed step: the largest local error estimate so far (user's weights)"),
    array("y", "ny", key="y"),
    array("yp", "ny", key="y_prev"),
    array("qdd", "n", key="qdd"),
    array("lam", "m", key="lam"),
    array("f", "ny", key="method_state.f_cur", flag="HAS_F"),   # the FSAL / first stage f
    array("d", "5 * ny", key="method_state.dense", flag="HAS_DENSE", parts={
        # Shampine's continuous extension of the last step: Q = Kᵀ P, h and the
        # projection shift y_proj − ŷ (blended in linearly)
        "dopri5": (("Q", "0", ("ny", 4)), ("h", "DENSE_H"), ("shift", "4 * ny", ("ny",))),
        # cubic Hermite: f at both ends of the last step and its h
        "rk4": (("f0", "0", ("ny",)), ("f1", "ny", ("ny",)), ("h", "DENSE_H"))}),
    integer("I_N", "n coordinates (0: first order)"),
    integer("I_M", "m multiplier rows (C and B)"),
    integer("METHOD", "DOPRI5 or RK4"),
    integer("HAS_F", "1: the record holds f_cur"),
    integer("HAS_DENSE", "1: the record holds dense output"),
    integer("PROJ_ITERS", "projection iterations", "method_state.projection_iterations"),
    integer("CAUSE", "why the last trial step failed (C_*)"),
    statistics(),
    integer("I_NY", "length of y: 2n, or the states of a first-order model"),
    integer("I_NG", "nonholonomic rows n_g (the last n_g of the I[I_M] multiplier rows)"),
    integer("FIRST_ORDER", "1: x' = f(t, x, u) (n = m = 0)"),
    int_array("PIV", "n + m", "the pivots of J's LU"),
], sizes={"n": "I_N", "m": "I_M", "ny": "I_NY"})
