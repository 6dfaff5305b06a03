r"""Gram matrices computed tile by tile on Dask: a local scheduler or a distributed cluster.

The (n_X, n_Y) Gram matrix is cut into square tiles of ``tile`` series a side; each tile is
one task, ``kernel.gram(X[rows], Y[cols])``, so a cluster computes the tiles in parallel and
only the driver (or the caller of ``compute``) holds the whole matrix.

- ``gram_tiles`` returns a lazy ``dask.array.Array`` whose chunks are the tiles;
- ``compute_gram`` computes the tiles and writes each into one (n_X, n_Y) matrix as it
  arrives (numpy array or torch tensor), holding at most a few tiles in flight.

With ``Y=None`` only the tiles on and above the diagonal are computed (a diagonal tile is the
symmetric ``kernel.gram(X[rows])``); the others are their transposes, so the result is exactly
symmetric, as ``kernel.gram(X)`` is. ``normalize=True`` divides each tile by
:math:`\sqrt{K(x, x)}\sqrt{K(y, y)}`, the diagonals taken from the diagonal tiles (``Y=None``)
or computed once by ``kernel.diag`` in row chunks.

The kernel is copied and, where it has a data-dependent bandwidth that is not yet fixed (GAK's
median heuristic), fitted on ``X`` on the driver, as ``kernel.gram(X, Y)`` would fix it on its
first batch: every tile then uses the same bandwidth. A kernel that must be fitted
(``needs_fit``, e.g. the random-convolution kernel) must be fitted by the caller first. The
caller's kernel is never modified.

With a ``distributed.Client``, the kernel, ``X`` and ``Y`` are scattered to every worker once
(``broadcast=True``) and the tasks refer to them, rather than carrying the arrays in each task.
Dask is imported inside the functions, never at ``import tskernels``.
"""

from __future__ import annotations

import copy
import uuid
from collections.abc import Sequence
from itertools import islice
from numbers import Integral

import numpy as np
import torch

from ._base import NonFiniteKernelError
from ._constraints import DaskClient, HasMethods, Interval, validate_params

__all__ = ["DEFAULT_TILE", "compute_gram", "gram_tiles"]

#: Series per tile side by default: a float64 tile is 8 MiB.
DEFAULT_TILE = 1024


# ---------------------------------------------------------------------- checks and inputs
#: The arguments of :func:`gram_tiles` and :func:`compute_gram`.
_ARGUMENTS = {
    "kernel": [HasMethods(["gram", "diag"])],
    "tile": [Interval(Integral, 1, None, closed="left")],
    "normalize": ["boolean"],
    "client": [None, DaskClient()],
}


def _as_rows(X, name: str):
    """``X`` in a form that is cheap to pickle and to slice by rows: a numpy array (n, ...),
    or a list of per-series arrays (unequal lengths); torch tensors become numpy arrays."""
    if isinstance(X, torch.Tensor):
        return X.detach().cpu().numpy()
    if isinstance(X, np.ndarray):
        if X.ndim < 2:
            raise ValueError(
                f"`{name}` must be an (n, T, d) array or a list of (T_i, d) arrays, got an "
                f"array of shape {X.shape}"
            )
        return X
    if isinstance(X, Sequence) and not isinstance(X, (str, bytes)):
        return [x.detach().cpu().numpy() if isinstance(x, torch.Tensor) else x for x in X]
    raise TypeError(
        f"`{name}` must be an (n, T, d) numpy array or torch tensor, or a list of (T_i, d) "
        f"arrays, got {type(X).__name__}"
    )


def _rows(X, start: int, stop: int):
    return X[start:stop]


def _probe_rows(X):
    """The first series, or for a list the shortest and the longest (so that a kernel that
    needs equal lengths says so on the driver)."""
    if isinstance(X, np.ndarray):
        return X[:1]
    lengths = [len(x) for x in X]
    return [X[int(np.argmin(lengths))], X[int(np.argmax(lengths))]]


def _bounds(n: int, tile: int) -> list[tuple[int, int]]:
    return [(i, min(i + tile, n)) for i in range(0, n, tile)]


def _is_fitted(kernel) -> bool:
    from sklearn.exceptions import NotFittedError
    from sklearn.utils.validation import check_is_fitted

    try:
        check_is_fitted(kernel)
    except NotFittedError:
        return False
    return True


