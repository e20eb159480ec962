"""The fields of a method's state declaration (:mod:`cosim.integrators.state_decl`):
the kinds of value a field holds, and one constructor per kind of field — a slot or
an array of ``S`` (float64), a slot, a block or an array of ``I`` (int64), the
quasi-Newton memory, fixed sizes and their matrices, ranges and counters — plus the
fields most records declare alike.  A method's ``*_state.py`` lists its record with
these; :class:`~cosim.integrators.state_decl.Record` turns the list into the layout,
the state dictionary, its write-back and its schema."""
from __future__ import annotations

import re
from typing import NamedTuple

# the kinds of value a field holds in the state dictionary
TIME = "time"        # a time: NaN in the record is None in the state (no state yet)
STEP = "step"        # a step size: finite, > 0, and large enough to move t
REAL = "real"        # a finite real number
COUNT = "count"      # an integer >= 0
VECTOR = "vector"    # a finite real array of the declared length (or parts, below)
SENTINEL = "sentinel"  # a real >= 0, or -1: none
NONNEGATIVE = "nonnegative"  # a finite real number >= 0
NEWTON = "newton"    # the quasi-Newton memory: σ, h of the matrix, the kept LU and its pivots
LAST_STEP = "last step"  # the last step's size: 0 or -1 (none), else a step that moves t


class Field(NamedTuple):
    name: str                 # the record module's constant (a slot, or the array's start o_<name>)
    store: str                # "S" or "I"
    size: str | None = None   # None: one slot; else the length, an expression in the sizes
    key: str | None = None    # its place in the state dictionary ("method_state.h_next"); None: not state
    kind: str = REAL
    flag: str | None = None   # slot of I set while the record holds the value (else None in the state)
    parts: object = ()        # a dict value: ((key, start, shape) | (key, slot of S)), or {method: parts}
    names: tuple = ()         # a block of slots of I: their constants (and ``keys``, their state keys)
    keys: tuple = ()
    doc: str = ""


def scalar(name, doc="", key=None, kind=REAL):
    """A slot of S."""
    return Field(name, "S", key=key, kind=kind, doc=doc)


def array(name, size, doc="", key=None, flag=None, parts=()):
    """An array of S (after the scalar slots) of length ``size``."""
    return Field(name, "S", size, key, VECTOR, flag, parts, doc=doc)


def integer(name, doc="", key=None, kind=COUNT):
    """A slot of I."""
    return Field(name, "I", key=key, kind=kind, doc=doc)


def block(name, names, doc="", key=None, keys=()):
    """Consecutive slots of I: ``name`` is the first, ``N_<name>`` their number; as a
    state value the dict {keys[i]: I[slot i]} of counters."""
    return Field(name, "I", key=key, kind=COUNT, names=tuple(names), keys=tuple(keys), doc=doc)


def int_array(name, size, doc=""):
    """An array of I (after its slots) of length ``size`` (not state: pivots)."""
    return Field(name, "I", size, doc=doc)


def newton(key, piv, sigma="SIGMA", h_jac="H_JAC", relax="RELAX", has_factor="HAS_FACTOR",
           need_jac="NEED_JAC"):
    """The quasi-Newton memory as a state value (cosim.state_schema.check_newton_state):
    σ and the step of the matrix (slots of S), and while ``has_factor`` (slot of I) is
    set the kept LU (the integrator's ``_LU``), its pivots (array ``piv`` of I), the
    refresh flag ``need_jac`` (I) and the relaxation ``relax`` (S)."""
    return Field(piv, "LU", key=key, kind=NEWTON, flag=has_factor,
                 parts=(("sigma", sigma), ("h_jac", h_jac), ("need_jac", need_jac), ("relax", relax)))


class Bounded(NamedTuple):
    """The kind of a slot of S holding a constant of the run that an option sets or the
    set-up calibrates (spark's γ, rkc-penalty's χ and α): a value in the parameter range
    ``bound`` of :mod:`cosim.models.ranges` (its name: "POSITIVE", "DEFAULT"), the bound
    its option is checked against; None: > 0 with no bound of its own, for a value derived
    from the model, Bayo's α ~ 1e7 M/C_q²); or ``none``, a sentinel that marks
    the formulation, held exactly when the integrator's own value is it."""
    bound: str | None
    none: float | None = None


def bounded(name, doc, key, bound, none=None):
    """A slot of S of a run's constant in a parameter range (:class:`Bounded`)."""
    return Field(name, "S", key=key, kind=Bounded(bound, none), doc=doc)


# -- kinds of a record with parts of fixed size (BDF's difference arrays and order counts)
CONSTANT = "constant"   # a fixed size of the record: a module constant of its record module


def constant(name, value, doc=""):
    """A fixed size of the record: ``value`` an integer expression in the constants
    declared before it.  Written into the layout block as a module constant; the
    lengths, shapes and ranges of the fields may use it."""
    return Field(name, "", str(value), kind=CONSTANT, doc=doc)


