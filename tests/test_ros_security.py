"""Attacks on the plant node by a peer in the DDS domain (loopback, a domain of its
own): a remote change of the state location, path traversal, a symbolic link, a
FIFO, a huge file, more state files or bytes than the quota, over-long and
over-many joint names, over-long parameter values.  Each is refused with a reply or
a log line that names only the requested value (cut to a bounded length), and
leaves the simulation exactly as before; the node keeps stepping."""
import os
import resource

from sensor_msgs.msg import JointState

import pytest

rclpy = pytest.importorskip("rclpy")
from rcl_interfaces.srv import SetParameters  # noqa: E402
from rclpy.parameter import Parameter  # noqa: E402

import cosim  # noqa: E402
from ros_nodes.common import MAX_LINE  # noqa: E402
from ros_nodes.testing import LAUNCH, load_parameters, simulation_kwargs, wait_for  # noqa: E402

pytestmark = pytest.mark.ros

PLANT_YAML = os.path.join(LAUNCH, "pendulum_lock_step.yaml")


def set_remote(hs, **values):
    """``ros2 param set`` as a peer does it: the node's set_parameters service."""
    client = hs.node.create_client(SetParameters, "/cosim_sim/set_parameters")
    assert client.wait_for_service(timeout_sec=10.0)
    req = SetParameters.Request(parameters=[Parameter(k, value=v).to_parameter_msg()
                                            for k, v in values.items()])
    future = client.call_async(req)
    wait_for(future.done, 10.0, what="set_parameters")
    return future.result().results


def step_and_check(hs, ref, h, u):
    """One lock-step command: the plant still steps, equal to the reference."""
    hs.command([u])
    ref.set_inputs({"torque": u})
    ref.do_step(ref.time, h)
    state = hs.wait_state(round(ref.time * 1e9))
    assert state[1] == (ref.get_output_dict()["angle"],)


@pytest.fixture
def setup(harness, tmp_path, request):
    states = tmp_path / "states"
    outside = tmp_path / "outside"
    states.mkdir()
    outside.mkdir()
    hs = harness({"state_directory": str(states), "state_max_bytes": 1 << 20,
                  **getattr(request, "param", {})})
    params = load_parameters(PLANT_YAML, "cosim_sim")
    ref = cosim.Simulation(**simulation_kwargs(params))
    hs.wait_state(0)
    return hs, ref, params["communication_step"], states, outside


def test_remote_change_of_state_location_refused(setup):
    hs, ref, h, states, outside = setup
    victim = outside / "victim.txt"
    victim.write_text("precious")
    # the directory is read-only; the old state_file parameter no longer exists
    res = set_remote(hs, state_directory=str(outside))
    assert not res[0].successful and "read-only" in res[0].reason, res[0].reason
    res = set_remote(hs, state_file=str(victim))
    assert not res[0].successful
    # names with a path are refused (whether or not the target exists: same reason)
    reasons = {}
    for name in ("../outside/victim.txt", "../outside/missing.txt", str(victim), "/etc/hostname",
                 "sub/x.bin", "..", ".hidden", "a" * 101, ""):
        res = set_remote(hs, state_name=name)
        assert not res[0].successful, name
        assert "not allowed" in res[0].reason and str(states) not in res[0].reason, res[0].reason
        reasons[name] = res[0].reason.replace(repr(name), "NAME")
    assert reasons["../outside/victim.txt"] == reasons["../outside/missing.txt"]
    assert hs.plant.state_name == "state.bin"
    # saving still writes into the state directory only
    res = hs.service("save_state")
    assert res.success, res.message
    assert (states / "state.bin").stat().st_size > 0 and victim.read_text() == "precious"
    assert str(states) not in res.message and str(outside.parent) not in res.message
    step_and_check(hs, ref, h, 0.5)


def test_symlink_is_not_followed(setup):
    hs, ref, h, states, outside = setup
    # a valid state blob outside the directory, reachable through a link
    other = cosim.Simulation(**simulation_kwargs(load_parameters(PLANT_YAML, "cosim_sim")))
    other.set_inputs({"torque": 5.0})
    other.do_step(0.0, 0.5)
    secret = outside / "secret.bin"
    secret.write_bytes(other.serialize_state())
    os.symlink(secret, states / "link.bin")
    assert all(r.successful for r in set_remote(hs, state_name="link.bin"))
    res = hs.service("load_state")
    assert not res.success and "symbolic link" in res.message, res.message
    assert str(outside) not in res.message
    assert hs.latest()[0] == 0  # not loaded: still at t = 0
    # saving over the link replaces the link, the target is untouched
    before = secret.read_bytes()
    assert hs.service("save_state").success
    assert not os.path.islink(states / "link.bin") and secret.read_bytes() == before
    step_and_check(hs, ref, h, -0.25)


