"""The accuracy rule of a fixed step (``h`` given): no error test decides the step, so
the methods that run with one keep a local error estimate of every fixed step, in
the user's tolerance weights W_k = rtol·|q_k| + atol (the quantity their adaptive
error test holds at 1):

* generalized-α: eq. 34's h²‖x‖_W (GGL: eq. 39's h·max(‖x‖_q, ‖y‖_v)),
* rk4: the positions' part of the embedded third-order estimate h/6·(k4 − k5),
* dopri5: its embedded fourth-order estimate (the error test's RMS ratio).

Two thresholds, measured (``python benchmarks/fixed_step_accuracy.py``):

* a step whose estimate exceeds 1/rtol — a position error larger than the state's own
  scale, |e_k| > |q_k| + atol/rtol — resolves nothing: the advance fails with
  :class:`~cosim.errors.FixedStepError` (the state as before the call);
* a run whose largest estimate exceeds :data:`WARN_FACTOR` gets one
  :class:`~cosim.errors.FixedStepAccuracyWarning` naming it.
"""
from __future__ import annotations

import math

from .errors import FixedStepError

# the largest local error estimate (in tolerance weights) a fixed-step run takes
# without a warning: ten times the largest measured in real-time use — generalized-α
# at h = 1 ms: 0.9 (two_link), 3 (pendulum), 11-17 (Panda, UR5) with held inputs
# (benchmarks/fixed_step_accuracy.py), 171 (Panda under a joint PD, tests/test_robots.py)
# and 307 (two_link, a new input every step, tests/test_fmu_native.py); rk4 far less.
# Unwarned runs measured err ≤ 49 × rtol, warned ones ≥ 640 × rtol.
WARN_FACTOR = 3000.0
# a step's estimate above UNRESOLVED / rtol fails (kernel_common.UNRESOLVED, the kernels' test)
UNRESOLVED = 1.0
# local error ∝ h^ORDER_LOCAL for the suggestion of a step (second-order methods: 3)
ORDER_LOCAL = 3


def suggested_step(h, estimate, order=ORDER_LOCAL):
    """The fixed step whose estimate would be about 1 (the tolerance), from h and the
    estimate at h (local error ∝ h^order)."""
    if not (estimate > 1.0 and math.isfinite(estimate)):
        return h
    return h * estimate ** (-1.0 / order)


def unresolved_error(method, t, h, estimate, rtol, atol, order=ORDER_LOCAL):
    """The error of a fixed step beyond the state's scale (the record is unchanged)."""
    hs = suggested_step(h, estimate, order)
    exc = FixedStepError(
        f"{method}: the fixed step h={h!r} resolves nothing at t={t!r}: its local error "
        f"estimate is {estimate:.3g} times the tolerance weights (rtol={rtol!r}, atol={atol!r}), "
        f"an error larger than the state itself (above 1/rtol = {UNRESOLVED / rtol:.3g}); the "
        f"step failed and the state is unchanged; take h of {hs:.2g} or less (the estimate "
        f"falls at best as h^{order}) or run adaptive (no h)",
        t=t, h=h, cause="fixed step")
    exc.estimate = estimate
    return exc


def warning_text(method, h, estimate, rtol, atol, order=ORDER_LOCAL):
    """The one warning of a fixed-step run whose largest estimate exceeds WARN_FACTOR."""
    hs = suggested_step(h, estimate, order)
    return (f"{method}: the fixed step h={h!r} is too large for the tolerances: its local error "
            f"estimate reached {estimate:.3g} times the tolerance weights (rtol={rtol!r}, "
            f"atol={atol!r}; warned above {WARN_FACTOR:g}): the results may be inaccurate; h of "
            f"{hs:.2g} or less (the estimate falls at best as h^{order}) or an adaptive run "
            f"(no h) would meet them; said once, the largest "
            f"estimate is kept in Simulation.fixed_step_error")
