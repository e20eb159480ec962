"""Nonholonomic rows for the compiled dopri5/rk4 (seed 000 §7, eq. 93): the hooks
of :mod:`cosim.integrators.explicit_kernel`, written for G = B(q, t) v + b(q, t) = 0.

Pasted by :mod:`cosim.jit` after ``explicit_kernel`` into the entry of a model
that declares nonholonomic rows only (``extras=``); its definitions replace the
empty hooks of the same names there and nothing else, so every other model's
entry (and its cached machine code) keeps the holonomic-only kernel.  Same
algorithm as :class:`cosim.integrators.explicit.IndexOneRHS`:

* J = [[M, C_qᵀ, Bᵀ], [C_q, 0, 0], [B, 0, 0]] (eq. 89 with the rows of
  eq. 93), right-hand side [Q; γ; γ_G] with B q'' = γ_G;
* position projection on C = 0 only (the B rows' right-hand side is 0, none
  at all when the model has no holonomic rows); velocity projection on
  C_q v + C_t = 0 and B v + b = 0.

Record: ``I[I_M]`` = m + n_g (all multiplier rows: λ in S holds both, as the
reference's ``lam``), the last slot of ``I`` (after the pivots) holds n_g.
Kernels ``fns[10]`` … ``fns[14]``: :data:`cosim.models.kernels.NONHOLONOMIC_FIELDS`.
"""


def n_nonholonomic(I):
    """n_g, kept in the last slot of I."""
    return I[I.shape[0] - 1]


def _nh_rows(fns, p, mh, q, t, Cq):
    """B(q, t) into rows mh: of Cq (zero-filled by the caller)."""
    fns[10](q, t, p, Cq[mh:])


def _nh_offset(fns, p, mh, q, t, Ct):
    """b(q, t) into Ct[mh:] (zero-filled by the caller)."""
    fns[11](q, t, p, Ct[mh:])


def _nh_gamma(fns, p, mh, q, v, t, g):
    """γ_G into g[mh:] (zero-filled by the caller)."""
    fns[12](q, v, t, p, g[mh:])
