"""Integrator base class (DESIGN.md "Core contracts").

An integrator advances one model from its current time to an exact target
time in accepted steps, keeps dense output for the last step, counts
statistics, and can capture/restore its complete state as plain data.

Subclass contract
-----------------
* ``model_kinds``: which model kinds it integrates ("multibody", "first_order").
* ``_initialize(t0, y0)``: set up the method's memory from a consistent start.
* ``_step(t_limit)``: take ONE accepted step ending at or before ``t_limit``
  (use :meth:`_clamp_step` so it lands exactly on ``t_limit`` when close).
  Update ``self.t``, ``self.y``, ``self.t_prev``, ``self.y_prev`` only when
  the step is accepted; raise :class:`ConvergenceError` (with t, h, cause)
  after restoring nothing-changed semantics when it cannot proceed.
* ``dense_output(t)``: y at t ∈ [t_prev, t].
* ``_restart()``: forget history after a discontinuity at the current point
  (inputs changed, event jump); multistep methods go back to order 1.
* ``_new_inputs(u_old, u_new)``: a new held input replaced ``u_old`` at the current
  point (``self.u`` is already ``u_new``); default :meth:`restart`.  A method whose
  history can be carried across the input's jump overrides it (BDF).
* ``_method_state()`` / ``_restore_method_state(d)``: everything else the method
  needs to continue bit-identically (history, controller memory, h_next).

Fixed-step mode: pass ``h``; every step is ``h`` except where a target
time cuts it.  Adaptive mode: ``rtol``/``atol`` control the local error.
"""
from __future__ import annotations

import copy
import math
import warnings
from collections.abc import Mapping

import numpy as np

from ..errors import ConvergenceError, InvalidInputError, StateError, UnknownParameterError
from ..models.base import check_inputs
from ..state_schema import check_integrator_state
from ..validation import (DEFAULT_MAX_STEPS, MIN_ATOL, MIN_RTOL, finite_float, flag, step_count,
                          tolerance)
from .kernel_common import clamp_step

EPS = float(np.finfo(float).eps)
STAT_KEYS = ("steps", "rejected", "newton_iterations", "residual_evaluations",
             "jacobian_evaluations", "lu_factorizations")


