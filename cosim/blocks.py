"""Discrete-time blocks that run inside a :class:`cosim.Simulation`.

Each block has a name, a sample time T and an offset; at each of its sample
instants t_k = offset + k·T it reads its inputs, computes its outputs y_k and
updates its state (``update``); between instants its outputs are held (zero-
order hold) and feed the plant through the simulation's connections.  Seed
000 §7 (controllers and discrete subsystems coupled to the multibody DAE) and
seed 001 §3.5 (sampled-data inputs, gcd of sample times).

Blocks provided: :class:`PID`, :class:`DiscreteStateSpace` (LTI difference
form x_{k+1} = A x_k + B u_k, y_k = C x_k + D u_k), :class:`StateFeedback`
(u = −K x + N r), :class:`SampleHold`, and :class:`UserBlock` (a Python callable
or ``"module:function"``).  A block's state is plain data (floats, arrays) so
it serializes without pickle.  A block may raise :class:`StopSimulation` from
``update`` to stop the simulation at that instant (a terminal time event).

**Tunable parameters** (:meth:`Block.parameters`): the numbers a user tunes --
a PID's gains, filter constant and finite output limits, a state feedback's
``K[i,j]`` and ``reference_gain[i,j]``, a discrete state space's matrix
entries, a user block's numeric ``params`` -- change between sample instants
with :meth:`Block.set_parameters` (all or nothing, validated as the
constructor validates them) and take effect at the block's next sample
instant.  Each declares its unit as a template over the block's signal names
(``{u}/{measurement}``), resolved from the optional ``units`` of the block
(``{"measurement": "rad", "u": "N.m"}``) or from the plant signals it is
connected to (:meth:`cosim.Simulation.block_parameters`).
"""
from __future__ import annotations

import copy
import math
import numbers
import re
from dataclasses import dataclass

import numpy as np

from ._registry import load_symbol
from .errors import InvalidInputError, ScenarioError, UnknownParameterError
from .models.ranges import DEFAULT, NONNEGATIVE
from .multirate import exact_time
from .validation import finite_float


class StopSimulation(Exception):
    """Raised by a block's update to request a stop at the current instant."""

    def __init__(self, reason="stop requested"):
        super().__init__(reason)
        self.reason = reason


def _matrix(name, value, rows=None, cols=None):
    arr = np.atleast_2d(np.array(value, dtype=float))
    if arr.ndim != 2:
        raise InvalidInputError(f"{name} must be a matrix, got shape {arr.shape}")
    if (rows is not None and arr.shape[0] != rows) or (cols is not None and arr.shape[1] != cols):
        raise InvalidInputError(f"{name} must have shape ({rows}, {cols}), got {arr.shape}")
    if not np.all(np.isfinite(arr)):
        raise InvalidInputError(f"{name} contains NaN/inf")
    return arr


_ELEMENT = re.compile(r"^([A-Za-z_]\w*)\[(\d+),(\d+)\]$")  # "K[1,2]": 1-based matrix entry


def _parameter(block, key, value, bound=DEFAULT):
    """A tunable number ``key`` of the block named ``block``: finite and in ``bound``, by
    default the magnitude bound every model parameter has (cosim.models.ranges: at most
    1e12 in size); an InvalidInputError names it ``block.key``."""
    x = finite_float(f"parameter {block}.{key}", value)
    return bound.check(f"{block}.{key}", x)


def _bounded_entries(block, key, matrix):
    """``matrix`` if every entry of the tunable matrix ``key`` (entries ``key[i,j]``,
    1-based) lies in the magnitude bound of a parameter (:func:`_parameter`)."""
    big = np.argwhere(~((matrix >= DEFAULT.low) & (matrix <= DEFAULT.high)))
    if big.size:
        i, j = (int(k) for k in big[0])
        DEFAULT.check(f"{block}.{key}[{i + 1},{j + 1}]", float(matrix[i, j]))
    return matrix
MAX_UNIT_LENGTH = 64


