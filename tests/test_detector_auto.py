"""The default recipe, the label-free selection (scorer="auto"; select_members with given
kernels), the retired kernel="auto", the synthetic anomalies, and the detector's input handling
across containers."""

import warnings

import numpy as np
import pytest
from scipy.stats import norm
from sklearn.metrics import roc_auc_score

from novelty import KernelNoveltyDetector
from novelty.__main__ import main
from novelty.detector._auto import SELECTION_ALPHA, _decide, proxy_aucs, select_members
from novelty.detector._perturbations import PERTURBATIONS, corpus_scale, perturb
from tskernels import GAK, RBF, FlattenedKernel, IntegralKernel


def _walks(n, T=24, d=3, seed=0):
    rng = np.random.default_rng(seed)
    return np.cumsum(rng.normal(size=(n, T, d)), axis=1)


def _sines(n, T=40, d=2, seed=0, freq=1.0):
    rng = np.random.default_rng(seed)
    t = np.linspace(0, 2 * np.pi, T)
    phase = rng.uniform(0, 0.3, size=(n, 1, d))
    return np.sin(freq * t[None, :, None] + phase) + 0.1 * rng.normal(size=(n, T, d))


# ---------------------------------------------------------------- perturbations
@pytest.mark.parametrize("kind", sorted(PERTURBATIONS))
def test_perturbations_change_the_series_and_keep_the_shape(kind):
    x = _walks(1, T=50)[0]
    sigma = corpus_scale(_walks(10, T=50))
    y1 = perturb(x, kind, sigma, np.random.default_rng(3))
    y2 = perturb(x, kind, sigma, np.random.default_rng(3))
    assert y1.shape == x.shape and np.isfinite(y1).all()
    np.testing.assert_array_equal(y1, y2)  # seeded
    assert np.abs(y1 - x).max() > 1e-3


def test_perturbations_on_short_and_univariate_series():
    sigma = np.ones(1)
    for kind in PERTURBATIONS:
        for T in (1, 2, 3, 5):
            y = perturb(np.arange(T, dtype=float)[:, None], kind, sigma, np.random.default_rng(0))
            assert y.shape == (T, 1) and np.isfinite(y).all()
    with pytest.raises(ValueError, match="unknown perturbation"):
        perturb(np.ones((5, 1)), "shuffle", sigma, np.random.default_rng(0))


# ---------------------------------------------------------------- default and auto
def test_default_detector_separates_obvious_outliers():
    # random walks x10 in amplitude (the reproducer): every seed near 1.0
    for seed in range(3):
        X = _walks(30, seed=seed)
        Y = np.concatenate([_walks(20, seed=seed + 100), 10 * _walks(10, seed=seed + 200)])
        y = np.r_[np.zeros(20), np.ones(10)]
        det = KernelNoveltyDetector().fit(X)
        assert roc_auc_score(y, -det.score_samples(Y)) > 0.95
        names = [m.spec.name for m in det.members_]
        assert names == ["minirocket_std+knn(k=5)", "minirocket+knn", "gak+knn"]


def test_selection_table_and_members():
    X = _sines(24, seed=1)
    kernels = [FlattenedKernel(RBF(4.0)), GAK(), IntegralKernel(RBF(1.0))]
    specs, table = select_members(X, kernels=kernels, max_time=1e9, random_state=0)
    assert {"kernel", "scorer", "score", "status", "chosen", "vs_baseline", "z"} <= set(
        table.columns
    )
    assert {f"auc_{k}" for k in PERTURBATIONS} <= set(table.columns)
    assert int(table["chosen"].sum()) == 1
    # the baseline: the first kernel with the 1-NN scorer
    base = table[table["kernel"] == "baseline"].iloc[0]
    assert base["scorer"] == "FlattenedKernel+knn" and base["vs_baseline"] == 0.0
    first = table[table["candidate"] == "FlattenedKernel+knn"].iloc[0]
    assert base["score"] == first["score"]
    top = table[table["kernel"] == "top"].iloc[0]
    ok = table[(table["status"] == "ok") & ~table["kernel"].isin(["top", "baseline"])]
    best_per_kernel = ok.groupby("kernel")["score"].max().sort_values(ascending=False)
    # "top": the best scorer of each of the two best kernels
    assert {lb.split("+")[0] for lb in top["scorer"].split(" + ")} == set(best_per_kernel.index[:2])
    chosen = table[table["chosen"]].iloc[0]
    alternatives = table[(table["status"] == "ok") & (table["kernel"] != "baseline")]
    critical = norm.ppf(1 - SELECTION_ALPHA / len(alternatives))
    best = alternatives.sort_values("score", ascending=False).iloc[0]
    if best["z"] > critical:
        assert chosen["score"] == best["score"]
    else:  # no evidence against the baseline: kept
        assert chosen["kernel"] == "baseline"
        assert [s.name for s in specs] == ["FlattenedKernel+knn"]
    # the detector with scorer="auto" (one kernel: no "top") detects another frequency
    det = KernelNoveltyDetector(GAK(), scorer="auto", random_state=0).fit(X)
    assert set(det.selection_["kernel"]) == {"GlobalAlignmentKernel", "baseline"}
    Y = np.concatenate([_sines(10, seed=2), _sines(10, seed=3, freq=2.0)])
    y = np.r_[np.zeros(10), np.ones(10)]
    assert roc_auc_score(y, -det.score_samples(Y)) > 0.9


