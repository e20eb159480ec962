"""Plant parameters: integer literals for floating-point parameters (start-up and
run time), run-time changes validated with a reason, unknown keys and foreign
parameter files rejected at start, ``--help`` for both nodes."""
import os
import subprocess
import sys

import pytest

rclpy = pytest.importorskip("rclpy")
from rcl_interfaces.srv import SetParameters  # noqa: E402
from rclpy.parameter import Parameter  # noqa: E402

from ros_nodes.common import ConfigurationError  # noqa: E402
from ros_nodes.sim_node import SimulationNode  # noqa: E402
from ros_nodes.testing import (LAUNCH, REPO, NodeProcess, ros_environment,  # noqa: E402
                               unique_domain_id, wait_for)

pytestmark = pytest.mark.ros

PLANT_YAML = os.path.join(LAUNCH, "pendulum_lock_step.yaml")


@pytest.fixture
def context(monkeypatch, request):
    monkeypatch.setenv("ROS_AUTOMATIC_DISCOVERY_RANGE", "LOCALHOST")
    ctx = rclpy.Context()
    rclpy.init(context=ctx, domain_id=unique_domain_id(request.node.name))
    yield ctx
    rclpy.try_shutdown(context=ctx)


def test_integer_literals_for_double_parameters_at_start(context):
    node = SimulationNode(context=context, cli_args=[
        "--ros-args", "--params-file", PLANT_YAML, "-p", "end_time:=5", "-p", "params.l:=2",
        "-p", "communication_step:=1", "-p", "real_time_factor:=2", "-p", "atol:=1"])
    try:
        assert node.end_time == 5.0 and node.step == 1.0 and node.real_time_factor == 2.0
        assert node.config["params"]["l"] == 2.0 and isinstance(node.config["params"]["l"], float)
        assert node.get_parameter("end_time").type_ == Parameter.Type.DOUBLE
        assert node.sim.model.params["l"] == 2.0 and node.sim.atol == 1.0
    finally:
        node.destroy_node()


def set_remote(peer, **values):
    client = peer.create_client(SetParameters, "/cosim_sim/set_parameters")
    assert client.wait_for_service(timeout_sec=10.0)
    future = client.call_async(SetParameters.Request(
        parameters=[Parameter(k, value=v).to_parameter_msg() for k, v in values.items()]))
    wait_for(future.done, 10.0, what="set_parameters")
    return future.result().results[0]


def test_runtime_changes_validated_with_a_reason(harness):
    hs = harness({"mode": "real_time", "start_paused": True})
    ok = set_remote(hs.node, real_time_factor=1)  # an integer, as `ros2 param set` sends it
    assert ok.successful, ok.reason
    assert hs.plant.real_time_factor == 1.0 and isinstance(hs.plant.real_time_factor, float)
    assert set_remote(hs.node, input_timeout=2).successful and hs.plant.input_timeout == 2.0
    for values, text in (
            ({"real_time_factor": -1.0}, "real_time_factor"),
            ({"real_time_factor": float("nan")}, "real_time_factor"),
            ({"stale_input_policy": "bogus"}, "'stale_input_policy' must be one of hold, zero, "
                                              "pause, got 'bogus'"),
            ({"input_timeout": "soon"}, "Wrong parameter type"),
            ({"mode": "free_run"}, "read-only"),
            ({"state_name": "../x"}, "not allowed"),
            ({"params.m": -1.0}, "params.m"),
    ):
        res = set_remote(hs.node, **values)
        assert not res.successful and text in res.reason, (values, res.reason)
    assert hs.plant.real_time_factor == 1.0 and hs.plant.stale_policy == "hold"
    assert hs.plant.sim.model.params["m"] == 1.0 and hs.plant.mode == "real_time"


def test_unknown_keys_rejected_at_start(context, tmp_path):
    path = tmp_path / "plant.yaml"
    path.write_text("cosim_sim:\n  ros__parameters:\n    model: pendulum\n    end_tim: 2.0\n"
                    "    topics:\n      joint_state: js\n    state_file: /etc/hostname\n")
    with pytest.raises(ConfigurationError) as err:
        SimulationNode(context=context, cli_args=["--ros-args", "--params-file", str(path)])
    text = str(err.value)
    assert "unknown parameter(s) for this node: end_tim, state_file, topics.joint_state" in text
    assert "state_directory" in text


