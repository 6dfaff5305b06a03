r"""Feature maps that replace the N x N corpus Gram for large corpora: Nyström and explicit
random features.

**Nyström** (:class:`NystroemFeatures`; Williams & Seeger 2001). With landmark series
:math:`z_1..z_M` taken from the corpus, :math:`W = K(Z, Z) = U \operatorname{diag}(s) U^\top`
(descending) and the components with :math:`s_m > \texttt{eig\_floor} \cdot s_1` kept
(:math:`M' \le M` of them),

.. math:: \Phi(x) = K(x, Z)\, U_{M'} \operatorname{diag}(s_{M'})^{-1/2} \in \mathbb{R}^{M'},

so that :math:`\Phi(x)^\top \Phi(y) = K(x, Z) W^{+} K(Z, y)`, the kernel projected on the span
of the landmarks' feature vectors: exact when x or y is a landmark, and :math:`\|\Phi(x)\|^2
\le k(x, x)` always. The relative floor (default 1e-10) drops the directions in which
:math:`W^{-1/2}` would amplify rounding of the Gram by more than :math:`10^5`. A normalised
kernel is normalised before the map, :math:`K(x, z) / \sqrt{k(x, x) k(z, z)}`, with
:math:`k(x, x)` from ``kernel.diag``; ``transform`` returns that diagonal too (1 when
normalised), the exact :math:`k(x, x)` that the scorers use beside :math:`\Phi`.

The corpus enters through the N x M cross-Gram alone, in row chunks (memory O(chunk M) beside
the N x M' output); ``fit`` costs N M kernel evaluations plus O(M^3).

**Landmark rules** (``landmarks=``, all seeded by ``seed``):

- ``"uniform"`` (default): M corpus series drawn uniformly without replacement. Cost: the
  M x M Gram.
- ``"kmeans++"``: D^2 sampling in feature space (Arthur & Vassilvitskii 2007): the first
  landmark uniform, each next one drawn with probability proportional to the squared
  feature-space distance :math:`k(x,x) + k(z,z) - 2k(x,z)` to the nearest landmark so far,
  among a seeded uniform pool of ``min(N, KMEANS_POOL * M)`` series. Cost: M sequential
  kernel columns over the pool (``KMEANS_POOL`` times the cross-Gram's evaluations at most).
- ``"leverage"``: ridge-leverage sampling (Alaoui & Mahoney 2015; the estimator of Musco &
  Musco 2017): a uniform pre-sample S of M series gives
  :math:`\tilde\ell_i = (k_{ii} - K_{iS}(K_{SS} + \tfrac{M}{N}\lambda I)^{-1}K_{Si}) / \lambda`
  (the columns of S weighted by :math:`\sqrt{N/M}`, the inverse of their sampling
  probability) with :math:`\lambda = \operatorname{tr}(K) / M` (so the effective dimension
  is at most M), and
  M landmarks are drawn without replacement with probability proportional to
  :math:`\tilde\ell_i`. Cost: a second N x M cross-Gram.

With ``n_components >= N`` every corpus series is a landmark (in corpus order): the map then
reproduces the exact corpus Gram, and the scorers of :mod:`novelty.scorers._feature_scorers` the
exact scorers.

**Explicit features** (:class:`RandomFeatures`, ``approximation="features"``):

- :class:`tskernels.RandomConvolutionKernel` with its default linear static kernel
  (``Linear(scale=s)``, default s = 1/F): :math:`\Phi = \sqrt{s}\, \phi(x)`, exact;
- :class:`tskernels.RandomizedSignatureKernel`: :math:`\Phi = Z_T(x) / \sqrt{M}`, exact;
- :class:`tskernels.FlattenedKernel` with an RBF static kernel: random Fourier features
  (Rahimi & Recht 2007) of the flattened series, :math:`\Phi_j = \sqrt{2/D}\cos(\omega_j^\top
  \mathrm{vec}(x) + b_j)`, :math:`\omega_j \sim \mathcal N(0, \sigma^{-2} I)`,
  :math:`b_j \sim U[0, 2\pi)`, D = ``n_components``;
- :class:`tskernels.IntegralKernel` with an RBF static kernel, equal lengths: each feature
  picks a time index :math:`t_j` with probability equal to its trapezoid weight and
  :math:`\Phi_j = \sqrt{2/D}\cos(\omega_j^\top x_{t_j} + b_j)`, so that
  :math:`E[\Phi(x)^\top\Phi(y)] = \sum_t w_t k(x_t, y_t) = K(x, y)`.

The scorers then see the kernel of the features, :math:`\Phi(x)^\top\Phi(y)`, exactly, and
its diagonal :math:`\|\Phi(x)\|^2` (``transform`` returns it). With ``normalize=True`` the
features are divided by their norm: the cosine normalisation of that kernel (for random Fourier
features, whose :math:`\|\Phi(x)\|^2` is 1 only in expectation, this is the usual
normalised estimator). Any other kernel: use ``approximation="nystroem"``.
"""