def test_proxy_auc_equals_sklearn_and_its_bootstrap_form():
    rng = np.random.default_rng(0)
    normal = rng.normal(size=30).round(1)  # ties included
    anomalies = np.stack([rng.normal(size=30).round(1) + m for m in (0.0, 1.0, 3.0)])
    y = np.r_[np.zeros(30), np.ones(30)]
    want = [roc_auc_score(y, np.r_[normal, a]) for a in anomalies]
    np.testing.assert_allclose(proxy_aucs(normal, anomalies), want, rtol=1e-12)
    # bootstrap counts = the AUC of the resampled series (each with its anomalies)
    W = rng.multinomial(30, np.full(30, 1 / 30), size=4)
    got = proxy_aucs(normal, anomalies, weights=W)
    for b in range(4):
        idx = np.repeat(np.arange(30), W[b])
        yb = np.r_[np.zeros(30), np.ones(30)]
        ref = [roc_auc_score(yb, np.r_[normal[idx], a[idx]]) for a in anomalies]
        np.testing.assert_allclose(got[b], ref, rtol=1e-12)


def test_selection_departs_from_the_baseline_only_on_evidence():
    rng = np.random.default_rng(1)
    n = 60
    normal = rng.normal(size=n)

    def option(shift):  # anomalies of two kinds, `shift` above the normal scores
        return normal, np.stack([normal + shift + 0.3 * rng.normal(size=n) for _ in range(2)])

    base = option(0.2)
    # a far better candidate: chosen; a marginally better one: the baseline stays
    choice, stats = _decide({"baseline": base, "a": option(3.0)}, "baseline", 200, 0)
    assert choice == "a" and stats["a"][1] > 5
    # a candidate as good in expectation (the same anomalies with fresh noise): not chosen
    same = (normal, base[1] + 0.3 * rng.normal(size=base[1].shape))
    choice, stats = _decide({"baseline": base, "b": same}, "baseline", 200, 0)
    assert choice == "baseline" and stats["baseline"] == (0.0, 0.0)
    assert abs(stats["b"][1]) < norm.ppf(1 - SELECTION_ALPHA)
    # no baseline: the highest proxy
    assert _decide({"x": option(0.1), "y": option(2.0)}, None, 200, 0)[0] == "y"


def test_auto_is_deterministic_and_respects_max_time():
    X = _sines(15, seed=4)
    a = KernelNoveltyDetector(GAK(), scorer="auto", random_state=3).fit(X)
    b = KernelNoveltyDetector(GAK(), scorer="auto", random_state=3).fit(X)
    np.testing.assert_array_equal(a.score_samples(X[:3]), b.score_samples(X[:3]))
    assert a.selection_.drop(columns="seconds").equals(b.selection_.drop(columns="seconds"))
    quick = KernelNoveltyDetector(GAK(), scorer="auto", max_time=1e-6).fit(X)
    # even the baseline's evaluation would overrun: no selection, the kernel's 1-NN kept
    assert "kept the baseline without selection" in quick.selection_["status"].iloc[0]
    assert [m.spec.name for m in quick.members_] == ["GlobalAlignmentKernel+knn"]


def test_kernel_auto_is_retired_with_a_clear_error():
    X = _sines(10, seed=6)
    det = KernelNoveltyDetector(kernel="auto")
    with pytest.raises(ValueError) as err:
        det.fit(X)
    message = str(err.value)
    assert message.startswith("kernel='auto' was retired: ")
    # one sentence: why (the measurement) and what to use
    assert ". " not in message and "\n" not in message
    for part in ("tuning half", "docs/results_detector.md", "kernel=None", "scorer='auto'"):
        assert part in message
    assert not hasattr(det, "members_")  # refused before any work
    # max_time serves scorer="auto"; any other string kernel still gets the registry's hint
    with pytest.raises(ValueError, match="For the registered kernel 'gak' pass an instance"):
        KernelNoveltyDetector(kernel="gak").fit(X)


