"""A plain-Python user model (no kernels) on the compiled core calling back into
Python, against the Python backend (issue 13 item 3, issue 19).

The compiled generalized-α entry (cosim.jit) is built with callback kernels:
each kernel is a compiled function whose body is one ``numba.objmode`` block
calling the user model's Python method (M, Q, C, C_q, γ, Newton-matrix terms;
the automatic derivatives of cosim.derivatives where the model gives none).
Two variants: "per kernel" (one callback per kernel call: M, Q, C_q, C per
residual) and "fused" (one callback per residual evaluates M, Q, C and C_q at
(q, v, t) and the other kernels read them from a buffer when called at the
same point).  The model is the README's slider-crank (M, Q and C only).

    python benchmarks/user_model_callback.py [--steps 2000] [--repeat 3]

Prints µs per step (best of --repeat, CPU time of this process), the part
spent inside the model's Python methods (the floor of any callback design),
and the agreement of the final states.  The first run compiles the callback entries
(minutes on a loaded machine; not cached: numba does not cache object-mode
blocks that call Python).
"""
import argparse
import os
import re
import sys
import tempfile
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import numba  # noqa: E402
from numba.extending import register_jitable  # noqa: E402

from cosim import derivatives  # noqa: E402
from cosim.models.kernels import KernelModel, MultibodyKernels, no_mass_jacobian  # noqa: E402
from cosim.simulation import Simulation  # noqa: E402

# -- the model: the README example, loaded as the user would write it ---------------------
def readme_model():
    here = os.path.dirname(os.path.abspath(__file__))
    text = open(os.path.join(here, "..", "README.md"), encoding="utf-8").read()
    m = re.search(r"<!-- readme-example: (\S+) -->\n```python\n(.*?)```", text, re.S)
    path = os.path.join(tempfile.mkdtemp(), m.group(1))
    with open(path, "w", encoding="utf-8") as fh:
        fh.write(m.group(2))
    from cosim.model_files import load_model_file  # noqa: PLC0415
    return load_model_file(path + ":SliderCrank")


# -- callback kernels: p[0] is the index of the wrapped model in _MODELS ------------------
_MODELS = []


_TIME = {"in_python": 0.0}  # seconds spent inside the callbacks (the model's Python code)


def _model(p):
    return _MODELS[int(p[0])]


def _timed(fn):
    def wrapper(*args):
        t0 = time.process_time()
        fn(*args)
        _TIME["in_python"] += time.process_time() - t0
    wrapper.__name__ = fn.__name__
    return wrapper


@_timed
def _py_mass(q, t, p, M):
    M[:, :] = _model(p).mass(q, t)


@_timed
def _py_forces(q, v, t, u, p, Q):
    Q[:] = _model(p).forces(q, v, t, u)


@_timed
def _py_constraints(q, t, p, C):
    C[:] = _model(p).constraints(q, t)


@_timed
def _py_cq(q, t, p, Cq):
    Cq[:, :] = _model(p).constraint_jacobian(q, t)


@_timed
def _py_ct(q, t, p, Ct):
    Ct[:] = _model(p).constraint_dt(q, t)


@_timed
def _py_gamma(q, v, t, p, g):
    g[:] = _model(p).gamma(q, v, t)


@_timed
def _py_force_jacobians(q, v, t, u, p, Qq, Qv):
    m = _model(p)
    res = m.force_jacobians(q, v, t, u)
    a, b = derivatives.force_jacobians(m, q, v, t, u) if res is None else res
    Qq[:, :] = a
    Qv[:, :] = b


@_timed
def _py_h(q, lam, t, p, H):
    m = _model(p)
    res = m.constraint_force_jacobian(q, lam, t)
    H[:, :] = derivatives.constraint_force_jacobian(m, q, lam, t) if res is None else res


def cb_mass(q, t, p, M):
    with numba.objmode():
        _py_mass(q, t, p, M)


def cb_forces(q, v, t, u, p, Q):
    with numba.objmode():
        _py_forces(q, v, t, u, p, Q)


def cb_constraints(q, t, p, C):
    with numba.objmode():
        _py_constraints(q, t, p, C)


def cb_cq(q, t, p, Cq):
    with numba.objmode():
        _py_cq(q, t, p, Cq)


def cb_ct(q, t, p, Ct):
    with numba.objmode():
        _py_ct(q, t, p, Ct)


def cb_gamma(q, v, t, p, g):
    with numba.objmode():
        _py_gamma(q, v, t, p, g)


def cb_force_jacobians(q, v, t, u, p, Qq, Qv):
    with numba.objmode():
        _py_force_jacobians(q, v, t, u, p, Qq, Qv)


def cb_h(q, lam, t, p, H):
    with numba.objmode():
        _py_h(q, lam, t, p, H)


