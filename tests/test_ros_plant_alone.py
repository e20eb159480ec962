"""The plant alone from a parameter YAML (free run: /clock + joint states, seen
by a use_sim_time node), configuration errors, and the launch files' wiring."""
import importlib.util
import os
import sys
import types

import pytest

rclpy = pytest.importorskip("rclpy")
from rclpy.exceptions import ParameterException  # noqa: E402
from rclpy.parameter import Parameter  # noqa: E402
from rclpy.qos import qos_profile_sensor_data  # noqa: E402
from rosgraph_msgs.msg import Clock as ClockMsg  # noqa: E402
from sensor_msgs.msg import JointState  # noqa: E402
from std_srvs.srv import Trigger  # noqa: E402

from cosim.errors import CosimError  # noqa: E402
from ros_nodes.sim_node import ConfigurationError, SimulationNode  # noqa: E402
from ros_nodes.testing import (LAUNCH, RECORD_QOS, NodeProcess, Spinner, call_service,  # noqa: E402
                               load_parameters, ros_environment, unique_domain_id, wait_for)

pytestmark = pytest.mark.ros


def test_free_run_plant_alone_clock_and_sim_time(tmp_path):
    yaml_path = os.path.join(LAUNCH, "pendulum_free_run.yaml")
    params = load_parameters(yaml_path, "cosim_sim")
    params["end_time"] = 2.0  # shorter than the YAML's 10 s
    end_ns = round(params["end_time"] * 1e9)
    domain = unique_domain_id("free_run")
    ctx = rclpy.Context()
    rclpy.init(context=ctx, domain_id=domain)
    plant = spinner = None
    clock, states = [], []
    try:
        node = rclpy.create_node("listener", context=ctx)
        user = rclpy.create_node("sim_time_user", context=ctx,
                                 parameter_overrides=[Parameter("use_sim_time", value=True)])
        clock_sub = node.create_subscription(
            ClockMsg, "/clock", lambda m: clock.append(m.clock.sec * 10**9 + m.clock.nanosec),
            RECORD_QOS)
        node.create_subscription(JointState, "joint_states", states.append, qos_profile_sensor_data)
        spinner = Spinner(ctx, [node, user])
        # start paused so this process has matched the publishers before time runs
        plant = NodeProcess("ros_nodes.sim_node", ros_environment(domain), yaml_path,
                            {"start_paused": True, "end_time": params["end_time"]}, log_dir=tmp_path)
        wait_for(lambda: clock_sub.get_publisher_count() > 0, 30.0, what="the plant")
        res = call_service(node, Trigger, "resume_simulation", timeout=30.0)
        assert res.success, res.message
        wait_for(lambda: clock and clock[-1] == end_ns, 60.0, what="end_time on /clock")
        wait_for(lambda: user.get_clock().now().nanoseconds == end_ns, 5.0,
                 what="the use_sim_time node's clock")
        # strictly increasing while running; the frozen time repeats only while paused
        # (t = 0, start_paused) and idle at end_time (paused_clock_period)
        assert all(b > a or (b == a and a in (0, end_ns)) for a, b in zip(clock, clock[1:]))
        n = round(params["end_time"] / params["communication_step"])
        expected = {round(k * params["communication_step"] * 1e9) for k in range(n + 1)}
        # /clock is keep-last 1: a time superseded before delivery may be skipped
        assert set(clock) <= expected and len(set(clock)) > n // 2
        assert states and states[-1].name == ["pendulum_joint"]
        assert states[-1].header.stamp.sec * 10**9 + states[-1].header.stamp.nanosec == end_ns
        assert plant.proc.poll() is None  # idles at end_time
    finally:
        if plant is not None:
            plant.stop()
        if spinner is not None:
            spinner.stop()
        rclpy.try_shutdown(context=ctx)


