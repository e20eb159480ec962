"""Per-step cost against problem size: an N-link planar pendulum chain
(``benchmarks/chain_model.py``: n = 3N coordinates, m = 2N constraints),
N = 2 … 64, falling from the horizontal for ``--t-end`` s (issue 13).

Rows: our generalized-α and BDF (index 3) on each backend that can run them,
and scipy's BDF and Radau on the index-1 ODE of the same equations (each
right-hand side solves [[M, C_qᵀ], [C_q, 0]] [q''; λ] = [Q; γ]; the model
kernels compiled with numba for it, so scipy gets the same compiled model code;
its finite-difference Jacobian has 6N columns).  Printed: steps, wall time,
µs per step, and the constraint drift |C(q)| at the end (scipy's index-1
formulation drifts; ours holds C = 0 by construction).  Our dense LU of the
(n+m)² iteration matrix costs ~(5N)³/3 flops per factorisation: the table
shows from which N it dominates (µs/step growing like N³ instead of N).

    python benchmarks/scaling.py [--quick] [--t-end 0.2] [--links 2 4 8 16 32 64]
"""
import argparse
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import cosim  # noqa: E402
from chain_model import KERNELS, chain_model  # noqa: E402
from cosim.integrators import COMPILED_REGISTRY, compiled_unavailable  # noqa: E402

RTOL, ATOL = 1e-5, 1e-7


def ours(model, method, backend, t_end):
    sim = cosim.Simulation(model=model, method=method, rtol=RTOL, atol=ATOL, backend=backend)
    sim.do_step(0.0, 1e-9)  # loads/compiles the compiled code outside the timing
    t0 = time.perf_counter()
    sim.do_step(sim.time, t_end - sim.time)
    wall = time.perf_counter() - t0
    steps = sim.stats["steps"]
    q = sim.y[:model.n_q]
    return steps, wall, float(np.max(np.abs(model.constraints(q, sim.time))))


def scipy_rhs(N):
    """The index-1 right-hand side of the chain, compiled (numba) from the same kernels."""
    from cosim import jit  # noqa: PLC0415
    k = {name: jit.njit(getattr(KERNELS, name)) for name in ("mass", "forces", "constraint_jacobian", "gamma")}
    mass, forces, cjac, gamma = k["mass"], k["forces"], k["constraint_jacobian"], k["gamma"]

    @jit.njit
    def rhs(t, y, p):
        n, m = 3 * N, 2 * N
        q, v = y[:n], y[n:]
        K = np.zeros((n + m, n + m))
        M = np.zeros((n, n))
        mass(q, t, p, M)
        G = np.zeros((m, n))
        cjac(q, t, p, G)
        b = np.zeros(n + m)
        Q = np.zeros(n)
        forces(q, v, t, np.zeros(0), p, Q)
        g = np.zeros(m)
        gamma(q, v, t, p, g)
        K[:n, :n] = M
        K[:n, n:] = G.T
        K[n:, :n] = G
        b[:n] = Q
        b[n:] = g
        x = np.linalg.solve(K, b)
        out = np.empty(2 * n)
        out[:n] = v
        out[n:] = x[:n]
        return out

    return rhs


def scipy_run(model, method, t_end, rhs):
    from scipy.integrate import solve_ivp  # noqa: PLC0415
    q0, v0 = model.initial_state()
    y0 = np.concatenate([q0, v0])
    p = np.asarray(model.kernel_parameters(), dtype=float)
    rhs(0.0, y0, p)  # compile outside the timing

    def fun(t, y):  # one signature for numba (scipy may pass views)
        return rhs(float(t), np.ascontiguousarray(y, dtype=float), p)

    t0 = time.perf_counter()
    sol = solve_ivp(fun, (0.0, t_end), y0, method=method, rtol=RTOL, atol=ATOL)
    wall = time.perf_counter() - t0
    q = sol.y[:model.n_q, -1]
    return sol.t.size - 1, wall, float(np.max(np.abs(model.constraints(q, t_end)))), sol.nfev


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="N = 2, 8, 32 and t_end 0.05")
    parser.add_argument("--t-end", type=float, default=None)
    parser.add_argument("--links", type=int, nargs="*", default=None)
    parser.add_argument("--python-max", type=int, default=16,
                        help="largest N for the Python backend rows (they are slow)")
    args = parser.parse_args(argv)
    links = args.links or ([2, 8, 32] if args.quick else [2, 4, 8, 16, 32, 64])
    t_end = args.t_end or (0.05 if args.quick else 0.2)
    print(f"N-link chain falling from the horizontal, t_end = {t_end} s, rtol {RTOL:g}, atol {ATOL:g}")
    print(f"{'N':>3s} {'n+m':>5s}  {'method':24s} {'steps':>7s} {'wall s':>8s} {'us/step':>9s} {'|C| end':>9s}")
    for N in links:
        model = chain_model(N)()
        rows = []
        for method in ("generalized-alpha", "bdf"):
            backends = ["python"] if N <= args.python_max else []
            if method in COMPILED_REGISTRY and compiled_unavailable(method, model) is None:
                backends.insert(0, "numba")
            for backend in backends:
                steps, wall, drift = ours(model, method, backend, t_end)
                rows.append((f"{method} [{backend}]", steps, wall, drift))
        rhs = scipy_rhs(N)
        for method in ("BDF", "Radau"):
            steps, wall, drift, nfev = scipy_run(model, method, t_end, rhs)
            rows.append((f"scipy {method} (index 1)", steps, wall, drift))
        for label, steps, wall, drift in rows:
            print(f"{N:3d} {5 * N:5d}  {label:24s} {steps:7d} {wall:8.3f} {1e6 * wall / max(steps, 1):9.1f} "
                  f"{drift:9.1e}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
