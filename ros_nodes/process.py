"""Process life cycle of a node run as a program: ``--help``, SIGINT/SIGTERM,
spinning, exit status.  Light on imports: ``install_signal_handlers`` runs
before rclpy and cosim are imported, so a signal during start-up ends the
process quietly too.

Exit status: 0 after SIGINT or SIGTERM (in any phase: start-up, spinning,
paused, a long step) or when the node finishes (``shutdown_at_end``); 1 when
its simulation thread died; 2 for a configuration error or a missing ``ros``
extra, printed as one line.

Configuration by name: ``--ros-args -p config:=NAME`` reads the shipped
parameter file ``NAME`` (:func:`cosim.shipped.ros_config`, the files ``cosim
scenarios`` lists) as if it were given first with ``--params-file``, so every
other ``-p`` and ``--params-file`` overrides it.  A node run with no parameters
at all runs its default configuration (the plant: ``pendulum_real_time``) and
says so.
Shutdown is bounded: the main loop wakes at least every 0.1 s, the simulation
thread gets 1 s to stop, and a thread stuck in a long step is abandoned
(the process ends with ``os._exit`` after rclpy is shut down).
"""
from __future__ import annotations

import fnmatch
import signal
import sys

SIGNALS = (signal.SIGINT, signal.SIGTERM)
SPIN_PERIOD = 0.1   # s: the main loop checks for a signal at least this often
THREAD_GRACE = 1.0  # s: time the simulation thread gets to stop


class Shutdown(SystemExit):
    """Raised by the signal handler during start-up: unwinds quietly (exit 0)."""

    def __init__(self, signum):
        super().__init__(0)
        self.signum = signum


class _State:
    phase = "startup"   # startup -> running -> stopping
    signum = None
    hooks = []          # callables run (in the handler) when a signal arrives


def _handler(signum, frame):
    if _State.signum is None:
        _State.signum = signum
    for hook in list(_State.hooks):
        try:
            hook()
        except Exception:  # noqa: BLE001 - a handler must not raise
            pass
    # unwind start-up at once, unless the signal interrupted the import machinery (a
    # weakref callback there prints "Exception ignored" and swallows it): then the
    # recorded signum ends start-up at its next checkpoint instead
    if _State.phase == "startup" and not (frame is not None
                                          and frame.f_code.co_filename.startswith("<frozen")):
        raise Shutdown(signum)


def _checkpoint():
    """A signal recorded while the import machinery ran ends start-up here."""
    if _State.signum is not None:
        raise Shutdown(_State.signum)


def install_signal_handlers():
    """Own SIGINT/SIGTERM (rclpy's handlers are not installed)."""
    for s in SIGNALS:
        signal.signal(s, _handler)


class ArgumentError(Exception):
    """Bad command-line arguments, found before rclpy starts (one line, exit 2)."""


def require_ros(prog):
    """rclpy is importable, else one line naming the ``ros`` extra and exit 2 (before
    any node module imports rclpy at its top)."""
    try:
        import rclpy  # noqa: F401
    except ImportError as exc:
        from cosim.extras import message
        print(f"{prog}: error: {message(exc.name or 'rclpy', 'the ROS 2 node', 'ros')}",
              file=sys.stderr)
        raise SystemExit(2) from None


def _ros_args(argv):
    """Index of the first ``--ros-args`` (None: no ROS arguments)."""
    return argv.index("--ros-args") if "--ros-args" in argv else None


def has_parameters(argv):
    """Any ``--params-file``, ``-p``/``--param`` among the arguments."""
    return any(a in ("--params-file", "-p", "--param") for a in argv[1:])


def expand_config(argv, default=None):
    """(argv, name, path): ``-p config:=NAME`` replaced by ``--params-file PATH`` of the
    shipped file, placed right after ``--ros-args`` (the lowest precedence: later
    ``-p`` and ``--params-file`` win).  Without any parameter, ``default`` (if given)
    is the config.  A name that is not shipped raises :class:`ArgumentError`."""
    argv, name, i = list(argv), None, 1
    while i < len(argv) - 1:
        if argv[i] in ("-p", "--param") and argv[i + 1].startswith("config:="):
            name = argv[i + 1].split(":=", 1)[1]
            del argv[i:i + 2]
        else:
            i += 1
    if name is None and default is not None and not has_parameters(argv):
        name = default
    if name is None:
        return argv, None, None
    from cosim.shipped import ros_config, ros_config_names
    path = ros_config(name)
    if path is None:
        raise ArgumentError(f"-p config:={name}: no shipped parameter file {name!r} (shipped: "
                            f"{', '.join(ros_config_names())}); a file of your own: "
                            f"--params-file FILE")
    at = _ros_args(argv)
    if at is None:
        argv.append("--ros-args")
        at = len(argv) - 1
    argv[at + 1:at + 1] = ["--params-file", str(path)]
    return argv, name, path


def wants_help(argv):
    """``--help``/``-h`` before ``--ros-args`` (after it, the arguments are ROS's)."""
    args = list(argv[1:])
    if "--ros-args" in args:
        args = args[:args.index("--ros-args")]
    return "--help" in args or "-h" in args


def params_files(argv):
    """Paths given with ``--params-file`` in the ROS arguments."""
    out, args = [], list(argv)
    for i, a in enumerate(args[:-1]):
        if a == "--params-file":
            out.append(args[i + 1])
    return out


