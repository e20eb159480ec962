"""The FMU binary's own steps (fmu/native/cosim_fmi2.cpp "native step", issue 13).

After a completed fmi2DoStep the binary may step the compiled record of the
slave's integrator itself, without Python.  Here, with a real FMU imported by
fmpy: every native step gives the bits :class:`cosim.Simulation` gives for the
same calls; the slave catches up (time, step count, last successful time)
before any other call reaches Python; a step the binary may not take (NaN
input, wrong time, a failing Newton iteration, a long step) is taken by Python
with its status and message and leaves the state as it was; ``COSIM_FMU_NATIVE=0``
turns it off with the same results.
"""
import ctypes
import gc

import numpy as np
import pytest

import cosim

pytest.importorskip("fmpy")
pytest.importorskip("pythonfmu")
from fmpy import extract, read_model_description  # noqa: E402
from fmpy.fmi1 import FMICallException  # noqa: E402
from fmpy.fmi2 import (FMU2Slave, defaultCallbacks, fmi2CallbackFunctions,  # noqa: E402
                       fmi2CallbackLoggerTYPE, fmi2Discard, fmi2FMUstate)

from cosim.integrators.bdf_record import N_STEPS  # noqa: E402
from fmu.builder import build_fmu  # noqa: E402

pytestmark = pytest.mark.fmu

H = 1e-3
OUT = ["joint1_angle", "joint2_angle", "joint1_rate", "joint2_rate", "tip_x", "tip_y"]
FMI2_LAST_SUCCESSFUL_TIME, FMI2_ERROR = 2, 3


@pytest.fixture(scope="module")
def two_link_fmu(tmp_path_factory):
    """Fixed-step generalized-alpha (named: the default rule would take rk4 at this step)."""
    return build_fmu("two_link", tmp_path_factory.mktemp("native") / "TwoLink.fmu",
                     method="generalized-alpha", step=H)


class Pair:
    """The FMU and a Simulation driven by the same calls."""

    def __init__(self, path, name, method=None, **opts):
        md = read_model_description(str(path))
        vr = {v.name: v.valueReference for v in md.modelVariables}
        self.messages = []
        cb = fmi2CallbackFunctions()
        cb.logger = fmi2CallbackLoggerTYPE(
            lambda env, inst, status, cat, msg: self.messages.append((msg or b"").decode()))
        cb.allocateMemory = defaultCallbacks.allocateMemory
        cb.freeMemory = defaultCallbacks.freeMemory
        self.callbacks = cb  # kept alive as long as the instance
        self.fmu = FMU2Slave(guid=md.guid, unzipDirectory=extract(str(path)),
                             modelIdentifier=md.coSimulation.modelIdentifier, instanceName=name)
        self.fmu.instantiate(callbacks=cb, loggingOn=True)
        self.fmu.setupExperiment(startTime=0.0)
        self.fmu.enterInitializationMode()
        self.fmu.exitInitializationMode()
        self.name = name
        self.in_vr = [vr["tau1"], vr["tau2"]]
        self.out_vr = [vr[n] for n in OUT]
        self.sim = (cosim.Simulation(model="two_link", method="generalized-alpha", h=H) if method is None
                    else cosim.Simulation(model="two_link", method=method, **opts))
        self.t = 0.0

    def slave(self):
        """The slave object inside the FMU (same process: fmpy loads the binary here)."""
        found = [o for o in gc.get_objects()
                 if callable(getattr(type(o), "_native_arm", None))
                 and getattr(o, "instance_name", None) == self.name]
        assert len(found) == 1
        return found[0]

    def step(self, u=None, h=H):
        """One step of both (inputs set first when given); the two outputs."""
        if u is not None:
            self.fmu.setReal(self.in_vr, list(u))
            self.sim.set_inputs(list(u))
        self.fmu.doStep(self.t, h)
        self.sim.do_step(self.t, h)
        self.t += h
        return np.array(self.fmu.getReal(self.out_vr)), self.sim.get_outputs()

    def close(self):
        self.fmu.terminate()
        self.fmu.freeInstance()


