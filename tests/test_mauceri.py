"""The published one-class protocol (experiments/mauceri.py): AUROC orientation, the 1-NN
against a brute-force loop, the problems, resumable results, the report's target line and the
command line's errors. Tiny synthetic data only."""

from __future__ import annotations

import itertools

import numpy as np
import pandas as pd
import pytest

from experiments import mauceri as M


# -- the protocol's AUROC ----------------------------------------------------------------------
def _auroc_pairs(is_normal, normality) -> float:
    """Brute force: over every (normal, anomaly) pair, 1 when the normal scores higher, 1/2 on
    a tie, x 100."""
    pos = [s for s, n in zip(normality, is_normal) if n]
    neg = [s for s, n in zip(normality, is_normal) if not n]
    wins = sum(1.0 if p > q else 0.5 if p == q else 0.0 for p, q in itertools.product(pos, neg))
    return 100.0 * wins / (len(pos) * len(neg))


def test_auroc_normal_class_is_positive():
    y = np.array([True, True, False, False, False])
    assert M.protocol_auroc(y, [5.0, 4.0, 1.0, 2.0, 0.0]) == 100.0  # normals most normal
    assert M.protocol_auroc(y, [-5.0, -4.0, 1.0, 2.0, 0.0]) == 0.0  # the other way round
    assert M.protocol_auroc(y, np.zeros(5)) == 50.0  # ties count one half


def test_auroc_equals_the_pair_count():
    rng = np.random.default_rng(0)
    for _ in range(20):
        y = rng.random(23) < 0.4
        y[:2] = [True, False]
        s = np.round(rng.normal(size=23), 1)  # ties on purpose
        assert M.protocol_auroc(y, s) == pytest.approx(_auroc_pairs(y, s), abs=1e-9)


@pytest.mark.parametrize(
    "y, s, match",
    [
        ([True, True], [1.0, 2.0], "both normal and anomalous"),
        ([True, False], [1.0, np.nan], "non-finite"),
        ([True, False], [1.0], "1 scores for 2"),
    ],
)
def test_auroc_refuses_what_it_cannot_compute(y, s, match):
    with pytest.raises((ValueError, FloatingPointError), match=match):
        M.protocol_auroc(y, s)


# -- the 1-NN ----------------------------------------------------------------------------------
def test_euclidean_1nn_against_a_loop():
    rng = np.random.default_rng(1)
    C, T = rng.normal(size=(7, 12, 2)), rng.normal(size=(9, 12, 2))
    want = np.array(
        [-min(np.sqrt(((t - c) ** 2).sum()) for c in C) for t in T]  # one pair at a time
    )
    got = M.Euclidean1NN().fit(C).score_samples(T)
    np.testing.assert_allclose(got, want, rtol=1e-12)
    # a corpus series scores 0 (its own nearest neighbour), every other series less
    np.testing.assert_allclose(M.Euclidean1NN().fit(C).score_samples(C), 0.0, atol=1e-7)


def test_euclidean_1nn_refuses_other_lengths():
    det = M.Euclidean1NN().fit(np.zeros((3, 10, 1)))
    with pytest.raises(ValueError, match="12 values, the corpus's 10"):
        det.score_samples(np.zeros((2, 12, 1)))


def test_peer_input_fills_and_resamples():
    x = np.array([[0.0], [np.nan], [2.0], [3.0]])
    y = np.array([[0.0], [1.0]])
    out = M.peer_input([x, y], 4)
    np.testing.assert_allclose(out[0, :, 0], [0.0, 1.0, 2.0, 3.0])  # NaN interpolated
    np.testing.assert_allclose(out[1, :, 0], [0.0, 1 / 3, 2 / 3, 1.0])  # ends kept
    det = M.PeerInput(M.Euclidean1NN()).fit([x, np.arange(3.0)[:, None]])
    assert det.length_ == 4
    assert det.score_samples([np.array([[0.0], [1.0], [2.0], [3.0]])])[0] == pytest.approx(0.0)


# -- the problems ------------------------------------------------------------------------------
def test_class_problems_follow_the_protocol():
    Xtr = np.arange(6 * 4, dtype=float).reshape(6, 4, 1)
    ytr = np.array(["b", "a", "b", "10", "a", "2"])
    Xte = -np.arange(5 * 4, dtype=float).reshape(5, 4, 1)
    yte = np.array(["a", "b", "2", "10", "a"])
    probs = M.class_problems(Xtr, ytr, Xte, yte, "toy")
    assert [p.cls for p in probs] == ["2", "10", "a", "b"]  # natural order
    a = probs[2]
    np.testing.assert_array_equal(a.corpus, Xtr[[1, 4]])  # every TRAIN series of the class
    assert a.test is Xte  # the whole TEST split
    np.testing.assert_array_equal(a.is_normal, [True, False, False, False, True])


