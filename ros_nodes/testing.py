"""Helpers for the ROS tests and benchmarks: isolated DDS domains on loopback,
nodes in subprocesses (as users run them), recording, bounded waits."""
from __future__ import annotations

import fcntl
import itertools
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
import zlib

import rclpy
import yaml
from rcl_interfaces.msg import Log
from diagnostic_msgs.msg import DiagnosticArray
from rclpy.parameter import Parameter
from rclpy.qos import DurabilityPolicy, HistoryPolicy, QoSProfile, ReliabilityPolicy
from rosgraph_msgs.msg import Clock as ClockMsg
from sensor_msgs.msg import JointState
from std_msgs.msg import Float64MultiArray
from std_srvs.srv import Trigger

from .common import COMMAND_QOS

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LAUNCH = os.path.join(REPO, "launch")

_counter = itertools.count()

RECORD_QOS = QoSProfile(history=HistoryPolicy.KEEP_LAST, depth=5000,
                        reliability=ReliabilityPolicy.RELIABLE)


_LOCK_DIR = os.path.join(tempfile.gettempdir(), "cosim_ros_domains")
_held = {}  # domain id -> open locked file descriptor, oldest first
HELD_PER_PROCESS = 12  # the oldest is released beyond this (its test has ended)


def unique_domain_id(label=""):
    """A ROS_DOMAIN_ID in 1..100 that no other cooperating process on this
    machine holds (an flock on a file per id), and different from the last
    ``HELD_PER_PROCESS`` ids of this process: concurrent test sessions and
    benchmarks never share a DDS domain.  A process keeps its newest ids only
    (a whole test session holding one id per test ran the machine out of ids
    when several sessions ran at once); a test stops its nodes before the next
    test starts, so an id released that way carries no traffic any more."""
    os.makedirs(_LOCK_DIR, exist_ok=True)
    while len(_held) >= HELD_PER_PROCESS:
        oldest = next(iter(_held))
        os.close(_held.pop(oldest))  # closing the descriptor releases the flock
    start = zlib.crc32(f"{os.getpid()}:{label}:{next(_counter)}".encode()) % 100
    for k in range(100):
        domain = 1 + (start + k) % 100
        if domain in _held:
            continue
        fd = os.open(os.path.join(_LOCK_DIR, f"{domain}.lock"), os.O_CREAT | os.O_RDWR, 0o666)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            continue
        _held[domain] = fd
        return domain
    raise RuntimeError("no free ROS domain id in 1..100 on this machine")


def ros_environment(domain_id):
    env = dict(os.environ)
    env["ROS_DOMAIN_ID"] = str(domain_id)
    env["ROS_AUTOMATIC_DISCOVERY_RANGE"] = "LOCALHOST"
    env.pop("ROS_LOCALHOST_ONLY", None)
    env["PYTHONUNBUFFERED"] = "1"
    env["RCUTILS_LOGGING_BUFFERED_STREAM"] = "0"
    env.setdefault("RCUTILS_CONSOLE_OUTPUT_FORMAT", "[{severity}] [{time}] [{name}]: {message}")
    return env


class NodeProcess:
    """``python -m <module> --ros-args --params-file <yaml> -p k:=v ...`` in a subprocess."""

    def __init__(self, module, env, params_file=None, overrides=(), log_dir=None):
        args = [sys.executable, "-m", module, "--ros-args"]
        if params_file:
            args += ["--params-file", params_file]
        for key, value in dict(overrides).items():
            args += ["-p", f"{key}:={_param_text(value)}"]
        self.args = args
        fd, self.log_path = tempfile.mkstemp(prefix=module.replace(".", "_") + "_", suffix=".log",
                                             dir=log_dir)
        self._log = os.fdopen(fd, "w")
        self.proc = subprocess.Popen(args, env=env, cwd=REPO, stdout=self._log,
                                     stderr=subprocess.STDOUT)

    def log(self):
        self._log.flush()
        with open(self.log_path) as fh:
            return fh.read()

    def wait(self, timeout):
        return self.proc.wait(timeout)

    def stop(self, timeout=5.0):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout)
        self._log.close()
        return self.proc.returncode


def _param_text(value):
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (list, tuple)):
        return "[" + ",".join(_param_text(v) for v in value) + "]"
    if isinstance(value, float):
        return repr(value)
    return str(value)


def load_parameters(path, node_name):
    """The ``ros__parameters`` of ``node_name`` in a parameter YAML, flattened with dots."""
    with open(path) as fh:
        doc = yaml.safe_load(fh)
    params = doc.get(node_name, doc.get("/**", {})).get("ros__parameters", {})
    flat = {}

    def walk(prefix, d):
        for k, v in d.items():
            if isinstance(v, dict):
                walk(f"{prefix}{k}.", v)
            else:
                flat[f"{prefix}{k}"] = v
    walk("", params)
    return flat


def simulation_kwargs(flat):
    """cosim.Simulation keyword arguments equivalent to a plant parameter set."""
    return {
        "model": flat.get("model", "pendulum"),
        "method": flat.get("method", "auto"),
        "params": {k[7:]: v for k, v in flat.items() if k.startswith("params.")},
        "rtol": flat.get("rtol", 1e-6), "atol": flat.get("atol", 1e-8),
        "h": flat.get("integrator_step", 0.0) or None,
        "method_options": {k[15:]: v for k, v in flat.items() if k.startswith("method_options.")},
        "start_time": flat.get("start_time", 0.0),
        "backend": flat.get("backend", "auto"),
    }


