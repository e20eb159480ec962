"""ROS 2 simulation node: a cosim plant driven over topics.

The node wraps one :class:`cosim.Simulation` and owns no numerics: every step,
input check, state snapshot and serialisation is a call into cosim.  It

* publishes ``/clock`` (``rosgraph_msgs/Clock``) with the simulation time, the
  state as ``sensor_msgs/JointState`` (stamp = simulation time) and all model
  outputs as ``std_msgs/Float64MultiArray`` (layout ``dim[0].label`` is the
  comma-separated list of output names);
* subscribes to commands (``std_msgs/Float64MultiArray`` in the order of
  the ``command_inputs`` parameter, and ``sensor_msgs/JointState`` effort
  commands by joint name) and holds them (zero-order hold);
* offers the ``std_srvs`` services ``reset_simulation``, ``pause_simulation``,
  ``resume_simulation``, ``step_simulation``, ``get_simulation_state`` (save to
  the ``state_file`` parameter) and ``set_simulation_state`` (load from it);
* runs in one of three modes: ``lock_step`` (one communication step per
  controller command, deterministic), ``real_time`` (paced at
  ``communication_step / real_time_factor`` of wall time, with overrun and
  jitter statistics on ``/diagnostics`` at 1 Hz) or ``free_run`` (as fast as
  possible).

Lock-step protocol: after publishing the state at time t the node waits for
the command for t.  A ``JointState`` command answers the state whose stamp it
carries (header.stamp = t; answers to other states are ignored, so duplicates
after a republish are harmless); a ``Float64MultiArray`` command has no stamp
and is taken as the command for the current step (the controller must answer
each state once).  The current state is republished to newly matched peers
and after ``lock_step_republish_period`` without a command.

Threads: the executor thread runs the callbacks, which check the message
structure and queue the work; a simulation thread applies it, steps, paces
(real time) and publishes.  In lock step the command callback applies and
steps itself when the simulation thread is idle (no thread hand-over on the
round-trip path); a lock serialises the two.  Everything numerical is a call
into ``cosim.Simulation``.

QoS (chosen on purpose):

* ``/clock``: reliable, keep-last 1, volatile — a reliable writer matches
  both the best-effort reader of the rclpy/rclcpp time source and reliable
  readers (``ros2 topic echo``, rosbag); depth 1 because only the latest time
  matters.
* joint states and outputs: in ``lock_step`` reliable keep-last 10 (the
  controller must see every state); in ``real_time``/``free_run`` the
  sensor-data profile (best effort, keep-last 5: a late sample is worthless).
  Parameter ``state_reliability`` overrides ``auto``.  A best-effort reader
  matches both.
* commands: reliable keep-last 10 (a lost actuator command is a fault).
* ``/diagnostics``: reliable keep-last 10 (diagnostic aggregator convention).
"""
from __future__ import annotations

import collections
import math
import os
import sys
import threading
import time

import numpy as np
import rclpy
from builtin_interfaces.msg import Time as TimeMsg
from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus, KeyValue
from rcl_interfaces.msg import FloatingPointRange, ParameterDescriptor, SetParametersResult
from rclpy.clock import Clock, ClockType
from rclpy.duration import Duration
from rclpy.exceptions import ParameterException, ParameterUninitializedException
from rclpy.node import Node
from rclpy.parameter import Parameter
from rclpy.task import Future
from rclpy.qos import (DurabilityPolicy, HistoryPolicy, QoSProfile, ReliabilityPolicy,
                       qos_profile_sensor_data)
from rosgraph_msgs.msg import Clock as ClockMsg
from sensor_msgs.msg import JointState
from std_msgs.msg import Float64MultiArray, MultiArrayDimension
from std_srvs.srv import Trigger

import cosim
from cosim.errors import CosimError

MODES = ("lock_step", "real_time", "free_run")
STALE_POLICIES = ("hold", "zero", "pause")
RELIABILITIES = ("auto", "reliable", "best_effort")

CLOCK_QOS = QoSProfile(history=HistoryPolicy.KEEP_LAST, depth=1,
                       reliability=ReliabilityPolicy.RELIABLE, durability=DurabilityPolicy.VOLATILE)
COMMAND_QOS = QoSProfile(history=HistoryPolicy.KEEP_LAST, depth=10,
                         reliability=ReliabilityPolicy.RELIABLE)
RELIABLE_STATE_QOS = QoSProfile(history=HistoryPolicy.KEEP_LAST, depth=10,
                                reliability=ReliabilityPolicy.RELIABLE)
DIAGNOSTICS_QOS = QoSProfile(history=HistoryPolicy.KEEP_LAST, depth=10,
                             reliability=ReliabilityPolicy.RELIABLE)

_HIST_BINS = 10_000  # 1 µs bins up to 10 ms (last bin: longer) for whole-run percentiles


def state_qos(reliability):
    """QoS profile for state-like topics: ``"reliable"`` or ``"best_effort"``."""
    return RELIABLE_STATE_QOS if reliability == "reliable" else qos_profile_sensor_data


def time_to_msg(t, msg=None):
    """Simulation time (s) as a ``builtin_interfaces/Time`` (rounded to 1 ns)."""
    sec, nanosec = divmod(int(round(t * 1e9)), 1_000_000_000)
    msg = TimeMsg() if msg is None else msg
    msg.sec, msg.nanosec = sec, nanosec
    return msg


def time_to_ns(t):
    return int(round(t * 1e9))


