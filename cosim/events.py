"""State events: sign-change detection and location (seed 001 §3.7).

A model declares switching functions z = m(x, u, t) (seed 001 eq. 3.42); an
event happens where z crosses zero (eq. 3.43).  After each accepted
integrator step [t_a, t_b] the stepper compares the signs of z at both ends
(:func:`crossings`; ``direction`` +1 rising only, −1 falling only, 0 both).
A crossing is located on the step's dense output by :func:`locate`: the secant
(regula falsi) point of seed 001 §3.7,

    h_s = h · |z_a| / (|z_a| + |z_b|),   sign z_a ≠ sign z_b

(the seed writes it with z⁺, z⁻ for the values on either side), with the
Illinois modification (halve the retained end's value when the same end is
kept twice, so convergence is superlinear) and a bisection safeguard (a
bisection step whenever the bracket did not shrink to half in three
iterations), to an absolute time tolerance.  The located time is the right
end of the final bracket, i.e. the first time known to be past the crossing,
so the switching function has changed sign there (|z| ≤ ε in the seed's
eq. 3.44 sense with ε set by the time tolerance).
"""
from __future__ import annotations

import math

import numpy as np


def crossed(z_a, z_b, direction):
    """True when z went from z_a to z_b across zero in the allowed direction.

    A start exactly at zero is not a crossing (it is the point just located
    and handled), so a restarted step never re-detects the same event.
    """
    if direction >= 0 and z_a < 0.0 <= z_b:
        return True
    if direction <= 0 and z_a > 0.0 >= z_b:
        return True
    return False


def crossings(z_a, z_b, directions):
    """Indices of the switching functions that crossed zero between two points
    (:func:`crossed` of each, written out: on Python floats)."""
    z_a = z_a.tolist() if isinstance(z_a, np.ndarray) else z_a
    z_b = z_b.tolist() if isinstance(z_b, np.ndarray) else z_b
    return [i for i, (a, b, d) in enumerate(zip(z_a, z_b, directions))
            if (d >= 0 and a < 0.0 <= b) or (d <= 0 and a > 0.0 >= b)]


def locate(fun, t_a, z_a, t_b, z_b, tol, max_iter=200):
    """Time of the zero of ``fun`` in (t_a, t_b] given z_a = fun(t_a), z_b = fun(t_b)
    of opposite sign (or z_b == 0).  Returns ``(t_event, z_event, iterations)``
    with t_event − (true zero) ∈ [0, tol] (up to the dense output's accuracy).

    Illinois variant of regula falsi with bisection safeguard (seed 001 §3.7).
    """
    if z_b == 0.0:
        return t_b, z_b, 0
    sa = math.copysign(1.0, z_a)
    fa, fb = z_a, z_b
    side = 0  # which end was moved last: -1 left end moved, +1 right end moved
    width_ref = t_b - t_a
    it = 0
    while t_b - t_a > tol and it < max_iter:
        it += 1
        # secant point (seed 001 §3.7: h_s = h |z_a| / (|z_a| + |z_b|))
        t_c = t_a + (t_b - t_a) * abs(fa) / (abs(fa) + abs(fb))
        if it % 3 == 1 and it > 1:
            if t_b - t_a > 0.5 * width_ref:  # bisection safeguard: no halving in 3 iterations
                t_c = 0.5 * (t_a + t_b)
            width_ref = t_b - t_a
        # keep the trial point strictly inside, at least tol/2 from both ends
        margin = min(0.5 * tol, 0.25 * (t_b - t_a))
        t_c = min(max(t_c, t_a + margin), t_b - margin)
        z_c = float(fun(t_c))
        if z_c == 0.0:
            return t_c, z_c, it
        if math.copysign(1.0, z_c) == sa:  # zero is right of t_c
            t_a, z_a, fa = t_c, z_c, z_c
            if side == -1:
                fb *= 0.5  # Illinois: right end retained twice
            side = -1
        else:
            t_b, z_b, fb = t_c, z_c, z_c
            if side == +1:
                fa *= 0.5
            side = +1
    return t_b, z_b, it


class ChatterMonitor:
    """Counts events that follow each other within ``window`` seconds.

    More than ``max_events`` such events in a row is chattering (e.g. Zeno
    behaviour of an impacting body whose bounce velocity tends to zero).
    """

    def __init__(self, max_events=50, window=1e-9):
        self.max_events, self.window = int(max_events), float(window)
        self.count, self.last_time = 0, -math.inf

    def add(self, t):
        """Record an event at t; returns True when this is chattering."""
        if t - self.last_time <= self.window:
            self.count += 1
        else:
            self.count = 1
        self.last_time = t
        return self.count > self.max_events

    def state(self):
        return {"count": self.count, "last_time": self.last_time}

    def restore(self, d):
        self.count, self.last_time = int(d["count"]), float(d["last_time"])


def event_values(model, t, y, u):
    """Model switching functions as a float array (empty when the model has none)."""
    if not model.events:
        return np.zeros(0)
    return np.asarray(model.event_functions(t, y, u), dtype=float).reshape(-1)
