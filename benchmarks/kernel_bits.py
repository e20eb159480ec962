"""Bit-identity check for refactors of the compiled kernels (bdf, explicit, ga, spark,
local-index1, block-lstable, rkc-penalty).

Runs every library model that has kernels × {bdf, bdf-i2, bdf-i1, dopri5, rk4,
generalized-alpha, generalized-alpha-i2, spark, local-index1, block-lstable,
rkc-penalty} × a
few option sets (adaptive rtol 1e-4 and 1e-7, max_order 2, velocity_error
"scaled" with max_order 3, velocity_error False with velocity_weights
"velocity", reuse_matrix for bdf, fixed step t_end/400) on ``backend="numba"``,
20 communication steps to t_end, and records the bytes of the final t, y, last
h, two dense-output values of the last step and the serialized state, the step /
rejection / Newton / residual / Jacobian / LU counts, order counts and failure
counts.  Run ``save``
on the code before a refactor and ``compare`` after it: the table lists every
run that differs in any bit or count.

    git stash; python benchmarks/kernel_bits.py save /tmp/before.pkl; git stash pop
    python benchmarks/kernel_bits.py compare /tmp/before.pkl
"""
import argparse
import pickle
import warnings

import numpy as np

import cosim
from cosim.errors import CosimError
from cosim.integrators import resolve_backend
from cosim.models import available_models, load_model

T_END = {"andrews": 0.03}
ADAPTIVE = {"rtol1e-4": dict(rtol=1e-4, atol=1e-6), "rtol1e-7": dict(rtol=1e-7, atol=1e-9)}
FIXED = {"fixed": dict(h=None)}
BDF = {**ADAPTIVE,
       "order2": dict(rtol=1e-5, atol=1e-7, method_options=dict(max_order=2)),
       "scaled-order3": dict(rtol=1e-5, atol=1e-7, method_options=dict(velocity_error="scaled", max_order=3)),
       "noverr-velw": dict(rtol=1e-5, atol=1e-7, method_options=dict(velocity_error=False,
                                                                      velocity_weights="velocity")),
       **FIXED}
OPTION_SETS = {"bdf": {**BDF, "reuse": dict(rtol=1e-5, atol=1e-7, method_options=dict(reuse_matrix=True))},
               "bdf-i2": BDF, "bdf-i1": BDF, "dopri5": {**ADAPTIVE, **FIXED}, "rk4": FIXED,
               "generalized-alpha": {**ADAPTIVE, **FIXED}, "generalized-alpha-i2": {**ADAPTIVE, **FIXED},
               "spark": FIXED, "local-index1": {**ADAPTIVE, **FIXED}, "block-lstable": FIXED,
               "rkc-penalty": {**ADAPTIVE, **FIXED}}
STATS = ("steps", "rejected", "newton_iterations", "residual_evaluations",
         "jacobian_evaluations", "lu_factorizations")
DIAGNOSTICS = ("order_counts", "newton_failures", "error_test_failures")


def run(model, method, kw):
    t_end = T_END.get(model, 1.0)
    kw = dict(kw)
    if "h" in kw:
        kw["h"] = t_end / 400
    sim = cosim.Simulation(model=model, method=method, backend="numba", **kw)
    assert sim.backend == "numba", sim.backend
    res = {}
    try:
        for _ in range(20):
            sim.do_step(sim.time, t_end / 20)
    except CosimError as e:
        res["error"] = f"{type(e).__name__}: {e}"
    integ = sim.integrator
    h = integ.t - integ.t_prev
    res["bits"] = [np.asarray(x, dtype=float).tobytes() for x in
                   (sim.time, sim.y, h, integ.dense_output(integ.t - 0.3 * h),
                    integ.dense_output(integ.t - 0.9 * h))]
    res["state"] = sim.serialize_state()
    res["stats"] = {k: sim.stats[k] for k in STATS}
    res["diagnostics"] = [np.asarray(getattr(integ, k)).tolist() for k in DIAGNOSTICS if hasattr(integ, k)]
    return res


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("mode", choices=("save", "compare"))
    ap.add_argument("path")
    ap.add_argument("--methods", nargs="+", default=list(OPTION_SETS), choices=list(OPTION_SETS))
    args = ap.parse_args(argv)
    warnings.simplefilter("ignore")
    out = {}
    for name in available_models():
        m = load_model(name)
        for method in args.methods:
            if resolve_backend(method, m, "auto") == "numba":
                for oname, kw in OPTION_SETS[method].items():
                    out[name, method, oname] = run(name, method, kw)
    print(f"{'model':24s} {'method':7s} {'options':14s} {'steps':>7s} {'LU':>7s}  result")
    if args.mode == "save":
        with open(args.path, "wb") as fh:
            pickle.dump(out, fh)
        for key, r in out.items():
            print(f"{key[0]:24s} {key[1]:7s} {key[2]:14s} {r['stats']['steps']:7d} "
                  f"{r['stats']['lu_factorizations']:7d}  {r.get('error', 'saved')[:60]}")
        print(f"saved {len(out)} runs to {args.path}")
        return 0
    with open(args.path, "rb") as fh:
        ref = {key: r for key, r in pickle.load(fh).items() if key[1] in args.methods}
    bad = 0
    for key in sorted(set(ref) | set(out)):
        if key not in ref or key not in out:
            print(f"{key[0]:24s} {key[1]:7s} {key[2]:14s} {'':>7s} {'':>7s}  only in one run")
            bad += 1
        elif ref[key] != out[key]:
            fields = [f for f in out[key] if ref[key].get(f) != out[key][f]]
            print(f"{key[0]:24s} {key[1]:7s} {key[2]:14s} {out[key]['stats']['steps']:7d} "
                  f"{out[key]['stats']['lu_factorizations']:7d}  DIFFERENT: {', '.join(fields)}")
            bad += 1
    print(f"{len(out)} runs compared with {args.path}: {bad} different")
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())
