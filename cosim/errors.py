"""Exception types of cosim.

Every error a user can trigger derives from :class:`CosimError`; bad input
additionally derives from :class:`ValueError` so generic handlers work.
Messages name the offending value.  A raised error never leaves a
simulation or integrator half-updated (callers snapshot and restore).
"""


class CosimError(Exception):
    """Base class of all cosim errors."""


class InvalidInputError(CosimError, ValueError):
    """A value has the wrong shape, is NaN/inf, or is out of range."""


class UnknownModelError(CosimError, KeyError):
    """A model name is not in the model library."""

    def __str__(self):  # KeyError quotes its message; keep it readable
        return str(self.args[0]) if self.args else ""


class UnknownMethodError(CosimError, KeyError):
    """An integration method name is not registered."""

    def __str__(self):
        return str(self.args[0]) if self.args else ""


class UnknownParameterError(CosimError, KeyError):
    """A parameter (or input/output/option) name does not exist."""

    def __str__(self):
        return str(self.args[0]) if self.args else ""


class ModelDefinitionError(CosimError, NotImplementedError):
    """A model lacks a compulsory method or one returns the wrong shape."""


class InconsistentConstraintsError(CosimError):
    """Constraints are contradictory or the IC projection did not converge."""


class ConvergenceError(CosimError):
    """A nonlinear solve or a step failed (Newton divergence, minimum step)."""

    def __init__(self, message, *, t=None, h=None, cause=None):
        super().__init__(message)
        self.t, self.h, self.cause = t, h, cause


class SingularMatrixError(ConvergenceError):
    """An iteration matrix is numerically singular."""


class ConstraintViolationError(ConvergenceError):
    """At the end of a communication step the full constraint set is violated beyond
    the bound derived from the tolerances (:mod:`cosim.constraint_guard`): the result
    would be wrong, so the step fails (state unchanged)."""


class FixedStepError(ConvergenceError):
    """A fixed step (``h`` given) whose local error estimate is larger than the state's
    own scale (:mod:`cosim.fixed_step`): it resolves nothing, so the step fails (state
    unchanged); the message names h, the estimate and a step that would do."""


class StateError(CosimError, ValueError):
    """A state snapshot or serialized blob is corrupt, foreign or mismatched."""


class ChatteringError(CosimError):
    """Too many events at (nearly) one time instant."""


class ScenarioError(CosimError, ValueError):
    """A scenario file is malformed."""


class SpecError(ScenarioError):
    """A run spec (or a sweep's variations) is malformed: names the key and the value."""


class CosimWarning(UserWarning):
    """Base class of the warnings cosim issues."""


class InputLimitWarning(CosimWarning):
    """An input beyond a limit the model applies (a URDF joint's effort limit): the
    model clips it.  Said once per input and simulation (:attr:`Simulation.on_notice`)."""


class InitialConditionWarning(CosimWarning):
    """The IC analysis changed the given initial state (seed 000 eqs. 6-9) or
    removed redundant constraints; the message gives the size of the change."""


class TightToleranceWarning(CosimWarning):
    """A tolerance the chosen method reaches only at a cost far above another
    method's (a second-order method at a tight rtol); the message gives the
    estimate and the method that would do it cheaper.  Said once, at set-up."""


class FixedStepAccuracyWarning(CosimWarning):
    """A fixed-step run whose local error estimate went beyond the tolerance weights by
    :data:`cosim.fixed_step.WARN_FACTOR`; said once per simulation, the largest
    estimate is :attr:`Simulation.fixed_step_error`."""


class ConstraintDriftWarning(CosimWarning):
    """A method that only bounds the constraint drift (penalty methods) let a
    constraint residual exceed the bound derived from the tolerances; said once per run,
    the worst residual is in :attr:`Simulation.constraint_residual_report`."""


class MissingExtraError(CosimError, ImportError):
    """An optional dependency is not installed; the message names the extra that
    brings it and the pip command (``cosim.extras``)."""


class RunInterrupted(KeyboardInterrupt):
    """Ctrl-C during :func:`cosim.run` / :func:`cosim.simulate`: a KeyboardInterrupt that
    carries the rows recorded until then as ``result`` (a RunResult with
    ``interrupted=True``)."""

    def __init__(self, result):
        super().__init__(f"interrupted at t={result.time[-1]!r} after {len(result.time)} rows")
        self.result = result
