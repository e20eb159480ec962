"""Andrews' squeezer (seven-body mechanism, seed 000 §8.1) with generalized-α.

Prints, beside the seed's Table 5 counts (generalized-α 3148 steps at
rtol 1e-6; BDF 568 at rtol 1e-4; explicit 946), our steps, rejected steps,
Newton iterations, LU factorisations, wall time and the error at t = 0.03 s
against the IVP test-set reference (PSIDE, tol 1e-14), for rtol = atol
= 1e-4 ... 1e-8.  Two variants: the default (velocity projection after each
step), without it (``project_velocities=False``, closest to seed Algorithm 3),
and the index-2 GGL variant (seed eqs. 37-39, first-order error estimate,
so it is run at looser tolerances).

    python benchmarks/andrews.py            # rtol 1e-4 ... 1e-8
    python benchmarks/andrews.py --quick    # rtol 1e-4 ... 1e-6
"""
import argparse
import time

import numpy as np

from cosim.integrators.generalized_alpha import GeneralizedAlpha
from cosim.integrators.generalized_alpha import GeneralizedAlphaIndex2
from cosim.models.andrews import REFERENCE_Q, REFERENCE_T, Andrews

SEED_TABLE5 = {"generalized-alpha": (3148, 1e-6), "BDF": (568, 1e-4), "explicit": (946, None)}


def run(rtol, cls=GeneralizedAlpha, **options):
    ig = cls(Andrews(), rtol=rtol, atol=rtol, **options)
    ig.initialize(0.0)
    t0 = time.perf_counter()
    ig.advance(REFERENCE_T)
    wall = time.perf_counter() - t0
    err_abs = float(np.max(np.abs(ig.q - REFERENCE_Q)))
    err_rel = float(np.max(np.abs(ig.q - REFERENCE_Q) / np.maximum(1.0, np.abs(REFERENCE_Q))))
    return ig.stats, wall, err_abs, err_rel


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="rtol 1e-4 ... 1e-6 only")
    args = parser.parse_args(argv)
    rtols = [1e-4, 1e-5, 1e-6] if args.quick else [1e-4, 1e-5, 1e-6, 1e-7, 1e-8]
    print("Andrews' squeezer, t in [0, 0.03] s, generalized-alpha (rho_inf = 0.8), rtol = atol")
    print("seed 000 Table 5: generalized-alpha 3148 steps (rtol 1e-6), BDF 568 (rtol 1e-4), "
          "explicit 946; the seed gives no error figures")
    print("error: max |q - q_ref| (abs) and max |q - q_ref| / max(1, |q_ref|) (rel) at t = 0.03 "
          "against the IVP test-set reference")
    header = (f"{'variant':<22s} {'rtol':>7s} {'steps':>6s} {'seed':>6s} {'rej':>5s} {'newton':>7s} "
              f"{'LU':>6s} {'wall[s]':>8s} {'err abs':>9s} {'err rel':>9s}")
    rtols_i2 = [1e-3, 1e-4] if args.quick else [1e-3, 1e-4, 1e-5]
    for label, options, tols in (("default (v-projection)", {}, rtols),
                                 ("no v-projection", {"project_velocities": False}, rtols),
                                 ("index-2 GGL", {"cls": GeneralizedAlphaIndex2}, rtols_i2)):
        print()
        print(header)
        for rtol in tols:
            st, wall, ea, er = run(rtol, **options)
            seed = "3148" if rtol == 1e-6 else ""
            print(f"{label:<22s} {rtol:7.0e} {st['steps']:6d} {seed:>6s} {st['rejected']:5d} "
                  f"{st['newton_iterations']:7d} {st['lu_factorizations']:6d} {wall:8.2f} "
                  f"{ea:9.2e} {er:9.2e}")


if __name__ == "__main__":
    main()