def _prepared_kernel(kernel, X):
    """A copy of ``kernel`` whose data-dependent parameters are fixed on the driver."""
    kernel = copy.deepcopy(kernel)
    if getattr(kernel, "needs_fit", False):
        if not _is_fitted(kernel):
            raise ValueError(
                f"{type(kernel).__name__} must be fitted on a corpus before its Gram is "
                "computed (kernel.fit(X_corpus)); fit it on the driver, then pass the fitted "
                "kernel: it is shipped to the workers as is"
            )
    elif callable(getattr(kernel, "fit", None)) and not _is_fitted(kernel):
        # e.g. GAK's median-heuristic sigma: fixed once on X, as gram(X, Y) fixes it on X
        kernel.fit(X)
    return kernel


def _plan(kernel, X, Y, tile):
    """Checked inputs: (kernel copy, X rows, Y rows or None, row bounds, column bounds, dtype)."""
    tile = int(tile)  # checked by the public function
    Xr = _as_rows(X, "X")
    Yr = None if Y is None else _as_rows(Y, "Y")
    for name, R in (("X", Xr), ("Y", Yr)):
        if R is not None and len(R) == 0:
            raise ValueError(f"`{name}` is empty: expected at least one series")
    kernel = _prepared_kernel(kernel, Xr)
    # a few pairs on the driver: the kernel's own checks (channels, lengths, parameters) fail
    # here with its message rather than inside a task; it also gives the output dtype
    probe = kernel.gram(_probe_rows(Xr), None if Yr is None else _probe_rows(Yr))
    dtype = np.dtype(str(probe.dtype).replace("torch.", ""))
    rows = _bounds(len(Xr), tile)
    cols = rows if Yr is None else _bounds(len(Yr), tile)
    return kernel, Xr, Yr, rows, cols, dtype


# ---------------------------------------------------------------------- tasks (on workers)
def _tile_task(kernel, X, Y, i0: int, i1: int, j0: int, j1: int) -> np.ndarray:
    """One raw tile: symmetric when ``Y`` is None and the tile is on the diagonal."""
    if Y is None and i0 == j0:
        K = kernel.gram(_rows(X, i0, i1))
    else:
        K = kernel.gram(_rows(X, i0, i1), _rows(X if Y is None else Y, j0, j1))
    return K.detach().cpu().numpy()


def _diag_task(kernel, X, i0: int, i1: int) -> np.ndarray:
    return kernel.diag(_rows(X, i0, i1)).detach().cpu().numpy()


def _diagonal_of(K: np.ndarray) -> np.ndarray:
    return np.diagonal(K).copy()


def _sqrt_checked(d: np.ndarray, name: str, offset: int, kernel_name: str) -> np.ndarray:
    bad = ~(d > 0)
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise NonFiniteKernelError(
            f"normalize=True needs K(x, x) > 0, but {kernel_name} gives K(x, x) = "
            f"{float(d[i]):.3g} for `{name}`[{offset + i}]"
        )
    return np.sqrt(d)


def _normalized(K: np.ndarray, a: np.ndarray, b: np.ndarray, on_diagonal: bool) -> np.ndarray:
    """K / (a_i b_j), as ``Kernel.gram(normalize=True)`` divides; unit diagonal on a
    symmetric diagonal tile."""
    out = K / (a[:, None] * b[None, :])
    if on_diagonal:
        np.fill_diagonal(out, 1.0)
    return out


