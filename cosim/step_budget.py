"""Every adaptive method either finishes or refuses up front.

Before a run whose end time is known (:func:`cosim.run`, :func:`cosim.simulate`,
``cosim simulate``, scenarios), :func:`check` measures what the chosen method and
tolerance cost on this model: a short probe — the run's own first accepted steps,
taken on the live simulation and then undone (``get_state``/``set_state``: the run
that follows is bit-identical to one without the probe) — counts a short run
exactly; where it points to a long one, runs of the method at rtol 1e-4 and 1e-5
give the steps there and how they grow as rtol falls (:func:`reference_estimate`).
Nothing here is a constant guessed per method: the budget is the run's own
``max_steps`` (per communication step) and the estimate is measured.

- Estimated steps of one communication step above ``max_steps``: the run would fail
  after spending its budget; it is refused at once (:class:`UnreachableToleranceError`)
  with the estimate and the method that would do it cheaper (its own probe).
- Otherwise, an estimate of the whole run more than :data:`WARN_RATIO` times another
  method's (and above :data:`WARN_MIN_STEPS` steps, where it matters): accepted with
  one :class:`~cosim.errors.TightToleranceWarning` naming both estimates.

The candidates are the adaptive methods of higher order than a second-order one
(orders from the methods' records: bdf up to ``bdf_record.MAX_ORDER``, dopri5
``explicit_record.ORDER``), probed on the python backend (no compilation) only when
the chosen method's estimate is large.
"""
import math
import time
import warnings

from .errors import InvalidInputError, TightToleranceWarning

# stage A: the run's own first accepted steps at the user's tolerance (at most this many,
# or PROBE_SECONDS of wall time), taken on the live simulation and undone; a run this
# short is counted exactly, and most runs end their check here
PROBE_STEPS = 60
PROBE_SECONDS = 1.0
# the step size the method settles at: the mean over the probe's later steps
SETTLED_FRACTION = 0.5
# stage B (only where stage A finds the run long): whole runs at the looser REF_RTOL
# and REF_RTOL/10 (atol scaled alike) to t_end, at most REF_SECONDS of wall time each,
# their steps extrapolated to the user's rtol (steps ∝ rtol^(-1/k), k measured)
REF_RTOL = 1e-4
REF_SECONDS = 1.0
REF_MAX_STEPS = 200_000
# a warning where the run needs more than this many steps and another method does it
# WARN_RATIO times cheaper (steps): generalized-α from rtol 1e-6 (1e-5 on some models),
# where it takes more than 10 times bdf's steps (docs/methods/generalized-alpha.md)
WARN_MIN_STEPS = 1000
WARN_RATIO = 10.0
# stage A's first steps may run up to 2× below the settled step count (generalized-α
# on the pendulum at rtol 1e-6: 2290 estimated, 4300 taken): stage B from this estimate
STAGE_B_FROM = WARN_MIN_STEPS / 2
# the methods that may do it cheaper; in a driven run (inputs changing at every
# communication step: blocks, input signals, an FMU, the ROS node) only dopri5 is
# suggested: a new input costs it one derivative, where bdf solves eq. 10 four times to
# carry its history across the jump (and restarts at order 1 where it cannot); dopri5
# also takes the fewest steps there (pendulum, 1 s in 0.01 s communication steps, torque
# sin 3t, rtol 1e-6: dopri5 101 steps, bdf 115, generalized-alpha 1398)
CANDIDATES = ("bdf", "dopri5")
DRIVEN_CANDIDATES = ("dopri5",)


class UnreachableToleranceError(InvalidInputError):
    """The method cannot reach the tolerance within its step budget (``max_steps`` per
    communication step): refused at set-up, with the estimate and a cheaper method."""


def method_order(name):
    """The order of a method's error estimate (its record's constant; generalized-α and
    the other one-step index-3 methods: 2)."""
    if name.startswith("bdf"):
        from .integrators import bdf_record
        return bdf_record.MAX_ORDER
    if name in ("dopri5", "rk4"):
        from .integrators import explicit_record
        return explicit_record.ORDER
    return 2


def step_exponent(name, options=None):
    """k of steps ∝ rtol^(-1/k): a local error h^(p+1) held at the tolerance gives
    k = p + 1; generalized-α's tolerance-proportional test holds it at rtol^(3/2)
    (generalized_alpha.internal_tolerances), k = (p + 1)/1.5 = 2.  Measured
    (compiled, atol = rtol/100, rtol 1e-3 … 1e-7): generalized-α's steps grow 3.1-3.2×
    per decade on andrews, the pendulum and two_link (k = 2), bdf's 1.3-1.5× (k ≈ 6-8)."""
    p = method_order(name)
    if name == "generalized-alpha" and (options or {}).get("tolerance_proportional", True):
        return (p + 1) / 1.5
    return p + 1.0


