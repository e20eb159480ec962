"""The constraint check of every communication step (:class:`cosim.simulation.Simulation`).

A multibody run is only right while its state satisfies *all* the model's
constraints, also those the initial-condition analysis set aside as redundant
(seed 000 §1): at the end of each communication step the stepper evaluates, on
the model's full constraint set,

* the position residual   max_i |C_i(q, t)|, and
* the velocity residual   max_i |(C_q v + C_t)_i|,

and compares them with bounds derived from the tolerances::

    position bound = min(FACTOR · (rtol · s_q + atol), 0.01 · s_q),     s_q = max(1, max|q|)
    velocity bound = min(VELOCITY_FACTOR · (rtol · s_v + atol), 0.1 · s_v),   s_v = max(1, max|v|)

(the caps keep the bounds meaningful at loose tolerances).  The index-3 methods
(``INDEX3_METHODS``) do not enforce the velocity constraints: their velocity
residual follows the velocity error, which the tolerances do not bound after a
restart (measured: bdf on the pendulum at rtol 1e-7, 1.4e-4 after an input
change); for them the velocity bound is 0.1 · s_v, a check for gross errors only.
(rtol, atol: the run's tolerances, also in fixed-step runs, where they steer
the Newton iterations).  A step that ends above a bound fails with
:class:`~cosim.errors.ConstraintViolationError` and leaves the simulation as it
was; for methods that only bound the drift (penalty methods, ``DRIFT_METHODS``)
the first excess is a :class:`~cosim.errors.ConstraintDriftWarning` and the
worst residual is reported (:attr:`Simulation.constraint_residual_report`).

Where the full check is left out (``constraint_check="auto"`` on a library model
on its independent set) and for the drift-bounding methods, a *gross* violation
still fails the step in every mode but "off": a position residual above
``GROSS_FACTOR`` times the position bound (at most 0.1 · s_q), or not finite
(:func:`gross_bound`; one call of the model's compiled constraint kernel,
:func:`compiled_constraints`).  A restored state must satisfy the bounds too
(:func:`restore_bounds`).

Redundancy is decided along the run: where the model has redundant
constraints, the integrator works on an independent subset of the rows
(:class:`cosim.ic.ReducedConstraints`).  That subset can lose rank where the
full set keeps it (a different subset is independent there); after every
communication step :func:`better_rows` compares the conditioning of the kept
rows with that of the best independent subset at the current configuration,
and the stepper switches rows when the kept ones have become much worse.
"""
from __future__ import annotations

import math

import numpy as np

from .ic import independent_constraints

FACTOR = 100.0
"""How far above the tolerance-scaled size a position residual may grow before the step fails."""

VELOCITY_FACTOR = 1000.0
"""The same for the velocity residual."""

DRIFT_METHODS = frozenset({"rkc-penalty"})

"""Methods that only bound the constraint drift: an excess warns once instead of failing."""

INDEX3_METHODS = frozenset({"bdf", "generalized-alpha", "block-lstable"})
"""Methods that enforce positions only (block-lstable: its default index 3)."""

ENFORCING_METHODS = frozenset({"generalized-alpha", "generalized-alpha-i2", "bdf", "bdf-i2", "spark",
                               "dopri5", "rk4"})
"""Methods whose every accepted step solves the position constraints C(q) = 0 on the rows
they integrate (the index-3 or GGL Newton solve, SPARK's constraint stages, dopri5/rk4's
projection): a step that does not is a failed step already, so the gross check after each
communication step (two copies of the record and a call of the constraint kernel, about
5 µs of a 10 µs two_link step) is left out for them where the full check is."""

GROSS_FACTOR = 100.0
"""A gross violation: a position residual this many times above the position bound (at most
a tenth of the coordinates' size), or not finite.  Checked after every communication step in
every mode but ``constraint_check="off"``, also where the full check is left out."""

ADAPTIVE_ROWS = frozenset({"dopri5", "rk4"})
"""Methods whose multipliers do not carry over between evaluations: the rows of a model
with redundant constraints are chosen anew at every configuration they evaluate
(:class:`cosim.ic.ReducedConstraints` ``adaptive``), not only between communication steps."""

RESELECT_RATIO = 0.1
"""Switch rows when the kept subset's conditioning is below this fraction of the best."""


def bounds(rtol, atol, q, v, positions_only=False):
    """(position bound, velocity bound) at (q, v) (module docstring); ``positions_only``:
    the method enforces positions only (index 3)."""
    rtol = rtol if type(rtol) is float else float(np.max(rtol))
    atol = atol if type(atol) is float else float(np.max(atol))
    sq = max(1.0, _max_abs(q.tolist()))  # Python on a few numbers: cheaper than numpy
    sv = max(1.0, _max_abs(v.tolist()))
    return (min(FACTOR * (rtol * sq + atol), 0.01 * sq),
            0.1 * sv if positions_only else min(VELOCITY_FACTOR * (rtol * sv + atol), 0.1 * sv))


RESTORE_FACTOR = {"generalized-alpha": 0.01, "generalized-alpha-i2": 1.0, "local-index1": 1.0}
"""A restored state (``Simulation.set_state``) must lie within the position bound; for these
methods within this factor times ``rtol · s_q + atol`` instead of ``FACTOR`` times it: their
first step's error test sees the jump back onto the constraints and fails at any step size
from a state further off (measured on the pendulum at rtol 1e-6: generalized-α fails from
|C| = 1.4e-7, generalized-α-i2 from 2.8e-5, local-index1 from 1.4e-5), while their own steps
keep |C| below 1e-3 of the tolerance scale (scripts/fuzz_state.py finds such blobs)."""