def stamp_ns(stamp):
    return int(stamp.sec) * 1_000_000_000 + int(stamp.nanosec)


def _descriptor(description, *, read_only=True, constraints="", float_range=None, dynamic=False):
    d = ParameterDescriptor(description=description, read_only=read_only,
                            additional_constraints=constraints, dynamic_typing=dynamic)
    if float_range is not None:
        d.floating_point_range = [FloatingPointRange(from_value=float(float_range[0]),
                                                     to_value=float(float_range[1]), step=0.0)]
    return d


class ConfigurationError(ValueError):
    """A node parameter is invalid (message names the parameter and value)."""


class _Histogram:
    """Whole-run latency histogram, 1 µs bins up to 10 ms (telemetry only)."""

    def __init__(self):
        self.counts = np.zeros(_HIST_BINS, dtype=np.int64)
        self.n = 0
        self.max = 0.0

    def add(self, us):
        """Add samples given in µs (a sorted or unsorted float array)."""
        if us.size == 0:
            return
        self.max = max(self.max, float(us.max()))
        self.counts += np.bincount(np.clip(us.astype(np.int64), 0, _HIST_BINS - 1),
                                   minlength=_HIST_BINS)
        self.n += us.size

    def percentiles(self, ps):
        """Upper edges (µs) of the bins holding the given percentiles."""
        if self.n == 0:
            return [float("nan")] * len(ps)
        cum = np.cumsum(self.counts)
        ranks = [max(math.ceil(p / 100.0 * self.n), 1) for p in ps]
        # the last bin collects everything longer: report it as inf
        return [float(i + 1) if i < _HIST_BINS - 1 else math.inf
                for i in (int(np.searchsorted(cum, r)) for r in ranks)]


