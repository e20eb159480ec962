"""A controller's gains are FMU parameters: the tunable parameters of the blocks inside an FMU
(cosim.blocks: a PID's gains and limits, a state feedback's K and N, a user block's numeric
params) are parameters with variability tunable; a value set between steps takes effect at
the block's next sample instant, exactly as cosim.Simulation.set_parameter at the same time,
and FMU states carry them.

FMUs here run the python backend (no compilation)."""
import json
import math

import numpy as np
import pytest

import cosim
from cosim.cli import main as cosim_main
from cosim.errors import InvalidInputError

fmpy = pytest.importorskip("fmpy")
pytest.importorskip("pythonfmu")
from fmpy import extract, read_model_description  # noqa: E402
from fmpy.fmi1 import FMICallException  # noqa: E402
from fmpy.fmi2 import FMU2Slave, fmi2Discard  # noqa: E402
from fmpy.validation import validate_fmu  # noqa: E402

pytestmark = pytest.mark.fmu

H = 0.01  # communication step of both FMUs
UNITS = {"angle": "rad", "angular_velocity": "rad/s", "reference": "rad", "torque": "N.m"}
PD_BLOCK = {"type": "state_feedback", "name": "pd", "sample_time": H, "K": [[40.0, 8.0]],
            "reference_gain": [[40.0]], "inputs": ["angle", "angular_velocity", "reference"],
            "outputs": ["torque"], "units": UNITS}


@pytest.fixture(scope="module")
def pd_fmu(tmp_path_factory):
    """The discrete PD controller as its own FMU (a state-feedback block, `--block`)."""
    path = tmp_path_factory.mktemp("block_params") / "PD.fmu"
    assert cosim_main(["fmu", "build", "fmu.examples:NoPlant", "-o", str(path), "--method", "rk4",
                       "--step", str(H), "--block", json.dumps(PD_BLOCK), "--name", "PD",
                       "--stop-time", "2", "--comm-step", str(H), "--backend", "python"]) == 0
    return path


@pytest.fixture(scope="module")
def pendulum_pd_fmu(tmp_path_factory):
    """The shipped scenario pendulum_pd: pendulum + supervisor + PID (kp, kd, tf, limits)."""
    path = tmp_path_factory.mktemp("block_params") / "PendulumPD.fmu"
    assert cosim_main(["fmu", "build", "pendulum_pd", "-o", str(path), "--name", "PendulumPD",
                       "--backend", "python"]) == 0
    return path


def pendulum_pd_simulation():
    from cosim.scenario import Scenario
    data = dict(Scenario.load("pendulum_pd").data, backend="python")
    return Scenario(data).build()


class Slave:
    def __init__(self, path, name):
        md = read_model_description(str(path))
        self.vr = {v.name: v.valueReference for v in md.modelVariables}
        self.fmu = FMU2Slave(guid=md.guid, unzipDirectory=extract(str(path)),
                             modelIdentifier=md.coSimulation.modelIdentifier, instanceName=name)
        self.fmu.instantiate()
        self.fmu.setupExperiment(startTime=0.0)
        self.fmu.enterInitializationMode()
        self.fmu.exitInitializationMode()

    def set(self, values):
        self.fmu.setReal([self.vr[k] for k in values], [float(v) for v in values.values()])

    def get(self, names):
        return self.fmu.getReal([self.vr[k] for k in names])

    def close(self):
        self.fmu.terminate()
        self.fmu.freeInstance()


