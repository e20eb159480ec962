"""Parameters of the plant node, declared once from a table (as the rclpy demo
``set_parameters_callback.py``: descriptors, an on-set callback that only
validates, a post-set callback that applies).

* Integer literals are accepted for floating-point parameters, at start
  (``-p end_time:=5``) and at run time (``ros2 param set ... real_time_factor 1``):
  they are converted before rclpy's type check.
* Unknown keys in the node's parameter set are rejected at start, naming them.
* Run-time changes (parameters marked dynamic) are validated by ``check`` and
  rejected with a reason naming the parameter and the value.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from rclpy.exceptions import ParameterUninitializedException
from rclpy.parameter import Parameter

from .common import RELIABILITIES, ConfigurationError, descriptor, shown
from .state_files import StateFileError, check_name

MODES = ("lock_step", "real_time", "free_run")
STALE_POLICIES = ("hold", "zero", "pause")
STAMP_POLICIES = ("match", "strict", "arrival")


@dataclass(frozen=True)
class Spec:
    name: str
    default: object          # a value, or a Parameter.Type for arrays without a default
    description: str
    dynamic: bool = False    # may change at run time
    choices: tuple = ()
    range: tuple = None      # inclusive (low, high) for numbers


S = Spec
PLANT = (
    S("model", "pendulum", "cosim model: a library name (pendulum, two_link, ...; a parameter "
      "names no code: 'module:Class' is refused before anything is imported); a robot: "
      "robot_description, urdf_file or robot_description_topic"),
    S("robot_description", "", "URDF text of a robot to simulate instead of 'model' (the ROS "
      "convention; cosim.models.urdf, needs pinocchio; in a parameter file, or -p "
      "robot_description:=\"$(cat robot.urdf)\", which the node takes verbatim); '' = none"),
    S("urdf_file", "", "URDF file of a robot to simulate instead of 'model' (read once at "
      "start-up); '' = none"),
    S("robot_description_topic", "", "topic to take the robot's URDF from at start-up (the "
      "first std_msgs/String, transient local, as robot_state_publisher publishes it), e.g. "
      "robot_description; '' = none"),
    S("robot_description_timeout", 30.0, "seconds to wait for robot_description_topic; "
      "0 = until a signal", range=(0.0, 1e6)),
    S("publish_tf", False, "robot from URDF: publish its joint transforms with every published "
      "state (tf2_msgs/TFMessage on topics.tf where tf2_msgs is importable, else "
      "geometry_msgs/TransformStamped on topics.tf_frames)"),
    S("urdf_frames", Parameter.Type.STRING_ARRAY, "robot from URDF: links/joints whose poses are "
      "outputs (<frame>_x.._qw)"),
    S("position_limits", True, "robot from URDF: the joints' position limits (URDF <limit lower "
      "upper>) as stops that hold; false: the joints move past them"),
    S("method", "auto", "integration method (cosim METHOD_REGISTRY name; auto: the default "
                        "rule, dopri5 for a multibody plant the node drives; with integrator_step "
                        "rk4 where it is stable at that step, else generalized-alpha)"),
    S("backend", "auto", "auto (compiled numba kernels where the method and model have them), "
      "numba or python (the reference)", choices=("auto", "numba", "python")),
    S("rtol", 1e-6, "integrator relative tolerance", range=(0.0, 1.0)),
    S("atol", 1e-8, "integrator absolute tolerance", range=(0.0, 1e3)),
    S("integrator_step", 0.0, "fixed integrator step in s; 0 = adaptive", range=(0.0, 1e3)),
    S("start_time", 0.0, "simulation start time in s"),
    S("communication_step", 0.01, "communication step in s (inputs held over one step)",
      range=(1e-9, 1e3)),
    S("end_time", 0.0, "stop stepping at this simulation time in s; 0 = never", range=(0.0, 1e15)),
    S("shutdown_at_end", False, "exit the node when end_time is reached"),
    S("mode", "lock_step", "lock_step (one step per command), real_time (paced to wall time) "
      "or free_run (as fast as possible)", choices=MODES),
    S("real_time_factor", 1.0, "real_time: simulated seconds per wall second", dynamic=True,
      range=(1e-6, 1e6)),
    S("input_timeout", 0.0, "wall seconds without a command after which inputs are stale; "
      "0 = never", dynamic=True, range=(0.0, 1e6)),
    S("stale_input_policy", "hold", "stale inputs: hold (keep last), zero (command inputs to 0), "
      "pause (stop time until a command arrives)", dynamic=True, choices=STALE_POLICIES),
    S("start_paused", False, "start with the simulation paused"),
    S("lock_step_stamps", "match", "lock_step, JointState commands: match = header.stamp equal "
      "to the current simulation time is this step's command, the stamp of an older published "
      "state is a duplicate answer (ignored, WARN), any other stamp (zero/unset, wall clock) is "
      "taken in arrival order (WARN); strict = other stamps are ignored (WARN); arrival = stamps "
      "are not looked at", choices=STAMP_POLICIES),
    S("lock_step_republish_period", 0.5, "lock_step: republish the current state after this "
      "many wall seconds without a command (discovery races); 0 = never", range=(0.0, 1e6)),
    S("state_directory", "", "directory of saved states, fixed at start-up ('' = save_state "
      "and load_state off)"),
    S("state_name", "state.bin", "file name (in state_directory) used by save_state and "
      "load_state: [A-Za-z0-9._-], no path", dynamic=True),
    S("state_max_bytes", 16 << 20, "largest state file load_state reads / save_state writes",
      range=(1, 1 << 30)),
    S("state_max_files", 64, "save_state: at most this many state files in state_directory "
      "(saving over an existing name is always allowed within the byte quota)",
      range=(1, 1 << 20)),
    S("state_max_total_bytes", 256 << 20, "save_state: at most this many bytes of state files "
      "in state_directory, the new one included", range=(1, 1 << 40)),
    S("max_steps_per_request", 1_000_000, "largest N accepted on step_n / steps of a run_until",
      range=(1, 1 << 40)),
    S("frame_id", "", "header.frame_id of the published joint states"),
    S("joint_names", Parameter.Type.STRING_ARRAY, "JointState names; default: the model "
      "coordinates"),
    S("joint_positions", Parameter.Type.STRING_ARRAY, "state or output published as each "
      "joint's position; default: coordinates"),
    S("joint_velocities", Parameter.Type.STRING_ARRAY, "state or output published as each "
      "joint's velocity; default: coordinate rates (multibody), none (first order)"),
    S("joint_efforts", Parameter.Type.STRING_ARRAY, "input applied as each joint's effort "
      "('' = none); also maps JointState effort commands by joint name"),
    S("command_inputs", Parameter.Type.STRING_ARRAY, "input names carried, in order, by "
      "Float64MultiArray commands; default: all inputs"),
    S("state_reliability", "reliable", "QoS of joint_states/outputs: reliable (default QoS "
      "readers) or best_effort (sensor data)", choices=RELIABILITIES),
    S("state_publish_rate", 0.0, "real_time/free_run: publish joint_states and outputs at this "
      "rate in Hz of simulation time (every k-th communication step; 1/communication_step "
      "must be a multiple of it), /clock still every step; 0 = every step (lock_step "
      "publishes every state: a rate is refused there)", range=(0.0, 1e9)),
    S("publish_clock", True, "publish /clock (this node is the time source)"),
    S("paused_clock_period", 0.1, "while paused or idle: republish /clock (frozen time) every "
      "this many wall seconds; 0 = never", range=(0.0, 3600.0)),
    S("topics.clock", "/clock", "clock topic"),
    S("topics.joint_states", "joint_states", "JointState output topic"),
    S("topics.outputs", "outputs", "Float64MultiArray model outputs topic"),
    S("topics.command", "command", "Float64MultiArray command topic ('' = off)"),
    S("topics.joint_command", "joint_command", "JointState effort command topic ('' = off)"),
    S("topics.diagnostics", "/diagnostics", "DiagnosticArray topic"),
    S("topics.robot_description", "robot_description", "robot from URDF: its text as "
      "std_msgs/String (transient local; '' = off; not published when it came from "
      "robot_description_topic)"),
    S("topics.tf", "/tf", "publish_tf: tf2_msgs/TFMessage topic (where tf2_msgs is importable)"),
    S("topics.tf_frames", "tf_frames", "publish_tf without tf2_msgs: geometry_msgs/"
      "TransformStamped topic, one message per joint"),
    S("topics.step_n", "step_n", "std_msgs/UInt32: pause and step N communication steps"),
    S("topics.run_until", "run_until", "std_msgs/Float64: pause and step until this "
      "simulation time (s)"),
    S("diagnostics_period", 1.0, "wall seconds between diagnostics", range=(0.01, 3600.0)),
    S("log_throttle_period", 1.0, "wall seconds between two log lines of the same kind about "
      "messages (rejected, ignored commands)", range=(0.0, 3600.0)),
    S("real_time.spin_threshold", 0.0002, "real_time: busy-wait the last seconds before a "
      "deadline", range=(0.0, 0.01)),
    S("real_time.max_lag", 0.1, "real_time: re-anchor the schedule when behind by more than "
      "this (wall s)", range=(0.0, 1e3)),
    S("sched_priority", 0, "SCHED_FIFO priority 1..99 of the process when run as a program "
      "(root or CAP_SYS_NICE); 0 = normal", range=(0, 99)),
)
del S
BY_NAME = {s.name: s for s in PLANT}
PREFIXES = ("params.", "method_options.")  # names that depend on the model / method


def _descriptor(spec, read_only=None):
    constraints = f"one of {', '.join(spec.choices)}" if spec.choices else ""
    kw = {}
    if spec.range is not None:
        key = "integer_range" if isinstance(spec.default, int) and not isinstance(
            spec.default, bool) else "float_range"
        kw[key] = spec.range
    return descriptor(spec.description, read_only=not spec.dynamic if read_only is None
                      else read_only, constraints=constraints, **kw)


def coerce_overrides(node, double_names):
    """Start-up overrides: integer literals of floating-point parameters become
    floats (``-p end_time:=5``), integer arrays of double arrays likewise."""
    overrides = node._parameter_overrides  # rclpy: CLI/params-file values before declaration
    for name in list(overrides):
        if name in double_names or any(name.startswith(p) for p in double_names
                                       if p.endswith(".")):
            new = _as_double(overrides[name])
            if new is not None:
                overrides[name] = new


def _as_double(prm):
    if prm.type_ == Parameter.Type.INTEGER:
        return Parameter(prm.name, Parameter.Type.DOUBLE, float(prm.value))
    if prm.type_ == Parameter.Type.INTEGER_ARRAY:
        return Parameter(prm.name, Parameter.Type.DOUBLE_ARRAY, [float(v) for v in prm.value])
    return None


def integer_to_double_callback(node):
    """A pre-set callback converting run-time integer values of declared
    double parameters (``ros2 param set ... 1``) before rclpy's type check."""
    def pre_set(params):
        out = []
        for prm in params:
            declared = node.has_parameter(prm.name) and node.get_parameter(prm.name)
            if declared and declared.type_ in (Parameter.Type.DOUBLE, Parameter.Type.DOUBLE_ARRAY):
                out.append(_as_double(prm) or prm)
            else:
                out.append(prm)
        return out
    return pre_set