from __future__ import annotations

import math
from numbers import Integral, Real

import numpy as np
import scipy.linalg
import torch

from tskernels import SeriesBatch, as_series_batch

from .._constraints import (
    Interval,
    StrOptions,
    validate_arguments,
    validate_parameter_constraints,
)

__all__ = [
    "LANDMARK_RULES",
    "NystroemFeatures",
    "RandomFeatures",
    "make_feature_map",
    "select_landmarks",
]

LANDMARK_RULES = ("uniform", "kmeans++", "leverage")
#: k-means++ draws its landmarks from a uniform pool of at most this many times M series.
KMEANS_POOL = 10
#: Bytes of one chunk of the cross-Gram (rows x M float64) computed at a time.
CHUNK_BYTES = 64 * 2**20


def _batch(X, name: str = "Z") -> SeriesBatch:
    """The series as a checked float64 SeriesBatch: read once here (a SeriesBatch, checked by
    construction, is taken as it is); the kernel casts it to its own dtype and device."""
    return X if isinstance(X, SeriesBatch) else as_series_batch(X, name=name)


#: ``n_components``: a positive int (the one dialect: :mod:`novelty._constraints`).
_N_COMPONENTS = [Interval(Integral, 1, None, closed="left")]


def _chunk_rows(m: int) -> int:
    return max(1, CHUNK_BYTES // (8 * max(1, m)))


def _cross(kernel, X, Z, dz: torch.Tensor, normalize: bool):
    """(K(X, Z), k(x, x)): normalised by sqrt(k(x,x) k(z,z)) when asked (float64 CPU)."""
    K = kernel.gram(X, Z).to(device="cpu", dtype=torch.float64)
    dx = kernel.diag(X).to(device="cpu", dtype=torch.float64)
    if normalize:
        _check_diag(dx, "the series")
        K = K.div_(torch.sqrt(dx)[:, None]).div_(torch.sqrt(dz)[None, :])
        dx = torch.ones_like(dx)
    return K, dx


def _check_diag(d: torch.Tensor, what: str) -> None:
    if d.numel() and not bool((d > 0).all()):
        raise ValueError(
            f"k(x, x) <= 0 for {what} ({float(d.min()):.3g}): the kernel cannot be normalised; "
            "use normalize=False or check the kernel's parameters"
        )


# ---------------------------------------------------------------------- landmarks
@validate_arguments({"n_components": _N_COMPONENTS, "rule": [StrOptions(set(LANDMARK_RULES))]})
def select_landmarks(
    kernel,
    Z,
    n_components: int,
    rule: str = "uniform",
    *,
    normalize: bool = True,
    seed: int = 0,
    candidates=None,
) -> np.ndarray:
    """Indices (into Z) of ``min(n_components, len(candidates))`` landmark series, sorted.

    ``candidates``: the indices landmarks may be drawn from (default: all of Z). With
    ``n_components`` at least the number of candidates, every candidate is a landmark.
    Rules: module docstring.
    """
    M = int(n_components)
    Z = _batch(Z)
    cand = np.arange(len(Z)) if candidates is None else np.asarray(candidates, dtype=int)
    if cand.size == 0:
        raise ValueError("no candidate series for the landmarks")
    if M >= cand.size:
        return np.sort(cand)
    rng = np.random.default_rng(seed)
    if rule == "uniform":
        return np.sort(rng.choice(cand, size=M, replace=False))
    if rule == "kmeans++":
        pool = cand if cand.size <= KMEANS_POOL * M else rng.choice(cand, KMEANS_POOL * M, False)
        return np.sort(pool[_kmeans_pp(kernel, Z[pool], M, normalize, rng)])
    return np.sort(_leverage(kernel, Z, cand, M, normalize, rng))


def _kmeans_pp(kernel, P, M: int, normalize: bool, rng) -> np.ndarray:
    """D^2 sampling of M rows of the pool P in feature space (positions into P)."""
    n = len(P)
    dp = kernel.diag(P).to(device="cpu", dtype=torch.float64)
    if normalize:
        _check_diag(dp, "the landmark pool")
    chosen = [int(rng.integers(n))]
    best = torch.full((n,), math.inf, dtype=torch.float64)
    for _ in range(M - 1):
        j = chosen[-1]
        col = kernel.gram(P, P[[j]])[:, 0].to(device="cpu", dtype=torch.float64)
        if normalize:
            col = col / torch.sqrt(dp * dp[j])
            d2 = 2.0 - 2.0 * col
        else:
            d2 = dp + dp[j] - 2.0 * col
        best = torch.minimum(best, d2.clamp_min(0.0))
        best[chosen] = 0.0
        total = float(best.sum())
        if not total > 0:  # every pool series coincides with a landmark: fill uniformly
            rest = np.setdiff1d(np.arange(n), chosen)
            chosen.extend(rng.choice(rest, M - len(chosen), replace=False).tolist())
            break
        chosen.append(int(rng.choice(n, p=(best / total).numpy())))
    return np.asarray(chosen)


def _leverage(kernel, Z, cand: np.ndarray, M: int, normalize: bool, rng) -> np.ndarray:
    """Approximate ridge-leverage sampling of M candidates (module docstring)."""
    S = rng.choice(cand, size=M, replace=False)
    ZS = Z[S]
    dS = kernel.diag(ZS).to(device="cpu", dtype=torch.float64)
    W = kernel.gram(ZS).to(device="cpu", dtype=torch.float64)
    if normalize:
        _check_diag(dS, "the landmarks")
        W = W / torch.sqrt(dS[:, None] * dS[None, :])
    scores = np.empty(cand.size)
    diag = np.empty(cand.size)
    rows = _chunk_rows(M)
    parts = []
    for i in range(0, cand.size, rows):
        C, dx = _cross(kernel, Z[cand[i : i + rows]], ZS, dS, normalize)
        parts.append((i, C, dx))
        diag[i : i + C.shape[0]] = dx.numpy()
    lam = float(diag.sum()) / M
    # S drawn uniformly (probability M / n each): its columns carry the weight sqrt(n / M),
    # which turns lambda into lambda M / n inside the inverse
    chol = scipy.linalg.cho_factor(W.numpy() + lam * M / cand.size * np.eye(M), lower=True)
    for i, C, dx in parts:
        c = C.numpy()
        quad = np.einsum("ij,ji->i", c, scipy.linalg.cho_solve(chol, c.T))
        scores[i : i + c.shape[0]] = (dx.numpy() - quad) / lam
    top = max(float(scores.max()), 1e-300)
    p = np.clip(scores, 1e-12 * top, None)
    return rng.choice(cand, size=M, replace=False, p=p / p.sum())


# ---------------------------------------------------------------------- Nyström
class NystroemFeatures:
    r"""Nyström feature map of a (fitted) series kernel; module docstring for the formulas.

    Parameters
    ----------
    kernel : a ``tskernels.Kernel`` (fitted already when it ``needs_fit``).
    n_components : int, default 1000, the number M of landmarks.
    landmarks : {"uniform", "kmeans++", "leverage"}, the landmark rule.
    normalize : bool, default True, map the cosine-normalised kernel.
    eig_floor : float, default 1e-10, relative floor on the eigenvalues of W.
    seed : int, default 0.

    Attributes (after ``fit``): ``landmark_indices_`` (into the fitted corpus),
    ``landmarks_`` (the series), ``eigenvalues_`` (the kept :math:`s_m`), ``n_features_``
    (M'), ``transform_`` (Tensor (M, M'), :math:`U_{M'} \operatorname{diag}(s_{M'})^{-1/2}`).

    >>> import numpy as np, tskernels as tk
    >>> X = np.random.default_rng(0).normal(size=(30, 10, 2))
    >>> nys = NystroemFeatures(tk.IntegralKernel(tk.RBF(2.0)), n_components=30).fit(X)
    >>> Phi, diag = nys.transform(X[:4])
    >>> K = tk.IntegralKernel(tk.RBF(2.0)).gram(X[:4])
    >>> bool(torch.allclose(Phi @ Phi.T, K, atol=1e-8))
    True
    """

    _parameter_constraints = {
        "n_components": _N_COMPONENTS,
        "landmarks": [StrOptions(set(LANDMARK_RULES))],
        "eig_floor": [Interval(Real, 0, 1, closed="left")],
    }

    def __init__(
        self,
        kernel,
        n_components: int = 1000,
        *,
        landmarks: str = "uniform",
        normalize: bool = True,
        eig_floor: float = 1e-10,
        seed: int = 0,
    ):
        self.kernel = kernel
        self.n_components = n_components
        self.landmarks = landmarks
        self.normalize = normalize
        self.eig_floor = eig_floor
        self.seed = seed

    def fit(self, Z, candidates=None) -> NystroemFeatures:
        """Choose the landmarks among ``candidates`` (default all of Z) and factor W."""
        declared = {name: getattr(self, name) for name in self._parameter_constraints}
        validate_parameter_constraints(self._parameter_constraints, declared, "NystroemFeatures")
        Z = _batch(Z)
        idx = select_landmarks(
            self.kernel,
            Z,
            self.n_components,
            self.landmarks,
            normalize=bool(self.normalize),
            seed=self.seed,
            candidates=candidates,
        )
        L = Z[idx]
        dz = self.kernel.diag(L).to(device="cpu", dtype=torch.float64)
        W = self.kernel.gram(L).to(device="cpu", dtype=torch.float64)
        if self.normalize:
            _check_diag(dz, "the landmarks")
            W = W / torch.sqrt(dz)[:, None] / torch.sqrt(dz)[None, :]
            W = (W + W.T) / 2
        s, U = scipy.linalg.eigh(W.numpy(), driver="evd", check_finite=False)
        s, U = s[::-1].copy(), U[:, ::-1].copy()
        if not s[0] > 0:
            raise ValueError(
                "the landmarks' Gram has no positive eigenvalue: the kernel is zero on them"
            )
        keep = int((s > self.eig_floor * s[0]).sum())
        self.landmark_indices_ = idx
        self.landmarks_ = L
        self.landmark_diag_ = dz
        self.eigenvalues_ = torch.from_numpy(s[:keep])
        self.transform_ = torch.from_numpy(U[:, :keep] / np.sqrt(s[:keep])[None, :])
        self.n_features_ = keep
        return self

    def transform(self, X) -> tuple[torch.Tensor, torch.Tensor]:
        """(Phi, k(x, x)): float64 Tensors (n, M') and (n,), computed in row chunks."""
        if not hasattr(self, "transform_"):
            raise RuntimeError("this NystroemFeatures is not fitted yet: call fit(Z) first")
        X = _batch(X, "X")
        n = len(X)
        M = self.transform_.shape[0]
        Phi = torch.empty((n, self.n_features_), dtype=torch.float64)
        diag = torch.empty(n, dtype=torch.float64)
        rows = _chunk_rows(M)
        for i in range(0, n, rows):
            C, dx = _cross(
                self.kernel, X[i : i + rows], self.landmarks_,
                self.landmark_diag_, bool(self.normalize),
            )  # fmt: skip
            torch.mm(C, self.transform_, out=Phi[i : i + C.shape[0]])
            diag[i : i + C.shape[0]] = dx
        return Phi, diag

    def __repr__(self) -> str:
        return (
            f"NystroemFeatures({self.kernel!r}, n_components={self.n_components!r}, "
            f"landmarks={self.landmarks!r}, normalize={self.normalize!r})"
        )


# ---------------------------------------------------------------------- explicit features
class RandomFeatures:
    """Explicit (exact or random Fourier) features of a kernel; module docstring.

    Parameters: ``kernel`` (fitted when it ``needs_fit``), ``n_components`` (D, the number of
    random Fourier features; ignored by kernels whose features are exact), ``normalize``,
    ``seed``. ``transform(X)`` returns (Phi, k(x, x)) like :class:`NystroemFeatures`.
    """

    _parameter_constraints = {"n_components": _N_COMPONENTS}

    def __init__(self, kernel, n_components: int = 1000, *, normalize: bool = True, seed=0):
        self.kernel = kernel
        self.n_components = n_components
        self.normalize = normalize
        self.seed = seed

    def fit(self, Z=None, candidates=None) -> RandomFeatures:
        """Check that the kernel has explicit features and draw the random frequencies."""
        import tskernels as tk

        k = self.kernel
        declared = {name: getattr(self, name) for name in self._parameter_constraints}
        validate_parameter_constraints(self._parameter_constraints, declared, "RandomFeatures")
        D = int(self.n_components)
        if isinstance(k, tk.RandomConvolutionKernel):
            static = k.static
            if static is not None and type(static) is not tk.Linear:
                raise ValueError(
                    "approximation='features' needs the random-convolution kernel's linear "
                    f"static kernel, got static={static!r}; use approximation='nystroem'"
                )
            self.kind_ = "rocket"
        elif isinstance(k, tk.RandomizedSignatureKernel):
            self.kind_ = "randsig"
        elif isinstance(k, tk.FlattenedKernel | tk.IntegralKernel) and isinstance(
            k.static if k.static is not None else tk.RBF(), tk.RBF
        ):
            self.kind_ = "flat_rff" if isinstance(k, tk.FlattenedKernel) else "integral_rff"
            self.sigma_ = float((k.static if k.static is not None else tk.RBF()).sigma)
            self.n_features_ = D
        else:
            raise ValueError(
                f"approximation='features' needs a kernel with explicit features "
                "(RandomConvolutionKernel with a linear static kernel, "
                "RandomizedSignatureKernel, FlattenedKernel or IntegralKernel with an RBF static "
                f"kernel), got {type(k).__name__}; use approximation='nystroem'"
            )
        return self

    def _rff(self, d: int, T: int):
        """(t_idx or None, omega (D, dim), b (D,)): drawn once per (T, d), seeded."""
        key = (T, d)
        if getattr(self, "_draws", None) is not None and self._draws[0] == key:
            return self._draws[1]
        D = self.n_features_
        gen = torch.Generator().manual_seed(int(self.seed))
        if self.kind_ == "flat_rff":
            t_idx, dim = None, T * d
        else:
            w = np.full(T, 1.0) if T > 1 else np.ones(1)
            if T > 1:
                w[0] = w[-1] = 0.5
            w = torch.from_numpy(w / w.sum())
            t_idx, dim = torch.multinomial(w, D, replacement=True, generator=gen), d
        omega = torch.randn((D, dim), generator=gen, dtype=torch.float64) / self.sigma_
        b = torch.rand(D, generator=gen, dtype=torch.float64) * (2 * math.pi)
        self._draws = (key, (t_idx, omega, b))
        return t_idx, omega, b

    def transform(self, X) -> tuple[torch.Tensor, torch.Tensor]:
        """(Phi, k(x, x)): float64 Tensors (n, D) and (n,)."""
        if not hasattr(self, "kind_"):
            raise RuntimeError("this RandomFeatures is not fitted yet: call fit first")
        k = self.kernel
        if self.kind_ in ("rocket", "randsig"):
            F = torch.as_tensor(k.features(X)).to(device="cpu", dtype=torch.float64)
            if self.kind_ == "rocket":
                scale = 1.0 / F.shape[1] if k.static is None else float(k.static.scale)
            else:
                scale = 1.0 / int(k.n_features)
            Phi = F * math.sqrt(scale)
            diag = (Phi * Phi).sum(dim=1)
            if self.normalize:
                _check_diag(diag, "the series")
                Phi = Phi / torch.sqrt(diag)[:, None]
                diag = torch.ones_like(diag)
            return Phi, diag
        from tskernels import as_series_batch

        batch = as_series_batch(X, dtype=torch.float64)
        if not batch.equal_length:
            raise ValueError(
                "random Fourier features of the flattened and integral kernels need "
                "equal-length series; use approximation='nystroem'"
            )
        n, T, d = batch.values.shape
        t_idx, omega, b = self._rff(d, T)
        D = omega.shape[0]
        Phi = torch.empty((n, D), dtype=torch.float64)
        rows = _chunk_rows(D if t_idx is None else D * d)  # the gather is (rows, D, d)
        for i in range(0, n, rows):
            V = batch.values[i : i + rows]
            if t_idx is None:
                proj = V.reshape(V.shape[0], T * d) @ omega.T
            else:  # feature j reads time step t_j: (c, D, d) gathered, dotted with omega_j
                proj = (V[:, t_idx, :] * omega[None]).sum(-1)
            Phi[i : i + V.shape[0]] = torch.cos(proj + b) * math.sqrt(2.0 / D)
        # the scorers see the kernel of the features, Phi Phi^T, exactly: its diagonal (1 only
        # in expectation), or normalised
        diag = (Phi * Phi).sum(dim=1)
        if self.normalize:  # in place: no second (n, D) block at the peak
            return Phi.div_(torch.sqrt(diag)[:, None]), torch.ones_like(diag)
        return Phi, diag

    def __repr__(self) -> str:
        return f"RandomFeatures({self.kernel!r}, n_components={self.n_components!r})"


APPROXIMATIONS = ("nystroem", "features")


def make_feature_map(
    kernel, approximation: str, n_components: int, *, landmarks="uniform", normalize=True, seed=0
):
    """An unfitted :class:`NystroemFeatures` or :class:`RandomFeatures`."""
    if approximation == "nystroem":
        return NystroemFeatures(
            kernel, n_components, landmarks=landmarks, normalize=normalize, seed=seed
        )
    if approximation == "features":
        return RandomFeatures(kernel, n_components, normalize=normalize, seed=seed)
    raise ValueError(
        f"`approximation` must be None, 'nystroem' or 'features', got {approximation!r}"
    )
