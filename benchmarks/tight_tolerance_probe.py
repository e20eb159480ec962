"""What limits generalized-α (index 3) and generalized-α-i2 at rtol 1e-10 on
Andrews (issue 12 "Must show" misses; README "generalized-α tolerances",
"Work-precision on Andrews").  Error: max_k |q_k − q_ref,k| / max(1, |q_ref,k|)
against DOP853 at 1e-13 (dense output), at every accepted step ("path") and at
t = 0.03 ("end"), divided by rtol; starts perturbed by 1e-15 as in
benchmarks/work_precision.py (seeds 1..N).

    python benchmarks/tight_tolerance_probe.py floor  [--floors 1e-13 3e-14 1e-14 1e-15]
        # generalized-alpha, compiled, rtol 1e-10, RTOL_FLOOR (data the kernel reads)
    python benchmarks/tight_tolerance_probe.py fixed  [--h 1.5e-7 1e-7 5e-8]
        # generalized-alpha, compiled, fixed steps, Newton norm of rtol 1e-10, seeds 1, 2
    python benchmarks/tight_tolerance_probe.py noise  [--t-end 0.008]
        # Python reference: |h²x|, its tangent part (M-orthogonal and Euclidean
        # projections) and their step-to-step second differences (rounding)
    python benchmarks/tight_tolerance_probe.py errfloor --err-floor 2 --floors 1e-14
        # Python reference (~3-6 min): eq. 34's weight floor in ROUNDOFF·ε/β units
    python benchmarks/tight_tolerance_probe.py i2 [--seeds 1 5] [--tolerance-factor 30]
        # generalized-alpha-i2, compiled: path error by 2 ms window, steps there
    python benchmarks/tight_tolerance_probe.py i2-compensated [--seeds 1 6] [--until 0.03] [--plain-too]
        # Python reference (~6 min a start): compensated (Kahan) summation of the
        # q and v updates (Hairer, Lubich & Wanner, GNI §VIII.5) vs the plain sums
    python benchmarks/tight_tolerance_probe.py i2-noise [--t-end 0.0005]
        # Python reference: the two terms of the i2 estimate and their rounding
        # (step-to-step second differences) in units of its weights
    python benchmarks/tight_tolerance_probe.py weighted-split --model crank_slider --rtols 1e-4 1e-6
        # Python reference: the tangent split with a W-orthogonal projector (not in cosim)
    python benchmarks/tight_tolerance_probe.py mapping [--models ...] [--rtols 1e-5 1e-6 1e-7]
        # compiled: generalized-alpha's steps over bdf's and err/rtol per tolerance mapping
        # (TOL_REF 1e-3 = cosim's, 1e-4, 1e-5; plain eq. 34), one start, atol = rtol/100
"""
import argparse
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import cosim.integrators.generalized_alpha as gam  # noqa: E402
from cosim.integrators import make_integrator  # noqa: E402
from cosim.models import load_model  # noqa: E402
from reference import index1_trajectory  # noqa: E402
from work_precision import perturbed_y0  # noqa: E402

T_END = 0.03
# the floored estimate these probes measured (the default below rtol 8e-10 is
# now the tangent split, tangent_estimate="auto")
PLAIN = {"tangent_estimate": False}


def path_errors(T, Q):
    q_ref = index1_trajectory("andrews", np.asarray(T), rtol=1e-13, atol=1e-13)[0]
    return np.max(np.abs(np.asarray(Q) - q_ref) / np.maximum(1.0, np.abs(q_ref)), axis=1)


def run(method, rtol, seed, backend, options=None, t_end=T_END, after_step=None):
    model = load_model("andrews")
    integ = make_integrator(model, method, backend=backend, rtol=rtol, atol=rtol / 100,
                            **(options or {}))
    integ.initialize(0.0, perturbed_y0(model, seed))
    if after_step is not None:
        after_step(integ, init=True)
    T, Q = [], []
    t0 = time.process_time()
    while integ.t < t_end:
        integ.step(t_end)
        if after_step is not None:
            after_step(integ)
        T.append(integ.t)
        Q.append(integ.q.copy())
    T, Q = np.array(T), np.array(Q)
    return integ, T, Q, path_errors(T, Q), time.process_time() - t0