class SimulationNode(Node):
    """The cosim plant node (see the module docstring)."""

    def __init__(self, node_name="cosim_sim", **kwargs):
        super().__init__(node_name, **kwargs)
        self._declare_parameters()
        cfg = self._read_configuration()
        self.config = cfg
        self.sim = self._make_simulation(cfg)
        self._resolve_names(cfg)
        self._create_interfaces(cfg)
        self._init_runtime_state(cfg)
        self.add_on_set_parameters_callback(self._on_set_parameters)

    # ------------------------------------------------------------------ parameters
    def _declare_parameters(self):
        p = self.declare_parameter
        p("model", "pendulum", _descriptor(
            "cosim model: library name (pendulum, two_link, ...) or 'package.module:Class'"))
        p("method", "generalized-alpha", _descriptor(
            "integration method (cosim METHOD_REGISTRY name)"))
        p("rtol", 1e-6, _descriptor("integrator relative tolerance", float_range=(0.0, 1.0)))
        p("atol", 1e-8, _descriptor("integrator absolute tolerance", float_range=(0.0, 1e3)))
        p("integrator_step", 0.0, _descriptor(
            "fixed integrator step in s; 0 = adaptive (error-controlled)", float_range=(0.0, 1e3)))
        p("start_time", 0.0, _descriptor("simulation start time in s"))
        p("communication_step", 0.01, _descriptor(
            "communication step in s (inputs are held over one step)", float_range=(1e-9, 1e3)))
        p("end_time", 0.0, _descriptor("stop stepping at this simulation time in s; 0 = never"))
        p("shutdown_at_end", False, _descriptor("exit the node when end_time is reached"))
        p("mode", "lock_step", _descriptor(
            "lock_step | real_time | free_run", constraints="one of lock_step, real_time, free_run"))
        p("real_time_factor", 1.0, _descriptor(
            "real_time mode: simulated seconds per wall second", read_only=False,
            float_range=(1e-6, 1e6)))
        p("input_timeout", 0.0, _descriptor(
            "wall seconds without a command after which inputs are stale; 0 = never stale",
            read_only=False, float_range=(0.0, 1e6)))
        p("stale_input_policy", "hold", _descriptor(
            "what to do with stale inputs: hold (keep last), zero (command inputs to 0), "
            "pause (stop time until a command arrives)", read_only=False,
            constraints="one of hold, zero, pause"))
        p("start_paused", False, _descriptor("start with the simulation paused"))
        p("lock_step_match_stamps", True, _descriptor(
            "lock_step: a JointState command is for the step whose state it answers, so its "
            "header.stamp must equal the current simulation time (others are ignored; a zero "
            "stamp means t=0); false: every JointState command is for the current step"))
        p("lock_step_republish_period", 0.5, _descriptor(
            "lock_step: republish the current state after this many wall seconds without a "
            "command (covers discovery races); 0 = never", float_range=(0.0, 1e6)))
        p("state_file", "cosim_state.bin", _descriptor(
            "file written by get_simulation_state and read by set_simulation_state",
            read_only=False))
        p("frame_id", "", _descriptor("header.frame_id of the published joint states"))
        p("joint_names", Parameter.Type.STRING_ARRAY, _descriptor(
            "JointState names; default: the model coordinates"))
        p("joint_positions", Parameter.Type.STRING_ARRAY, _descriptor(
            "state or output name published as each joint's position; default: coordinates"))
        p("joint_velocities", Parameter.Type.STRING_ARRAY, _descriptor(
            "state or output name published as each joint's velocity; default: coordinate "
            "rates (multibody), none (first order)"))
        p("joint_efforts", Parameter.Type.STRING_ARRAY, _descriptor(
            "input name applied as each joint's effort ('' = none); also maps JointState "
            "effort commands by joint name; default: none"))
        p("command_inputs", Parameter.Type.STRING_ARRAY, _descriptor(
            "input names carried, in order, by Float64MultiArray commands; default: all inputs"))
        p("state_reliability", "auto", _descriptor(
            "QoS of joint_states/outputs: auto (reliable in lock_step, sensor data otherwise), "
            "reliable, best_effort", constraints="one of auto, reliable, best_effort"))
        p("publish_clock", True, _descriptor("publish /clock (this node is the time source)"))
        p("topics.clock", "/clock", _descriptor("clock topic"))
        p("topics.joint_states", "joint_states", _descriptor("JointState output topic"))
        p("topics.outputs", "outputs", _descriptor("Float64MultiArray model outputs topic"))
        p("topics.command", "command", _descriptor("Float64MultiArray command topic ('' = off)"))
        p("topics.joint_command", "joint_command", _descriptor(
            "JointState effort command topic ('' = off)"))
        p("topics.diagnostics", "/diagnostics", _descriptor("DiagnosticArray topic"))
        p("diagnostics_period", 1.0, _descriptor("wall seconds between diagnostics",
                                                 float_range=(0.01, 3600.0)))
        p("real_time.spin_threshold", 0.0002, _descriptor(
            "real_time: busy-wait the last seconds before a deadline (wake-up accuracy)",
            float_range=(0.0, 0.01)))
        p("real_time.max_lag", 0.1, _descriptor(
            "real_time: re-anchor the schedule when behind by more than this (wall s)",
            float_range=(0.0, 1e3)))
        p("sched_priority", 0, _descriptor(
            "SCHED_FIFO priority 1..99 for all threads of the process when run by main() "
            "(needs root or CAP_SYS_NICE; for real_time / hardware-in-the-loop); 0 = normal"))

        # model parameters and integrator options: names depend on the model/method
        overrides = getattr(self, "_parameter_overrides", {}) or {}
        model = self._get("model")
        try:
            spec = cosim.models.model_class(model).parameters if isinstance(model, str) else ()
        except CosimError as exc:
            raise ConfigurationError(f"parameter 'model': {exc}") from None
        known = {f"params.{q.name}" for q in spec}
        for q in spec:
            p(f"params.{q.name}", float(q.default), _descriptor(
                f"model parameter [{q.unit}] {q.description}".strip(), read_only=not q.tunable))
        for name, value in overrides.items():
            if name.startswith("params.") and name not in known:
                raise ConfigurationError(
                    f"parameter {name!r}: model {model!r} has no parameter {name[7:]!r} "
                    f"(parameters: {', '.join(q.name for q in spec) or 'none'})")
            if name.startswith("method_options."):
                p(name, value.value, _descriptor("integrator option", dynamic=True))

    def _get(self, name, default=None):
        try:
            value = self.get_parameter(name).value
        except ParameterUninitializedException:
            return default
        return default if value is None else value

    def _read_configuration(self):
        g = self._get
        cfg = {name: g(name) for name in (
            "model", "method", "rtol", "atol", "integrator_step", "start_time",
            "communication_step", "end_time", "shutdown_at_end", "mode", "real_time_factor",
            "input_timeout", "stale_input_policy", "start_paused", "lock_step_republish_period",
            "lock_step_match_stamps",
            "state_file", "frame_id", "state_reliability", "publish_clock", "diagnostics_period",
            "real_time.spin_threshold", "real_time.max_lag", "sched_priority")}
        for key in ("joint_names", "joint_positions", "joint_velocities", "joint_efforts",
                    "command_inputs"):
            value = g(key, None)
            cfg[key] = None if value is None else [str(v) for v in value]
        cfg["topics"] = {k: g(f"topics.{k}") for k in (
            "clock", "joint_states", "outputs", "command", "joint_command", "diagnostics")}
        cfg["params"] = dict(self.get_parameters_by_prefix("params"))
        cfg["params"] = {k: v.value for k, v in cfg["params"].items()}
        cfg["method_options"] = {k: v.value for k, v in
                                 self.get_parameters_by_prefix("method_options").items()}
        self._check_choice("mode", cfg["mode"], MODES)
        self._check_choice("stale_input_policy", cfg["stale_input_policy"], STALE_POLICIES)
        self._check_choice("state_reliability", cfg["state_reliability"], RELIABILITIES)
        if not cfg["communication_step"] > 0.0 or not math.isfinite(cfg["communication_step"]):
            raise ConfigurationError(
                f"parameter 'communication_step' must be > 0, got {cfg['communication_step']!r}")
        if not cfg["real_time_factor"] > 0.0:
            raise ConfigurationError(
                f"parameter 'real_time_factor' must be > 0, got {cfg['real_time_factor']!r}")
        if cfg["state_reliability"] == "auto":
            cfg["state_reliability"] = "reliable" if cfg["mode"] == "lock_step" else "best_effort"
        return cfg

    @staticmethod
    def _check_choice(name, value, choices):
        if value not in choices:
            raise ConfigurationError(
                f"parameter {name!r} must be one of {', '.join(choices)}, got {value!r}")

    def _make_simulation(self, cfg):
        return cosim.Simulation(
            model=cfg["model"], method=cfg["method"], params=cfg["params"], rtol=cfg["rtol"],
            atol=cfg["atol"], h=cfg["integrator_step"] or None,
            method_options=cfg["method_options"], start_time=cfg["start_time"])

    def _resolve_names(self, cfg):
        """Index maps from parameter names to state/output/input positions."""
        sim = self.sim
        n_y, outputs, inputs = len(sim.state_names), list(sim.output_names), list(sim.input_names)
        # one value vector [y, outputs, inputs] is indexed to fill the JointState
        sources = {n: i for i, n in enumerate(sim.state_names)}
        for i, n in enumerate(outputs):
            sources.setdefault(n, n_y + i)
        input_pos = {n: n_y + len(outputs) + i for i, n in enumerate(inputs)}
        coords = list(sim.coordinate_names)
        multibody = sim.model.kind == "multibody"
        positions = cfg["joint_positions"] if cfg["joint_positions"] is not None else coords
        names = cfg["joint_names"] if cfg["joint_names"] is not None else list(positions)
        if cfg["joint_velocities"] is not None:
            velocities = cfg["joint_velocities"]
        elif cfg["joint_positions"] is None and multibody:
            velocities = ["d" + c for c in coords]
        else:
            velocities = []
        efforts = cfg["joint_efforts"] or []
        for key, lst in (("joint_positions", positions), ("joint_velocities", velocities),
                         ("joint_efforts", efforts)):
            if lst and len(lst) != len(names):
                raise ConfigurationError(
                    f"parameter {key!r} has {len(lst)} entries but joint_names has {len(names)}")
        if len(set(names)) != len(names):
            raise ConfigurationError(f"parameter 'joint_names' has duplicates: {names}")

        def lookup(key, name, table, kinds):
            if name not in table:
                raise ConfigurationError(
                    f"parameter {key!r}: {name!r} is not {kinds} of model {sim.model.name!r} "
                    f"(known: {', '.join(table)})")
            return table[name]

        self._pos_index = np.array([lookup("joint_positions", n, sources, "a state or output")
                                    for n in positions], dtype=int)
        self._vel_index = np.array([lookup("joint_velocities", n, sources, "a state or output")
                                    for n in velocities], dtype=int)
        effort_inputs = {}
        eff = []
        for joint, name in zip(names, efforts):
            if name:
                eff.append(lookup("joint_efforts", name, input_pos, "an input"))
                effort_inputs[joint] = name
            else:
                eff.append(-1)
        self._has_efforts = bool(efforts)
        self._eff_index = np.array([i if i >= 0 else 0 for i in eff], dtype=int)
        self._eff_missing = np.array([i < 0 for i in eff], dtype=bool)
        self.joint_names = list(names)
        self.effort_inputs = effort_inputs  # joint name -> input name
        cmd = cfg["command_inputs"] if cfg["command_inputs"] is not None else inputs
        for n in cmd:
            lookup("command_inputs", n, {k: 0 for k in inputs}, "an input")
        self.command_inputs = list(cmd)
        self._commanded = sorted(set(self.command_inputs) | set(effort_inputs.values()))
        self.output_label = ",".join(outputs)
        self._out_slice = slice(n_y, n_y + len(outputs))

    def _create_interfaces(self, cfg):
        topics = cfg["topics"]
        sqos = state_qos(cfg["state_reliability"])
        self._clock_pub = (self.create_publisher(ClockMsg, topics["clock"], CLOCK_QOS)
                           if cfg["publish_clock"] else None)
        self._js_pub = self.create_publisher(JointState, topics["joint_states"], sqos)
        self._out_pub = self.create_publisher(Float64MultiArray, topics["outputs"], sqos)
        self._diag_pub = self.create_publisher(DiagnosticArray, topics["diagnostics"],
                                               DIAGNOSTICS_QOS)
        self._cmd_subs = []
        if topics["command"]:
            self._cmd_subs.append(self.create_subscription(
                Float64MultiArray, topics["command"], self._on_array_command, COMMAND_QOS))
        if topics["joint_command"]:
            self._cmd_subs.append(self.create_subscription(
                JointState, topics["joint_command"], self._on_joint_command, COMMAND_QOS))
        self.create_service(Trigger, "reset_simulation", self._srv_reset)
        self.create_service(Trigger, "pause_simulation", self._srv_pause)
        self.create_service(Trigger, "resume_simulation", self._srv_resume)
        self.create_service(Trigger, "step_simulation", self._srv_step)
        self.create_service(Trigger, "get_simulation_state", self._srv_save)
        self.create_service(Trigger, "set_simulation_state", self._srv_load)
        self.create_timer(cfg["diagnostics_period"], self._publish_diagnostics,
                          clock=Clock(clock_type=ClockType.STEADY_TIME))
        # reused messages (filled by the simulation thread only)
        self._js_msg = JointState()
        self._js_msg.header.frame_id = cfg["frame_id"]
        self._js_msg.name = self.joint_names
        self._out_msg = Float64MultiArray()
        n_out = len(self.sim.output_names)
        self._out_msg.layout.dim = [MultiArrayDimension(label=self.output_label, size=n_out,
                                                        stride=n_out)]
        self._clock_msg = ClockMsg()

    def _init_runtime_state(self, cfg):
        self.step = float(cfg["communication_step"])
        self.mode = cfg["mode"]
        self.end_time = float(cfg["end_time"]) if cfg["end_time"] > 0.0 else math.inf
        self.real_time_factor = float(cfg["real_time_factor"])
        self.input_timeout = float(cfg["input_timeout"])
        self.stale_policy = cfg["stale_input_policy"]
        self.state_file = cfg["state_file"]
        self.paused = bool(cfg["start_paused"])
        self.finished = Future()
        self._jobs = collections.deque()
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._thread = None
        self._command_ready = False  # lock_step: the command for the current step arrived
        self._last_command = time.monotonic()
        self._stale = False
        self._step_error = None
        self._at_end_logged = False
        self._pub_wall = None  # wall time the current state was published (round trip)
        self._rejected = 0
        self._overruns = 0
        self._overruns_window = 0
        self._steps_window = 0
        self._window_start = time.monotonic()
        self._window_sim_start = self.sim.time
        # telemetry (seconds): real_time jitter = publication - deadline, latency = step +
        # message preparation; lock_step round_trip = state published -> its command
        # received, turnaround = command received -> next state published
        self._samples = {"jitter": [], "latency": [], "round_trip": [], "turnaround": []}
        self._command_wall = None
        self._last_pub = time.monotonic()
        self._sim_lock = threading.Lock()  # lock step: callbacks may step (see _post)
        self._inline = self.mode == "lock_step"
        self._match_stamps = bool(cfg["lock_step_match_stamps"])
        self._hist = {k: _Histogram() for k in self._samples}

    # ------------------------------------------------------------------ life cycle
    def start(self):
        """Start the simulation thread (call once after adding the node to an executor)."""
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="cosim-simulation", daemon=True)
            self._thread.start()

    def stop(self, timeout=5.0):
        """Stop and join the simulation thread."""
        self._stop.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout)

    def _run(self):
        try:
            {"lock_step": self._run_lock_step, "real_time": self._run_real_time,
             "free_run": self._run_free_run}[self.mode]()
        except Exception as exc:  # keep the process alive enough to report
            if not self._stop.is_set() and self.context.ok():
                self.get_logger().fatal(f"simulation thread died: {exc!r}")
                self._finish()

    def _finish(self):
        if not self.finished.done():
            self.finished.set_result(True)

    # ------------------------------------------------------------------ callbacks (short)
    def _on_array_command(self, msg):
        received = time.monotonic()
        data = msg.data
        if len(data) != len(self.command_inputs):
            self._reject(f"command on {self.config['topics']['command']!r} has {len(data)} "
                         f"values but command_inputs "
                         f"{self.command_inputs} needs {len(self.command_inputs)}")
            return
        self._post(("command", dict(zip(self.command_inputs, data)), None, received,
                    self.config["topics"]["command"]))

    def _on_joint_command(self, msg):
        received = time.monotonic()
        if len(msg.effort) != len(msg.name):
            self._reject(f"joint command on {self.config['topics']['joint_command']!r} has "
                         f"{len(msg.name)} names but {len(msg.effort)} efforts")
            return
        values = {}
        for joint, effort in zip(msg.name, msg.effort):
            name = self.effort_inputs.get(joint)
            if name is None:
                self._reject(f"joint command on {self.config['topics']['joint_command']!r} names "
                             f"unknown joint {joint!r} (joints with an "
                             f"effort input: {', '.join(self.effort_inputs) or 'none'})")
                return
            values[name] = effort
        stamp = stamp_ns(msg.header.stamp) if self._match_stamps else None
        self._post(("command", values, stamp, received, self.config["topics"]["joint_command"]))

    def _reject(self, text):
        self._rejected += 1
        self.get_logger().error(f"rejected message: {text}; simulation state unchanged")

    def _post(self, item):
        self._jobs.append(item)
        if self._inline and self._thread is not None and self._sim_lock.acquire(blocking=False):
            try:  # lock step, simulation thread idle: do the work here, no hand-over
                self._lock_step_once()
            except Exception as exc:  # never let it escape into the executor
                self.get_logger().error(f"lock step failed: {exc!r}")
            finally:
                self._sim_lock.release()
        else:
            self._wake.set()

    def _call(self, fn, timeout=10.0):
        """Run ``fn`` on the simulation thread; returns (success, message)."""
        if self._thread is None or not self._thread.is_alive():
            return False, "the simulation thread is not running"
        done = threading.Event()
        box = {}

        def job():
            try:
                box["result"] = fn()
            except Exception as exc:  # CosimError, OSError, ...: the thread lives on
                box["result"] = (False, f"{type(exc).__name__}: {exc}")
            finally:
                done.set()

        self._post(("job", job))
        if not done.wait(timeout):
            return False, f"timed out after {timeout} s waiting for the simulation thread"
        return box["result"]

    def _service(self, fn):
        def callback(request, response):
            response.success, response.message = self._call(fn)
            if response.success:  # (rclpy: one severity per logging call site)
                self.get_logger().info(response.message)
            else:
                self.get_logger().error(response.message)
            return response
        return callback

    def _srv_reset(self, request, response):
        return self._service(self._do_reset)(request, response)

    def _srv_pause(self, request, response):
        return self._service(self._do_pause)(request, response)

    def _srv_resume(self, request, response):
        return self._service(self._do_resume)(request, response)

    def _srv_step(self, request, response):
        return self._service(self._do_step_service)(request, response)

    def _srv_save(self, request, response):
        return self._service(self._do_save)(request, response)

    def _srv_load(self, request, response):
        return self._service(self._do_load)(request, response)

    def _on_set_parameters(self, params):
        for prm in params:
            name = prm.name
            if name.startswith("params."):
                ok, text = self._call(lambda n=name[7:], v=prm.value: self._do_set_parameter(n, v))
                if not ok:
                    return SetParametersResult(successful=False, reason=text)
            elif name == "real_time_factor":
                if not (isinstance(prm.value, float) and prm.value > 0.0):
                    return SetParametersResult(successful=False,
                                               reason=f"real_time_factor must be > 0, got {prm.value!r}")
                self.real_time_factor = prm.value
                self._wake.set()
            elif name == "input_timeout":
                self.input_timeout = float(prm.value)
            elif name == "stale_input_policy":
                if prm.value not in STALE_POLICIES:
                    return SetParametersResult(
                        successful=False, reason=f"stale_input_policy must be one of "
                        f"{', '.join(STALE_POLICIES)}, got {prm.value!r}")
                self.stale_policy = prm.value
            elif name == "state_file":
                self.state_file = str(prm.value)
        return SetParametersResult(successful=True)

    # ------------------------------------------------------------------ service work (sim thread)
    def _do_reset(self):
        self.sim.reset()
        self._after_state_change()
        return True, f"simulation reset to t={self.sim.time!r}"

    def _do_pause(self):
        if self.paused:
            return True, f"already paused at t={self.sim.time!r}"
        self.paused = True
        return True, f"paused at t={self.sim.time!r}"

    def _do_resume(self):
        if self._step_error is not None:
            self._step_error = None
        if not self.paused:
            return True, f"already running at t={self.sim.time!r}"
        self.paused = False
        self._last_command = time.monotonic()
        return True, f"resumed at t={self.sim.time!r}"

    def _do_step_service(self):
        if self.mode != "lock_step" and not self.paused:
            return False, (f"step_simulation needs mode lock_step or a paused simulation "
                           f"(mode {self.mode})")
        if self.sim.time + 0.5 * self.step > self.end_time:
            return False, f"end_time {self.end_time!r} reached at t={self.sim.time!r}"
        t0 = self.sim.time
        if not self._advance():
            return False, (f"step at t={t0!r} failed (state unchanged): "
                           f"{type(self._step_error).__name__}: {self._step_error}")
        self._publish_state()
        return True, f"stepped from t={t0!r} to t={self.sim.time!r}"

    def _do_save(self):
        blob = self.sim.serialize_state()
        path = self.state_file
        tmp = f"{path}.tmp{os.getpid()}"
        with open(tmp, "wb") as fh:
            fh.write(blob)
        os.replace(tmp, path)
        return True, f"saved state at t={self.sim.time!r} ({len(blob)} bytes) to {path}"

    def _do_load(self):
        path = self.state_file
        with open(path, "rb") as fh:
            blob = fh.read()
        self.sim.deserialize_state(blob)  # StateError leaves the simulation unchanged
        self._after_state_change()
        return True, f"loaded state at t={self.sim.time!r} from {path}"

    def _do_set_parameter(self, name, value):
        self.sim.set_parameter(name, value)
        self._after_state_change()
        return True, f"parameter {name!r} set to {value!r}"

    def _after_state_change(self):
        self._command_ready = False
        self._step_error = None
        self._publish_state()
        self._pub_wall = None

    # ------------------------------------------------------------------ simulation thread
    def _drain(self):
        """Apply queued commands and run queued service jobs, in arrival order."""
        jobs = self._jobs
        while jobs:
            item = jobs.popleft()
            if item[0] == "job":
                item[1]()
                continue
            _, values, stamp, received, topic = item
            if (self.mode == "lock_step" and stamp is not None
                    and stamp != time_to_ns(self.sim.time)):
                self.get_logger().debug(
                    f"ignored command stamped {stamp} ns for another step (t={self.sim.time!r})")
                continue
            try:
                self.sim.set_inputs(values)  # validates (NaN/inf, names); atomic
            except (CosimError, TypeError, ValueError) as exc:
                self._reject(f"command on {topic!r}: {exc}")
                continue
            self._last_command = received
            if self._stale:
                self._stale = False
                self.get_logger().info(f"commands resumed at t={self.sim.time!r}")
            if self.mode == "lock_step":
                self._command_ready = True
                self._command_wall = received
                if self._pub_wall is not None and received > self._pub_wall:
                    self._samples["round_trip"].append(received - self._pub_wall)
                self._pub_wall = None

    def _check_stale(self, now):
        """True when inputs are stale; applies the zero policy once and logs transitions."""
        if self.input_timeout <= 0.0 or now - self._last_command <= self.input_timeout:
            return False
        if not self._stale:
            self._stale = True
            self.get_logger().warning(
                f"no command for {now - self._last_command:.3f} s (input_timeout "
                f"{self.input_timeout} s) at t={self.sim.time!r}: policy {self.stale_policy!r}")
            if self.stale_policy == "zero" and self._commanded:
                self.sim.set_inputs({n: 0.0 for n in self._commanded})
        return True

    def _runnable(self):
        if self.paused or self._step_error is not None:
            return False
        if self.sim.time + 0.5 * self.step > self.end_time:
            if not self._at_end_logged:
                self._at_end_logged = True
                self.get_logger().info(f"end_time reached at t={self.sim.time!r}")
                self._publish_state()
                if self.config["shutdown_at_end"]:
                    for pub in (self._js_pub, self._out_pub, self._clock_pub):
                        if pub is not None:  # let reliable readers get the final state
                            pub.wait_for_all_acked(Duration(seconds=1.0))
                    self._finish()
            return False
        self._at_end_logged = False
        return True

    def _advance(self):
        """One communication step with the held inputs (errors pause the simulation)."""
        sim = self.sim
        try:
            sim.do_step(sim.time, self.step)
        except Exception as exc:  # cosim leaves the state as before the call
            self._step_error = exc
            self.get_logger().error(
                f"step at t={sim.time!r} failed, simulation paused (state unchanged; "
                f"resume_simulation to retry): {type(exc).__name__}: {exc}")
            return False
        self._steps_window += 1
        self._command_ready = False
        return True

    def _prepare_state(self):
        """Fill the reused messages from the simulation (no publishing)."""
        sim = self.sim
        values = np.concatenate((sim.y, sim.get_outputs(), sim.get_inputs()))
        js = self._js_msg
        time_to_msg(sim.time, js.header.stamp)
        js.position = values[self._pos_index].tolist()
        js.velocity = values[self._vel_index].tolist()
        if self._has_efforts:
            eff = values[self._eff_index]
            eff[self._eff_missing] = float("nan")
            js.effort = eff.tolist()
        self._out_msg.data = values[self._out_slice].tolist()
        time_to_msg(sim.time, self._clock_msg.clock)

    def _send_state(self):
        if self._clock_pub is not None:
            self._clock_pub.publish(self._clock_msg)
        self._js_pub.publish(self._js_msg)
        self._out_pub.publish(self._out_msg)

    def _publish_state(self):
        self._prepare_state()
        self._send_state()
        self._pub_wall = time.monotonic()

    def _subscriber_count(self):
        """Matched peers of the state topics and commands (a new one: republish)."""
        pubs = (self._js_pub, self._out_pub, self._clock_pub)
        return sum(p.get_subscription_count() for p in pubs if p is not None) + sum(
            s.get_publisher_count() for s in self._cmd_subs)

    def _lock_step_once(self):
        """Apply queued work; take one step if the command for this step is in.
        Caller holds ``_sim_lock``.  True when it stepped (or tried to)."""
        self._drain()
        if not (self._command_ready and self._runnable()):
            return False
        if self._advance():
            self._publish_state()
            self._last_pub = self._pub_wall
            if self._command_wall is not None:
                self._samples["turnaround"].append(self._last_pub - self._command_wall)
                self._command_wall = None
        return True

    def _run_lock_step(self):
        """Lock step.  The step normally runs right in the command callback
        (``_post``: no thread hand-over on the critical path); this loop covers
        what arrives while that is busy, stale inputs, and republishing."""
        republish = float(self.config["lock_step_republish_period"])
        with self._sim_lock:
            peers = self._subscriber_count()  # before publishing: a peer matched meanwhile
            self._publish_state()             # is seen as new and gets the state again
            self._last_pub = time.monotonic()
        while not self._stop.is_set():
            with self._sim_lock:
                if self._lock_step_once():
                    continue
                now = time.monotonic()
                if self._runnable() and self._check_stale(now) and self.stale_policy != "pause":
                    if self._advance():  # hold / zero: step with the held (or zeroed) inputs
                        self._publish_state()
                        self._last_pub = now
                        self._last_command = now  # one step per timeout period
                    continue
                count = self._subscriber_count()
                if count > peers or (republish > 0.0 and now - self._last_pub > republish):
                    self._send_state()  # discovery race or lost message: same state again
                    self._last_pub = self._pub_wall = now
                peers = count
            self._wake.wait(0.05)
            self._wake.clear()

    def _run_free_run(self):
        self._publish_state()
        while not self._stop.is_set():
            if self._jobs:
                self._drain()
            if self._runnable() and not (self._check_stale(time.monotonic())
                                         and self.stale_policy == "pause"):
                if self._advance():
                    self._publish_state()
                    continue
            self._wake.wait(0.05)
            self._wake.clear()

    def _run_real_time(self):
        """Wall-clock paced loop: publish state k at deadline k, then compute step k+1.

        Publishing at the deadline makes the publication jitter the wake-up
        jitter only; the step computation of the next state is done in the
        remaining period (an overrun when it ends after the next deadline).
        """
        spin = float(self.config["real_time.spin_threshold"])
        max_lag = float(self.config["real_time.max_lag"])
        perf = time.perf_counter
        jitter, latency = self._samples["jitter"], self._samples["latency"]
        self._prepare_state()
        deadline = perf()
        running = False
        while not self._stop.is_set():
            if self._jobs:
                self._drain()
            if not self._runnable() or (self._check_stale(time.monotonic())
                                        and self.stale_policy == "pause"):
                running = False
                self._wake.wait(0.05)
                self._wake.clear()
                continue
            period = self.step / self.real_time_factor
            if not running:  # (re)start the schedule now
                running = True
                self._prepare_state()
                deadline = perf()
            # wait for the deadline: sleep, then busy-wait the last `spin` seconds
            remaining = deadline - perf()
            while remaining > spin and not self._stop.is_set():
                self._wake.wait(remaining - spin)
                self._wake.clear()
                if self._jobs:
                    break
                remaining = deadline - perf()
            if self._jobs:
                continue  # a command or service arrived: handle it, then wait again
            now = perf()
            while now < deadline:
                now = perf()
            self._send_state()
            self._pub_wall = time.monotonic()
            jitter.append(now - deadline)
            if self._advance():
                self._prepare_state()
            done = perf()
            latency.append(done - now)
            deadline += period
            if done > deadline:
                self._overruns += 1
                self._overruns_window += 1
                if done - deadline > max_lag:
                    self.get_logger().warning(
                        f"real time: {done - deadline:.4f} s behind at t={self.sim.time!r}, "
                        f"re-anchoring the schedule", throttle_duration_sec=1.0)
                    deadline = done

    # ------------------------------------------------------------------ diagnostics (executor)
    def _publish_diagnostics(self):
        try:
            self._diagnostics()
        except Exception as exc:  # telemetry must never stop the node
            self.get_logger().error(f"diagnostics failed: {exc!r}", throttle_duration_sec=10.0)

    def _diagnostics(self):
        now = time.monotonic()
        wall = max(now - self._window_start, 1e-9)
        sim_time = self.sim.time
        samples = {}
        for key, lst in self._samples.items():  # the simulation thread appends meanwhile
            samples[key] = lst[:]
            del lst[:len(samples[key])]
        steps, self._steps_window = self._steps_window, 0
        overruns, self._overruns_window = self._overruns_window, 0
        sim_dt = sim_time - self._window_sim_start
        self._window_start, self._window_sim_start = now, sim_time
        status = DiagnosticStatus(name=f"{self.get_name()}: cosim simulation",
                                  hardware_id=str(self.config["model"]))
        status.level, status.message = DiagnosticStatus.OK, "running"
        if self._step_error is not None:
            status.level, status.message = DiagnosticStatus.ERROR, f"step failed: {self._step_error}"
        elif self.paused:
            status.message = "paused"
        elif self._stale:
            status.level, status.message = DiagnosticStatus.WARN, f"stale inputs ({self.stale_policy})"
        elif overruns:
            status.level, status.message = DiagnosticStatus.WARN, f"{overruns} overruns"
        values = {
            "mode": self.mode, "sim_time": repr(sim_time), "paused": str(self.paused),
            "communication_step": repr(self.step), "real_time_factor": repr(self.real_time_factor),
            "steps_window": str(steps), "achieved_rate_hz": f"{steps / wall:.3f}",
            "achieved_real_time_factor": f"{sim_dt / wall:.5f}",
            "overruns_window": str(overruns), "overruns_total": str(self._overruns),
            "rejected_messages_total": str(self._rejected), "stale_inputs": str(self._stale),
        }
        for key, data in samples.items():
            hist = self._hist[key]
            if data:
                arr = np.sort(np.asarray(data)) * 1e6
                hist.add(arr)
                values[f"{key}_p50_us"] = f"{arr[(arr.size - 1) // 2]:.1f}"
                values[f"{key}_p99_us"] = f"{arr[math.ceil(0.99 * arr.size) - 1]:.1f}"
                values[f"{key}_max_us"] = f"{arr[-1]:.1f}"
            if hist.n:
                p50, p99 = hist.percentiles((50, 99))
                values[f"{key}_total_count"] = str(hist.n)
                values[f"{key}_total_p50_us"] = f"{p50:.0f}"  # 'inf': beyond 10 ms
                values[f"{key}_total_p99_us"] = f"{p99:.0f}"
                values[f"{key}_total_max_us"] = f"{hist.max:.1f}"
        for key, value in self.sim.stats.items():
            values[f"sim_{key}"] = str(value)
        status.values = [KeyValue(key=k, value=v) for k, v in values.items()]
        msg = DiagnosticArray(status=[status])
        time_to_msg(sim_time, msg.header.stamp)
        self._diag_pub.publish(msg)

    def diagnostics_summary(self):
        """Whole-run telemetry as a dict (for in-process use and benchmarks)."""
        out = {"overruns": self._overruns, "rejected": self._rejected}
        for key, hist in self._hist.items():
            p50, p99 = hist.percentiles((50, 99))
            out[key] = {"count": hist.n, "p50_us": p50, "p99_us": p99, "max_us": hist.max}
        return out


