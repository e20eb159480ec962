"""Compiled derivative kernels a kernel model does not have to write (issues 19, 13).

A :class:`~cosim.models.kernels.KernelModel` must give the kernels of M, Q and
C; its derivative kernels (C_q, C_t, γ, Q_q/Q_v, (C_qᵀλ)_q, (M a)_q) may be
None.  :func:`complete` then writes them as plain functions of the given ones
into a generated module (one per kernel set and scales, in the numba cache
directory), so the compiled integrators paste and compile them like
hand-written kernels (:func:`cosim.jit.model_functions`).  Per term:

* **complex step** (Squire & Trapp 1998, f'(x) = Im f(x + ih)/h, exact to
  rounding) where the kernel it differentiates compiles for complex128
  arrays — numba types ``np.sin``, ``**``, arithmetic on complex numbers but
  not ``math.sin``; found out by compiling it (:func:`complex_safe`);
* **central differences with Richardson extrapolation** (steps h, h/2, h/4,
  error O(h⁶) plus rounding ~ε/h) otherwise — the steps of
  :mod:`cosim.derivatives` (``H_FIRST``, ``H_SECOND``, scales
  ``coordinate_scale`` and ``time_scale``).

γ = −φ''(0), φ(σ) = C(q + σv, t + σ) (seed 000 eq. 5):

* with the model's C_q and C_t kernels: γ = −d/dσ [C_q v + C_t] by one
  complex step (exact), else by differences;
* from C alone, complex-safe: the Cauchy integral φ''(0) = 2/(2πi) ∮ φ(z)/z³
  dz by the trapezoid rule on the circle |z| = r in the complex σ plane
  (N points; error ~ (r/R)^N for φ analytic in |σ| < R, rounding ~ε|φ'|/r;
  no subtraction of nearby values) — the most accurate compiled scheme
  measured (``python benchmarks/auto_kernels.py --tables gamma``: 16 points at
  r = τ/2, worst 6e-15 relative on four complex-safe models);
* from C alone otherwise: second differences with Richardson extrapolation.

(C_qᵀλ)_q: complex step through the model's C_q kernel; Richardson differences of
the complex-step C_q; or, when C is not complex-safe, second differences of λᵀC
(~1e-8, like cosim.derivatives.hessian: a Newton-matrix term; nested Richardson
differences cost andrews 28x the analytic time per BDF step, this 3.5-8x).

A complex-step path is also checked once in Python at a probe state against
differences (a kernel using ``abs`` compiles for complex and is wrong): if
they disagree the term uses differences.  :func:`report` lists the path per
term; ``Simulation.derivative_report`` shows it (marked "compiled") on the
numba backend.
"""
from __future__ import annotations

import hashlib
import inspect
from dataclasses import replace

import numpy as np

from .. import derivatives, jit

DERIVATIVE_KERNELS = ("constraint_jacobian", "constraint_dt", "gamma", "force_jacobians",
                      "constraint_force_jacobian", "mass_jacobian_term")
TERM_NAMES = {"constraint_jacobian": "C_q", "constraint_dt": "C_t", "gamma": "gamma",
              "force_jacobians": "Q_q, Q_v", "constraint_force_jacobian": "(C_q^T lam)_q",
              "mass_jacobian_term": "(M a)_q"}
CS, FD, CONTOUR = "complex-step", "differences", "complex-contour"
# Cauchy-integral γ: N points on the circle of radius CONTOUR_RADIUS·τ in the σ plane
# (τ: the time in which q + σv moves one coordinate scale); chosen by measurement
# (benchmarks/auto_kernels.py --tables gamma)
CONTOUR_POINTS = 16
CONTOUR_RADIUS = 0.5
FORMAT = 1  # bump when the generated source changes


def missing(kernel_set, constant_mass):
    """The derivative kernels ``kernel_set`` leaves to :func:`complete`."""
    out = [f for f in DERIVATIVE_KERNELS if getattr(kernel_set, f) is None]
    if constant_mass and "mass_jacobian_term" in out:
        out.remove("mass_jacobian_term")  # zero: the kernels' default
    return out


# -- complex-safety: does a kernel compile for complex128 arrays? ------------------------
_safe_cache = {}


