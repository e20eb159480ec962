"""Input signals of a run (``inputs:`` of a spec or scenario), held over each
communication step (zero-order hold, the value at the step's start):
``constant`` (value), ``step`` (time, before, after), ``ramp`` (start_time,
slope, initial), ``sine`` (amplitude, frequency [Hz] or omega [rad/s], phase,
offset, exact), ``table`` (times, values; ZOH).  ``breakpoints`` are the
instants where a signal jumps: the runner lands on them exactly (time events).
"""
from __future__ import annotations

import math
from bisect import bisect_right

from .errors import InvalidInputError, ScenarioError
from .validation import finite_float

SIGNAL_TYPES = ("constant", "step", "ramp", "sine", "table")


class InputSignal:
    """A scalar input signal u(t) with its breakpoints (instants where it jumps)."""

    def __init__(self, name, spec):
        self.name = name
        if not isinstance(spec, dict):
            spec = {"type": "constant", "value": spec}
        spec = dict(spec)
        self.kind = spec.pop("type", "constant")
        if self.kind not in SIGNAL_TYPES:
            raise ScenarioError(f"input {name!r}: unknown signal type {self.kind!r} "
                                f"(types: {', '.join(SIGNAL_TYPES)})")

        def num(key, default=None, **kw):
            if key not in spec:
                if default is None:
                    raise ScenarioError(f"input {name!r} ({self.kind}) needs {key!r}")
                return default
            try:
                return finite_float(f"input {name!r} {key}", spec.pop(key), **kw)
            except InvalidInputError as exc:
                raise ScenarioError(str(exc)) from None

        self.breakpoints = []
        if self.kind == "constant":
            self.value = num("value", 0.0)
        elif self.kind == "step":
            self.time = num("time")
            self.before = num("before", 0.0)
            self.after = num("after") if "after" in spec else num("value")
            self.breakpoints = [self.time]
        elif self.kind == "ramp":
            self.start = num("start_time", 0.0)
            self.slope = num("slope")
            self.initial = num("initial", 0.0)
            self.breakpoints = [self.start]
        elif self.kind == "sine":
            self.exact = spec.pop("exact", False)
            if not isinstance(self.exact, bool):
                raise ScenarioError(f"input {name!r}: 'exact' must be true or false, got {self.exact!r}")
            self.amplitude = num("amplitude", 1.0)
            if "omega" in spec and "frequency" in spec:
                raise ScenarioError(f"input {name!r}: give frequency [Hz] or omega [rad/s], not both")
            self.omega = num("omega") if "omega" in spec else 2.0 * math.pi * num("frequency")
            self.phase = num("phase", 0.0)
            self.offset = num("offset", 0.0)
        elif self.kind == "table":
            times, values = spec.pop("times", None), spec.pop("values", None)
            if not isinstance(times, list) or not isinstance(values, list) or len(times) != len(values) \
                    or not times:
                raise ScenarioError(f"input {name!r}: a table needs equally long non-empty lists "
                                    f"'times' and 'values'")
            try:
                self.times = [finite_float(f"input {name!r} times[{i}]", t) for i, t in enumerate(times)]
                self.values = [finite_float(f"input {name!r} values[{i}]", v) for i, v in enumerate(values)]
            except InvalidInputError as exc:
                raise ScenarioError(str(exc)) from None
            if any(b <= a for a, b in zip(self.times, self.times[1:])):
                raise ScenarioError(f"input {name!r}: table times must increase, got {self.times}")
            self.breakpoints = list(self.times)
        if spec:
            raise ScenarioError(f"input {name!r} ({self.kind}): unknown keys {sorted(spec)}")

    def generator(self, t0):
        """(F, G, v0) of this sine as an LTI signal generator started at t0."""
        from .integrators.state_transition import sine_generator
        return sine_generator(self.amplitude, self.omega, self.omega * t0 + self.phase, self.offset)

    def value_at(self, t):
        k = self.kind
        if k == "constant":
            return self.value
        if k == "step":
            return self.after if t >= self.time else self.before
        if k == "ramp":
            return self.initial + self.slope * max(0.0, t - self.start)
        if k == "sine":
            return self.offset + self.amplitude * math.sin(self.omega * t + self.phase)
        i = bisect_right(self.times, t) - 1  # table, zero-order hold
        return self.values[max(i, 0)]


class TableSignal:
    """Samples of one input given in Python (``cosim.simulate(inputs=...)``): times
    increasing, values finite, each value held from its time on (zero-order hold; before
    the first time, the first value).  The times are breakpoints: the run lands on them."""

    exact = False

    def __init__(self, name, times, values):
        import numpy as np
        self.name = name
        t = np.asarray(times, dtype=float).reshape(-1)
        v = np.asarray(values, dtype=float).reshape(-1)
        if t.size == 0 or t.size != v.size:
            raise InvalidInputError(f"input {name!r}: a table needs as many values as times "
                                    f"(at least one), got {t.size} times and {v.size} values")
        for what, x in (("times", t), ("values", v)):
            bad = np.flatnonzero(~np.isfinite(x))
            if bad.size:
                raise InvalidInputError(f"input {name!r}: {what}[{bad[0]}] is {float(x[bad[0]])!r}, "
                                        f"not a finite number")
        if np.any(np.diff(t) <= 0.0):
            k = int(np.flatnonzero(np.diff(t) <= 0.0)[0])
            raise InvalidInputError(f"input {name!r}: times must increase, got times[{k}] = "
                                    f"{t[k]!r} then {t[k + 1]!r}")
        self.times, self.values = t, v
        self.breakpoints = t.tolist()

    def value_at(self, t):
        import numpy as np
        i = int(np.searchsorted(self.times, t, side="right")) - 1
        return float(self.values[max(i, 0)])


