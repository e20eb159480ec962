"""Issue 14: method/model combinations that used to end in a raw ValueError or a misleading
'singular matrix' are clear errors, with the state unchanged."""
import warnings

import numpy as np
import pytest

import cosim
from cosim.errors import ConvergenceError, InvalidInputError


@pytest.mark.parametrize("method", ["spark", "block-lstable"])
def test_nonholonomic_model_refused_by_methods_without_nonholonomic_support(method):
    with pytest.raises(InvalidInputError, match=f"method '{method}' does not support nonholonomic "
                                                f"constraints \\(model 'knife_edge'; methods that do: "):
        cosim.Simulation("knife_edge", method, h=1e-3, backend="python")


def test_block_lstable_index3_stall_on_andrews_is_a_clear_error_and_index2_runs():
    warnings.simplefilter("ignore")
    sim = cosim.Simulation("andrews", "block-lstable", h=1e-3, backend="python")
    y0 = sim.y
    with pytest.raises(ConvergenceError, match=r"block stage equations did not converge; index 3 stalls "
                                               r"at its round-off floor .* index=2 or index=1"):
        sim.do_step(0.0, 3e-3)
    assert sim.time == 0.0 and np.array_equal(sim.y, y0)
    ends = []
    for index in (2, 1):
        other = cosim.Simulation("andrews", "block-lstable", h=1e-3, method_options={"index": index},
                                 backend="python")
        other.do_step(0.0, 3e-3)
        ends.append(other.y[:7])
    assert np.max(np.abs(ends[0] - ends[1])) < 1e-6  # index 2 and 1 agree (~1e-8 measured)
