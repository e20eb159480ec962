"""Declared parameter ranges (issue 14): a model states, per parameter, the set
of values that make physical sense (masses and lengths > 0, a switch 0 or 1,
a restitution coefficient in [0, 1]); :meth:`cosim.models.base.Model._check_parameter`
checks every value against it -- one validator behind ``load_model``,
``Simulation(params=...)``, ``Simulation.set_parameter``, spec files, the FMU's
parameter start values and the ROS node's ``params.*`` updates.  A value outside
the range raises :class:`~cosim.errors.InvalidInputError` naming the parameter,
the range and the value, and nothing is changed.

Declare them on a model class::

    parameter_ranges = {"m": POSITIVE, "e": UNIT_INTERVAL, "damping": SWITCH,
                        "v_stop": NONNEGATIVE, "angle": Range(-3.2, 3.2)}

``positive_parameters = ("m", "l")`` (the older spelling) still means POSITIVE.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from ..errors import InvalidInputError


@dataclass(frozen=True)
class Range:
    """An interval ``low .. high`` (each end open or closed), or a finite set ``values``."""

    low: float = -math.inf
    high: float = math.inf
    low_open: bool = False
    high_open: bool = False
    values: tuple | None = None

    def contains(self, x):
        if self.values is not None:
            return x in self.values
        return (x > self.low if self.low_open else x >= self.low) and \
            (x < self.high if self.high_open else x <= self.high)

    def __str__(self):
        if self.values is not None:
            vals = [f"{v:g}" for v in self.values]
            return " or ".join(vals) if len(vals) <= 2 else f"one of {', '.join(vals)}"
        if self.high == math.inf:
            return f"{'>' if self.low_open else '>='} {self.low:g}"
        if self.low == -math.inf:
            return f"{'<' if self.high_open else '<='} {self.high:g}"
        return (f"in {'(' if self.low_open else '['}{self.low:g}, {self.high:g}"
                f"{')' if self.high_open else ']'}")

    def check(self, key, x):
        """``x`` if it lies in the range, else InvalidInputError naming ``key``."""
        if not self.contains(x):
            raise InvalidInputError(f"parameter {key!r} must be {self}, got {x!r}")
        return x


POSITIVE = Range(0.0, low_open=True)          # masses, inertias, lengths, stiffnesses
NONNEGATIVE = Range(0.0)                      # damping, friction, speeds below which ...
UNIT_INTERVAL = Range(0.0, 1.0)               # restitution coefficients, fractions
SWITCH = Range(values=(0.0, 1.0))             # 0/1 model switches


def declared_range(cls, key):
    """The range ``cls`` declares for parameter ``key`` (None: any finite value)."""
    found = (getattr(cls, "parameter_ranges", None) or {}).get(key)
    if found is None and key in (getattr(cls, "positive_parameters", None) or ()):
        return POSITIVE
    return found


__all__ = ["Range", "POSITIVE", "NONNEGATIVE", "UNIT_INTERVAL", "SWITCH", "declared_range"]