def report(label, integ, T, e, rtol, cpu):
    h = np.diff(np.concatenate([[0.0], T]))
    k = int(np.argmax(e))
    st = integ.stats
    print(f"{label}: steps {len(T)} rejected {st['rejected']} Newton it/step "
          f"{st['newton_iterations'] / len(T):.2f}  path err/rtol {e[k] / rtol:.2f} at t = {T[k]:.4g} "
          f"(h {h[k]:.2e})  end err/rtol {e[-1] / rtol:.2f}  cpu {cpu:.0f} s", flush=True)


def floor(args):
    for f in args.floors:
        gam.RTOL_FLOOR = f
        integ, T, Q, e, cpu = run("generalized-alpha", 1e-10, 1, "numba", PLAIN)
        report(f"RTOL_FLOOR {f:g}", integ, T, e, 1e-10, cpu)


def fixed(args):
    for h in args.h:
        for seed in (1, 2):
            model = load_model("andrews")
            integ = make_integrator(model, "generalized-alpha", backend="numba", h=h, rtol=1e-10,
                                    atol=1e-12)
            integ.initialize(0.0, perturbed_y0(model, seed))
            n = int(round(T_END / h))
            T, Q = [], []
            for k in range(1, n + 1):
                integ.advance(k * h)
                T.append(integ.t)
                Q.append(integ.q.copy())
            e = path_errors(T, Q)
            print(f"fixed h {h:g} seed {seed}: path error {e.max():.2e} at t = {T[int(e.argmax())]:.4g}, "
                  f"end {e[-1]:.2e}, Newton it/step {integ.stats['newton_iterations'] / n:.2f}",
                  flush=True)


def noise(args):
    """h²x of the last 2000 attempts: whole, tangent part P_M h²x (the estimate's,
    GeneralizedAlpha._tangent_part) and the Euclidean projection P_E h²x; the
    step-to-step second difference measures their rounding."""
    rec = []
    orig = gam.GeneralizedAlpha._attempt

    def attempt(self, h):
        out = orig(self, h)
        rec.append((self.t + h, h, out[1].copy(), out[5].copy()))
        return out

    gam.GeneralizedAlpha._attempt = attempt
    model = load_model("andrews")
    integ = make_integrator(model, "generalized-alpha", backend="python", rtol=1e-10, atol=1e-12,
                            **PLAIN)
    integ.initialize(0.0, perturbed_y0(model, 1))
    integ.advance(args.t_end)
    gam.GeneralizedAlpha._attempt = orig
    rec = rec[-2000:]
    H = np.array([r[1] for r in rec])
    hx = H[:, None] ** 2 * np.array([r[3] for r in rec])
    pm, pe = np.empty_like(hx), np.empty_like(hx)
    for i, (t1, _h, q, _x) in enumerate(rec):
        C, M = model.constraint_jacobian(q, t1), model.mass(q, t1)
        MiCt = np.linalg.solve(M, C.T)
        pm[i] = hx[i] - MiCt @ np.linalg.solve(C @ MiCt, C @ hx[i])
        pe[i] = hx[i] - C.T @ np.linalg.solve(C @ C.T, C @ hx[i])

    def d2(a):
        return a[2:] - 2.0 * a[1:-1] + a[:-2]

    print(f"generalized-alpha rtol 1e-10, last 2000 attempts before t = {args.t_end:g} "
          f"(h {np.median(H):.2e}); rounding unit ε/β = {np.finfo(float).eps / integ.beta:.1e}")
    print("  median |.| and median |2nd difference|:  h²x | P_M h²x (M-orthogonal) | "
          "P_E h²x (Euclidean)")
    for k in range(model.n_q):
        print(f"  q{k + 1}: " + "   ".join(f"{np.median(np.abs(a[:, k])):.1e} "
                                         f"{np.median(np.abs(d2(a)[:, k])):.1e}" for a in (hx, pm, pe)))
    for name, a in (("h²x", hx), ("P_M h²x", pm), ("P_E h²x", pe)):
        print(f"  max norm of {name}: median {np.median(np.abs(a).max(axis=1)):.2e}, "
              f"2nd difference {np.median(np.abs(d2(a)).max(axis=1)):.2e}")


