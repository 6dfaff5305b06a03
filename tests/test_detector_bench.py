"""Pins of the detector benchmark's protocol (experiments.detector_bench): the split of the 58
data sets into tuning / confirmation halves, the class choice and the subsamples of a problem,
and the report format of ``benchmarks/bench_detector.py`` and ``benchmarks/bench_aeon.py``.

The expected texts below were produced by the benchmark scripts as they were before the
protocol moved into the package (``benchmarks/bench_detector.py`` at 541be9d, 1,197 lines) on
the same hand-made rows: the package must give them byte for byte."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import numpy as np
import pytest

from experiments._store import DetectorBenchStore
from experiments.detector_bench import aeon_report, inputs, problems, report
from experiments.detector_bench.store import fetch_rows, write_row

_BENCH = Path(__file__).resolve().parents[1] / "benchmarks"


def script(name: str):
    """A command-line script of ``benchmarks/`` as a module (``benchmarks`` is no package)."""
    spec = importlib.util.spec_from_file_location(f"_script_{name}", _BENCH / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


# -- the halves: the split of the real data sets, pinned ---------------------------------------
UEA = ["ArticularyWordRecognition", "AtrialFibrillation", "BasicMotions", "ERing", "Epilepsy",
       "JapaneseVowels", "Libras", "NATOPS", "RacketSports", "StandWalkJump",
       "UWaveGestureLibrary"]  # fmt: skip
UCR = ["ACSF1", "Adiac", "AllGestureWiimoteX", "AllGestureWiimoteY", "ArrowHead", "BME", "Beef",
       "BeetleFly", "Chinatown", "CricketX", "CricketY", "DiatomSizeReduction", "DodgerLoopDay",
       "DodgerLoopWeekend", "ECGFiveDays", "FaceAll", "FiftyWords", "Fish", "Fungi",
       "GestureMidAirD1", "GestureMidAirD2", "GestureMidAirD3", "GesturePebbleZ1",
       "GesturePebbleZ2", "GunPointMaleVersusFemale", "GunPointOldVersusYoung",
       "InsectEPGRegularTrain", "InsectEPGSmallTrain", "ItalyPowerDemand", "MelbournePedestrian",
       "MiddlePhalanxOutlineCorrect", "MiddlePhalanxTW", "MoteStrain", "PLAID",
       "PickupGestureWiimoteZ", "Plane", "ProximalPhalanxOutlineAgeGroup", "ProximalPhalanxTW",
       "ShakeGestureWiimoteZ", "ShapeletSim", "SonyAIBORobotSurface2", "Strawberry",
       "SwedishLeaf", "SyntheticControl", "WordSynonyms", "Worms", "WormsTwoClass"]  # fmt: skip
#: The tuning half of docs/results_detector.md ("The split"); the other 28 sets confirm.
TUNING = {"ACSF1", "ArrowHead", "ArticularyWordRecognition", "AtrialFibrillation", "Beef",
          "BeetleFly", "CricketX", "CricketY", "DodgerLoopDay", "DodgerLoopWeekend", "Epilepsy",
          "FiftyWords", "Fish", "Fungi", "GestureMidAirD1", "GestureMidAirD2", "GestureMidAirD3",
          "GesturePebbleZ1", "GunPointOldVersusYoung", "InsectEPGRegularTrain",
          "ItalyPowerDemand", "Libras", "NATOPS", "PLAID", "PickupGestureWiimoteZ",
          "ProximalPhalanxOutlineAgeGroup", "RacketSports", "ShapeletSim", "Strawberry",
          "SyntheticControl"}  # fmt: skip


def test_the_split_of_the_58_data_sets_is_pinned():
    split = problems.halves({"uea": UEA, "ucr": UCR})
    assert len(UEA) == 11 and len(UCR) == 47 and len(split) == 58
    assert {d for d, h in split.items() if h == "tuning"} == TUNING
    assert {d for d, h in split.items() if h == "confirmation"} == set(UEA + UCR) - TUNING
    assert len(TUNING & set(UEA)) == 6 and len(TUNING & set(UCR)) == 24
    # the names alone decide: any order of the lists, the same split
    assert problems.halves({"ucr": UCR[::-1], "uea": sorted(UEA, key=len)}) == split


def test_the_split_of_the_data_on_disk_when_present():
    dirs = problems.default_data_dirs()
    if not all(Path(d).is_dir() for d in dirs):
        pytest.skip("data/uea and data/ucr are not unpacked")
    found = problems.list_collections(dirs)
    if sorted(found.get("uea", [])) != sorted(UEA) or sorted(found.get("ucr", [])) != sorted(UCR):
        pytest.skip("another set of data sets on disk")
    assert {d for d, h in problems.half_of(dirs).items() if h == "tuning"} == TUNING


# -- the problems: class choice and subsamples, pinned ----------------------------------------
def test_class_choice_and_subsamples_are_pinned():
    labels = [str(i) for i in range(1, 27)]
    assert problems.choose_classes(labels, 5) == ["7", "10", "13", "16", "18"]
    assert problems.choose_classes(list("abcdefghij"), 5) == list("bdefi")
    # a singleton class: the quota rule (scikit-learn's stratified split refuses it)
    y = np.array(["a"] * 50 + ["b"] * 30 + ["c"] * 19 + ["d"])
    assert problems.subsample_test(y, 12, 0).tolist() == [2, 12, 15, 24, 29, 38, 64, 67, 74,
                                                          79, 90, 97]  # fmt: skip
    y2 = np.repeat(["x", "y", "z"], [20, 15, 10])  # scikit-learn's stratified split
    assert problems.subsample_test(y2, 9, 0).tolist() == [1, 8, 18, 19, 22, 32, 34, 39, 41]
    assert problems.subsample_test(y2, 9, 1).tolist() == [3, 6, 10, 16, 23, 25, 29, 37, 39]
    assert problems.subsample_test(y2, 45, 0).tolist() == list(range(45))
    assert problems.subsample_corpus(15, 6, 0).tolist() == [0, 3, 4, 6, 7, 8]
    assert problems.subsample_corpus(15, 6, 3).tolist() == [0, 2, 3, 8, 12, 13]


def test_problems_of_a_data_set_are_pinned():
    """Series whose value is their index: the corpus and test picks read off directly."""
    ytr = np.array(list("abcabcabcaabbccddeeffgg") * 2)
    yte = np.array(list("abcdefg") * 3)
    Xtr = np.arange(len(ytr), dtype=float).reshape(-1, 1, 1)
    Xte = np.arange(len(yte), dtype=float).reshape(-1, 1, 1)
    got = problems.build_problems(Xtr, ytr, Xte, yte, "Idx", seed=0, max_corpus=4, max_test=10,
                                  max_classes=5)  # fmt: skip
    test = [2, 4, 5, 6, 8, 9, 10, 13, 14, 15]
    want = {"a": [6, 10, 23, 29], "b": [7, 12, 24, 30], "d": [15, 16, 38, 39],
            "f": [19, 20, 42, 43], "g": [21, 22, 44, 45]}  # fmt: skip
    assert [p.cls for p in got] == list(want)
    for p in got:
        assert p.n_classes == 5 and p.seed == 0 and p.dataset == "Idx"
        assert p.corpus.ravel().astype(int).tolist() == want[p.cls]
        assert p.test.ravel().astype(int).tolist() == test
        assert p.y.tolist() == [int(yte[i] != p.cls) for i in test]


def test_peers_resample_with_the_one_resampling_function():
    from novelty._missing import resample_linear

    rng = np.random.default_rng(0)
    X = [rng.normal(size=(T, 2)) for T in (5, 9, 1, 9)]
    got = inputs.to_length(X, 9)
    assert got.shape == (4, 9, 2)
    for x, g in zip(X, got):
        np.testing.assert_array_equal(g, resample_linear(x, 9))
    C, T = inputs.peer_input(X[:2], X[2:])
    assert C.shape == (2, 9, 2) and T.shape == (2, 9, 2)


def test_flattener_is_the_preprocessor_without_basepoint():
    from tskernels.transforms import Preprocessor

    rng = np.random.default_rng(1)
    corpus, test = rng.normal(size=(6, 230, 2)), rng.normal(size=(3, 230, 2)) * 9
    f = inputs.Flattener().fit(corpus)
    want = Preprocessor(basepoint=False).fit(corpus).transform(test)
    np.testing.assert_array_equal(f.transform(test), want.reshape(3, -1))
    assert f.transform(test).shape == (3, 76 * 2) and np.abs(f.transform(test)).max() == 5.0


# -- the report format, pinned -----------------------------------------------------------------
DATASETS = {"uea": ["Ant", "Bee"], "ucr": ["Cat", "Dog", "Eel"]}
METHODS = ("ours_default", "rockad", "rockad_recipe", "pyod_knn", "gak")


def tiny_rows() -> list[dict]:
    """Rows of 5 data sets x 2 classes x 5 methods at seed 0 (ROC-AUC from a fixed formula),
    pyod_knn failing on Bee's class b, gak missing on Eel's class b, and two seed-1 rows."""
    out = []
    for i, ds in enumerate(["Ant", "Bee", "Cat", "Dog", "Eel"]):
        for j, cls in enumerate("ab"):
            for k, m in enumerate(METHODS):
                if m == "gak" and (ds, cls) == ("Eel", "b"):
                    continue
                r = {
                    "dataset": ds,
                    "class": cls,
                    "method": m,
                    "seed": 0,
                    "n_classes": 2,
                    "n_corpus": (5, 25, 100)[(i + j) % 3],
                    "n_test": 40,
                    "expr": "KernelNoveltyDetector(kernel=GAK())" if m == "gak" else "builtin",
                }
                if m == "pyod_knn" and (ds, cls) == ("Bee", "b"):
                    r["error"] = "ValueError: n_neighbors must be >= 1"
                else:
                    r["auc"] = round(0.5 + ((7 * i + 3 * j + 5 * k) % 11) / 22, 4)
                    r["fit_s"] = 0.25 * (1 + i + k)
                    r["score_s"] = None if m == "rockad" and j else 0.125 * (1 + j + k)
                    if not m.startswith("rockad"):
                        r["far"] = ((i + j + k) % 5) / 20
                        r["far_nominal"] = 0.1 if m == "pyod_knn" else 0.05
                out.append(r)
    for m in ("ours_default", "rockad"):
        out.append(
            {
                "dataset": "Ant",
                "class": "a",
                "method": m,
                "seed": 1,
                "n_classes": 2,
                "n_corpus": 30,
                "n_test": 40,
                "expr": "builtin",
                "auc": 0.75,
                "fit_s": 1.0,
            }
        )
    return out


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    """(store, data folders): the rows above in a store, and empty .ts files for the halves
    (which read names only)."""
    root = tmp_path_factory.mktemp("tiny")
    for collection, names in DATASETS.items():
        for n in names:
            (root / collection / n).mkdir(parents=True)
            (root / collection / n / f"{n}_TRAIN.ts").write_text("")
    db = DetectorBenchStore(root / "tiny.sqlite")
    db.set_method("gak", "KernelNoveltyDetector(kernel=GAK())")
    for r in tiny_rows():
        write_row(db, r)
    db.close()
    return root / "tiny.sqlite", [str(root / "uea"), str(root / "ucr")]


#: The outputs of the former scripts (541be9d) on the rows above, by case.
EXPECTED = {
    "report": """\