class Integrator:
    name = "abstract"
    description = ""
    model_kinds: tuple[str, ...] = ("multibody",)
    implicit = True
    # False: the method has no formulation of nonholonomic constraints B v + b = 0
    # (seed 000 eq. 93); a model with them is refused when the integrator is made
    supports_nonholonomic = True
    # Extra options accepted by the constructor: name -> default.  An option whose
    # default is a bool is parsed by validation.flag before check_options; one that
    # also takes words lists them here (name -> tuple of words, e.g. "scaled").
    options: dict = {}
    flag_words: dict = {}

    def __init__(self, model, *, rtol=1e-6, atol=1e-8, h=None, max_step=None,
                 first_step=None, max_steps=None, **options):
        if model.kind not in self.model_kinds:
            raise InvalidInputError(
                f"method {self.name!r} integrates {', '.join(self.model_kinds)} models, "
                f"model {model.name!r} is {model.kind}")
        if not self.supports_nonholonomic and getattr(model, "nonholonomic_names", ()):
            raise InvalidInputError(f"method {self.name!r} does not support nonholonomic "
                                    f"constraints (model {model.name!r}; methods that do: "
                                    f"generalized-alpha, generalized-alpha-i2, dopri5, rk4, "
                                    f"rkc-penalty, local-index1)")
        unknown = sorted(set(options) - set(self.options))
        if unknown:
            known = ", ".join(sorted(self.options)) or "none"
            raise UnknownParameterError(
                f"method {self.name!r} has no option {unknown[0]!r} (options: {known})")
        self.model = model
        self.rtol = tolerance("rtol", rtol, MIN_RTOL)
        self.atol = tolerance("atol", atol, MIN_ATOL)
        # termination: at most max_steps steps per advance()/communication step
        self.max_steps = DEFAULT_MAX_STEPS if max_steps is None else step_count("max_steps", max_steps)
        self.h_fixed = None if h is None else finite_float("h", h, positive=True)
        self.max_step = math.inf if max_step is None else finite_float("max_step", max_step, positive=True)
        self.first_step = None if first_step is None else finite_float("first_step", first_step, positive=True)
        self.opts = {**self.options, **options}
        for name, default in self.options.items():
            if isinstance(default, bool) or name in self.flag_words:  # a flag, maybe with words
                self.opts[name] = flag(name, self.opts[name], self.flag_words.get(name, ()))
        self.check_options()
        self.u = model.default_inputs()
        self.stats = dict.fromkeys(STAT_KEYS, 0)
        self.t = None
        self.y = None
        self.t_prev = None
        self.y_prev = None
        self.ic_report = None

    def check_options(self):
        """Validate ``self.opts`` (override); raise InvalidInputError naming the value."""

    # -- public API ------------------------------------------------------------
    def initialize(self, t0=0.0, y0=None, u=None, **ic_options):
        """Start at ``t0`` from ``y0`` (default: the model's initial state).

        Multibody integrators run the IC analysis (seed 000 Algorithm 1) and
        keep its report in ``self.ic_report``.
        """
        t0 = finite_float("t0", t0)
        if u is not None:
            self.u = check_inputs(self.model, u)
        y0 = self.model.initial_y() if y0 is None else np.array(y0, dtype=float)
        if y0.shape != (self.model.n_y,):
            raise InvalidInputError(f"y0 must have length {self.model.n_y}, got shape {y0.shape}")
        if not np.all(np.isfinite(y0)):
            raise InvalidInputError("y0 contains NaN/inf")
        self._initialize(t0, y0, **ic_options)
        self.t_prev, self.y_prev = self.t, self.y.copy()
        return self.ic_report

    def set_inputs(self, u):
        """Hold ``u`` from now on (ZOH).  A changed value is a discontinuity."""
        u = check_inputs(self.model, u)
        if self.t is not None and not np.array_equal(u, self.u):
            u_old = self.u
            self.u = u
            self._new_inputs(u_old, self.u)
        else:
            self.u = u

    def step(self, t_limit):
        """One accepted step, ending at or before ``t_limit``; returns new t."""
        t_limit = float(t_limit)
        if not t_limit > self.t:
            raise InvalidInputError(f"step target {t_limit!r} must be after t={self.t!r}")
        self._step(t_limit)
        return self.t

    def advance(self, t_target):
        """Integrate to exactly ``t_target``; on failure the state is unchanged."""
        t_target = finite_float("t_target", t_target, strict=True)
        if t_target < self.t:
            raise InvalidInputError(f"target time {t_target!r} is before t={self.t!r}")
        if t_target == self.t:
            return self.t
        self.check_step_budget(t_target)
        saved = self.state()
        try:
            n = 0
            while self.t < t_target:
                n += 1
                if n > self.max_steps:
                    self.too_many_steps(t_target)
                self._step(t_target)
        except BaseException:
            self.restore(saved)
            raise
        return self.t

    def _advance_checked(self, t_target):
        """:meth:`advance` for a caller that has already checked ``t_target`` (a finite
        float after ``t``) and the step budget (Simulation.do_step's hot path)."""
        return self.advance(t_target)

    def budget_free_span(self):
        """An interval at most this long never trips :meth:`check_step_budget`
        (half of what ``max_steps`` of the smallest allowed step cover)."""
        h = min(self.h_fixed or math.inf, self.max_step)
        return 0.5 * self.max_steps * h if math.isfinite(h) else math.inf

    def check_step_budget(self, t_target):
        """Refuse at once an interval that needs more than ``max_steps`` steps
        of the fixed step or of ``max_step`` (instead of running for hours)."""
        h = min(self.h_fixed or math.inf, self.max_step)
        if math.isfinite(h) and (t_target - self.t) / h > self.max_steps:
            raise InvalidInputError(
                f"{self.name}: advancing from t={self.t!r} to {t_target!r} with steps of at most "
                f"{h!r} needs {(t_target - self.t) / h:.3g} steps, more than max_steps={self.max_steps} "
                f"(raise max_steps or the step)")

    def _fixed_step_size(self, default=1e-2):
        """The step of a method that always steps at a fixed h (spark, block-lstable): ``h``,
        else ``first_step``, else ``default`` — the last two with a warning that no h was
        given (called by the method's ``__init__``)."""
        if self.h_fixed is not None:
            return self.h_fixed
        h = self.first_step or default
        warnings.warn(f"{self.name} is a fixed-step method without error control: no h given, "
                      f"using h={h!r} (rtol/atol weight its local error estimate: a step beyond "
                      f"the state fails, a run beyond them is warned about)", stacklevel=5)
        return h

    def too_many_steps(self, t_target):
        """Raise: the step budget of one advance/communication step is spent."""
        raise ConvergenceError(
            f"{self.name}: more than max_steps={self.max_steps} steps without reaching "
            f"t={t_target!r} (at t={self.t!r}); the step size collapsed or the problem is too "
            f"stiff for this method", t=self.t, h=None, cause="max_steps")

    def fresh_outputs(self):
        """The model's outputs at the current state and inputs if the step computed
        them (the compiled backend, models with an outputs kernel), else None."""
        return None

    @property
    def y_view(self):
        """y as a read-only view (no copy; None before the start), valid until the
        integrator next moves (:attr:`cosim.Simulation.y_view`)."""
        if self.y is None:
            return None
        view = self.y.view()
        view.flags.writeable = False
        return view

    def hold_inputs(self, u):
        """Hold ``u`` from now on, already checked and changed (a 1-D C-contiguous
        float vector the caller gives away): :meth:`set_inputs` minus its checks
        (Simulation's per-step path; the compiled wrappers skip the ``u``
        property's conversions too)."""
        u_old = self.u
        self.u = u
        self._new_inputs(u_old, self.u)

    def outputs_into(self, out):
        """Copy :meth:`fresh_outputs` into ``out`` and return True, or return
        False (nothing written) when there are none."""
        y = self.fresh_outputs()
        if y is None:
            return False
        out[:] = y
        return True

    def restart(self):
        """Forget the step history at the current point (after a discontinuity)."""
        self._restart()
        self.t_prev, self.y_prev = self.t, self.y.copy()

    def reset_point(self, t, y):
        """Continue from (t, y) — e.g. after an event's jump map — and restart."""
        self.t = float(t)
        self.y = np.array(y, dtype=float)
        self._reset_point()
        self.restart()

    def dense_output(self, t):
        raise NotImplementedError

    def step_interpolant(self):
        """:meth:`dense_output` as a function of t over the last step as it is now (until
        the integrator next changes); a method whose dense output reads its record
        on every call reads it once here (the event locator calls it many times)."""
        return self.dense_output

    # -- state -----------------------------------------------------------------
    def state(self) -> dict:
        """Complete integrator state as plain data (arrays, numbers, strings)."""
        return {
            "method": self.name,
            "t": self.t, "y": self.y.copy(),
            "t_prev": self.t_prev, "y_prev": self.y_prev.copy(),
            "u": self.u.copy(),
            "stats": dict(self.stats),
            "method_state": copy.deepcopy(self._method_state()),
        }

    def restore(self, state: dict):
        """Continue from ``state``; a state that fails the schema of this method
        (:mod:`cosim.state_schema`) raises StateError and changes nothing."""
        if not isinstance(state, Mapping) or state.get("method") != self.name:
            method = state.get("method") if isinstance(state, Mapping) else None
            raise StateError(f"state belongs to method {method!r:.40}, not {self.name!r}")
        if self.y is not None:  # validate fully before touching anything
            check_integrator_state(self, state)
        y = np.asarray(state["y"], dtype=float)
        if y.shape != (self.model.n_y,):
            raise StateError(f"state vector has shape {y.shape}, model {self.model.name!r} needs ({self.model.n_y},)")
        self.t = float(state["t"])
        self.y = y.copy()
        self.t_prev = float(state["t_prev"])
        self.y_prev = np.array(state["y_prev"], dtype=float)
        self.u = np.array(state["u"], dtype=float)
        self.stats = {k: int(v) for k, v in state["stats"].items()}
        self._restore_method_state(copy.deepcopy(state["method_state"]))

    # -- hooks -------------------------------------------------------------------
    def _initialize(self, t0, y0, **ic_options):
        raise NotImplementedError

    def _step(self, t_limit):
        raise NotImplementedError

    def _restart(self):
        """Default: nothing to forget."""

    def _new_inputs(self, u_old, u_new):
        """The held input jumped from ``u_old`` to ``u_new`` (already ``self.u``) at
        the current point (:meth:`set_inputs`, :meth:`hold_inputs`).  Default: a
        discontinuity, :meth:`restart`."""
        self.restart()

    def _reset_point(self):
        """Recompute derived quantities after ``t``/``y`` were replaced."""

    def _method_state(self) -> dict:
        return {}

    def _restore_method_state(self, d: dict):
        pass

    # -- helpers -------------------------------------------------------------------
    def _clamp_step(self, h, t_limit):
        """Step size not crossing ``t_limit``; returns (h, lands_on_limit).

        A step that would leave a sliver shorter than 1/4 of h before the
        limit is stretched onto it (adaptive mode only), so no tiny steps.
        """
        h, lands, moves = clamp_step(self.t, h, self.max_step, self.h_fixed is not None, t_limit)
        if not moves:   # a step this small no longer moves t: fail instead of looping
            self._fail("step size underflow", h, "step does not advance t")
        return h, lands

    def _fail(self, message, h, cause, hint=""):
        raise ConvergenceError(f"{self.name}: {message} at t={self.t!r}, h={h!r} ({cause}){hint}",
                               t=self.t, h=h, cause=cause)


