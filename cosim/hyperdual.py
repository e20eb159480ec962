"""Hyper-dual numbers a + b₁ε₁ + b₂ε₂ + b₁₂ε₁ε₂ (ε₁² = ε₂² = 0, ε₁ε₂ ≠ 0;
Fike & Alonso, AIAA 2011-886): f(x + ε₁ + ε₂) carries f, two first
derivatives and the mixed second derivative exactly, with no step size.

Used by :mod:`cosim.derivatives` to evaluate a model's own numpy code on
object arrays of :class:`HyperDual`: numpy calls the element's method of the
same name for a ufunc on an object array (``np.sin`` → ``x.sin()``), and
``@``/``sum`` use the arithmetic below.  Code that casts to float
(``float(x)``, assignment into a float array) raises ``TypeError``: the
caller then falls back to another path.  Comparisons and ``abs`` use the
real part, as forward-mode automatic differentiation does.
"""
from __future__ import annotations

import math

import numpy as np


class HyperDual:
    __slots__ = ("a", "b1", "b2", "b12")

    def __init__(self, a, b1=0.0, b2=0.0, b12=0.0):
        self.a, self.b1, self.b2, self.b12 = a, b1, b2, b12

    # f(x) for a scalar function with derivatives f0, f1 = f', f2 = f'' at x.a
    def _chain(self, f0, f1, f2):
        return HyperDual(f0, f1 * self.b1, f1 * self.b2, f1 * self.b12 + f2 * self.b1 * self.b2)

    @staticmethod
    def _lift(o):
        return o if isinstance(o, HyperDual) else HyperDual(o)

    def __repr__(self):
        return f"HyperDual({self.a!r}, {self.b1!r}, {self.b2!r}, {self.b12!r})"

    def __float__(self):
        raise TypeError("a HyperDual number cast to float loses its derivatives")

    __complex__ = __int__ = __index__ = __float__

    # -- arithmetic ---------------------------------------------------------------
    def __add__(self, o):
        if isinstance(o, HyperDual):
            return HyperDual(self.a + o.a, self.b1 + o.b1, self.b2 + o.b2, self.b12 + o.b12)
        if isinstance(o, np.ndarray):
            return NotImplemented
        return HyperDual(self.a + o, self.b1, self.b2, self.b12)

    __radd__ = __add__

    def __neg__(self):
        return HyperDual(-self.a, -self.b1, -self.b2, -self.b12)

    def __pos__(self):
        return self

    def __sub__(self, o):
        if isinstance(o, np.ndarray):
            return NotImplemented
        return self + (-o)

    def __rsub__(self, o):
        return (-self) + o

    def __mul__(self, o):
        if isinstance(o, HyperDual):
            return HyperDual(self.a * o.a, self.a * o.b1 + self.b1 * o.a, self.a * o.b2 + self.b2 * o.a,
                             self.a * o.b12 + self.b1 * o.b2 + self.b2 * o.b1 + self.b12 * o.a)
        if isinstance(o, np.ndarray):
            return NotImplemented
        return HyperDual(self.a * o, self.b1 * o, self.b2 * o, self.b12 * o)

    __rmul__ = __mul__

    def reciprocal(self):
        inv = 1.0 / self.a
        return self._chain(inv, -inv * inv, 2.0 * inv * inv * inv)

    def __truediv__(self, o):
        if isinstance(o, HyperDual):
            return self * o.reciprocal()
        if isinstance(o, np.ndarray):
            return NotImplemented
        return HyperDual(self.a / o, self.b1 / o, self.b2 / o, self.b12 / o)

    def __rtruediv__(self, o):
        return self.reciprocal() * o

    def __pow__(self, p):
        if isinstance(p, HyperDual):
            return (self.log() * p).exp()
        if isinstance(p, np.ndarray):
            return NotImplemented
        if p == 0:
            return HyperDual(1.0)
        if p == 1:
            return self
        if p == 2:
            return self * self
        a = self.a
        return self._chain(a ** p, p * a ** (p - 1), p * (p - 1) * a ** (p - 2))

    def __rpow__(self, base):
        return (self * math.log(base)).exp()

    # -- comparisons, abs: on the real part (branches as in the real evaluation) ---
    def __lt__(self, o):
        return self.a < (o.a if isinstance(o, HyperDual) else o)

    def __le__(self, o):
        return self.a <= (o.a if isinstance(o, HyperDual) else o)

    def __gt__(self, o):
        return self.a > (o.a if isinstance(o, HyperDual) else o)

    def __ge__(self, o):
        return self.a >= (o.a if isinstance(o, HyperDual) else o)

    def __eq__(self, o):
        return self.a == (o.a if isinstance(o, HyperDual) else o)

    def __ne__(self, o):
        return not self.__eq__(o)

    __hash__ = None

    def __abs__(self):
        return -self if self.a < 0 else self

    absolute = fabs = __abs__

    # -- the ufuncs numpy calls on object arrays ---------------------------------------
    def negative(self):
        return -self

    def positive(self):
        return self

    def square(self):
        return self * self

    def sqrt(self):
        r = math.sqrt(self.a)
        return self._chain(r, 0.5 / r, -0.25 / (r * self.a))

    def cbrt(self):
        r = np.cbrt(self.a)
        return self._chain(r, r / (3.0 * self.a), -2.0 * r / (9.0 * self.a * self.a))

    def exp(self):
        e = math.exp(self.a)
        return self._chain(e, e, e)

    def log(self):
        return self._chain(math.log(self.a), 1.0 / self.a, -1.0 / (self.a * self.a))

    def sin(self):
        s, c = math.sin(self.a), math.cos(self.a)
        return self._chain(s, c, -s)

    def cos(self):
        s, c = math.sin(self.a), math.cos(self.a)
        return self._chain(c, -s, -c)

    def tan(self):
        t = math.tan(self.a)
        d = 1.0 + t * t
        return self._chain(t, d, 2.0 * t * d)

    def arcsin(self):
        d = 1.0 / math.sqrt(1.0 - self.a * self.a)
        return self._chain(math.asin(self.a), d, self.a * d ** 3)

    def arccos(self):
        d = 1.0 / math.sqrt(1.0 - self.a * self.a)
        return self._chain(math.acos(self.a), -d, -self.a * d ** 3)

    def arctan(self):
        d = 1.0 / (1.0 + self.a * self.a)
        return self._chain(math.atan(self.a), d, -2.0 * self.a * d * d)

    def sinh(self):
        s, c = math.sinh(self.a), math.cosh(self.a)
        return self._chain(s, c, s)

    def cosh(self):
        s, c = math.sinh(self.a), math.cosh(self.a)
        return self._chain(c, s, c)

    def tanh(self):
        t = math.tanh(self.a)
        d = 1.0 - t * t
        return self._chain(t, d, -2.0 * t * d)

    def arctan2(self, x):
        """atan2(self, x): the value from math.atan2, the derivatives from atan(y/x)
        or −atan(x/y) (the same derivatives wherever atan2 is differentiable)."""
        y = self
        x = HyperDual._lift(x)
        w = (y / x).arctan() if abs(x.a) >= abs(y.a) else -(x / y).arctan()
        return HyperDual(math.atan2(y.a, x.a), w.b1, w.b2, w.b12)

    def hypot(self, o):
        o = HyperDual._lift(o)
        return (self * self + o * o).sqrt()

    def sign(self):
        return float(np.sign(self.a))

    def isfinite(self):
        return all(np.isfinite(c) for c in (self.a, self.b1, self.b2, self.b12))

    def conjugate(self):
        return self

    conj = conjugate


def seed(x, d1, d2=None):
    """Object array x + ε₁ d1 + ε₂ d2 (d2 = d1 when not given)."""
    x = np.asarray(x, dtype=float)
    d1 = np.broadcast_to(np.asarray(d1, dtype=float), x.shape)
    d2 = d1 if d2 is None else np.broadcast_to(np.asarray(d2, dtype=float), x.shape)
    out = np.empty(x.shape, dtype=object)
    for i in np.ndindex(x.shape):
        out[i] = HyperDual(float(x[i]), float(d1[i]), float(d2[i]))
    return out


def parts(values):
    """(a, b1, b2, b12) float arrays of an array of HyperDual (plain numbers: zero parts).
    Raises TypeError when an entry is neither (e.g. a string)."""
    arr = np.asarray(values, dtype=object)
    out = np.zeros((4,) + arr.shape)
    for i in np.ndindex(arr.shape):
        x = arr[i]
        if isinstance(x, HyperDual):
            out[(slice(None),) + i] = (x.a, x.b1, x.b2, x.b12)
        else:
            out[(0,) + i] = float(x)
    return out