def torque(t):
    return [0.5 * np.sin(2.0 * t), 0.2 * np.cos(3.0 * t)]


def test_native_steps_are_the_simulation_bit_for_bit_and_report_back(two_link_fmu, monkeypatch):
    runs = {}
    for native in ("1", "0"):
        monkeypatch.setenv("COSIM_FMU_NATIVE", native)
        pair = Pair(two_link_fmu, f"native-{native}")
        rows = []
        for k in range(300):  # a new input every step, then held, then set again unchanged
            u = torque(pair.t) if k < 150 else (None if k < 220 else [0.25, -0.1])
            got, want = pair.step(u)
            assert np.array_equal(got, want), (native, k)
            rows.append(got)
        slave = pair.slave()
        taken_natively = slave.native_steps  # before the next call syncs
        # any call into Python first reports the binary's steps: time and step count
        assert pair.fmu.getRealStatus(FMI2_LAST_SUCCESSFUL_TIME) == pair.t
        assert slave._sim.time == pair.sim.time == pair.t
        assert slave._sim._n_comm == pair.sim._n_comm == 300
        assert dict(slave._sim.integrator.stats) == dict(pair.sim.integrator.stats)
        runs[native] = (np.array(rows), taken_natively, slave.native_steps)
        pair.close()
    rows1, before1, after1 = runs["1"]
    rows0, _, after0 = runs["0"]
    assert np.array_equal(rows1, rows0)
    assert after0 == 0  # turned off: every step through Python
    # on: every step but the first (after which the binary takes the record) natively;
    # the count reaches Python only when something calls it
    assert before1 == 0 and after1 == 299


@pytest.fixture(scope="module")
def two_link_dopri5_fmu(tmp_path_factory):
    """No method given: the default rule's choice for a driven plant, dopri5."""
    return build_fmu("two_link", tmp_path_factory.mktemp("native5") / "TwoLinkDopri5.fmu")


def test_dopri5_native_steps_are_the_simulation_bit_for_bit(two_link_dopri5_fmu, monkeypatch):
    """dopri5, the default method of an FMU without a fixed step (adaptive, its deferred
    restart on a new input run in the C entry as mode 3): the binary takes every step
    after the first, with the bits of Simulation."""
    monkeypatch.setenv("COSIM_FMU_NATIVE", "1")
    pair = Pair(two_link_dopri5_fmu, "native-dopri5", method="dopri5")
    assert pair.sim.method == "dopri5"
    for k in range(200):   # a new input every step, then held
        got, want = pair.step(torque(pair.t) if k < 120 else None)
        assert np.array_equal(got, want), k
    slave = pair.slave()
    assert slave._sim.method == "dopri5" and slave._sim.backend == "numba"
    taken_natively = slave.native_steps
    assert pair.fmu.getRealStatus(FMI2_LAST_SUCCESSFUL_TIME) == pair.t
    assert dict(slave._sim.integrator.stats) == dict(pair.sim.integrator.stats)
    assert taken_natively == 0 and slave.native_steps == 199
    pair.close()


@pytest.fixture(scope="module")
def two_link_bdf_fmu(tmp_path_factory):
    return build_fmu("two_link", tmp_path_factory.mktemp("native_bdf") / "TwoLinkBdf.fmu", method="bdf")