class Matrix(NamedTuple):
    """The kind of an array of S that holds a ``rows`` × ``cols`` matrix by rows
    (expressions in the sizes and constants); its state value is the 2-D array.
    ``of``: a matrix of backward differences of the values at these state keys
    (:func:`differences`).  ``factors``: the matrix the kept LU of the Newton memory is
    the factorisation of (BDF's J)."""
    rows: str
    cols: str
    of: tuple = ()
    factors: bool = False


def matrix(name, rows, cols, doc="", key=None, flag=None, factors=False):
    """A matrix stored by rows as an array of S.  ``flag``: a slot of I, or a tuple of
    them — the record holds the value while every one is set; writing sets or clears
    the first, and a flag of the Newton memory asks the state to hold its LU too.
    ``factors``: that LU factors this matrix (a restored state's pair must agree)."""
    cols_factor = f"({cols})" if re.search(r"[+-]", cols) else cols
    return Field(name, "S", f"{rows} * {cols_factor}", key, Matrix(rows, cols, (), factors), flag, doc=doc)


def differences(name, rows, cols, of, doc="", key=None):
    """A matrix of backward differences stored by rows: row j (1 .. the record's
    ``steps`` count) holds ∇^j of the values at the state keys ``of`` (concatenated)
    over the accepted steps since the last restart (BDF's D and Dz, seed 000 eq. 59).
    With the step sums they imply the values at the earlier accepted points
    (:meth:`~cosim.integrators.state_decl.Record.solved_points`), which a restored
    state's schema checks against the model."""
    cols_factor = f"({cols})" if re.search(r"[+-]", cols) else cols
    return Field(name, "S", f"{rows} * {cols_factor}", key, Matrix(rows, cols, tuple(of)), doc=doc)


class LeadingPositive(NamedTuple):
    """The kind of a vector of S whose first ``count`` entries are > 0 (``what`` they are)."""
    count: int
    what: str


def leading_positive(name, size, count, what, doc="", key=None):
    """A vector of S whose first ``count`` entries must be > 0 (the kernel divides by
    them): BDF's τ, the sums of the last steps."""
    return Field(name, "S", size, key, LeadingPositive(count, what), doc=doc)


class Range(NamedTuple):
    """The kind of a slot of I whose value lies in ``lo``..``hi`` (expressions in the constants)."""
    lo: str
    hi: str


def ranged(name, lo, hi, doc="", key=None):
    """A slot of I holding an integer in ``lo``..``hi`` (BDF's order, 1..MAX_ORDER)."""
    return Field(name, "I", key=key, kind=Range(str(lo), str(hi)), doc=doc)


class Counts(NamedTuple):
    """The kind of ``length`` consecutive slots of I (an expression in the constants):
    counters, a list of integers >= 0 as a state value."""
    length: str


def counts(name, length, doc="", key=None):
    """Consecutive slots of I among the slots (``length`` of them: a constant length),
    ``name`` the first; as a state value the list of their counts."""
    return Field(name, "I", key=key, kind=Counts(str(length)), doc=doc)


# -- slots of S most records share (in this order) -------------------------------------
def newton_scalars():
    """The slots of S of the quasi-Newton memory (:func:`newton`'s defaults)."""
    return [scalar("SIGMA", "Newton's contraction estimate"),
            scalar("H_JAC", "h of the iteration matrix (-1: none)"),
            scalar("RELAX", "relaxation of the kept matrix's updates")]


def step_option_scalars():
    """The slots of S of the tolerances and step options (RecordIntegrator._sync_step_options)."""
    return [scalar("RTOL"), scalar("ATOL"), scalar("H_FIXED", "the fixed step (0: adaptive)"), scalar("MAX_STEP")]


def fixed_step_scalars():
    """The slots of S of a fixed step's verdict (kernel_common.fixed_step_resolved with
    the slots (FIXED_RTOL, F_H, the failure's estimate, FIXED_ERR)): the largest
    estimate so far, and the verdict's scale REFUSAL·rtol, which the kernel writes
    before each verdict from its record module's REFUSAL (the step is refused above
    1/(REFUSAL·rtol): REFUSAL calibrated per method on the ratio of its estimate to
    its true local error, so that every method refuses at about the same true error)."""
    return [scalar("FIXED_ERR", "fixed step: the largest local error estimate so far (user's weights)"),
            scalar("FIXED_RTOL", "fixed step: REFUSAL·rtol, the scale of the verdict (fixed_step_resolved)")]


# -- fields every record declares alike ----------------------------------------------
def times():
    """The first two slots of S: t and t_prev (NaN in the record: no state yet)."""
    return (scalar("T", "time t", "t", TIME), scalar("T_PREV", "time of the previous point", "t_prev", TIME))


def statistics():
    """The statistics counters, a block of I: the state's ``stats`` (base.STAT_KEYS order)."""
    from .base import STAT_KEYS  # noqa: PLC0415
    return block("STATS", ("ST_STEPS", "ST_REJ", "ST_NEWTON", "ST_RES", "ST_JAC", "ST_LU"),
                 "the statistics (base.STAT_KEYS order)", "stats", STAT_KEYS)