def complex_safe(fn, kind):
    """(True, "") when numba compiles kernel ``fn`` with complex128 arrays in the
    places ``kind`` says (its outputs complex too), else (False, why)."""
    key = (fn, kind)
    if key in _safe_cache:
        return _safe_cache[key]
    numba = jit.numba_module()
    if numba is None:
        return False, "numba is not importable"
    from numba import types  # noqa: PLC0415
    c1, c2, f1 = types.complex128[::1], types.complex128[:, ::1], types.float64[::1]
    sig = {"constraints": (c1, types.complex128, f1, c1),
           "constraint_jacobian": (c1, types.complex128, f1, c2),
           "constraint_dt": (c1, types.complex128, f1, c1),
           "forces": (c1, c1, types.float64, f1, f1, c1),
           "mass": (c1, types.float64, f1, c2)}[kind]
    try:
        jit._kernel_helpers([fn])  # the helpers it calls, made callable from compiled code
        numba.njit(error_model="numpy")(fn).compile(sig)
        result = (True, "")
    except Exception as exc:  # a TypingError: e.g. math.sin of a complex number
        lines = [ln.strip() for ln in str(exc).splitlines() if ln.strip()]
        calls = [ln[4:] for ln in lines if ln.startswith(">>> ")]  # numba: ">>> cos(complex128)"
        first = calls[0] if calls else (lines[0] if lines else type(exc).__name__)
        result = (False, f"{fn.__name__} does not compile for complex numbers (no {first[:60]})")
    _safe_cache[key] = result
    return result


# -- source templates (plain Python that numba compiles; names prefixed _ad_) ------------
_HELPERS = '''
def _ad_pow2(x):
    """The power of two nearest x (x ± h and h/2, h/4 are then exact)."""
    return 2.0 ** math.floor(math.log2(x) + 0.5)


def _ad_tau(q, v):
    """τ: the time in which q + σv moves one coordinate scale (at most time_scale)."""
    sc = {SC}
    fastest = 0.0
    for j in range(q.size):
        r = abs(v[j]) / max(abs(q[j]), sc[j])
        if r > fastest:
            fastest = r
    if fastest * {T} <= 1.0:
        return {T}
    return 1.0 / fastest
'''

# Jacobian of g(x) (m values) with respect to the array X: {EVAL} fills c from z.
_JAC_CS = '''
def {NAME}({ARGS}):
    """{DOC} by complex steps (generated by cosim.models.auto_kernels)."""
    sc = {SCALES}
    n = {X}.size
    m = {M}
    z = np.empty(n, dtype=np.complex128)
    c = np.empty(m, dtype=np.complex128)
{PRE}
    for j in range(n):
        for i in range(n):
            z[i] = {X}[i]
        h = 1e-20 * max(abs({X}[j]), sc[j])
        z[j] = complex({X}[j], h)
        for i in range(m):
            c[i] = 0.0
{EVAL}
        for i in range(m):
            {OUT}[i, j] = c[i].imag / h
'''

_JAC_FD = '''
def {NAME}({ARGS}):
    """{DOC} by central differences at h, h/2, h/4, Richardson-extrapolated
    (generated by cosim.models.auto_kernels)."""
    sc = {SCALES}
    n = {X}.size
    m = {M}
    z = np.empty(n)
    for i in range(n):
        z[i] = {X}[i]
    cp = np.empty(m)
    cm = np.empty(m)
    d = np.empty((3, m))
{PRE}
    for j in range(n):
        h0 = _ad_pow2({H1} * max(abs({X}[j]), sc[j]))
        for k in range(3):
            hk = h0 / 2.0 ** k
            z[j] = {X}[j] + hk
            c = cp
            for i in range(m):
                c[i] = 0.0
{EVAL}
            z[j] = {X}[j] - hk
            c = cm
            for i in range(m):
                c[i] = 0.0
{EVAL}
            for i in range(m):
                d[k, i] = (cp[i] - cm[i]) / (2.0 * hk)
        z[j] = {X}[j]
        for i in range(m):
            {OUT}[i, j] = (64.0 * d[2, i] - 20.0 * d[1, i] + d[0, i]) / 45.0
'''

