"""Exact multirate timing: sample times as rationals and their gcd base step.

Seed 001 §3.5 ("恒定输入", case 2): with several sample times T_a,j the
integration step must satisfy  h_max = gcd(T_a,j).  Sample times are given as
decimal numbers (0.001, "0.0025"); we read them as the decimal the user wrote
(``Fraction(str(x))`` — ``repr`` of a float is its shortest round-trip decimal,
so 0.1 becomes exactly 1/10, not 3602879701896397/36028797018963968) and never
use float modulo.  Example: gcd(0.001, 0.0025) = gcd(1/1000, 5/2000) = 1/2000.
"""
from __future__ import annotations

import math
from decimal import Decimal, InvalidOperation
from fractions import Fraction
from numbers import Integral, Real

from .errors import InvalidInputError


def exact_time(value, name="sample time", *, positive=True, allow_zero=False) -> Fraction:
    """``value`` (float, int, str, Decimal or Fraction) as an exact Fraction.

    Floats are read through their shortest decimal repr (what the user typed).
    Rejects bools, NaN/inf, non-numbers and (by default) values <= 0.
    """
    if isinstance(value, bool):
        raise InvalidInputError(f"{name} must be a number, got {value!r}")
    try:
        if isinstance(value, Fraction):
            frac = value
        elif isinstance(value, Integral):
            frac = Fraction(int(value))
        elif isinstance(value, Decimal):
            if not value.is_finite():
                raise InvalidInputError(f"{name} must be finite, got {value!r}")
            frac = Fraction(value)
        elif isinstance(value, Real):
            x = float(value)
            if not math.isfinite(x):
                raise InvalidInputError(f"{name} must be finite, got {x!r}")
            frac = Fraction(Decimal(repr(x)))
        elif isinstance(value, str):
            text = value.strip()
            if "/" in text:
                frac = Fraction(text)
            else:
                dec = Decimal(text)
                if not dec.is_finite():
                    raise InvalidInputError(f"{name} must be finite, got {value!r}")
                frac = Fraction(dec)
        else:
            raise InvalidInputError(f"{name} must be a number, got {value!r}")
    except (InvalidOperation, ValueError, ZeroDivisionError) as exc:
        if isinstance(exc, InvalidInputError):
            raise
        raise InvalidInputError(f"{name} must be a number, got {value!r}") from None
    if positive and not allow_zero and frac <= 0:
        raise InvalidInputError(f"{name} must be > 0, got {value!r}")
    if (positive or allow_zero) and frac < 0:
        raise InvalidInputError(f"{name} must be >= 0, got {value!r}")
    return frac


def gcd_fraction(a: Fraction, b: Fraction) -> Fraction:
    """gcd of two positive rationals: gcd(p/q, r/s) = gcd(p·s, r·q) / (q·s)."""
    return Fraction(math.gcd(a.numerator * b.denominator, b.numerator * a.denominator),
                    a.denominator * b.denominator)


def base_step(sample_times, offsets=()) -> Fraction:
    """Exact gcd of all sample times (and of all non-zero offsets, so that every
    sample instant offset + k·T lies on the base grid).  Seed 001 §3.5."""
    times = [exact_time(T, f"sample time {T!r}") for T in sample_times]
    if not times:
        raise InvalidInputError("base_step needs at least one sample time")
    for off in offsets:
        frac = exact_time(off, f"offset {off!r}", positive=False, allow_zero=True)
        if frac != 0:
            times.append(frac)
    g = times[0]
    for T in times[1:]:
        g = gcd_fraction(g, T)
    return g


class SampleClock:
    """Sample instants t_k = offset + k·T of one discrete block, exact.

    ``next_index`` is the index of the next instant not yet executed;
    ``next_time`` its float value.  With offset = o/D and T = p/D over a common
    denominator D, t_k = (o + k·p)/D is an integer ratio, and Python's int/int
    division is correctly rounded: every instant is the float nearest the exact
    rational, the same in every run and process, at the cost of two integer
    operations (no Fraction arithmetic on the hot path).
    """

    __slots__ = ("period", "offset", "next_index", "next_time", "_o", "_p", "_d")

    def __init__(self, period, offset=0, start=0):
        self.period = exact_time(period, "sample time")
        self.offset = exact_time(offset, "sample offset", positive=False, allow_zero=True)
        self._d = math.lcm(self.period.denominator, self.offset.denominator)
        self._p = self.period.numerator * (self._d // self.period.denominator)
        self._o = self.offset.numerator * (self._d // self.offset.denominator)
        self.seek(start)

    def seek(self, start):
        """First instant at or after ``start`` becomes the next one."""
        start = start if isinstance(start, Fraction) else exact_time(start, "start time", positive=False)
        k = math.ceil((start - self.offset) / self.period)
        self.set_index(max(k, 0))

    def set_index(self, k):
        self.next_index = k = int(k)
        self.next_time = (self._o + k * self._p) / self._d

    def advance(self):
        self.set_index(self.next_index + 1)

    def instant(self, k) -> Fraction:
        return self.offset + k * self.period
