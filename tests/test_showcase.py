"""`make run`'s showcase (issue 34, item 3): ROCKAD's recipe written out, the conformal flag
rule it is given, the table, and one activity of BasicMotions end to end."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.spatial.distance import cdist

from experiments import showcase


def test_conformal_flags_brute_force():
    rng = np.random.default_rng(0)
    cal, s = rng.normal(size=19), rng.normal(size=50) * 2
    flags = showcase.conformal_flags(s, cal, 0.1)
    for v, f in zip(s, flags):
        p = (1 + sum(c >= v for c in cal)) / 20
        assert f == (p <= 0.1)
    assert showcase.conformal_flags([np.inf], cal, 0.05).tolist() == [True]  # p = 1/20
    assert showcase.conformal_flags([-np.inf], cal, 0.5).tolist() == [False]  # p = 1


def test_rockad_recipe_is_mean_knn_distance_on_standardised_minirocket():
    from sklearn.preprocessing import StandardScaler
    from sktime.transformations.panel.rocket import MiniRocketMultivariate

    rng = np.random.default_rng(1)
    train = np.cumsum(rng.normal(size=(12, 30, 2)), axis=1)
    test = np.concatenate([train[:3] + 0.01, 5 * rng.normal(size=(3, 30, 2))])
    novelty, loo = showcase.rockad_recipe(train, test)
    rocket = MiniRocketMultivariate(random_state=0, n_jobs=1)
    F = np.asarray(rocket.fit_transform(train.transpose(0, 2, 1)), dtype=float)
    G = np.asarray(rocket.transform(test.transpose(0, 2, 1)), dtype=float)
    sc = StandardScaler().fit(F)
    D = cdist(sc.transform(G), sc.transform(F))
    np.testing.assert_allclose(novelty, np.sort(D, axis=1)[:, :5].mean(axis=1), rtol=1e-8)
    DD = cdist(sc.transform(F), sc.transform(F))
    np.fill_diagonal(DD, np.inf)  # held out: a corpus series is not its own neighbour
    np.testing.assert_allclose(loo, np.sort(DD, axis=1)[:, :5].mean(axis=1), rtol=1e-8)
    assert novelty[3:].min() > novelty[:3].max()  # the noise series are the novel ones


def test_format_table_has_one_row_per_activity_and_a_mean():
    row = {"activity": "walking", "n_normal": 10, "n_anomalies": 30, "detector_roc_auc": 1.0,
           "detector_flagged_normal": 1, "detector_flagged_anomalies": 30, "detector_cpu_s": 2.0,
           "rockad_roc_auc": 0.9, "rockad_flagged_normal": 2, "rockad_flagged_anomalies": 28,
           "rockad_cpu_s": 0.5}  # fmt: skip
    text = showcase.format_table([row, {**row, "activity": "running", "rockad_roc_auc": 0.7}], 0.1)
    assert "| walking | 1.000 | 0.900 | 1/10, 30/30 | 2/10, 28/30 | 2.0 | 0.5 |" in text
    assert "| mean | 1.000 | 0.800 | 1.0, 30.0 | 2.0, 28.0 | 2.0 | 0.5 |" in text
    assert "contamination=0.1" in text


def test_unknown_activity_is_a_one_line_error(capsys):
    with pytest.raises(SystemExit) as exc:
        showcase.main(["--activities", "jogging"])
    assert exc.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert "unknown activity 'jogging'; BasicMotions has badminton, running, standing" in err[-1]


def test_one_activity_end_to_end(capsys):
    assert showcase.main(["--activities", "standing"]) == 0
    out = capsys.readouterr().out
    line = next(x for x in out.splitlines() if x.startswith("| standing |"))
    cells = [c.strip() for c in line.strip("|").split("|")]
    assert float(cells[1]) > 0.9 and float(cells[2]) > 0.9  # both detectors separate standing
    flagged_normal, flagged_anomalies = (int(c.split("/")[0]) for c in cells[3].split(", "))
    assert flagged_normal <= 3 and flagged_anomalies >= 25