_CT_CS = '''
def _ad_ct_cs(q, t, p, Ct):
    """C_t = ∂C/∂t (seed 000 eq. 3) by one complex step (generated)."""
    n = q.size
    m = Ct.size
    z = np.empty(n, dtype=np.complex128)
    for i in range(n):
        z[i] = q[i]
    c = np.zeros(m, dtype=np.complex128)
    h = 1e-20 * max(abs(t), {T})
    {C}(z, complex(t, h), p, c)
    for i in range(m):
        Ct[i] = c[i].imag / h
'''

_CT_FD = '''
def _ad_ct_fd(q, t, p, Ct):
    """C_t = ∂C/∂t (seed 000 eq. 3) by Richardson-extrapolated central differences (generated)."""
    m = Ct.size
    cp = np.empty(m)
    cm = np.empty(m)
    d = np.empty((3, m))
    h0 = _ad_pow2({H1} * {T})
    for k in range(3):
        hk = h0 / 2.0 ** k
        for i in range(m):
            cp[i] = 0.0
            cm[i] = 0.0
        {C}(q, t + hk, p, cp)
        {C}(q, t - hk, p, cm)
        for i in range(m):
            d[k, i] = (cp[i] - cm[i]) / (2.0 * hk)
    for i in range(m):
        Ct[i] = (64.0 * d[2, i] - 20.0 * d[1, i] + d[0, i]) / 45.0
'''

_GAMMA_VEL_CS = '''
def _ad_gamma_vel_cs(q, v, t, p, g):
    """γ = −d/dσ [C_q v + C_t](q + σv, t + σ) (seed 000 eq. 5) by one complex step
    through the model's C_q and C_t kernels (generated)."""
    n = q.size
    m = g.size
    h = 1e-20 * _ad_tau(q, v)
    z = np.empty(n, dtype=np.complex128)
    for i in range(n):
        z[i] = complex(q[i], h * v[i])
    tz = complex(t, h)
    G = np.zeros((m, n), dtype=np.complex128)
    ct = np.zeros(m, dtype=np.complex128)
    {CQ}(z, tz, p, G)
    {CT}(z, tz, p, ct)
    for k in range(m):
        s = ct[k]
        for i in range(n):
            s += G[k, i] * v[i]
        g[k] = -s.imag / h
'''

_GAMMA_VEL_FD = '''
def _ad_gamma_vel_fd(q, v, t, p, g):
    """γ = −d/dσ [C_q v + C_t](q + σv, t + σ) (seed 000 eq. 5) by Richardson-extrapolated
    central differences of the model's C_q and C_t kernels (generated)."""
    n = q.size
    m = g.size
    h0 = _ad_pow2({H1} * _ad_tau(q, v))
    z = np.empty(n)
    G = np.empty((m, n))
    ct = np.empty(m)
    d = np.zeros((3, m))
    for k in range(3):
        hk = h0 / 2.0 ** k
        for sgn in (1.0, -1.0):
            for i in range(n):
                z[i] = q[i] + sgn * hk * v[i]
            G[:, :] = 0.0
            ct[:] = 0.0
            {CQ}(z, t + sgn * hk, p, G)
            {CT}(z, t + sgn * hk, p, ct)
            for r in range(m):
                s = ct[r]
                for i in range(n):
                    s += G[r, i] * v[i]
                d[k, r] += sgn * s / (2.0 * hk)
    for r in range(m):
        g[r] = -(64.0 * d[2, r] - 20.0 * d[1, r] + d[0, r]) / 45.0
'''

_GAMMA_CONTOUR = '''
def _ad_gamma_contour(q, v, t, p, g):
    """γ = −φ''(0), φ(σ) = C(q + σv, t + σ) (seed 000 eq. 5), by the Cauchy integral
    φ''(0) = 2/(2πi) ∮ φ(z) z⁻³ dz: trapezoid rule on |z| = r, N points; φ real on the
    real axis, so the points of the upper half circle suffice (generated)."""
    n = q.size
    m = g.size
    N = {N}
    r = {R} * _ad_tau(q, v)
    z = np.empty(n, dtype=np.complex128)
    c = np.empty(m, dtype=np.complex128)
    acc = np.zeros(m)
    for j in range(N // 2 + 1):
        w = complex(math.cos(2.0 * math.pi * j / N), math.sin(2.0 * math.pi * j / N))
        s = r * w
        for i in range(n):
            z[i] = q[i] + s * v[i]
        for i in range(m):
            c[i] = 0.0
        {C}(z, t + s, p, c)
        e = (w * w).conjugate()
        weight = 1.0 if j == 0 or 2 * j == N else 2.0
        for i in range(m):
            acc[i] += weight * (c[i] * e).real
    for i in range(m):
        g[i] = -2.0 * acc[i] / (N * r * r)
'''

