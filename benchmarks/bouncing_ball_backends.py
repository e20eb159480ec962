"""The bouncing ball (events) on both backends (issue 13 item 3).

bouncing_ball ships kernels, so ``backend="auto"`` runs its continuous equations in
the compiled step loop; the switching functions and jump maps stay in Python and
``Simulation`` locates them on the integrator's dense output, returning to Python
after every accepted step.  For each method: 450 communication steps of 10 ms
(the ball stops at 3.96 s after 17 events), rtol 1e-8, atol 1e-10, event_tolerance
1e-10.

    python benchmarks/bouncing_ball_backends.py [--repeat 5] [--methods generalized-alpha bdf dopri5 rk4]

Columns: events (python/numba), max |Δt| of the event times numba vs python, the
reference's own spread (starts perturbed by 1e-15 and -2e-15 relative), max |Δy|
over the communication points and its spread, steps, and the CPU time of a
whole run (best of --repeat, this process, entries already loaded).
"""
import argparse
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import cosim  # noqa: E402
from cosim.models.bouncing_ball import BouncingBall  # noqa: E402


def run(method, backend, rel=0.0):
    sim = cosim.Simulation(model=BouncingBall(h0=1.0 + rel), method=method, backend=backend,
                           rtol=1e-8, atol=1e-10, event_tolerance=1e-10)
    ys = []
    t0 = time.process_time()
    for _ in range(450):
        sim.do_step(sim.time, 0.01)
        ys.append(sim.y.copy())
    cpu = time.process_time() - t0
    events = [e["time"] for e in sim.event_log if e["kind"] == "state"]
    return sim, np.array(ys), np.array(events), cpu


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--methods", nargs="+", default=["generalized-alpha", "bdf", "dopri5", "rk4"])
    args = ap.parse_args()
    print(f"{'method':18s} {'events':>7s} {'|dt| nb-py':>10s} {'spread t':>9s} {'|dy| nb-py':>10s} "
          f"{'spread y':>9s} {'steps':>9s} {'cpu py ms':>9s} {'cpu nb ms':>9s}")
    for method in args.methods:
        ref, y_ref, ev_ref, _ = run(method, "python")
        comp, y_c, ev_c, _ = run(method, "auto")
        if comp.backend != "numba":
            print(f"{method:18s} numba not used: {comp.backend_reason}")
            continue
        others = [run(method, "python", rel) for rel in (1e-15, -2e-15)]
        same = len(ev_c) == len(ev_ref) and all(len(o[2]) == len(ev_ref) for o in others)
        dt = np.max(np.abs(ev_c - ev_ref)) if same else np.inf
        st = max(np.max(np.abs(o[2] - ev_ref)) for o in others) if same else np.inf
        dy = np.max(np.abs(y_c - y_ref))
        sy = max(np.max(np.abs(o[1] - y_ref)) for o in others)
        cpu = {b: min(run(method, b)[3] for _ in range(args.repeat)) for b in ("python", "auto")}
        print(f"{method:18s} {len(ev_ref):>3d}/{len(ev_c):<3d} {dt:10.1e} {st:9.1e} {dy:10.1e} {sy:9.1e} "
              f"{ref.stats['steps']:>4d}/{comp.stats['steps']:<4d} {cpu['python'] * 1e3:9.1f} "
              f"{cpu['auto'] * 1e3:9.1f}")
    print(f"(load {os.getloadavg()[0]:.1f})")


if __name__ == "__main__":
    main()
