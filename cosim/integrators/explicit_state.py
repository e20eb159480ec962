"""The state of dopri5/rk4, declared once (:mod:`cosim.integrators.state_decl`): the
layout block of :mod:`.explicit_record` (``python cosim/integrators/state_decl.py``
writes it), the state dictionary of :mod:`.explicit`'s integrators, its write-back and
its schema are generated from :data:`RECORD`.  (Imports nothing of the method, so the
layout can be written before the record module exists.)

The slots the index-1 form uses (:mod:`.index1_kernel`) are rkc-penalty's too: its
declaration (:mod:`.rkc_state`) starts its scalars, point and slots of I with
:func:`index1_scalars`, :func:`index1_point` and :func:`index1_ints`."""
from .state_decl import Record
from .state_fields import STEP, array, fixed_step_scalars, int_array, integer, scalar, statistics, times

# cubic Hermite dense output: f at both ends of the last step and its h
HERMITE = (("f0", "0", ("ny",)), ("f1", "ny", ("ny",)), ("h", "DENSE_H"))


def index1_scalars():
    """The scalar slots of S of the explicit methods (rkc-penalty's first ones)."""
    return [
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
        *fixed_step_scalars()]


def index1_point():
    """The first arrays of S: the point (y, y_prev, q'', λ) and f there."""
    return [array("y", "ny", key="y"),
            array("yp", "ny", key="y_prev"),
            array("qdd", "n", key="qdd"),
            array("lam", "m", key="lam"),
            array("f", "ny", key="method_state.f_cur", flag="HAS_F")]   # the FSAL / first stage f


def index1_ints(projection_key=None):
    """The first slots of I (``projection_key``: the state's key of the projection
    iterations, which only dopri5/rk4 count)."""
    return [
        integer("I_N", "n coordinates (0: first order)"),
        integer("I_M", "m multiplier rows (C and B)"),
        integer("METHOD", "DOPRI5 or RK4 (rkc-penalty: unused)"),
        integer("HAS_F", "1: the record holds f_cur"),
        integer("HAS_DENSE", "1: the record holds dense output"),
        integer("PROJ_ITERS", "projection iterations (rkc-penalty: unused)", projection_key),
        integer("CAUSE", "why the last trial step failed (C_*)"),
        statistics(),
        integer("I_NY", "length of y: 2n, or the states of a first-order model"),
        integer("I_NG", "nonholonomic rows n_g (the last n_g of the I[I_M] multiplier rows)"),
        integer("FIRST_ORDER", "1: x' = f(t, x, u) (n = m = 0)")]


RECORD = Record("cosim.integrators.explicit_state", [
    *index1_scalars(),
    *index1_point(),
    array("d", "5 * ny", key="method_state.dense", flag="HAS_DENSE", parts={
        # Shampine's continuous extension of the last step: Q = Kᵀ P, h and the
        # projection shift y_proj − ŷ (blended in linearly)
        "dopri5": (("Q", "0", ("ny", 4)), ("h", "DENSE_H"), ("shift", "4 * ny", ("ny",))),
        "rk4": HERMITE}),
    *index1_ints("method_state.projection_iterations"),
    int_array("PIV", "n + m", "the pivots of J's LU"),
], sizes={"n": "I_N", "m": "I_M", "ny": "I_NY"},
    derivative=("method_state.f_cur", "qdd", True))   # f_cur = [v; q''] of the point
