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

Every parameter is also bounded in magnitude (the default range): a value is finite
and at most :data:`MAX_PARAMETER` = 1e12 in size, and a positive physical quantity
(POSITIVE: a mass, inertia, length, stiffness, density) lies in
[:data:`MIN_POSITIVE`, :data:`MAX_PARAMETER`] = [1e-12, 1e12] (SI units).  Outside
that, a model's terms overflow in the first step (1e300 squared) or its mass matrix
is numerically singular against its constraint rows (a mass of 1e-300), so the value
is refused where it enters -- also from a state blob -- instead of failing a step
later.  A model that needs a wider range declares it with finite ends
(``Range(1e-15, 1e15)``); an end given as ±inf lifts the bound on that side.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from ..errors import InvalidInputError


MAX_PARAMETER = 1e12    # the default magnitude bound of every parameter value
MIN_POSITIVE = 1e-12    # the smallest value of a positive physical quantity (POSITIVE)


@dataclass(frozen=True)
class Range:
    """An interval ``low .. high`` (each end open or closed; by default the magnitude
    bound ±MAX_PARAMETER), or a finite set ``values``."""

    low: float = -MAX_PARAMETER
    high: float = MAX_PARAMETER
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
        if self.low == -self.high and not (self.low_open or self.high_open):
            return f"at most {self.high:g} in size"
        return (f"in {'(' if self.low_open else '['}{self.low:g}, {self.high:g}"
                f"{')' if self.high_open else ']'}")

    def check(self, key, x):
        """``x`` if it lies in the range, else InvalidInputError naming ``key``."""
        if not self.contains(x):
            raise InvalidInputError(f"parameter {key!r} must be {self}, got {x!r}")
        return x


POSITIVE = Range(MIN_POSITIVE)                # masses, inertias, lengths, stiffnesses
NONNEGATIVE = Range(0.0)                      # damping, friction, speeds below which ...
UNIT_INTERVAL = Range(0.0, 1.0)               # restitution coefficients, fractions
SWITCH = Range(values=(0.0, 1.0))             # 0/1 model switches
DEFAULT = Range()                             # a parameter without a declared range


def declared_range(cls, key):
    """The range ``cls`` declares for parameter ``key`` (None: none declared, the
    default magnitude bound :data:`DEFAULT` applies)."""
    found = (getattr(cls, "parameter_ranges", None) or {}).get(key)
    if found is None and key in (getattr(cls, "positive_parameters", None) or ()):
        return POSITIVE
    return found


def parameter_range(cls, key):
    """The range a value of parameter ``key`` of model class ``cls`` must lie in."""
    found = declared_range(cls, key)
    return DEFAULT if found is None else found


__all__ = ["Range", "POSITIVE", "NONNEGATIVE", "UNIT_INTERVAL", "SWITCH", "DEFAULT",
           "MAX_PARAMETER", "MIN_POSITIVE", "declared_range", "parameter_range"]
