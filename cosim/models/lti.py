"""Linear time-invariant state-space model  x' = A x + B u,  y = C x + D u.

The matrices are configuration, not scalar parameters: pass them to the
constructor (or to ``set_parameter``) as nested lists, numpy arrays or
strings — Python/JSON style ``"[[0,1],[-4,-0.4]]"`` or MATLAB style
``"[0 1; -4 -0.4]"``.  This is how the FMU builder and the CLI forward
``--param A=...``.  Shapes are checked: A (n,n), B (n,m), C (p,n), D (p,m),
x0 (n); a 1-D B of length n is a column, a 1-D C of length n a row.
Names of states/inputs/outputs are configurable by lists (or comma
separated strings).  ``parameters`` stays empty (the Model protocol keeps
scalar parameters only).

Default: damped mass-spring, m = 1 kg, k = 4 N/m, c = 0.4 N·s/m, states
(position, velocity), input "force", outputs "position", "velocity",
x0 = (1, 0).  Pieces not given are taken from this default plant when A is
2×2 (and the sizes fit), else: B = no inputs (n×0), C = I, D = 0, x0 = 0,
names x1.., u1.., y1...  So ``LTIModel(A=...)`` with a 2×2 A equals
``LTIModel()`` followed by ``set_parameter("A", ...)``.  ``set_parameter``
validates the whole new configuration (all or nothing), so a change of the
state dimension needs the constructor (or consistent B, C, D, x0 first).

The stepper's exact zero-order-hold method (seed 001 §3.5) reads
``self.A, self.B, self.C, self.D``.
"""
from __future__ import annotations

import ast
import re

import numpy as np

from ..errors import InvalidInputError, UnknownParameterError
from .base import FirstOrderModel, Signal

_DEFAULT = {
    "A": [[0.0, 1.0], [-4.0, -0.4]],
    "B": [[0.0], [1.0]],
    "C": [[1.0, 0.0], [0.0, 1.0]],
    "D": [[0.0], [0.0]],
    "x0": [1.0, 0.0],
}
_DEFAULT_NAMES = {
    "state_names": ("position", "velocity"),
    "input_names": ("force",),
    "output_names": ("position", "velocity"),
}
MATRIX_KEYS = ("A", "B", "C", "D", "x0")
NAME_KEYS = ("state_names", "input_names", "output_names")


def parse_matrix(name, value, ndim=2):
    """A float array from a list/array/number or a string; clear errors."""
    if isinstance(value, str):
        text = value.strip()
        try:
            value = ast.literal_eval(text)
        except (ValueError, SyntaxError):
            value = _parse_matlab(name, text)
    try:
        arr = np.array(value, dtype=float)
    except (TypeError, ValueError):
        raise InvalidInputError(f"matrix {name} must be numeric, got {value!r}") from None
    if arr.ndim > ndim:
        raise InvalidInputError(f"matrix {name} must have at most {ndim} dimensions, got shape {arr.shape}")
    bad = ~np.isfinite(arr)
    if bad.any():
        idx = tuple(int(i) for i in np.argwhere(bad)[0])
        raise InvalidInputError(f"matrix {name}{list(idx)} must be finite, got {arr[idx]!r}")
    return arr


def _parse_matlab(name, text):
    """'[0 1; -4 -0.4]' -> nested list."""
    body = text.strip()
    if body.startswith("[") and body.endswith("]"):
        body = body[1:-1]
    rows = [r for r in body.split(";") if r.strip()]
    out = []
    for row in rows:
        items = [x for x in re.split(r"[,\s]+", row.strip()) if x]
        try:
            out.append([float(x) for x in items])
        except ValueError:
            raise InvalidInputError(f"matrix {name} cannot be parsed: {text!r}") from None
    if len(out) == 1:
        return out[0]
    if len({len(r) for r in out}) != 1:
        raise InvalidInputError(f"matrix {name} has rows of different length: {text!r}")
    return out


def _parse_names(key, value, size, prefix):
    if value is None:
        return tuple(f"{prefix}{i + 1}" for i in range(size))
    if isinstance(value, str):
        value = [s.strip() for s in value.strip("[]").replace("'", "").replace('"', "").split(",")
                 if s.strip()]
    names = tuple(str(v) for v in value)
    if len(names) != size:
        raise InvalidInputError(f"{key} must list {size} names, got {len(names)}: {list(names)}")
    if len(set(names)) != len(names):
        raise InvalidInputError(f"{key} contains duplicates: {list(names)}")
    return names