def test_bdf_native_steps_shift_the_history_with_the_bits_of_the_simulation(two_link_bdf_fmu,
                                                                            monkeypatch):
    """bdf: a new input in the C entry is mode 3, the history shifted onto the new
    input's past in the kernel (bdf_shift) and then the advance; the binary takes every
    step after the first, with the bits of Simulation, and a jump too large to shift
    (over SHIFT_MAX: a restart at order 1, in Python) is handed back to Python."""
    monkeypatch.setenv("COSIM_FMU_NATIVE", "1")
    pair = Pair(two_link_bdf_fmu, "native-bdf", method="bdf")
    for k in range(200):   # a new input every step, then held
        got, want = pair.step(torque(pair.t) if k < 120 else None)
        assert np.array_equal(got, want), k
    slave = pair.slave()
    assert slave._sim.method == "bdf" and slave._sim.backend == "numba"
    assert slave.native_steps == 0   # (not reported yet)
    assert pair.fmu.getRealStatus(FMI2_LAST_SUCCESSFUL_TIME) == pair.t
    assert dict(slave._sim.integrator.stats) == dict(pair.sim.integrator.stats)
    assert slave.native_steps == 199
    assert slave._sim.integrator._k == pair.sim.integrator._k > 1
    steps = pair.sim.integrator.stats["steps"]
    got, want = pair.step([1e4, 0.0])   # beyond SHIFT_MAX: Python restarts, the same bits
    assert np.array_equal(got, want)
    for integ in (slave._sim.integrator, pair.sim.integrator):   # every step since a restart
        assert integ._I[N_STEPS] == integ.stats["steps"] - steps > 0
    assert slave.native_steps == 199
    pair.close()


@pytest.fixture(scope="module")
def two_link_rk4_fmu(tmp_path_factory):
    return build_fmu("two_link", tmp_path_factory.mktemp("native4") / "TwoLinkRk4.fmu",
                     method="rk4", step=H)


def test_rk4_native_steps_take_four_evaluations_with_a_new_input_every_step(two_link_rk4_fmu,
                                                                           monkeypatch):
    """Fixed-step rk4 in the C entry: a new input every step costs 4 evaluations, not 5
    (the end-of-step f is left pending, evaluated when Python needs it), with the
    bits of Simulation."""
    monkeypatch.setenv("COSIM_FMU_NATIVE", "1")
    pair = Pair(two_link_rk4_fmu, "native-rk4", method="rk4", h=H)
    for k in range(200):   # a new input every step, then held
        got, want = pair.step(torque(pair.t) if k < 120 else None)
        assert np.array_equal(got, want), k
        if k == 119:   # f at the start, then 4 per step (5 before: f at each end thrown away)
            assert pair.sim.integrator.stats["residual_evaluations"] == 1 + 4 * 120
    slave = pair.slave()
    assert slave._sim.method == "rk4" and slave._sim.backend == "numba"
    assert pair.fmu.getRealStatus(FMI2_LAST_SUCCESSFUL_TIME) == pair.t
    stats = dict(slave._sim.integrator.stats)
    assert stats == dict(pair.sim.integrator.stats)
    # the first held step also evaluates the end of the last step with a new input
    assert stats["residual_evaluations"] == 1 + 4 * 120 + 1 + 4 * 80
    assert slave.native_steps == 199
    for name in ("y", "qdd", "lam", "f_cur"):   # the pending end, evaluated on demand
        assert np.array_equal(getattr(slave._sim.integrator, name), getattr(pair.sim.integrator, name))
    pair.close()


def test_rollback_over_native_steps_is_bit_identical(two_link_fmu):
    pair = Pair(two_link_fmu, "native-rollback")
    for _ in range(20):
        pair.step(torque(pair.t))
    state = pair.fmu.getFMUstate()  # a Python call: syncs and takes the record back
    t0 = pair.t
    first = [pair.step(torque(pair.t))[0] for _ in range(40)]
    assert pair.slave().native_steps == 0 + 19  # reported at getFMUstate; the 40 not yet
    pair.fmu.setFMUstate(state)
    assert pair.slave().native_steps == 19 + 39  # 40 steps: the first after a Python call
    pair.t = t0
    second = []
    for _ in range(40):
        pair.fmu.setReal(pair.in_vr, torque(pair.t))
        pair.fmu.doStep(pair.t, H)
        pair.t += H
        second.append(np.array(pair.fmu.getReal(pair.out_vr)))
    assert np.array_equal(np.array(first), np.array(second))
    pair.fmu.freeFMUstate(state)
    pair.close()