@pytest.mark.parametrize("overrides, text", [
    ({"params.bogus": 1.0}, "has no parameter 'bogus'"),
    ({"mode": "fast"}, "'mode' must be one of lock_step, real_time, free_run, got 'fast'"),
    ({"joint_positions": ["nope"]}, "'nope' is not a state or output"),
    ({"joint_efforts": ["fx", "fy"]}, "'joint_efforts' has 2 entries but joint_names has 1"),
    ({"command_inputs": ["thrust"]}, "'thrust' is not an input"),
    ({"communication_step": -0.1}, "communication_step out of range"),
    ({"method_options.bogus": 1.0}, "bogus"),
    ({"method_options.rho_inf": 1.5}, "rho_inf must be in [0, 1], got 1.5"),
    ({"mode": "free_run", "state_publish_rate": 30.0},
     "'state_publish_rate' must be the communication rate 100 Hz divided by a whole number"),
    ({"state_publish_rate": 50.0}, "'state_publish_rate' applies to real_time and free_run"),
])
def test_configuration_errors_name_the_parameter(monkeypatch, overrides, text):
    monkeypatch.setenv("ROS_AUTOMATIC_DISCOVERY_RANGE", "LOCALHOST")
    ctx = rclpy.Context()
    rclpy.init(context=ctx, domain_id=unique_domain_id("config"))
    try:
        with pytest.raises((ConfigurationError, CosimError, ValueError, ParameterException)) as err:
            SimulationNode(context=ctx, cli_args=[
                "--ros-args", "--params-file", os.path.join(LAUNCH, "pendulum_lock_step.yaml")],
                parameter_overrides=[Parameter(k, value=v) for k, v in overrides.items()])
        assert text in str(err.value)
    finally:
        rclpy.try_shutdown(context=ctx)


def test_console_entry_exits_with_message_on_bad_parameter(tmp_path):
    proc = NodeProcess("ros_nodes.sim_node", ros_environment(unique_domain_id("exit")),
                       os.path.join(LAUNCH, "pendulum_lock_step.yaml"), {"model": "no_such_model"},
                       log_dir=tmp_path)
    assert proc.wait(60.0) == 2
    assert "unknown model 'no_such_model'" in proc.log()
    proc.stop()


def _load_launch_file(name, monkeypatch):
    """Import a launch file against minimal stand-ins of launch/launch_ros
    (not installable from PyPI) that record the actions."""
    class Action:
        def __init__(self, *args, **kwargs):
            self.args, self.kwargs = args, kwargs

    class LaunchConfiguration(Action):
        pass

    launch = types.ModuleType("launch")
    launch.LaunchDescription = lambda actions: list(actions)
    launch_actions = types.ModuleType("launch.actions")
    launch_actions.DeclareLaunchArgument = type("DeclareLaunchArgument", (Action,), {})
    launch_subs = types.ModuleType("launch.substitutions")
    launch_subs.LaunchConfiguration = LaunchConfiguration
    launch_ros = types.ModuleType("launch_ros")
    launch_ros_actions = types.ModuleType("launch_ros.actions")
    launch_ros_actions.Node = type("Node", (Action,), {})
    for mod in (launch, launch_actions, launch_subs, launch_ros, launch_ros_actions):
        monkeypatch.setitem(sys.modules, mod.__name__, mod)
    spec = importlib.util.spec_from_file_location(name, os.path.join(LAUNCH, name))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.generate_launch_description()


@pytest.mark.parametrize("name, nodes", [
    ("plant.launch.py", {"cosim_sim": "params_file"}),
    ("closed_loop.launch.py", {"cosim_sim": "plant_params", "pd_controller": "controller_params"}),
])
def test_launch_files_wire_existing_yaml(monkeypatch, name, nodes):
    actions = _load_launch_file(name, monkeypatch)
    declared = {a.args[0]: a.kwargs["default_value"] for a in actions
                if type(a).__name__ == "DeclareLaunchArgument"}
    started = {a.kwargs["name"]: a for a in actions if type(a).__name__ == "Node"}
    assert set(started) == set(nodes)
    for node_name, arg in nodes.items():
        default = declared[arg]
        assert os.path.isfile(default)
        assert load_parameters(default, node_name)  # the YAML has this node's section
        assert started[node_name].kwargs["parameters"][0].args[0] == arg
    assert started["cosim_sim"].kwargs["executable"] == "cosim-ros"


def test_a_process_holds_only_its_newest_domain_ids():
    """Each ROS test takes a DDS domain id no other process holds (an flock per id);
    a long test session keeps only its newest ones, so several sessions at once
    do not run the machine out of the 100 ids."""
    import fcntl  # noqa: PLC0415

    from ros_nodes import testing  # noqa: PLC0415
    ids = [unique_domain_id("recycle") for _ in range(testing.HELD_PER_PROCESS + 5)]
    newest = ids[-testing.HELD_PER_PROCESS:]
    assert len(set(newest)) == len(newest)
    assert list(testing._held) == newest
    for domain in newest:  # still locked against every other process
        fd = os.open(os.path.join(testing._LOCK_DIR, f"{domain}.lock"), os.O_RDWR)
        try:
            with pytest.raises(OSError):
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        finally:
            os.close(fd)
