import numpy as np
import pytest

from experiments.data import available_datasets, load_uea


def test_epilepsy_shapes(uea_dir):
    X, y = load_uea("Epilepsy", "train", data_dir=uea_dir)
    assert X.shape == (137, 206, 3) and X.dtype == np.float64
    assert len(np.unique(y)) == 4 and y.shape == (137,)
    Xt, yt = load_uea("Epilepsy", "test", data_dir=uea_dir)
    assert Xt.shape == (138, 206, 3) and yt.shape == (138,)


def test_basicmotions_from_sktime():
    X, y = load_uea("BasicMotions", "train")  # shipped with sktime: no data_dir
    assert X.shape == (40, 100, 6)
    assert sorted(np.unique(y)) == ["badminton", "running", "standing", "walking"]


def test_unequal_lengths_give_a_list(uea_dir):
    X, y = load_uea("JapaneseVowels", "train", data_dir=uea_dir)
    assert isinstance(X, list) and len(X) == 270 == len(y)
    lengths = {x.shape[0] for x in X}
    assert min(lengths) >= 7 and max(lengths) <= 29 and len(lengths) > 1
    assert all(x.shape[1] == 12 and x.dtype == np.float64 for x in X)


def test_environment_variable_is_searched(uea_dir, monkeypatch):
    monkeypatch.setenv("TSKERNELS_DATA", str(uea_dir))
    X, _ = load_uea("RacketSports", "test")
    assert X.shape == (152, 30, 6)


def test_unknown_name_lists_what_is_available(uea_dir):
    with pytest.raises(FileNotFoundError, match="Available:.*BasicMotions"):
        load_uea("NoSuchData", data_dir=uea_dir)
    assert "Epilepsy" in available_datasets(uea_dir)[str(uea_dir)]


def test_bad_split():
    with pytest.raises(ValueError, match="split"):
        load_uea("BasicMotions", "validation")


def test_benchmark_csv_reads_a_class_or_y_column_as_its_labels(tmp_path):
    """The benchmark needs labels: with no ``label`` column, ``class`` (then ``y``) is the label
    (the detection command line reads those names as channels unless told)."""
    from experiments.data import load_data

    for name in ("class", "y"):
        rows = ["id,time,a," + name]
        for i in range(12):
            for t in range(6):
                rows.append(f"s{i},{t},{(i % 2) * 3 + t * 0.1 + i * 0.01},{'ab'[i % 2]}")
        path = tmp_path / f"{name}.csv"
        path.write_text("\n".join(rows) + "\n")
        data = load_data(str(path))
        labels = set(map(str, data.y_train)) | set(map(str, data.y_test))
        assert labels == {"a", "b"}
        assert data.X_train.shape[-1] == 1  # one channel: the label is not a channel
