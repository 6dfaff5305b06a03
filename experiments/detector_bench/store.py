"""The benchmark's resumable results store and run loop: one committed row per (data set,
class, method, seed) in :class:`experiments._store.DetectorBenchStore` (the subsampling limits
as its one setting, every run logged, one writer at a time), so an interrupted run resumes and
recomputes nothing done."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from . import CLIError
from .evaluate import evaluate
from .methods import Method
from .problems import MAX_CLASSES, MAX_CORPUS, MAX_TEST, REPO, load_problems

__all__ = [
    "DEFAULT_STORE", "check_settings", "fetch_rows", "open_store", "register_methods",
    "run_benchmark", "store_setting", "write_row",
]  # fmt: skip

DEFAULT_STORE = REPO / "results" / "bench_detector.sqlite"


def store_setting(max_corpus: int, max_test: int, max_classes: int) -> dict:
    """The store's setting: the subsampling limits, part of every row's problem."""
    return {"max_corpus": max_corpus, "max_test": max_test, "max_classes": max_classes}


def open_store(path, mode: str = "write"):
    """The results store (:class:`experiments._store.DetectorBenchStore`) at ``path``; a file
    that cannot be used is a one-line :class:`CLIError`."""
    from experiments._store import DetectorBenchStore, StoreError

    try:
        return DetectorBenchStore(path, mode=mode)
    except StoreError as exc:
        raise CLIError(str(exc)) from None


def check_settings(store, settings: dict) -> str:
    """The subsampling limits are part of every row's problem: refuse to mix them. Returns
    the setting id the rows are stamped with."""
    from experiments._store import StoreError

    for stored in store.settings().values():
        for k, v in settings.items():
            if k in stored and stored[k] != v:
                raise CLIError(
                    f"the store was made with --{k.replace('_', '-')} {stored[k]}, not {v}: "
                    "use the same value or another --store"
                )
    try:
        return store.add_setting(settings)
    except StoreError as exc:  # a setting of other keys
        raise CLIError(str(exc)) from None


def register_methods(store, methods: list[Method], rerun: set[str]) -> None:
    """Record each method's identity; a changed expression is refused unless in ``rerun``,
    which deletes the method's old rows. Rows of a rerun method are replaced as they come."""
    stored = store.methods()
    for m in methods:
        old = stored.get(m.name)
        if old is not None and old != m.expr and m.name not in rerun:
            raise CLIError(
                f"method {m.name!r} is stored with expression {old!r}, now {m.expr!r}: "
                f"use another name, or --rerun {m.name} to replace its rows"
            )
    for m in methods:
        old = stored.get(m.name)
        store.set_method(m.name, m.expr, drop_rows=old is not None and old != m.expr)


def write_row(store, row: dict) -> None:
    """Commit one result row (a hand-made store), stamped with the store's setting (the
    default limits when it has none yet) and the row's ``git_rev`` and ``finished``."""
    sid = next(iter(store.settings()), None)
    if sid is None:
        sid = store.add_setting(store_setting(MAX_CORPUS, MAX_TEST, MAX_CLASSES))
    stamp = {"setting": sid, "revision": row.get("git_rev"), "device": row.get("device"),
             "created": row.get("finished")}  # fmt: skip
    store.add_results([row], stamp)


def _run_one(m: Method, ds: str, prob, seed: int) -> tuple[dict, str]:
    """The row of one method on one problem (an error is recorded, one line) and its log."""
    row = dict(
        dataset=ds,
        **{"class": prob.cls},
        method=m.name,
        seed=seed,
        n_classes=prob.n_classes,
        n_corpus=len(prob.corpus),
        n_test=len(prob.test),
        expr=m.expr,
    )
    try:
        row.update(evaluate(m, prob))
        far = "-" if row["far"] is None else format(row["far"], ".2f")
        msg = (
            f"AUC {row['auc']:.3f}  FAR {far}  fit {row['fit_s']:.2f}s  score {row['score_s']:.2f}s"
        )
    except Exception as exc:  # noqa: BLE001 - recorded, run goes on
        first = (str(exc).strip().splitlines() or [""])[0]
        row["error"] = f"{type(exc).__name__}: {first}"[:500]
        msg = f"ERROR {row['error']}"
    return row, msg


def run_benchmark(
    datasets: list[str],
    methods: list[Method],
    store,
    data_dir,
    seeds: list[int] = (0,),
    classes: list[str] | None = None,
    rerun: list[str] = (),
    retry_errors: bool = False,
    max_corpus: int = MAX_CORPUS,
    max_test: int = MAX_TEST,
    max_classes: int = MAX_CLASSES,
    loader: Callable | None = None,
    log=print,
) -> int:
    """Run (or resume) every (data set, class, method, seed) not done; returns rows written.

    The rows go to the experiments store (:class:`experiments._store.DetectorBenchStore`)
    through its :class:`~experiments._recorder.Recorder`: each problem's row committed in one
    transaction as it finishes, stamped with the setting, revision and device; the run in
    the ``runs`` table; the file locked against a second writer.

    ``loader(dataset, data_dir, seed, classes, max_corpus=, max_test=, max_classes=)`` ->
    problems (default :func:`~.problems.load_problems`)."""
    loader = loader or load_problems
    rerun = set(rerun)
    unknown = rerun - {m.name for m in methods}
    if unknown:
        raise CLIError(f"--rerun {', '.join(sorted(unknown))}: not among the methods to run")
    from experiments._recorder import Provenance, Recorder

    db = open_store(store)
    try:
        sid = check_settings(db, store_setting(max_corpus, max_test, max_classes))
        register_methods(db, methods, rerun)
        done = db.keys(sid, failed=not retry_errors)
        written, fresh = 0, set()  # fresh: keys rerun in this call
        limits = dict(max_corpus=max_corpus, max_test=max_test, max_classes=max_classes)
        with Recorder(db, Provenance.current(), setting=sid) as recorder:
            for seed in seeds:
                for ds in datasets:
                    for prob in loader(ds, data_dir, seed, classes, **limits):
                        for m in methods:
                            key = (ds, prob.cls, m.name, seed)
                            if key in fresh or (key in done and m.name not in rerun):
                                continue
                            row, msg = _run_one(m, ds, prob, seed)
                            recorder.commit([row])
                            fresh.add(key)
                            written += 1
                            log(f"{ds} [{prob.cls}] seed {seed} {m.name}: {msg}")
        return written
    finally:
        db.close()


def fetch_rows(store, seeds: list[int] | None = None) -> list[dict]:
    """The stored rows (of ``seeds`` only if given), read from the store without locking it."""
    if not Path(store).is_file():
        raise CLIError(f"no store at {Path(store)}: run the benchmark first")
    db = open_store(store, mode="read")
    try:
        return db.rows(seeds)
    finally:
        db.close()
