"""The exact-ZOH step of an LTI plant and its outputs as one function, run compiled
(numba) or as plain Python by :class:`cosim.integrators.state_transition.StateTransition`,
so a communication step is one call (seed 001 eq. 3.19):

    x(t + h) = Φ(h) x(t) + H(h) u,     y = C x(t + h) + D u.

Plain loops (no BLAS, no threads): the result does not depend on the BLAS
kernel or thread count.
"""


def lti_step(Phi, H, C, D, x, u, x_new, y):
    """x_new = Φ x + H u, then y = C x_new + D u (every entry written; none when y
    is empty)."""
    n, m, p = x.shape[0], u.shape[0], y.shape[0]
    for i in range(n):
        s = 0.0
        for j in range(n):
            s += Phi[i, j] * x[j]
        for j in range(m):
            s += H[i, j] * u[j]
        x_new[i] = s
    for i in range(p):
        s = 0.0
        for j in range(n):
            s += C[i, j] * x_new[j]
        for j in range(m):
            s += D[i, j] * u[j]
        y[i] = s
