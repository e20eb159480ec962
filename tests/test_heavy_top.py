"""Heavy symmetric top in Euler parameters (issue 12 item 6): a model whose mass
matrix depends on q, checked against Euler's equations in rotation-matrix form
(tests/reference.py, no cosim code), and spark on it: second order, the vertical and
spin angular momenta conserved (its seed 003 momentum form takes the protocol's Q,
which already holds ∂T/∂q − Ṁq')."""
import numpy as np
import pytest

import cosim
from cosim.models import load_model

from reference import heavy_top_reference

T_END = 1.0
MOMENTA = ("momentum_vertical", "momentum_spin")


def _run(method, t_end=T_END, backend="python", **kw):
    sim = cosim.Simulation(model="heavy_top", method=method, backend=backend, **kw)
    sim.do_step(0.0, t_end)
    return sim


def test_model_matches_euler_equations_in_rotation_matrix_form():
    """dopri5 at rtol 1e-10 on the Euler-parameter DAE vs DOP853 at 1e-13 on R, ω at
    t = 1, measured relative differences: nutation 2.5e-11, spin rate 1.5e-10, momenta
    1.5e-10, energy 2.9e-10; bound 1e-8 (the method's own error, ≥ 30× below it)."""
    ref = heavy_top_reference(T_END)
    out = _run("dopri5", rtol=1e-10, atol=1e-12).get_output_dict()
    for name in ("nutation", "spin_rate", *MOMENTA, "energy"):
        assert out[name] == pytest.approx(ref[name], rel=1e-8, abs=0), name
    # the motion is not trivial: the axis has nutated by 0.015 rad at t = 1
    assert abs(ref["nutation"] - np.pi / 6) > 0.01


def test_mass_matrix_depends_on_q_and_is_positive_definite():
    model = load_model("heavy_top")
    q0, _ = model.initial_state()
    q1 = np.array([0.5, 0.5, 0.5, 0.5])
    assert not model.constant_mass
    assert np.max(np.abs(model.mass(q0, 0.0) - model.mass(q1, 0.0))) > 0.1
    for q in (q0, q1):
        assert np.linalg.eigvalsh(model.mass(q, 0.0)).min() > 0.0


def test_spark_second_order_and_conserves_both_momenta():
    """spark (s = 1, h = 4, 2, 1 ms) against the rotation-matrix reference: errors in the
    nutation angle 6.0e-4 / 1.5e-4 / 3.7e-5 at t = 1 (measured; ratios 4.03, 4.01), and
    the two momenta held to the rounding level (measured ≤ 5.4e-14 over 1000 steps; bound
    1e-10 × |L|) — a symplectic method with the rotational symmetries conserves them
    exactly, where a wrong split of the forces (issue 12: Q counted twice) gave a 0.6
    drift and no convergence."""
    ref = heavy_top_reference(T_END)
    errors = []
    for h in (4e-3, 2e-3, 1e-3):
        sim = _run("spark", h=h)
        out = sim.get_output_dict()
        errors.append(abs(out["nutation"] - ref["nutation"]))
        for name in MOMENTA:
            assert out[name] == pytest.approx(ref[name], rel=1e-10, abs=0), (h, name)
    orders = np.log2(np.array(errors[:-1]) / np.array(errors[1:]))
    assert np.all((orders > 1.8) & (orders < 2.2)), (errors, orders)
    assert errors[-1] < 1e-4


ADAPTIVE = ("generalized-alpha", "generalized-alpha-i2", "bdf", "bdf-i2", "bdf-i1", "dopri5")


@pytest.mark.parametrize("method", ADAPTIVE)
def test_adaptive_methods_converge_with_rtol_on_the_top(method):
    """Every adaptive method on the top (t = 1, atol = rtol/100), against DOP853 at 1e-13
    on its index-1 ODE (itself within 1e-8 of the rotation-matrix reference, above):
    measured max|Δq| err/rtol at rtol 1e-6 / 1e-8 — generalized-alpha 7.2 / 3.2,
    generalized-alpha-i2 27 / 27, bdf 74 / 193, bdf-i2 11 / 23, bdf-i1 147 / 407, dopri5
    9.1 / 9.3 (`python benchmarks/work_precision.py --models heavy_top --rtols 1e-6 1e-8
    --starts 4`: spreads over 1e-15 starts ≤ 1.03).  Goals: the error falls by ≥ 25× over
    the two decades (slope ≥ 0.7, issue 12's band; measured ≥ 36×) and stays ≤ 600 × rtol
    — the BDF family's error on this undamped top is the sum of its per-step errors
    (README "spark on a configuration-dependent mass matrix")."""
    from reference import index1_reference
    q_ref = index1_reference(load_model("heavy_top"), T_END, rtol=1e-13, atol=1e-13)[0]
    errors = {}
    for rtol in (1e-6, 1e-8):
        sim = _run(method, backend="auto", rtol=rtol, atol=rtol / 100)
        errors[rtol] = float(np.max(np.abs(sim.y[:4] - q_ref)))
        assert errors[rtol] <= 600 * rtol, (rtol, errors[rtol])
    assert errors[1e-6] >= 25 * errors[1e-8], errors