Mean ROC-AUC over the classes of each data set (anomaly = any other class); `k/n`: classes done so far.

| data set | ours_default | rockad | rockad_recipe | pyod_knn | gak |
|---|---|---|---|---|---|
| Ant | 0.568 | **0.795** | 0.773 | 0.750 | 0.727 |
| Bee | **0.886** | 0.614 | 0.841 | 0.500 | 0.795 |
| Cat | 0.705 | 0.682 | 0.659 | **0.886** | 0.614 |
| Dog | **0.773** | 0.750 | 0.727 | 0.705 | 0.682 |
| Eel | 0.841 | 0.568 | 0.795 | 0.773 | 1/2 |
| **mean** | 0.733 | 0.710 | 0.750 | 0.710 | 0.705 |
| **mean rank** | 2.25 | 2.50 | 2.75 | 3.25 | 4.25 |
| **W/T/L vs rockad** | 3/0/1 | 0/4/0 | 1/0/3 | 1/0/3 | 1/0/3 |

Mean and rank over 4 data set(s); a failed problem (n/a) counts as ROC-AUC 0.5; left out (not complete for every method): Eel. W/T/L: data-set means more than 0.005 above / within 0.005 / below.

| method | mean abs(false alarm - nominal), corpus >= 20 | problems | median fit s | median score s | failed problems |
|---|---|---|---|---|---|
| ours_default | 0.050 | 5 | 0.62 | 0.19 | 0 |
| rockad | - | 0 | 0.88 | 0.25 | 0 |
| rockad_recipe | - | 0 | 1.12 | 0.44 | 0 |
| pyod_knn | 0.075 | 4 | 1.50 | 0.50 | 1 |
| gak | 0.040 | 5 | 1.62 | 0.69 | 0 |
""",  # noqa: E501
    "report confirmation leave-out": """\
