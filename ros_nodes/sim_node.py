"""ROS 2 simulation node: a cosim plant driven over topics.

The node wraps one :class:`cosim.Simulation` and owns no numerics: every step,
input check, state snapshot and serialisation is a call into cosim.  It

* publishes ``/clock`` (``rosgraph_msgs/Clock``, simulation time; republished
  while paused), the state as ``sensor_msgs/JointState`` (stamp = simulation
  time) and all model outputs as ``std_msgs/Float64MultiArray``
  (``layout.dim[0].label`` = comma-separated output names);
* subscribes to commands (``Float64MultiArray`` in ``command_inputs`` order,
  ``JointState`` efforts by joint name) and holds them (zero-order hold);
* offers services and step requests (``services``), runs one of three modes
  (``pacing``), reports ``/diagnostics`` (``telemetry``);
* for a robot from URDF publishes its description and, with ``publish_tf``,
  its joint transforms (``robot``).

Parts: ``params`` (declared parameter table), ``joints`` (message mapping),
``publishing`` (state publications), ``wire`` (messages kept serialized),
``commands`` (checks and stamp policy), ``services``, ``pacing``,
``telemetry``, ``state_files``, ``robot`` (URDF in and out, frames), ``common`` (QoS and helpers), ``process``
(``--help``, signals, exit status).

Threads: the executor thread runs the callbacks, which check the message
structure and queue the work; the simulation thread applies it, steps, paces
and publishes.  In lock step the command callback applies and steps itself
when the simulation thread is idle (no thread hand-over on the round-trip
path); ``sim_lock`` serialises the two.
"""
from __future__ import annotations

import os
import sys

if __name__ == "__main__" or os.path.basename(sys.argv[0] if sys.argv else "") == "cosim-ros":
    from ros_nodes.process import install_signal_handlers, require_ros  # before the heavy imports
    install_signal_handlers()
    require_ros("cosim-ros")  # without the ros extra: one line naming it, exit 2

import collections  # noqa: E402
import functools  # noqa: E402
import math  # noqa: E402
import threading  # noqa: E402
import time  # noqa: E402

from diagnostic_msgs.msg import DiagnosticArray  # noqa: E402
from rcl_interfaces.msg import SetParametersResult  # noqa: E402
from rclpy.clock import Clock, ClockType  # noqa: E402
from rclpy.node import Node  # noqa: E402
from rclpy.parameter import Parameter  # noqa: E402
from rclpy.task import Future  # noqa: E402
from sensor_msgs.msg import JointState  # noqa: E402
from std_msgs.msg import Float64MultiArray  # noqa: E402

import cosim  # noqa: E402
from cosim.errors import CosimError  # noqa: E402

from . import pacing, params, process, services  # noqa: E402
from . import robot as robot_io  # noqa: E402
from .commands import Commands  # noqa: E402
from .common import (COMMAND_QOS, DIAGNOSTICS_QOS, ConfigurationError,  # noqa: E402
                     LogThrottle, set_real_time_priority, time_to_ns)
from .joints import JointMap  # noqa: E402
from .publishing import StatePublisher  # noqa: E402
from .state_files import StateDirectory  # noqa: E402
from .telemetry import Telemetry  # noqa: E402

__all__ = ["SimulationNode", "ConfigurationError", "main"]


def model_parameters(model):
    """The model's parameter specs (for ``params.*``); errors name the parameter."""
    try:
        if isinstance(model, type):  # a robot from URDF (params.plant_model)
            return model.parameters
        return cosim.models.model_class(model).parameters if isinstance(model, str) else ()
    except CosimError as exc:
        raise ConfigurationError(f"parameter 'model': {exc}") from None


class _Job:
    """Work for the simulation thread that the caller may withdraw while pending."""

    def __init__(self, fn):
        self.fn, self.result = fn, None
        self.done = threading.Event()
        self._lock = threading.Lock()
        self._state = "pending"

    def __call__(self):
        with self._lock:
            if self._state != "pending":
                return
            self._state = "running"
        try:
            self.result = self.fn()
        except Exception as exc:  # noqa: BLE001 - CosimError, OSError...: the thread lives on
            self.result = (False, f"{type(exc).__name__}: {exc}")
        finally:
            self.done.set()

    def withdraw(self):
        with self._lock:
            if self._state == "pending":
                self._state = "withdrawn"
                return True
            return False