@dataclass(frozen=True)
class BlockParameter:
    """A tunable number of a block: ``name`` within the block (``kp``, ``K[1,2]``), its unit as
    a template over the block's signal names (``{u}/{measurement}``, ``s``; "" = none) and
    what it is."""

    name: str
    unit: str = ""
    description: str = ""


def unit_expression(template, units):
    """``template`` (``{u}/({measurement}.s)``) with each ``{signal}`` replaced by its unit in
    ``units``; None when a signal has no known unit.  A substituted unit that contains '/' is
    parenthesised unless it is the whole expression (``N.m/(rad/s)``)."""
    missing = []

    def put(match):
        unit = units.get(match.group(1))
        if not unit:
            missing.append(match.group(1))
            return ""
        return f"({unit})" if "/" in unit and template != match.group(0) else unit
    text = re.sub(r"\{([^{}]+)\}", put, template)
    return None if missing or not text else text


def _matrix_parameters(block, key, matrix, what, unit=lambda i, j: ""):
    rows, cols = matrix.shape
    return tuple(BlockParameter(f"{key}[{i + 1},{j + 1}]", unit(i, j),
                                f"{what}, row {i + 1} column {j + 1}, of block {block.name!r}")
                 for i in range(rows) for j in range(cols))


def _names(what, names, default_prefix, n):
    if names is None:
        return tuple(f"{default_prefix}{i}" for i in range(n)) if n != 1 else (default_prefix,)
    names = tuple(str(x) for x in names)
    if len(names) != n:
        raise InvalidInputError(f"{what} needs {n} names, got {len(names)}: {list(names)}")
    return names