Mean ROC-AUC over the classes of each data set (anomaly = any other class); `k/n`: classes done so far.

| data set | gak | ours_default | pyod_knn |
|---|---|---|---|
| Ant | 0.727 | 0.568 | **0.750** |
| Eel | 1/2 | 0.841 | 0.773 |
| **mean** | 0.727 | 0.568 | 0.750 |
| **mean rank** | 2.00 | 3.00 | 1.00 |
| **W/T/L vs gak** | 0/1/0 | 0/0/1 | 1/0/0 |

Mean and rank over 1 data set(s); left out (not complete for every method): Eel. W/T/L: data-set means more than 0.005 above / within 0.005 / below.

| method | mean abs(false alarm - nominal), corpus >= 20 | problems | median fit s | median score s | failed problems |
|---|---|---|---|---|---|
| gak | 0.050 | 1 | 1.25 | 0.69 | 0 |
| ours_default | 0.000 | 1 | 0.25 | 0.19 | 0 |
| pyod_knn | 0.100 | 1 | 1.00 | 0.56 | 0 |
""",  # noqa: E501
    "report tuning seeds 0 1": """\
Mean ROC-AUC over the classes of each data set (anomaly = any other class); `k/n`: classes done so far.

| data set | ours_default | rockad | rockad_recipe | pyod_knn | gak |
|---|---|---|---|---|---|
| Bee | **0.886** | 0.614 | 0.841 | 0.500 | 0.795 |
| Cat | 0.705 | 0.682 | 0.659 | **0.886** | 0.614 |
| Dog | **0.773** | 0.750 | 0.727 | 0.705 | 0.682 |
| **mean** | 0.788 | 0.682 | 0.742 | 0.697 | 0.697 |
| **mean rank** | 1.33 | 3.00 | 3.00 | 3.33 | 4.33 |
| **W/T/L vs rockad** | 3/0/0 | 0/3/0 | 1/0/2 | 1/0/2 | 1/0/2 |

