"""What calling the model through function pointers costs, against the model inlined.

A method is compiled once per machine and reaches the model's kernels as
first-class functions given by address (``cosim.jit.method_entry``: the entry
``entry_at(addresses, …)``); LLVM cannot inline them or optimise across the
call.  This script compiles, for one model, a second copy of the same method
source whose calls ``fns[FN_…](…)`` are replaced by the model's compiled kernels
(direct calls, specialised to the argument types, which LLVM may inline: what
a per-model entry did) and times both on the same record:

CPU time (``time.process_time``: a busy machine's preemption left out):

* two_link, generalized-α, fixed h = 1 ms: µs per 1 ms step, one entry call per
  step (the call of ``Simulation.do_step``), blocks of N steps from the same
  state, interleaved, median and minimum over the blocks;
* Andrews, BDF, atol 1e-8, whole run [0, 0.03] in one entry call at rtol
  1e-4 / 1e-6 / 1e-8, interleaved, median and minimum;
* dopri5 on Andrews (rtol 1e-6) and rk4 on the Panda (h = 1 ms) the same way
  with ``--all``.

First it times one call of two_link's mass kernel in a compiled loop, by address
and called directly: what the call itself costs, beside what inlining the model
into the method gains as a whole.

It also says whether both variants give the same bits (same steps and counts;
the values may differ in the last bits where LLVM fuses or reorders arithmetic
across an inlined call).  The first run compiles each inlined copy (2-5
minutes per method on a busy machine, cached afterwards); it prints a line before each.

    python benchmarks/function_pointer.py [--all] [--repeat R]
"""
import argparse
import importlib
import os
import re
import statistics
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from cosim import Simulation, jit  # noqa: E402
from cosim.integrators import make_integrator  # noqa: E402
from cosim.models import load_model  # noqa: E402

_INLINED = '''

# ---- the model's kernels, called directly (benchmarks/function_pointer.py) ----
{imports}
'''


def method_modules(method):
    """(kernel module, helpers, label) of a method, as its integrator compiles it."""
    if method in ("generalized-alpha",):
        from cosim.integrators import generalized_alpha as mod
        return mod.K, mod.KERNEL_HELPERS, "generalized-alpha"
    if method in ("bdf",):
        from cosim.integrators import bdf_corrector, bdf_record, dense_lu, kernel_common
        from cosim.integrators import bdf_kernel
        return bdf_kernel, (dense_lu, kernel_common, bdf_record, bdf_corrector), "bdf"
    from cosim.integrators import explicit as mod
    return mod.K, mod.KERNEL_HELPERS, "explicit"


def inlined_entry(model, method):
    """The method's entry with ``model``'s kernels called directly: the method's
    source with every ``fns[FN_…]`` replaced by the model's compiled kernel (the
    ``fns`` argument, the address array, is then unused); compiled here, cached."""
    from cosim.integrators import kernel_common
    kernel, helpers, label = method_modules(method)
    jit.method_entry(kernel, label, helpers)  # the shared entry first (cached)
    key = tuple(model.kernels().all_functions())
    jit.model_functions(key, getattr(model, "kernel_name", model.name))
    dispatchers = jit._models[key][0]
    imports = []
    for k, d in enumerate(dispatchers):
        mod, name = d.py_func.__module__, d.py_func.__name__
        if mod not in sys.modules:
            importlib.import_module(mod)
        imports.append(f"from {mod} import {name} as _inl{k}")
    index = {name: getattr(kernel_common, name) for name in dir(kernel_common) if name.startswith("FN_")}
    body = "".join(jit._module_body(m) for m in (*helpers, kernel))
    body = re.sub(r"fns\[(FN_[A-Z_]+)\]", lambda mt: f"_inl{index[mt.group(1)]}", body)
    text = (jit._METHOD_HEADER.format(method=f"{label} inlined for {model.name}", digest="{digest}",
                                      fmt=jit.METHOD_FORMAT, sources=label)
            + _INLINED.format(imports="\n".join(imports)) + body
            + jit.njit_footer(jit.method_inlined((*helpers, kernel))))
    module = jit._generated_module("inlined", f"{label}_{model.name}", text)
    entry = module.entry
    t0 = time.perf_counter()
    print(f"  {label} with {model.name}'s kernels inlined (compiling on the first run: 2-5 min) ...",
          flush=True)
    entry.compile(jit.method_signature())
    print(f"  ... {time.perf_counter() - t0:.1f} s", flush=True)
    return entry