def _transposed(K: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(K.T)


# ---------------------------------------------------------------------- lazy dask array
@validate_params(_ARGUMENTS)
def gram_tiles(
    kernel, X, Y=None, *, tile: int = DEFAULT_TILE, normalize: bool = False, client=None
):
    """The Gram matrix K[i, j] = k(X[i], Y[j]) as a lazy ``dask.array.Array`` of shape
    (n_X, n_Y), chunks of ``tile`` x ``tile`` series, dtype the kernel's (float64 unless the
    kernel was built with ``dtype=torch.float32``).

    Parameters
    ----------
    kernel : tskernels Kernel (copied; fitted on ``X`` first when its bandwidth is data-dependent
        and not yet fixed; a ``needs_fit`` kernel must already be fitted)
    X, Y : (n, T, d) numpy array or torch tensor, or a list of (T_i, d) arrays; ``Y=None``
        means Y = X (tiles above the diagonal computed, those below are their transposes)
    tile : int, series per tile side
    normalize : bool, K(x, y) / sqrt(K(x, x) K(y, y)) as ``kernel.gram(normalize=True)``
    client : None or ``distributed.Client``. None: the array computes with dask's default
        scheduler (threads), ``X``/``Y``/kernel each one key of the graph. A client: they are
        scattered to every worker once; compute the array on that client
        (``.compute()`` while it is the default client, or ``client.compute(array)``).

    >>> import numpy as np
    >>> from tskernels import FlattenedKernel, RBF
    >>> X = np.random.default_rng(0).normal(size=(5, 4, 2))
    >>> k = FlattenedKernel(RBF(3.0))
    >>> A = gram_tiles(k, X, tile=2)
    >>> A.chunks
    ((2, 2, 1), (2, 2, 1))
    >>> float(abs(A.compute() - k.gram(X).numpy()).max()) < 1e-12
    True
    """
    import dask
    import dask.array as da

    normalize = bool(normalize)
    kernel, Xr, Yr, rows, cols, dtype = _plan(kernel, X, Y, tile)
    kref, xref, yref = _references(client, kernel, Xr, Yr)
    task = dask.delayed(_tile_task, pure=True)
    name = repr(kernel)

    def lazy(obj, shape):
        return da.from_delayed(obj, shape=shape, dtype=dtype)

    symmetric = Yr is None
    raw = {}
    for bi, (i0, i1) in enumerate(rows):
        for bj, (j0, j1) in enumerate(cols):
            if not symmetric or bj >= bi:
                raw[bi, bj] = task(kref, xref, yref, i0, i1, j0, j1)
    if normalize:
        if symmetric:
            diags = [dask.delayed(_diagonal_of, pure=True)(raw[b, b]) for b in range(len(rows))]
            a = [
                dask.delayed(_sqrt_checked, pure=True)(d, "X", i0, name)
                for d, (i0, _) in zip(diags, rows)
            ]
            b = a
        else:
            diag = dask.delayed(_diag_task, pure=True)
            a = [
                dask.delayed(_sqrt_checked, pure=True)(diag(kref, xref, i0, i1), "X", i0, name)
                for i0, i1 in rows
            ]
            b = [
                dask.delayed(_sqrt_checked, pure=True)(diag(kref, yref, j0, j1), "Y", j0, name)
                for j0, j1 in cols
            ]
        norm = dask.delayed(_normalized, pure=True)
        raw = {
            (bi, bj): norm(K, a[bi], b[bj], symmetric and bi == bj) for (bi, bj), K in raw.items()
        }
    blocks = []
    for bi, (i0, i1) in enumerate(rows):
        line = []
        for bj, (j0, j1) in enumerate(cols):
            if (bi, bj) in raw:
                line.append(lazy(raw[bi, bj], (i1 - i0, j1 - j0)))
            else:
                T = dask.delayed(_transposed, pure=True)(raw[bj, bi])
                line.append(lazy(T, (i1 - i0, j1 - j0)))
        blocks.append(line)
    return da.block(blocks)


def _references(client, kernel, X, Y):
    """The kernel and data as graph references: futures scattered to every worker (client),
    or delayed objects, each one key of the graph, named without hashing the data."""
    if client is not None:
        objs = [kernel, X] + ([] if Y is None else [Y])
        futures = client.scatter(objs, broadcast=True, hash=False)
        return futures[0], futures[1], (None if Y is None else futures[2])
    import dask

    token = uuid.uuid4().hex
    ref = [
        dask.delayed(obj, name=f"gram-{what}-{token}", traverse=False)
        for what, obj in (("kernel", kernel), ("X", X), ("Y", Y))
        if obj is not None
    ]
    return ref[0], ref[1], (None if Y is None else ref[2])


# ---------------------------------------------------------------------- eager: into a matrix
def _writable_view(out, shape, dtype) -> np.ndarray:
    if isinstance(out, torch.Tensor):
        if out.device.type != "cpu":
            raise ValueError(
                f"`out` must be a CPU tensor or numpy array, got a tensor on {out.device}"
            )
        view = out.detach().numpy()
    elif isinstance(out, np.ndarray):
        view = out
    else:
        raise TypeError(
            f"`out` must be None, a numpy array or a CPU torch tensor, got {type(out).__name__}"
        )
    if tuple(view.shape) != tuple(shape) or view.dtype != dtype:
        raise ValueError(
            f"`out` must have shape {tuple(shape)} and dtype {dtype}, got shape "
            f"{tuple(view.shape)} and dtype {view.dtype}"
        )
    if not view.flags.writeable:
        raise ValueError("`out` is read-only")
    return view


@validate_params(
    {**_ARGUMENTS, "max_in_flight": [None, Interval(Integral, 1, None, closed="left")]}
)
def compute_gram(
    kernel,
    X,
    Y=None,
    *,
    tile: int = DEFAULT_TILE,
    normalize: bool = False,
    client=None,
    out=None,
    max_in_flight: int | None = None,
):
    """Compute the Gram matrix tile by tile (on ``client``'s cluster, or dask's default
    scheduler) and write each tile into one matrix as it arrives.

    Same parameters as :func:`gram_tiles`, plus ``out`` (None, or a numpy array / CPU torch
    tensor of shape (n_X, n_Y) and the kernel's dtype, written in place and returned) and
    ``max_in_flight`` (tiles submitted but not yet written; default twice the cluster's
    threads plus two), which bounds the memory the workers hold. Returns ``out``, or a new
    torch Tensor of shape (n_X, n_Y) when ``out`` is None: equal to ``kernel.gram(X, Y)``.
    With ``Y=None`` only the tiles on and above the diagonal travel; the lower triangle is
    mirrored on the driver.
    """
    normalize = bool(normalize)
    kernel, Xr, Yr, rows, cols, dtype = _plan(kernel, X, Y, tile)
    symmetric = Yr is None
    shape = (len(Xr), len(Xr) if symmetric else len(Yr))
    if out is None:
        result = torch.empty(shape, dtype=getattr(torch, dtype.name))
        view = result.numpy()
    else:
        result = out
        view = _writable_view(out, shape, dtype)
    jobs = [
        (i0, i1, j0, j1)
        for bi, (i0, i1) in enumerate(rows)
        for bj, (j0, j1) in enumerate(cols)
        if not symmetric or bj >= bi
    ]

    def put(job, K):
        i0, i1, j0, j1 = job
        view[i0:i1, j0:j1] = K
        if symmetric and j0 != i0:
            view[j0:j1, i0:i1] = K.T

    refs = _references(client, kernel, Xr, Yr)
    if client is not None:
        _run_on_client(client, refs, jobs, put, max_in_flight)
    else:
        _run_local(refs, jobs, put, max_in_flight)
    if normalize:
        name = repr(kernel)
        if symmetric:
            a = _sqrt_checked(np.diagonal(view).copy(), "X", 0, name)
            b = a
        else:
            kref, xref, yref = refs
            a = _sqrt_checked(_diags(client, kref, xref, rows), "X", 0, name)
            b = _sqrt_checked(_diags(client, kref, yref, cols), "Y", 0, name)
        for i0, i1 in rows:
            for j0, j1 in cols:
                view[i0:i1, j0:j1] = _normalized(
                    view[i0:i1, j0:j1], a[i0:i1], b[j0:j1], symmetric and i0 == j0
                )
    return result


def _run_on_client(client, refs, jobs, put, max_in_flight) -> None:
    from distributed import as_completed

    limit = max_in_flight or 2 * max(1, sum(client.nthreads().values())) + 2
    pending = iter(jobs)
    owner: dict = {}  # future key -> its tile

    def submit(job):
        f = client.submit(_tile_task, *refs, *job, pure=False)
        owner[f.key] = job
        return f

    queue = as_completed([submit(job) for job in islice(pending, limit)], with_results=True)
    for future, K in queue:  # a tile is released on its worker once written here
        put(owner.pop(future.key), K)
        del future, K
        nxt = next(pending, None)
        if nxt is not None:
            queue.add(submit(nxt))


def _run_local(refs, jobs, put, max_in_flight) -> None:
    import dask

    task = dask.delayed(_tile_task, pure=True)
    wave = max_in_flight or 2 * (torch.get_num_threads() or 1) + 2
    for s in range(0, len(jobs), wave):
        group = jobs[s : s + wave]
        tiles = dask.compute(*[task(*refs, *job) for job in group])
        for job, K in zip(group, tiles):
            put(job, K)


def _diags(client, kref, xref, bounds) -> np.ndarray:
    """kernel.diag in row chunks, on the client or dask's default scheduler."""
    if client is not None:
        futures = [client.submit(_diag_task, kref, xref, i0, i1, pure=False) for i0, i1 in bounds]
        return np.concatenate(client.gather(futures))
    import dask

    task = dask.delayed(_diag_task, pure=True)
    return np.concatenate(dask.compute(*[task(kref, xref, i0, i1) for i0, i1 in bounds]))
