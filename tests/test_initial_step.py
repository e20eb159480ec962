"""The first step of every method: one heuristic (kernel_common.initial_step) fed with
each method's estimate, and one fixed step (Integrator._fixed_step_size), checked
against values computed by hand on closed-form problems."""
import math
import warnings

import pytest

from cosim.integrators import make_integrator
from cosim.integrators.kernel_common import initial_step
from cosim.models import load_model

RTOL, ATOL = 1e-6, 1e-8


def test_initial_step_is_h_ref_times_the_root_clamped():
    # p = 2 by the square root: 2·0.01 / 8 = 0.0025 → h = 0.05 (exact), within [1e-10, 1]
    assert initial_step(8.0, 0.0, 2.0 * 0.01, 2, 1.0, 1e-3, 1e-10, 1.0) == 0.05
    # ... clamped to h_hi, and to h_lo from below
    assert initial_step(8.0, 0.0, 0.02, 2, 1.0, 1e-3, 1e-10, 1e-2) == 1e-2
    assert initial_step(8e30, 0.0, 0.02, 2, 1.0, 1e-3, 1e-10, 1e-2) == 1e-10
    # p = 1 exactly c/est; h_ref scales the root: 1e-3·(0.1/1e-5)^(1/2) = 0.1
    assert initial_step(4.0, 0.0, 0.1, 1, 1.0, 1e-3, 0.0, 1.0) == 0.1 / 4.0
    assert initial_step(1e-5, 0.0, 0.1, 2, 1e-3, 1.0, 0.0, 1.0) == pytest.approx(0.1, rel=1e-15)
    # p = 1 is c·h_ref/est in that order (HNW's pilot 0.01·‖y0‖/‖f0‖; h_ref·(c/est) is
    # another bit here: 0.007142857142857143)
    assert initial_step(7.0, 1e-5, 0.01, 1, 5.0, 1e-6, 0.0, math.inf) == 0.0071428571428571435
    # h_ref ≤ tiny (HNW: ‖y0‖ ≤ 1e-5) is no information as est ≤ tiny: h_zero
    assert initial_step(7.0, 1e-5, 0.01, 1, 1e-5, 1e-6, 0.0, math.inf) == 1e-6
    # p = 5: (0.01/3.2e-9)^(1/5) = (3.125e6)^(1/5) = 19.7… ; (0.01·32/1e-3)^(1/5) = 320^(1/5)
    assert initial_step(1e-3 / 32.0, 0.0, 0.01, 5, 1.0, 1e-6, 0.0, 100.0) == pytest.approx(
        320.0 ** 0.2, rel=1e-14)
    # no information (est ≤ tiny, or NaN): h_zero, still clamped
    assert initial_step(0.0, 0.0, 0.02, 2, 1.0, 1e-3, 1e-10, 1e-2) == 1e-3
    assert initial_step(1e-16, 1e-15, 0.01, 5, 1.0, 1e-6, 0.0, 1.0) == 1e-6
    assert initial_step(math.nan, 0.0, 0.02, 2, 1.0, 1e-3, 1e-10, 1e-2) == 1e-3
    assert initial_step(0.0, 0.0, 0.02, 2, 1.0, 1e-3, 1e-10, 1e-4) == 1e-4


def test_explicit_first_step_on_exponential_decay_is_hairer_norsett_wanner_by_hand():
    """y' = λy, λ = −2, y0 = 1: d0 = 1/W, d1 = 2/W (W = RTOL + ATOL), h0 = 0.01·d0/d1 =
    0.005, d2 = |f(y0 + h0 f0) − f0|/(W h0) = λ²/W = 4/W; h = min(100 h0,
    (0.01/max(d1, d2))^(1/5)) = (0.01·W/4)^(1/5) = 0.0190744610810238 (the order-4
    estimate's exponent; dopri5 and rk4 alike)."""
    model = load_model("lti", A=[[-2.0]], B=[[0.0]], C=[[1.0]], D=[[0.0]], x0=[1.0])
    expected = 0.0190744610810238
    assert (0.01 * (RTOL + ATOL) / 4.0) ** 0.2 == pytest.approx(expected, rel=1e-14)
    for method in ("dopri5", "rk4"):
        integ = make_integrator(model, method, rtol=RTOL, atol=ATOL, backend="python")
        integ.initialize()
        assert integ.h_next == pytest.approx(expected, rel=1e-14), method


@pytest.mark.parametrize("method, expected", [
    # h²/2·‖q''‖_W = 0.02 with ‖q''‖ = g/W_q, W_q = RTOL·1 + ATOL: h = √(0.04·1.01e-6/9.81)
    ("bdf", math.sqrt(0.04 * 1.01e-6 / 9.81)),
    # h²/2·‖(v, q'')‖ = 0.005 with ‖(0, −g)‖ = g/W_v, W_v = ATOL (v0 = 0): h = √(0.01·1e-8/9.81)
    ("local-index1", math.sqrt(0.01 * 1e-8 / 9.81)),
])
def test_implicit_first_step_of_a_ball_released_at_rest(method, expected):
    """Free fall from q = 1 at rest (bouncing_ball before the contact): q'' = −g, so the
    first step is h = √(2·fraction·W/g) by hand (3.2e-6 to 6.4e-5 s)."""
    integ = make_integrator(load_model("bouncing_ball"), method, rtol=RTOL, atol=ATOL, backend="python")
    integ.initialize()
    assert integ.h_next == pytest.approx(expected, rel=1e-14)


def test_generalized_alpha_first_step_of_a_ball_released_at_rest_in_its_error_weights():
    """generalized-α weighs with its internal tolerances (rtol_e, atol_e): h = √(0.02·W/g),
    W = rtol_e·1 + atol_e; first_step overrides it, capped by max_step."""
    model = load_model("bouncing_ball")
    integ = make_integrator(model, "generalized-alpha", rtol=RTOL, atol=ATOL, backend="python")
    integ.initialize()
    w = integ._err_rtol * 1.0 + integ._err_atol
    assert 0 < w < RTOL
    assert integ.h_next == pytest.approx(math.sqrt(0.02 * w / 9.81), rel=1e-14)
    integ = make_integrator(model, "generalized-alpha", first_step=0.5, max_step=0.25, backend="python")
    integ.initialize()
    assert integ.h_next == 0.25


@pytest.mark.parametrize("method", ["spark", "block-lstable"])
def test_fixed_step_methods_take_h_else_first_step_else_a_hundredth(method):
    model = load_model("pendulum")
    for kw, h, warns in ((dict(h=0.002), 0.002, False), (dict(first_step=0.003), 0.003, True),
                         ({}, 0.01, True)):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            integ = make_integrator(model, method, backend="python", **kw)
        named = [w for w in caught if "fixed-step method without error control" in str(w.message)]
        assert len(named) == (1 if warns else 0), (method, kw)
        if warns:
            assert f"using h={h!r}" in str(named[0].message)
        integ.initialize()
        assert integ.step(1.0) == h, (method, kw)