class Block:
    """Base class: name, sample time, offset, held outputs, plain-data state."""

    type_name = "block"
    input_names: tuple[str, ...] = ()
    output_names: tuple[str, ...] = ()

    def __init__(self, name, sample_time, offset=0.0, initial_outputs=None, units=None):
        if not isinstance(name, str) or not name or "." in name or name.strip() != name:
            raise InvalidInputError(f"block name must be a non-empty string without '.', got {name!r}")
        self.name = name
        self.units = self._check_units(units)
        self.sample_time = exact_time(sample_time, f"sample time of block {name!r}")
        self.offset = exact_time(offset, f"offset of block {name!r}", positive=False, allow_zero=True)
        n_out = len(self.output_names)
        self.initial_outputs = (np.zeros(n_out) if initial_outputs is None else
                                np.array(_vector(f"initial outputs of block {name!r}", initial_outputs, n_out)))
        self.outputs = self.initial_outputs.copy()
        self.reset_state()

    # -- to override -------------------------------------------------------------
    def reset_state(self):
        """Set the internal state to its initial value."""

    def _update(self, t, u):
        """Outputs y_k from inputs u_k at instant t; update the internal state."""
        raise NotImplementedError

    def _get_state(self) -> dict:
        """The internal state as plain data, independent of later updates (a copy)."""
        return {}

    def _set_state(self, d: dict):
        """Restore from ``_get_state`` data (must not keep references into ``d``)."""

    def describe(self) -> dict:
        return {"type": self.type_name, "name": self.name, "sample_time": str(self.sample_time),
                "offset": str(self.offset), "inputs": list(self.input_names),
                "outputs": list(self.output_names)}

    def _check_units(self, units):
        """``units``: {signal name: unit text} for some of the block's inputs and outputs."""
        if units is None:
            return {}
        if not isinstance(units, dict):
            raise InvalidInputError(f"units of block {self.name!r} must be a mapping signal -> unit, "
                                    f"got {type(units).__name__}")
        signals = set(self.input_names) | set(self.output_names)
        out = {}
        for key, unit in units.items():
            if key not in signals:
                raise InvalidInputError(f"units of block {self.name!r}: {key!r} is not one of its "
                                        f"signals {sorted(signals)}")
            if not isinstance(unit, str) or not unit.strip() or len(unit) > MAX_UNIT_LENGTH \
                    or not unit.isprintable() or any(c in unit for c in "{}"):
                raise InvalidInputError(f"unit of {self.name}.{key} must be a short printable text, "
                                        f"got {unit!r:.80}")
            out[str(key)] = unit.strip()
        return out

    # -- tunable parameters (module docstring) -----------------------------------------------
    def parameters(self) -> tuple:
        """The block's tunable parameters (:class:`BlockParameter`), fixed for its lifetime."""
        return ()

    def parameter_values(self) -> dict:
        """{parameter name: current value}."""
        return {p.name: self._get_parameter(p.name) for p in self.parameters()}

    def set_parameters(self, values):
        """Change some tunable parameters, all or nothing: each value is checked as the
        constructor checks it (InvalidInputError / UnknownParameterError naming it, nothing
        changed); they take effect at the block's next sample instant."""
        known = self.parameter_values()
        for key in values:
            if key not in known:
                raise UnknownParameterError(
                    f"block {self.name!r} has no tunable parameter {key!r} "
                    f"(parameters: {', '.join(known) or 'none'})")
        new = dict(known)
        for key, value in values.items():
            new[key] = self._check_value(key, value)
        self._check_parameters(new)
        self._apply_parameters({k: v for k, v in new.items() if k in values})

    def _check_value(self, key, value):
        return _parameter(self.name, key, value)

    def _get_parameter(self, key):
        raise UnknownParameterError(key)

    def _check_parameters(self, values):
        """Raise InvalidInputError when the complete set ``values`` is not acceptable."""

    def _apply_parameters(self, values):
        raise NotImplementedError

    @classmethod
    def spec_with_parameters(cls, spec, values):
        """A copy of the block spec (the dict :func:`make_block` takes) whose block has the
        parameter ``values`` ({name: value}); a matrix entry ``K[i,j]`` edits that entry."""
        spec = copy.deepcopy(dict(spec))
        for key, value in values.items():
            element = _ELEMENT.match(key)
            if element:
                name, i, j = element.group(1), int(element.group(2)) - 1, int(element.group(3)) - 1
                matrix = np.atleast_2d(np.array(spec.get(name), dtype=float))
                if not (0 <= i < matrix.shape[0] and 0 <= j < matrix.shape[1]):
                    raise UnknownParameterError(f"block {spec.get('name')!r} has no parameter {key!r}")
                matrix[i, j] = float(value)
                spec[name] = matrix.tolist()
            else:
                spec[key] = float(value)
        return spec

    # -- used by the simulation -----------------------------------------------------
    def reset(self):
        self.outputs = self.initial_outputs.copy()
        self.reset_state()

    def update(self, t, u):
        y = np.asarray(self._update(t, u), dtype=float).reshape(-1)
        if y.size != len(self.output_names):
            raise InvalidInputError(f"block {self.name!r} produced {y.size} outputs, "
                                    f"declares {len(self.output_names)} {list(self.output_names)}")
        if not np.isfinite(y).all():
            raise InvalidInputError(f"block {self.name!r} produced a non-finite output {y.tolist()} at t={t!r}")
        self.outputs = y
        return y

    def state(self) -> dict:
        return {"outputs": self.outputs.copy(), "internal": self._get_state()}

    def restore(self, d):
        self.outputs = np.array(d["outputs"], dtype=float)
        self._set_state(d["internal"])


def _vector(name, value, n):
    arr = np.array(value, dtype=float).reshape(-1)
    if arr.size != n:
        raise InvalidInputError(f"{name} must have length {n}, got {arr.size}")
    if not np.all(np.isfinite(arr)):
        raise InvalidInputError(f"{name} contains NaN/inf")
    return arr


