"""Cost of a driven run: a new input at every 1 ms communication step (an FMU host,
the ROS node, a discrete controller), 0.5 s, per method.

bdf restarts at order 1 with a fresh step-size search on every new input, a
one-step method restarts at no cost: this is why the default rule
(cosim.method_choice) picks generalized-alpha for driven plants.  Prints steps,
residual (RHS) evaluations and wall seconds (Simulation, backend ``--backend``);
the input is 0.1·sin(10 t) on the model's first input.

    python benchmarks/driven_loop.py [--models pendulum two_link] [--backend python]
"""
import argparse
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from cosim import Simulation  # noqa: E402


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--models", nargs="+", default=["pendulum", "two_link"])
    p.add_argument("--methods", nargs="+", default=["generalized-alpha", "bdf", "dopri5"])
    p.add_argument("--backend", choices=("python", "numba", "auto"), default="python")
    p.add_argument("--rtol", type=float, default=1e-6)
    args = p.parse_args(argv)
    print(f"{'model':10s} {'method':18s} {'steps':>6s} {'res':>6s} {'wall[s]':>8s}   "
          f"(0.5 s, 1 ms communication steps, new input each, rtol {args.rtol:g})")
    for model in args.models:
        for method in args.methods:
            sim = Simulation(model, method=method, backend=args.backend, rtol=args.rtol,
                             atol=args.rtol / 100)
            names = sim.model.input_names
            t0, t, dt = time.perf_counter(), 0.0, 1e-3
            for _ in range(500):
                if names:
                    sim.set_inputs({names[0]: 0.1 * np.sin(10 * t)})
                sim.do_step(t, dt)
                t += dt
            st = sim.stats
            print(f"{model:10s} {method:18s} {st['steps']:6d} {st['residual_evaluations']:6d} "
                  f"{time.perf_counter() - t0:8.2f}", flush=True)


if __name__ == "__main__":
    main()