# -- resumable results -------------------------------------------------------------------------
def _write_ts(path, X, y):
    labels = " ".join(sorted(set(y)))
    lines = ["@problemName toy", "@timeStamps false", "@missing false", "@univariate true",
             "@equalLength true", f"@seriesLength {X.shape[1]}", f"@classLabel true {labels}",
             "@data"]  # fmt: skip
    lines += [",".join(f"{v:.6f}" for v in x) + f":{c}" for x, c in zip(X, y)]
    path.write_text("\n".join(lines) + "\n")


@pytest.fixture
def toy_data(tmp_path):
    rng = np.random.default_rng(2)
    root = tmp_path / "ucr"
    (root / "Toy").mkdir(parents=True)
    y_tr, y_te = np.repeat(["1", "2", "3"], 4), np.repeat(["1", "2", "3"], 5)
    shift = {"1": 0.0, "2": 3.0, "3": -3.0}
    for split, y in (("TRAIN", y_tr), ("TEST", y_te)):
        X = rng.normal(size=(len(y), 10)) + np.array([shift[c] for c in y])[:, None]
        _write_ts(root / "Toy" / f"Toy_{split}.ts", X, y)
    return root


class _Counting(M.Euclidean1NN):
    fits = 0

    def fit(self, X):
        type(self).fits += 1
        return super().fit(X)


class _Failing:
    def fit(self, X):
        raise RuntimeError("broken\non two lines")


def test_run_resumes_and_reruns(toy_data, tmp_path):
    res = tmp_path / "res"
    counting = M.Method("count", _Counting, "test:_Counting")
    out = M.run([counting], ["Toy"], toy_data, res, log=lambda *a, **k: None)
    assert out == dict(computed=3, skipped=0, errors=0) and _Counting.fits == 3
    rows = M.read_cells(res)
    assert sorted(r["class"] for r in rows) == ["1", "2", "3"]
    assert all(r["auroc"] == 100.0 and r["n_corpus"] == "4" and r["n_test"] == "15"
               and r["n_normal_test"] == "5" and r["commit"] for r in rows)  # fmt: skip
    # a second run computes nothing; a cell removed is the only one computed again
    assert M.run([counting], ["Toy"], toy_data, res, log=lambda *a, **k: None)["computed"] == 0
    M.cell_path(res, "Toy", "2", "count").unlink()
    assert M.run([counting], ["Toy"], toy_data, res, log=lambda *a, **k: None)["computed"] == 1
    assert _Counting.fits == 4
    # --rerun recomputes every cell of the method
    out = M.run([counting], ["Toy"], toy_data, res, rerun=("count",), log=lambda *a, **k: None)
    assert out["computed"] == 3 and _Counting.fits == 7
    assert not list(res.glob("**/.*.tmp"))  # no temporary file left


def test_run_records_errors_and_retries_them(toy_data, tmp_path):
    res = tmp_path / "res"
    failing = M.Method("bad", _Failing, "test:_Failing")
    assert M.run([failing], ["Toy"], toy_data, res, log=lambda *a, **k: None)["errors"] == 3
    rows = M.read_cells(res)
    assert {r["error"] for r in rows} == {"RuntimeError: broken on two lines"}
    assert all(r["auroc"] is None for r in rows)
    assert M.run([failing], ["Toy"], toy_data, res, log=lambda *a, **k: None)["computed"] == 0
    out = M.run([failing], ["Toy"], toy_data, res, retry_errors=True, log=lambda *a, **k: None)
    assert out["computed"] == 3


def test_report_target_line_and_protocol_check(toy_data, tmp_path):
    res = tmp_path / "res"
    M.run([M.METHODS["euclid_1nn"]], ["Toy"], toy_data, res, log=lambda *a, **k: None)
    rows = M.read_cells(res)
    # a "default" whose per-class figures are 80, 90, 100: mean 90
    rows += [dict(r, method="default", auroc=a) for r, a in zip(rows, (80.0, 90.0, 100.0))]
    ref = pd.DataFrame([{c: 50.0 for c in M.THEIR_COLUMNS}], index=pd.Index(["Toy"]))
    ref.loc["Toy", "Euclidean"] = 100.0
    ref.loc["Toy", "MSM"] = 95.0
    md = M.report_markdown(rows, ref, "cmd", toy_data, ["default"])
    assert "max |ours - theirs| = 0.0000" in md and "Every set within 0.01." in md
    assert "**missed** (90.00 against 100.00, -10.00, over 1 of 1 sets;" in md
    ref.loc["Toy", "Euclidean"] = ref.loc["Toy", "MSM"] = 85.0
    md = M.report_markdown(rows, ref, "cmd", toy_data, ["default"])
    assert "**met** (90.00 against 85.00, +5.00" in md
    assert "Sets differing by more than 0.01: Toy (+15.0000)" in md


def test_mean_ranks_share_ties():
    t = pd.DataFrame({"a": [3.0, 1.0], "b": [3.0, 2.0], "c": [1.0, 3.0]})
    assert M.mean_ranks(t) == {"a": 2.25, "b": 1.75, "c": 2.0}  # (1.5+3)/2, (1.5+2)/2, (3+1)/2


