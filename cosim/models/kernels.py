"""Model kernels: the equations of a multibody model as plain functions of
flat arrays, ``(q, v, t, u, p)`` with ``p`` a flat parameter vector
(DESIGN.md "Compiled path").

A model that has kernels returns a :class:`MultibodyKernels` from
``kernels()`` and its parameter vector from ``kernel_parameters()``; the
compiled integrators fuse them into their residual and iteration matrix, and
:class:`KernelModel` derives the model's Python methods from the same
functions, so the equations are written once.

Only mass, forces and constraints are compulsory: a derivative kernel left None
is generated (complex step or Richardson differences, cosim.models.auto_kernels)
for the compiled backend and computed by cosim.derivatives on the Python one.

Every kernel writes its result into the output array(s) passed last, which
arrive zero-filled.  Kernels use only what numba compiles: scalar math,
``math``/``numpy`` functions on scalars, indexing.  Signatures:

    mass(q, t, p, M)                       M: (n, n)
    forces(q, v, t, u, p, Q)               Q: (n,)   applied + quadratic-velocity forces
    constraints(q, t, p, C)                C: (m,)   seed 000 eq. 2
    constraint_jacobian(q, t, p, Cq)       Cq: (m, n)
    constraint_dt(q, t, p, Ct)             Ct: (m,)  eq. 3
    gamma(q, v, t, p, g)                   g: (m,)   eq. 5, C_q q'' = γ
    force_jacobians(q, v, t, u, p, Qq, Qv) (n, n) each
    constraint_force_jacobian(q, lam, t, p, H)   H = (C_qᵀ λ)_q: (n, n)
    mass_jacobian_term(q, a, t, p, J)      J = (M(q) a)_q: (n, n); None for constant mass
    outputs(q, v, t, u, p, y)              y: (n_out,) the model's outputs (optional):
                                           the compiled step computes them with the state

Nonholonomic constraints G = B(q, t) v + b(q, t) = 0 (seed 000 §7, eq. 93), all
optional, n_g = len(nonholonomic_names); the Python methods of the same names
are derived from them.  The methods that have nonholonomic rows (dopri5/rk4,
generalized-α) use them for a model that declares such rows
(:meth:`MultibodyKernels.nonholonomic_functions`):

    nonholonomic_matrix(q, t, p, B)                  B: (n_g, n)
    nonholonomic_offset(q, t, p, b)                  b: (n_g,)
    nonholonomic_gamma(q, v, t, p, g)                g: (n_g,)  B q'' = γ_G = −(B' v + b')
    nonholonomic_force_jacobian(q, mu, t, p, H)      H = (Bᵀ μ)_q: (n, n)
    nonholonomic_velocity_jacobian(q, v, t, p, J)    J = (B v + b)_q: (n_g, n)
"""
from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Callable, Optional

import numpy as np

from .base import MultibodyModel


@dataclass(frozen=True)
class MultibodyKernels:
    mass: Callable
    forces: Callable
    constraints: Callable
    # the derivative kernels may be None: cosim.models.auto_kernels generates them
    constraint_jacobian: Optional[Callable] = None
    constraint_dt: Optional[Callable] = None
    gamma: Optional[Callable] = None
    force_jacobians: Optional[Callable] = None
    constraint_force_jacobian: Optional[Callable] = None
    mass_jacobian_term: Optional[Callable] = None
    outputs: Optional[Callable] = None
    # nonholonomic rows (module docstring): not in functions(), see nonholonomic_functions()
    nonholonomic_matrix: Optional[Callable] = None
    nonholonomic_offset: Optional[Callable] = None
    nonholonomic_gamma: Optional[Callable] = None
    nonholonomic_force_jacobian: Optional[Callable] = None
    nonholonomic_velocity_jacobian: Optional[Callable] = None

    def functions(self):
        """The kernels of a compiled entry in field order, the no-op defaults
        standing for missing ones (their position is their name ``_k<i>`` in
        the entry, the outputs kernel last)."""
        defaults = {"mass_jacobian_term": no_mass_jacobian, "outputs": no_outputs}
        return tuple(getattr(self, name) or defaults.get(name) for name in COMPILED_FIELDS)

    def all_functions(self):
        """Every kernel a compiled method receives (:func:`cosim.jit.kernel_fields`
        order): :meth:`functions`, then the nonholonomic ones, no-op stubs standing
        for a model without such rows."""
        nh = self.nonholonomic_functions()
        return self.functions() + (nh if nh is not None else NO_NONHOLONOMIC)

    def nonholonomic_functions(self):
        """The nonholonomic kernels in field order (``_k10`` … ``_k14`` of an entry
        that has them, after :meth:`functions`); None when one is missing."""
        fns = tuple(getattr(self, name) for name in NONHOLONOMIC_FIELDS)
        return None if any(f is None for f in fns) else fns


