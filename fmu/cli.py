"""``cosim fmu build``: the command-line face of :func:`fmu.builder.build_fmu`.

Loaded by ``cosim`` through the ``cosim.commands`` entry point; bad input
raises :mod:`cosim.errors` exceptions, which the ``cosim`` CLI prints as one
``cosim: error: ...`` line with exit code 2.
"""
import argparse


def _parse_blocks(items):
    import json

    from cosim.errors import InvalidInputError

    blocks = []
    for item in items or ():
        try:
            spec = json.loads(item)
        except ValueError as exc:
            raise InvalidInputError(f"--block expects a JSON object, got {item!r}: {exc}") from None
        if not isinstance(spec, dict):
            raise InvalidInputError(f"--block expects a JSON object, got {item!r}")
        blocks.append(spec)
    return blocks


def _cmd_build(args):
    # sys.path is left as it is: a user model package.module:Class must be importable
    # (installed, or its folder on PYTHONPATH); the current folder is not added (a
    # scenario file there would otherwise make any module in it run at build time)
    from cosim._version import install_hint
    from cosim.options import parse_assignments
    from cosim.errors import CosimError

    try:
        from .builder import build_fmu
    except ImportError as exc:
        from cosim.extras import missing_extra
        raise CosimError(missing_extra(exc, "cosim fmu build") or
                         f"cosim fmu build needs pythonfmu ({install_hint('fmu')}): {exc}") from None

    from cosim.options import check_output_file
    check_output_file(args.output, "--output")  # before the build (issue 14)
    params = parse_assignments(args.param, "--param")
    options = parse_assignments(args.option, "--option")
    if args.step is not None and args.comm_step is not None:
        from cosim.options import check_step_against_grid
        check_step_against_grid(args.step, args.comm_step, h_name="--step",
                                grid_name="the DefaultExperiment step --comm-step",
                                fix="an importer using that step gets these steps")
    path = build_fmu(args.target, args.output, method=args.method, rtol=args.rtol, atol=args.atol,
                     step=args.step, params=params, method_options=options, name=args.name,
                     stop_time=args.stop_time, step_size=args.comm_step,
                     blocks=_parse_blocks(args.block), connections=args.connect or None,
                     backend=args.backend, position_limits=args.position_limits)
    print(f"wrote {path}")
    return 0


def register(subparsers):
    from cosim._version import install_hint

    p = subparsers.add_parser("fmu", help="FMI 2.0 co-simulation FMUs (build)")
    sub = p.add_subparsers(dest="fmu_command", metavar="FMU_COMMAND")
    sub.required = True
    b = sub.add_parser(
        "build", help="build an FMI 2.0 Co-Simulation FMU of a model or a scenario",
        description="Build an FMI 2.0 Co-Simulation FMU (linux64) of a library model, a user "
                    "model package.module:ClassName (importable: installed or on PYTHONPATH; "
                    "the current folder is not searched), a robot's URDF file (its text is "
                    f"bundled; the importer then needs pinocchio: {install_hint('robots')}), "
                    "or a scenario file (plant + discrete blocks; it names library models and "
                    "blocks only). "
                    "Needs a C++17 compiler once (the FMU binary is cached). The FMU carries a "
                    "private copy of the cosim core; the importer needs Python >= 3.11 with numpy "
                    "and scipy (a host without Python gets the Python that builds the FMU, or "
                    "$COSIM_FMU_LIBPYTHON); its documentation/index.html and modelDescription.xml "
                    "name everything it needs.")
    b.add_argument("target", metavar="MODEL|ROBOT.urdf|SCENARIO.yaml",
                   help="library model name (see `cosim models`), package.module:ClassName, a "
                        "URDF file, or a scenario file")
    b.add_argument("-o", "--output", metavar="FILE.fmu", default=None,
                   help="FMU file to write (default: <Identifier>.fmu)")
    b.add_argument("--method", default=None,
                   help="integration method (see `cosim methods`; default: the scenario's, else "
                        "the rule for a driven plant: dopri5 for multibody models "
                        "(with --step: rk4 where it is stable at that step, else generalized-alpha), "
                        "state-transition for lti, dopri5 for "
                        "other first-order models)")
    b.add_argument("--rtol", type=float, default=None, help="relative tolerance (default 1e-6)")
    b.add_argument("--atol", type=float, default=None, help="absolute tolerance (default 1e-8)")
    b.add_argument("--step", type=float, default=None, metavar="H",
                   help="fixed integration step [s] (default: adaptive)")
    b.add_argument("--param", action="append", metavar="NAME=VALUE",
                   help="model parameter start value (repeatable)")
    b.add_argument("--option", action="append", metavar="NAME=VALUE",
                   help="method option, e.g. rho_inf=0.8 for generalized-alpha (repeatable; numeric ones become fixed "
                        "parameters solver.NAME)")
    b.add_argument("--name", default=None, metavar="IDENTIFIER",
                   help="FMU model identifier (C identifier; default: the model class name)")
    b.add_argument("--block", action="append", metavar="JSON",
                   help='discrete block in the model FMU, e.g. \'{"type": "pid", "name": "pd", '
                        '"sample_time": 0.01, "kp": 40, "kd": 8}\' (repeatable)')
    b.add_argument("--connect", action="append", metavar="SRC->DST",
                   help="signal connection for --block, e.g. 'angle -> pd.measurement' (repeatable)")
    b.add_argument("--backend", choices=("auto", "numba", "python"), default=None,
                   help="auto (default): compiled where numba is importable in the host, else the "
                        "python backend (said in the FMI log); numba: the host must have numba; "
                        "python: never compiles")
    b.add_argument("--stop-time", type=float, default=None, help="DefaultExperiment stopTime [s]")
    b.add_argument("--comm-step", type=float, default=None,
                   help="DefaultExperiment stepSize [s] (communication step)")
    b.add_argument("--position-limits", action=argparse.BooleanOptionalAction, default=None,
                   help="robot from URDF: the joints' position limits as stops that hold (default: "
                        "on; --no-position-limits: the joints move past them)")
    b.set_defaults(func=_cmd_build)
