"""Per-step cost of a cosim FMU driven by fmpy vs calling cosim.Simulation directly.

Both run the same model with the same inputs at 1 ms communication steps, in
lock-step (one FMU step, then the same direct step), so that every pair does
bit-identical numerical work; the FMU overhead of a step is the difference of
the pair.  Two loops are timed:

* ``step``: ``fmu.doStep`` (inputs stored beforehand by setReal) vs
  ``sim.set_inputs`` + ``sim.do_step``;
* ``exchange``: setReal(inputs) + doStep + getReal(outputs) vs
  ``sim.set_inputs`` + ``sim.do_step`` + ``sim.get_outputs``.

Then the layers of the two_link FMU step (generalized-α, h = 1 ms, a new input
every step), each its own instance doing the same work, setReal / doStep /
getReal timed separately:

* ``Simulation``: ``set_inputs`` / ``do_step`` / ``get_outputs`` (the core);
* ``slave (Python)``: the FMU's own slave object (its private package) called
  directly: ``set_real`` / ``do_step`` / ``get_real``;
* ``binary, Python path``: the FMU binary's ``fmi2SetReal`` / ``fmi2DoStep`` /
  ``fmi2GetReal`` through bare ctypes pointers and preallocated arrays, with
  ``COSIM_FMU_NATIVE=0``: every ``fmi2DoStep`` calls the slave's ``do_step``;
* ``binary (ctypes)``: the same calls as the binary runs them by default: after a
  completed step it steps the compiled record itself (its "native step",
  fmu/native/cosim_fmi2.cpp), no Python on the plain path;
* ``fmpy FMU2Slave``: ``setReal`` / ``doStep`` / ``getReal`` (what an importer does).

The layers take turns in blocks of 20 steps (rotating order, so machine load
hits all alike); the figures are wall-time medians of the calls (a median is
robust to the few preempted calls of a shared machine).  A second table
splits the fmpy figures by layer (differences of the medians).  All figures
come from the best of ``--rounds`` rounds (the load is printed with them).

Usage: ``python benchmarks/fmu_overhead.py [--quick] [--steps N] [--rounds R]``.
Goals: FMU overhead below 50 µs per step (median); issue 13: two_link doStep
through fmpy <= 20 µs (median, a new input set before every step).
"""
import argparse
import ctypes
import os
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
    ("two_link / generalized-alpha (h = 1 ms)", "two_link", {"step": 1e-3, "method": "generalized-alpha"}, "tau1",
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


LAYERS = ("Simulation", "slave (Python)", "binary, Python path", "binary (ctypes)", "fmpy FMU2Slave")
CALLS = ("set_inputs / do_step / get_outputs", "set_real / do_step / get_real",
         "the same, COSIM_FMU_NATIVE=0", "fmi2SetReal / fmi2DoStep / fmi2GetReal",
         "setReal / doStep / getReal")
TWO_LINK_OUT = ["joint1_angle", "joint2_angle", "joint1_rate", "joint2_rate"]


BLOCK = 20  # steps of one layer in a row; the layers take turns block by block


def layer_round(path, n_steps):
    """{layer: (setReal, doStep, getReal, total)} wall-time medians in µs of one round."""
    from fmu.bundle import package_name
    from fmu.host import open_slave

    fmu, vr = open_slave(path, "fmpy")
    raw, _ = open_slave(path, "ctypes")
    raw_py, _ = open_slave(path, "ctypes-python")  # stepped with COSIM_FMU_NATIVE=0
    pkg = package_name(read_guid(path))  # the FMU's private package, loaded by open_slave
    slave = sys.modules[pkg + ".slave_module"].SLAVE_CLASS(
        instance_name="slave", resources=os.path.join(fmu.unzipDirectory, "resources"),
        visible=False)
    slave.setup_experiment(0.0)
    slave.enter_initialization_mode()
    slave.exit_initialization_mode()
    sim = sys.modules[pkg + ".cosim.simulation"].Simulation(model="two_link", method="generalized-alpha",
                                                            h=1e-3)
    in_vr, out_vr = [vr["tau1"]], [vr[n] for n in TWO_LINK_OUT]
    u = np.zeros(len(sim.input_names))
    i_in = sim.input_names.index("tau1")

    dll = raw.dll  # the FMU binary, bare ctypes (no fmpy wrapper, arrays made once)
    do_step, set_real, get_real = dll.fmi2DoStep, dll.fmi2SetReal, dll.fmi2GetReal
    do_step.argtypes = [ctypes.c_void_p, ctypes.c_double, ctypes.c_double, ctypes.c_int]
    set_real.argtypes = get_real.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t,
                                             ctypes.c_void_p]
    do_step.restype = set_real.restype = get_real.restype = ctypes.c_int
    c_in = (ctypes.c_uint * 1)(*in_vr)
    c_val = (ctypes.c_double * 1)()
    c_out = (ctypes.c_uint * len(out_vr))(*out_vr)
    c_res = (ctypes.c_double * len(out_vr))()
    comps = {2: raw_py.component, 3: raw.component}

    h = 1e-3
    perf = time.perf_counter_ns
    times = {name: ([], [], []) for name in LAYERS}
    outputs = {}
    n_blocks = max(1, n_steps // BLOCK)
    native_env = os.environ.get("COSIM_FMU_NATIVE")
    for block in range(n_blocks):
        for j in range(len(LAYERS)):
            layer = (block + j) % len(LAYERS)
            name = LAYERS[layer]
            a, b, c = times[name]
            # the binary reads it whenever a Python fmi2DoStep completes (CosimSlave._native_arm)
            os.environ["COSIM_FMU_NATIVE"] = "0" if layer == 2 else "1"
            for k in range(block * BLOCK, (block + 1) * BLOCK):
                t = k * h
                value = 0.5 * np.sin(2.0 * t)
                if layer == 0:
                    t0 = perf()
                    u[i_in] = value
                    sim.set_inputs(u)
                    t1 = perf()
                    sim.do_step(t, h)
                    t2 = perf()
                    out = sim.get_outputs()
                elif layer == 1:
                    t0 = perf()
                    slave.set_real(in_vr, [value])
                    t1 = perf()
                    if not slave.do_step(t, h):
                        raise RuntimeError(f"slave step {k} failed")
                    t2 = perf()
                    out = slave.get_real(out_vr)
                elif layer in (2, 3):
                    comp = comps[layer]
                    t0 = perf()
                    c_val[0] = value
                    status = set_real(comp, c_in, 1, c_val)
                    t1 = perf()
                    status |= do_step(comp, t, h, 1)
                    t2 = perf()
                    status |= get_real(comp, c_out, len(out_vr), c_res)
                    out = c_res
                    if status:
                        raise RuntimeError(f"binary step {k} failed")
                else:
                    t0 = perf()
                    fmu.setReal(in_vr, [value])
                    t1 = perf()
                    fmu.doStep(t, h)
                    t2 = perf()
                    out = fmu.getReal(out_vr)
                t3 = perf()
                a.append(t1 - t0)
                b.append(t2 - t1)
                c.append(t3 - t2)
            outputs[layer] = list(out)[:len(out_vr)]
    if native_env is None:
        os.environ.pop("COSIM_FMU_NATIVE", None)
    else:
        os.environ["COSIM_FMU_NATIVE"] = native_env
    mismatch = max(float(np.max(np.abs(np.subtract(outputs[i], outputs[0]))))
                   for i in range(1, len(LAYERS)))
    for f in (fmu, raw, raw_py):
        f.terminate()
        f.freeInstance()
    result = {}
    for name, (a, b, c) in times.items():
        a, b, c = (np.asarray(x, dtype=float) / 1000.0 for x in (a, b, c))
        result[name] = (np.median(a), np.median(b), np.median(c), np.median(a + b + c))
    return result, mismatch


def read_guid(path):
    from fmpy import read_model_description
    return read_model_description(str(path)).guid


def layers(workdir, n_steps, rounds):
    from fmu.builder import build_fmu

    path = build_fmu("two_link", Path(workdir) / "layers_two_link.fmu", method="generalized-alpha",
                     step=1e-3)
    results, worst_mismatch = [], 0.0
    for _ in range(rounds):
        result, mismatch = layer_round(path, n_steps)
        worst_mismatch = max(worst_mismatch, mismatch)
        results.append(result)
    best = min(results, key=lambda r: r["fmpy FMU2Slave"][3])  # every figure from one round
    print(f"\nlayers of the two_link FMU step (generalized-α, h = 1 ms, a new input every step), "
          f"{n_steps} steps, best of {rounds} rounds (by the fmpy total), µs; "
          f"load {os.getloadavg()[0]:.2f}")
    print(f"{'calls (median wall time)':56s} {'setReal':>8s} {'doStep':>8s} {'getReal':>8s} "
          f"{'total':>8s}")
    for name, calls in zip(LAYERS, CALLS):
        cells = " ".join(f"{x:8.1f}" for x in best[name])
        print(f"{name + ': ' + calls:56s} {cells}")
    sim, slave, via_python, binary, fmpy = (best[name] for name in LAYERS)
    print(f"{'':56s} max |output - Simulation output| over the layers = {worst_mismatch:.1e}")
    # the binary never calls the slave's set_real/get_real: it writes the input into and
    # reads the outputs from the buffer it shares with the slave; its fmi2DoStep calls the
    # slave's do_step once (Python path) or steps the compiled record itself (native step)
    print(f"{'cost by layer':56s} {'doStep':>8s} {'exchange':>8s}   (exchange = setReal + doStep "
          f"+ getReal)")
    rows = [("Simulation (set_inputs+do_step+get_outputs)", sim[3], sim[3]),
            ("FMU slave do_step (Python) beyond that", slave[1] - sim[3], slave[1] - sim[3]),
            ("FMU binary + ctypes crossing (Python path)", via_python[1] - slave[1],
             via_python[3] - slave[1]),
            ("= FMU binary, Python path (COSIM_FMU_NATIVE=0)", via_python[1], via_python[3]),
            ("FMU binary, native step (replaces the rows above)", binary[1], binary[3]),
            ("fmpy FMU2Slave wrapper", fmpy[1] - binary[1], fmpy[3] - binary[3]),
            ("= through fmpy", fmpy[1], fmpy[3])]
    for label, step, exchange in rows:
        print(f"{label:56s} {step:8.1f} {exchange:8.1f}")
    return best


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer steps")
    parser.add_argument("--steps", type=int, default=None, help="communication steps per case")
    parser.add_argument("--rounds", type=int, default=None, help="rounds of the layer table")
    args = parser.parse_args(argv)
    n_steps = args.steps or (600 if args.quick else 4000)
    rounds = args.rounds or (3 if args.quick else 5)
    print(f"FMU (fmpy FMU2Slave -> FMU binary -> cosim.Simulation) vs cosim.Simulation directly, "
          f"h = 1 ms, {n_steps} steps per case (alternating loop shapes), times in µs; "
          f"load {os.getloadavg()[0]:.2f}")
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
        best = layers(workdir, max(n_steps, 1000), rounds)
    verdict = "met" if worst < 50.0 else "NOT met"
    print(f"goal: median FMU overhead < 50 µs per step -> {verdict} (worst median {worst:.1f} µs)")
    step, total = best["fmpy FMU2Slave"][1], best["fmpy FMU2Slave"][3]
    verdict = "met" if step <= 20.0 else "NOT met"
    print(f"goal (issue 13): two_link doStep through fmpy <= 20 µs (new input every step) -> "
          f"{verdict} ({step:.1f} µs median, best of {rounds} rounds; setReal + doStep + getReal "
          f"{total:.1f} µs)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