def test_steps_the_binary_refuses_are_taken_by_python_with_status_and_state_unchanged(two_link_fmu):
    pair = Pair(two_link_fmu, "native-refused")
    slave, messages = pair.slave(), pair.messages
    for _ in range(10):
        pair.step(torque(pair.t))
    cases = [  # (inputs, t, h, status, message): each one right after native steps
        ([float("nan"), 0.0], None, H, fmi2Discard, "must be finite"),
        # an input above the bound of every input (cosim.validation.MAX_INPUT), as Python's
        ([1e300, 0.0], None, H, fmi2Discard, "must be at most 1e+12 in size, got 1e+300"),
        ([0.0, -1.5e12], None, H, fmi2Discard, "must be at most 1e+12 in size, got -1500000000000.0"),
        # (a force of 1e12: the fixed step resolves nothing of it)
        ([1e12, 0.0], None, H, fmi2Discard, "an error larger than the state itself"),
        (None, 0.5, H, FMI2_ERROR, "but the FMU is at"),
        (None, None, -H, FMI2_ERROR, "must be > 0"),
    ]
    pair.fmu.getRealStatus(FMI2_LAST_SUCCESSFUL_TIME)  # a Python call: reports, disarms
    for u, t_call, h, status, text in cases:
        for _ in range(3):  # the first after the previous (Python) call arms; two native
            got, want = pair.step(torque(pair.t))
            assert np.array_equal(got, want)
        synced = slave.native_steps  # as of the last Python call
        messages.clear()
        t_now = pair.t
        if u is not None:
            pair.fmu.setReal(pair.in_vr, u)
        with pytest.raises(FMICallException) as info:
            pair.fmu.doStep(pair.t if t_call is None else t_call, h)
        assert info.value.status == status, text
        assert any(text in m for m in messages), (text, messages)
        assert slave.native_steps == synced + 2  # the binary's steps reported first
        assert pair.fmu.getRealStatus(FMI2_LAST_SUCCESSFUL_TIME) == t_now
        if u is not None:  # the reference sees the same refused input
            with pytest.raises(Exception):
                pair.sim.set_inputs(u)
                pair.sim.do_step(pair.t, h)
    # a step longer than the step-budget-free span goes through Python: same bits
    assert slave._sim._budget_span < 51.0
    got, want = pair.step(torque(pair.t), h=51.0)
    assert np.array_equal(got, want)
    for _ in range(5):  # and the run goes on exactly as the reference
        got, want = pair.step(torque(pair.t))
        assert np.array_equal(got, want)
    pair.close()