_GAMMA_FD2 = '''
def _ad_gamma_fd(q, v, t, p, g):
    """γ = −φ''(0), φ(σ) = C(q + σv, t + σ) (seed 000 eq. 5), by second differences at
    h, h/2, h/4, Richardson-extrapolated (generated)."""
    n = q.size
    m = g.size
    h0 = _ad_pow2({H2} * _ad_tau(q, v))
    z = np.empty(n)
    c0 = np.zeros(m)
    cp = np.empty(m)
    cm = np.empty(m)
    d = np.empty((3, m))
    {C}(q, t, p, c0)
    for k in range(3):
        hk = h0 / 2.0 ** k
        for i in range(n):
            z[i] = q[i] + hk * v[i]
        cp[:] = 0.0
        {C}(z, t + hk, p, cp)
        for i in range(n):
            z[i] = q[i] - hk * v[i]
        cm[:] = 0.0
        {C}(z, t - hk, p, cm)
        for i in range(m):
            d[k, i] = (cp[i] - 2.0 * c0[i] + cm[i]) / (hk * hk)
    for i in range(m):
        g[i] = -(64.0 * d[2, i] - 20.0 * d[1, i] + d[0, i]) / 45.0
'''

_H_HESSIAN = '''
def _ad_lam_c(z, t, p, lam, c):
    """λᵀC(z, t)."""
    for i in range(c.size):
        c[i] = 0.0
    {C}(z, t, p, c)
    s = 0.0
    for i in range(c.size):
        s += lam[i] * c[i]
    return s


def _ad_h_hessian(q, lam, t, p, H):
    """(C_qᵀλ)_q = ∂²(λᵀC)/∂q² by central second differences, steps ε^¼·max(|q_j|, s_j)
    (~1e-8 relative, as cosim.derivatives.hessian: a Newton-matrix term) (generated)."""
    sc = {SC}
    n = q.size
    c = np.empty(lam.size)
    z = np.empty(n)
    h = np.empty(n)
    for i in range(n):
        z[i] = q[i]
        h[i] = _ad_pow2(1.220703125e-4 * max(abs(q[i]), sc[i]))
    f0 = _ad_lam_c(z, t, p, lam, c)
    for i in range(n):
        z[i] = q[i] + 2.0 * h[i]
        fp = _ad_lam_c(z, t, p, lam, c)
        z[i] = q[i] - 2.0 * h[i]
        fm = _ad_lam_c(z, t, p, lam, c)
        H[i, i] = (fp - 2.0 * f0 + fm) / (4.0 * h[i] * h[i])
        for j in range(i):
            s = 0.0
            for si in (1.0, -1.0):
                for sj in (1.0, -1.0):
                    z[i] = q[i] + si * h[i]
                    z[j] = q[j] + sj * h[j]
                    s += si * sj * _ad_lam_c(z, t, p, lam, c)
            z[j] = q[j]
            H[i, j] = H[j, i] = s / (4.0 * h[i] * h[j])
        z[i] = q[i]
'''

_FORCE_JACOBIANS = '''
def _ad_force_jacobians_{KIND}(q, v, t, u, p, Qq, Qv):
    """(Q_q, Q_v) (generated)."""
    _ad_qq_{KIND}(q, v, t, u, p, Qq)
    _ad_qv_{KIND}(q, v, t, u, p, Qv)
'''


def _indent(text, spaces):
    return "\n".join(" " * spaces + ln if ln else ln for ln in text.splitlines())


def _jacobian(kind, name, args, doc, x, m, pre, ev, out, scales):
    """Source of a Jacobian kernel (complex step or differences) of ``ev`` w.r.t. ``x``."""
    template = _JAC_CS if kind == CS else _JAC_FD
    depth = 8 if kind == CS else 12
    return (template.replace("{NAME}", name).replace("{ARGS}", args).replace("{DOC}", doc)
            .replace("{X}", x).replace("{M}", m).replace("{PRE}", _indent(pre, 4))
            .replace("{EVAL}", _indent(ev, depth)).replace("{OUT}", out).replace("{SCALES}", scales))


