"""The report compares a reference figure with each of our kernels that stands for it: the
same name, its ``_single`` variant, and the reference study's own kernel (order-1 signatures,
randomized signature with the activation first)."""

from __future__ import annotations

from experiments._report import reference_comparison


def test_reference_rows_for_every_kernel_that_stands_for_it(tmp_path):
    ref = tmp_path / "ref.csv"
    ref.write_text(
        "dataset,scorer,kernel,roc_auc,pr_auc\n"
        "Epilepsy,conformance,trunc sig linear,0.98,0.96\n"
        "Epilepsy,conformance,rand sig tanh,0.94,0.85\n"
        "Epilepsy,conformance,gak,0.97,0.92\n"
    )
    ours = {"roc_auc": 0.5, "pr_auc": 0.4}
    res = {
        ("Epilepsy", "trunc_sig_linear", "conformance"): ours,
        ("Epilepsy", "trunc_sig_linear_order1", "conformance"): ours,
        ("Epilepsy", "rand_sig_tanh", "conformance"): ours,
        ("Epilepsy", "rand_sig_tanh_first", "conformance"): ours,
        ("Epilepsy", "gak", "conformance"): ours,
        ("Epilepsy", "gak", "mahalanobis"): ours,
    }
    rows = reference_comparison(res, ref)
    got = {(r["kernel"], r["ref_roc_auc"]) for r in rows}
    assert got == {
        ("trunc_sig_linear", 0.98),
        ("trunc_sig_linear_order1", 0.98),
        ("rand_sig_tanh", 0.94),
        ("rand_sig_tanh_first", 0.94),
        ("gak", 0.97),
    }
    assert len(rows) == 5  # no kernel twice, no row without a reference figure
