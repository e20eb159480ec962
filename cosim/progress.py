"""A one-line progress bar on stderr for runs and sweeps (no dependency).

``progress`` of :func:`cosim.run`, :func:`cosim.simulate` and :func:`cosim.sweep`:

* ``None`` (default): a bar on stderr when stderr is a terminal, shown only once the
  run has taken longer than :data:`DELAY` seconds (short runs print nothing); when it
  is not a terminal (a pipe, a log file, a notebook), a plain line every
  :data:`QUIET_EVERY` seconds once the run has taken that long, so no long run is
  silent;
* ``True``: the bar on stderr even when it is not a terminal (still after the delay);
* ``False``: nothing;
* a callable: called with the simulation time after every communication step (a
  sweep: with ``(done, total)`` runs), and nothing is printed.

The bar redraws at most :data:`RATE` times a second and ends with a newline.
"""
from __future__ import annotations

import sys
import time

DELAY = 2.0     # s of wall time before a bar appears
RATE = 10.0     # redraws per second at most
WIDTH = 25      # characters of the bar
QUIET_EVERY = 10.0   # s between plain lines where stderr is not a terminal


class ProgressLine:
    """``update(value)`` with ``start <= value <= stop``; ``close()`` ends the line."""

    def __init__(self, start, stop, *, unit="s", label="t", stream=None, delay=DELAY, force=False):
        self.start, self.stop = float(start), float(stop)
        self.unit, self.label = unit, label
        self.stream = sys.stderr if stream is None else stream
        isatty = getattr(self.stream, "isatty", None)
        self.bar = bool(force or (isatty is not None and isatty()))
        self.enabled = True     # not a terminal: plain lines every QUIET_EVERY seconds
        self.delay = float(delay) if self.bar else QUIET_EVERY
        self.t0 = time.monotonic()
        self.last = -1.0
        self.shown = False

    def __call__(self, value, total=None):
        self.update(value, total)

    def update(self, value, total=None):
        if not self.enabled:
            return
        if total is not None:   # a sweep: (done, total)
            self.stop = float(total)
        now = time.monotonic()
        elapsed = now - self.t0
        if elapsed < self.delay or now - self.last < (1.0 / RATE if self.bar else QUIET_EVERY):
            return
        self.last = now
        span = self.stop - self.start
        frac = min(max((float(value) - self.start) / span, 0.0), 1.0) if span > 0 else 1.0
        eta = f"  about {elapsed * (1.0 - frac) / frac:.0f} s left" if 0.0 < frac < 1.0 else ""
        where = (f"{self.label}={_number(value)}" + (f" {self.unit}" if self.unit else "") +
                 f" of {_number(self.stop)}")
        if not self.bar:
            self.stream.write(f"cosim: {100.0 * frac:.0f}%  {where}  {elapsed:.0f} s{eta}\n")
            self.stream.flush()
            return
        bar = "#" * int(WIDTH * frac)
        self.stream.write(f"\r[{bar:<{WIDTH}s}] {100.0 * frac:3.0f}%  {where}  "
                          f"{elapsed:.0f} s{eta}   ")
        self.stream.flush()
        self.shown = True

    def close(self):
        if self.shown:
            self.stream.write("\n")
            self.stream.flush()
            self.shown = False


def _number(x):
    """A count as an integer (a sweep's 1000000 runs), a time to 6 digits."""
    x = float(x)
    return f"{int(x)}" if x.is_integer() and abs(x) < 1e15 else f"{x:.6g}"


def progress_callback(progress, start, stop, **kwargs):
    """(callback or None, closer): what ``progress`` (see the module doc) becomes for a
    run from ``start`` to ``stop``."""
    if progress is None or progress is True:
        line = ProgressLine(start, stop, force=progress is True, **kwargs)
        return (line if line.enabled else None), line.close
    if progress is False:
        return None, lambda: None
    if callable(progress):
        return progress, lambda: None
    from .errors import InvalidInputError
    raise InvalidInputError(f"progress must be None, True, False or a callable, got {progress!r:.60}")


__all__ = ["ProgressLine", "progress_callback", "DELAY"]
