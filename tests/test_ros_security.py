"""Attacks on the state files of the plant node by a peer in the DDS domain
(loopback, a domain of its own): a remote change of the state location, path
traversal, a symbolic link, a FIFO, a huge file.  Each is refused with a reply
that names only the requested state name, and leaves the simulation exactly
as before; the node keeps stepping."""
import os
import resource

import pytest

rclpy = pytest.importorskip("rclpy")
from rcl_interfaces.srv import SetParameters  # noqa: E402
from rclpy.parameter import Parameter  # noqa: E402

import cosim  # noqa: E402
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
def setup(harness, tmp_path):
    states = tmp_path / "states"
    outside = tmp_path / "outside"
    states.mkdir()
    outside.mkdir()
    hs = harness({"state_directory": str(states), "state_max_bytes": 1 << 20})
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
