"""The state of rkc-penalty, declared once (:mod:`cosim.integrators.state_decl`): the
layout block of :mod:`.rkc_record` (``python cosim/integrators/state_decl.py`` writes
it), the state dictionary of :class:`~.rkc.RKCPenalty`, its write-back and its schema
are generated from :data:`RECORD`.  Its first slots of S and I and its first arrays
are dopri5/rk4's (:mod:`.explicit_state`): the index-1 form both kernels share
(:mod:`.index1_kernel`) reads and writes the same places (:mod:`.rkc_record` imports
them from :mod:`.explicit_record`); the pivots of J, RKC_PIV, follow rkc-penalty's own
slots of I (their start is an argument of the index-1 form)."""
from .explicit_state import HERMITE, RECORD as EXPLICIT, index1_ints, index1_point, index1_scalars
from .state_decl import Record
from .state_fields import LAST_STEP, NONNEGATIVE, array, bounded, int_array, integer, scalar

RECORD = Record("cosim.integrators.rkc_state", [
    *index1_scalars(),
    scalar("RHO", "the spectral radius estimate ρ", "method_state.rho", NONNEGATIVE),
    bounded("CHI", "the penalty χ (seed form) or ω (Bayo form)", "method_state.penalty", "POSITIVE"),
    bounded("ALPHA", "α of the Bayo form (-1: the seed form)", "method_state.alpha", None, -1.0),
    scalar("XI", "option xi"), scalar("DAMPING", "option damping ε"),
    scalar("H_LAST", "the last step's size (0: none)", "method_state.h_last", LAST_STEP),
    scalar("ERR_LAST", "the last step's error ratio (0: none)", "method_state.err_last", NONNEGATIVE),
    scalar("F_HRHO", "a failure's h ρ"),
    *index1_point(),
    array("d", "2 * ny", key="method_state.dense", flag="HAS_DENSE", parts=HERMITE),
    array("e", "ny", key="method_state.eigvec", flag="HAS_EIGVEC"),   # the power method's eigenvector
    *index1_ints(),
    integer("HAS_EIGVEC", "1: the record holds the power method's eigenvector"),
    integer("STEPS_SINCE_RHO", "steps since the last ρ estimate", "method_state.steps_since_rho"),
    integer("LAST_STAGES", "the last step's stage count", "method_state.last_stages"),
    integer("MAX_STAGES_USED", "the largest stage count so far", "method_state.max_stages_used"),
    integer("MAX_STAGES", "option max_stages"),
    integer("RHO_INTERVAL", "option rho_interval"),
    int_array("RKC_PIV", "n + m", "the pivots of J's LU"),
], sizes={"n": "I_N", "m": "I_M", "ny": "I_NY"},
    order={"method_state": ("h_next", "f_cur", "dense", "rho", "eigvec", "steps_since_rho", "penalty", "alpha",
                            "h_last", "err_last", "last_stages", "max_stages_used")},
    derivative=("method_state.f_cur", "qdd", "method_state.penalty"),   # f_cur = [q'(χ); q'']
    base=EXPLICIT, names={"N_SCALARS": "RKC_SCALARS", "offsets": "rkc_offsets", "int_length": "rkc_int_length"})
