"""local-index1's record, declared once (:mod:`cosim.integrators.state_decl`): from
:data:`RECORD` come the layout block of :mod:`.li1_record`, and the state dictionary,
write-back and schema of :class:`~.local_index1.LocalEquivalentIndex1`."""
from .state_decl import Record
from .state_fields import (STEP, array, int_array, integer, newton, newton_scalars, scalar,
                           statistics, step_option_scalars, times)

RECORD = Record("cosim.integrators.li1_state", [
    *times(),
    scalar("H_NEXT", "the next step size", "method_state.h_next", STEP),
    *step_option_scalars(),
    *newton_scalars(),
    scalar("F_T", "a failure's t"), scalar("F_H", "a failure's h"),
    scalar("F_ERR", "a rejected step's error ratio"),
    scalar("F_CT", "t of a failed matrix"), scalar("F_CH", "h of a failed iteration matrix"),
    scalar("F_CINFO", "pivot ratio of a singular matrix"),
    scalar("FIXED_ERR", "fixed step: the largest local error estimate so far (user's weights)"),
    scalar("FIXED_RTOL", "fixed step: REFUSAL·rtol, the scale of the verdict (fixed_step_resolved)"),
    array("y", "2 * n", key="y"),
    array("yp", "2 * n", key="y_prev"),
    array("qdd", "n", key="qdd"),
    array("lam", "m + g", key="lam"),                     # holonomic, then nonholonomic rows
    # the dense output: the slopes g = [v; q''] at t_prev and at t
    array("g", "4 * n", key="method_state.dense", flag="HAS_DENSE",
          parts=(("g0", "0", ("ny",)), ("g1", "2 * n", ("ny",)))),
    integer("I_N", "n coordinates"),
    integer("I_M", "m holonomic constraints"),
    integer("I_NG", "g nonholonomic rows"),
    integer("NULLSPACE", "NULLSPACE_QR or NULLSPACE_GAUSS"),
    integer("ITERATION", "ITERATION_SEED or ITERATION_NEWTON"),
    integer("HAS_DENSE", "1: the record holds dense output"),
    integer("HAS_FACTOR", "1: the LU of the iteration matrix is kept"),
    integer("NEED_JAC", "1: form the iteration matrix at the next solve"),
    integer("CAUSE", "why the last trial step failed (C_*)"),
    statistics(),
    int_array("PIV", "2 * n", "the pivots of the iteration matrix's LU (eq. 4.5, 2n)"),
    newton("method_state.newton", "PIV"),
], sizes={"n": "I_N", "m": "I_M", "g": "I_NG", "ny": "2 * I_N"})