def test_fifo_neither_blocks_nor_is_read(setup):
    hs, ref, h, states, outside = setup
    os.mkfifo(states / "fifo")
    assert all(r.successful for r in set_remote(hs, state_name="fifo"))
    res = hs.service("load_state")  # O_NONBLOCK + fstat: refused at once
    assert not res.success and "not a regular file" in res.message, res.message
    res = hs.service("save_state")
    assert not res.success and "not a regular file" in res.message, res.message
    step_and_check(hs, ref, h, 1.0)  # the simulation thread was never blocked


def test_large_file_refused_before_reading(setup):
    hs, ref, h, states, outside = setup
    big = states / "big.bin"
    with open(big, "wb") as fh:  # 512 MiB, sparse: costs no disk
        fh.truncate(512 << 20)
    assert all(r.successful for r in set_remote(hs, state_name="big.bin"))
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB
    res = hs.service("load_state")
    assert not res.success and "exceed state_max_bytes" in res.message, res.message
    # the size check comes before any read: the peak RSS did not grow by the file
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - peak < (64 << 10)
    step_and_check(hs, ref, h, 0.0)


def test_missing_and_corrupt_states(setup):
    hs, ref, h, states, outside = setup
    assert all(r.successful for r in set_remote(hs, state_name="none.bin"))
    res = hs.service("load_state")
    assert not res.success and "no such state" in res.message and str(states) not in res.message
    (states / "bad.bin").write_bytes(b"not a cosim state")
    assert all(r.successful for r in set_remote(hs, state_name="bad.bin"))
    res = hs.service("load_state")
    assert not res.success and "StateError" in res.message, res.message
    step_and_check(hs, ref, h, 0.3)


def test_state_files_off_without_directory(harness):
    hs = harness()
    hs.wait_state(0)
    for name in ("save_state", "load_state"):
        res = hs.service(name)
        assert not res.success and "without a state_directory" in res.message, res.message


BLOB = len(cosim.Simulation(**simulation_kwargs(load_parameters(PLANT_YAML, "cosim_sim")))
           .serialize_state())  # bytes of the node's state at t = 0


