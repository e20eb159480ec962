"""Memory over long runs (issue 14): resident set size growth per 1e5
communication steps, for configurations whose histories used to grow.

* ``bdf``  on the pendulum (order history: +11 MB per 1e5 steps before);
* ``bdf``  on two_link with the inputs changing every communication step
  (restarts, +88 MB per 1e5 steps before; ~20 ms per step, so it runs a
  tenth of ``--steps``);
* ``generalized-alpha`` on two_link (compiled backend where available);
* ``dopri5`` on the pendulum;
* the shipped ``pendulum_pd`` scenario (plant + user block + PID, multirate).

Each run takes ``--steps`` communication steps of 1 ms; RSS is read from
/proc/self/statm every ``steps/20`` steps; the growth is the least-squares
slope of RSS over the second half of the run (after warm-up: caches, JIT),
scaled to 1e5 steps.  Goal: < 1 MB per 1e5 steps.

    python benchmarks/long_run.py                  # 20 000 steps each (short)
    python benchmarks/long_run.py --steps 1000000  # the issue's 1e6-step run
"""
import argparse
import os
import sys
import time
import warnings
from pathlib import Path

import numpy as np

import cosim

PAGE = os.sysconf("SC_PAGE_SIZE")
ROOT = Path(__file__).resolve().parents[1]


def rss_mb():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * PAGE / 2 ** 20


def configurations():
    from cosim.scenario import load_scenario
    yield "bdf pendulum", lambda: cosim.Simulation("pendulum", "bdf", rtol=1e-6, atol=1e-8), None, 1
    yield ("bdf two_link inputs/step", lambda: cosim.Simulation("two_link", "bdf", rtol=1e-6, atol=1e-8),
           lambda sim, k: sim.set_inputs(np.full(len(sim.input_names), 0.1 * np.sin(1e-3 * k))), 10)
    yield ("generalized-alpha two_link", lambda: cosim.Simulation("two_link", "generalized-alpha"),
           None, 1)
    yield "dopri5 pendulum", lambda: cosim.Simulation("pendulum", "dopri5", rtol=1e-6, atol=1e-8), None, 1
    yield ("scenario pendulum_pd", lambda: load_scenario(ROOT / "scenarios" / "pendulum_pd.yaml").build(),
           None, 1)


def run(make, drive, steps, dt=1e-3, progress=False):
    """RSS samples (step, MB) over ``steps`` communication steps."""
    sim = make()
    samples, every = [], max(1, steps // 20)
    wall = time.perf_counter()
    for k in range(steps):
        if drive is not None:
            drive(sim, k)
        sim.do_step(sim.time, dt)
        if k % every == 0 or k == steps - 1:
            samples.append((k + 1, rss_mb()))
            if progress:
                print(f"  step {k + 1:9d}  RSS {samples[-1][1]:8.2f} MB  "
                      f"{time.perf_counter() - wall:8.1f} s", flush=True)
    return np.array(samples), time.perf_counter() - wall


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--steps", type=int, default=20_000, help="communication steps per configuration")
    p.add_argument("--only", default="", help="run only configurations whose name contains this")
    p.add_argument("--progress", action="store_true", help="print every RSS sample as it is taken")
    args = p.parse_args(argv)
    warnings.simplefilter("ignore")
    print(f"RSS growth over {args.steps} communication steps of 1 ms (slope over the second half)")
    print(f"{'configuration':30s} {'steps':>8s} {'RSS start MB':>12s} {'RSS end MB':>10s} "
          f"{'MB per 1e5 steps':>17s} {'wall s':>7s}")
    worst = 0.0
    for name, make, drive, divisor in configurations():
        if args.only not in name:
            continue
        steps = args.steps // divisor
        s, wall = run(make, drive, steps, progress=args.progress)
        half = s[len(s) // 2:]
        slope = np.polyfit(half[:, 0], half[:, 1], 1)[0] if len(half) > 1 else 0.0
        growth = slope * 1e5
        worst = max(worst, growth)
        print(f"{name:30s} {steps:8d} {s[0, 1]:12.1f} {s[-1, 1]:10.1f} {growth:17.3f} {wall:7.1f}",
              flush=True)
    print(f"worst growth: {worst:.3f} MB per 1e5 steps (goal < 1)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