@pytest.mark.parametrize("native", ["1", "0"])
def test_fmu_state_handles_are_independent_copies(two_link_fmu, monkeypatch, native):
    """FMI 2.0.4 §2.1.8 with native steps on and off: a handle is a copy that later steps,
    fmi2SetFMUstate, fmi2Reset and other handles never change; it can be set any number of
    times in any order (each time the same continuation, bit for bit), serialized at any
    time (the same bytes), freed in any order; fmi2SetFMUstate/fmi2FreeFMUstate/
    fmi2SerializedFMUstateSize of a freed handle is fmi2Error with a log line, not a crash,
    and changes nothing."""
    monkeypatch.setenv("COSIM_FMU_NATIVE", native)
    pair = Pair(two_link_fmu, f"handles-{native}")
    fmu = pair.fmu

    def run(n=30):  # n steps from the handle's time with the same inputs
        pair.t, rows = t1, []
        for _ in range(n):
            fmu.setReal(pair.in_vr, torque(pair.t))
            fmu.doStep(pair.t, H)
            pair.t += H
            rows.append(fmu.getReal(pair.out_vr))
        return np.array(rows)

    for _ in range(10):
        pair.step(torque(pair.t))
    first, t1 = fmu.getFMUstate(), pair.t
    twin = fmu.getFMUstate()  # the same state, serialized now (first: only at the end)
    first_bytes = bytes(fmu.serializeFMUstate(twin))
    reference = run()  # the handles must not follow these steps
    later = fmu.getFMUstate()  # at t1 + 30 H
    later_bytes = bytes(fmu.serializeFMUstate(later))
    fmu.setFMUstate(first)
    assert np.array_equal(run(), reference)
    fmu.setFMUstate(first)  # the same handle again
    assert np.array_equal(run(), reference)
    fmu.reset()  # handles survive fmi2Reset (they belong to the instance)
    fmu.setupExperiment(startTime=0.0)
    fmu.enterInitializationMode()
    fmu.exitInitializationMode()
    fmu.setFMUstate(first)
    assert np.array_equal(run(), reference)
    fmu.freeFMUstate(twin)
    # an old handle, serialized for the first time after steps, sets and a reset
    assert bytes(fmu.serializeFMUstate(first)) == first_bytes
    assert bytes(fmu.serializeFMUstate(later)) == later_bytes
    fmu.setFMUstate(later)  # the other one, then the first again
    assert fmu.getRealStatus(FMI2_LAST_SUCCESSFUL_TIME) == pytest.approx(t1 + 30 * H, abs=1e-12)
    fmu.setFMUstate(first)
    stale = fmi2FMUstate(first.value)  # the same pointer, kept after the handle is freed
    fmu.freeFMUstate(first)  # freed before the handle taken after it
    restored = fmu.deSerializeFMUstate(first_bytes)
    assert np.array_equal(run(), reference)  # the live state does not depend on the handle
    fmu.setFMUstate(restored)
    assert np.array_equal(run(), reference)
    calls = {"fmi2SetFMUstate": lambda: fmu.setFMUstate(stale),
             "fmi2SerializedFMUstateSize": lambda: fmu.serializeFMUstate(stale),
             "fmi2FreeFMUstate": lambda: fmu.freeFMUstate(fmi2FMUstate(stale.value)),
             "fmi2GetFMUstate": lambda: fmu.fmi2GetFMUstate(  # *FMUstate: a handle to replace
                 fmu.component, ctypes.byref(fmi2FMUstate(stale.value)))}
    outputs = fmu.getReal(pair.out_vr)
    for name, call in calls.items():
        pair.messages.clear()
        with pytest.raises(FMICallException) as info:
            call()
        assert info.value.status == FMI2_ERROR, name
        assert [m for m in pair.messages if m.startswith(name)] == [
            f"{name}: FMUstate is not a live state of this instance (never handed out by it, "
            f"or already freed); nothing changed"], pair.messages
    assert fmu.getReal(pair.out_vr) == outputs
    assert bytes(fmu.serializeFMUstate(later)) == later_bytes
    fmu.setFMUstate(restored)
    fmu.freeFMUstate(later)
    fmu.freeFMUstate(restored)
    assert np.array_equal(run(), reference)  # still steps, as before
    pair.close()


def test_no_native_step_or_input_after_terminate(two_link_fmu):
    """FMI 2.0.4 §4.2.4 on the binary's own paths: after native steps, fmi2Terminate; then
    fmi2DoStep and fmi2SetReal of an input (both answered without Python before) are
    fmi2Error naming the state, and the outputs and time stay."""
    pair = Pair(two_link_fmu, "native-terminated")
    for _ in range(10):
        pair.step(torque(pair.t))
    pair.fmu.terminate()  # a Python call: the binary's steps are reported first
    assert pair.slave().native_steps == 9
    outputs = pair.fmu.getReal(pair.out_vr)
    for call in (lambda: pair.fmu.doStep(pair.t, H), lambda: pair.fmu.setReal(pair.in_vr, [1.0, 2.0])):
        pair.messages.clear()
        with pytest.raises(FMICallException) as info:
            call()
        assert info.value.status == FMI2_ERROR
        assert any("is not allowed in state terminated" in m for m in pair.messages), pair.messages
    assert pair.fmu.getReal(pair.out_vr) == outputs
    assert pair.fmu.getRealStatus(FMI2_LAST_SUCCESSFUL_TIME) == pair.t
    pair.fmu.freeInstance()