Mean and rank over 3 data set(s); a failed problem (n/a) counts as ROC-AUC 0.5. W/T/L: data-set means more than 0.005 above / within 0.005 / below.

| method | mean abs(false alarm - nominal), corpus >= 20 | problems | median fit s | median score s | failed problems |
|---|---|---|---|---|---|
| ours_default | 0.062 | 4 | 0.75 | 0.19 | 0 |
| rockad | - | 0 | 1.00 | 0.25 | 0 |
| rockad_recipe | - | 0 | 1.25 | 0.44 | 0 |
| pyod_knn | 0.067 | 3 | 1.50 | 0.50 | 1 |
| gak | 0.037 | 4 | 1.75 | 0.69 | 0 |
""",  # noqa: E501
    "halves": """\
tuning (3): Bee, Cat, Dog
confirmation (2): Ant, Eel
""",  # noqa: E501
    "aeon report": """\
| data set | classes | corpus N | test n | ours | rockad | rockad_mean5 | ours fit+score s | rockad fit+score s | rockad_mean5 fit+score s |
|---|---|---|---|---|---|---|---|---|---|
| Ant | 2 | 10-11 | 30 | 0.675 | 0.625 | **0.740** | 1.5 | 1.5 | 17.5 |
| Bee | 2 | 10-11 | 30 | 0.700 | 0.875 | 0/2 | 1.5 | 1.5 | 0.0 |
| Cat | 2 | 10-11 | 30 | 0.725 | 0.675 | 0/2 | 1.5 | 1.5 | 0.0 |
| **mean** | | | | 0.675 | 0.625 | 0.740 |
| **mean rank** | | | | 2.00 | 3.00 | 1.00 |
| **W/T/L of ours vs it** | | | | - | 1/0/0 | 0/0/1 |

Means, ranks and W/T/L over the 1 complete data set(s).
- ours - rockad: mean difference +0.0500 over 1 data sets (Wilcoxon signed-rank p = 1); over 6 problems -0.0250, ours higher on 5, equal on 0, lower on 1 (p = 0.438).
- ours - rockad_mean5: mean difference -0.0650 over 1 data sets (Wilcoxon signed-rank p = 1); over 2 problems -0.0650, ours higher on 0, equal on 0, lower on 2 (p = 0.5).