class FunctionSignal:
    """One input from a Python function of time (``inputs={"torque": f}``), sampled at
    the start of every communication step and held over it."""

    exact = False
    breakpoints = ()

    def __init__(self, name, fn):
        self.name, self.fn = name, fn

    def value_at(self, t):
        return _finite(self.name, self.fn(t), t)


class FunctionInputs:
    """All inputs from one Python function ``f(t)`` returning a mapping ``{name: value}``
    (a subset of the inputs; the others keep their values) or a sequence in input
    order, sampled at the start of every communication step and held over it."""

    def __init__(self, fn, names):
        self.fn, self.names = fn, tuple(names)
        self._t, self._row = None, None

    def row(self, t):
        if t != self._t:
            out = self.fn(t)
            if isinstance(out, dict):
                unknown = sorted(set(map(str, out)) - set(self.names))
                if unknown:
                    raise InvalidInputError(f"the inputs function returned unknown input(s) "
                                            f"{unknown} at t={t!r} (inputs: {', '.join(self.names)})")
                row = dict(out)
            else:
                try:
                    values = list(out)
                except TypeError:
                    values = [out]
                if len(values) != len(self.names):
                    raise InvalidInputError(f"the inputs function returned {len(values)} values at "
                                            f"t={t!r}; the inputs are {', '.join(self.names)}")
                row = dict(zip(self.names, values))
            self._t, self._row = t, {n: _finite(n, v, t) for n, v in row.items()}
        return self._row

    def signals(self, current):
        """One signal per input; an input the function leaves out keeps ``current[name]``."""
        return [_RowSignal(self, n, current[i]) for i, n in enumerate(self.names)]


class _RowSignal:
    exact = False
    breakpoints = ()

    def __init__(self, source, name, held):
        self.source, self.name, self.held = source, name, held

    def value_at(self, t):
        self.held = self.source.row(t).get(self.name, self.held)
        return self.held


def _finite(name, value, t):
    try:
        return finite_float(f"input {name!r} at t={t!r}", value)
    except (TypeError, ValueError) as exc:
        raise InvalidInputError(str(exc)) from None


def python_signals(inputs, names, current=None):
    """Input signals from what ``cosim.simulate(inputs=...)`` accepts:

    * a function ``f(t)`` -> ``{name: value}`` or a sequence in input order;
    * a mapping ``{name: value | f(t) | (times, values) | signal spec}`` (a signal spec:
      the ``inputs:`` vocabulary of a spec file, e.g. ``{"type": "step", ...}``);
    * a table: a pandas DataFrame (the index, or a column ``time``, is the time; the
      other columns are inputs by name), a numpy structured array with a ``time`` field
      (as fmpy's), or a 2-D array whose first column is the time and whose other
      columns are the inputs in order.

    Every value is held from its time on (zero-order hold)."""
    import numpy as np
    names = tuple(names)
    current = list(current) if current is not None else [0.0] * len(names)
    if inputs is None:
        return []

    def check(keys):
        unknown = [k for k in keys if k not in names]
        if unknown:
            raise InvalidInputError(f"input {unknown[0]!r} is not an input of the model "
                                    f"(inputs: {', '.join(names) or 'none'})")

    if callable(inputs) and not hasattr(inputs, "columns"):
        return FunctionInputs(inputs, names).signals(current)
    if hasattr(inputs, "columns") and hasattr(inputs, "index"):   # a pandas DataFrame
        cols = [str(c) for c in inputs.columns]
        if "time" in cols:
            times = np.asarray(inputs["time"], dtype=float)
            cols = [c for c in cols if c != "time"]
        else:
            times = np.asarray(inputs.index, dtype=float)
        check(cols)
        return [TableSignal(c, times, np.asarray(inputs[c], dtype=float)) for c in cols]
    if isinstance(inputs, np.ndarray) and inputs.dtype.names:       # structured, fmpy style
        if "time" not in inputs.dtype.names:
            raise InvalidInputError(f"a structured input array needs a 'time' field, got "
                                    f"{list(inputs.dtype.names)}")
        cols = [c for c in inputs.dtype.names if c != "time"]
        check(cols)
        return [TableSignal(c, inputs["time"], inputs[c]) for c in cols]
    if isinstance(inputs, (np.ndarray, list, tuple)):
        table = np.asarray(inputs, dtype=float)
        if table.ndim != 2 or table.shape[1] != len(names) + 1:
            raise InvalidInputError(f"an input table needs columns time, {', '.join(names)} "
                                    f"({len(names) + 1} columns), got shape {table.shape}")
        return [TableSignal(n, table[:, 0], table[:, i + 1]) for i, n in enumerate(names)]
    if isinstance(inputs, dict):
        check([str(k) for k in inputs])
        out = []
        for name, value in inputs.items():
            name = str(name)
            if callable(value):
                out.append(FunctionSignal(name, value))
            elif isinstance(value, dict):
                out.append(InputSignal(name, dict(value)))
            elif isinstance(value, (tuple, list)) and len(value) == 2 and np.ndim(value[0]) == 1:
                out.append(TableSignal(name, value[0], value[1]))
            else:
                out.append(InputSignal(name, {"type": "constant", "value": value}))
        return out
    raise InvalidInputError(f"inputs must be a function of t, a mapping by input name or a table "
                            f"(DataFrame, structured or 2-D array), got {type(inputs).__name__}")


__all__ = ["InputSignal", "SIGNAL_TYPES", "TableSignal", "FunctionSignal", "FunctionInputs",
           "python_signals"]
