"""The FMU binary's C entry (cosim.jit.native_step_address) called through ctypes as
the binary calls it (fmu/native/native_step.h): one function for every method, which
runs the method's compiled entry by the address cosim.jit.native_addresses appends to
the model's — the bits ``Simulation.do_step`` gives, step by step."""
import ctypes

import numpy as np
import pytest

import cosim
from cosim import jit

pytest.importorskip("numba")

H = 1e-3
_D, _I = ctypes.POINTER(ctypes.c_double), ctypes.POINTER(ctypes.c_int64)
_i8 = ctypes.c_int64
NATIVE_STEP = ctypes.CFUNCTYPE(_i8, _i8, _D, _i8, _I, _i8, _D, _i8, _D, _i8, _D, _i8, ctypes.c_double,
                               _i8, _D, _i8, _I, _i8)


def _ptr(a, kind):
    return a.ctypes.data_as(kind)


@pytest.mark.parametrize("method, kw, new_inputs",
                         [("generalized-alpha", {}, False), ("rk4", dict(h=H), True), ("bdf", {}, True)])
def test_c_entry_steps_the_record_as_do_step_does(method, kw, new_inputs):
    """Mode 0 (inputs held) or 3 (a new input every step: restart in the kernel; bdf's
    history shifted in the kernel, bdf_shift)."""
    api, native = (cosim.Simulation(model="two_link", method=method, backend="numba", **kw)
                   for _ in range(2))
    for sim in (api, native):
        sim.set_inputs([0.3, -0.2])
        sim.do_step(0.0, H)
    rec = native.native_step_record()
    assert rec is not None
    address, _entry, S, I, LU, u, p, y_out, functions, budget, _t_slot = rec[:11]
    assert address == jit.native_step_address()          # one C entry for every method
    assert functions.shape == (native.integrator._fns.shape[0] + 1, 2)
    step = NATIVE_STEP(address)
    t = api.time
    for k in range(20):
        if new_inputs:
            u[:] = [0.3 + 0.01 * k, -0.2]
            api.set_inputs(u.copy())
        mode = 3 if new_inputs else 0
        status = step(mode, _ptr(S, _D), S.size, _ptr(I, _I), I.size, _ptr(LU, _D), LU.shape[0],
                      _ptr(u, _D), u.size, _ptr(p, _D), p.size, t + H, budget, _ptr(y_out, _D),
                      y_out.size, _ptr(functions, _I), functions.shape[0])
        assert status == 0
        t = api.do_step(t, H)
        assert np.array_equal(y_out, api.get_outputs())   # bit for bit
    native.native_steps_done(20)
    assert native.time == api.time
    assert np.array_equal(native.integrator.y, api.integrator.y)
    if method == "rk4":   # (rk4's deferred end evaluation counts: test_fmu_native's rk4 test)
        assert native.stats["steps"] == api.stats["steps"] == 21
    else:
        assert native.stats == api.stats