def test_model_description_declares_the_gains_as_tunable_parameters(pd_fmu, pendulum_pd_fmu):
    """The controller FMU's K and N entries and the scenario's PID gains, filter constant and
    limits (and the supervisor's numeric parameter) are parameters, variability tunable, start
    = the block's value, with a description and the unit derived from the signals (declared
    `units` of the block, or the plant signal it is connected to)."""
    assert validate_fmu(str(pd_fmu)) == [] and validate_fmu(str(pendulum_pd_fmu)) == []
    want = {
        pd_fmu: {"pd.K[1,1]": (40.0, "N.m/rad", "state feedback gain"),
                 "pd.K[1,2]": (8.0, "N.m/(rad/s)", "state feedback gain"),
                 "pd.reference_gain[1,1]": (40.0, "N.m/rad", "reference gain N")},
        pendulum_pd_fmu: {"pd.kp": (60.0, "N.m/rad", "proportional gain of PID block 'pd'"),
                          "pd.ki": (0.0, "N.m/(rad.s)", "integral gain of PID block 'pd'"),
                          "pd.kd": (12.0, "N.m.s/rad", "derivative gain of PID block 'pd'"),
                          "pd.tf": (0.002, "s", "time constant of the derivative filter"),
                          "pd.u_min": (-30.0, "N.m", "lower output limit of PID block 'pd'"),
                          "pd.u_max": (30.0, "N.m", "upper output limit of PID block 'pd'"),
                          "supervisor.angle_limit": (1.0, None, "parameter 'angle_limit' of user "
                                                                "block 'supervisor'")},
    }
    for fmu, params in want.items():
        md = read_model_description(str(fmu))
        variables = {v.name: v for v in md.modelVariables}
        units = {u.name for u in md.unitDefinitions}
        for name, (start, unit, text) in params.items():
            v = variables[name]
            assert (v.causality, v.variability, v.initial) == ("parameter", "tunable", "exact"), name
            assert float(v.start) == start and v.unit == unit, (name, v.start, v.unit)
            assert text in v.description and "takes effect at the block's next sample instant" \
                in v.description, v.description
            assert unit is None or unit in units
    assert read_model_description(str(pd_fmu)).variableNamingConvention == "structured"


def test_gain_changed_between_steps_equals_simulation_with_the_same_change(pendulum_pd_fmu):
    """pendulum_pd through FMPy: kp and kd set with fmi2SetReal after step 30, then u_min = -1.5
    after step 60 (the output would reach -2.7 N·m; it saturates at the new limit).  cosim.Simulation with set_parameter at the same times gives
    the same outputs at every step (max difference 0); a run without the changes equals both up
    to step 30 and differs after it (the new gains act from the next step on)."""
    steps, changes = 100, {30: {"pd.kp": 90.0, "pd.kd": 6.0}, 60: {"pd.u_min": -1.5}}
    slave = Slave(pendulum_pd_fmu, "tuned")
    sim, plain = pendulum_pd_simulation(), pendulum_pd_simulation()
    names = list(sim.output_names)
    got, want, unchanged = [], [], []
    t = 0.0
    for k in range(steps):
        for name, value in changes.get(k, {}).items():
            slave.set({name: value})
            sim.set_parameter(name, value)
        slave.fmu.doStep(t, H)
        sim.do_step(t, H)
        plain.do_step(t, H)
        t += H
        got.append(slave.get(names))
        want.append(sim.get_outputs())
        unchanged.append(plain.get_outputs())
    assert slave.get(["pd.kp", "pd.kd", "pd.u_min"]) == [90.0, 6.0, -1.5]
    slave.close()
    got, want, unchanged = np.array(got), np.array(want), np.array(unchanged)
    assert np.max(np.abs(got - want)) == 0.0
    u = names.index("pd.u")
    assert np.array_equal(got[:30], unchanged[:30])
    assert abs(got[30, u] - unchanged[30, u]) > 1e-3  # the new gains act in step 31
    assert np.min(got[60:, u]) == -1.5  # the new limit holds