def errfloor(args):
    gam.ERR_FLOOR = args.err_floor
    for f in args.floors:
        gam.RTOL_FLOOR = f
        try:
            integ, T, Q, e, cpu = run("generalized-alpha", 1e-10, 1, "python", PLAIN)
        except Exception as exc:  # noqa: BLE001 - report the failure and go on
            print(f"ERR_FLOOR {args.err_floor:g} RTOL_FLOOR {f:g}: {exc}")
            continue
        report(f"Python reference, ERR_FLOOR {args.err_floor:g} RTOL_FLOOR {f:g}", integ, T, e,
               1e-10, cpu)


def i2(args):
    edges = np.arange(0.0, T_END + 1e-12, 0.002)
    for seed in args.seeds:
        integ, T, Q, e, cpu = run("generalized-alpha-i2", 1e-10, seed, "numba",
                                  {"tolerance_factor": args.tolerance_factor})
        report(f"generalized-alpha-i2 tolerance_factor {args.tolerance_factor:g} seed {seed}",
               integ, T, e, 1e-10, cpu)
        h = np.diff(np.concatenate([[0.0], T]))
        win = [(T >= a) & (T < b) for a, b in zip(edges[:-1], edges[1:])]
        print("   path err/rtol by 2 ms: " + " ".join(f"{e[w].max() / 1e-10:.2f}" for w in win))
        print("   median h by 2 ms:      " + " ".join(f"{np.median(h[w]):.0e}" for w in win))
        a, b = args.window
        w = (T >= a) & (T <= b)
        grid = np.linspace(a, b, 8)
        near = [int(np.argmin(np.abs(T - g))) for g in grid]
        print(f"   t in [{a:g}, {b:g}] ({w.sum()} steps, h {h[w].min():.3e}-{h[w].max():.3e}): "
              + " ".join(f"{T[k]:.5f}: {e[k] / 1e-10:.4f}" for k in near))


def i2_compensated(args):
    from cosim.integrators.generalized_alpha import GeneralizedAlphaIndex2 as G2
    predict0, attempt0 = G2._predict, G2._attempt

    def predict(self, h):  # G2._predict (generalized_alpha.py) with the increments kept apart
        am, af, g, b = self.alpha_m, self.alpha_f, self.gamma, self.beta
        n = self.model.n_q
        q, v, qdd, a = self.y[:n], self.y[n:], self.qdd, self.a
        if self.h_last > 0.0 and h != self.h_last:
            a = qdd + (h / self.h_last) * (a - qdd)
        qdd0 = (am * a + (1.0 - am - af) * qdd) / (1.0 - af)
        dv = h * ((1.0 - g) * a + g * qdd)
        dq = h * v + (h * h) * ((0.5 - b) * a + b * qdd)
        self._increments = (dq, dv)
        return q + dq, v + dv, qdd0

    def attempt(self, h):
        n = self.model.n_q
        y_hat = h * self.x_rate
        res, q, v, vd, lam, y_tot, xi = attempt0(self, h)
        if res.converged:
            # q_{n+1} = q_n + (Δq + carry), the carry the part the sum lost (Kahan)
            dq, dv = self._increments
            dq = dq + (self.beta * h) * (h * y_hat + res.delta[:n]) + self._carry[0]
            dv = dv + (self.gamma * h) * y_tot + self._carry[1]
            q0, v0 = self.y[:n], self.y[n:]
            q, v = q0 + dq, v0 + dv
            self._carry_new = (dq - (q - q0), dv - (v - v0))
        return res, q, v, vd, lam, y_tot, xi

    def after_step(integ, init=False):
        if init:
            integ._carry = (np.zeros(integ.model.n_q), np.zeros(integ.model.n_q))
        else:
            integ._carry = integ._carry_new

    for compensated in (True, False) if args.plain_too else (True,):
        G2._predict, G2._attempt = (predict, attempt) if compensated else (predict0, attempt0)
        for seed in args.seeds:
            integ, T, Q, e, cpu = run("generalized-alpha-i2", 1e-10, seed, "python",
                                      t_end=args.until,
                                      after_step=after_step if compensated else None)
            report(f"generalized-alpha-i2 Python {'compensated' if compensated else 'plain'} "
                   f"seed {seed}", integ, T, e, 1e-10, cpu)
    G2._predict, G2._attempt = predict0, attempt0