def test_model_parameter_names_no_code(context, tmp_path, monkeypatch):
    """A parameter never makes the node import code: 'module:Class' as the model is refused
    in one line before the module is imported (importing runs it)."""
    (tmp_path / "evil_plant.py").write_text(
        f"open({str(tmp_path / 'ran')!r}, 'w').close()\nclass Plant: pass\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    for model in ("evil_plant:Plant", "evil_plant.py:Plant", "this:X"):
        with pytest.raises(ConfigurationError) as err:
            SimulationNode(context=context, parameter_overrides=[Parameter("model", value=model)])
        text = str(err.value)
        assert text.startswith(f"parameter 'model': {model!r} names code") and "\n" not in text
        assert "nothing was imported" in text
    assert not (tmp_path / "ran").exists()
    assert "evil_plant" not in sys.modules and "this" not in sys.modules


def test_parameter_file_for_another_node_rejected(tmp_path):
    proc = NodeProcess("ros_nodes.sim_node", ros_environment(unique_domain_id("foreign")),
                       os.path.join(LAUNCH, "pd_pendulum.yaml"), log_dir=tmp_path)
    assert proc.wait(60.0) == 2
    assert "has no section for node '/cosim_sim' (sections: pd_controller)" in proc.log()
    proc.stop()


@pytest.mark.parametrize("module", ["ros_nodes.sim_node", "ros_nodes.pd_controller"])
def test_help_without_starting_a_node(module):
    env = dict(os.environ, ROS_AUTOMATIC_DISCOVERY_RANGE="LOCALHOST",
               ROS_DOMAIN_ID=str(unique_domain_id("help")))
    res = subprocess.run([sys.executable, "-m", module, "--help"], cwd=REPO, env=env,
                         capture_output=True, text=True, timeout=60)
    assert res.returncode == 0, res.stderr
    assert res.stdout.startswith("usage:") and "joint_names" in res.stdout
    assert "ready" not in res.stdout + res.stderr and "[INFO]" not in res.stdout + res.stderr


def test_help_into_a_closed_pipe_exits_quietly():
    """`cosim-ros --help | head -1`: the reader has gone before the help is written;
    exit 0 without a BrokenPipeError traceback."""
    env = dict(os.environ, ROS_AUTOMATIC_DISCOVERY_RANGE="LOCALHOST",
               ROS_DOMAIN_ID=str(unique_domain_id("help-pipe")))
    proc = subprocess.Popen([sys.executable, "-m", "ros_nodes.sim_node", "--help"], cwd=REPO,
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    proc.stdout.close()  # before the interpreter has started: every write meets a closed pipe
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 0 and b"Traceback" not in err, err.decode()


@pytest.mark.parametrize("name", ["pendulum_free_run.yaml", "pendulum_lock_step.yaml",
                                  "pendulum_real_time.yaml", "two_link_lock_step.yaml",
                                  "two_link_real_time.yaml"])
def test_launch_yaml_has_only_known_keys(context, name):
    node = SimulationNode(context=context, cli_args=[
        "--ros-args", "--params-file", os.path.join(LAUNCH, name)])
    try:
        assert node.config["state_reliability"] == "reliable" and not node.states.enabled
    finally:
        node.destroy_node()


def test_controller_accepts_integer_literals(context):
    from ros_nodes.pd_controller import PDController
    node = PDController(context=context, cli_args=[
        "--ros-args", "--params-file", os.path.join(LAUNCH, "pd_pendulum.yaml"),
        "-p", "kp:=[40]", "-p", "kd:=[8]", "-p", "max_effort:=5"])
    try:
        assert node.kp == [40.0] and node.kd == [8.0] and node.max_effort == 5.0
        assert node.get_parameter("kp").type_ == Parameter.Type.DOUBLE_ARRAY
    finally:
        node.destroy_node()


def test_integrator_step_cut_by_the_communication_step_is_said(context):
    node = SimulationNode(context=context, cli_args=[
        "--ros-args", "--params-file", PLANT_YAML, "-p", "integrator_step:=0.02",
        "-p", "communication_step:=0.01"])
    try:
        assert len(node.option_warnings) == 1
        assert "integrator_step 0.02 is longer than communication_step 0.01" in node.option_warnings[0]
        assert "h = 0.01" in node.option_warnings[0]
    finally:
        node.destroy_node()
    node = SimulationNode(context=context, cli_args=[
        "--ros-args", "--params-file", PLANT_YAML, "-p", "integrator_step:=0.005",
        "-p", "communication_step:=0.01"])
    try:
        assert node.option_warnings == []
    finally:
        node.destroy_node()


def test_ic_report_is_a_start_up_line(context, tmp_path):
    """Issue 19: the node says what the IC analysis did, INFO for a consistent start and
    WARN with the size of a repair (a real node process: its log output)."""
    node = SimulationNode(context=context, cli_args=["--ros-args", "--params-file", PLANT_YAML])
    try:
        assert node.ic_message.startswith("initial state consistent")
    finally:
        node.destroy_node()
    proc = NodeProcess("ros_nodes.sim_node", ros_environment(unique_domain_id("ic-report")),
                       overrides={"model": "crank_slider", "params.seed_initial_velocity": 1.0},
                       log_dir=tmp_path)
    try:
        wait_for(lambda: "ready (model crank_slider" in proc.log(), 60.0, what="node start")
        line = [ln for ln in proc.log().splitlines() if "initial-condition analysis (seed 000 eqs" in ln]
        assert len(line) == 1 and line[0].startswith("[WARN]") and "[cosim_sim]" in line[0]
        assert line[0].endswith("velocities repaired by 7.500e+01 (max abs change)")
    finally:
        proc.stop()


def test_declared_parameter_range_enforced_on_runtime_updates(harness, tmp_path):
    """Issue 14: a model's declared range (bouncing_ball: restitution e in [0, 1]) is checked
    for a `params.*` update from a peer; the reason names it and nothing changes."""
    plant = tmp_path / "ball.yaml"
    plant.write_text("cosim_sim:\n  ros__parameters:\n    model: bouncing_ball\n    method: dopri5\n"
                     "    params:\n      e: 0.8\n    communication_step: 0.01\n    mode: real_time\n"
                     "    start_paused: true\n")
    hs = harness(yaml_path=str(plant))
    before = dict(hs.plant.sim.model.params)
    res = set_remote(hs.node, **{"params.e": 2.0})
    assert not res.successful and "parameter 'e' must be in [0, 1], got 2.0" in res.reason, res.reason
    assert hs.plant.sim.model.params == before
    # the magnitude bound every parameter has (v_stop: NONNEGATIVE, at most 1e12)
    res = set_remote(hs.node, **{"params.v_stop": 1e300})
    assert not res.successful and "parameter 'v_stop' must be in [0, 1e+12], got 1e+300" in res.reason, \
        res.reason
    assert hs.plant.sim.model.params == before
    assert set_remote(hs.node, **{"params.e": 0.5}).successful
    assert hs.plant.sim.model.params["e"] == 0.5
