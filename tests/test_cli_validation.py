"""Every value of ``python -m experiments run`` is checked before any work (issue 14, item 2;
the device of item 3): a bad value gives one line on stderr, exit status 2, no traceback,
and no store is created."""

from __future__ import annotations

import pytest
from experiment_helpers import run_cli


def _cli(argv, capsys) -> tuple[int, str, str]:
    return run_cli(argv, capsys)


def _argv(store, **options) -> list[str]:
    opts = {"--dataset": "BasicMotions", "--kernels": "flat_rbf", "--scorers": "mahalanobis",
            "--folds": "2", "--max-rank": "5", "--time-channel": "no"}  # fmt: skip
    opts.update(options)
    argv = ["run"]
    for k, v in opts.items():
        if k == "--alphas":  # a leading minus sign needs the = form
            argv.append(f"{k}={v}")
        else:
            argv += [k, *v.split()]
    return [*argv, "--store", str(store), "--no-progress"]


BAD = [
    # (options, words the one-line message must contain)
    ({"--folds": "0"}, "--folds must be an integer >= 2, got 0"),
    ({"--repeats": "0"}, "--repeats must be an integer >= 1, got 0"),
    ({"--max-rank": "0"}, "--max-rank must be an integer >= 1, got 0"),
    ({"--max-cells": "0"}, "--max-cells must be an integer >= 1, got 0"),
    ({"--workers": "0"}, "--workers must be an integer >= 1"),
    ({"--threads": "0"}, "--threads must be an integer >= 1"),
    ({"--seed": "-1"}, "--seed must be an integer in 0.."),
    ({"--alphas": "-1"}, "--alphas values must be positive finite numbers, got -1.0"),
    ({"--alphas": "nan"}, "'nan' is not a finite number"),
    ({"--alphas": "1e-8,,1e-2"}, "--alphas: empty value"),
    ({"--alphas": "1e-2,1e-2"}, "--alphas lists 0.01 twice"),
    ({"--levels": "0", "--kernels": "trunc_sig_linear"}, "--levels must be an integer >= 1"),
    ({"--levels": "1,2"}, "--levels: none of the kernels of this run (flat_rbf) has levels"),
    ({"--levels": "1.5", "--kernels": "trunc_sig_linear"}, "'1.5' is not an integer"),
    (
        {"--grid": "flat_rbf.sigma=-1"},
        "kernel flat_rbf (sigma=-1): The 'sigma' parameter of RBF must be a float in the range",
    ),
    ({"--grid": "flat_rbf.sigma=inf"}, "'inf' is not a finite number"),
    ({"--grid": "flat_rbf.sigma=1,1"}, "--grid flat_rbf.sigma lists 1 twice"),
    ({"--grid": "flat_rbf.sigma=1 --grid flat_rbf.sigma=2"}, "flat_rbf.sigma is given twice"),
    ({"--grid": "flat_rbf.nope=1"}, "--grid flat_rbf.nope: unknown axis; flat_rbf has axes sigma"),
    ({"--grid": "nope.sigma=1"}, "--grid names kernel 'nope', which has no grid"),
    ({"--grid": "gak.factor=1"}, "--grid names kernel 'gak', which this run does not include"),
    # values a kernel checks only when it computes: found on a toy batch before any work
    (
        {"--kernels": "gak", "--grid": "gak.factor=-1"},
        "kernel gak (factor=-1): The 'sigma_factor' parameter of GlobalAlignmentKernel must be",
    ),
    ({"--kernels": "reservoir", "--grid": "reservoir.tau=-1"}, "kernel reservoir"),
    ({"--kernels": "nope"}, "unknown kernel 'nope'"),
    ({"--kernels": "flat_rbf flat_rbf"}, "--kernels names flat_rbf twice"),
    ({"--scorers": "nope"}, "unknown scorer 'nope'"),
    ({"--dataset": "Nope"}, "UEA data set 'Nope' (train) not found"),
    ({"--folds": "11"}, "--folds 11 is more than the series of any class of BasicMotions"),
    ({"--scheduler": "foo"}, "--scheduler must be 'local' or a Dask address"),
    ({"--share": "x"}, "argument --share: invalid choice"),
    ({"--time-channel": "maybe"}, "--time-channel must be no, yes or both"),
    ({"--device": "foo"}, "--device 'foo'"),
    ({"--folds": "abc"}, "argument --folds: invalid int value: 'abc'"),
]


@pytest.mark.parametrize("options, message", BAD, ids=[str(o) for o, _ in BAD])
def test_bad_value_is_one_line_before_any_work(tmp_path, capsys, options, message):
    store = tmp_path / "sub" / "s.sqlite"
    rc, out, err = _cli(_argv(store, **options), capsys)
    assert rc == 2, (out, err)
    assert message in err, err
    assert err.count("\n") == 1 and "Traceback" not in err, err
    assert not (tmp_path / "sub").exists()  # nothing created, no cell computed


def test_missing_data_dir_and_reference(tmp_path, capsys):
    store = tmp_path / "s.sqlite"
    argv = [*_argv(store), "--data-dir", str(tmp_path / "nowhere")]
    rc, _, err = _cli(argv, capsys)
    assert rc == 2 and f"--data-dir {tmp_path / 'nowhere'}: no such folder" in err
    rc, _, err = _cli([*_argv(store), "--reference", str(tmp_path / "ref.csv")], capsys)
    assert rc == 2 and "ref.csv: no such file" in err and err.count("\n") == 1
    assert not store.exists()


def test_unusable_device_fails_before_any_cell_is_stored(tmp_path, capsys):
    import torch

    device = "cuda:99" if torch.cuda.is_available() else "cuda"
    store = tmp_path / "s.sqlite"
    rc, _, err = _cli([*_argv(store), "--device", device], capsys)
    assert rc == 2 and err.startswith(f"error: --device {device}:") and "CUDA" in err
    assert err.count("\n") == 1 and not store.exists()