COMPILED_FIELDS = tuple(f.name for f in fields(MultibodyKernels))[:10]  # mass … outputs
NONHOLONOMIC_FIELDS = tuple(f.name for f in fields(MultibodyKernels))[10:]


def no_mass_jacobian(q, a, t, p, J):
    """(M a)_q of a constant mass matrix: zero (J arrives zero-filled)."""


def no_outputs(q, v, t, u, p, y):
    """A model whose outputs are computed in Python (``outputs_qv``)."""


def no_nonholonomic_matrix(q, t, p, B):
    """Stub for a model without nonholonomic rows (never called: n_g = 0)."""


def no_nonholonomic_offset(q, t, p, b):
    """Stub for a model without nonholonomic rows (never called: n_g = 0)."""


def no_nonholonomic_gamma(q, v, t, p, g):
    """Stub for a model without nonholonomic rows (never called: n_g = 0)."""


def no_nonholonomic_force_jacobian(q, mu, t, p, H):
    """Stub for a model without nonholonomic rows (never called: n_g = 0)."""


def no_nonholonomic_velocity_jacobian(q, v, t, p, J):
    """Stub for a model without nonholonomic rows (never called: n_g = 0)."""


NO_NONHOLONOMIC = (no_nonholonomic_matrix, no_nonholonomic_offset, no_nonholonomic_gamma,
                   no_nonholonomic_force_jacobian, no_nonholonomic_velocity_jacobian)


