"""The benchmarked methods: ours (the detector's defaults and ``--extra`` expressions) and the
peers (aeon's ROCKAD, ROCKAD's recipe :class:`experiments.peers.RocketRecipe`, PyOD). A method
builds an unfitted detector per problem; :mod:`.evaluate` runs it."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from . import CLIError

__all__ = [
    "BUILTIN", "GROUPS", "METHODS", "RETIRED", "Method", "RockadMean", "extra_method",
    "method_order", "parse_extra", "resolve_methods",
]  # fmt: skip

BUILTIN = "builtin"  # the stored expression of a built-in method


@dataclass(frozen=True)
class Method:
    """A benchmarked method: ``build(seed, n_corpus)`` gives an unfitted detector.

    family: "ours" (raw series, score_samples/predict +-1), "rockad", "recipe" or "pyod".
    expr: the identity stored with the rows ("builtin", or an --extra expression).
    one_by_one: score (and predict) each test series in a call of its own, for a detector
    whose scores depend on the other series of the batch (PyOD's ECOD)."""

    name: str
    family: str
    build: Callable[[int, int], object]
    expr: str = BUILTIN
    one_by_one: bool = False


def _ours_default(seed: int, n: int):
    from novelty import KernelNoveltyDetector

    return KernelNoveltyDetector()


def _rockad(seed: int, n: int):
    from aeon.anomaly_detection.collection import ROCKAD

    return ROCKAD(random_state=seed, n_neighbors=min(5, n))


class RockadMean:
    """aeon's ROCKAD (defaults) for seeds 0-4: ``predict`` returns the five score vectors."""

    SEEDS = (0, 1, 2, 3, 4)

    def __init__(self, n_neighbors: int):
        self.n_neighbors = n_neighbors

    def fit(self, X):
        from aeon.anomaly_detection.collection import ROCKAD

        self.models_ = [
            ROCKAD(random_state=s, n_neighbors=self.n_neighbors).fit(X) for s in self.SEEDS
        ]
        return self

    def predict(self, X) -> list[np.ndarray]:
        return [m.predict(X) for m in self.models_]


def _rockad_mean(seed: int, n: int):
    return RockadMean(n_neighbors=min(5, n))


def _rockad_recipe(seed: int, n: int):
    from experiments.peers import RocketRecipe

    return RocketRecipe(random_state=seed)


def _pyod(name: str) -> Callable[[int, int], object]:
    def build(seed: int, n: int):
        if name == "knn":
            from pyod.models.knn import KNN

            return KNN(n_neighbors=min(5, n - 1))
        if name == "lof":
            from pyod.models.lof import LOF

            return LOF(n_neighbors=min(20, n - 1))
        if name == "iforest":
            from pyod.models.iforest import IForest

            return IForest(random_state=seed)
        if name == "ocsvm":
            from pyod.models.ocsvm import OCSVM

            return OCSVM()
        from pyod.models.ecod import ECOD

        return ECOD()

    return build


METHODS: dict[str, Method] = {
    "ours_default": Method("ours_default", "ours", _ours_default),
    "rockad": Method("rockad", "rockad", _rockad),
    "rockad_mean5": Method("rockad_mean5", "rockad", _rockad_mean),
    "rockad_recipe": Method("rockad_recipe", "recipe", _rockad_recipe),
    **{
        f"pyod_{p}": Method(f"pyod_{p}", "pyod", _pyod(p), one_by_one=p == "ecod")
        for p in ("knn", "iforest", "lof", "ocsvm", "ecod")
    },
}
#: Methods no longer run, whose stored rows still report (in this order after ours_default):
#: name -> why. ``ours_auto`` was ``KernelNoveltyDetector(kernel="auto", scorer="auto")``.
RETIRED = {
    "ours_auto": "kernel='auto' was retired: it did not beat the default on the tuning half "
    "(docs/results_detector.md)",
}
GROUPS = {
    "ours": ["ours_default"],
    "peers": ["rockad", "rockad_mean5", "rockad_recipe"]
    + [m for m in METHODS if m.startswith("pyod_")],
}


def expr_namespace() -> dict:
    """Names in scope of an --extra expression."""
    import density
    import novelty
    import tskernels

    ns: dict = {}
    for mod in (tskernels, novelty):
        ns.update({k: getattr(mod, k) for k in mod.__all__})
    ns.update(np=np, novelty=novelty, tskernels=tskernels, density=density)
    return ns


def extra_method(name: str, expr: str) -> Method:
    """An --extra method: ``expr`` evaluated afresh per problem (checked once here)."""
    if not name.isidentifier():
        raise CLIError(f"--extra {name}=...: the name must be an identifier")
    if name in METHODS or name in GROUPS or name in RETIRED:
        raise CLIError(
            f"--extra {name}=...: {name!r} is a built-in (or retired) method or group name"
        )
    try:
        code = compile(expr, f"<--extra {name}>", "eval")
        eval(code, expr_namespace())  # noqa: S307 - the user's own expression, checked early
    except Exception as exc:  # noqa: BLE001 - one-line CLI error
        raise CLIError(f"--extra {name}: {type(exc).__name__}: {exc}") from None

    def build(seed: int, n: int):
        det = eval(code, expr_namespace())  # noqa: S307
        params = det.get_params(deep=False) if hasattr(det, "get_params") else {}
        if "random_state" in params and params["random_state"] is None:
            det.set_params(random_state=seed)
        return det

    return Method(name, "ours", build, expr)


def parse_extra(spec: str) -> Method:
    """``NAME=EXPR`` (the command line's ``--extra``) as a :class:`Method`."""
    name, sep, expr = spec.partition("=")
    if not sep or not name.strip() or not expr.strip():
        raise CLIError(f"--extra must be NAME=EXPR, got {spec!r}")
    return extra_method(name.strip(), expr.strip())


def resolve_methods(names: list[str] | None, extras: list[Method]) -> list[Method]:
    """The methods named (groups expanded, duplicates dropped), or all with the extras."""
    table = {**METHODS, **{m.name: m for m in extras}}
    if len(table) < len(METHODS) + len(extras):
        raise CLIError("--extra names must be distinct")
    if not names:
        return list(table.values())
    out: list[str] = []
    for n in names:
        if n in GROUPS:
            out.extend(GROUPS[n])
        elif n in table:
            out.append(n)
        elif n in RETIRED:
            raise CLIError(f"method {n!r} is no longer run: {RETIRED[n]}")
        else:
            raise CLIError(
                f"unknown method {n!r}; available: {', '.join(table)} (groups: {', '.join(GROUPS)})"
            )
    return [table[n] for n in dict.fromkeys(out)]


def method_order(names) -> list[str]:
    """The built-in methods in :data:`METHODS` order (a :data:`RETIRED` one after
    ``ours_default``), then the others sorted."""
    order = ["ours_default", *RETIRED, *(m for m in METHODS if m != "ours_default")]
    builtin = [m for m in order if m in names]
    return builtin + sorted(set(names) - set(builtin))