def _doubles():
    return {s.name for s in PLANT if isinstance(s.default, float)} | {"params."}


def declare(node, model_parameters):
    """Declare the table, the model's ``params.*`` and the given ``method_options.*``;
    reject unknown keys; return the configuration dict."""
    coerce_overrides(node, _doubles())
    for spec in PLANT:
        node.declare_parameter(spec.name, spec.default, _descriptor(spec))
    overrides = node._parameter_overrides
    model = plant_model(node)
    spec_params = model_parameters(model)
    for q in spec_params:
        node.declare_parameter(f"params.{q.name}", float(q.default), descriptor(
            f"model parameter [{q.unit}] {q.description}".strip(), read_only=not q.tunable))
    for name, value in overrides.items():
        if name.startswith("method_options."):
            node.declare_parameter(name, value.value, descriptor("integrator option",
                                                                 dynamic=True))
    unknown = sorted(n for n in overrides if not node.has_parameter(n))
    for name in unknown:
        if name.startswith("params."):
            raise ConfigurationError(
                f"parameter {name!r}: model "
                f"{model if isinstance(model, str) else model.name + ' (URDF)'!r} has no "
                f"parameter {name[7:]!r} "
                f"(parameters: {', '.join(q.name for q in spec_params) or 'none'})")
    if unknown:
        hint = (" (state_file was replaced by state_directory + state_name)"
                if "state_file" in unknown else
                " (config names a shipped file on the command line only: -p config:=NAME)"
                if "config" in unknown else "")
        raise ConfigurationError(f"unknown parameter(s) for this node: {', '.join(unknown)}"
                                 f"{hint}; see --help")
    cfg = read(node)
    cfg["model"] = model
    return cfg