def _source(names, n_q, scales, T):
    """The generated module's source: every variant of every term (each is pasted into
    a compiled entry only when chosen)."""
    sc = "(" + "".join(f"{float(s)!r}, " for s in scales) + ")"
    ones = "(" + "1.0, " * n_q + ")"
    sub = {"{SC}": sc, "{T}": repr(float(T)), "{H1}": repr(derivatives.H_FIRST),
           "{H2}": repr(derivatives.H_SECOND), "{N}": str(CONTOUR_POINTS), "{R}": repr(CONTOUR_RADIUS)}
    for k, v in names.items():
        sub["{" + k + "}"] = v
    parts = [_HELPERS, _CT_CS, _CT_FD, _GAMMA_CONTOUR, _GAMMA_FD2, _H_HESSIAN]
    if "CQ" in names and "CT" in names:
        parts += [_GAMMA_VEL_CS, _GAMMA_VEL_FD]
    for kind, tag in ((CS, "cs"), (FD, "fd")):
        cplx = kind == CS
        parts.append(_jacobian(kind, f"_ad_cq_{tag}", "q, t, p, Cq", "C_q", "q", "Cq.shape[0]",
                               "tz = complex(t, 0.0)" if cplx else "tz = t",
                               "{C}(z, tz, p, c)", "Cq", sc))
        dt = "np.complex128" if cplx else "np.float64"
        parts.append(_jacobian(kind, f"_ad_qq_{tag}", "q, v, t, u, p, Qq", "Q_q", "q", "Qq.shape[0]",
                               f"vz = np.empty(n, dtype={dt})\nfor i in range(n):\n    vz[i] = v[i]",
                               "{F}(z, vz, t, u, p, c)", "Qq", sc))
        parts.append(_jacobian(kind, f"_ad_qv_{tag}", "q, v, t, u, p, Qv", "Q_v", "v", "Qv.shape[0]",
                               f"qz = np.empty(n, dtype={dt})\nfor i in range(n):\n    qz[i] = q[i]",
                               "{F}(qz, z, t, u, p, c)", "Qv", ones))
        parts.append(_FORCE_JACOBIANS.replace("{KIND}", tag))
        parts.append(_jacobian(kind, f"_ad_ma_{tag}", "q, a, t, p, J", "(M a)_q", "q", "J.shape[0]",
                               f"Mz = np.empty((n, n), dtype={dt})",
                               "Mz[:, :] = 0.0\n{MASS}(z, t, p, Mz)\nfor r in range(n):\n"
                               "    for i in range(n):\n        c[r] += Mz[r, i] * a[i]", "J", sc))
        # (C_q^T λ)_q through a C_q kernel: the model's (CQ) or the generated one
        for src, cq in (("user", names.get("CQ")), ("auto", "_ad_cq_cs")):
            if cq is None or (src != "user" and cplx):
                continue  # a generated C_q is not differentiated by complex steps
            parts.append(_jacobian(
                kind, f"_ad_h_{src}_{tag}", "q, lam, t, p, H", "(C_q^T lam)_q", "q", "H.shape[0]",
                f"G = np.empty((lam.size, n), dtype={dt})\ntz = " + ("complex(t, 0.0)" if cplx else "t"),
                f"G[:, :] = 0.0\n{cq}(z, tz, p, G)\nfor i in range(n):\n    for r in range(lam.size):\n"
                f"        c[i] += G[r, i] * lam[r]", "H", sc))
    text = "\n".join(parts)
    for k, v in sub.items():
        text = text.replace(k, v)
    return text


_HEADER = '''"""Derivative kernels generated by cosim.models.auto_kernels (format {fmt}) for the
kernels {kernels}; do not edit."""
import math

import numpy as np
'''

_modules = {}