def set_real_time_priority(priority, logger):
    """SCHED_FIFO for every thread of this process (Linux); logs the outcome."""
    try:
        tids = [int(t) for t in os.listdir("/proc/self/task")]
        for tid in tids:
            os.sched_setscheduler(tid, os.SCHED_FIFO, os.sched_param(int(priority)))
    except (OSError, AttributeError) as exc:
        logger.warning(f"cannot set SCHED_FIFO priority {priority}: {exc}; running unprivileged")
        return False
    logger.info(f"SCHED_FIFO priority {priority} for {len(tids)} threads")
    return True


def main(args=None):
    """Console script ``cosim-ros``: ``cosim-ros --ros-args --params-file plant.yaml``."""
    rclpy.init(args=sys.argv if args is None else args)
    try:
        node = SimulationNode()
    except (CosimError, ConfigurationError, ValueError, ParameterException) as exc:
        rclpy.logging.get_logger("cosim_sim").fatal(f"cannot configure the simulation node: {exc}")
        rclpy.try_shutdown()
        return 2
    # the simulation thread gets the GIL back quickly from the executor thread
    sys.setswitchinterval(5e-5 if node.mode == "real_time" else 2e-4)
    if node.mode == "real_time":
        import gc
        gc.collect()
        gc.freeze()  # long-lived objects out of the collector's way
    executor = rclpy.executors.SingleThreadedExecutor(context=node.context)
    executor.add_node(node)
    if node.config["sched_priority"] > 0:  # inherited by the simulation thread
        set_real_time_priority(node.config["sched_priority"], node.get_logger())
    node.start()
    try:
        executor.spin_until_future_complete(node.finished)
    except (KeyboardInterrupt, rclpy.executors.ExternalShutdownException):
        pass
    finally:
        node.stop()
        node.destroy_node()
        rclpy.try_shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