class SimulationNode(Node):
    """The cosim plant node (see the module docstring)."""

    def __init__(self, node_name="cosim_sim", **kwargs):
        super().__init__(node_name, **kwargs)
        self.add_pre_set_parameters_callback(params.integer_to_double_callback(self))
        self.config = cfg = params.declare(self, model_parameters)
        self.sim = cosim.Simulation.from_spec(params.simulation_spec(cfg))
        self.sim.on_notice = self.get_logger().warning  # an effort clipped: WARN, once per joint
        self.ic_message = self._log_ic_report()
        self.option_warnings = self._check_options(cfg)
        self.joints = JointMap(self.sim, cfg)
        self.states = StateDirectory(cfg["state_directory"], cfg["state_max_bytes"],
                                     cfg["state_max_files"], cfg["state_max_total_bytes"])
        self._init_runtime(cfg)
        self._create_interfaces(cfg)
        self.add_on_set_parameters_callback(self._validate_parameters)
        self.add_post_set_parameters_callback(self._apply_parameters)

    def _log_ic_report(self):
        """The IC report at start-up (issue 19): WARN when the initial state was repaired."""
        report = self.sim.ic_report
        if report is None:
            return None
        message = report.one_line()
        (self.get_logger().warning if report.repaired else self.get_logger().info)(message)
        return message

    def _check_options(self, cfg):
        """No silent changes (cosim.options): a fixed integrator step that the
        communication step cuts or does not divide is said at start, as a WARN.  With an
        end_time, the set-up check of cosim.step_budget: a tolerance the method cannot
        reach within max_steps per communication step is refused (the node does not
        start), one another method reaches 10 times cheaper is a WARN."""
        import warnings  # noqa: PLC0415
        from cosim import step_budget  # noqa: PLC0415
        from cosim.options import check_step_against_grid  # noqa: PLC0415
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            check_step_against_grid(cfg["integrator_step"] or None, cfg["communication_step"],
                                    h_name="integrator_step", grid_name="communication_step")
            end, dt = float(cfg["end_time"]), float(cfg["communication_step"])
            if end > self.sim.time:
                span = end - self.sim.time
                step_budget.check(self.sim, end, min(dt, span), math.ceil(span / dt), driven=True)
        messages = [str(w.message) for w in caught]
        for message in messages:
            self.get_logger().warning(message)
        return messages

    @property
    def model_label(self):
        """The 'model' parameter, or the robot's name for a URDF plant."""
        model = self.config["model"]
        return model if isinstance(model, str) else f"{self.sim.model.name} (URDF)"

    @property
    def summary(self):
        """The start-up line's summary (ros_nodes.process): the plant, the pacing mode, the
        method in use and its backend, the time."""
        return (f"model {self.model_label}, mode {self.mode}, method {self.sim.method} "
                f"({self.sim.backend}), t={self.sim.time!r}{', paused' if self.paused else ''}")

    # names used by commands.py
    command_inputs = property(lambda self: self.joints.command_inputs)
    effort_inputs = property(lambda self: self.joints.effort_inputs)

    def _init_runtime(self, cfg):
        self.mode = cfg["mode"]
        self.step = float(cfg["communication_step"])
        self.end_time = float(cfg["end_time"]) if cfg["end_time"] > 0.0 else math.inf
        self.real_time_factor = float(cfg["real_time_factor"])
        self.input_timeout = float(cfg["input_timeout"])
        self.stale_policy = cfg["stale_input_policy"]
        self.state_name = cfg["state_name"]
        self.paused = bool(cfg["start_paused"])
        self.pending_steps = 0       # of a step_n / run_until request
        self.finished = Future()
        self.jobs = collections.deque()
        self.wake = threading.Event()
        self.stopping = threading.Event()
        self.sim_lock = threading.Lock()  # lock step: callbacks may step (see post)
        self._thread = None
        self._inline = self.mode == "lock_step"
        self.command_ready = False   # lock_step: the command for the current step arrived
        self.last_command = time.monotonic()
        self.stale = False
        self.step_error = None
        self._at_end_logged = False
        self.pub_wall = None         # wall time the current state was published (round trip)
        self.command_wall = None
        self.last_pub = self.last_clock_pub = time.monotonic()
        self.telemetry = Telemetry(self.sim.time)
        self.throttle = LogThrottle(self.get_logger(), cfg["log_throttle_period"])

    def _create_interfaces(self, cfg):
        self.out = StatePublisher(self, cfg, self.joints, len(self.sim.output_names),
                                  params.state_decimation(cfg))
        self._diag_pub = self.create_publisher(DiagnosticArray, cfg["topics.diagnostics"],
                                               DIAGNOSTICS_QOS)
        topics = {"command": cfg["topics.command"], "joint_command": cfg["topics.joint_command"]}
        self.commands = Commands(self, topics)
        self._cmd_subs = [self.create_subscription(kind, topics[key], cb, COMMAND_QOS)
                          for key, kind, cb in (("command", Float64MultiArray,
                                                 self.commands.on_array),
                                                ("joint_command", JointState,
                                                 self.commands.on_joint)) if topics[key]]
        services.create(self)
        self._create_robot_interfaces(cfg)
        self.create_timer(cfg["diagnostics_period"], self._publish_diagnostics,
                          clock=Clock(clock_type=ClockType.STEADY_TIME))

    def _create_robot_interfaces(self, cfg):
        """A robot from URDF: its description out (unless it came in on a topic) and,
        with publish_tf, its joint transforms (ros_nodes.robot)."""
        self.frames = self.description = None
        robot = isinstance(cfg["model"], type) and hasattr(cfg["model"], "robot")
        if cfg["publish_tf"] and not robot:
            raise ConfigurationError(f"parameter 'publish_tf' needs a robot from URDF "
                                     f"(robot_description, urdf_file or robot_description_topic), "
                                     f"not model {cfg['model']!r}")
        if not robot:
            return
        if cfg["topics.robot_description"] and not cfg["robot_description_topic"]:
            self.description = robot_io.DescriptionPublisher(
                self, cfg["topics.robot_description"], cfg["model"].robot.text)
        if cfg["publish_tf"]:
            self.frames = robot_io.FramePublisher(self, self.sim.model, cfg)

    # ------------------------------------------------------------------ life cycle
    def start(self):
        """Start the simulation thread (after adding the node to an executor)."""
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="cosim-simulation", daemon=True)
            self._thread.start()

    def request_stop(self):
        """Ask the simulation thread and waiting service calls to stop (signal-safe)."""
        self.stopping.set()
        self.wake.set()

    def stop(self, timeout=5.0):
        """Stop and join the simulation thread; False if it is still in a step."""
        self.request_stop()
        if self._thread is not None:
            self._thread.join(timeout)
            return not self._thread.is_alive()
        return True

    def destroy_node(self):
        if getattr(self, "states", None) is not None:  # (a failed __init__ has none)
            self.states.close()
        return super().destroy_node()

    def _run(self):
        try:
            {"lock_step": pacing.run_lock_step, "real_time": pacing.run_real_time,
             "free_run": pacing.run_free_run}[self.mode](self)
        except Exception as exc:  # noqa: BLE001 - report, then let main() end the process
            if not self.stopping.is_set() and self.context.ok():
                self.get_logger().fatal(f"simulation thread died: {exc!r}")
                self._finish(1)

    def _finish(self, status=0):
        """End the program (``process.run`` returns ``status``)."""
        if not self.finished.done():
            self.finished.set_result(status)

    # ------------------------------------------------------------------ executor side
    def post(self, item):
        """Queue a command or job for the simulation thread (lock step: run it here
        when the simulation thread is idle)."""
        self.jobs.append(item)
        if self._inline and self._thread is not None and self.sim_lock.acquire(blocking=False):
            try:
                self.lock_step_once()
            except Exception as exc:  # noqa: BLE001 - never into the executor
                self.throttle("error", "inline", f"lock step failed: {exc!r}")
            finally:
                self.sim_lock.release()
        else:
            self.wake.set()

    def call(self, fn, timeout=5.0):
        """Run ``fn`` on the simulation thread; returns (success, message).  A request
        not started within ``timeout`` is withdrawn (it never takes effect later)."""
        if self._thread is None or not self._thread.is_alive():
            return False, "the simulation thread is not running"
        job = _Job(fn)
        self.post(("job", job))
        deadline = time.monotonic() + timeout
        while not job.done.wait(0.05):
            if self.stopping.is_set() or time.monotonic() > deadline:
                if job.withdraw():
                    why = "shutting down" if self.stopping.is_set() else (
                        f"the simulation thread was busy for {timeout} s (a long step?)")
                    return False, f"not done, nothing changed: {why}"
                if self.stopping.is_set():
                    return False, "shutting down during the request"
        return job.result

    def _validate_parameters(self, changes):
        for prm in changes:
            name = prm.name
            if name.startswith("params."):  # cosim validates and applies atomically
                ok, text = self.call(lambda n=name[7:], v=prm.value: self._set_model_parameter(n, v))
                if not ok:
                    return SetParametersResult(successful=False,
                                               reason=f"parameter {name!r}: {text}")
                continue
            reason = params.check(name, prm.value)
            if reason:
                return SetParametersResult(successful=False, reason=reason)
        return SetParametersResult(successful=True)

    def _apply_parameters(self, changes):
        for prm in changes:
            if prm.name in ("real_time_factor", "input_timeout"):
                setattr(self, prm.name, float(prm.value))
            elif prm.name == "stale_input_policy":
                self.stale_policy = prm.value
            elif prm.name == "state_name":
                self.state_name = prm.value
        self.wake.set()

    def _set_model_parameter(self, name, value):
        self.sim.set_parameter(name, value)
        self.after_state_change()
        return True, f"parameter {name!r} set to {value!r}"

    def _publish_diagnostics(self):
        try:
            self._diag_pub.publish(self.telemetry.diagnostics(self))
        except Exception as exc:  # noqa: BLE001 - telemetry must never stop the node
            self.throttle("error", "diagnostics", f"diagnostics failed: {exc!r}")

    def diagnostics_summary(self):
        return self.telemetry.summary()

    # ------------------------------------------------------------------ simulation thread
    def drain(self):
        """Apply queued commands and run queued jobs, in arrival order."""
        jobs = self.jobs
        while jobs:
            item = jobs.popleft()
            if item[0] == "job":
                item[1]()
                continue
            _, values, stamp, received, topic = item
            if not self.commands.apply(values, stamp, topic):
                continue
            self.last_command = received
            if self.stale:
                self.stale = False
                self.get_logger().info(f"commands resumed at t={self.sim.time!r}")
            if self._inline:
                self.command_ready = True
                self.command_wall = received
                if self.pub_wall is not None and received > self.pub_wall:
                    self.telemetry.samples["round_trip"].append(received - self.pub_wall)
                self.pub_wall = None

    def check_stale(self, now):
        """True when inputs are stale; applies the zero policy once and logs transitions."""
        if self.input_timeout <= 0.0 or now - self.last_command <= self.input_timeout:
            return False
        if not self.stale:
            self.stale = True
            self.get_logger().warning(
                f"no command for {now - self.last_command:.3f} s (input_timeout "
                f"{self.input_timeout} s) at t={self.sim.time!r}: policy {self.stale_policy!r}")
            if self.stale_policy == "zero" and self.joints.commanded:
                self.sim.set_inputs({n: 0.0 for n in self.joints.commanded})
        return True

    def at_end(self):
        return self.sim.time + 0.5 * self.step > self.end_time

    def runnable(self):
        if self.paused or self.step_error is not None:
            return False
        if self.at_end():
            if not self._at_end_logged:
                self._at_end_logged = True
                self.get_logger().info(f"end_time reached at t={self.sim.time!r}")
                self.publish_state()
                if self.config["shutdown_at_end"]:
                    self.out.wait_for_acks(1.0)
                    self._finish()
            return False
        self._at_end_logged = False
        return True

    def advance(self):
        """One communication step with the held inputs (errors pause the simulation)."""
        sim = self.sim
        try:
            sim.do_step(sim.time, self.step)
        except Exception as exc:  # noqa: BLE001 - cosim leaves the state as before the call
            self.step_error = exc
            self.get_logger().error(
                f"step at t={sim.time!r} failed, simulation paused (state unchanged; "
                f"resume_simulation to retry): {type(exc).__name__}: {exc}")
            return False
        self.telemetry.steps_window += 1
        self.command_ready = False
        return True

    def prepare_state(self, step=False):
        self.out.prepare(self.sim, step)

    def send_state(self, step=False):
        """Publish the prepared state (``step``: a paced step, see ``state_publish_rate``)."""
        if not step and not self.out.states_ready:
            self.out.prepare(self.sim)  # skipped by a decimated step: fill it now
        if self.out.send(step) and self.frames is not None:
            self.frames.publish(self.sim)
        self.last_pub = self.last_clock_pub = self.pub_wall = time.monotonic()
        if self._inline:
            self.commands.published(time_to_ns(self.sim.time))

    def publish_state(self, step=False):
        self.prepare_state(step)
        self.send_state(step)

    def idle_clock(self, now):
        """Paused or idle: republish /clock (the frozen time) for late joiners."""
        period = self.config["paused_clock_period"]
        if period > 0.0 and now - self.last_clock_pub >= period:
            self.out.send_clock()
            self.last_clock_pub = now

    def peer_count(self):
        """Matched peers of the state topics and commands (a new one: republish)."""
        return self.out.subscriber_count() + sum(s.get_publisher_count() for s in self._cmd_subs)

    def lock_step_once(self):
        """Apply queued work; take one step if the command for this step is in.
        Caller holds ``sim_lock``.  True when it stepped (or tried to)."""
        self.drain()
        if self.pending_steps or not (self.command_ready and self.runnable()):
            return False
        if self.advance():
            self.publish_state()
            if self.command_wall is not None:
                self.telemetry.samples["turnaround"].append(self.last_pub - self.command_wall)
                self.command_wall = None
        return True

    def after_state_change(self):
        """After reset, load or a parameter change: forget stamps, publish the state."""
        self.command_ready = False
        self.step_error = None
        self.pending_steps = 0
        self.commands.forget()
        self.publish_state()
        self.pub_wall = None