def i2_noise(args):
    """generalized-alpha-i2 (Python reference, rtol 1e-10, default factor): the two
    terms of its estimate Ξ² = h·max(‖x‖/W_q, ‖y‖/W_v) over the last 2000 attempts,
    and the step-to-step second differences of h·y and h·x (their rounding) in
    units of the weights: is this estimate at its rounding floor, as eq. 34's
    h²x is for generalized-alpha (the noise probe)?"""
    from cosim.integrators.common import error_weights
    from cosim.integrators.generalized_alpha import GeneralizedAlphaIndex2 as G2
    rec = []
    orig = G2._attempt

    def attempt(self, h):
        n = self.model.n_q
        y0 = self.y.copy()
        out = orig(self, h)
        res = out[0]
        x = h * (h * self.x_rate) + res.delta[:n]          # x_tot of G2._attempt
        rec.append((h, h * x, h * out[5], error_weights(y0[:n], self.rtol, self.atol),
                    error_weights(y0[n:], self.rtol, self.atol)))
        return out

    G2._attempt = attempt
    model = load_model("andrews")
    integ = make_integrator(model, "generalized-alpha-i2", backend="python", rtol=1e-10,
                            atol=1e-12, max_steps=10**7)
    integ.initialize(0.0, perturbed_y0(model, 1))
    integ.advance(args.t_end)
    G2._attempt = orig
    rec = rec[-2000:]
    H = np.array([r[0] for r in rec])
    hx, hy = np.array([r[1] for r in rec]), np.array([r[2] for r in rec])
    wq, wv = np.array([r[3] for r in rec]), np.array([r[4] for r in rec])

    def d2(a):
        return a[2:] - 2.0 * a[1:-1] + a[:-2]

    print(f"generalized-alpha-i2 rtol 1e-10 (internal {integ.rtol:.1e}), last 2000 attempts "
          f"before t = {args.t_end:g} (h {np.median(H):.2e})")
    for name, a, w in (("h·x / W_q", hx, wq), ("h·y / W_v", hy, wv)):
        print(f"  {name}: median of max norm {np.median(np.abs(a / w).max(axis=1)):.2e}, "
              f"2nd difference {np.median(np.abs(d2(a) / w[1:-1]).max(axis=1)):.2e}")


def weighted_split(args):
    """Not in cosim: the tangent split with a W-orthogonal instead of the
    M-orthogonal projector, P_W x = x − V (Vᵀ D V)⁻¹ Vᵀ D x, V = M⁻¹C_qᵀ,
    D = diag(W)⁻² (W the error weights of the user's tolerances at the step's
    start).  Same kernel as P_M (range M⁻¹C_qᵀ, where the Newton rounding lies),
    but the W-scaled 2-norm of P_W x is never larger than that of x, whereas P_M
    (range ker C_q) can inflate the weighted max norm (the crank-slider's extra
    steps).  Python reference, unperturbed start: "off" = tangent_estimate=false,
    "M" = true (the cosim split), "W" = this variant; error = the benchmark's
    (path for Andrews, t_end otherwise)."""
    from cosim.integrators.common import error_weights
    from work_precision import reference

    class WSplit(gam.GeneralizedAlpha):
        def _tangent_part(self, q, t, x):
            C = self.model.constraint_jacobian(q, t)
            V = np.linalg.solve(self.model.mass(q, t), C.T)
            VD = V.T / error_weights(self.y[:self.model.n_q], self.rtol, self.atol) ** 2
            return x - V @ np.linalg.solve(VD @ V, VD @ x)

    for rtol in args.rtols:
        for variant in args.variants:
            model = load_model(args.model)
            cls = WSplit if variant == "W" else gam.GeneralizedAlpha
            integ = cls(model, rtol=rtol, atol=rtol / 100, max_steps=10**8,
                        tangent_estimate=variant != "off")
            integ.initialize(0.0)
            t_end, q_end = reference(args.model)
            T, Q = [], []
            t0 = time.process_time()
            while integ.t < t_end:
                integ.step(t_end)
                if args.model == "andrews":
                    T.append(integ.t)
                    Q.append(integ.q.copy())
            cpu = time.process_time() - t0
            q_end = np.asarray(q_end)
            e_end = np.max(np.abs(integ.q - q_end) / np.maximum(1.0, np.abs(q_end))) / rtol
            e_path = path_errors(T, Q).max() / rtol if T else float("nan")
            st = integ.stats
            print(f"{args.model} rtol {rtol:g} {variant:>3}: steps {st['steps']} rejected {st['rejected']} "
                  f"err/rtol end {e_end:.3g} path {e_path:.3g}  cpu {cpu:.0f} s", flush=True)