def probe_steps(integ, t_end, steps=PROBE_STEPS, seconds=PROBE_SECONDS):
    """Take up to ``steps`` accepted steps of ``integ`` towards ``t_end`` (and at least
    4 before ``seconds`` stop it); returns (times from the start, reached t_end?,
    failure message or None).  The caller undoes them."""
    times = [integ.t]
    start = time.perf_counter()
    try:
        while integ.t < t_end and len(times) <= steps:
            integ.step(t_end)
            times.append(integ.t)
            if time.perf_counter() - start > seconds and len(times) > 4:
                break
    except Exception as exc:   # noqa: BLE001 -- the run itself reports it, with its hints
        return times, False, str(exc).split("\n")[0][:160]
    return times, integ.t >= t_end, None


def estimate(times, reached, span):
    """Steps needed over ``span`` from a probe's times: exact when the probe reached
    the end, else its steps plus the rest over its mean settled step (inf: no
    progress)."""
    n = len(times) - 1
    if reached:
        return float(n)
    if n < 2:
        return math.inf
    k = int(n * (1.0 - SETTLED_FRACTION))
    covered = times[-1] - times[k]
    if not covered > 0.0:
        return math.inf
    return n + max(0.0, span - (times[-1] - times[0])) / (covered / (n - k))


def _reference_times(model, method, options, backend, rtol, atol, t0, y0, u, t_end, seconds):
    """(times of the accepted steps, reached t_end?) of a fresh ``method`` at (rtol, atol)
    from (t0, y0) towards ``t_end``, stopped after ``seconds``; None when it cannot run the
    model or fails."""
    from .integrators import make_integrator, method_class
    try:
        if model.kind not in method_class(method).model_kinds:
            return None
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            integ = make_integrator(model, method, rtol=rtol, atol=atol, backend=backend, **options)
            integ.initialize(t0, y0, u)
    except Exception:   # noqa: BLE001 -- a method that cannot run the model is no candidate
        return None
    times, reached, failure = probe_steps(integ, t_end, REF_MAX_STEPS, seconds)
    return None if failure is not None else (times, reached)


# the growth exponent is measured over the time both reference runs covered, from at
# least this many steps of the looser one (else the method's order gives it)
MIN_WINDOW_STEPS = 20


def reference_estimate(model, method, options, backend, rtol, atol, t0, y0, u, t_end):
    """Stage B: (estimated steps at ``rtol``, how it was measured) from runs of a fresh
    ``method`` at r1 = max(rtol, REF_RTOL) and r2 = max(rtol, r1/10), each to ``t_end``
    or for REF_SECONDS: the steps of the r1 run to t_end (counted, or extrapolated from
    its coverage) times (r1/rtol)^(1/k), steps ∝ rtol^(-1/k), with k measured from the
    two runs' step counts over the time both covered (kept in [1, 2 (p + 1)], p the
    method's order; from the order, :func:`step_exponent`, where that window is too
    short).  None when the method cannot run the model."""
    span = t_end - t0
    r1 = max(rtol, REF_RTOL)
    run1 = _reference_times(model, method, options, backend, r1, atol * r1 / rtol, t0, y0, u, t_end,
                            REF_SECONDS)
    if run1 is None:
        return None
    n1 = estimate(run1[0], run1[1], span)
    if r1 == rtol or not math.isfinite(n1):
        return n1, f"{n1:.0f} steps at rtol {r1:g}"
    r2 = max(rtol, r1 / 10.0)
    run2 = _reference_times(model, method, options, backend, r2, atol * r2 / rtol, t0, y0, u, t_end,
                            REF_SECONDS)
    window = min(run1[0][-1], run2[0][-1]) if run2 is not None else t0
    c1 = sum(1 for t in run1[0][1:] if t <= window)
    c2 = sum(1 for t in run2[0][1:] if t <= window) if run2 is not None else 0
    counted = "" if run1[1] else " (extrapolated)"
    if c1 < MIN_WINDOW_STEPS or c2 <= 0:
        k = step_exponent(method, options)
        how = f"{n1:.0f} steps at rtol {r1:g}{counted}, steps growing as rtol^-1/{k:g} (the method's order)"
    else:
        kmax = 2.0 * (method_order(method) + 1)
        k = kmax if c2 <= c1 * 10.0 ** (1.0 / kmax) else \
            min(kmax, max(1.0, math.log(r1 / r2) / math.log(c2 / c1)))
        if run1[1] and run2[1]:
            how = f"{c1} steps at rtol {r1:g}, {c2} at {r2:g}: steps growing as rtol^-1/{k:.2g}"
        else:
            how = (f"{n1:.0f} steps at rtol {r1:g}{counted}; {c1} and {c2} steps at rtol {r1:g} "
                   f"and {r2:g} to t={window:.3g}: steps growing as rtol^-1/{k:.2g}")
    return n1 * (r1 / rtol) ** (1.0 / k), how