_CALL_COST = '''
import numba


@numba.njit
def by_address(addresses, q, p, M, reps):
    mass = _function_at(addresses[0, 0], addresses[0, 1], _FT0)   # (the method module's)
    s = 0.0
    for r in range(reps):
        q[0] = r
        mass(q, 0.1, p, M)
        s += M[0, 0]
    return s


@numba.njit
def direct(q, p, M, reps):
    s = 0.0
    for r in range(reps):
        q[0] = r
        _mass(q, 0.1, p, M)
        s += M[0, 0]
    return s
'''


def call_cost(model, reps=1_000_000, repeat=7):
    """ns per call of the model's mass kernel in a compiled loop: by address (as the
    method calls it) and called directly (LLVM may inline it), medians, interleaved."""
    key = tuple(model.kernels().all_functions())
    addresses = jit.model_functions(key, getattr(model, "kernel_name", model.name))
    from cosim.integrators import generalized_alpha as ga
    method = sys.modules[jit.method_entry(ga.K, "generalized-alpha", ga.KERNEL_HELPERS).py_func.__module__]
    space = {"_mass": jit._models[key][0][0], "_function_at": method._function_at, "_FT0": method._FT0}
    exec(compile(_CALL_COST, "<call cost>", "exec"), space)
    n = model.n_q
    q, p, M = np.zeros(n), np.asarray(model.kernel_parameters(), dtype=float), np.zeros((n, n))
    space["by_address"](addresses, q, p, M, 10)
    space["direct"](q, p, M, 10)
    times = {"by address": [], "direct": []}
    for _ in range(repeat):
        for name, run in (("by address", lambda: space["by_address"](addresses, q, p, M, reps)),
                          ("direct", lambda: space["direct"](q, p, M, reps))):
            tic = time.process_time()
            run()
            times[name].append((time.process_time() - tic) / reps * 1e9)
    a, d = statistics.median(times["by address"]), statistics.median(times["direct"])
    print(f"one call of {model.name}'s mass kernel in a compiled loop: {a:.1f} ns by address, "
          f"{d:.1f} ns direct ({a - d:+.1f} ns per call)", flush=True)


def record(integ):
    return integ._S.copy(), integ._I.copy(), integ._LU.copy()


def call(entry, integ, rec, mode, t_target, max_steps=1_000_000):
    S, I, LU = rec
    args = (mode, S, I, LU, integ._u_c, integ._parameters(), t_target, max_steps, integ._y_out)
    return entry(integ._fns, *args)


def per_step_case(label, integ, inlined, h, n, repeat):
    """µs per step of one entry call per step, both variants, interleaved."""
    K = integ._kernel
    start = record(integ)
    t0 = float(start[0][K.T])
    times = {"pointer": [], "inlined": []}
    finals = {}
    for _ in range(repeat):
        for name, entry in (("pointer", integ._entry), ("inlined", inlined)):
            rec = S, I, LU = tuple(a.copy() for a in start)
            fns, u, p, y = integ._fns, integ._u_c, integ._parameters(), integ._y_out
            mode = K.WHOLE_INTERVAL
            tic = time.process_time()
            for k in range(1, n + 1):
                entry(fns, mode, S, I, LU, u, p, t0 + k * h, 1_000_000, y)
            times[name].append((time.process_time() - tic) / n * 1e6)
            assert S[K.T] == t0 + n * h
            finals[name] = rec
    report(label, "µs per step", times, finals, integ)