VELOCITY_RESTORE_FACTOR = {"generalized-alpha-i2": 1.0, "local-index1": 1.0}
"""Likewise for the velocity constraint, times ``rtol · s_v + atol`` instead of
``VELOCITY_FACTOR`` times it (measured on the pendulum at rtol 1e-6, velocities moved
along C_q after 5 steps: local-index1's first step fails from |C_q v + C_t| ≈ 4 of these
units, generalized-α-i2's from ≈ 14; their own steps keep it below 3.2e-7 of them on the
pendulum, two_link and andrews)."""


def restore_bounds(method, rtol, atol, q, v, positions_only=False):
    """(position bound, velocity bound) a restored state must satisfy (``RESTORE_FACTOR``,
    ``VELOCITY_RESTORE_FACTOR``)."""
    bp, bv = bounds(rtol, atol, q, v, positions_only)
    factor, v_factor = RESTORE_FACTOR.get(method), VELOCITY_RESTORE_FACTOR.get(method)
    if factor is not None or v_factor is not None:
        rtol = rtol if type(rtol) is float else float(np.max(rtol))
        atol = atol if type(atol) is float else float(np.max(atol))
    if factor is not None:
        bp = min(bp, factor * (rtol * max(1.0, _max_abs(q.tolist())) + atol))
    if v_factor is not None and not positions_only:
        bv = min(bv, v_factor * (rtol * max(1.0, _max_abs(v.tolist())) + atol))
    return bp, bv


def gross_bound(rtol, atol, q):
    """The position residual above which a step is grossly wrong (``GROSS_FACTOR``)."""
    rtol = rtol if type(rtol) is float else float(np.max(rtol))
    atol = atol if type(atol) is float else float(np.max(atol))
    sq = max(1.0, _max_abs(q.tolist()))
    return min(GROSS_FACTOR * FACTOR * (rtol * sq + atol), 0.1 * sq)


def compiled_constraints(model):
    """``model``'s constraint kernel as compiled for its methods (:func:`cosim.jit.model_functions`,
    already loaded by a compiled method), or None."""
    try:
        from . import jit  # noqa: PLC0415
        kernels = model.kernels()
        if kernels is None:
            return None
        compiled = jit._models.get(tuple(kernels.all_functions()))
        if compiled is None:
            return None
        dispatcher = compiled[0][jit.kernel_fields().index("constraints")]
        # the compiled protocol signature itself: a call through the dispatcher would
        # compile another one for C-contiguous arrays
        overload = dispatcher.overloads.get(tuple(jit.kernel_signature("constraints").args))
        return None if overload is None else overload.entry_point
    except Exception:  # noqa: BLE001 -- no compiled kernel: the Python constraints
        return None


def position_residual(model, t, q):
    """(max_i |C_i(q, t)|, index of the worst) on the full set; NaN anywhere: NaN."""
    C = [abs(x) for x in np.asarray(model.constraints(q, t), dtype=float).tolist()]
    pos = _max_abs(C)
    i = C.index(pos) if pos in C else next(k for k, x in enumerate(C) if not x <= pos)
    return pos, i


def residuals(model, t, q, v):
    """(|C|, index of the worst, |C_q v + C_t|, index of the worst, C_q) on the full set
    (a NaN residual is returned as NaN, at its row: argmax finds it; compare with
    ``not residual <= bound``)."""
    C = [abs(x) for x in np.asarray(model.constraints(q, t), dtype=float).tolist()]
    Cq = np.asarray(model.constraint_jacobian(q, t), dtype=float)
    Cd = [abs(x) for x in (Cq @ v + np.asarray(model.constraint_dt(q, t), dtype=float)).tolist()]
    pos, vel = _max_abs(C), _max_abs(Cd)
    i = C.index(pos) if pos in C else next(k for k, x in enumerate(C) if not x <= pos)
    j = Cd.index(vel) if vel in Cd else next(k for k, x in enumerate(Cd) if not x <= vel)
    return pos, i, vel, j, Cq


def _max_abs(values):
    """max |x| of a list of floats; NaN anywhere gives NaN (0.0 for an empty list)."""
    if not values:
        return 0.0
    m = max(map(abs, values))
    return m if sum(values) == sum(values) else math.nan


def _conditioning(A):
    if A.shape[0] == 0:
        return 1.0
    s = np.linalg.svd(A, compute_uv=False)
    return float(s[-1] / s[0]) if s[0] > 0 else 0.0


def better_rows(Cq, keep):
    """Rows to keep instead of ``keep`` (a sorted index array of C_q's rows), or None:
    the best independent subset at this C_q when it has as many rows and the kept
    rows' conditioning (σ_min/σ_max) is below ``RESELECT_RATIO`` times its own."""
    if not np.all(np.isfinite(Cq)):
        return None
    best = independent_constraints(Cq)
    if best.size != keep.size or np.array_equal(best, keep):
        return None
    if _conditioning(Cq[keep]) < RESELECT_RATIO * _conditioning(Cq[best]):
        return best
    return None
