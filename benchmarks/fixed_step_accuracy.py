"""Fixed-step accuracy rule (cosim.fixed_step): the local error estimate each method
keeps in fixed-step mode against the true local and global errors, and the verdict.

For each model, method and h: the run from the model's initial state (zero inputs)
to ``t_end`` in steps of h; per step the method's local error estimate (in the
weights rtol|q| + atol; generalized-α eq. 34's h²‖x‖_W, rk4 the positions' part of
h/6·(k4 − f(y_new)), dopri5 its embedded estimate, the BDF family its error test's
c_e^k‖∇^{k+1}y‖ of (q, v), local-index1 its (x_trap − x_Heun)/3, rkc-penalty its
0.8(y − y_new) + 0.4h(f0 + f_new), block-lstable the positions' part of y_{k+1} minus
its order-r quadrature, spark (stages = 1) the positions' Hermite defect
q1 − q0 − h/2 (v0 + v1) + h²/12 (a1 − a0), spark (stages 2, 3) its two-step defect
q_{n+1} − q_{n−1} − h Σ β_j v_j − h² Σ γ_j q''_j over the last two steps, halved); on a
sample of steps the true local error of q in the same weights (scipy DOP853 at 1e-12 on
the index-1 ODE from the step's start (q, v)); the global error
max_k |q_k − q_ref,k| / max(1, |q_ref,k|) at t_end; the verdict: "ok", "warn" (largest
estimate > fixed_step.WARN_FACTOR) or "FAIL" (a step's estimate above the refusal,
1/rtol — local-index1 1/(10·rtol): FixedStepError, the run stops there).  The model
"oscillator" is q'' = −4q from q = 1 at rest.  rtol 1e-6, atol 1e-8 (the CLI's
defaults).  Robots need the ``robots`` extra.

    PYTHONPATH=$PWD python benchmarks/fixed_step_accuracy.py
    PYTHONPATH=$PWD python benchmarks/fixed_step_accuracy.py --models andrews --h 1e-3 3e-4
    PYTHONPATH=$PWD python benchmarks/fixed_step_accuracy.py --methods spark --stages 2 3
"""
import argparse
import os
import sys
import warnings

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from cosim import fixed_step  # noqa: E402
from fixed_step_floor import model_named, reference  # noqa: E402  (this folder)
from cosim.errors import ConvergenceError, FixedStepError  # noqa: E402
from cosim.integrators import make_integrator  # noqa: E402
from cosim.integrators.li1_record import REFUSAL as LI1_REFUSAL  # noqa: E402
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests"))
from reference import Oscillator  # noqa: E402  (q'' = −4q from q = 1 at rest)