def plant_model(node):
    """The 'model' parameter, or the class of the robot of ``robot_description`` /
    ``urdf_file`` (errors name the parameter)."""
    text = node.get_parameter("robot_description").value
    path = node.get_parameter("urdf_file").value
    topic = node.get_parameter("robot_description_topic").value
    given = [n for n, v in (("robot_description", text), ("urdf_file", path),
                            ("robot_description_topic", topic)) if v]
    if not given:
        model = node.get_parameter("model").value
        if ":" in model:  # importing a module runs it: a parameter names no code
            from cosim.models import MODEL_REGISTRY
            raise ConfigurationError(
                f"parameter 'model': {shown(model)} names code; the node runs a library model "
                f"({', '.join(MODEL_REGISTRY)}) or a robot from URDF (robot_description, "
                f"urdf_file, robot_description_topic), and imports nothing a parameter names "
                f"(nothing was imported)")
        return model
    if len(given) > 1:
        raise ConfigurationError(f"parameters {' and '.join(repr(n) for n in given)} are "
                                 f"set together; give one")
    if topic:
        from .robot import wait_for_description
        text = wait_for_description(node, topic,
                                    node.get_parameter("robot_description_timeout").value)
    try:
        frames = node.get_parameter("urdf_frames").value
    except ParameterUninitializedException:
        frames = None
    from cosim.errors import CosimError
    from cosim.models.urdf import load_urdf, urdf_model_class
    try:
        limits = bool(node.get_parameter("position_limits").value)
        return urdf_model_class(text, frames, limits) if text else load_urdf(path, frames, limits)
    except CosimError as exc:
        raise ConfigurationError(f"parameter {given[0]!r}: {exc}") from None