def _steps_text(x):
    return "unbounded" if not math.isfinite(x) else f"{x:.3g}"


def grid_steps(sim, span, intervals):
    """The fewest integrator steps any method takes over ``span``: one per communication
    step, and one per sample of the fastest sampled block (integration never crosses a
    sample instant)."""
    times = [float(b.sample_time) for b in sim.blocks if b.sample_time]
    n_sampled = math.ceil(span / min(times) * (1.0 - 1e-12)) if times else 0
    return max(int(intervals), n_sampled)


def check(sim, t_end, dt, intervals=1, driven=False):
    """Refuse (raise :class:`UnreachableToleranceError`) or warn once before ``sim`` runs
    to ``t_end`` in ``intervals`` communication steps of at most ``dt`` (``driven``: with
    inputs changing at every one, :data:`DRIVEN_CANDIDATES`); returns the estimated
    steps, or None where nothing was checked (fixed step, exact method, nothing to run).
    Unless it refused, ``sim`` is told that communication steps up to ``dt`` are judged
    (:meth:`~cosim.Simulation.tolerance_judged`: its do_step does not probe them again)."""
    total = _check(sim, t_end, dt, intervals, driven)
    span = min(dt, t_end - sim.time)
    per_interval = total * span / (t_end - sim.time) if total is not None and span > 0 else None
    sim.tolerance_judged(dt, per_interval)
    return total


def _check(sim, t_end, dt, intervals, driven):
    integ = sim.integrator
    if getattr(integ, "h_fixed", None) is not None or not t_end > sim.time \
            or sim.method == "state-transition":
        return None
    span = t_end - sim.time
    dt = min(dt, span)
    floor = grid_steps(sim, span, intervals)
    # the probe moves only the integrator: its point back as do_step's fast path takes
    # it back (copies of its record), not the whole state through set_state's checks
    snapshot = sim._snapshot_integrator()
    try:
        times, reached, failure = probe_steps(integ, t_end)
    finally:
        sim._rollback_integrator(snapshot)
    if failure is not None:
        return None   # the run itself says what failed, with its own hints
    total = max(estimate(times, reached, span), floor)
    n = len(times) - 1
    how = f"a probe of {n} steps advanced {times[-1] - times[0]:.3g}"
    if not reached and (total > STAGE_B_FROM or total * dt / span > integ.max_steps):
        ref = reference_estimate(sim.model, sim.method, sim.method_options, sim.backend, sim.rtol,
                                 sim.atol, sim.time, sim.y, integ.u, t_end)
        if ref is None:
            # the first steps alone overstate a method that ramps up (bdf starts at
            # order 1): no verdict from them
            return total
        total, how = max(ref[0], floor), ref[1]
    per_interval = total * dt / span if math.isfinite(total) else math.inf
    over_budget = per_interval > integ.max_steps
    if not over_budget and total <= WARN_MIN_STEPS:
        return total
    better = []
    for method in (DRIVEN_CANDIDATES if driven else CANDIDATES):
        if method == sim.method:
            continue
        ref = reference_estimate(sim.model, method, {}, "python", sim.rtol, sim.atol, sim.time,
                                 sim.y, integ.u, t_end)
        if ref is not None and max(ref[0], floor) < total:
            better.append((max(ref[0], floor), method))
    better.sort()
    name = sim.method
    what = (f"{name} (order {method_order(name)}) at rtol {sim.rtol:g}, atol {sim.atol:g}: about "
            f"{_steps_text(total)} steps to t={t_end:g} (measured: {how})")
    if better:
        est, m = better[0]
        cheaper = (f"; suggested: method '{m}' (order {'≤ ' if m.startswith('bdf') else ''}"
                   f"{method_order(m)}), about {_steps_text(est)} steps")
    else:
        cheaper = "; no other adaptive method was measured cheaper"
    if over_budget:
        # a user model whose steps collapse from its start may be wrong, not stiff (a sign
        # error in a derivative fails Newton or shrinks the step, depending on roundoff)
        hint = (f" (a new user model whose step shrinks from its start often has a wrong "
                f"derivative: {sim.check_hint()})" if sim.user_model else "")
        raise UnreachableToleranceError(
            f"{what}, {_steps_text(per_interval)} per communication step of {dt:g}, more than "
            f"max_steps={integ.max_steps}{cheaper}: loosen rtol, choose that method, or raise "
            f"max_steps{hint}")
    if better and better[0][0] * WARN_RATIO <= total:
        warnings.warn(f"{what}{cheaper}; or a looser rtol, or a fixed step h for real-time use",
                      TightToleranceWarning, stacklevel=3)
    return total
