"""A jump of an input (a restart) and the fixed-step methods: the error of the first
step after it and at t = 1 against scipy's solve_ivp (rtol 1e-12) on the equivalent
ODE.  h = 10 ms, the input jumps at t = 0.5: the forced oscillator
x'' = −40 x − 0.5 x' + u (a plain-Python user model from M and Q, python backend),
u 0 → 50; the pendulum's torque 0 → 5 N·m (its angle φ'' = −g/l sin φ + τ/(m l²)).
The methods' default options.

    PYTHONPATH=$PWD python benchmarks/input_jump.py
    PYTHONPATH=$PWD python benchmarks/input_jump.py --backend numba
"""
import argparse
import os
import sys

import numpy as np
from scipy.integrate import solve_ivp

from cosim.integrators import make_integrator
from cosim.models import load_model

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests"))
from reference import ForcedOscillator  # noqa: E402  (x'' = −40 x − 0.5 x' + u)

H, T_JUMP, T_END = 0.01, 0.5, 1.0


CASES = {   # model, the new input, the ODE of the coordinate compared (s: 0 before, 1 after), y0, coordinate
    "oscillator": (ForcedOscillator, [50.0], lambda y, s: [y[1], -40.0 * y[0] - 0.5 * y[1] + 50.0 * s], [0.1, 0.0],
                   lambda y: y[0]),
    "pendulum": (lambda: load_model("pendulum"), [5.0, 0.0, 0.0],
                 lambda y, s: [y[1], -9.81 * np.sin(y[0]) + 5.0 * s], [np.pi / 4, 0.0],
                 lambda y: np.arctan2(y[0], -y[1])),
}


def reference(rhs, y0):
    before = solve_ivp(lambda t, y: rhs(y, 0.0), (0.0, T_JUMP), y0, rtol=1e-12, atol=1e-14)
    after = solve_ivp(lambda t, y: rhs(y, 1.0), (T_JUMP, T_END), before.y[:, -1], rtol=1e-12, atol=1e-14,
                      dense_output=True)
    return after.sol


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--backend", default="python", choices=("python", "numba"))
    ap.add_argument("--methods", nargs="+", default=["block-lstable", "spark", "generalized-alpha"])
    args = ap.parse_args()
    print(f"{'model':11s} {'method':18s} {'backend':8s} {'first step':>11s} {'t = 1':>9s}")
    for name, (make, u, rhs, y0, coordinate) in CASES.items():
        sol = reference(rhs, y0)
        backend = "python" if name == "oscillator" else args.backend   # a user model: python
        for method in args.methods:
            it = make_integrator(make(), method, backend=backend, h=H)
            it.initialize(0.0)
            it.advance(T_JUMP)
            it.set_inputs(np.array(u))
            it.advance(T_JUMP + H)
            first = abs(coordinate(it.y) - sol(T_JUMP + H)[0])
            it.advance(T_END)
            print(f"{name:11s} {method:18s} {backend:8s} {first:11.2g} {abs(coordinate(it.y) - sol(T_END)[0]):9.2g}")


if __name__ == "__main__":
    main()