class PID(Block):
    """Discrete PID controller, inputs (reference, measurement), output u.

    e_k = r_k − y_k;  P = kp·e_k;  I_k = I_{k−1} + ki·T·e_k (backward Euler,
    frozen while the output saturates in the same direction — anti-windup);
    D_k = (tf·D_{k−1} + kd·(e_k − e_{k−1})) / (tf + T) (backward-Euler filtered
    derivative, tf = 0: plain difference; no derivative kick at the first
    sample); u_k = clip(P + I_k + D_k, u_min, u_max).
    """

    type_name = "pid"
    input_names = ("reference", "measurement")
    output_names = ("u",)

    def __init__(self, name, sample_time, kp=0.0, ki=0.0, kd=0.0, tf=0.0, offset=0.0,
                 u_min=-math.inf, u_max=math.inf, initial_outputs=None, units=None):
        self.kp = _parameter(name, "kp", kp)
        self.ki = _parameter(name, "ki", ki)
        self.kd = _parameter(name, "kd", kd)
        self.tf = _parameter(name, "tf", tf, NONNEGATIVE)
        self.u_min, self.u_max = float(u_min), float(u_max)
        if math.isnan(self.u_min) or math.isnan(self.u_max) or not self.u_min < self.u_max:
            raise InvalidInputError(f"PID limits need u_min < u_max, got {u_min!r}, {u_max!r}")
        for key in ("u_min", "u_max"):   # a finite limit is a tunable parameter
            if math.isfinite(getattr(self, key)):
                _parameter(name, key, getattr(self, key))
        super().__init__(name, sample_time, offset, initial_outputs, units)
        self._T = float(self.sample_time)
        what = f"of PID block {name!r}"
        params = [BlockParameter("kp", "{u}/{measurement}", f"proportional gain {what}"),
                  BlockParameter("ki", "{u}/({measurement}.s)", f"integral gain {what}"),
                  BlockParameter("kd", "{u}.s/{measurement}", f"derivative gain {what}"),
                  BlockParameter("tf", "s", f"time constant of the derivative filter {what} (>= 0)")]
        # output limits that exist (a finite one): tunable, u_min < u_max
        params += [BlockParameter(k, "{u}", f"{'lower' if k == 'u_min' else 'upper'} output limit {what}")
                   for k in ("u_min", "u_max") if math.isfinite(getattr(self, k))]
        self._parameters = tuple(params)

    def parameters(self):
        return self._parameters

    def _get_parameter(self, key):
        return float(getattr(self, key))

    def _check_value(self, key, value):
        return _parameter(self.name, key, value, NONNEGATIVE if key == "tf" else DEFAULT)

    def _check_parameters(self, values):
        lo, hi = values.get("u_min", self.u_min), values.get("u_max", self.u_max)
        if not lo < hi:
            raise InvalidInputError(f"PID block {self.name!r} needs u_min < u_max, got {lo!r}, {hi!r}")

    def _apply_parameters(self, values):
        for key, value in values.items():
            setattr(self, key, float(value))

    def reset_state(self):
        self.integral = 0.0
        self.derivative = 0.0
        self.e_prev = None

    def _update(self, t, u):
        e = float(u[0] - u[1])
        T = self._T
        d_e = 0.0 if self.e_prev is None else e - self.e_prev
        if self.kd != 0.0:
            self.derivative = (self.tf * self.derivative + self.kd * d_e) / (self.tf + T)
        integral = self.integral + self.ki * T * e
        raw = self.kp * e + integral + self.derivative
        out = min(max(raw, self.u_min), self.u_max)
        if out != raw and (raw - out) * e > 0.0:  # saturated and integrating further: freeze I
            integral = self.integral
            out = min(max(self.kp * e + integral + self.derivative, self.u_min), self.u_max)
        self.integral = integral
        self.e_prev = e
        return (out,)

    def _get_state(self):
        return {"integral": self.integral, "derivative": self.derivative, "e_prev": self.e_prev}

    def _set_state(self, d):
        self.integral, self.derivative, self.e_prev = d["integral"], d["derivative"], d["e_prev"]


