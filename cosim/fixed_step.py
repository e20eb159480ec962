"""The accuracy rule of a fixed step (``h`` given): no error test decides the step, so
the methods that run with one keep a local error estimate of every fixed step, in
the user's tolerance weights W_k = rtol·|q_k| + atol (the quantity their adaptive
error test holds at 1):

* generalized-α: eq. 34's h²‖x‖_W (GGL: eq. 39's h·max(‖x‖_q, ‖y‖_v)),
* rk4: the positions' part of the embedded third-order estimate h/6·(k4 − k5),
* dopri5: its embedded fourth-order estimate (the error test's RMS ratio),
* the BDF family (bdf, bdf-i2, bdf-i1): its error test's c_e^k‖∇^{k+1}y‖ of (q, v) at
  the step's order k (∝ h^(k+1); the velocities in the weights its option
  ``velocity_weights`` names),
* block-lstable (a fixed-step method: every run, h given or not): the positions' part
  of y_{k+1} minus the order-r quadrature of its stages (RMS, ∝ h^(r+1); the velocities'
  part, inflated by stiff components the L-stable method damps, is left out),
* spark with stages = 1 (likewise every run): the positions' Hermite defect
  q1 − q0 − h/2 (v0 + v1) + h²/12 (a1 − a0), the local error of q to leading order
  (∝ h³); with stages 2 and 3, where that defect cancels their leading error, the
  two-step defect over the last step and this one (∝ h^(2s+1); the first step after a
  start or restart not judged); stages = 4 keeps none.

Every kernel judges a step with the same function,
:func:`cosim.integrators.kernel_common.fixed_step_resolved`.

Two thresholds, measured (``python benchmarks/fixed_step_accuracy.py``):

* a step whose estimate exceeds 1/rtol — a position error larger than the state's own
  scale, |e_k| > |q_k| + atol/rtol — resolves nothing: the advance fails with
  :class:`~cosim.errors.FixedStepError` (the state as before the call); a method
  whose estimate is closer to its true local error than generalized-α's (9-110 ×
  above it) refuses above 1/(REFUSAL·rtol), so that it refuses at about the same true
  error: local-index1 above 1/(10·rtol) (li1_record.REFUSAL), rk4 above 1/(20·rtol)
  (explicit_record.REFUSAL_RK4; the calibration in its comment), through the
  verdict's rtol slot FIXED_RTOL = REFUSAL·rtol (state_fields.fixed_step_scalars);
* a run whose largest estimate exceeds :data:`WARN_FACTOR` gets one
  :class:`~cosim.errors.FixedStepAccuracyWarning` naming it.
"""
from __future__ import annotations

import math

from .errors import FixedStepError
# a step's estimate above UNRESOLVED / rtol fails (the kernels' verdict,
# kernel_common.fixed_step_resolved)
from .integrators.kernel_common import UNRESOLVED

# the largest local error estimate (in tolerance weights) a fixed-step run takes
# without a warning: ten times the largest measured in real-time use — generalized-α
# at h = 1 ms: 0.9 (two_link), 3 (pendulum), 11-17 (Panda, UR5) with held inputs
# (benchmarks/fixed_step_accuracy.py), 171 (Panda under a joint PD, tests/test_robots.py)
# and 307 (two_link, a new input every step, tests/test_fmu_native.py); rk4 far less.
# Unwarned runs measured err ≤ 49 × rtol, warned ones ≥ 640 × rtol.
WARN_FACTOR = 3000.0
# local error ∝ h^ORDER_LOCAL for the suggestion of a step (second-order methods: 3)
ORDER_LOCAL = 3


def suggested_step(h, estimate, order=ORDER_LOCAL):
    """The fixed step whose estimate would be about 1 (the tolerance), from h and the
    estimate at h (local error ∝ h^order)."""
    if not (estimate > 1.0 and math.isfinite(estimate)):
        return h
    return h * estimate ** (-1.0 / order)


# the way out the messages name beside a smaller h: an adaptive run (alternative None), or
# for a method without an adaptive mode (block-lstable, spark: their
# RecordIntegrator.fixed_step_alternative) this one
FIXED_ONLY = "a method with error control (an adaptive run of bdf, for example)"


def _step_tried(h, step, why):
    """(the step an estimate belongs to, the text naming h and it): ``step`` when it is
    shorter than h, else h; ``why``: what the text says of the shorter step."""
    if step is None or not (0.0 < step < h):
        return h, f"h={h!r}"
    return step, f"h={h!r} ({why} {step:.6g})"


def unresolved_error(method, t, h, estimate, rtol, atol, order=ORDER_LOCAL, alternative=None, refusal=1.0,
                     step=None):
    """The error of a fixed step beyond the state's scale (the record is unchanged);
    ``refusal``: the method's kernel refuses above UNRESOLVED/(refusal·rtol), an error
    of 1/refusal of the state (its record module's REFUSAL: local-index1, rk4);
    ``step``: the step tried, when shorter than ``h`` (cut to land on a communication
    point or an event, or halved after a failed solve): the estimate is that step's, so
    the suggestion scales from it."""
    tried, h_text = _step_tried(h, step, "the step tried:")
    hs = suggested_step(tried, estimate, order)
    alternative = "run adaptive (no h)" if alternative is None else "take " + alternative
    if refusal == 1.0:
        beyond = f"an error larger than the state itself (above 1/rtol = {UNRESOLVED / rtol:.3g})"
    else:
        beyond = (f"an error larger than 1/{refusal:g} of the state (above 1/({refusal:g}·rtol) = "
                  f"{UNRESOLVED / (refusal * rtol):.3g})")
    exc = FixedStepError(
        f"{method}: the fixed step {h_text} resolves nothing at t={t!r}: its local error "
        f"estimate is {estimate:.3g} times the tolerance weights (rtol={rtol!r}, atol={atol!r}), "
        f"{beyond}; the "
        f"step failed and the state is unchanged; take h of {hs:.2g} or less (the estimate "
        f"falls at best as h^{order}) or {alternative}",
        t=t, h=tried, cause="fixed step")
    exc.estimate = estimate
    return exc


def warning_text(method, h, estimate, rtol, atol, order=ORDER_LOCAL, alternative=None, step=None):
    """The one warning of a fixed-step run whose largest estimate exceeds WARN_FACTOR;
    ``step``: the communication step in which it did, when shorter than h (its steps
    were cut to it, so the suggestion scales from it)."""
    tried, h_text = _step_tried(h, step, "its steps cut to land on the communication points:")
    hs = suggested_step(tried, estimate, order)
    alternative = "an adaptive run (no h)" if alternative is None else alternative
    return (f"{method}: the fixed step {h_text} is too large for the tolerances: its local error "
            f"estimate reached {estimate:.3g} times the tolerance weights (rtol={rtol!r}, "
            f"atol={atol!r}; warned above {WARN_FACTOR:g}): the results may be inaccurate; h of "
            f"{hs:.2g} or less (the estimate falls at best as h^{order}) or {alternative} "
            f"would meet them; said once, the largest "
            f"estimate is kept in Simulation.fixed_step_error")
