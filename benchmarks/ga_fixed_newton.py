"""Fixed-step generalized-α: Newton iterations, LU factorizations and CPU time per step.

Cases (h = 1 ms, one communication step = one integrator step, inputs held):
two_link (the library model, default inputs) and the Franka Panda (9 joints,
``load_urdf(example_robot_path(), position_limits=False)``, 0.1 on every joint),
generalized-α beside rk4 on the same model.  Per row: CPU µs per step
(``time.process_time``, median over the repetitions of a block of N steps from the
same state), Newton iterations, residual evaluations and LU factorizations per step.

    python benchmarks/ga_fixed_newton.py [--steps N] [--repeat R] [--backend numba|python]
"""
import argparse
import os
import statistics
import sys
import time
import warnings

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import cosim  # noqa: E402
from cosim.errors import FixedStepAccuracyWarning  # noqa: E402
from cosim.models.urdf import example_robot_path, load_urdf  # noqa: E402

H = 1e-3


def row(label, model, method, u, steps, repeat, backend):
    sim = cosim.Simulation(model=model, method=method, h=H, backend=backend)
    if u is not None:
        sim.set_inputs(u)
    for _ in range(20):
        sim.do_step(sim.time, H)
    start = sim.get_state()
    times = []
    keys = ("newton_iterations", "residual_evaluations", "lu_factorizations")
    for k in range(repeat + 1):   # (the first block untimed: warm caches)
        sim.set_state(start)
        s0 = dict(sim.stats)
        c0 = time.process_time()
        for _ in range(steps):
            sim.do_step(sim.time, H)
        if k > 0:
            times.append((time.process_time() - c0) / steps * 1e6)
    st = sim.stats   # (the counts of the last block: every block starts from the same state)
    per = {k: (st.get(k, 0) - s0.get(k, 0)) / steps for k in keys}
    print(f"  {label:34s} {statistics.median(times):8.2f} µs (min {min(times):7.2f})   "
          f"Newton {per['newton_iterations']:5.2f}  residuals {per['residual_evaluations']:5.2f}  "
          f"LU {per['lu_factorizations']:5.3f} per step", flush=True)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--steps", type=int, default=1000)
    ap.add_argument("--repeat", type=int, default=11)
    ap.add_argument("--backend", default="numba")
    args = ap.parse_args(argv)
    # (the Panda under 0.1 N m falls: its estimate at rtol 1e-6 is warned about; not what is timed)
    warnings.simplefilter("ignore", FixedStepAccuracyWarning)
    panda = load_urdf(example_robot_path(), position_limits=False)
    u_panda = 0.1 * np.ones(panda().n_q)
    print(f"CPU µs per 1 ms step ({args.backend} backend), median of {args.repeat} blocks of "
          f"{args.steps} steps")
    row("two_link, generalized-alpha", "two_link", "generalized-alpha", None, args.steps, args.repeat,
        args.backend)
    row("Panda, generalized-alpha", panda, "generalized-alpha", u_panda, args.steps, args.repeat,
        args.backend)
    row("Panda, rk4", panda, "rk4", u_panda, args.steps, args.repeat, args.backend)


if __name__ == "__main__":
    main()