def _load(text, user_functions, label):
    """Import the generated source (written once to the cache directory, named by its
    digest) with the user's kernels bound to their names."""
    digest = hashlib.sha256(text.encode()).hexdigest()[:16]
    if digest in _modules:
        return _modules[digest]
    module = jit._generated_module("auto", label, text,
                                   preset={fn.__name__: fn for fn in user_functions})
    for name, obj in vars(module).items():
        if name.startswith("_ad_") and callable(obj):
            obj.__cosim_kernel_helper__ = True  # pasted with the kernels that call them
    _modules[digest] = module
    return module


def _probe_state(model):
    q, v = model.initial_state()
    q = np.ascontiguousarray(q, dtype=float)
    s = np.broadcast_to(np.asarray(getattr(model, "coordinate_scale", 1.0), dtype=float), q.shape)
    # a non-zero velocity, so that γ is not trivially zero at a start from rest
    v = np.ascontiguousarray(v, dtype=float) + 0.1 * s
    u = np.ascontiguousarray(model.default_inputs(), dtype=float)
    return q, v, 0.0, u


def _agree(a, b, rtol=derivatives.PROBE_RTOL, atol=derivatives.PROBE_ATOL):
    err = float(np.max(np.abs(a - b))) if a.size else 0.0
    size = max(float(np.max(np.abs(a))), float(np.max(np.abs(b)))) if a.size else 0.0
    return err <= rtol * size + atol, err


def complete(model):
    """(kernels, report): ``model``'s kernel set with every missing derivative kernel
    generated, and {term: (path, note)}; (None, reason) when they cannot be compiled."""
    cached = model.__dict__.get("_auto_kernels")
    if cached is not None:
        return cached
    result = _complete(model)
    model.__dict__["_auto_kernels"] = result
    return result