class LTIModel(FirstOrderModel):
    name = "lti"
    description = "linear state-space model x' = Ax + Bu, y = Cx + Du (seed 001 §3.5)"
    parameters = ()
    # keyword arguments that configure it instead of parameters (cosim models lti)
    configuration_keys = MATRIX_KEYS + NAME_KEYS

    def __init__(self, A=None, B=None, C=None, D=None, x0=None, state_names=None,
                 input_names=None, output_names=None, **params):
        if params:
            key = sorted(params)[0]
            raise UnknownParameterError(
                f"model 'lti' has no parameter {key!r} (configuration: "
                f"{', '.join(MATRIX_KEYS + NAME_KEYS)})")
        self.params = {}
        self._config = {"A": A, "B": B, "C": C, "D": D, "x0": x0,
                        "state_names": state_names, "input_names": input_names,
                        "output_names": output_names}
        self._apply(self._config)

    # -- configuration -------------------------------------------------------------
    def _apply(self, cfg):
        """Validate the whole configuration, then commit it (all or nothing)."""
        A = parse_matrix("A", _DEFAULT["A"] if cfg["A"] is None else cfg["A"])
        if A.ndim == 0:
            A = A.reshape(1, 1)
        if A.ndim != 2 or A.shape[0] != A.shape[1] or A.shape[0] == 0:
            raise InvalidInputError(f"matrix A must be square (n,n) with n >= 1, got shape {A.shape}")
        n = A.shape[0]
        # missing pieces come from the default plant when it has the same size
        use_default = n == len(_DEFAULT["x0"])

        def default(key):
            return _DEFAULT[key] if use_default else None

        B = cfg["B"] if cfg["B"] is not None else default("B")
        B = np.zeros((n, 0)) if B is None else parse_matrix("B", B)
        if B.ndim == 0:
            B = B.reshape(1, 1)
        if B.ndim == 1:
            B = B.reshape(n, 1) if B.size == n else B.reshape(1, -1)
        if B.shape[0] != n:
            raise InvalidInputError(f"matrix B must have {n} rows (A is {n}x{n}), got shape {B.shape}")
        m = B.shape[1]

        C = cfg["C"] if cfg["C"] is not None else default("C")
        C = np.eye(n) if C is None else parse_matrix("C", C)
        if C.ndim == 0:
            C = C.reshape(1, 1)
        if C.ndim == 1:
            C = C.reshape(1, -1)
        if C.shape[1] != n:
            raise InvalidInputError(f"matrix C must have {n} columns (A is {n}x{n}), got shape {C.shape}")
        p = C.shape[0]

        D = cfg["D"] if cfg["D"] is not None else default("D")
        D = np.zeros((p, m)) if D is None else parse_matrix("D", D)
        if D.ndim == 0:
            D = D.reshape(1, 1)
        if D.ndim == 1:
            D = D.reshape(p, m) if D.size == p * m else D.reshape(1, -1)
        if D.shape != (p, m):
            raise InvalidInputError(f"matrix D must have shape {(p, m)} (C is {p}x{n}, B is {n}x{m}), "
                                    f"got shape {D.shape}")

        x0 = cfg["x0"] if cfg["x0"] is not None else default("x0")
        x0 = np.zeros(n) if x0 is None else parse_matrix("x0", x0, ndim=2).reshape(-1)
        if x0.size != n:
            raise InvalidInputError(f"x0 must have length {n}, got {x0.size}")

        names = {}
        for key, size, prefix in (("state_names", n, "x"), ("input_names", m, "u"),
                                  ("output_names", p, "y")):
            value = cfg[key]
            if value is None and use_default and len(_DEFAULT_NAMES[key]) == size:
                value = _DEFAULT_NAMES[key]
            names[key] = _parse_names(key, value, size, prefix)

        # commit
        self.A, self.B, self.C, self.D, self.x0 = A, B, C, D, x0
        self._config = dict(cfg)
        self.states = names["state_names"]
        self.inputs = tuple(Signal(s) for s in names["input_names"])
        self.outputs = tuple(Signal(s) for s in names["output_names"])
        self._has_input = m > 0

    def set_parameter(self, key, value):
        """Change one matrix / name list (e.g. ``set_parameter("A", "[[0,1],[-9,0]]")``);
        on bad input raises and leaves the model unchanged."""
        if key not in self._config:
            raise UnknownParameterError(
                f"model 'lti' has no parameter {key!r} (configuration: "
                f"{', '.join(MATRIX_KEYS + NAME_KEYS)})")
        cfg = dict(self._config)
        cfg[key] = value
        self._apply(cfg)

    @property
    def configuration(self):
        """The matrices and names as plain lists (serialisable)."""
        return {"A": self.A.tolist(), "B": self.B.tolist(), "C": self.C.tolist(),
                "D": self.D.tolist(), "x0": self.x0.tolist(),
                "state_names": list(self.states), "input_names": list(self.input_names),
                "output_names": list(self.output_names)}

    # -- model protocol ---------------------------------------------------------------
    def initial_state(self):
        return self.x0.copy()

    def rhs(self, t, x, u):
        if self._has_input:
            return self.A @ x + self.B @ u
        return self.A @ x

    def rhs_jacobian(self, t, x, u):
        return self.A

    def output_values(self, t, y, u):
        if self._has_input:
            return self.C @ y + self.D @ u
        return self.C @ y
