"""Per-step cost of a cosim FMU driven by fmpy vs calling cosim.Simulation directly.

Both run the same model with the same inputs at 1 ms communication steps, in
lock-step (one FMU step, then the same direct step), so that every pair does
bit-identical numerical work; the FMU overhead of a step is the difference of
the pair.  Two loops are timed:

* ``step``: ``fmu.doStep`` (inputs stored beforehand by setReal) vs
  ``sim.set_inputs`` + ``sim.do_step``;
* ``exchange``: setReal(inputs) + doStep + getReal(outputs) vs
  ``sim.set_inputs`` + ``sim.do_step`` + ``sim.get_outputs``.

Usage: ``python benchmarks/fmu_overhead.py [--quick] [--steps N]``.
Goal: FMU overhead below 50 µs per step (median).
"""
import argparse
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

CASES = [  # (label, model, build kwargs, input name, output names)
    ("pendulum / generalized-alpha (adaptive)", "pendulum", {}, "torque",
     ["angle", "angular_velocity", "rod_force"]),
    ("lti / state-transition (exact ZOH)", "lti", {"method": "state-transition"}, "force",
     ["position", "velocity"]),
    ("two_link / generalized-alpha (h = 1 ms)", "two_link", {"step": 1e-3}, "tau1",
     ["joint1_angle", "joint2_angle", "joint1_rate", "joint2_rate"]),
]


def _percentiles(x):
    x = np.asarray(x) * 1e6
    return np.median(x), np.percentile(x, 99)


def run_case(label, model, kwargs, input_name, output_names, n_steps, workdir):
    import cosim
    from fmu.builder import build_fmu
    from fmu.host import open_slave

    path = build_fmu(model, Path(workdir) / f"bench_{model}.fmu", **kwargs)
    fmu, vr = open_slave(path, "bench")
    sim_kwargs = {("h" if k == "step" else k): v for k, v in kwargs.items()}  # build_fmu's step = h
    sim = cosim.Simulation(model=model, **sim_kwargs)

    h = 1e-3
    in_vr, out_vr = [vr[input_name]], [vr[n] for n in output_names]
    in_index = sim.input_names.index(input_name)
    u = np.zeros(len(sim.input_names))
    perf = time.perf_counter
    timings = {"fmu_step": [], "sim_step": [], "fmu_exchange": [], "sim_exchange": []}
    t = 0.0
    mismatch = 0.0
    for k in range(n_steps):
        value = 0.5 * np.sin(2.0 * t)
        exchange = k % 2 == 0  # alternate the two loop shapes
        u[in_index] = value
        if exchange:
            t0 = perf()
            fmu.setReal(in_vr, [value])
            fmu.doStep(t, h)
            out_fmu = fmu.getReal(out_vr)
            t1 = perf()
            sim.set_inputs(u)
            sim.do_step(t, h)
            out_sim = sim.get_outputs()
            t2 = perf()
            timings["fmu_exchange"].append(t1 - t0)
            timings["sim_exchange"].append(t2 - t1)
            mismatch = max(mismatch, float(np.max(np.abs(np.asarray(out_fmu) - out_sim[:len(out_fmu)]))))
        else:
            fmu.setReal(in_vr, [value])  # only stored; the FMU hands it over in doStep
            t0 = perf()
            fmu.doStep(t, h)
            t1 = perf()
            sim.set_inputs(u)
            sim.do_step(t, h)
            t2 = perf()
            timings["fmu_step"].append(t1 - t0)
            timings["sim_step"].append(t2 - t1)
        t = (k + 1) * h
    fmu.terminate()
    fmu.freeInstance()

    rows = []
    for loop in ("step", "exchange"):
        f, s = np.array(timings[f"fmu_{loop}"]), np.array(timings[f"sim_{loop}"])
        fm, fp = _percentiles(f)
        sm, sp = _percentiles(s)
        om, op = _percentiles(f - s)
        rows.append((loop, fm, fp, sm, sp, om, op))
    return rows, mismatch


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer steps")
    parser.add_argument("--steps", type=int, default=None, help="communication steps per case")
    args = parser.parse_args(argv)
    n_steps = args.steps or (600 if args.quick else 4000)
    print(f"FMU (fmpy FMU2Slave -> FMU binary -> cosim.Simulation) vs cosim.Simulation directly, "
          f"h = 1 ms, {n_steps} steps per case (alternating loop shapes), times in µs")
    print(f"{'case':42s} {'loop':9s} {'FMU med':>8s} {'FMU p99':>8s} {'sim med':>8s} {'sim p99':>8s}"
          f" {'ovh med':>8s} {'ovh p99':>8s}")
    worst = 0.0
    with tempfile.TemporaryDirectory() as workdir:
        for label, model, kwargs, input_name, outputs in CASES:
            rows, mismatch = run_case(label, model, kwargs, input_name, outputs, n_steps, workdir)
            for loop, fm, fp, sm, sp, om, op in rows:
                print(f"{label:42s} {loop:9s} {fm:8.1f} {fp:8.1f} {sm:8.1f} {sp:8.1f} {om:8.1f} {op:8.1f}")
                worst = max(worst, om)
            print(f"{'':42s} max |FMU output - Simulation output| = {mismatch:.1e}")
    verdict = "met" if worst < 50.0 else "NOT met"
    print(f"goal: median FMU overhead < 50 µs per step -> {verdict} (worst median {worst:.1f} µs)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