def check_params_file_sections(argv, fully_qualified_name):
    """Each ``--params-file`` must have a section that applies to this node
    (by name, namespace or wildcard); a file for another node is an error
    instead of silently running the defaults.  Returns an error text or None."""
    from cosim.errors import SpecError
    from cosim.safe_yaml import read_path
    for path in params_files(argv):
        try:  # bounded: size, depth, alias expansion (cosim.safe_yaml)
            doc = read_path(path, f"parameter file {path!r}")
        except OSError as exc:
            from cosim.shipped import ros_config_names
            return (f"cannot read parameter file {path!r}: {exc.strerror} (a shipped file by "
                    f"name: -p config:=NAME, NAME one of {', '.join(ros_config_names())})")
        except SpecError as exc:
            return str(exc)
        keys = [str(k) for k in (doc or {})] if isinstance(doc, dict) else []
        if not any(_section_applies(k, fully_qualified_name) for k in keys):
            return (f"parameter file {path!r} has no section for node {fully_qualified_name!r} "
                    f"(sections: {', '.join(keys) or 'none'})")
    return None


def _fully_qualified_name(argv, node_name):
    """The node's name after ``-r __node:=`` / ``-r __ns:=`` remapping in ``argv``."""
    name, ns = node_name, "/"
    for arg in argv:
        if arg.startswith("__node:=") or arg.startswith("__name:="):
            name = arg.split(":=", 1)[1]
        elif arg.startswith("__ns:="):
            ns = arg.split(":=", 1)[1] or "/"
    return ns.rstrip("/") + "/" + name


def _section_applies(key, fqn):
    key = key if key.startswith("/") else "/" + key
    if key == "/**":
        return True
    pattern = key.replace("/**", "/*")
    return fnmatch.fnmatchcase(fqn, pattern) or fnmatch.fnmatchcase(fqn.lstrip("/"), key.lstrip("/"))


def run(make_node, *, node_name, help_text, argv=None, prog=None, default_config=None):
    """Run one node as a program; returns the exit status.

    ``make_node(context)`` builds the node; a node with ``start()``/``stop(timeout)``
    and a ``finished`` future (the plant) is started after it is added to the
    executor and stopped on the way out.  ``default_config``: the shipped parameter
    file run when no parameter is given at all."""
    argv = list(sys.argv if argv is None else argv)
    prog = prog or node_name
    if wants_help(argv):
        try:
            print(help_text, flush=True)
        except BrokenPipeError:  # `cosim-ros --help | head`: the reader left, not an error
            import os as os_  # (run() imports os locally further down)
            os_.dup2(os_.open(os_.devnull, os_.O_WRONLY), sys.stdout.fileno())
        return 0
    install_signal_handlers()
    try:  # arguments checked before rclpy starts: one line each, exit 2
        given = has_parameters(argv)
        argv, config, config_path = expand_config(argv, default_config)
        defaulted = config is not None and not given
        error = check_params_file_sections(argv, _fully_qualified_name(argv, node_name))
        if error:
            raise ArgumentError(error)
    except ArgumentError as exc:
        print(f"{prog}: error: {exc}", file=sys.stderr, flush=True)
        return 2
    node = executor = context = None
    stopped_cleanly = True
    try:
        import rclpy
        from rclpy.exceptions import ParameterException
        from rclpy.executors import SingleThreadedExecutor
        from rclpy.signals import SignalHandlerOptions

        from cosim.errors import CosimError

        from .common import ConfigurationError
        _checkpoint()
        context = rclpy.Context()
        try:
            rclpy.init(args=argv, context=context, signal_handler_options=SignalHandlerOptions.NO)
        except Exception as exc:  # noqa: BLE001 - rclpy's RCLError: malformed ROS arguments
            context = None
            text = str(exc).split(", at /")[0]
            print(f"{prog}: error: {text} (rcl reads every -p value as YAML; give such a value "
                  f"in a --params-file)", file=sys.stderr, flush=True)
            return 2
        logger = rclpy.logging.get_logger(node_name)
        if config is not None:
            from cosim.shipped import file_summary
            how = ("no parameters given: running the shipped configuration" if defaulted
                   else "shipped configuration")
            logger.info(f"{how} {config!r}: {file_summary(config_path)} ({config_path}; "
                        f"`{prog} --help` lists the parameters)")
        try:
            _checkpoint()
            node = make_node(context)
        except (CosimError, ConfigurationError, ValueError, ParameterException) as exc:
            logger.fatal(f"cannot configure the node: {exc}")
            return 2
        _checkpoint()
        executor = SingleThreadedExecutor(context=context)
        executor.add_node(node)
        stop = getattr(node, "request_stop", None)
        if stop is not None:
            _State.hooks.append(stop)
        if hasattr(node, "start"):
            node.start()
        node.get_logger().info(f"ready ({getattr(node, 'summary', 'running')})")
        finished = getattr(node, "finished", None)
        _State.phase = "running"
        if _State.signum is not None:
            return 0
        while _State.signum is None and context.ok() and not (finished and finished.done()):
            executor.spin_once(timeout_sec=SPIN_PERIOD)
        if _State.signum is None and finished is not None and finished.done():
            return int(finished.result() or 0)  # the node's own end: its status
        return 0
    except Shutdown:
        return 0
    finally:
        _State.phase = "stopping"
        if node is not None and hasattr(node, "stop"):
            stopped_cleanly = _quietly(lambda: node.stop(THREAD_GRACE), True)
        if executor is not None:
            _quietly(lambda: executor.shutdown(timeout_sec=0.5))
        if node is not None:
            _quietly(node.destroy_node)
        if context is not None:
            _quietly(lambda: rclpy.try_shutdown(context=context))
        if stopped_cleanly is False:  # a step still running in the simulation thread
            sys.stdout.flush()
            sys.stderr.flush()
            import os
            os._exit(0)


def _quietly(fn, default=None):
    try:
        return fn()
    except Exception:  # noqa: BLE001 - shutting down: nothing left to report to
        return default