@pytest.mark.parametrize("setup", [{"state_max_files": 3, "state_max_total_bytes": 5 * BLOB // 2}],
                         indirect=True)
def test_state_file_quota(setup):
    """The state folder holds at most state_max_files states and state_max_total_bytes bytes
    of them (fixed at start-up): a save beyond either is refused before anything is
    written; saving over an existing name replaces it within the byte quota."""
    hs, ref, h, states, outside = setup

    def save(name):
        assert all(r.successful for r in set_remote(hs, state_name=name))
        return hs.service("save_state")

    for name in ("a.bin", "b.bin"):
        res = save(name)
        assert res.success and f"({BLOB} bytes)" in res.message, res.message
    res = save("c.bin")  # 3 x BLOB > 2.5 x BLOB
    assert not res.success and res.message == (
        f"cannot save state 'c.bin': {BLOB} bytes with the {2 * BLOB} bytes of the other states "
        f"exceed state_max_total_bytes = {5 * BLOB // 2}"), res.message
    assert save("a.bin").success  # replaced: still 2 x BLOB
    (states / "z.bin").write_bytes(b"x")  # a third state file
    res = save("c.bin")
    assert not res.success and res.message == (
        "cannot save state 'c.bin': the state directory holds 3 states (state_max_files = 3); "
        "save over an existing name or have one removed"), res.message
    assert sorted(p.name for p in states.iterdir()) == ["a.bin", "b.bin", "z.bin"]  # no temp files
    assert [p.stat().st_size for p in sorted(states.iterdir())] == [BLOB, BLOB, 1]
    step_and_check(hs, ref, h, 0.5)
    assert save("b.bin").success  # saving over a name: the count is not exceeded
    res = hs.service("load_state")
    assert res.success, res.message


def rejected_lines(hs, count):
    wait_for(lambda: len([m for m in hs.warnings() if "rejected message" in m]) >= count, 10.0,
             what=f"{count} rejected-message lines")
    return [m for m in hs.warnings() if "rejected message" in m]


def test_oversized_joint_commands_and_parameter_values(setup):
    """A JointState command with a 2 MB joint name, more names than joints, or a long unknown
    name is rejected with one WARN line of at most MAX_LINE characters that quotes at most a
    cut of the name; run-time parameter values of 1 MB get a short reason; the state stays."""
    hs, ref, h, states, outside = setup
    huge = "j" * 2_000_000
    before = hs.plant.diagnostics_summary()["rejected"]
    hs.joint_cmd.publish(JointState(name=[huge], effort=[1.0]))
    hs.joint_cmd.publish(JointState(name=["pendulum_joint"] * 1000, effort=[1.0] * 1000))
    hs.joint_cmd.publish(JointState(name=["k" * 200], effort=[1.0]))
    lines = rejected_lines(hs, 3)
    assert all(len(m) <= MAX_LINE + 100 and "\n" not in m for m in lines), [len(m) for m in lines]
    assert any("has a joint name of 2000000 characters (at most 256): 'jjjj" in m and
               "... (2000000 characters)" in m for m in lines), lines
    assert any("has 1000 names and 1000 efforts, more than the 1 joints with an effort input"
               in m for m in lines), lines
    assert any("names unknown joint 'kkkk" in m and "(200 characters)" in m for m in lines), lines
    assert hs.plant.diagnostics_summary()["rejected"] == before + 3
    for name, value in (("state_name", "s" * 1_000_000), ("stale_input_policy", "p" * 1_000_000)):
        res = set_remote(hs, **{name: value})
        assert not res[0].successful and len(res[0].reason) < 400, (name, len(res[0].reason))
        assert "(1000000 characters)" in res[0].reason, res[0].reason
    assert hs.plant.state_name == "state.bin" and hs.plant.stale_policy == "hold"
    assert hs.latest()[0] == 0  # nothing stepped
    step_and_check(hs, ref, h, 0.5)


def test_controller_survives_malformed_joint_states(monkeypatch, request):
    """The PD controller node (a peer publishes its joint_states): a 1 MB joint name, names
    without positions, then a valid state.  The bad ones get one short ERROR line each and no
    command; the node lives on and answers the valid state (effort = kp * target)."""
    from rclpy.parameter import Parameter as P
    from rcl_interfaces.msg import Log
    from ros_nodes.common import COMMAND_QOS
    from ros_nodes.pd_controller import PDController
    from ros_nodes.testing import ROSOUT_QOS, Spinner, unique_domain_id
    monkeypatch.setenv("ROS_AUTOMATIC_DISCOVERY_RANGE", "LOCALHOST")
    ctx = rclpy.Context()
    rclpy.init(context=ctx, domain_id=unique_domain_id(request.node.name))
    try:
        pd = PDController(context=ctx, cli_args=["--ros-args", "--params-file",
                                                 os.path.join(LAUNCH, "pd_pendulum.yaml")],
                          parameter_overrides=[P("exit_with_plant", value=False)])
        tester = rclpy.create_node("tester", context=ctx)
        efforts, logs = [], []
        tester.create_subscription(JointState, "joint_command", lambda m: efforts.append(
            list(m.effort)), COMMAND_QOS)
        tester.create_subscription(Log, "/rosout", logs.append, ROSOUT_QOS)
        pub = tester.create_publisher(JointState, "joint_states", COMMAND_QOS)
        spinner = Spinner(ctx, [pd, tester])
        try:
            wait_for(lambda: pub.get_subscription_count() > 0, 10.0, what="controller")
            pub.publish(JointState(name=["x" * 1_000_000], position=[0.0]))
            pub.publish(JointState(name=["pendulum_joint"]))  # no positions
            wait_for(lambda: len([m for m in logs if m.level >= Log.ERROR]) >= 2, 10.0,
                     what="two error lines")
            errors = [m.msg for m in logs if m.level >= Log.ERROR]
            assert all(len(m) <= MAX_LINE + 100 for m in errors), [len(m) for m in errors]
            assert "does not contain ['pendulum_joint']" in errors[0] and \
                "(1000000 characters)" in errors[0], errors[0][:300]
            assert errors[1] == "joint state has 0 positions for 1 names; no command sent"
            assert efforts == []
            pub.publish(JointState(name=["pendulum_joint"], position=[0.0], velocity=[0.0]))
            wait_for(lambda: efforts, 10.0, what="a command")
            assert efforts == [[40.0 * 0.8]]
        finally:
            spinner.stop()
            pd.destroy_node()
            tester.destroy_node()
    finally:
        rclpy.try_shutdown(context=ctx)