class DiscreteStateSpace(Block):
    """LTI difference equations x_{k+1} = A x_k + B u_k, y_k = C x_k + D u_k."""

    type_name = "discrete_state_space"

    def __init__(self, name, sample_time, A=None, B=None, C=None, D=None, x0=None, offset=0.0,
                 inputs=None, outputs=None, initial_outputs=None, units=None):
        D_ = None if D is None else _matrix(f"D of block {name!r}", D)
        n = 0 if A is None else _matrix(f"A of block {name!r}", A).shape[0]
        m = (D_.shape[1] if D_ is not None else _matrix(f"B of block {name!r}", B).shape[1])
        p = (D_.shape[0] if D_ is not None else _matrix(f"C of block {name!r}", C).shape[0])
        self.A = _matrix(f"A of block {name!r}", A, n, n) if n else np.zeros((0, 0))
        self.B = _matrix(f"B of block {name!r}", B, n, m) if n else np.zeros((0, m))
        self.C = _matrix(f"C of block {name!r}", C, p, n) if n else np.zeros((p, 0))
        self.D = D_ if D_ is not None else np.zeros((p, m))
        if self.D.shape != (p, m):
            raise InvalidInputError(f"D of block {name!r} must have shape ({p}, {m}), got {self.D.shape}")
        if type(self) is DiscreteStateSpace:   # (a state feedback checks its K and N)
            for key in ("A", "B", "C", "D"):
                _bounded_entries(name, key, getattr(self, key))
        self.x0 = np.zeros(n) if x0 is None else _vector(f"x0 of block {name!r}", x0, n)
        self.input_names = _names(f"inputs of block {name!r}", inputs, "u", m)
        self.output_names = _names(f"outputs of block {name!r}", outputs, "y", p)
        super().__init__(name, sample_time, offset, initial_outputs, units)

    def parameters(self):
        if not hasattr(self, "_parameters"):
            ins, outs = self.input_names, self.output_names
            self._parameters = (
                _matrix_parameters(self, "A", self.A, "state matrix entry")
                + _matrix_parameters(self, "B", self.B, "input matrix entry")
                + _matrix_parameters(self, "C", self.C, "output matrix entry")
                + _matrix_parameters(self, "D", self.D, "feedthrough matrix entry",
                                     lambda i, j: f"{{{outs[i]}}}/{{{ins[j]}}}"))
        return self._parameters

    def _get_parameter(self, key):
        name, i, j = _element(key)
        return float(getattr(self, name)[i, j])

    def _apply_parameters(self, values):
        for key, value in values.items():
            name, i, j = _element(key)
            getattr(self, name)[i, j] = float(value)

    def reset_state(self):
        self.x = self.x0.copy()

    def _update(self, t, u):
        y = self.C @ self.x + self.D @ u
        if self.x.size:
            self.x = self.A @ self.x + self.B @ u
        return y

    def _get_state(self):
        return {"x": self.x.copy()}

    def _set_state(self, d):
        self.x = np.array(d["x"], dtype=float)


class StateFeedback(DiscreteStateSpace):
    """Static discrete state feedback u_k = −K x_k + N r_k (inputs x…, then r…)."""

    type_name = "state_feedback"

    def __init__(self, name, sample_time, K, reference_gain=None, offset=0.0, inputs=None,
                 outputs=None, initial_outputs=None, units=None):
        K = _matrix(f"K of block {name!r}", K)
        p, n = K.shape
        N = np.zeros((p, 0)) if reference_gain is None else _matrix(f"reference_gain of block {name!r}",
                                                                   reference_gain, p)
        _bounded_entries(name, "K", K)
        _bounded_entries(name, "reference_gain", N)
        if inputs is None:
            inputs = [f"x{i}" for i in range(n)] + ([f"r{i}" for i in range(N.shape[1])]
                                                    if N.shape[1] != 1 else ["reference"])
        super().__init__(name, sample_time, D=np.hstack([-K, N]), offset=offset, inputs=inputs,
                         outputs=outputs, initial_outputs=initial_outputs, units=units)
        self.K, self.N = K.copy(), N.copy()
        ins, outs = self.input_names, self.output_names
        self._parameters = (
            _matrix_parameters(self, "K", self.K, "state feedback gain (u = -K x + N r)",
                               lambda i, j: f"{{{outs[i]}}}/{{{ins[j]}}}")
            + _matrix_parameters(self, "reference_gain", self.N, "reference gain N (u = -K x + N r)",
                                 lambda i, j: f"{{{outs[i]}}}/{{{ins[n + j]}}}"))

    def _get_parameter(self, key):
        name, i, j = _element(key)
        return float((self.K if name == "K" else self.N)[i, j])

    def _apply_parameters(self, values):
        for key, value in values.items():
            name, i, j = _element(key)
            (self.K if name == "K" else self.N)[i, j] = float(value)
        self.D = np.hstack([-self.K, self.N])


