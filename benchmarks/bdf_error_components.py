"""Which components decide the BDF family's steps (issue 12, bdf-i1 at loose rtol).

For each model, method and rtol (atol = rtol/100, q0 perturbed by 1e-15 as in
benchmarks/work_precision.py, start 1, python backend) it prints, over the
accepted steps:

* how many were decided by the position part and how many by the velocity part
  of the local error test (seed 000 eq. 35 on the stacked (∇^{k+1}q; ∇^{k+1}v)
  of Algorithm 4 f, in the weights the method uses), the median and 10-90 %
  range of the ratio velocity part / position part, and the components that
  attain the maximum;
* for bdf-i1 only: what the algebraic unknowns would weigh if they were in the
  test — the predictor-corrector differences of a = q'' and λ (= ∇^{k+1} of
  each) in their own weights rtol·|x| + atol (IDA with ``IDASetSuppressAlg``
  off; DASSL's test has no exclusion), and times ĥ and ĥ² (the scaling Hairer &
  Wanner II §VII give higher-index components), as a ratio to the (q, v)
  estimate that decides, with the share of steps where that ratio exceeds 1.
  They are not in bdf-i1's error test (as ``IDASetSuppressAlg(TRUE)``).

    python benchmarks/bdf_error_components.py                       # Andrews, pendulum, crank-slider
    python benchmarks/bdf_error_components.py --models andrews --rtols 1e-3 1e-6 \\
        --methods bdf-i1 bdf-i2 --method-option bdf-i1:velocity_weights=position
        # bdf-i1 in the seed's norm (eq. 35); its default weighs v by rtol|v| + atol
"""
import argparse
import ast
import collections
import os
import sys
import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from work_precision import perturbed_y0, reference  # noqa: E402

from cosim.integrators import bdf_kernel as K  # noqa: E402
from cosim.integrators import make_integrator  # noqa: E402
from cosim.models import load_model  # noqa: E402


def probe(model_name, method, rtol, options, seed=1):
    """Run ``method`` step by step on the python backend (the kernel's functions,
    uncompiled) with two of ``bdf_kernel``'s functions wrapped: the error test's
    norms (which part decides) and the acceptance (the algebraic differences)."""
    model = load_model(model_name)
    n, m = model.n_q, model.n_c
    t_end, q_ref = reference(model_name)
    atol = rtol / 100
    integ = make_integrator(model, method, backend="python", rtol=rtol, atol=atol, **options)
    integ.initialize(0.0, perturbed_y0(model, seed))
    last = {}
    alg = []
    error_norms, accept = K._error_norms, K._accept

    def recording_error_norms(S, I, LU, n_, m_, W, ws, Jm, k, has_up, velocity, scaled, hhat):
        # the error test's call (the index-3 order tests call again with the velocity ĥ-scaled)
        if velocity and bool(scaled) == (I[K.VEL_ERROR] == K.VE_SCALED):
            col, winv = ws[K.WS_COL], ws[K.WS_WINV]
            eq = np.abs(W[col:col + n]) * W[winv:winv + n]
            ev = np.abs(W[col + n:col + 2 * n]) * W[winv + n:winv + 2 * n] * (hhat if scaled else 1.0)
            last["e"] = (float(eq.max()), int(eq.argmax()), float(ev.max()), int(ev.argmax()))
            last["hhat"] = hhat
        return error_norms(S, I, LU, n_, m_, W, ws, Jm, k, has_up, velocity, scaled, hhat)

    def recording_accept(S, I, n_, m_, W, ws, h, h_base, lands, t_limit, k, e_k, *rest):
        qdd = W[ws[K.WS_QDD1]:ws[K.WS_QDD1] + n]
        lam = W[ws[K.WS_LAM1]:ws[K.WS_LAM1] + m]
        zpred = W[ws[K.WS_ZPRED]:ws[K.WS_ZPRED] + n + m]
        ea = float(np.max(np.abs(qdd - zpred[:n]) / (rtol * np.abs(qdd) + atol)))   # ∇^{k+1} a
        el = float(np.max(np.abs(lam - zpred[n:]) / (rtol * np.abs(lam) + atol))) if m else 0.0
        alg.append((e_k, ea, el, last.get("hhat", h)))
        return accept(S, I, n_, m_, W, ws, h, h_base, lands, t_limit, k, e_k, *rest)

    decided, comps, ratios = collections.Counter(), collections.Counter(), []
    K._error_norms, K._accept = recording_error_norms, recording_accept
    try:
        while integ.t < t_end:
            integ.step(t_end)
            eq, iq, ev, iv = last["e"]          # the accepted attempt's error test
            part = "v" if ev > eq else "q"
            decided[part] += 1
            comps[part + str((iv if ev > eq else iq) + 1)] += 1
            ratios.append(ev / max(eq, 1e-300))
    finally:
        K._error_norms, K._accept = error_norms, accept
    err = float(np.max(np.abs(integ.q - q_ref) / np.maximum(1.0, np.abs(q_ref))))
    return integ, decided, comps, np.array(ratios), np.array(alg), err


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", nargs="+", default=["andrews", "pendulum", "crank_slider"])
    ap.add_argument("--methods", nargs="+", default=["bdf-i1"])
    ap.add_argument("--rtols", nargs="+", type=float, default=[1e-3, 1e-6])
    ap.add_argument("--method-option", action="append", default=[],
                    help="METHOD:NAME=VALUE passed to that method (repeatable)")
    args = ap.parse_args(argv)
    opts = collections.defaultdict(dict)
    for s in args.method_option:
        meth, kv = s.split(":", 1)
        key, val = kv.split("=", 1)
        try:
            val = ast.literal_eval(val)
        except (ValueError, SyntaxError):
            pass
        opts[meth][key] = val
    for model_name in args.models:
        for method in args.methods:
            for rtol in args.rtols:
                o = opts.get(method, {})
                integ, decided, comps, r, alg, err = probe(model_name, method, rtol, o)
                label = method + ("" if not o else " " + ",".join(f"{k}={v}" for k, v in o.items()))
                st = integ.stats
                print(f"\n{model_name}  {label}  rtol {rtol:g}: {st['steps']} steps, {st['rejected']} rejected "
                      f"({integ.error_test_failures} error test, {integ.newton_failures} Newton), "
                      f"err/rtol at t_end {err / rtol:.3g}")
                print(f"  error test decided by: velocity part {decided['v']} steps, position part "
                      f"{decided['q']}; velocity/position part median {np.median(r):.3g} "
                      f"(10-90 %: {np.percentile(r, 10):.3g}-{np.percentile(r, 90):.3g})")
                print("  deciding components: " + ", ".join(f"{c} {k}" for c, k in comps.most_common(6)))
                if method == "bdf-i1" and len(alg):
                    e, ea, el, hh = alg.T
                    for name, x in (("a", ea), ("λ", el), ("ĥ·a", hh * ea), ("ĥ·λ", hh * el),
                                    ("ĥ²·a", hh * hh * ea)):
                        q = x / e
                        print(f"  not tested: {name:5s} (own weights rtol|x|+atol) / (q, v) estimate: median "
                              f"{np.median(q):.3g}, > 1 at {100 * np.mean(q > 1):.0f} % of the steps")


if __name__ == "__main__":
    main()
