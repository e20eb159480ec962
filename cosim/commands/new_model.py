"""``cosim new-model NAME [-o FILE]``: write a commented template model.

The template is a working model (a planar pendulum in Cartesian coordinates,
index 3) written from M, Q and C only, with the protocol's optional parts
shown as comments: edit it into your mechanism, then ``cosim check
FILE.py:Class`` and ``cosim simulate FILE.py:Class``.
"""
import os
import re

from ..errors import InvalidInputError

TEMPLATE = '''"""{title}: a cosim multibody model (written by `cosim new-model {name}`).

Edit the equations below into your mechanism.  Check it with
    cosim check {file}:{cls}
and run it with
    cosim simulate {file}:{cls} --method generalized-alpha
Protocol: cosim/models/base.py (MultibodyModel); units are SI.
"""
import numpy as np

from cosim.models import MultibodyModel, Parameter, Signal


class {cls}(MultibodyModel):
    """A point mass on a massless rod (planar pendulum) in Cartesian coordinates:
    q = (x, y), one holonomic constraint x² + y² − l² = 0 (an index-3 DAE)."""

    name = "{name}"
    description = "template: planar pendulum in Cartesian coordinates"
    coordinates = ("x", "y")                 # generalized coordinates q (n = 2)
    constraint_names = ("rod_length",)       # holonomic constraints C(q, t) = 0 (m = 1)
    parameters = (                           # name, default, unit, description
        Parameter("m", 1.0, "kg", "mass"),
        Parameter("l", 1.0, "m", "rod length"),
        Parameter("g", 9.81, "m/s2", "gravity along -y"),
        Parameter("phi0", 0.5, "rad", "initial angle from the downward vertical"),
    )
    inputs = (Signal("fx", "N", "horizontal force on the mass"),)      # u, held between steps
    outputs = (Signal("angle", "rad", "angle from the downward vertical"),)
    positive_parameters = ("m", "l")         # refused outside [1e-12, 1e12]
    constant_mass = True                     # M does not depend on q: cheaper Newton matrices
    default_t_end = 5.0                      # `cosim simulate` runs this long without --t-end
    conservative = True                      # no damping/driving at zero inputs: `cosim check` checks dE/dt = 0

    def initial_state(self):
        """(q0, v0): here at rest at angle phi0.  An inconsistent start is repaired by the
        initial-condition analysis, with a warning and `Simulation.ic_report`."""
        p = self.params
        q0 = p["l"] * np.array([np.sin(p["phi0"]), -np.cos(p["phi0"])])
        return q0, np.zeros(2)

    def mass(self, q, t):
        """M(q, t), n x n, symmetric positive definite."""
        return self.params["m"] * np.eye(2)

    def forces(self, q, v, t, u):
        """Q(q, v, t, u), n: applied forces including quadratic-velocity terms."""
        p = self.params
        return np.array([u[0], -p["m"] * p["g"]])

    def constraints(self, q, t):
        """C(q, t), m: position-level constraints."""
        return np.array([q[0] ** 2 + q[1] ** 2 - self.params["l"] ** 2])

    # Optional: cosim computes them when absent, exactly (complex step / hyper-dual
    # numbers through this numpy code) or by differences where the code does not allow
    # it (float() casts, np.zeros filled in place); `cosim simulate --verbose` says which.
    # Give them for speed; `cosim check` then compares them against its own:
    # def constraint_jacobian(self, q, t):      # C_q, m x n
    #     return np.array([[2.0 * q[0], 2.0 * q[1]]])
    # def constraint_dt(self, q, t):            # C_t, m
    #     return np.zeros(1)
    # def gamma(self, q, v, t):                 # C_q q'' = gamma = -(C_q v)_q v - 2 C_qt v - C_tt
    #     return np.array([-2.0 * (v[0] ** 2 + v[1] ** 2)])
    # def force_jacobians(self, q, v, t, u):    # (Q_q, Q_v), n x n each
    #     return np.zeros((2, 2)), np.zeros((2, 2))

    def potential_energy(self, q, t=0.0):
        """Optional: lets `cosim simulate` report the energy drift of an unforced run."""
        return self.params["m"] * self.params["g"] * q[1]

    def outputs_qv(self, t, q, v, u):
        """Outputs from (q, v), in the order of `outputs`."""
        return np.array([np.arctan2(q[0], -q[1])])
'''

_NAME = re.compile(r"[a-z][a-z0-9_]{0,63}\Z")


def class_name(name):
    return "".join(part.capitalize() for part in name.split("_") if part)


def template(name, path):
    """The template's text for model ``name`` saved as ``path``."""
    if not isinstance(name, str) or not _NAME.match(name):
        raise InvalidInputError(f"model name {name!r} must be lower case letters, digits and '_', "
                                f"starting with a letter (at most 64 characters)")
    return TEMPLATE.format(name=name, cls=class_name(name), file=path,
                           title=name.replace("_", " ").capitalize())


def write_template(name, path=None):
    path = path or f"{name}.py"
    from ..options import check_output_file
    check_output_file(path, "--output")  # folder exists and is writable; not a directory
    if not path.endswith(".py"):
        raise InvalidInputError(f"--output {path!r} must be a .py file")
    text = template(name, path)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)  # never overwrite
    except FileExistsError:
        raise InvalidInputError(f"{path!r} exists; choose another name or -o FILE") from None
    except OSError as exc:  # a missing or unwritable folder, a directory given as the file
        raise InvalidInputError(f"cannot write {path!r}: {exc.strerror}") from None
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        fh.write(text)
    return path, class_name(name)


def _cmd(args):
    path, cls = write_template(args.name, args.output)
    print(f"wrote {path} (class {cls}); next: cosim check {path}:{cls}")
    return 0


def register(sub):
    p = sub.add_parser("new-model", help="write a commented template model (a working pendulum) to edit")
    p.add_argument("name", help="model name: lower case, digits, '_' (the class is its CamelCase)")
    p.add_argument("-o", "--output", metavar="FILE.py", help="file to write (default NAME.py; never overwritten)")
    p.set_defaults(func=_cmd)
