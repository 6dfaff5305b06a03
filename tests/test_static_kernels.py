"""Static, flattened and integral kernels against closed forms and explicit loops."""

import numpy as np
import pytest
import torch
from sklearn.utils._param_validation import InvalidParameterError

from tskernels import RBF, FlattenedKernel, IntegralKernel, Laplacian, Linear, Polynomial

rng = np.random.default_rng(0)
P, Q = rng.normal(size=(6, 4)), rng.normal(size=(5, 4))


def _loop(f, A, B):
    return np.array([[f(a, b) for b in B] for a in A])


@pytest.mark.parametrize(
    "kernel, f",
    [
        (Linear(2.0), lambda a, b: 2.0 * a @ b),
        (RBF(1.5), lambda a, b: np.exp(-np.sum((a - b) ** 2) / (2 * 1.5**2))),
        (Polynomial(3, 0.5, 0.2), lambda a, b: (0.2 * a @ b + 0.5) ** 3),
        (Laplacian(0.7), lambda a, b: np.exp(-np.linalg.norm(a - b) / 0.7)),
    ],
)
def test_static_closed_forms(kernel, f):
    np.testing.assert_allclose(kernel.gram(P, Q).numpy(), _loop(f, P, Q), rtol=1e-12)
    K = kernel.gram(P)
    assert torch.equal(K, K.T)
    np.testing.assert_allclose(
        kernel.self_values(torch.from_numpy(P)).numpy(), [f(a, a) for a in P], rtol=1e-12
    )


def test_static_parameter_errors():
    with pytest.raises(
        InvalidParameterError,
        match=r"^The 'sigma' parameter of RBF must be a float in the range \(0\.0, inf\)\. "
        r"Got -1\.0 instead\.$",
    ):
        RBF(-1.0)
    with pytest.raises(
        InvalidParameterError, match=r"The 'degree' parameter of Polynomial .* Got 0 instead"
    ):
        Polynomial(0)
    with pytest.raises(ValueError, match="2-D"):
        RBF().gram(np.zeros((2, 3, 4)))


def test_flattened_equals_static_on_vectors():
    X, Y = rng.normal(size=(4, 5, 3)), rng.normal(size=(3, 5, 3))
    k = FlattenedKernel(RBF(2.0))
    expected = RBF(2.0).gram(X.reshape(4, -1), Y.reshape(3, -1))
    torch.testing.assert_close(k.gram(X, Y), expected)


def test_integral_trapezoid_closed_form():
    X, Y = rng.normal(size=(4, 6, 2)), rng.normal(size=(3, 6, 2))
    w = np.full(6, 1 / 5)
    w[[0, -1]] /= 2
    for static, f in [
        (Polynomial(2, 1.0, 0.5), lambda a, b: (0.5 * a @ b + 1) ** 2),
        (RBF(0.8), lambda a, b: np.exp(-np.sum((a - b) ** 2) / (2 * 0.64))),
    ]:
        expected = _loop(lambda x, y, f=f: sum(w[t] * f(x[t], y[t]) for t in range(6)), X, Y)
        np.testing.assert_allclose(IntegralKernel(static).gram(X, Y).numpy(), expected, rtol=1e-12)


def test_integral_linear_interpolation_for_unequal_lengths():
    # a straight line sampled at 3 or at 5 points is the same function on [0, 1]
    line3 = np.linspace(0, 1, 3)[:, None] * np.array([[1.0, -2.0]])
    line5 = np.linspace(0, 1, 5)[:, None] * np.array([[1.0, -2.0]])
    exact = torch.tensor(5 / 3, dtype=torch.float64)  # integral of |t (1, -2)|^2 = 5 t^2
    # one common grid: every entry is the trapezoid rule on 100 points of the same function
    k = IntegralKernel(Linear(), n_grid=100)
    K = k.gram([line3, line5])
    torch.testing.assert_close(K[0, 0], K[1, 1])
    torch.testing.assert_close(K[0, 1], K[1, 1])
    torch.testing.assert_close(k.diag([line3, line5]), torch.diagonal(K))
    torch.testing.assert_close(K[1, 1], exact, rtol=1e-4, atol=0)
    # default rule, per pair: one length on its own samples, two lengths on the 100-point grid
    k = IntegralKernel(Linear())
    K = k.gram([line3, line5])
    torch.testing.assert_close(K[0, 1], exact, rtol=1e-4, atol=0)
    own3 = 5 * (0.5 * 0.25 + 0.25 * 1.0)  # trapezoid weights (1/4, 1/2, 1/4) at t = 0, 1/2, 1
    w5 = [0.125, 0.25, 0.25, 0.25, 0.125]
    own5 = 5 * sum(w * t**2 for w, t in zip(w5, np.linspace(0, 1, 5)))
    torch.testing.assert_close(K[0, 0], torch.tensor(own3, dtype=torch.float64))
    torch.testing.assert_close(K[1, 1], torch.tensor(own5, dtype=torch.float64))
    torch.testing.assert_close(k.diag([line3, line5]), torch.diagonal(K))


def test_integral_values_do_not_depend_on_the_rest_of_the_call():
    rng = np.random.default_rng(3)
    a, b = rng.normal(size=(7, 2)), rng.normal(size=(12, 2))
    long = rng.normal(size=(29, 2))
    for k in (IntegralKernel(Polynomial(2, 1.0, 0.5)), IntegralKernel(RBF(), n_grid=11)):
        alone = k.gram([a], [b])
        with_long = k.gram([a, long], [b, long])[0:1, 0:1]
        torch.testing.assert_close(alone, with_long, rtol=1e-12, atol=0)
        # normalisation and diag follow the same grid as the Gram
        Kn = k.gram([a, b, long], [a, b, long], normalize=True)
        torch.testing.assert_close(torch.diagonal(Kn), torch.ones(3, dtype=torch.float64))
        torch.testing.assert_close(k.diag([a, b, long]), torch.diagonal(k.gram([a, b, long])))