- ours: median fit 0.50 s, median score 0.25 s per problem; failed problems 0.
- rockad: median fit 0.50 s, median score 0.25 s per problem; failed problems 0.
- rockad_mean5: median fit 7.50 s, median score 1.25 s per problem; failed problems 0.
- rockad: unequal lengths resampled to the corpus's maximum length on Bee (its aeon tags refuse the raw input).
""",  # noqa: E501
}


def test_bench_detector_reports_are_byte_for_byte_pinned(tiny, capsys):
    store, dirs = tiny
    main = script("bench_detector").main
    want = EXPECTED
    cases = {
        "report": [],
        "report confirmation leave-out": ["--half", "confirmation", "--data-dir", *dirs,
                                          "--failed", "leave-out", "--reference", "gak",
                                          "--methods", "gak", "ours_default", "pyod_knn"],
        "report tuning seeds 0 1": ["--seeds", "0", "1", "--half", "tuning", "--data-dir", *dirs],
    }  # fmt: skip
    for name, args in cases.items():
        capsys.readouterr()
        assert main(["report", "--store", str(store), *args]) == 0
        assert capsys.readouterr().out == want[name], name
    assert main(["halves", "--data-dir", *dirs]) == 0
    assert capsys.readouterr().out == want["halves"]


def test_report_functions_give_the_same_text(tiny):
    rows = fetch_rows(tiny[0], [0])
    text = report.report_markdown(rows, failed="chance", reference="rockad")
    assert text + "\n" == EXPECTED["report"]


def test_retired_ours_auto_is_not_run_but_its_stored_rows_report(tiny):
    from experiments.detector_bench import CLIError
    from experiments.detector_bench.methods import GROUPS, RETIRED, parse_extra, resolve_methods

    assert "ours_auto" in RETIRED and GROUPS["ours"] == ["ours_default"]
    assert "ours_auto" not in [m.name for m in resolve_methods(None, [])]
    with pytest.raises(CLIError, match="'ours_auto' is no longer run: kernel='auto' was retired"):
        resolve_methods(["ours_auto"], [])
    with pytest.raises(CLIError, match="built-in \\(or retired\\) method"):
        parse_extra("ours_auto=KernelNoveltyDetector()")
    # rows stored before it was retired: reported, in its former place after ours_default
    rows = fetch_rows(tiny[0], [0])
    old = [{**r, "method": "ours_auto"} for r in rows if r["method"] == "ours_default"]
    text = report.report_markdown(rows + old, failed="chance", reference="rockad")
    header = "| data set | ours_default | ours_auto | rockad | rockad_recipe | pyod_knn | gak |"
    assert header in text


def test_cd_diagram_of_two_methods_is_a_line_not_a_traceback(tiny, tmp_path):
    rows = fetch_rows(tiny[0], [0])
    png = tmp_path / "cd.png"
    line = report.write_cd_diagram(rows, ["rockad", "rockad_recipe"], png, "chance", "t")
    assert line == "no critical-difference diagram: 2 methods (aeon's test needs 3)"
    assert not png.exists()
    line = report.write_cd_diagram(rows, ["ours_default", "pyod_knn", "gak"], png, "chance", "t")
    assert line == "no critical-difference diagram: 4 complete data set(s)"


def aeon_rows() -> list[dict]:
    """JSONL rows of the aeon route: ours at random state 0; ROCKAD at 0-4 on Ant (its
    rockad_mean5), at 0 on Bee and Cat; ROCKAD's inputs resampled on Bee."""
    out = []
    for i, ds in enumerate(["Ant", "Bee", "Cat"]):
        for j, cls in enumerate("ab"):
            for m, states in (("ours", [0]), ("rockad", [0, 1, 2, 3, 4] if ds == "Ant" else [0])):
                for rs in states:
                    note = "unequal lengths resampled to the corpus's maximum length"
                    auc = round(0.55 + ((5 * i + 3 * j + 7 * rs + (m == "ours")) % 9) / 20, 4)
                    out.append({"dataset": ds, "method": m, "random_state": rs, "class": cls,
                                "auc": auc, "ap": 0.5, "fit_s": 0.5 * (1 + rs), "score_s": 0.25,
                                "error": None, "notes": [note] if (m, ds) == ("rockad", "Bee")
                                else [], "n_classes": 2, "n_corpus": 10 + j, "n_test": 30,
                                "n_anomalies": 15})  # fmt: skip
    return out


def test_bench_aeon_report_is_byte_for_byte_pinned(tmp_path, capsys):
    store = tmp_path / "aeon.jsonl"
    store.write_text("".join(json.dumps(r) + "\n" for r in aeon_rows()))
    assert aeon_report.report_markdown(aeon_rows()) + "\n" == EXPECTED["aeon report"]
    capsys.readouterr()
    assert script("bench_aeon").main(["report", "--store", str(store)]) == 0
    assert capsys.readouterr().out == EXPECTED["aeon report"]
    assert script("bench_aeon").main(["report", "--store", str(tmp_path / "none.jsonl")]) == 0
    assert capsys.readouterr().out == "no results yet\n"
