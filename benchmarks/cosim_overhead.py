"""Cost of one communication step of cosim.Simulation (µs, median and p99) and the
real-time factor, at 1 ms communication steps:

* LTI plant (default mass-spring, 2 states) with the exact state-transition method;
* the same plant with a discrete state-feedback block at 1 ms (multirate path);
* generalized-α in fixed-step mode (h = 1 ms) on ``two_link``;
* BDF (adaptive, rtol 1e-4) on ``andrews`` (the seven-body mechanism, 0.03 s runs).

A communication step is timed as a master sees it: set_inputs (where inputs
change), do_step, get_outputs.  RTF = 1 ms / (median or mean step time); the
mean includes preemption spikes on a shared machine (see p99).
"overhead" = median communication step minus the median of the bare integrator
``advance`` over the same interval (the stepper's own cost: validation, snapshot
for all-or-nothing semantics, blocks, outputs).  Methods not yet present are
skipped and reported.  Goals (issue 3): LTI < 20 µs per step; two_link at 1 kHz
with a real-time factor >= 10.

    python benchmarks/cosim_overhead.py [--quick]
"""
import argparse
import statistics
import sys
import time

import numpy as np

import cosim
from cosim.blocks import StateFeedback
from cosim.integrators import available_methods


def percentile(values, q):
    return float(np.percentile(np.asarray(values), q))


def time_steps(sim, n, dt, inputs=None, t_limit=None):
    """Wall times (µs) of n full communication steps as a master sees them:
    set_inputs (if any), do_step(t, dt), get_outputs (restarting at t_limit)."""
    out = []
    perf = time.perf_counter_ns
    values = [None if inputs is None else inputs(k) for k in range(n)]
    for k in range(n):
        if t_limit is not None and sim.time + dt > t_limit + 1e-12:
            sim.reset()
        u = values[k]
        t0 = perf()
        if u is not None:
            sim.set_inputs(u)
        sim.do_step(sim.time, dt)
        sim.get_outputs()
        out.append((perf() - t0) / 1000.0)
    return out


def bare_integrator(make, n, dt, t_limit=None):
    """Per-interval wall times (µs) of the integrator alone (advance to t + dt)."""
    sim = make()
    integ = sim.integrator
    out = []
    perf = time.perf_counter_ns
    for k in range(n):
        if t_limit is not None and integ.t + dt > t_limit + 1e-12:
            sim.reset()
            integ = sim.integrator
        target = integ.t + dt
        t0 = perf()
        integ.advance(target)
        out.append((perf() - t0) / 1000.0)
    return out


def row(name, times, bare, dt):
    med, p99 = statistics.median(times), percentile(times, 99)
    rtf_med = dt * 1e6 / med
    rtf_mean = dt * 1e6 / statistics.mean(times)
    over = med - statistics.median(bare) if bare else float("nan")
    print(f"{name:46s} {med:9.1f} {p99:9.1f} {over:9.1f} {rtf_med:9.1f} {rtf_mean:9.1f}")
    return med, p99, over, rtf_med, rtf_mean


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="fewer steps")
    args = ap.parse_args(argv)
    n_fast = 2000 if args.quick else 20000
    n_slow = 300 if args.quick else 3000
    dt = 1e-3
    methods = set(available_methods())
    print(f"cosim {cosim.__version__}, communication step {dt * 1e3:g} ms, python {sys.version.split()[0]}")
    print(f"{'case':46s} {'median µs':>9s} {'p99 µs':>9s} {'overhead':>9s} {'RTF med':>9s} {'RTF mean':>9s}")
    results = {}

    def lti():
        return cosim.Simulation(model="lti", method="state-transition")

    sim = lti()
    time_steps(sim, 200, dt, inputs=lambda k: [np.sin(k * 1e-2)])  # warm the Φ/H cache
    results["lti"] = row("LTI state-transition (inputs change each step)",
                         time_steps(sim, n_fast, dt, inputs=lambda k: [np.sin(k * 1e-2)]),
                         bare_integrator(lti, n_fast, dt), dt)
    sim = lti()
    time_steps(sim, 200, dt)
    results["lti_const"] = row("LTI state-transition (constant input)", time_steps(sim, n_fast, dt),
                               bare_integrator(lti, n_fast, dt), dt)

    def lti_fb():
        return cosim.Simulation(model="lti", method="state-transition",
                                blocks=[StateFeedback("k", 0.001, [[16.0, 5.6]], outputs=["f"])],
                                connections=["position -> k.x0", "velocity -> k.x1", "k.f -> force"])

    sim = lti_fb()
    time_steps(sim, 200, dt)
    results["lti_block"] = row("LTI + state feedback block at 1 ms", time_steps(sim, n_fast // 2, dt),
                               bare_integrator(lti, n_fast // 2, dt), dt)

    if "generalized-alpha" in methods:
        for backend in ("python", "numba"):
            def ga(backend=backend):
                return cosim.Simulation(model="two_link", method="generalized-alpha", h=dt,
                                        backend=backend)
            sim = ga()
            if sim.backend != backend:
                print(f"generalized-alpha on {backend}: not available ({sim.backend} runs instead; skipped)")
                continue
            n = n_slow if backend == "python" else n_fast
            time_steps(sim, 50, dt)
            results[f"ga_{backend}"] = row(f"generalized-alpha h=1 ms, two_link [{backend}]",
                                           time_steps(sim, n, dt), bare_integrator(ga, n, dt), dt)
            sim = ga()
            time_steps(sim, 50, dt)
            results[f"ga_{backend}_in"] = row(
                f"  same, torques change every step [{backend}]",
                time_steps(sim, n, dt, inputs=lambda k: [0.5 * np.sin(k * 1e-2), -0.2]),
                bare_integrator(ga, n, dt), dt)
        results["ga"] = results.get("ga_numba", results.get("ga_python"))
    else:
        print("generalized-alpha: not available yet (skipped)")

    if "bdf" in methods:
        def bdf():
            return cosim.Simulation(model="andrews", method="bdf", rtol=1e-4, atol=1e-6)
        sim = bdf()
        results["bdf"] = row("BDF rtol 1e-4, andrews (0.03 s runs)", time_steps(sim, n_slow, dt, t_limit=0.03),
                             bare_integrator(bdf, n_slow, dt, t_limit=0.03), dt)
    else:
        print("bdf: not available yet (skipped)")

    print()
    lti_ok = results["lti"][0] < 20.0
    print(f"goal LTI < 20 µs per step: {'met' if lti_ok else 'NOT met'} ({results['lti'][0]:.1f} µs median)")
    if "ga" in results:
        print(f"goal two_link at 1 kHz with real-time factor >= 10: "
              f"{'met' if results['ga'][3] >= 10 else 'NOT met'} (RTF {results['ga'][3]:.1f} from the "
              f"median, {results['ga'][4]:.1f} from the mean)")
    if "ga_numba" in results:
        print(f"goal (issue 13) two_link <= 10 µs per communication step (RTF >= 100) on numba: "
              f"{'met' if results['ga_numba'][0] <= 10.0 else 'NOT met'} "
              f"({results['ga_numba'][0]:.1f} µs median; {results['ga_numba_in'][0]:.1f} µs with inputs "
              f"changing every step)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