def read(node):
    cfg = {}
    for spec in PLANT:
        try:
            value = node.get_parameter(spec.name).value
        except ParameterUninitializedException:  # arrays declared without a default
            value = None
        if isinstance(spec.default, Parameter.Type):
            value = None if value is None else [str(v) for v in value]
        cfg[spec.name] = value
    cfg["params"] = {k: v.value for k, v in node.get_parameters_by_prefix("params").items()}
    cfg["method_options"] = {k: v.value for k, v in
                             node.get_parameters_by_prefix("method_options").items()}
    for spec in PLANT:
        reason = check(spec.name, cfg[spec.name])
        if reason:
            raise ConfigurationError(reason)
    return cfg


def state_decimation(cfg):
    """Steps per joint_states publication from ``state_publish_rate`` (1: every step);
    a rate that is not the communication rate divided by a whole number is an error."""
    rate, step = cfg["state_publish_rate"], cfg["communication_step"]
    if rate == 0.0:
        return 1
    if cfg["mode"] == "lock_step":
        raise ConfigurationError("parameter 'state_publish_rate' applies to real_time and "
                                 "free_run (lock_step publishes every state: each is answered "
                                 f"by a command), got {rate!r} with mode lock_step")
    every = round(1.0 / (rate * step))
    if every < 1 or abs(every * rate * step - 1.0) > 1e-9:
        raise ConfigurationError(
            f"parameter 'state_publish_rate' must be the communication rate "
            f"{1.0 / step:g} Hz divided by a whole number (communication_step {step!r}), "
            f"got {rate!r}")
    return every