class Spinner:
    """An executor spinning in a background thread (stop() joins it)."""

    def __init__(self, context, nodes, executor_class=None):
        cls = executor_class or rclpy.executors.MultiThreadedExecutor
        self.executor = cls(context=context)
        for n in nodes:
            self.executor.add_node(n)
        self._thread = threading.Thread(target=self._spin, daemon=True)
        self._thread.start()

    def _spin(self):
        try:
            self.executor.spin()
        except (rclpy.executors.ExternalShutdownException, KeyboardInterrupt):
            pass

    def stop(self):
        self.executor.shutdown(timeout_sec=2.0)
        self._thread.join(5.0)


def wait_for(predicate, timeout, period=0.005, what="condition"):
    """Poll ``predicate`` until true; bounded in time (and so in count)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(period)
    raise TimeoutError(f"timed out after {timeout} s waiting for {what}")


_clients = {}


def call_service(node, srv_type, name, timeout=10.0):
    """Call a Trigger-like service from ``node`` (spun elsewhere); returns the response.
    Clients are kept (destroying one while an executor spins races with it)."""
    client = _clients.get((node, name))
    if client is None:
        client = _clients[(node, name)] = node.create_client(srv_type, name)
    if not client.wait_for_service(timeout_sec=timeout):
        raise TimeoutError(f"service {name} not available after {timeout} s")
    future = client.call_async(srv_type.Request())
    wait_for(future.done, timeout, what=f"service {name}")
    return future.result()


ROSOUT_QOS = QoSProfile(depth=1000, reliability=ReliabilityPolicy.RELIABLE,
                        durability=DurabilityPolicy.TRANSIENT_LOCAL)


def _ns(stamp):
    return stamp.sec * 1_000_000_000 + stamp.nanosec


class Harness:
    """In-process plant node (from a YAML, plus overrides) and a tester node that
    records states, /clock, /rosout and /diagnostics and publishes commands; both
    spun by a MultiThreadedExecutor, talking over DDS on loopback in a domain of
    their own."""

    def __init__(self, monkeypatch, label, overrides=(), yaml_path=None):
        from .sim_node import SimulationNode
        yaml_path = yaml_path or os.path.join(LAUNCH, "pendulum_lock_step.yaml")
        monkeypatch.setenv("ROS_AUTOMATIC_DISCOVERY_RANGE", "LOCALHOST")
        monkeypatch.delenv("ROS_LOCALHOST_ONLY", raising=False)
        self.ctx = rclpy.Context()
        rclpy.init(context=self.ctx, domain_id=unique_domain_id(label))
        self.plant = SimulationNode(
            context=self.ctx, cli_args=["--ros-args", "--params-file", yaml_path],
            parameter_overrides=[Parameter(k, value=v) for k, v in dict(overrides).items()])
        self.node = rclpy.create_node("tester", context=self.ctx)
        self.states, self.clock, self.logs, self.diagnostics = [], [], [], []
        self._cv = threading.Condition()
        self.node.create_subscription(JointState, "joint_states", self._on_state, RECORD_QOS)
        self.node.create_subscription(ClockMsg, "/clock", lambda m: self.clock.append(_ns(m.clock)),
                                      RECORD_QOS)
        self.node.create_subscription(Log, "/rosout", self.logs.append, ROSOUT_QOS)
        self.node.create_subscription(DiagnosticArray, "/diagnostics", self.diagnostics.append, 10)
        self.cmd = self.node.create_publisher(Float64MultiArray, "command", COMMAND_QOS)
        self.joint_cmd = self.node.create_publisher(JointState, "joint_command", COMMAND_QOS)
        self.spinner = Spinner(self.ctx, [self.plant, self.node])
        self.plant.start()
        wait_for(lambda: self.cmd.get_subscription_count() > 0 and
                 self.joint_cmd.get_subscription_count() > 0, 10.0, what="plant subscriptions")

    def _on_state(self, msg):
        with self._cv:
            self.states.append((_ns(msg.header.stamp), tuple(msg.position), tuple(msg.velocity),
                                tuple(msg.effort)))

    def latest(self):
        return self.states[-1] if self.states else None

    def wait_state(self, stamp, timeout=10.0):
        def found():
            return any(s[0] == stamp for s in self.states[-5:])
        wait_for(found, timeout, what=f"state stamped {stamp} ns")
        return next(s for s in reversed(self.states) if s[0] == stamp)

    def command(self, values):
        self.cmd.publish(Float64MultiArray(data=[float(v) for v in values]))

    def service(self, name):
        return call_service(self.node, Trigger, name)

    def errors(self):
        return [m.msg for m in self.logs if m.level >= Log.ERROR]

    def warnings(self):
        return [m.msg for m in self.logs if m.level == Log.WARN]

    def close(self):
        self.plant.stop()
        self.spinner.stop()
        for node in (self.plant, self.node):
            node.destroy_node()
        rclpy.try_shutdown(context=self.ctx)
