"""The warm path of ``Simulation.do_step`` calls the compiled entry's machine code
without numba's dispatcher (cosim.integrators.record.direct_entry) while the held
inputs and parameters are arrays of its signature: the same steps bit for bit as
through the dispatcher, and the dispatcher again for anything else."""
import numpy as np
import pytest

import cosim
from cosim.integrators import record


def run(method, direct, steps=60):
    """The Panda (9 joints, stops off) at h = 1 ms, a new effort every third step and
    a damping change halfway (a new parameter vector); the record's bytes after
    every step."""
    from cosim.models.urdf import example_robot_path, load_urdf
    sim = cosim.Simulation(load_urdf(example_robot_path(), position_limits=False), method=method,
                           h=1e-3, backend="numba")
    integ = sim.integrator
    if not direct:
        integ._direct = None
        integ._check_direct()
    u0 = np.linspace(-0.5, 0.5, sim.model.n_inputs)
    seen, records = [], []
    for k in range(steps):
        if k % 3 == 0:
            sim.set_inputs(u0 * np.sin(0.1 * k))
        if k == steps // 2:
            sim.set_parameter("panda_joint2.damping", 0.3)
        sim.do_step(sim.time, 1e-3)
        seen.append(integ._direct_ok)
        records.append((integ._S.tobytes(), integ._I.tobytes()))
    return seen, records, sim


@pytest.mark.parametrize("method", ["rk4", "dopri5", "generalized-alpha"])
def test_direct_call_takes_the_dispatchers_steps(method):
    seen, direct, sim = run(method, True)
    assert all(seen), "the warm path did not call the machine code directly"
    assert sim.integrator._direct is record.direct_entry(sim.integrator._entry)
    seen, dispatched, _ = run(method, False)
    assert not any(seen)
    assert direct == dispatched


def test_inputs_off_the_signature_go_through_the_dispatcher():
    sim = cosim.Simulation(model="two_link", method="rk4", h=1e-3, backend="numba")
    integ = sim.integrator
    sim.do_step(0.0, 1e-3)
    assert integ._direct_ok
    u = np.array([0.2, 0.1])
    u.flags.writeable = False   # (the dispatcher has no overload for a read-only array)
    integ.u = u
    assert not integ._direct_ok
    integ.u = np.array([0.2, 0.1])
    assert integ._direct_ok
    p = sim.model._p
    sim.model._p = p[::-1][::-1][:]   # a view: still 1-D, C-contiguous
    sim.do_step(sim.time, 1e-3)
    assert integ._direct_ok
    sim.model._p = np.asfortranarray(np.stack([p, p]))[0]   # strided: not of the signature
    before = integ._S.copy()
    with pytest.raises(cosim.errors.ConvergenceError, match="No matching definition"):
        sim.do_step(sim.time, 1e-3)   # the dispatcher's refusal, as without the direct call
    assert not integ._direct_ok
    assert integ._S.tobytes() == before.tobytes()