def _complete(model):
    ks = model.kernel_set
    todo = missing(ks, model.constant_mass)
    if jit.numba_module() is None:
        return None, f"numba is not importable ({jit.unavailable_reason()})"
    given = [fn for fn in ks.functions() if fn is not None]
    try:  # the generated kernels call the model's by name: they must be pastable
        for fn in given:
            inspect.getsource(fn)
    except (OSError, TypeError):
        return None, "a kernel's source is not readable"
    names = {"C": ks.constraints.__name__, "F": ks.forces.__name__, "MASS": ks.mass.__name__}
    if ks.constraint_jacobian is not None and ks.constraint_dt is not None:
        names.update(CQ=ks.constraint_jacobian.__name__, CT=ks.constraint_dt.__name__)
    n = model.n_q
    scales = np.broadcast_to(np.asarray(getattr(model, "coordinate_scale", 1.0), dtype=float), (n,))
    T = float(getattr(model, "time_scale", 1.0))
    text = _HEADER.format(fmt=FORMAT, kernels=", ".join(f"{f.__module__}.{f.__qualname__}" for f in given))
    text += _source(names, n, scales, T)
    mod = _load(text, [ks.mass, ks.forces, ks.constraints] +
                [f for f in (ks.constraint_jacobian, ks.constraint_dt) if f is not None],
                getattr(model, "kernel_name", model.name))
    q, v, t, u = _probe_state(model)
    p = np.ascontiguousarray(model.kernel_parameters(), dtype=float)
    m = model.n_c
    lam = np.linspace(1.0, 2.0, m)
    chosen, report = {}, {}

    def pick(term, cs_fn, fd_fn, safe, shape_args, call):
        """complex step when ``safe`` (ok, why) and it agrees with differences at the probe."""
        ok, why = safe
        if ok:
            outs_cs, outs_fd = shape_args(), shape_args()
            try:
                call(cs_fn, outs_cs)
                call(fd_fn, outs_fd)
                agree, err = _agree(np.concatenate([o.ravel() for o in outs_cs]),
                                    np.concatenate([o.ravel() for o in outs_fd]))
            except Exception as exc:  # noqa: BLE001 (runs the user's code in Python)
                agree, err, why = False, None, f"{type(exc).__name__}: {str(exc)[:60]}"
            if agree:
                chosen[term] = cs_fn
                report[term] = (CS, f"agrees with differences to {err:.1e} at a probe state")
                return
            if err is not None:
                why = f"complex step differs from differences by {err:.1e} (code not complex-safe)"
        chosen[term] = fd_fn
        report[term] = (FD, why)

    safe_c = complex_safe(ks.constraints, "constraints")
    if "constraint_jacobian" in todo:
        pick("constraint_jacobian", mod._ad_cq_cs, mod._ad_cq_fd, safe_c,
             lambda: [np.zeros((m, n))], lambda f, o: f(q, t, p, *o))
    if "constraint_dt" in todo:
        pick("constraint_dt", mod._ad_ct_cs, mod._ad_ct_fd, safe_c,
             lambda: [np.zeros(m)], lambda f, o: f(q, t, p, *o))
    if "gamma" in todo:
        if "CQ" in names:
            sq = complex_safe(ks.constraint_jacobian, "constraint_jacobian")
            st = complex_safe(ks.constraint_dt, "constraint_dt")
            pick("gamma", mod._ad_gamma_vel_cs, mod._ad_gamma_vel_fd, sq if not sq[0] else st,
                 lambda: [np.zeros(m)], lambda f, o: f(q, v, t, p, *o))
            report["gamma"] = (report["gamma"][0], "through the model's C_q, C_t: " + report["gamma"][1])
        else:
            pick("gamma", mod._ad_gamma_contour, mod._ad_gamma_fd, safe_c,
                 lambda: [np.zeros(m)], lambda f, o: f(q, v, t, p, *o))
            if chosen["gamma"] is mod._ad_gamma_contour:
                report["gamma"] = (CONTOUR, f"Cauchy integral on a circle ({CONTOUR_POINTS} points), "
                                   + report["gamma"][1])
    if "force_jacobians" in todo:
        pick("force_jacobians", mod._ad_force_jacobians_cs, mod._ad_force_jacobians_fd,
             complex_safe(ks.forces, "forces"), lambda: [np.zeros((n, n)), np.zeros((n, n))],
             lambda f, o: f(q, v, t, u, p, *o))
    if "constraint_force_jacobian" in todo:
        if "CQ" in names:
            pick("constraint_force_jacobian", mod._ad_h_user_cs, mod._ad_h_user_fd,
                 complex_safe(ks.constraint_jacobian, "constraint_jacobian"),
                 lambda: [np.zeros((n, n))], lambda f, o: f(q, lam, t, p, *o))
        elif chosen.get("constraint_jacobian") is mod._ad_cq_cs:
            # Richardson differences of the complex-step C_q: ~1e-14
            chosen["constraint_force_jacobian"] = mod._ad_h_auto_fd
            report["constraint_force_jacobian"] = (FD, "Richardson differences of the complex-step C_q")
        else:  # C is not complex-safe: the Hessian of λᵀC by plain second differences
            # (6n² C calls by nested Richardson cost andrews 28x per BDF step; this 2n²)
            chosen["constraint_force_jacobian"] = mod._ad_h_hessian
            report["constraint_force_jacobian"] = (FD, "second differences of λᵀC (~1e-8: a Newton-matrix term)")
    if "mass_jacobian_term" in todo:
        pick("mass_jacobian_term", mod._ad_ma_cs, mod._ad_ma_fd, complex_safe(ks.mass, "mass"),
             lambda: [np.zeros((n, n))], lambda f, o: f(q, v, t, p, *o))
    kernels = replace(ks, **chosen)
    if jit._pasted_kernels(kernels.functions(), set()) is None:
        return None, ("its kernels cannot be pasted into a compiled entry (a closure, a global that "
                      "is not a number or a plain module, or a name clash)")
    return kernels, report


def report(model):
    """{term name: (path, note)} of the generated kernels (empty when nothing is generated)."""
    kernels, rep = complete(model)
    if kernels is None:
        return {}
    return {TERM_NAMES[k]: v for k, v in rep.items()}


def without_derivative_kernels(cls, terms=DERIVATIVE_KERNELS):
    """A subclass of kernel model ``cls`` whose derivative kernels ``terms`` are None
    (tests and benchmarks compare it with ``cls``)."""
    body = {"kernel_set": replace(cls.kernel_set, **{t: None for t in terms}),
            "kernel_name": f"{getattr(cls, 'kernel_name', cls.name)}_auto",
            "__module__": cls.__module__}
    return type(cls.__name__ + "AutoKernels", (cls,), body)


__all__ = ["without_derivative_kernels", "complete", "complex_safe", "missing", "report", "DERIVATIVE_KERNELS"]
