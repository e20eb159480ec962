"""ga_kernel's nonholonomic rows on a model with holonomic AND nonholonomic rows
(m = 1, n_g = 1), which no library model has: the index bookkeeping the knife edge
(m = 0) does not reach — [λ; ν] in the record, C_qᵀ and Bᵀ columns side by side, the
GGL μ columns after ν, [C_q; B] in the norms, the consistent accelerations and the
velocity projection (B Δv = 0).

The compiled method (the model's kernels given by address) against the same kernel
run as plain Python over the model's Python methods: same counts and ≤ 1e-10
(measured: identical bits); both hold the constraints.
"""
import dataclasses

import numpy as np
import pytest

import cosim
from cosim.models import knife_edge as ke

pytest.importorskip("numba")

COUNTS = ("steps", "rejected", "newton_iterations", "residual_evaluations",
          "jacobian_evaluations", "lu_factorizations")


# -- the knife edge with its heading tied to its position: C = θ − 2t − 0.3 sin x = 0 ------
def constraints(q, t, p, C):
    C[0] = q[2] - 2.0 * t - 0.3 * np.sin(q[0])


def constraint_jacobian(q, t, p, Cq):
    Cq[0, 0] = -0.3 * np.cos(q[0])
    Cq[0, 2] = 1.0


def constraint_dt(q, t, p, Ct):
    Ct[0] = -2.0


def gamma(q, v, t, p, g):
    g[0] = -0.3 * np.sin(q[0]) * v[0] * v[0]


def constraint_force_jacobian(q, lam, t, p, H):
    H[0, 0] = 0.3 * np.sin(q[0]) * lam[0]


class SteeredKnife(ke.KnifeEdge):
    name = "steered_knife"
    constraint_names = ("steering",)
    kernel_set = dataclasses.replace(ke.KERNELS, constraints=constraints,
                                     constraint_jacobian=constraint_jacobian, constraint_dt=constraint_dt,
                                     gamma=gamma, constraint_force_jacobian=constraint_force_jacobian)
    conservative = False

    def initial_state(self):
        return np.zeros(3), np.array([1.0, 0.0, 2.3])


@pytest.mark.parametrize("kw", [dict(h=1e-3), dict(rtol=1e-6, atol=1e-8)], ids=["fixed", "adaptive"])
@pytest.mark.parametrize("method", ["generalized-alpha", "generalized-alpha-i2"])
def test_kernel_with_holonomic_and_nonholonomic_rows_compiled_and_uncompiled(method, kw):
    runs = {}
    for backend in ("python", "numba"):
        sim = cosim.Simulation(model=SteeredKnife(), method=method, backend=backend, check="off", **kw)
        ys = []
        for k in range(10):
            sim.set_inputs([0.5 * np.sin(k), 0.2])   # a restart (consistent accelerations) each time
            sim.do_step(sim.time, 0.01)
            ys.append(sim.y)
        runs[backend] = sim, np.array(ys)
    (sp, yp), (sn, yn) = runs["python"], runs["numba"]
    assert sn.integrator.backend == "numba" and sp.integrator.backend == "python"
    assert sn.integrator.lam.shape == (2,)   # [λ; ν]
    assert {k: sp.stats[k] for k in COUNTS} == {k: sn.stats[k] for k in COUNTS}
    assert sp.stats["steps"] >= 10 and sp.stats["lu_factorizations"] >= 1
    assert np.max(np.abs(yp - yn)) <= 1e-10
    np.testing.assert_allclose(sn.integrator.lam, sp.integrator.lam, rtol=0, atol=1e-9)
    model = sn.model
    q, v = model.split(sn.y)
    assert abs(model.constraints(q, sn.time)[0]) <= 1e-12
    assert abs((model.nonholonomic_matrix(q, sn.time) @ v)[0]) <= 1e-7   # Newton tolerance


def test_a_new_model_plugs_into_the_compiled_method_without_compiling_it():
    """The method is compiled once per machine for every model: a model it has never
    seen (this test's) reaches it as compiled functions by address, and the method's
    entry keeps its one compiled signature (further compilation is disabled)."""
    from cosim.integrators.generalized_alpha import compiled_entry
    entry = compiled_entry()
    assert len(entry.signatures) == 1
    sim = cosim.Simulation(model=SteeredKnife(), method="generalized-alpha", backend="numba", h=1e-3,
                           check="off")
    sim.do_step(0.0, 0.05)
    assert sim.integrator.backend == "numba" and compiled_entry() is entry
    assert len(entry.signatures) == 1 and sim.stats["steps"] == 50


def test_compile_progress_is_never_silent_for_long(capsys):
    """A long compilation prints what it compiles, a line every `every` seconds while
    it runs, and its time (here with every = 0.05 s around a 0.3 s wait); a quick one
    (a load from the cache) says nothing."""
    import time

    from cosim import jit
    with jit.compiling("a test method", "about 0.3 s", every=0.05, quiet_for=0.05):
        time.sleep(0.3)
    with jit.compiling("a cache load", "seconds", quiet_for=1.0):
        pass   # quick: nothing said
    lines = capsys.readouterr().err.splitlines()
    assert lines[0].startswith("cosim: compiling a test method (about 0.3 s; once, then cached in")
    assert sum("still compiling a test method" in line for line in lines) >= 3
    assert not any("cache load" in line for line in lines)
    assert lines[-1].startswith("cosim: compiled a test method in 0.")


def test_a_slow_load_from_the_compile_cache_is_said_as_a_load(capsys):
    """Where numba's disk cache already holds the method (its index exists), a load that
    takes longer than ``quiet_for`` (a busy machine) is said as a load, not as a
    compilation of minutes; the methods of this test run have their index on disk."""
    import time

    import cosim
    from cosim import jit
    with jit.compiling("a cached method", "about 1-3 min", every=0.05, quiet_for=0.05, cached=True):
        time.sleep(0.2)
    lines = capsys.readouterr().err.splitlines()
    assert lines[0].startswith("cosim: loading a cached method from the compile cache (")
    assert any("still loading a cached method" in line for line in lines)
    assert lines[-1].startswith("cosim: loaded a cached method in 0.")
    assert not any("compiling" in line or "compiled" in line for line in lines)
    cosim.Simulation("two_link", backend="numba")
    assert jit._has_cache_index(jit._methods["cosim.integrators.ga_kernel"])
