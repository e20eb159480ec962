"""Bouncing ball: a one-coordinate multibody model with impacts (seed 001 §3.7).

q = (height,), m q'' = −m g + f (f: input force), no constraints.  Two
switching functions on the height (falling zero crossing, seed 001 eq. 3.42):

* ``impact``: active while the predicted rebound speed e·|v_impact| is at least
  ``v_stop``; jump map v⁺ = −e v⁻ (Newton's restitution law), height set to 0;
* ``stop`` (terminal): active once the predicted rebound speed is below
  ``v_stop``; jump map: the ball comes to rest (height 0, v 0) and the
  simulation stops.

The predicted impact speed |v_impact| = sqrt(v² + 2 g h) is constant in
free flight without input force, so the gate never switches inside a flight
there; an inactive switching function is held at +1 (it cannot cross zero).

With f = 0 the impact times are analytic (:meth:`impact_times`): t₁ = (v₀ +
sqrt(v₀² + 2 g h₀))/g, then flights of 2 e^k v₁/g with v₁ = g t₁ − v₀.
"""
import math

import numpy as np

from .base import Event, Parameter, Signal
from .kernels import KernelModel, MultibodyKernels, no_mass_jacobian
from .ranges import NONNEGATIVE, POSITIVE, UNIT_INTERVAL

# -- kernels: p = (m, g); outputs arrive zero-filled ------------------------------------
# The continuous equations only: the switching functions and jump maps (events)
# stay in Python (cosim.simulation locates them on the integrator's dense output).


def mass(q, t, p, M):
    M[0, 0] = p[0]


def forces(q, v, t, u, p, Q):
    """Gravity and the input force: m q'' = −m g + f."""
    Q[0] = -p[0] * p[1] + u[0]


def force_jacobians(q, v, t, u, p, Qq, Qv):
    """Q does not depend on q or v."""


def constraints(q, t, p, C):
    """No constraints (n_c = 0)."""


def constraint_jacobian(q, t, p, Cq):
    """No constraints."""


def constraint_dt(q, t, p, Ct):
    """No constraints."""


def gamma(q, v, t, p, g):
    """No constraints."""


def constraint_force_jacobian(q, lam, t, p, H):
    """No constraints."""


def outputs(q, v, t, u, p, y):
    y[0] = q[0]
    y[1] = v[0]


KERNELS = MultibodyKernels(mass, forces, constraints, constraint_jacobian, constraint_dt, gamma,
                           force_jacobians, constraint_force_jacobian, no_mass_jacobian, outputs)


class BouncingBall(KernelModel):
    name = "bouncing_ball"
    description = "ball bouncing on the ground: impact events with restitution and a terminal stop (seed 001 §3.7)"
    coordinates = ("height",)
    parameters = (
        Parameter("m", 1.0, "kg", "mass"),
        Parameter("g", 9.81, "m/s2", "gravitational acceleration"),
        Parameter("e", 0.8, "1", "coefficient of restitution", tunable=True),
        Parameter("h0", 1.0, "m", "initial height"),
        Parameter("v0", 0.0, "m/s", "initial vertical velocity (up positive)"),
        Parameter("v_stop", 0.1, "m/s", "rebound speed below which the ball stops", tunable=True),
    )
    inputs = (Signal("force", "N", "vertical force on the ball"),)
    outputs = (Signal("height", "m"), Signal("velocity", "m/s"))
    events = (Event("impact", direction=-1), Event("stop", direction=-1, terminal=True))
    constant_mass = True
    kernel_set = KERNELS

    parameter_ranges = {"m": POSITIVE, "g": POSITIVE, "e": UNIT_INTERVAL, "h0": NONNEGATIVE,
                        "v_stop": NONNEGATIVE}

    def kernel_parameters(self):
        return [self.params["m"], self.params["g"]]

    def initial_state(self):
        return np.array([self.params["h0"]]), np.array([self.params["v0"]])

    def potential_energy(self, q, t=0.0):
        return self.params["m"] * self.params["g"] * q[0]

    # -- events ---------------------------------------------------------------------
    def _slow(self, h, v):
        # energy conservation in free flight: v_ground² = v² + 2 g h (also below ground)
        v_impact = math.sqrt(max(v * v + 2.0 * self.params["g"] * h, 0.0))
        return self.params["e"] * v_impact < self.params["v_stop"]

    def event_functions(self, t, y, u):
        h, v = float(y[0]), float(y[1])
        if self._slow(h, v):
            return np.array([1.0, h])
        return np.array([h, 1.0])

    def apply_event(self, index, t, y, u):
        y = np.array(y, dtype=float)
        if index == 0:  # impact: Newton restitution
            y[0] = 0.0
            y[1] = -self.params["e"] * y[1]
        else:  # stop: at rest on the ground
            y[:] = 0.0
        return y

    # -- analytic reference (force-free) -------------------------------------------------
    def impact_times(self, n_max=1000):
        """[(t_k, impact speed), ...] of the force-free motion, ending with the stop."""
        g, e, h0, v0 = (self.params[k] for k in ("g", "e", "h0", "v0"))
        t = (v0 + math.sqrt(v0 * v0 + 2.0 * g * h0)) / g
        speed = g * t - v0
        out = [(t, speed)]
        while e * speed >= self.params["v_stop"] and len(out) < n_max:
            speed *= e
            t += 2.0 * speed / g
            out.append((t, speed))
        return out
