"""Input checks shared by the core: one place that phrases the errors."""
import math

import numpy as np

from .errors import InvalidInputError


def finite_float(name, value, *, positive=False, nonnegative=False):
    """Return ``value`` as float; reject NaN/inf, and <=0 / <0 on request."""
    try:
        x = float(value)
    except (TypeError, ValueError):
        raise InvalidInputError(f"{name} must be a number, got {value!r}") from None
    if not math.isfinite(x):
        raise InvalidInputError(f"{name} must be finite, got {x!r}")
    if positive and not x > 0.0:
        raise InvalidInputError(f"{name} must be > 0, got {x!r}")
    if nonnegative and x < 0.0:
        raise InvalidInputError(f"{name} must be >= 0, got {x!r}")
    return x


def finite_vector(name, value, size=None):
    """Return ``value`` as a 1-D float array of ``size``; reject NaN/inf."""
    try:
        arr = np.array(value, dtype=float).reshape(-1) if np.ndim(value) <= 1 else None
    except (TypeError, ValueError):
        raise InvalidInputError(f"{name} must be a sequence of numbers, got {value!r}") from None
    if arr is None:
        raise InvalidInputError(f"{name} must be 1-D, got shape {np.shape(value)}")
    if size is not None and arr.size != size:
        raise InvalidInputError(f"{name} must have length {size}, got {arr.size}")
    bad = ~np.isfinite(arr)
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise InvalidInputError(f"{name}[{i}] must be finite, got {arr[i]!r}")
    return arr