class SampleHold(Block):
    """Sample-and-hold: y_k = u(t_k), held until the next instant."""

    type_name = "sample_hold"

    def __init__(self, name, sample_time, n=1, offset=0.0, inputs=None, outputs=None,
                 initial_outputs=None, units=None):
        n = int(n)
        if n < 1:
            raise InvalidInputError(f"sample-hold block {name!r} needs n >= 1, got {n}")
        self.input_names = _names(f"inputs of block {name!r}", inputs, "u", n)
        self.output_names = _names(f"outputs of block {name!r}", outputs, "y", n)
        super().__init__(name, sample_time, offset, initial_outputs, units)

    def _update(self, t, u):
        return np.array(u, dtype=float)


class UserBlock(Block):
    """A block defined by ``function(t, inputs, state, params) -> outputs``.

    ``function`` is a callable or a ``"package.module:function"`` spec;
    ``inputs``/``state``: dicts (``state`` is mutable and must hold plain data
    — numbers, lists, numpy arrays — so it serializes); ``outputs``: a mapping
    name → value or a sequence in ``output_names`` order.
    """

    type_name = "user"

    def __init__(self, name, sample_time, function, inputs=("u",), outputs=("y",), params=None,
                 state=None, offset=0.0, initial_outputs=None, units=None):
        if isinstance(function, str):
            self.function_spec = function
            try:
                function = load_symbol(function)
            except (ImportError, AttributeError, ValueError) as exc:
                raise InvalidInputError(f"block {name!r}: cannot load function {self.function_spec!r}: {exc}") from None
        else:
            self.function_spec = f"{getattr(function, '__module__', '?')}:{getattr(function, '__qualname__', '?')}"
        if not callable(function):
            raise InvalidInputError(f"block {name!r}: {function!r} is not callable")
        self.function = function
        self.params = dict(params or {})
        self.initial_state = copy.deepcopy(dict(state or {}))
        self.input_names = tuple(str(x) for x in inputs)
        self.output_names = tuple(str(x) for x in outputs)
        super().__init__(name, sample_time, offset, initial_outputs, units)
        # its numeric params (a number, not a bool or a list; finite): tunable, an integer one
        # stays an integer
        self._integer_params = {k for k, v in self.params.items() if isinstance(v, numbers.Integral)}
        self._parameters = tuple(
            BlockParameter(str(k), "", f"parameter {k!r} of user block {name!r} "
                                       f"({self.function_spec})")
            for k, v in self.params.items()
            if isinstance(k, str) and _ELEMENT_NAME.match(k) and isinstance(v, numbers.Real)
            and not isinstance(v, (bool, np.bool_)) and math.isfinite(float(v)))
        for p in self._parameters:   # in the magnitude bound of every tunable number
            _parameter(name, p.name, self.params[p.name])

    def parameters(self):
        return self._parameters

    def _get_parameter(self, key):
        return float(self.params[key])

    def _check_value(self, key, value):
        x = _parameter(self.name, key, value)
        if key in self._integer_params and not x.is_integer():
            raise InvalidInputError(f"parameter {self.name}.{key} must be an integer, got {x!r}")
        return x

    def _apply_parameters(self, values):
        for key, value in values.items():
            self.params[key] = int(value) if key in self._integer_params else float(value)

    @classmethod
    def spec_with_parameters(cls, spec, values):
        spec = copy.deepcopy(dict(spec))
        params = dict(spec.get("params") or {})
        for key, value in values.items():
            old = params.get(key)
            params[key] = int(value) if isinstance(old, numbers.Integral) and float(value).is_integer() \
                else float(value)
        spec["params"] = params
        return spec

    def reset_state(self):
        self.user_state = copy.deepcopy(self.initial_state)

    def describe(self):
        d = super().describe()
        d["function"] = self.function_spec
        return d

    def _update(self, t, u):
        result = self.function(t, dict(zip(self.input_names, u.tolist())), self.user_state, self.params)
        if isinstance(result, dict):
            unknown = set(result) - set(self.output_names)
            if unknown:
                raise InvalidInputError(f"block {self.name!r} returned unknown outputs {sorted(unknown)}")
            return [float(result.get(k, self.outputs[i])) for i, k in enumerate(self.output_names)]
        return np.asarray(result, dtype=float).reshape(-1)

    def _get_state(self):
        return copy.deepcopy(self.user_state)

    def _set_state(self, d):
        self.user_state = copy.deepcopy(d)


