"""Model protocol (DESIGN.md "Core contracts").

Two kinds of continuous models fit the same stepper:

* :class:`MultibodyModel` — index-3 DAE  M(q) q'' + C_q^T λ = Q(q, q', t, u),
  C(q, t) = 0  (seed 000 eq. 1).  Flat continuous state y = [q, v].
* :class:`FirstOrderModel` — x' = f(t, x, u); :class:`~cosim.models.lti.LTIModel`
  is the linear special case.  Flat state y = x.

Every model has named inputs, outputs and parameters (SI units), a
consistent initial state, and optional switching functions with jump maps
(events).  The integrators and the stepper only use the methods below.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .. import derivatives
from ..errors import InvalidInputError, ModelDefinitionError, UnknownParameterError
from ..validation import finite_float
from .ranges import parameter_range


@dataclass(frozen=True)
class Parameter:
    name: str
    default: float
    unit: str = "1"
    description: str = ""
    tunable: bool = False  # may change between communication steps


@dataclass(frozen=True)
class Signal:
    """A named input or output with unit and (for inputs) a default value."""

    name: str
    unit: str = "1"
    description: str = ""
    default: float = 0.0


@dataclass(frozen=True)
class Event:
    """A switching function declared by a model.

    ``direction``: +1 detects only rising zero crossings, -1 only falling,
    0 both.  ``terminal``: the simulation stops after the jump.
    """

    name: str
    direction: int = 0
    terminal: bool = False


class Model:
    """Common part of all models: names, parameters, inputs, outputs, events."""

    kind = "abstract"  # "multibody" or "first_order"
    name = "model"
    description = ""
    parameters: tuple[Parameter, ...] = ()
    inputs: tuple[Signal, ...] = ()
    outputs: tuple[Signal, ...] = ()
    events: tuple[Event, ...] = ()
    # Declared parameter ranges (cosim.models.ranges): name -> Range, e.g.
    # {"m": POSITIVE, "e": UNIT_INTERVAL, "damping": SWITCH}; checked by
    # _check_parameter on every path that sets a parameter (issue 14).
    parameter_ranges: dict = {}
    # Parameters that must be > 0 (masses, lengths, stiffnesses): short for POSITIVE.
    positive_parameters: tuple[str, ...] = ()

    def __init__(self, **params):
        spec = {p.name: p for p in self.parameters}
        values = {p.name: float(p.default) for p in self.parameters}
        for key, value in params.items():
            if key not in spec:
                known = ", ".join(sorted(spec)) or "none"
                raise UnknownParameterError(
                    f"model {self.name!r} has no parameter {key!r} (parameters: {known})")
            values[key] = self._check_parameter(key, value)
        for p in self.parameters:  # defaults: a user model's (a URDF's) must fit its ranges too
            if p.name not in params:
                parameter_range(type(self), p.name).check(p.name, values[p.name])
        self.params = values
        self._setup_checked()

    # -- parameters --------------------------------------------------------
    def _check_parameter(self, key, value):
        """The one parameter validator: a real finite number (a bool is refused, not read
        as 0/1) inside the range the model declares, else within the default magnitude
        bound (:mod:`cosim.models.ranges`)."""
        if isinstance(value, (bool, np.bool_)):
            raise InvalidInputError(f"parameter {key!r} must be a number, got {type(value).__name__} "
                                    f"{value!r}")
        x = finite_float(f"parameter {key!r}", value)
        return parameter_range(type(self), key).check(key, x)

    def _setup_checked(self):
        """``setup()``, with a float overflow there (e.g. a length of 1e300 squared) turned
        into an error naming the model and its parameters."""
        try:
            with np.errstate(over="raise"):
                self.setup()
        except (OverflowError, FloatingPointError, ZeroDivisionError) as exc:
            changed = {k: v for k, v in self.params.items()
                       if not any(p.name == k and p.default == v for p in self.parameters)}
            raise InvalidInputError(f"model {self.name!r}: parameters {changed} overflow in setup() "
                                    f"({type(exc).__name__}: {exc})") from None

    def setup(self):
        """Derive cached quantities from ``self.params`` (override)."""

    def set_parameter(self, key, value):
        """Change a parameter; raises without changing anything on bad input."""
        spec = {p.name: p for p in self.parameters}
        if key not in spec:
            raise UnknownParameterError(f"model {self.name!r} has no parameter {key!r}")
        checked = self._check_parameter(key, value)
        old = dict(self.params)
        self.params[key] = checked
        try:
            self._setup_checked()
        except Exception:
            self.params = old
            self.setup()
            raise

    # -- names ---------------------------------------------------------------
    @property
    def input_names(self):
        return tuple(s.name for s in self.inputs)

    @property
    def output_names(self):
        return tuple(s.name for s in self.outputs)

    @property
    def n_inputs(self):
        return len(self.inputs)

    def default_inputs(self):
        return np.array([s.default for s in self.inputs], dtype=float)

    # -- state vector --------------------------------------------------------
    @property
    def state_names(self) -> tuple[str, ...]:
        raise NotImplementedError

    @property
    def n_y(self):
        return len(self.state_names)

    def initial_y(self) -> np.ndarray:
        raise NotImplementedError

    def output_values(self, t, y, u) -> np.ndarray:
        """Outputs y_out = g(t, y, u), in ``output_names`` order."""
        raise NotImplementedError

    # -- events ----------------------------------------------------------------
    def event_functions(self, t, y, u) -> np.ndarray:
        """Switching functions, one per entry of ``events`` (seed 001 §3.7)."""
        return np.zeros(0)

    def event_coordinate(self, index):
        """``(j, c, s)`` when switching function ``index`` is, in the model's present
        mode, exactly y[j] − c (s = +1) or c − y[j] (s = −1) with the same rounding as
        :meth:`event_functions` (a URDF robot's position stop: q_i − limit), else None.
        The stepper then locates its event on component j of the step's dense output
        alone."""
        return None

    def apply_event(self, index, t, y, u) -> np.ndarray:
        """Jump map of event ``index`` at its located time; returns new y."""
        return y

    def apply_events(self, indices, t, y, u) -> np.ndarray:
        """Jump map of the events ``indices`` located at one instant (index order);
        returns new y.  By default each event's :meth:`apply_event` in turn, on the
        state the previous one left; a model whose events act together (the stops of
        one URDF mimic group) overrides it."""
        for i in indices:
            y = self.apply_event(i, t, y, u)
            derivatives.forget(self)  # a jump map may switch the constraints (same q, t)
        return y

    def energy(self, t, y, u=None):
        """Total mechanical energy where meaningful, else None."""
        return None

    # True: with the inputs at their defaults the model has no damping, no driving and
    # no time-dependent constraints, so energy() is constant; `cosim check` then checks
    # dE/dt = 0 along a short trajectory (a wrong force or potential shows up there).
    conservative = False

    # Stop time [s] of `cosim simulate` / the FMU's default experiment when the
    # user gives none (None: the CLI states its 1 s fall-back).
    default_t_end = None

    def _missing(self, signature, returns):
        """Raise the error of a compulsory method the model does not define."""
        raise ModelDefinitionError(
            f"model {self.name!r} ({type(self).__module__}.{type(self).__qualname__}) does not "
            f"define {signature}, which is compulsory: it must return {returns}")


class MultibodyModel(Model):
    """Constrained multibody system, seed 000 eq. 1.

    Subclasses define ``coordinates`` (names), ``constraint_names``,
    ``initial_state`` and the compulsory terms ``mass`` (M), ``forces`` (Q)
    and, when there are constraints, ``constraints`` (C).  Everything else is
    optional:

    * ``constraint_jacobian`` (C_q), ``constraint_dt`` (C_t) and ``gamma``
      (γ, eq. 5): when not defined they are computed from C by extrapolated
      central differences (:mod:`cosim.derivatives`; measured ~1e-13
      relative for C_q and C_t, ~1e-11 for γ);
    * ``force_jacobians`` (Q_q, Q_v), ``constraint_force_jacobian``
      ((C_q^T λ)_q), ``mass_jacobian_term`` ((M a)_q): None means forward
      differences in the Newton matrices (:mod:`cosim.integrators.common`).

    ``coordinate_scale`` (per coordinate or one number, default 1: m or rad)
    and ``time_scale`` (default 1 s) set the difference steps.
    ``cosim check MODEL`` / :func:`cosim.check_model` compare every term a
    model gives against differences.
    """

    kind = "multibody"
    coordinates: tuple[str, ...] = ()
    constraint_names: tuple[str, ...] = ()
    # Nonholonomic constraints G(q, v, t) = B(q, t) v + b(q, t) = 0 (seed 000 eq. 93)
    nonholonomic_names: tuple[str, ...] = ()
    coordinate_scale = 1.0  # m or rad: difference steps are relative to max(|q_j|, scale_j)
    time_scale = 1.0        # s: the time over which C(q, t) changes appreciably

    @property
    def n_q(self):
        return len(self.coordinates)

    @property
    def n_c(self):
        return len(self.constraint_names)

    @property
    def state_names(self):
        return tuple(self.coordinates) + tuple("d" + c for c in self.coordinates)

    def initial_state(self) -> tuple[np.ndarray, np.ndarray]:
        """Consistent (or nearly consistent) initial q0, v0."""
        self._missing("initial_state()", f"(q0, v0), two arrays of length n_q = {self.n_q} "
                      f"(coordinates {list(self.coordinates)}) in SI units")

    def initial_y(self):
        q, v = self.initial_state()
        return np.concatenate([q, v])

    def split(self, y):
        n = self.n_q
        return y[:n], y[n:2 * n]

    # -- equations of motion (seed 000 eq. 1-5) --------------------------------
    def mass(self, q, t):
        """Generalized mass matrix M(q, t), compulsory."""
        self._missing("mass(q, t)", f"the symmetric positive definite generalized mass matrix "
                      f"M(q, t), shape ({self.n_q}, {self.n_q}) (kg, kg·m² for angles)")

    def forces(self, q, v, t, u):
        """Applied generalized forces Q(q, v, t, u) (with quadratic-velocity terms), compulsory."""
        self._missing("forces(q, v, t, u)", f"the generalized forces Q(q, v, t, u) including "
                      f"quadratic-velocity terms, shape ({self.n_q},) (N, N·m for angles)")

    def constraints(self, q, t):
        """C(q, t), eq. 2; compulsory when ``constraint_names`` is not empty."""
        if self.n_c:
            self._missing("constraints(q, t)", f"the constraint residuals C(q, t) "
                          f"{list(self.constraint_names)}, shape ({self.n_c},), zero when satisfied")
        return np.zeros(0)

    def constraint_jacobian(self, q, t):
        """C_q(q, t), shape (n_c, n_q).  Optional: differences of C by default."""
        if not self.n_c:
            return np.zeros((0, self.n_q))
        return derivatives.constraint_jacobian(self, q, t)

    def constraint_dt(self, q, t):
        """C_t(q, t), eq. 3.  Optional: differences of C by default."""
        if not self.n_c:
            return np.zeros(0)
        return derivatives.constraint_dt(self, q, t)

    def gamma(self, q, v, t):
        """γ = -(C_q v)_q v - 2 C_qt v - C_tt, eq. 5 (so that C_q q'' = γ).
        Optional: by default −d²/dσ² C(q + σv, t + σ) by differences, or
        −d/dσ (C_q v + C_t) when the model gives C_q and C_t."""
        if not self.n_c:
            return np.zeros(0)
        analytic = provides(self, "constraint_jacobian") and provides(self, "constraint_dt")
        return derivatives.gamma(self, q, v, t, analytic_velocity_terms=analytic)

    # -- optional analytic Jacobians ----------------------------------------------
    def force_jacobians(self, q, v, t, u):
        """(Q_q, Q_v) or None for finite differences."""
        return None

    def constraint_force_jacobian(self, q, lam, t):
        """(C_q^T λ)_q or None for finite differences."""
        return None

    def mass_jacobian_term(self, q, a, t):
        """(M(q) a)_q or None (None: finite differences, zero if ``constant_mass``)."""
        return None

    constant_mass = False

    # -- nonholonomic (optional, seed 000 §7) -------------------------------------
    def nonholonomic_matrix(self, q, t):
        """B(q, t) of G = B v + b; shape (n_g, n_q)."""
        return np.zeros((0, self.n_q))

    def nonholonomic_offset(self, q, t):
        return np.zeros(len(self.nonholonomic_names))

    # -- outputs -------------------------------------------------------------------
    def outputs_qv(self, t, q, v, u):
        """Model outputs from q, v (default: none)."""
        return np.zeros(0)

    def output_values(self, t, y, u):
        q, v = self.split(y)
        return self.outputs_qv(t, q, v, u)

    def kinetic_energy(self, q, v, t=0.0):
        return 0.5 * float(v @ (self.mass(q, t) @ v))

    def potential_energy(self, q, t=0.0):
        return None

    def energy(self, t, y, u=None):
        q, v = self.split(y)
        pot = self.potential_energy(q, t)
        if pot is None:
            return None
        return self.kinetic_energy(q, v, t) + pot

    def residual_levels(self, t, y, qdd=None):
        """Constraint residual norms at position, velocity and acceleration level."""
        q, v = self.split(y)
        if self.n_c == 0:
            return 0.0, 0.0, 0.0
        Cq = self.constraint_jacobian(q, t)
        pos = float(np.max(np.abs(self.constraints(q, t))))
        vel = float(np.max(np.abs(Cq @ v + self.constraint_dt(q, t))))
        acc = 0.0 if qdd is None else float(np.max(np.abs(Cq @ qdd - self.gamma(q, v, t))))
        return pos, vel, acc


class FirstOrderModel(Model):
    """x' = f(t, x, u), outputs g(t, x, u)."""

    kind = "first_order"
    states: tuple[str, ...] = ()

    @property
    def state_names(self):
        return tuple(self.states)

    def initial_state(self):
        self._missing("initial_state()", f"x0, an array of length {len(self.states)} "
                      f"(states {list(self.states)})")

    def initial_y(self):
        return np.asarray(self.initial_state(), dtype=float).copy()

    def rhs(self, t, x, u):
        self._missing("rhs(t, x, u)", f"dx/dt, shape ({len(self.states)},)")

    def rhs_jacobian(self, t, x, u):
        """df/dx or None for finite differences."""
        return None

    def output_values(self, t, y, u):
        return np.zeros(0)


AUTOMATIC_TERMS = ("constraint_jacobian", "constraint_dt", "gamma")


def provides(model, term):
    """True when ``model``'s class defines ``term`` itself (not the base-class default)."""
    given = getattr(model, "gives_derivative", None)
    if given is not None and not given(term):
        return False  # a kernel model without that derivative kernel
    base = MultibodyModel if isinstance(model, MultibodyModel) else type(model)
    own = getattr(type(model), term, None)
    return own is not None and own is not getattr(base, term, None)


def check_inputs(model, u):
    """Validate an input vector for ``model`` (length, finiteness)."""
    arr = np.asarray(u, dtype=float).reshape(-1)
    if arr.size != model.n_inputs:
        raise InvalidInputError(
            f"model {model.name!r} takes {model.n_inputs} inputs {list(model.input_names)}, got {arr.size}")
    bad = ~np.isfinite(arr)
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise InvalidInputError(f"input {model.input_names[i]!r} must be finite, got {arr[i]!r}")
    return arr
