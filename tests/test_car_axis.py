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


def test_car_axis_generalized_alpha_at_rtol_1e_8_is_refused_with_estimate():
    # 1476 steps at rtol 1e-4 (measured) x (1e4)^(1/2): 1.48e5 in one communication step,
    # over max_steps = 100000; a run at 1e-6 took 14764 steps
    sim = Simulation(CarAxis(), method="generalized-alpha", rtol=1e-8, atol=1e-10)
    with pytest.raises(step_budget.UnreachableToleranceError) as info:
        step_budget.check(sim, T_END, T_END)
    text = str(info.value)
    assert "generalized-alpha (order 2) at rtol 1e-08" in text and "max_steps=100000" in text
    assert 1e5 < float(text.split("about ")[1].split(" steps")[0]) < 3e5
    assert "suggested: method 'dopri5'" in text or "suggested: method 'bdf'" in text
    # ten communication steps: within the budget of each, accepted with one warning
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        step_budget.check(sim, T_END, T_END / 10)
    assert len([w for w in caught if issubclass(w.category, TightToleranceWarning)]) == 1
