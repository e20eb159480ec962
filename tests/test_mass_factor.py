"""The factorisation of an unconstrained model's mass matrix (kernel_common.factor_matrix with spd,
dense_lu.ldl_factor_inplace): L D Lᵀ of a symmetric positive definite M stored as LU
factors, partial pivoting for any other matrix, the same singularity test and the same
refusal of a singular M as every other matrix of the kernels."""
import numpy as np
import pytest

import cosim
from cosim.errors import ConvergenceError
from cosim.integrators import dense_lu
from cosim.integrators.kernel_common import FACTORED, MATRIX_SINGULAR, factor_matrix
from cosim.models import MultibodyModel, Parameter


def _solve(A):
    """factor_matrix(…, spd=True) then dense_lu.lu_solve_inplace of A x = b for a random b:
    (status, pivots, x, b)."""
    n = A.shape[0]
    LU, piv = np.zeros((n, n)), np.zeros(n, dtype=np.int64)
    status, _ = factor_matrix(A, LU, piv, n, True)
    b = np.random.default_rng(n).standard_normal(n)
    x = b.copy()
    if status == FACTORED:
        dense_lu.lu_solve_inplace(LU, piv, x)
    return status, piv, x, b


def test_ldl_solve_matches_numpy_on_random_spd_matrices():
    """Random SPD matrices A0 of size 1-12, every other one with its rows and columns
    scaled by up to 1e±6 (a heavy body beside a light one), A = S A0 S: factored by
    L D Lᵀ (no interchanges: piv[k] = k), a backward-stable solve (the residual of the
    scaled system S⁻¹(A x − b) ≤ 1e-14 |A0| |S x|) and numpy.linalg.solve's x within
    1e-14·cond(A0) relative (measured: residual ≤ 3e-16, the difference ≤ 1e-15·cond)."""
    rng = np.random.default_rng(7)
    for trial in range(200):
        n = int(rng.integers(1, 13))
        B = rng.standard_normal((n, n))
        A0 = B @ B.T + 1e-3 * n * np.eye(n)
        s = np.exp(rng.uniform(-6, 6, n) * np.log(10.0) * (trial % 2))
        A = s[:, None] * A0 * s[None, :]
        A = 0.5 * (A + A.T)      # exactly symmetric (the rigid-body kernels' M is)
        status, piv, x, b = _solve(A)
        assert status == FACTORED
        assert np.array_equal(piv, np.arange(n))
        assert np.abs((A @ x - b) / s).max() <= 1e-14 * np.abs(A0).max() * np.abs(s * x).max()
        ref = np.linalg.solve(A, b)
        assert np.abs(s * (x - ref)).max() <= 1e-14 * np.linalg.cond(A0) * np.abs(s * ref).max()


@pytest.mark.parametrize("A", [np.array([[1.0, 2.0], [2.0, 1.0]]),            # symmetric indefinite
                               np.array([[2.0, 1.0], [0.5, 1.0]]),            # not symmetric
                               np.array([[0.0, 1.0, 0.0], [1.0, 0.0, 0.0], [0.0, 0.0, 3.0]])])
def test_a_matrix_that_is_not_spd_is_factored_by_partial_pivoting(A):
    """Not symmetric positive definite: partial pivoting as before (the answer of
    numpy.linalg.solve to rounding, 1e-14)."""
    status, piv, x, b = _solve(A)
    assert status == FACTORED
    np.testing.assert_allclose(x, np.linalg.solve(A, b), rtol=1e-14, atol=1e-14)


@pytest.mark.parametrize("A", [np.array([[1.0, 1.0], [1.0, 1.0]]),            # positive semi-definite
                               np.array([[1.0, 1.0], [1.0, 1.0 + 1e-16]]),    # numerically singular
                               np.zeros((3, 3))])
def test_a_singular_mass_matrix_is_refused(A):
    status, _, _, _ = _solve(A)
    assert status == MATRIX_SINGULAR


class Shrinking(MultibodyModel):
    """Two free coordinates, M = diag(1, x): x = 1 − t reaches 0 at t = 1 (M singular)."""

    name = "shrinking"
    coordinates = ("x", "y")
    parameters = (Parameter("x0", 1.0, "m"),)

    def mass(self, q, t):
        return np.diag([1.0, q[0]])

    def forces(self, q, v, t, u):
        return np.zeros(2)

    def initial_state(self):
        return np.array([self.params["x0"], 0.0]), np.array([-1.0, 0.0])


def test_a_singular_mass_matrix_in_a_step_is_refused_with_the_matrix_named():
    """rk4's last stage of the step to t = 1 evaluates M = diag(1, 0) exactly (h = 1/4):
    the step fails naming the matrix and t as for any singular J (the same text as when M was factored by partial pivoting)."""
    sim = cosim.Simulation(Shrinking(), "rk4", backend="python", h=0.25)
    with pytest.raises(ConvergenceError, match=r"explicit step failed at t=0\.75, h=0\.25 \(\[\[M, C_q\^T\], \[C_q, 0\]\] \(seed 000 eq\. 89\) is numerically singular "
                                                  r"at t=1\.0, h=None \(pivot ratio 0\.0e\+00\)"):
        for _ in range(8):
            sim.do_step(sim.time, 0.25)


def test_compiled_ldl_is_bit_identical_to_the_python_backend():
    """The one implementation compiled (numba, as the methods paste it) and run as plain
    Python: the same factors and solution bits on random SPD matrices."""
    numba = pytest.importorskip("numba")
    ldl = numba.njit(error_model="numpy")(dense_lu.ldl_factor_inplace)
    solve = numba.njit(error_model="numpy")(dense_lu.lu_solve_inplace)
    rng = np.random.default_rng(3)
    for n in range(1, 10):
        B = rng.standard_normal((n, n))
        A = B @ B.T + np.eye(n)
        b = rng.standard_normal(n)
        out = []
        for factor, sol in ((ldl, solve), (dense_lu.ldl_factor_inplace, dense_lu.lu_solve_inplace)):
            LU, piv, x = A.copy(), np.zeros(n, dtype=np.int64), b.copy()
            assert factor(LU, piv) == 0
            sol(LU, piv, x)
            out.append((LU.tobytes(), x.tobytes()))
        assert out[0] == out[1]