class KernelModel(MultibodyModel):
    """A multibody model whose Python methods are derived from its kernels.

    Subclasses define ``kernel_set`` (a :class:`MultibodyKernels`) and
    ``kernel_parameters()``; everything the integrators call on a
    :class:`MultibodyModel` then comes from the kernels.
    """

    kernel_set: MultibodyKernels = None
    # the methods derived from the kernels; a subclass that overrides one of
    # them is integrated by the Python reference (its kernels would be wrong)
    DERIVED = ("mass", "forces", "constraints", "constraint_jacobian", "constraint_dt", "gamma",
               "force_jacobians", "constraint_force_jacobian", "mass_jacobian_term")

    def kernels(self):
        """The kernel set the compiled integrators run: ``kernel_set``, its missing
        derivative kernels generated (:mod:`cosim.models.auto_kernels`); None when
        they cannot be compiled (the Python reference then runs)."""
        ks = self.kernel_set
        if ks is None:
            return None
        from . import auto_kernels  # noqa: PLC0415
        if not auto_kernels.missing(ks, self.constant_mass):
            return ks
        return auto_kernels.complete(self)[0]

    def kernels_unavailable(self):
        """Why :meth:`kernels` is None (the derivative kernels could not be generated)."""
        from . import auto_kernels  # noqa: PLC0415
        if self.kernel_set is None or not auto_kernels.missing(self.kernel_set, self.constant_mass):
            return None
        return auto_kernels.complete(self)[1] if auto_kernels.complete(self)[0] is None else None

    def gives_derivative(self, term):
        """False for a derivative whose kernel is None (computed automatically)."""
        ks = self.kernel_set
        return ks is None or getattr(ks, term, True) is not None

    def kernel_parameters(self) -> np.ndarray:
        raise NotImplementedError

    def _setup_checked(self):
        """``setup()``, then: a subclass whose ``setup()`` skipped ``super().setup()`` has
        no parameter vector or mass matrix -- a ModelDefinitionError saying so, instead of
        an AttributeError at the first step."""
        super()._setup_checked()
        if "_p" not in self.__dict__ or "_M_const" not in self.__dict__:
            from ..errors import ModelDefinitionError
            cls = type(self).__qualname__
            raise ModelDefinitionError(
                f"model {self.name!r}: {cls}.setup() does not call super().setup(); a model "
                f"built on a library model ({type(self).__mro__[1].__qualname__}) must, so that "
                f"its mass matrix and parameter vector exist (add super().setup() to {cls}.setup)")

    def setup(self):
        self._p = np.ascontiguousarray(self.kernel_parameters(), dtype=float)
        self._M_const = None
        if self.constant_mass:
            n = self.n_q
            M = np.zeros((n, n))
            self.kernel_set.mass(np.zeros(n), 0.0, self._p, M)
            M.flags.writeable = False
            self._M_const = M

    @staticmethod
    def _f(x):
        return np.asarray(x, dtype=float)

    @staticmethod
    def _plain(q, t):
        """True for the float arguments of the integrators (the fast path)."""
        return type(q) is np.ndarray and q.dtype.kind == "f" and (type(t) is float or type(t) is np.float64)

    @staticmethod
    def _number(*xs):
        """The dtype of a result: None (float), or complex / object when an argument is
        complex or holds hyper-dual numbers (cosim.derivatives evaluates the kernels' plain
        Python with those to differentiate them exactly; a kernel that calls ``math``
        then raises TypeError and the derivatives fall back to differences)."""
        kind = None
        for x in xs:
            k = np.asarray(x).dtype.kind
            if k == "O":
                return object
            if k == "c":
                kind = complex
        return kind

    def _args(self, *xs):
        dt = None if self._plain(xs[0], xs[-1]) else self._number(*xs)
        if dt is None:
            return float, [self._f(x) for x in xs[:-1]] + [float(xs[-1])]
        return dt, [np.asarray(x, dtype=dt) for x in xs[:-1]] + [xs[-1]]

    def _generic(self, kernel, shape, q, t):
        """A kernel called with complex or hyper-dual arguments (cosim.derivatives)."""
        dt, (q, t) = self._args(q, t)
        out = np.zeros(shape, dtype=dt)
        kernel(q, t, self._p, out)
        return out

    def mass(self, q, t):
        if self._M_const is not None:
            return self._M_const
        n = self.n_q
        if not self._plain(q, t):
            return self._generic(self.kernel_set.mass, (n, n), q, t)
        M = np.zeros((n, n))
        self.kernel_set.mass(self._f(q), float(t), self._p, M)
        return M

    def forces(self, q, v, t, u):
        if not (self._plain(q, t) and type(v) is np.ndarray and v.dtype.kind == "f"):
            dt = self._number(q, v, t)
            if dt is not None:
                Q = np.zeros(self.n_q, dtype=dt)
                self.kernel_set.forces(np.asarray(q, dtype=dt), np.asarray(v, dtype=dt), t, self._f(u),
                                       self._p, Q)
                return Q
        Q = np.zeros(self.n_q)
        self.kernel_set.forces(self._f(q), self._f(v), float(t), self._f(u), self._p, Q)
        return Q

    def constraints(self, q, t):
        if not self._plain(q, t):
            return self._generic(self.kernel_set.constraints, self.n_c, q, t)
        C = np.zeros(self.n_c)
        self.kernel_set.constraints(self._f(q), float(t), self._p, C)
        return C

    def constraint_jacobian(self, q, t):
        if self.kernel_set.constraint_jacobian is None:
            return MultibodyModel.constraint_jacobian(self, q, t)
        if not self._plain(q, t):
            return self._generic(self.kernel_set.constraint_jacobian, (self.n_c, self.n_q), q, t)
        Cq = np.zeros((self.n_c, self.n_q))
        self.kernel_set.constraint_jacobian(self._f(q), float(t), self._p, Cq)
        return Cq

    def constraint_dt(self, q, t):
        if self.kernel_set.constraint_dt is None:
            return MultibodyModel.constraint_dt(self, q, t)
        if not self._plain(q, t):
            return self._generic(self.kernel_set.constraint_dt, self.n_c, q, t)
        Ct = np.zeros(self.n_c)
        self.kernel_set.constraint_dt(self._f(q), float(t), self._p, Ct)
        return Ct

    def gamma(self, q, v, t):
        if self.kernel_set.gamma is None:
            return MultibodyModel.gamma(self, q, v, t)
        g = np.zeros(self.n_c)
        self.kernel_set.gamma(self._f(q), self._f(v), float(t), self._p, g)
        return g

    def force_jacobians(self, q, v, t, u):
        if self.kernel_set.force_jacobians is None:
            return None  # cosim.derivatives
        n = self.n_q
        Qq, Qv = np.zeros((n, n)), np.zeros((n, n))
        self.kernel_set.force_jacobians(self._f(q), self._f(v), float(t), self._f(u), self._p, Qq, Qv)
        return Qq, Qv

    def constraint_force_jacobian(self, q, lam, t):
        if self.kernel_set.constraint_force_jacobian is None:
            return None  # cosim.derivatives
        n = self.n_q
        H = np.zeros((n, n))
        self.kernel_set.constraint_force_jacobian(self._f(q), self._f(lam), float(t), self._p, H)
        return H

    def kernel_outputs(self):
        """True when the outputs kernel describes this model's outputs (a subclass
        that overrides ``outputs_qv``/``output_values`` computes its own), checked
        once by running it in Python: compiled code does not check indices, so
        a kernel that writes more outputs than the model declares must never
        run compiled."""
        ks = self.kernel_set
        if (ks is None or ks.outputs is None or type(self).outputs_qv is not KernelModel.outputs_qv
                or type(self).output_values is not MultibodyModel.output_values):
            return False
        n = self.n_q
        try:
            ks.outputs(np.zeros(n), np.zeros(n), 0.0, np.zeros(self.n_inputs), self._p,
                       np.zeros(len(self.outputs)))
        except IndexError:
            return False
        return True

    def outputs_qv(self, t, q, v, u):
        outputs = self.kernel_set.outputs
        if outputs is None:
            return np.zeros(0)
        y = np.zeros(len(self.outputs))
        outputs(self._f(q), self._f(v), float(t), self._f(u), self._p, y)
        return y

    def mass_jacobian_term(self, q, a, t):
        if self.constant_mass or self.kernel_set.mass_jacobian_term is None:
            return None
        n = self.n_q
        J = np.zeros((n, n))
        self.kernel_set.mass_jacobian_term(self._f(q), self._f(a), float(t), self._p, J)
        return J

    # -- nonholonomic rows G = B(q, t) v + b(q, t) = 0 (seed 000 §7) ----------------------
    @property
    def n_g(self):
        return len(self.nonholonomic_names)

    def nonholonomic_matrix(self, q, t):
        kernel = self.kernel_set.nonholonomic_matrix
        if kernel is None:
            return self._no_nonholonomic_kernel("nonholonomic_matrix", MultibodyModel.nonholonomic_matrix,
                                                q, t)
        if not self._plain(q, t):
            return self._generic(kernel, (self.n_g, self.n_q), q, t)
        B = np.zeros((self.n_g, self.n_q))
        kernel(self._f(q), float(t), self._p, B)
        return B

    def nonholonomic_offset(self, q, t):
        kernel = self.kernel_set.nonholonomic_offset
        if kernel is None:
            return MultibodyModel.nonholonomic_offset(self, q, t)  # b = 0
        if not self._plain(q, t):
            return self._generic(kernel, self.n_g, q, t)
        b = np.zeros(self.n_g)
        kernel(self._f(q), float(t), self._p, b)
        return b

    def nonholonomic_gamma(self, q, v, t):
        """γ_G of B q'' = γ_G (the accelerations' nonholonomic rows)."""
        kernel = self.kernel_set.nonholonomic_gamma
        if kernel is None:
            return self._no_nonholonomic_kernel("nonholonomic_gamma", None, q, t)
        g = np.zeros(self.n_g)
        kernel(self._f(q), self._f(v), float(t), self._p, g)
        return g

    def nonholonomic_force_jacobian(self, q, mu, t):
        """(Bᵀ μ)_q, or None (differences: cosim.integrators.generalized_alpha)."""
        kernel = self.kernel_set.nonholonomic_force_jacobian
        if kernel is None:
            return None
        H = np.zeros((self.n_q, self.n_q))
        kernel(self._f(q), self._f(mu), float(t), self._p, H)
        return H

    def nonholonomic_velocity_jacobian(self, q, v, t):
        """(B v + b)_q, or None (differences: cosim.integrators.generalized_alpha)."""
        kernel = self.kernel_set.nonholonomic_velocity_jacobian
        if kernel is None:
            return None
        J = np.zeros((self.n_g, self.n_q))
        kernel(self._f(q), self._f(v), float(t), self._p, J)
        return J

    def _no_nonholonomic_kernel(self, name, default, q, t):
        """A model without nonholonomic rows: the base class's empty answer; one that
        declares rows must give the kernel."""
        if not self.n_g and default is not None:
            return default(self, q, t)
        if not self.n_g:
            return np.zeros(0)
        self._missing(f"kernel_set.{name}", f"the kernel of {name} for the nonholonomic constraints "
                      f"{list(self.nonholonomic_names)} (cosim.models.kernels)")