DEFAULT_CONFIG = "pendulum_real_time"   # what plain `cosim-ros` runs

HELP = ("cosim-ros: the cosim plant as a ROS 2 node (topics /clock, joint_states, outputs, "
        "command, joint_command, /diagnostics;\nservices reset_simulation, pause_simulation, "
        "resume_simulation, step_simulation, save_state, load_state;\nstep requests step_n "
        "(std_msgs/UInt32), run_until (std_msgs/Float64)).  SIGINT/SIGTERM: clean exit 0.\n\n"
        "-p config:=NAME   a shipped parameter file by name (`cosim scenarios` lists them), read "
        "first:\n                  later -p and --params-file override it.  No parameters at "
        f"all: config {DEFAULT_CONFIG}.")


def _make(context, description=None):
    overrides = [] if description is None else [Parameter("robot_description", value=description)]
    node = SimulationNode(context=context, parameter_overrides=overrides)
    # the simulation thread gets the GIL back quickly from the executor thread
    sys.setswitchinterval(5e-5 if node.mode == "real_time" else 2e-4)
    if node.mode == "real_time":
        import gc
        gc.collect()
        gc.freeze()  # long-lived objects out of the collector's way
    if node.config["sched_priority"] > 0:  # inherited by the simulation thread
        set_real_time_priority(node.config["sched_priority"], node.get_logger())
    return node


def main(args=None):
    """Console script ``cosim-ros``: ``cosim-ros --ros-args -p config:=NAME`` (a shipped
    parameter file) or ``--params-file plant.yaml``; no parameters: ``DEFAULT_CONFIG``.
    A ``-p robot_description:=TEXT`` is taken off the command line before rcl parses it
    (ros_nodes.robot): rcl reads a ``-p`` value as YAML, which a URDF in general is not."""
    argv, description = robot_io.take_description_argument(list(sys.argv if args is None else args))
    make = _make if description is None else functools.partial(_make, description=description)
    return process.run(make, node_name="cosim_sim", argv=argv, prog="cosim-ros",
                       help_text=params.help_text("cosim-ros", HELP),
                       default_config=DEFAULT_CONFIG if description is None else None)


if __name__ == "__main__":
    sys.exit(main())
