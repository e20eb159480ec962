"""Input checks shared by the core: one place that phrases the errors.

Times and steps of the stepping API (``do_step``, ``set_inputs``,
``advance``) are real numbers (``strict``): ``bool``, ``str`` and complex
values are refused even though Python would convert some of them
(``float(True)`` is 1.0, ``float("0.1")`` is 0.1), so ``do_step(t, True)`` is
an error instead of a one-second step (issue 14).  Complex values are
refused everywhere.
"""
import math
import numbers

import numpy as np

from .errors import InvalidInputError


# termination bounds (issue 14): below these the error weights underflow or a
# step makes no progress, so a run would hang or divide by zero
MIN_RTOL = 1e-14
MIN_ATOL = 1e-30
DEFAULT_MAX_STEPS = 100_000   # integrator steps per communication step / advance()
MAX_COMMUNICATION_STEPS = 10_000_000  # recorded communication steps of one run (CLI, scenario)
# the size bound of an input value (Simulation.set_inputs, a restored state's u_ext, the FMU
# binary's own steps): as a parameter's (cosim.models.ranges.MAX_PARAMETER, SI units).  Above
# it the accelerations a restart solves leave the range a restored state may hold (1e150)
MAX_INPUT = 1e12


def oversized_input(values):
    """The index of the first of ``values`` (finite floats) larger than :data:`MAX_INPUT`
    in size, else None."""
    for i, x in enumerate(values):
        if not -MAX_INPUT <= x <= MAX_INPUT:
            return i
    return None


def communication_step_count(span, dt):
    """Number of communication steps of ``dt`` covering ``span`` seconds; refuses a run
    that would record more than MAX_COMMUNICATION_STEPS points (unbounded memory/time)."""
    n = math.ceil(span / dt - 1e-9) if span > 0 else 0
    if n > MAX_COMMUNICATION_STEPS:
        raise InvalidInputError(
            f"a run of {span!r} s in communication steps of {dt!r} s has {n:.3g} steps, more than "
            f"{MAX_COMMUNICATION_STEPS} (choose a longer communication step or a shorter run)")
    return max(1, n)


def real_number(name, value):
    """``value`` as a float if it is a real number (not bool/str/complex)."""
    if type(value) is float:  # the common case, without the numbers.Real ABC check
        return value
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Real):
        if isinstance(value, np.ndarray) and value.ndim == 0 and value.dtype.kind in "fiu":
            return float(value)
        raise InvalidInputError(f"{name} must be a real number, got {type(value).__name__} {value!r:.80}")
    return float(value)


def finite_float(name, value, *, positive=False, nonnegative=False, strict=False):
    """Return ``value`` as float; reject NaN/inf, and <=0 / <0 on request.

    ``strict`` (times and steps of the stepping API): only real numbers, no
    bool, str or complex.  Otherwise a numeric string is accepted (values from
    YAML/command-line text, e.g. PyYAML reads ``1e-3`` as a string)."""
    if type(value) is float and math.isfinite(value) and value > 0.0:  # hot path (times, steps)
        return value
    if strict:
        x = real_number(name, value)
    else:
        if isinstance(value, complex):
            raise InvalidInputError(f"{name} must be a real number, got complex {value!r}")
        try:
            x = float(value)
        except (TypeError, ValueError):
            raise InvalidInputError(f"{name} must be a number, got {value!r:.80}") from None
    if not math.isfinite(x):
        raise InvalidInputError(f"{name} must be finite, got {x!r}")
    if positive and not x > 0.0:
        raise InvalidInputError(f"{name} must be > 0, got {x!r}")
    if nonnegative and x < 0.0:
        raise InvalidInputError(f"{name} must be >= 0, got {x!r}")
    return x


# the words a boolean option may be given as (command line, YAML, FMU/ROS strings)
FLAG_WORDS = {"true": True, "yes": True, "on": True, "1": True,
              "false": False, "no": False, "off": False, "0": False}


def flag(name, value, words=()):
    """A boolean option: a bool, 0/1, or one of FLAG_WORDS -> bool.  ``words``: other
    strings the option also takes (returned lower-cased, e.g. ``"scaled"``).  The one
    parser of every method's boolean options (a bare ``bool("false")`` is True)."""
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    if isinstance(value, str):
        key = value.strip().lower()
        if key in FLAG_WORDS:
            return FLAG_WORDS[key]
        if key in words:
            return key
    elif isinstance(value, numbers.Real) and value in (0, 1):
        return bool(value)
    extra = "".join(f" or {w!r}" for w in words)
    raise InvalidInputError(f"{name} must be true or false{extra}, got {value!r:.80}")


def tolerance(name, value, minimum):
    """A relative/absolute tolerance: finite, and >= ``minimum`` (termination)."""
    x = finite_float(name, value, positive=True)
    if x < minimum:
        raise InvalidInputError(f"{name} must be >= {minimum:g} (smaller values underflow the "
                                f"error control and the run cannot terminate), got {x!r}")
    return x


def step_count(name, value):
    """A positive integer count (e.g. ``max_steps``)."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Integral) or value < 1:
        raise InvalidInputError(f"{name} must be a positive integer, got {value!r:.80}")
    return int(value)


def finite_vector(name, value, size=None, item=None):
    """Return ``value`` as a 1-D float array of ``size``; reject NaN/inf and
    complex, string or boolean entries (``item(i)``: how an error names entry i,
    else ``name[i]``)."""
    kind = np.asarray(value).dtype.kind if not isinstance(value, (str, bytes)) else "U"
    if kind not in "fiuO":
        raise InvalidInputError(f"{name} must be real numbers, got {np.asarray(value).dtype} {value!r:.80}")
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
        what = f"{name}[{i}]" if item is None else item(i)
        raise InvalidInputError(f"{what} must be finite, got {float(arr[i])!r}")
    return arr