# fused: one callback at (q, t) fills M, C, C_q into p's buffer (after the model index
# and the key q, t); the C_q and C kernels copy from it when called at the same point
def _py_point(q, t, p, M):
    m = _model(p)
    n, k = m.n_q, m.n_c
    M[:, :] = m.mass(q, t)
    buf = p[1:]
    buf[:n] = q
    buf[n] = t
    buf[n + 1:n + 1 + k] = m.constraints(q, t)
    buf[n + 1 + k:n + 1 + k + k * n] = np.asarray(m.constraint_jacobian(q, t)).reshape(-1)


def fu_mass(q, t, p, M):
    with numba.objmode():
        _py_point(q, t, p, M)


@register_jitable
def _same_point(q, t, p):
    n = q.size
    if p[1 + n] != t:
        return False
    for i in range(n):
        if p[1 + i] != q[i]:
            return False
    return True


def fu_constraints(q, t, p, C):
    n, k = q.size, C.size
    if _same_point(q, t, p):
        for i in range(k):
            C[i] = p[2 + n + i]
        return
    with numba.objmode():
        _py_constraints(q, t, p, C)


def fu_cq(q, t, p, Cq):
    n, k = q.size, Cq.shape[0]
    if _same_point(q, t, p):
        for r in range(k):
            for i in range(n):
                Cq[r, i] = p[2 + n + k + r * n + i]
        return
    with numba.objmode():
        _py_cq(q, t, p, Cq)


PER_KERNEL = MultibodyKernels(cb_mass, cb_forces, cb_constraints, cb_cq, cb_ct, cb_gamma,
                              cb_force_jacobians, cb_h, no_mass_jacobian)
FUSED = MultibodyKernels(fu_mass, cb_forces, fu_constraints, fu_cq, cb_ct, cb_gamma,
                         cb_force_jacobians, cb_h, no_mass_jacobian)


def callback_model(user_cls, kernels, tag):
    """A KernelModel whose kernels call back into an instance of ``user_cls``."""
    user = user_cls()

    class Callback(KernelModel):
        name = f"{user.name}_callback_{tag}"
        coordinates = tuple(user.coordinates)
        constraint_names = tuple(user.constraint_names)
        parameters = ()
        inputs = tuple(user.inputs)
        outputs = ()
        constant_mass = bool(user.constant_mass)
        kernel_set = kernels

        def kernel_parameters(self):
            if not hasattr(self, "_slot"):
                _MODELS.append(user)
                self._slot = len(_MODELS) - 1
            n, k = user.n_q, user.n_c
            return np.concatenate([[self._slot], np.zeros(n + 1 + k + k * n)])

        def initial_state(self):
            return user.initial_state()

    return Callback


def per_step(sim, steps, h, repeat):
    """Best CPU µs per step over ``repeat`` runs of ``steps`` communication steps."""
    best = np.inf
    state = sim.get_state()
    for _ in range(repeat):
        sim.set_state(state)
        t0 = time.process_time()
        for _ in range(steps):
            sim.do_step(sim.time, h)
        best = min(best, (time.process_time() - t0) / steps * 1e6)
    return best


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=2000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--h", type=float, default=1e-3)
    args = ap.parse_args(argv)
    user = readme_model()
    rows = []
    ref = Simulation(user, method="generalized-alpha", h=args.h, backend="python", check="off")
    rows.append(("python backend (the reference)", per_step(ref, args.steps, args.h, args.repeat),
                 ref.y, ref.stats))
    for tag, kernels in (("per kernel", PER_KERNEL), ("fused", FUSED)):
        cls = callback_model(user, kernels, tag.replace(" ", "_"))
        t0 = time.perf_counter()
        sim = Simulation(cls, method="generalized-alpha", h=args.h, backend="numba", check="off")
        sim.do_step(0.0, args.h)
        compile_s = time.perf_counter() - t0
        sim.reset()
        _TIME["in_python"] = 0.0
        us = per_step(sim, args.steps, args.h, args.repeat)
        inside = _TIME["in_python"] / (args.repeat * args.steps) * 1e6  # CPU µs per step, mean of the runs
        rows.append((f"numba + Python callbacks, {tag} (compile {compile_s:.0f} s)", us, sim.y, sim.stats))
        rows.append(("  of which inside the model's Python methods (mean)", inside, sim.y, sim.stats))
    print(f"README slider-crank (M, Q, C only), generalized-alpha h = {args.h:g}, {args.steps} steps; "
          f"CPU µs per step, best of {args.repeat}; load {os.getloadavg()[0]:.2f}")
    print(f"{'path':<58s} {'us/step':>9s} {'Newton it/step':>15s} {'max |y - y_ref|':>16s}")
    y0 = rows[0][2]
    for name, us, y, st in rows:
        print(f"{name:<58s} {us:9.1f} {st['newton_iterations'] / max(st['steps'], 1):15.2f} "
              f"{float(np.max(np.abs(y - y0))):16.2e}")


if __name__ == "__main__":
    main()
