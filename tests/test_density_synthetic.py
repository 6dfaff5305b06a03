"""2-D synthetic densities: SOSREP vs KDE by held-out log-likelihood (normalised on a grid)."""

import numpy as np

from density import KDE, SOSREP, GaussianKernel, select_bandwidth


def _sample(name, n, rng):
    if name == "mixture":
        c = np.array([[-2.0, 0.0], [2.0, 0.0], [0.0, 2.5]])
        return c[rng.integers(0, 3, n)] + 0.5 * rng.standard_normal((n, 2))
    if name == "rings":
        r, t = rng.choice([1.0, 2.5], n), rng.uniform(0, 2 * np.pi, n)
        return np.c_[r * np.cos(t), r * np.sin(t)] + 0.1 * rng.standard_normal((n, 2))
    if name == "square":
        return rng.uniform(-1, 1, (n, 2))
    t, s = rng.uniform(0, np.pi, n), rng.integers(0, 2, n)  # two moons
    x = np.where(s == 0, np.cos(t), 1 - np.cos(t))
    y = np.where(s == 0, np.sin(t), 0.5 - np.sin(t))
    return np.c_[x, y] + 0.1 * rng.standard_normal((n, 2))


def _heldout_loglik(est, train, test, n_grid=160):
    lo, hi = (
        np.minimum(train.min(0), test.min(0)) - 1.5,
        np.maximum(train.max(0), test.max(0)) + 1.5,
    )
    axes = [np.linspace(lo[i], hi[i], n_grid) for i in range(2)]
    G = np.stack(np.meshgrid(*axes, indexing="ij"), -1).reshape(-1, 2)
    cell = (axes[0][1] - axes[0][0]) * (axes[1][1] - axes[1][0])
    lg = est.score_samples(G)
    log_z = np.log(np.exp(lg - lg.max()).sum() * cell) + lg.max()
    return float((est.score_samples(test) - log_z).mean())


def test_sosrep_at_least_kde_on_three_of_four():
    grid = np.geomspace(0.05, 1.0, 7)
    wins, table = 0, {}
    for name in ("mixture", "rings", "square", "moons"):
        rng = np.random.default_rng(0)
        train, test = _sample(name, 400, rng), _sample(name, 400, rng)
        sos = select_bandwidth(SOSREP(GaussianKernel()), train, grid, seed=0)
        kde = select_bandwidth(KDE(GaussianKernel()), train, grid, seed=0)
        ls, lk = _heldout_loglik(sos, train, test), _heldout_loglik(kde, train, test)
        table[name] = (ls, lk)
        wins += ls >= lk
    assert wins >= 3, table


def test_grid_normalisation_of_kde_is_close_to_one():
    # KDE is a normalised density: its grid integral must be ~1 (checks the grid itself)
    rng = np.random.default_rng(1)
    train = _sample("mixture", 200, rng)
    kde = KDE(GaussianKernel(0.4)).fit(train)
    axes = [np.linspace(-6, 6, 240)] * 2
    G = np.stack(np.meshgrid(*axes, indexing="ij"), -1).reshape(-1, 2)
    cell = (axes[0][1] - axes[0][0]) ** 2
    assert np.exp(kde.score_samples(G)).sum() * cell == __import__("pytest").approx(1.0, abs=1e-3)
