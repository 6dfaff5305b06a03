"""The CUDA paths equal the CPU ones (marker ``gpu``: skipped without a CUDA device, run by
``make gpu-check``; ``TSKERNELS_GPU_TESTS_DEVICE=cpu`` runs them on the CPU as a dry run).

Every registered kernel's Gram (cross and symmetric, equal and unequal lengths where the kernel
takes them) and diagonal on the device against the CPU to 1e-10 relative to the largest entry;
the default detector with its members' kernels on the device scores and flags as on the CPU;
SOSREP on a device Gram equals SOSREP on the CPU one."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch

import tskernels as tk

pytestmark = pytest.mark.gpu

TOL = 1e-10


def _close(dev, cpu) -> None:
    dev = dev.detach().cpu().to(torch.float64)
    cpu = cpu.detach().to(torch.float64)
    assert dev.shape == cpu.shape
    scale = float(cpu.abs().max())
    assert scale > 0
    assert float((dev - cpu).abs().max()) <= TOL * scale


def _walks(n, T, d, seed):
    rng = np.random.default_rng(seed)
    return np.cumsum(rng.normal(size=(n, T, d)) * 0.3 / np.sqrt(d), axis=1)


@pytest.mark.parametrize("name", sorted(tk.kernel_registry()))
def test_every_kernel_on_the_device_equals_the_cpu(name, gpu_device):
    spec = tk.kernel_registry()[name]

    def fitted(corpus):  # (on the device, on the CPU), fitted on corpus where needed
        dev = spec.example().set_params(device=gpu_device)
        if not dev.get_tag("fit_is_empty"):
            dev = dev.fit(corpus)
        return dev, spec.fitted_example(corpus)

    X, Y = _walks(7, 16, 3, seed=1), _walks(5, 16, 3, seed=2)
    dev, cpu = fitted(X)
    _close(dev.gram(X), cpu.gram(X))
    _close(dev.gram(X, Y), cpu.gram(X, Y))
    _close(dev.diag(Y), cpu.diag(Y))
    if spec.unequal_length:
        R = [x[: 10 + i] for i, x in enumerate(_walks(4, 16, 3, seed=3))]
        dev, cpu = fitted(R)
        _close(dev.gram(R, normalize=True), cpu.gram(R, normalize=True))


def test_device_tensors_are_taken_where_they_are(gpu_device):
    """A tensor already on the device is computed there: the Gram is returned on it."""
    X = torch.as_tensor(_walks(6, 12, 2, seed=4), device=gpu_device)
    K = tk.SignaturePDEKernel(tk.Linear(), 1.0, 1, device=gpu_device).gram(X)
    assert K.device.type == torch.device(gpu_device).type
    _close(K, tk.SignaturePDEKernel(tk.Linear(), 1.0, 1).gram(X.cpu().numpy()))


def test_default_detector_on_the_device_equals_the_cpu(gpu_device):
    from novelty import KernelNoveltyDetector

    class DeviceDetector(KernelNoveltyDetector):
        def _member_specs(self, Xs, start):
            specs = super()._member_specs(Xs, start)
            return [
                dataclasses.replace(s, kernel=s.kernel.set_params(device=gpu_device)) for s in specs
            ]

    corpus = _walks(30, 20, 2, seed=5)
    test = np.concatenate([_walks(5, 20, 2, seed=6), 4.0 * _walks(5, 20, 2, seed=7)])
    cpu = KernelNoveltyDetector(contamination=0.1).fit(corpus)
    dev = DeviceDetector(contamination=0.1).fit(corpus)
    assert [str(m.kernel_.device) for m in dev.members_] == [gpu_device] * len(dev.members_)
    np.testing.assert_allclose(dev.score_samples(test), cpu.score_samples(test), rtol=0, atol=TOL)
    np.testing.assert_array_equal(dev.predict(test), cpu.predict(test))
    assert (cpu.predict(test)[5:] == -1).all()  # the scaled walks are flagged (not vacuous)


def test_sosrep_on_a_device_gram_equals_the_cpu(gpu_device):
    from density import SOSREP, GaussianKernel

    X = np.random.default_rng(8).standard_normal((40, 2))
    Z = np.random.default_rng(9).standard_normal((6, 2))
    cpu = SOSREP(GaussianKernel(0.8)).fit(X)
    dev = SOSREP(GaussianKernel(0.8), device=gpu_device).fit(X)
    np.testing.assert_allclose(
        np.asarray(dev.score_samples(Z)), np.asarray(cpu.score_samples(Z)), rtol=1e-8, atol=0
    )