def simulation_spec(cfg):
    """The node's configuration as the :class:`cosim.SimulationSpec` it runs (the one
    translation: ``integrator_step`` -> ``h`` (0: adaptive), ``end_time`` -> ``stop_time``
    (0: never, the spec's default), ``params.*``, ``method_options.*``); errors are the spec's."""
    from cosim.spec import SimulationSpec
    end = cfg["end_time"]
    model = cfg["model"]
    if isinstance(model, type) and hasattr(model, "robot"):  # a URDF robot: its text travels
        model = model.spec()
    from cosim.errors import CosimError, SpecError
    method = cfg["method"]
    if method == "auto":   # the node drives the plant: new inputs at every step (cosim.method_choice)
        from cosim.method_choice import default_method
        try:
            method = default_method(model, fixed_step=cfg["integrator_step"] or None, driven=True,
                                    params=cfg["params"])
        except CosimError as exc:
            raise SpecError(f"ROS parameters: {exc}") from None
    return SimulationSpec.from_dict({
        "model": model, "method": method, "backend": cfg["backend"],
        "params": cfg["params"], "rtol": cfg["rtol"], "atol": cfg["atol"],
        "h": cfg["integrator_step"] or None, "method_options": cfg["method_options"],
        "start_time": cfg["start_time"], "communication_step": cfg["communication_step"],
        "stop_time": end if end and end > cfg["start_time"] else None}, source="ROS parameters")


def check(name, value):
    """Reason the value is invalid for this table parameter, or None."""
    spec = BY_NAME.get(name)
    if spec is None:
        return None
    if spec.choices and value not in spec.choices:
        return f"parameter {name!r} must be one of {', '.join(spec.choices)}, got {shown(value)}"
    if isinstance(value, float) and not math.isfinite(value):
        return f"parameter {name!r} must be finite, got {value!r}"
    if spec.range is not None and isinstance(value, (int, float)) and not isinstance(value, bool):
        lo, hi = spec.range
        if not lo <= value <= hi:
            return f"parameter {name!r} must be in [{lo}, {hi}], got {value!r}"
    if name == "state_name":
        try:
            check_name(value)
        except StateFileError as exc:
            return f"parameter 'state_name': {exc}"
    return None


def help_text(prog, summary):
    lines = [f"usage: {prog} [--help] [--ros-args [-p config:=NAME] [--params-file FILE] "
             "[-p NAME:=VALUE ...]]",
             "", summary, "", "parameters (node cosim_sim; * = may change at run time):"]
    for s in PLANT:
        default = "(none)" if isinstance(s.default, Parameter.Type) else repr(s.default)
        lines.append(f"  {s.name}{'*' if s.dynamic else ''} = {default}")
        lines.append(f"      {s.description}")
    lines.append("  params.NAME   model parameters (tunable ones may change at run time)")
    lines.append("  method_options.NAME   integrator options")
    return "\n".join(lines)