def whole_run_case(label, integ, inlined, t_end, repeat):
    """ms of one whole run [t0, t_end] in one entry call, both variants, interleaved."""
    K = integ._kernel
    start = record(integ)
    times = {"pointer": [], "inlined": []}
    finals = {}
    for _ in range(repeat):
        for name, entry in (("pointer", integ._entry), ("inlined", inlined)):
            rec = tuple(a.copy() for a in start)
            tic = time.process_time()
            status = call(entry, integ, rec, K.WHOLE_INTERVAL, t_end)
            times[name].append((time.process_time() - tic) * 1e3)
            finals[name] = rec
            assert status == 0, status
    report(label, "ms per run", times, finals, integ)


def report(label, unit, times, finals, integ):
    K = integ._kernel
    p_med, i_med = statistics.median(times["pointer"]), statistics.median(times["inlined"])
    p_min, i_min = min(times["pointer"]), min(times["inlined"])
    (Sp, Ip, _), (Si, Ii, _) = finals["pointer"], finals["inlined"]
    first = K.STATS
    counts = np.array_equal(Ip[first:first + 6], Ii[first:first + 6])
    bits = np.array_equal(Sp.view(np.int64), Si.view(np.int64))
    diff = 0.0 if bits else float(np.nanmax(np.abs(Sp - Si)))
    print(f"{label:44s} {unit:12s} {p_med:9.3f} {i_med:9.3f} {p_med / i_med - 1:+8.1%}  "
          f"{p_min:9.3f} {i_min:9.3f} {p_min / i_min - 1:+8.1%}  "
          f"{'same' if counts else 'DIFFER':6s} {'identical' if bits else f'max |dS| {diff:.1e}'}",
          flush=True)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--all", action="store_true", help="also dopri5 on Andrews and rk4 on the Panda")
    ap.add_argument("--repeat", type=int, default=15)
    ap.add_argument("--steps", type=int, default=2000)
    args = ap.parse_args(argv)
    call_cost(load_model("two_link"))
    print("model called by address (the shipped entry) vs inlined (a per-model copy of the method)")
    cases = []
    sim = Simulation(model="two_link", method="generalized-alpha", h=1e-3, backend="numba")
    for _ in range(10):
        sim.do_step(sim.time, 1e-3)
    cases.append(("two_link generalized-α h = 1 ms", sim.integrator, "generalized-alpha", "step", 1e-3))
    for rtol in (1e-4, 1e-6, 1e-8):
        integ = make_integrator(load_model("andrews"), "bdf", backend="numba", rtol=rtol, atol=1e-8)
        integ.initialize()
        cases.append((f"Andrews bdf rtol {rtol:g} whole run [0, 0.03]", integ, "bdf", "run", 0.03))
    if args.all:
        integ = make_integrator(load_model("andrews"), "dopri5", backend="numba", rtol=1e-6, atol=1e-8)
        integ.initialize()
        cases.append(("Andrews dopri5 rtol 1e-6 whole run [0, 0.03]", integ, "dopri5", "run", 0.03))
        from cosim.models.urdf import example_robot_path, load_urdf
        sim = Simulation(load_urdf(example_robot_path()), method="rk4", h=1e-3, backend="numba")
        sim.set_inputs(np.full(sim.model.n_inputs, 0.1))
        sim.do_step(0.0, 1e-3)
        cases.append(("Panda rk4 h = 1 ms", sim.integrator, "rk4", "step", 1e-3))
    inlined = {}
    for label, integ, method, kind, x in cases:
        key = (method if method != "rk4" else "dopri5", integ.model.name)
        if key not in inlined:
            inlined[key] = inlined_entry(integ.model, method)
    print(f"{'case':44s} {'unit':12s} {'pointer':>9s} {'inlined':>9s} {'cost':>8s}  "
          f"{'min ptr':>9s} {'min inl':>9s} {'cost':>8s}  counts bits")
    for label, integ, method, kind, x in cases:
        entry = inlined[(method if method != "rk4" else "dopri5", integ.model.name)]
        if kind == "step":
            per_step_case(label, integ, entry, x, args.steps, args.repeat)
        else:
            whole_run_case(label, integ, entry, x, args.repeat)
    print("cost = pointer time / inlined time - 1 (median of the blocks; then of the minima)")


if __name__ == "__main__":
    main()