def mapping(args):
    """Can any tolerance mapping keep generalized-α within 10× bdf's steps with err/rtol
    in [0.01, 10]?  Per model and rtol: bdf's steps and err/rtol, then generalized-α's
    steps (× bdf's) and err/rtol with the internal tolerance tol·(tol/TOL_REF)^(1/2) for
    each TOL_REF, and with the plain eq. 34 (tolerance_proportional=false)."""
    from work_precision import any_model, any_reference

    def run(name, method, rtol, opts):
        t_end, q_ref = any_reference(name)
        model = any_model(name)
        integ = make_integrator(model, method, rtol=rtol, atol=rtol / 100, backend="auto", **opts)
        integ.initialize(0.0, None, np.asarray(model.default_inputs(), dtype=float))
        while integ.t < t_end:
            integ.step(t_end)
        err = float(np.max(np.abs(integ.q - q_ref) / np.maximum(1.0, np.abs(q_ref))))
        return integ.stats["steps"], err / rtol

    print("steps and err/rtol (error: max |q - q_ref| / max(1, |q_ref|) at t_end); x = steps / bdf's")
    saved = gam.TOL_REF
    try:
        for name in args.models:
            for rtol in args.rtols:
                nb, eb = run(name, "bdf", rtol, {})
                line = f"{name:15s} {rtol:6.0e}  bdf {nb:6d} e/r {eb:5.2f} |"
                for ref in args.tol_refs:
                    gam.TOL_REF = ref
                    n, e = run(name, "generalized-alpha", rtol, {})
                    line += f" TOL_REF {ref:g}: {n:6d} {n / nb:5.1f}x e/r {e:5.2f} |"
                gam.TOL_REF = saved
                n, e = run(name, "generalized-alpha", rtol, {"tolerance_proportional": False})
                print(line + f" plain: {n:6d} {n / nb:5.1f}x e/r {e:5.2f}", flush=True)
    finally:
        gam.TOL_REF = saved


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("probe", choices=("floor", "fixed", "noise", "errfloor", "i2", "i2-compensated",
                                     "i2-noise", "weighted-split", "mapping"))
    p.add_argument("--floors", type=float, nargs="+", default=[1e-13, 3e-14, 1e-14, 1e-15])
    p.add_argument("--h", type=float, nargs="+", default=[1.5e-7, 1e-7, 5e-8])
    p.add_argument("--t-end", type=float, default=0.008)
    p.add_argument("--err-floor", type=float, default=2.0)
    p.add_argument("--seeds", type=int, nargs="+", default=[1, 5])
    p.add_argument("--tolerance-factor", type=float, default=30.0)
    p.add_argument("--plain-too", action="store_true")
    p.add_argument("--until", type=float, default=T_END, help="i2-compensated: end time")
    p.add_argument("--window", type=float, nargs=2, default=[0.0018, 0.0032], metavar=("T0", "T1"),
                   help="i2: error/rtol at 8 times in this window")
    p.add_argument("--model", default="andrews", help="weighted-split: andrews, pendulum, crank_slider")
    p.add_argument("--rtols", type=float, nargs="+", default=None,
                   help="weighted-split (default 1e-10), mapping (default 1e-5 1e-6 1e-7)")
    p.add_argument("--models", nargs="+", default=["andrews", "pendulum", "two_link", "three_link_urdf",
                                                   "crank_slider", "ur5"], help="mapping")
    p.add_argument("--tol-refs", type=float, nargs="+", default=[1e-3, 1e-4, 1e-5], help="mapping")
    p.add_argument("--variants", nargs="+", default=["off", "M", "W"], help="weighted-split")
    args = p.parse_args(argv)
    if args.rtols is None:
        args.rtols = [1e-5, 1e-6, 1e-7] if args.probe == "mapping" else [1e-10]
    {"floor": floor, "fixed": fixed, "noise": noise, "errfloor": errfloor, "i2": i2,
     "i2-compensated": i2_compensated, "i2-noise": i2_noise,
     "weighted-split": weighted_split, "mapping": mapping}[args.probe](args)


if __name__ == "__main__":
    main()
