"""Helpers of the detector pool cache (experiments.detector_pool.pool): the signature members
score as the detector's Member does, and a problem file keeps every candidate's arrays."""

import numpy as np
import pytest

from experiments.detector_pool import pool


def _series(seed, n, T=30, d=2):
    rng = np.random.default_rng(seed)
    return np.cumsum(rng.normal(size=(n, T, d)), axis=1)


@pytest.mark.parametrize("group", ["sig", "pdesig"])
def test_signature_group_equals_member(group):
    """The shared-Gram cache of several kNN scorers equals one detector Member per scorer
    (same pre-processing, normalised kernel, exact leave-one-out with copies held out
    together)."""
    from novelty.detector._members import Member, MemberSpec
    from tskernels import SeriesBatch

    Xc = _series(0, 9)
    Xc[4] = Xc[1]  # an exact copy: one held-out unit
    Xt = _series(1, 5)
    res = pool.compute_group(group, Xc, Xt)
    assert sorted(res) == sorted(pool.GROUPS[group])
    pre = pool.sig_preprocessor(Xc)
    Z = pre.transform(SeriesBatch.from_checked(Xc))
    for prefix, kernel in pool.sig_kernels(group, Z).items():
        for name in (c for c in pool.GROUPS[group] if c.startswith(prefix + "_")):
            k = 5 if name.endswith("knn5") else 1
            params = {"n_neighbors": 5, "aggregate": "mean"} if k == 5 else {}
            spec = MemberSpec(
                kernel, "knn", scorer_params=params, preprocess="channel", normalize=True,
                adapt_to_corpus=True,
            )  # fmt: skip
            m = Member(spec).fit(SeriesBatch.from_checked(Xc), {"channel": pre})
            cal, test, secs = res[name]
            assert cal.shape == (8,)  # 9 series, one copy
            np.testing.assert_allclose(cal, m.calibration_, rtol=1e-12, atol=1e-14)
            want = np.asarray(m.novelty(SeriesBatch.from_checked(Xt)))
            np.testing.assert_allclose(test, want, rtol=1e-12, atol=1e-14)
            assert secs > 0


def test_knn_scores_are_kernel_distances():
    """Brute force: the 1-NN test score is min_j sqrt(k(x,x) + k(y_j,y_j) - 2 k(x,y_j)) of
    the normalised kernel on the pre-processed series; mean 5-NN the mean of the 5 smallest."""
    from tskernels import SeriesBatch

    Xc, Xt = _series(2, 8), _series(3, 4)
    res = pool.compute_group("sig", Xc, Xt)
    pre = pool.sig_preprocessor(Xc)
    Zc = pre.transform(SeriesBatch.from_checked(Xc))
    Zt = pre.transform(SeriesBatch.from_checked(Xt))
    assert Zc.d == 3  # two channels and the time channel
    kern = pool.sig_kernels("sig", Zc)["trunc_sig"]
    K = kern.gram(Zt, Zc).numpy()
    a = kern.diag(Zt).numpy()[:, None]
    b = kern.diag(Zc).numpy()[None, :]
    D = np.sqrt(np.clip(2.0 - 2.0 * K / np.sqrt(a * b), 0, None))
    np.testing.assert_allclose(res["trunc_sig_knn1"][1], D.min(axis=1), rtol=1e-9)
    np.testing.assert_allclose(res["trunc_sig_knn5"][1], np.sort(D)[:, :5].mean(1), rtol=1e-9)


def test_sig_rule_follows_the_shape():
    """Parameters come from the pre-processed corpus's shape alone (d' = d + 1 channels) and,
    for the PDE kernel's bandwidth, from the median distance between its time points."""
    from tskernels import SeriesBatch

    X = _series(4, 6, d=3)
    Z = pool.sig_preprocessor(X).transform(SeriesBatch.from_checked(X))
    ks = pool.sig_kernels("sig", Z)
    assert ks["trunc_sig"].scale == pytest.approx(0.5 / 2.0)  # d' = 4
    assert ks["randsig"].scale == pytest.approx(0.1 / 4)
    pde = pool.sig_kernels("pdesig", Z)["pdesig"]
    pts = Z.values.reshape(-1, 4).numpy()
    from scipy.spatial.distance import pdist

    assert pde.static.sigma == pytest.approx(np.median(pdist(pts)), rel=0.25)
    assert pde.amplitude == pytest.approx(0.25)


def test_save_merged_keeps_other_candidates(tmp_path):
    """A write adds its arrays to the file without dropping those another process wrote after
    this one read the file."""
    path = tmp_path / "P__1.npz"
    pool.save_merged(path, {"y": np.array([0, 1]), "a__test": np.array([1.0, 2.0])})
    stale = dict(np.load(path))  # read by process 1
    pool.save_merged(path, {"b__test": np.array([3.0])})  # process 2 writes meanwhile
    stale["c__test"] = np.array([4.0])
    pool.save_merged(path, stale)  # process 1 writes
    got = dict(np.load(path))
    assert sorted(got) == ["a__test", "b__test", "c__test", "y"]
    np.testing.assert_array_equal(got["b__test"], [3.0])
    assert not list(tmp_path.glob("*.tmp.npz"))


def test_only_selects_groups_by_candidate(monkeypatch, tmp_path):
    """``--only`` takes candidate names as well as group names."""
    seen = []
    monkeypatch.setattr(pool, "OUT", tmp_path)

    class Prob:
        dataset, cls = "D", "1"
        corpus, test = [_series(5, 4)[i] for i in range(4)], [_series(6, 2)[i] for i in range(2)]
        y = np.array([0, 1])

    import experiments.detector_bench.problems as problems

    monkeypatch.setattr(problems, "default_data_dirs", lambda: None)
    monkeypatch.setattr(problems, "half_of", lambda dirs: {"D": "tuning"})
    monkeypatch.setattr(problems, "load_problems", lambda *a, **k: [Prob()])

    def fake(group, Xc, Xt):
        seen.append(group)
        return {c: (np.zeros(4), np.zeros(2), 0.0) for c in pool.GROUPS[group]}

    monkeypatch.setattr(pool, "compute_group", fake)
    pool.run("tuning", (0, 1), ["hydra_knn5", "euclid"], None)
    assert seen == ["euclid", "hydra"]
    assert "hydra_knn5__test" in np.load(tmp_path / "tuning" / "D__1.npz").files


def test_shipped_default_takes_gak_on_multivariate_only():
    """combine's ``@mv`` members count on multivariate problems alone: the shipped default is
    the mean of the recipe and MiniRocket 1-NN standardised scores at d = 1, and GAK's joins
    them at d > 1."""
    from experiments.detector_pool import combine

    rng = np.random.default_rng(7)
    cal = {c: rng.normal(size=10) for c in ("rcs_knn5", "rcp_knn1", "gak_knn1")}
    test = {c: rng.normal(size=6) for c in cal}

    def z(c):
        q25, med, q75 = np.quantile(cal[c], [0.25, 0.5, 0.75])
        return (test[c] - med) / (q75 - q25)

    for d, members in ((1, ["rcs_knn5", "rcp_knn1"]), (3, list(cal))):
        p = {"d": d, "n": 10, "cal": cal, "test": test}
        got = combine.ensemble_scores(p, list(combine.SHIPPED))
        np.testing.assert_allclose(got, np.mean([z(c) for c in members], axis=0), rtol=1e-12)
