"""A model as the functions a method kernel receives (``fns``, DESIGN.md "Compiled path").

A kernel method (``ga_kernel.entry``) reaches the model only through a tuple of
functions in :func:`cosim.jit.kernel_fields` order, each writing its result into
the zero-filled output array passed last (the protocol of
:mod:`cosim.models.kernels`).  Two ways to get that tuple, one per backend:

* :func:`python_functions` — any multibody model, run as plain Python: its own
  methods (``mass``, ``forces``, …) wrapped into the protocol's signatures, the
  derivatives it does not give computed by :mod:`cosim.integrators.common`
  (complex step, hyper-dual numbers or differences); also a model view the IC
  analysis made (redundant constraints removed).
* :func:`compiled_functions` — a model with kernels on the numba backend: its
  kernels (missing derivative kernels generated), compiled alone and given to
  the compiled method by address (:func:`cosim.jit.model_functions`).
  :func:`compiled_unsupported` says why a model cannot go that way.
"""
from __future__ import annotations

from .. import jit
from .common import (constraint_force_jacobian, fd_jacobian, force_jacobians,
                     mass_term_jacobian)


def n_nonholonomic(model):
    """n_g: the model's nonholonomic rows (seed 000 §7)."""
    return len(getattr(model, "nonholonomic_names", ()) or ())


def nonholonomic_force_jacobian(model, q, mu, t):
    """(Bᵀ μ)_q: the model's ``nonholonomic_force_jacobian`` if it has one,
    else forward differences."""
    fun = getattr(model, "nonholonomic_force_jacobian", None)
    jac = fun(q, mu, t) if fun is not None else None
    if jac is not None:
        return jac
    return fd_jacobian(lambda qq: model.nonholonomic_matrix(qq, t).T @ mu, q)


def nonholonomic_velocity_jacobian(model, q, v, t):
    """(B v + b)_q: the model's ``nonholonomic_velocity_jacobian`` if it has
    one, else forward differences."""
    fun = getattr(model, "nonholonomic_velocity_jacobian", None)
    jac = fun(q, v, t) if fun is not None else None
    if jac is not None:
        return jac
    return fd_jacobian(lambda qq: model.nonholonomic_matrix(qq, t) @ v
                       + model.nonholonomic_offset(qq, t), q)


def python_functions(model):
    """``model``'s terms as plain Python functions of the kernel signatures, in
    :func:`cosim.jit.kernel_fields` order (the method's ``fns`` on the python
    backend).  The parameter vector ``p`` is unused: the model holds its own.
    The constraint terms fill the first m rows of their output (the kernel may pass
    room for the nonholonomic rows after them).  A first-order model x' = f(t, x, u)
    gives its f as the forces slot (``forces(x, x, t, u, p, f)``), nothing else."""
    if model.kind == "first_order":
        return _first_order_functions(model)
    m = model.n_c

    def mass(q, t, p, M):
        M[:, :] = model.mass(q, t)

    def forces(q, v, t, u, p, Q):
        Q[:] = model.forces(q, v, t, u)

    def constraints(q, t, p, C):
        if m:
            C[:m] = model.constraints(q, t)

    def constraint_jacobian(q, t, p, Cq):
        if m:
            Cq[:m, :] = model.constraint_jacobian(q, t)

    def constraint_dt(q, t, p, Ct):
        if m:
            Ct[:m] = model.constraint_dt(q, t)

    def gamma(q, v, t, p, g):
        if m:
            g[:m] = model.gamma(q, v, t)

    def jacobians(q, v, t, u, p, Qq, Qv):
        Qq[:, :], Qv[:, :] = force_jacobians(model, q, v, t, u)

    def force_of_multipliers(q, lam, t, p, H):
        H[:, :] = constraint_force_jacobian(model, q, lam, t)

    def mass_term(q, a, t, p, J):
        jac = mass_term_jacobian(model, q, a, t)
        if jac is not None:
            J[:, :] = jac

    def outputs(q, v, t, u, p, y):
        """The outputs are computed in Python (Simulation.outputs)."""

    def nh_matrix(q, t, p, B):
        B[:, :] = model.nonholonomic_matrix(q, t)

    def nh_offset(q, t, p, b):
        b[:] = model.nonholonomic_offset(q, t)

    def nh_gamma(q, v, t, p, g):
        g[:] = model.nonholonomic_gamma(q, v, t)

    def nh_force_jacobian(q, mu, t, p, H):
        H[:, :] = nonholonomic_force_jacobian(model, q, mu, t)

    def nh_velocity_jacobian(q, v, t, p, J):
        J[:, :] = nonholonomic_velocity_jacobian(model, q, v, t)

    return (mass, forces, constraints, constraint_jacobian, constraint_dt, gamma, jacobians,
            force_of_multipliers, mass_term, outputs,
            nh_matrix, nh_offset, nh_gamma, nh_force_jacobian, nh_velocity_jacobian)


def _first_order_functions(model):
    def rhs(x, _x, t, u, p, f):
        f[:] = model.rhs(t, x, u)

    def nothing(*args):
        """(no such term in a first-order model)"""
    return (nothing, rhs) + (nothing,) * 13


def compiled_functions(model):
    """The addresses of ``model``'s compiled kernels (:func:`cosim.jit.model_functions`):
    every kernel of the protocol, stubs for the ones a model without nonholonomic
    rows or outputs does not have.  Models sharing a kernel set share them."""
    kernels = model.kernels().all_functions()
    return jit.model_functions(kernels, getattr(model, "kernel_name", model.name))


def compiled_unsupported(model, nonholonomic=False):
    """Why no compiled method can run ``model`` (None: its kernels describe it);
    ``nonholonomic``: the method has the nonholonomic rows (generalized-α,
    dopri5/rk4), which then need all their kernels."""
    kernels = getattr(model, "kernels", None)
    if kernels is None or kernels() is None:
        why = getattr(model, "kernels_unavailable", lambda: None)()  # KernelModel: generated ones
        return f"model {model.name!r} has no compiled kernels" + (f" ({why})" if why else "")
    from ..models.kernels import KernelModel  # noqa: PLC0415
    # the class whose Python methods the kernels describe: KernelModel (derived from
    # them) or a class with its own checked implementation (URDFModel: pinocchio)
    base = getattr(model, "kernel_reference", KernelModel)
    overridden = [name for name in KernelModel.DERIVED
                  if getattr(type(model), name, None) is not getattr(base, name, None)]
    if overridden:
        # a subclass changed the Python equations: the kernels no longer describe it
        return f"model {model.name!r} overrides {', '.join(overridden)} of its kernels"
    if n_nonholonomic(model) and not nonholonomic:
        return f"model {model.name!r} has nonholonomic constraints (no compiled form of this method)"
    if n_nonholonomic(model):
        overridden = [name for name in ("nonholonomic_matrix", "nonholonomic_offset", "nonholonomic_gamma")
                      if getattr(type(model), name, None) is not getattr(base, name, None)]
        if overridden:
            return f"model {model.name!r} overrides {', '.join(overridden)} of its kernels"
        if model.kernels().nonholonomic_functions() is None:
            return f"model {model.name!r} has nonholonomic constraints without all their kernels"
    # kernels numba rejects (the generated derivative kernels are checked where they are made)
    return jit.kernels_uncompilable(getattr(model, "kernel_set", None) or model.kernels(),
                                    model.name)