BLOCK_TYPES = {"pid": PID, "discrete_state_space": DiscreteStateSpace, "state_feedback": StateFeedback,
               "sample_hold": SampleHold, "user": UserBlock}


_ELEMENT_NAME = re.compile(r"^[A-Za-z_]\w*$")


def _element(key):
    """(matrix attribute, row, column) of a matrix-entry parameter ``K[i,j]`` (1-based)."""
    m = _ELEMENT.match(key)
    return m.group(1), int(m.group(2)) - 1, int(m.group(3)) - 1


def spec_with_parameters(spec, values):
    """The block spec ``spec`` (a dict with ``type``) with parameter ``values`` applied."""
    cls = BLOCK_TYPES.get(spec.get("type")) if isinstance(spec, dict) else None
    if cls is None:
        raise ScenarioError(f"unknown block type in {spec!r:.80}")
    return cls.spec_with_parameters(spec, values)


def make_block(spec):
    """A block from a dict ``{"type": ..., "name": ..., "sample_time": ..., ...}``."""
    if isinstance(spec, Block):
        return spec
    if not isinstance(spec, dict):
        raise ScenarioError(f"a block must be a mapping with a 'type', got {spec!r}")
    spec = dict(spec)
    kind = spec.pop("type", None)
    if kind not in BLOCK_TYPES:
        raise ScenarioError(f"unknown block type {kind!r} (types: {', '.join(BLOCK_TYPES)})")
    try:
        return BLOCK_TYPES[kind](**spec)
    except TypeError as exc:
        raise ScenarioError(f"block {spec.get('name')!r} of type {kind!r}: {exc}") from None


# -- functions for user blocks (used by the shipped scenarios) -------------------------
def supervisor(t, inputs, state, params):
    """Reference scheduler with a watchdog (the pendulum scenario's supervisor).

    Output ``reference`` = params["references"][i] from params["times"][i] on
    (piecewise constant, 0 before the first time); ``alarm`` = 1 while
    |angle| > params["angle_limit"] (counted in state["alarms"]), else 0.
    """
    ref = 0.0
    for t_i, r_i in zip(params.get("times", ()), params.get("references", ())):
        if t >= t_i:
            ref = float(r_i)
    alarm = abs(inputs.get("angle", 0.0)) > float(params.get("angle_limit", math.inf))
    if alarm:
        state["alarms"] = state.get("alarms", 0) + 1
    return {"reference": ref, "alarm": 1.0 if alarm else 0.0}


def saturate(t, inputs, state, params):
    """y = clip(u, −limit, limit) (inputs ``u``, ``limit``)."""
    lim = abs(inputs["limit"])
    return {"y": min(max(inputs["u"], -lim), lim)}
