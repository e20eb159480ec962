"""The default method for a fixed step h (cosim.method_choice): rk4 against
generalized-α on unconstrained and constrained multibody models.

For each model, method and h: a Simulation (compiled backend where there is one)
from the model's initial state with every input held at ``--u`` (0.1) to
``--t-end`` in one communication step; the outcome ("ok", "warn": a
FixedStepAccuracyWarning, "refused": FixedStepError, the run stops), the error
max_k |q_k − q_ref,k| / max(1, |q_ref,k|) at the end against dopri5 at rtol 1e-12,
atol 1e-14 (events located as in any run), CPU µs per step (the least of
``--repeat`` runs after a warm-up run) and h·max|λ|, the rule's stiffness estimate
(cosim.method_choice.largest_rate: the linearisation at the initial state; rk4 is
stable for h·|λ| up to about 2.8 on the negative real and imaginary axes, the rule
takes rk4 up to 2).  "default": what the rule picks for that h.

Models: panda (9 joints, its finger mimic joint a constraint, no stops), panda with
its stops, ur5, the planar three_link of benchmarks/three_link.urdf, and as a stiff
unconstrained case three_link with joint damping ``--damping`` (20 N·m·s/rad: an
eigenvalue of −2700/s), the library's bouncing_ball; constrained: pendulum,
two_link, crank_slider and andrews (0.03 s, h down to 10 µs).  Robots need the
``robots`` extra.

    PYTHONPATH=$PWD python benchmarks/fixed_step_default.py
    PYTHONPATH=$PWD python benchmarks/fixed_step_default.py --models panda three_link_stiff --h 1e-3
"""
import argparse
import os
import sys
import time
import warnings
from pathlib import Path

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from cosim import Simulation  # noqa: E402
from cosim.errors import CosimError, FixedStepAccuracyWarning, FixedStepError  # noqa: E402
from cosim.method_choice import default_method, largest_rate  # noqa: E402

HERE = Path(__file__).resolve().parent
STEPS = (2.5e-4, 5e-4, 1e-3, 2e-3, 5e-3, 1e-2)
ANDREWS_STEPS = (1e-5, 2.5e-5, 5e-5, 1e-4, 2.5e-4, 5e-4)
MODELS = ("panda", "panda_stops", "ur5", "three_link", "three_link_stiff", "bouncing_ball",
          "pendulum", "two_link", "crank_slider", "andrews")


def plant(name, damping):
    """(model class or name, params, t_end)."""
    from cosim.models.urdf import example_robot_path, load_urdf
    if name == "panda":
        return load_urdf(example_robot_path(), position_limits=False), {}, 1.0
    if name == "panda_stops":
        return load_urdf(example_robot_path()), {}, 1.0
    if name == "ur5":
        return load_urdf(example_robot_path("ur_description/urdf/ur5_robot.urdf")), {}, 1.0
    if name.startswith("three_link"):
        cls = load_urdf(HERE / "three_link.urdf")
        stiff = name.endswith("_stiff")
        return cls, {f"joint{i}.damping": damping for i in (1, 2, 3)} if stiff else {}, 1.0
    return name, {}, 0.03 if name == "andrews" else 1.0


def run(model, params, method, t_end, u, h=None, rtol=1e-6, atol=1e-8, options=None):
    """(q at t_end, outcome, CPU seconds, steps)."""
    sim = Simulation(model, method=method, params=params, h=h, rtol=rtol, atol=atol, backend="auto",
                     method_options=options)
    sim.set_inputs(np.full(len(sim.model.input_names), u))
    outcome = "ok"
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", FixedStepAccuracyWarning)
        t0 = time.process_time()
        try:
            sim.do_step(0.0, t_end)
        except FixedStepError:
            outcome = "refused"
        cpu = time.process_time() - t0
    if outcome == "ok" and any(issubclass(w.category, FixedStepAccuracyWarning) for w in caught):
        outcome = "warn"
    return np.array(sim.q), outcome, cpu, sim.stats["steps"]


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--models", nargs="+", default=list(MODELS), choices=MODELS)
    p.add_argument("--methods", nargs="+", default=["rk4", "generalized-alpha"])
    p.add_argument("--h", nargs="+", type=float, default=None,
                   help="fixed steps (default 0.25, 0.5, 1, 2, 5, 10 ms; andrews 10 µs to 0.5 ms)")
    p.add_argument("--u", type=float, default=0.1, help="every input held at this value")
    p.add_argument("--damping", type=float, default=20.0, help="three_link_stiff's joint damping")
    p.add_argument("--repeat", type=int, default=3)
    args = p.parse_args(argv)
    print("| model | n_q, n_c | h (ms) | h·λmax | default | rk4: outcome, error, µs/step "
          "| generalized-alpha: outcome, error, µs/step |")
    print("|---|---|---|---|---|---|---|")
    for name in args.models:
        model, params, t_end = plant(name, args.damping)
        sim = Simulation(model, params=params, backend="python")
        inst = sim.model
        rate = largest_rate(inst)
        q_ref = run(model, params, "dopri5", t_end, args.u, rtol=1e-12, atol=1e-14,
                    options={"max_steps": 10**7})[0]
        steps = args.h or (ANDREWS_STEPS if name == "andrews" else STEPS)
        for h in steps:
            cells = []
            for method in args.methods:
                try:
                    run(model, params, method, min(t_end, 20 * h), args.u, h=h)   # warm-up (compile)
                    best = None
                    for _ in range(args.repeat):
                        q, outcome, cpu, n = run(model, params, method, t_end, args.u, h=h)
                        best = cpu if best is None else min(best, cpu)
                    if outcome == "refused" or not np.all(np.isfinite(q)):
                        cells.append(f"{outcome if outcome == 'refused' else 'diverged'}")
                        continue
                    err = float(np.max(np.abs(q - q_ref) / np.maximum(1.0, np.abs(q_ref))))
                    cells.append(f"{outcome}, {err:.1e}, {best / max(n, 1) * 1e6:.0f}")
                except CosimError as exc:
                    cells.append(f"error: {str(exc)[:40]}")
            chosen = default_method(inst, fixed_step=h)
            print(f"| {name} | {inst.n_q}, {inst.n_c} | {h * 1e3:g} | {h * rate:.2g} | {chosen} | "
                  + " | ".join(cells) + " |", flush=True)


if __name__ == "__main__":
    main()