# (model, method, steps, t_end): the real-time cases (1 ms) and the ones to refuse
CASES = [
    ("two_link", "generalized-alpha", (1e-2, 3e-3, 1e-3), 0.5),
    ("two_link", "rk4", (1e-2, 1e-3), 0.5),
    ("pendulum", "generalized-alpha", (1e-1, 1e-2, 1e-3), 1.0),
    ("pendulum", "generalized-alpha-i2", (1e-2, 1e-3), 1.0),
    ("pendulum", "rk4", (1e-2, 1e-3), 1.0),
    ("panda", "generalized-alpha", (1e-3,), 0.2),
    ("panda", "rk4", (1e-2, 1e-3), 0.2),
    ("ur5", "generalized-alpha", (1e-3,), 0.2),
    ("ur5", "rk4", (1e-3,), 0.2),
    ("andrews", "generalized-alpha", (1.0, 1e-1, 3e-3, 1e-3, 3e-4, 1e-4), 0.03),
    ("andrews", "rk4", (1e-2, 3e-3, 1e-3, 1e-4), 0.03),
    ("andrews", "dopri5", (1e-3, 1e-4, 1e-5), 0.03),
    ("two_link", "bdf", (1e-2, 1e-3), 0.5),
    ("pendulum", "bdf", (1e-1, 1e-2, 1e-3), 1.0),
    ("pendulum", "bdf-i2", (1e-2, 1e-3), 1.0),
    ("pendulum", "bdf-i1", (1e-2, 1e-3), 1.0),
    ("panda", "bdf", (1e-3,), 0.2),
    ("ur5", "bdf", (1e-3,), 0.2),
    ("andrews", "bdf", (1e-3, 3e-4, 1e-4, 3e-5), 0.03),
    ("andrews", "bdf-i2", (1e-3, 1e-4, 3e-5), 0.03),
    ("andrews", "bdf-i1", (1e-3, 1e-4, 3e-5), 0.03),
    ("crank_slider", "bdf", (2.5e-3,), 0.1),
    ("two_link", "local-index1", (1e-2, 1e-3), 0.5),
    ("pendulum", "local-index1", (1e-1, 1e-2, 1e-3), 1.0),
    ("panda", "local-index1", (1e-3,), 0.2),
    ("ur5", "local-index1", (1e-3,), 0.2),
    ("andrews", "local-index1", (1e-3, 7e-4, 5e-4, 1e-4), 0.03),
    ("two_link", "rkc-penalty", (1e-2, 1e-3), 0.5),
    ("pendulum", "rkc-penalty", (1e-1, 1e-2, 1e-3), 1.0),
    ("andrews", "rkc-penalty", (1e-3, 1e-4), 0.03),
    ("two_link", "block-lstable", (1e-1, 1e-2, 1e-3), 0.5),
    ("pendulum", "block-lstable", (3e-1, 1e-1, 1e-2, 1e-3), 1.0),
    ("panda", "block-lstable", (1e-2, 1e-3), 0.2),
    ("andrews", "block-lstable", (1e-3, 1e-4, 3e-5), 0.03),
    ("crank_slider", "block-lstable", (2.5e-3, 1e-3), 0.1),
    ("two_link", "spark", (1e-1, 1e-2, 1e-3), 0.5),
    ("pendulum", "spark", (3e-1, 1e-1, 1e-2, 1e-3), 1.0),
    ("panda", "spark", (1e-2, 1e-3), 0.2),
    ("andrews", "spark", (1e-3, 1e-4, 3e-5), 0.03),
    ("crank_slider", "spark", (2.5e-3, 1e-3), 0.1),
    # stages 2 and 3: the two-step defect (the first step of a run is not judged)
    ("oscillator", "spark", (2e-1, 1e-1, 5e-2, 2e-2), 2.0, {"stages": 2}),
    ("oscillator", "spark", (2e-1, 1e-1, 5e-2, 2e-2), 2.0, {"stages": 3}),
    ("pendulum", "spark", (3e-1, 1e-1, 3e-2, 1e-2, 3e-3), 1.0, {"stages": 2}),
    ("pendulum", "spark", (1e-1, 3e-2, 1e-2), 1.0, {"stages": 3}),
    ("two_link", "spark", (1e-1, 1e-2, 1e-3), 0.5, {"stages": 2}),
    ("andrews", "spark", (1e-3, 5e-4, 3e-4), 0.03, {"stages": 2}),
    ("andrews", "spark", (1e-3, 5e-4), 0.03, {"stages": 3}),
    ("crank_slider", "spark", (2e-2, 1e-2, 2.5e-3, 1e-3), 0.1, {"stages": 2}),
    ("crank_slider", "spark", (1e-2,), 0.1, {"stages": 3}),
]
RTOL, ATOL = 1e-6, 1e-8


def flow(model, u, t0, y0, h):
    """q of the exact (DOP853, 1e-12) solution of the index-1 ODE from (t0, y0) at t0 + h."""
    return reference(model, t0 + h, u, t0=t0, y0=y0, tol=1e-12)


