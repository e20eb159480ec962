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

from ..errors import InvalidInputError, UnknownParameterError
from ..validation import finite_float


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
    # Parameters that must be > 0 (masses, lengths, stiffnesses).
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
        for key in self.positive_parameters:
            if not values[key] > 0.0:
                raise InvalidInputError(f"parameter {key!r} must be > 0, got {values[key]!r}")
        self.params = values
        self.setup()

    # -- parameters --------------------------------------------------------
    def _check_parameter(self, key, value):
        return finite_float(f"parameter {key!r}", value, positive=key in self.positive_parameters)

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
            self.setup()
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

    def apply_event(self, index, t, y, u) -> np.ndarray:
        """Jump map of event ``index`` at its located time; returns new y."""
        return y

    def energy(self, t, y, u=None):
        """Total mechanical energy where meaningful, else None."""
        return None


class MultibodyModel(Model):
    """Constrained multibody system, seed 000 eq. 1.

    Subclasses define ``coordinates`` (names), ``constraint_names`` and the
    analytic terms mass, forces, constraints, constraint_jacobian,
    constraint_dt (C_t) and gamma (eq. 5).  Optional analytic Jacobians
    ``force_jacobians`` (Q_q, Q_v) and ``constraint_force_jacobian``
    ((C_q^T λ)_q) — when they return None the integrators use the shared
    finite-difference helper in :mod:`cosim.integrators.common`.
    """

    kind = "multibody"
    coordinates: tuple[str, ...] = ()
    constraint_names: tuple[str, ...] = ()
    # Nonholonomic constraints G(q, v, t) = B(q, t) v + b(q, t) = 0 (seed 000 eq. 93)
    nonholonomic_names: tuple[str, ...] = ()

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
        raise NotImplementedError

    def initial_y(self):
        q, v = self.initial_state()
        return np.concatenate([q, v])

    def split(self, y):
        n = self.n_q
        return y[:n], y[n:2 * n]

    # -- equations of motion (seed 000 eq. 1-5) --------------------------------
    def mass(self, q, t):
        raise NotImplementedError

    def forces(self, q, v, t, u):
        """Applied generalized forces Q(q, v, t, u)."""
        raise NotImplementedError

    def constraints(self, q, t):
        """C(q, t), eq. 2."""
        return np.zeros(0)

    def constraint_jacobian(self, q, t):
        """C_q(q, t)."""
        return np.zeros((0, self.n_q))

    def constraint_dt(self, q, t):
        """C_t(q, t), eq. 3."""
        return np.zeros(self.n_c)

    def gamma(self, q, v, t):
        """γ = -(C_q v)_q v - 2 C_qt v - C_tt, eq. 5 (so that C_q q'' = γ)."""
        raise NotImplementedError

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
        raise NotImplementedError

    def initial_y(self):
        return np.asarray(self.initial_state(), dtype=float).copy()

    def rhs(self, t, x, u):
        raise NotImplementedError

    def rhs_jacobian(self, t, x, u):
        """df/dx or None for finite differences."""
        return None

    def output_values(self, t, y, u):
        return np.zeros(0)


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