def test_cli_kernel_auto_is_retired_with_a_one_line_error(tmp_path, capsys):
    import cli_helpers

    data = cli_helpers.write_long(tmp_path / "normal.csv", cli_helpers.series(6))
    argv = ["fit", str(data), "--model", str(tmp_path / "m.model"), "--kernel", "auto"]
    with pytest.raises(SystemExit) as code:
        main(argv)
    assert code.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "'auto' was retired" in err
    assert "docs/results_detector.md" in err and not (tmp_path / "m.model").exists()
    # --kernel default is the default recipe
    rc = main(argv[:-1] + ["default", "--quiet"])
    assert rc == 0 and (tmp_path / "m.model").exists()
    assert KernelNoveltyDetector.load(tmp_path / "m.model").get_params()["kernel"] is None


def test_auto_scorer_with_a_given_kernel():
    X = _sines(20, seed=5)
    det = KernelNoveltyDetector(IntegralKernel(RBF(2.0)), scorer="auto").fit(X)
    table = det.selection_
    assert set(table["kernel"]) == {"IntegralKernel", "baseline"}  # one kernel: no "top"
    assert table[table["kernel"] == "baseline"]["scorer"].iloc[0] == "IntegralKernel+knn"
    assert len(det.members_) == 1


# ---------------------------------------------------------------- containers and layouts
def test_same_series_in_any_container_give_identical_scores():
    from sktime.datatypes import convert_to

    X, Y = _walks(20, T=15, seed=6), _walks(5, T=15, seed=7)
    ref = KernelNoveltyDetector(GAK(sigma=3.0)).fit(X).score_samples(Y)
    as_list = KernelNoveltyDetector(GAK(sigma=3.0)).fit(list(X)).score_samples(list(Y))
    np.testing.assert_array_equal(ref, as_list)
    for mtype in ("pd-multiindex", "nested_univ", "df-list"):
        Xp = convert_to(np.swapaxes(X, 1, 2), to_type=mtype, as_scitype="Panel")
        Yp = convert_to(np.swapaxes(Y, 1, 2), to_type=mtype, as_scitype="Panel")
        got = KernelNoveltyDetector(GAK(sigma=3.0)).fit(Xp).score_samples(Yp)
        np.testing.assert_allclose(got, ref, rtol=1e-12)


def test_numpy3d_layout_is_warned_not_transposed():
    X = _walks(12, T=5, d=20)  # d > T: looks like sktime's (n, d, T)
    with pytest.warns(UserWarning, match="more channels than time steps"):
        det = KernelNoveltyDetector(GAK(sigma=3.0)).fit(X)
    assert det.n_channels_ == 20


def test_single_series_gets_a_message():
    X = _walks(12, T=15, d=3)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        det = KernelNoveltyDetector(GAK(sigma=3.0)).fit(X)
    with pytest.raises(ValueError, match=r"reads two ways: pass one recording .* as X\[None\]"):
        det.score_samples(X[0])


def test_other_lengths_are_scored_when_the_kernel_allows():
    X = _walks(20, T=30, seed=8)
    det = KernelNoveltyDetector(GAK(sigma=3.0)).fit(X)
    s = det.score_samples([_walks(1, T=T, seed=T)[0] for T in (20, 30, 45)])
    assert s.shape == (3,) and np.isfinite(s).all()
    step = KernelNoveltyDetector(GAK(sigma=3.0), preprocess="step").fit(X)
    with pytest.raises(ValueError, match="same length"):
        step.score_samples(_walks(2, T=20))


def test_tslearn_padding_is_read_as_unequal_lengths():
    from tslearn.utils import to_time_series_dataset

    rng = np.random.default_rng(9)
    series = [np.cumsum(rng.normal(size=(T, 2)), axis=0) for T in (12, 15, 9, 14, 11) * 4]
    det = KernelNoveltyDetector(GAK(sigma=3.0)).fit(to_time_series_dataset(series))
    ref = KernelNoveltyDetector(GAK(sigma=3.0)).fit(series)
    np.testing.assert_allclose(
        det.score_samples(series[:3]), ref.score_samples(series[:3]), rtol=1e-12
    )
