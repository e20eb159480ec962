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


__all__ = ["InputSignal", "SIGNAL_TYPES"]