def test_controller_fmu_gain_change_and_state_restore(pd_fmu):
    """The PD controller FMU: K[1,1] changed between steps acts at the next sample instant as in
    cosim.Simulation (identical outputs); fmi2GetFMUstate / fmi2SetFMUstate and a serialized
    state restored in a second instance carry the gain: after a restore both continue as the
    run that had it."""
    inputs = {"pd.angle": 0.3, "pd.angular_velocity": -0.1, "pd.reference": 0.5}
    slave = Slave(pd_fmu, "pd")
    sim = cosim.Simulation(model="fmu.examples:NoPlant", method="rk4", h=H, blocks=[PD_BLOCK],
                           backend="python")
    slave.set(inputs)
    sim.set_inputs(inputs)
    t = 0.0

    def step(k, gain=None):
        nonlocal t
        rows = []
        for _ in range(k):
            slave.fmu.doStep(t, H)
            sim.do_step(t, H)
            t += H
            rows.append((slave.get(["pd.torque"])[0], sim.get_output_dict()["pd.torque"]))
        return rows

    rows = step(3)
    slave.set({"pd.K[1,1]": 55.0})
    sim.set_parameter("pd.K[1,1]", 55.0)
    rows += step(3)
    assert all(a == b for a, b in rows)
    # u = -K x + N r with x = (0.3, -0.1), r = 0.5: -40*0.3 + 8*0.1 + 40*0.5, then K11 = 55
    assert rows[2][0] == pytest.approx(8.8, abs=1e-12) and rows[3][0] == pytest.approx(4.3, abs=1e-12)

    state = slave.fmu.getFMUstate()
    blob = slave.fmu.serializeFMUstate(state)
    snapshot = sim.get_state()
    slave.set({"pd.K[1,1]": 10.0})
    sim.set_parameter("pd.K[1,1]", 10.0)
    step(2)
    slave.fmu.setFMUstate(state)
    sim.set_state(snapshot)
    t = sim.time
    assert slave.get(["pd.K[1,1]"]) == [55.0] and sim.blocks[0].K[0, 0] == 55.0
    after = step(2)
    assert all(a == b == pytest.approx(4.3, abs=1e-12) for a, b in after)
    slave.fmu.freeFMUstate(state)

    other = Slave(pd_fmu, "pd-restored")
    other.fmu.setFMUstate(other.fmu.deSerializeFMUstate(blob))
    assert other.get(["pd.K[1,1]"]) == [55.0]
    t0 = t - 2 * H
    other.fmu.doStep(t0, H)
    assert other.get(["pd.torque"]) == [after[0][0]]
    other.close()
    slave.close()


def test_rejected_gain_is_a_discard_and_changes_nothing(pendulum_pd_fmu):
    """A tunable value the block refuses (tf < 0, u_max <= u_min) is applied at the next
    fmi2DoStep, which returns fmi2Discard with the state unchanged; in cosim.Simulation
    set_parameter raises InvalidInputError naming the parameter and changes nothing."""
    slave = Slave(pendulum_pd_fmu, "bad")
    slave.fmu.doStep(0.0, H)
    before = slave.get(["angle", "pd.u"])
    slave.set({"pd.tf": -1.0})
    with pytest.raises(FMICallException) as info:
        slave.fmu.doStep(H, H)
    assert info.value.status == fmi2Discard
    assert slave.get(["angle", "pd.u"]) == before
    slave.close()
    # a gain beyond the magnitude bound every parameter has (cosim.models.ranges)
    slave = Slave(pendulum_pd_fmu, "big")
    slave.fmu.doStep(0.0, H)
    before = slave.get(["angle", "pd.u"])
    slave.set({"pd.kp": 1e13})
    with pytest.raises(FMICallException) as info:
        slave.fmu.doStep(H, H)
    assert info.value.status == fmi2Discard
    assert slave.get(["angle", "pd.u"]) == before
    slave.close()

    sim = pendulum_pd_simulation()
    with pytest.raises(InvalidInputError, match=r"parameter 'pd\.tf' must be in \[0, 1e\+12\], got -1\.0"):
        sim.set_parameter("pd.tf", -1.0)
    with pytest.raises(InvalidInputError, match=r"parameter 'pd\.kp' must be at most 1e\+12 in size, got 10000000000000\.0"):
        sim.set_parameter("pd.kp", 1e13)
    with pytest.raises(InvalidInputError, match=r"needs u_min < u_max, got -30\.0, -40\.0"):
        sim.set_parameter("pd.u_max", -40.0)
    assert (sim.blocks[1].tf, sim.blocks[1].u_max) == (0.002, 30.0)
    assert not math.isnan(sim.blocks[1].kp)
