"""No silent changes: checks for options that would otherwise be clamped,
rounded or ignored without a word (issue 20).

Each check either raises :class:`~cosim.errors.InvalidInputError` naming the
value, or issues an :class:`OptionWarning` saying what is used instead.  The
``cosim`` CLI prints a warning as one line ``cosim: warning: ...`` on stderr;
library users get an ordinary Python warning (filter it like any other).
"""
from __future__ import annotations

import math
import warnings
from fractions import Fraction

from .errors import InvalidInputError

# Methods that never read rtol/atol: the exact state-transition method (seed 001
# §3.5).  (The fixed-step methods weigh their local error estimates with them:
# cosim.fixed_step.)
IGNORE_TOLERANCES = {"state-transition": "it is exact for LTI plants"}


class OptionWarning(UserWarning):
    """An option was used with another value than the one given, or not at all."""


def warn(message):
    warnings.warn(message, OptionWarning, stacklevel=3)


def check_step_against_grid(h, grid, *, h_name="--h", grid_name="the communication step", fix=""):
    """A fixed integration step ``h`` against the grid it must land on
    (communication step, blocks' base step): steps never cross a grid point, so
    an ``h`` longer than the grid spacing is cut to it, and an ``h`` that does
    not divide it is shortened before every grid point.  Says so; ``fix`` tells
    how to avoid it."""
    if h is None or grid is None:
        return
    h, g = float(h), float(grid)
    if not (h > 0 and g > 0 and math.isfinite(h) and math.isfinite(g)):
        return  # invalid values are rejected with their own message elsewhere
    fix = f" ({fix})" if fix else ""
    if h > g * (1 + 1e-9):
        warn(f"{h_name} {h:g} is longer than {grid_name} {g:g}: steps never cross it, so the "
             f"integrator steps with h = {g:g}{fix}")
        return
    ratio = g / h
    if abs(ratio - round(ratio)) > 1e-9 * ratio:
        n = math.floor(ratio)
        warn(f"{h_name} {h:g} does not divide {grid_name} {g:g}: each interval of {g:g} takes "
             f"{n} step{'s' if n > 1 else ''} of {h:g} and one of {g - n * h:.6g}{fix}")


def check_tolerances(method, given):
    """``given``: the tolerance options the user set explicitly, e.g. ``["--rtol"]``."""
    reason = IGNORE_TOLERANCES.get(str(method))
    if reason and given:
        warn(f"{' and '.join(given)} ignored: method {method!r} does not use tolerances ({reason})")


def parse_assignments(items, what="--param"):
    """["l=2", "m=1.5"] -> {"l": 2.0, ...}; numbers become floats, other values stay
    strings for the model to parse.  A name given twice with two values is an error."""
    pairs = []
    for item in items or ():
        name, sep, value = item.partition("=")
        if not sep or not name.strip():
            raise InvalidInputError(f"{what} expects NAME=VALUE, got {item!r}")
        pairs.append((name.strip(), _number_or_text(value.strip())))
    return merge_assignments(pairs, what)


def _number_or_text(text):
    try:
        return float(text)
    except ValueError:
        return text  # e.g. a matrix "[[0,1],[-4,-0.4]]" for the LTI model


def merge_assignments(pairs, what):
    """[(name, value), ...] -> dict; a name given twice with different values is an error."""
    out = {}
    for name, value in pairs:
        if name in out and not _same(out[name], value):
            raise InvalidInputError(f"{what} {name} given twice ({out[name]!r} and {value!r}); give it once")
        out[name] = value
    return out


def _same(a, b):
    try:
        return bool(a == b)
    except ValueError:
        return False


def exact_grid(*steps):
    """The spacing of the union of the grids k·s (s exact decimals), or None."""
    steps = [Fraction(s) for s in steps if s is not None]
    if not steps:
        return None
    g = steps[0]
    for s in steps[1:]:
        g = Fraction(math.gcd(g.numerator * s.denominator, s.numerator * g.denominator),
                     g.denominator * s.denominator)
    return g


PLOT_FORMATS = (".png", ".pdf", ".svg", ".jpg", ".jpeg")


def check_plot_path(path, option="--plot"):
    """matplotlib appends '.png' to a name without a known suffix (so the file
    would not be where we say); ask for a suffix instead.  The file must be
    writable too (:func:`check_output_file`), checked before the run."""
    if path is None:
        return None
    from pathlib import Path
    if Path(str(path)).is_dir():
        raise InvalidInputError(f"{option} {str(path)!r} is a directory; give a file name")
    suffix = Path(str(path)).suffix.lower()
    if suffix not in PLOT_FORMATS:
        raise InvalidInputError(f"{option} {str(path)!r}: give a file name ending in "
                                f"{', '.join(PLOT_FORMATS)}")
    return check_output_file(path, option)


def _writable_folder(folder, option, path):
    import os
    if not os.path.exists(folder):
        raise InvalidInputError(f"{option} {str(path)!r}: no directory {folder!r}")
    if not os.path.isdir(folder):
        raise InvalidInputError(f"{option} {str(path)!r}: {folder!r} is not a directory")
    if not os.access(folder, os.W_OK | os.X_OK):
        raise InvalidInputError(f"{option} {str(path)!r}: directory {folder!r} is not writable")


def check_output_file(path, option="--out"):
    """An output file the command will write after the run: checked before it (issue
    14) -- its directory exists and is writable, and it is not a directory itself."""
    if path is None:
        return None
    import os
    path = str(path)
    if not path or path.endswith(("/", os.sep)) or os.path.isdir(path):
        raise InvalidInputError(f"{option} {path!r} is a directory; give a file name")
    _writable_folder(os.path.dirname(path) or ".", option, path)
    if os.path.exists(path) and not os.access(path, os.W_OK):
        raise InvalidInputError(f"{option} {path!r}: the file is not writable")
    return path


def check_output_dir(path, option="--out"):
    """An output folder (created if missing): checked before the run -- an existing
    one is a writable directory, a new one's parent exists and is writable."""
    if path is None:
        return None
    import os
    path = str(path)
    if os.path.exists(path):
        if not os.path.isdir(path):
            raise InvalidInputError(f"{option} {path!r} exists and is not a directory")
        _writable_folder(path, option, path)
    else:
        _writable_folder(os.path.dirname(os.path.normpath(path)) or ".", option, path)
    return path