def run_case(model, method, h, t_end, u, q_ref_at_end, samples, backend, options=None):
    n = model.n_q
    ig = make_integrator(model, method, backend=backend, h=h, rtol=RTOL, atol=ATOL, **(options or {}))
    ig.initialize(0.0, None, u)
    steps = max(1, int(round(t_end / h)))
    every = max(1, steps // samples)
    local = []
    verdict = "ok"
    for k in range(steps):
        y0, t0 = ig.y.copy(), ig.t
        try:
            ig.advance(min(t0 + h, t_end) if k < steps - 1 else t_end)
        except FixedStepError as exc:
            verdict = f"FAIL at t={exc.t:.3g} (the step's estimate {exc.estimate:.3g})"
            break
        except ConvergenceError as exc:
            verdict = f"error: {type(exc).__name__} at t={exc.t}"
            break
        if k % every == 0 and k > 0:
            ye = flow(model, u, t0, y0, ig.t - t0)
            local.append(np.max(np.abs(ig.q - ye) / (RTOL * np.abs(y0[:n]) + ATOL)))
    est = ig.fixed_step_error
    if verdict == "ok" and est is not None and est > fixed_step.WARN_FACTOR:
        verdict = "warn"
    glob = float("nan")
    if verdict in ("ok", "warn"):
        q_ref = q_ref_at_end()
        glob = float(np.max(np.abs(ig.q - q_ref) / np.maximum(1.0, np.abs(q_ref))))
    true_local = max(local) if local else float("nan")
    return est, true_local, glob, verdict


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--models", nargs="+", default=None)
    p.add_argument("--methods", nargs="+", default=None)
    p.add_argument("--h", nargs="+", type=float, default=None, help="steps (default: per case)")
    p.add_argument("--samples", type=int, default=20, help="steps per run whose true local error is measured")
    p.add_argument("--backend", default="numba")
    p.add_argument("--stages", nargs="+", type=int, default=None, help="spark: only these stages")
    args = p.parse_args(argv)
    warnings.simplefilter("ignore")
    print(f"rtol {RTOL:g}, atol {ATOL:g}; warn above {fixed_step.WARN_FACTOR:g}, fail above "
          f"1/rtol = {fixed_step.UNRESOLVED / RTOL:.3g} (local-index1: 1/({LI1_REFUSAL:g}·rtol) = "
          f"{fixed_step.UNRESOLVED / (LI1_REFUSAL * RTOL):.3g}; estimates in tolerance weights)")
    print(f"{'model':9} {'method':21} {'h':>8} {'estimate':>9} {'true local':>10} {'est/true':>8} "
          f"{'global err':>10}  verdict")
    refs = {}
    for name, method, hs, t_end, *options in CASES:
        options = options[0] if options else {}
        if args.models and name not in args.models or args.methods and method not in args.methods:
            continue
        if args.stages and options.get("stages", 1) not in args.stages:
            continue
        label = method + "".join(f" {k}={v}" for k, v in options.items())
        try:
            model = Oscillator() if name == "oscillator" else model_named(name)
        except Exception as exc:  # the robots extra missing
            print(f"{name:9} skipped: {exc}")
            continue
        u = np.asarray(model.default_inputs(), dtype=float)
        def q_ref(name=name, model=model, u=u, t_end=t_end):
            if name not in refs:
                refs[name] = flow(model, u, 0.0, model.initial_y(), t_end)
            return refs[name]
        for h in args.h or hs:
            est, tl, glob, verdict = run_case(model, method, h, max(t_end, 2 * h), u, q_ref,
                                              args.samples, args.backend, options)
            ratio = est / tl if est is not None and tl > 0 else float("nan")
            est_s = "-" if est is None else f"{est:9.2e}"
            print(f"{name:9} {label:21} {h:8.2g} {est_s:>9} {tl:10.2e} {ratio:8.2g} {glob:10.2e}  {verdict}",
                  flush=True)


if __name__ == "__main__":
    main()
