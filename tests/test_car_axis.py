"""The IVP test set's car axis written as a user model from M, Q and C only
(tests/car_axis.py): the library's derived C_q, C_t, γ carry a time-dependent
constraint to the published solution, and the set-up check measures it like a library
model."""
import warnings

import numpy as np
import pytest

from car_axis import REFERENCE_Q, T_END, CarAxis
from cosim import Simulation, step_budget
from cosim.errors import TightToleranceWarning


def _error(method, rtol):
    sim = Simulation(CarAxis(), method=method, rtol=rtol, atol=rtol / 100)
    sim.do_step(0.0, T_END)
    q = sim.y[:4]
    return float(np.max(np.abs(q - REFERENCE_Q) / np.maximum(1.0, np.abs(REFERENCE_Q))))


@pytest.mark.parametrize("method, rtol", [("dopri5", 1e-6), ("bdf", 1e-5)])
def test_car_axis_user_model_reaches_the_test_set_solution(method, rtol):
    # measured: dopri5 2.4e-6 at rtol 1e-6, bdf 1.3e-5 at 1e-6 (err/rtol 2.4 and 13)
    assert _error(method, rtol) <= 20 * rtol


def test_car_axis_generalized_alpha_at_rtol_1e_8_is_refused_with_estimate(monkeypatch):
    # the first 0.3 s; the reference runs (rtol 1e-4, 1e-5) complete within the raised
    # time cap, so the estimate does not depend on the machine's speed
    monkeypatch.setattr(step_budget, "REF_SECONDS", 120.0)
    sim = Simulation(CarAxis(), method="generalized-alpha", rtol=1e-8, atol=1e-10,
                     method_options={"max_steps": 10_000})
    with pytest.raises(step_budget.UnreachableToleranceError) as info:
        step_budget.check(sim, 0.3, 0.3)
    text = str(info.value)
    assert "generalized-alpha (order 2) at rtol 1e-08" in text and "max_steps=10000" in text
    # steps growing as rtol^-1/2 from the reference runs (measured 1.5e4 steps to t = 0.3)
    est = float(text.split("about ")[1].split(" steps")[0])
    assert 1e4 < est < 4e4 and "steps growing as rtol^-1/2" in text
    assert "suggested: method 'dopri5'" in text or "suggested: method 'bdf'" in text
    # communication steps of 0.03 s: within the budget of each, accepted with one warning
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert step_budget.check(sim, 0.3, 0.03) == pytest.approx(est, rel=5e-3)   # 3 digits
    assert len([w for w in caught if issubclass(w.category, TightToleranceWarning)]) == 1