class MultibodyIntegrator(Integrator):
    """Common part of integrators of index-3 multibody DAEs.

    Keeps q, v, q'' and λ at the current point; ``initialize`` runs the IC
    analysis and may replace ``self.model`` by a view without redundant
    constraints.
    """

    model_kinds = ("multibody",)

    def _ic(self, t0, y0, **ic_options):
        from ..ic import analyse_initial_conditions
        q0, v0 = self.model.split(y0)
        report = analyse_initial_conditions(self.model, t0, q0, v0, self.u, **ic_options)
        self.ic_report = report
        self.model = report.model
        self.t = t0
        self.y = np.concatenate([report.q, report.v])
        self.qdd = report.qdd
        self.lam = report.lam
        return report

    @property
    def q(self):
        return self.y[: self.model.n_q]

    @property
    def v(self):
        return self.y[self.model.n_q:]

    def state(self):
        d = super().state()
        d["qdd"] = self.qdd.copy()
        d["lam"] = self.lam.copy()
        return d

    def restore(self, state):
        super().restore(state)
        self.qdd = np.array(state["qdd"], dtype=float)
        self.lam = np.array(state["lam"], dtype=float)

    def _reset_point(self):
        from .common import consistent_accelerations
        q, v = self.model.split(self.y)
        self.qdd, self.lam = consistent_accelerations(self.model, self.t, q, v, self.u)