# -- specs and the command line ----------------------------------------------------------------
def test_method_from_spec():
    m = M.method_from_spec("e=experiments.mauceri:Euclidean1NN")
    assert m.name == "e" and isinstance(m.build(), M.Euclidean1NN)
    for bad in ("e", "e=experiments.mauceri", "e=no_such_module_x:f", "e=experiments:nope"):
        with pytest.raises(M.MauceriError):
            M.method_from_spec(bad)


def test_default_method_is_the_detector_at_run_time():
    from novelty import KernelNoveltyDetector

    det = M.METHODS["default"].build()
    assert type(det) is KernelNoveltyDetector
    assert det.get_params() == KernelNoveltyDetector().get_params()


def test_cli_errors_are_one_line(tmp_path, capsys):
    from experiments.__main__ import main

    assert main(["mauceri", "report", "--reference", str(tmp_path / "none.csv")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: --reference") and err.count("\n") == 1
    ref = tmp_path / "ref.csv"
    pd.DataFrame([{"Dataset": "Toy", **{c: 50.0 for c in M.THEIR_COLUMNS}}]).to_csv(ref)
    args = ["mauceri", "run", "--reference", str(ref), "--data-dir", str(tmp_path),
            "--results", str(tmp_path / "r")]  # fmt: skip
    assert main(args + ["--methods", "nope"]) == 2
    assert "unknown method 'nope'" in capsys.readouterr().err
    assert main(args) == 2
    assert "no data folder for Toy" in capsys.readouterr().err


def test_recipe_is_the_mean_distance_to_the_5_nearest_standardised_features():
    rng = np.random.default_rng(3)
    C, T = rng.normal(size=(8, 30, 1)), rng.normal(size=(4, 30, 1))
    det = M.RocketRecipe(random_state=0, num_kernels=84).fit(C)
    FC = det.rocket_.transform(np.ascontiguousarray(C.transpose(0, 2, 1))).to_numpy()
    FT = det.rocket_.transform(np.ascontiguousarray(T.transpose(0, 2, 1))).to_numpy()
    mu, sd = FC.mean(axis=0), FC.std(axis=0)
    sd[sd == 0] = 1.0  # scikit-learn's rule for a constant feature
    ZC, ZT = (FC - mu) / sd, (FT - mu) / sd
    want = [-np.mean(sorted(np.sqrt(((z - c) ** 2).sum()) for c in ZC)[:5]) for z in ZT]
    np.testing.assert_allclose(det.score_samples(T), want, rtol=1e-6)  # float32 features
    small = M.RocketRecipe(num_kernels=84).fit(C[:3])  # fewer than 5 corpus series: all of them
    assert small.nn_.n_neighbors == 3


def test_provenance_sees_uncommitted_and_untracked_changes(tmp_path, monkeypatch):
    import subprocess

    def git(*args):
        subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", *args],
                       cwd=tmp_path, check=True, capture_output=True)  # fmt: skip

    (tmp_path / "novelty").mkdir()
    (tmp_path / "novelty" / "a.py").write_text("x = 1\n")
    (tmp_path / "other.py").write_text("y = 1\n")
    git("init", "-q")
    git("add", ".")
    git("commit", "-q", "-m", "one")
    monkeypatch.setattr(M, "REPO", tmp_path)
    commit, local = M.provenance()
    assert len(commit) == 40 and local == ""
    (tmp_path / "other.py").write_text("y = 2\n")  # outside novelty/ and tskernels/
    assert M.provenance() == (commit, "")
    (tmp_path / "novelty" / "a.py").write_text("x = 2\n")
    edited = M.provenance()[1]
    assert edited.startswith("local:") and len(edited) == 18
    (tmp_path / "novelty" / "b.py").write_text("z = 1\n")  # untracked
    untracked = M.provenance()[1]
    assert untracked.startswith("local:") and untracked != edited
    (tmp_path / "novelty" / "b.py").write_text("z = 2\n")
    assert M.provenance()[1] not in (edited, untracked)


def test_report_keeps_hand_written_notes(toy_data, tmp_path):
    from experiments.__main__ import main

    res = tmp_path / "res"
    M.run([M.METHODS["euclid_1nn"]], ["Toy"], toy_data, res, log=lambda *a, **k: None)
    ref = tmp_path / "ref.csv"
    pd.DataFrame([{"Dataset": "Toy", **{c: 50.0 for c in M.THEIR_COLUMNS}}]).to_csv(ref)
    out = tmp_path / "report.md"
    args = ["mauceri", "report", "--reference", str(ref), "--data-dir", str(toy_data),
            "--results", str(res), "--out", str(out)]  # fmt: skip
    assert main(args) == 0
    first = out.read_text()
    assert M.NOTES_MARK not in first and "| Toy | 3 |" in first
    out.write_text(first + "\n" + M.NOTES_MARK + "\nmy note\n")
    assert main(args) == 0 and main(args) == 0  # rewritten twice: the notes kept once
    text = out.read_text()
    assert text.count("my note") == 1 and text.startswith(first)
