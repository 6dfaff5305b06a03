r"""A scikit-learn novelty detector on multivariate time series: kernels + Gram-level scorers,
conformally calibrated.

``fit(X)`` on normal series fits one or more members (:mod:`novelty.detector._members`:
pre-processing fitted on the corpus, a kernel, a Gram-level scorer) and their held-out
(leave-one-out or cross-fitted) novelty scores of the corpus series. With several members
(the default recipe), each member's novelty is put on one scale by its held-out scores,
:math:`z = (s - \operatorname{median}(c)) / \operatorname{IQR}(c)`, and the
detector's novelty is the mean of the :math:`z`.

``score_samples`` is minus that novelty (higher = more normal). The held-out novelty scores
:math:`c_1..c_n` of the corpus calibrate the threshold conformally
(:mod:`novelty.detector._calibration`):
``p_values(X)`` gives :math:`p = (1 + \#\{c_i \ge s\}) / (n + 1)` and ``predict`` flags
:math:`p \le` ``contamination``, so a new normal series is flagged with probability at most
``contamination`` (exchangeability; up to the leave-one-out approximation, O(1/n)).
Exact copies of a corpus series are held out with it and calibrate as one series (the
exchangeable units are the distinct normal series; :mod:`novelty.detector._members`, "Exact
duplicates").
``decision_function = score_samples - offset_`` is negative exactly where ``predict`` is -1.

Input: an array (n, T, d), a list of (T_i, d) arrays, any sktime Panel container or tslearn's
NaN-padded arrays (:func:`novelty.as_series_collection`). A 2-D array is ambiguous (one
recording (T, d), or n univariate series (n, T)), so it is an error naming both readings unless
``layout`` says which.

``kernel="auto"`` (kernels and scorers chosen on the normal series alone) was retired: it did
not beat the default ensemble on the benchmark's tuning half (docs/results_detector.md); it
raises a ValueError that says what to use instead (``scorer="auto"`` with a kernel remains).
"""

from __future__ import annotations

import math
import time
import warnings
from numbers import Integral, Real

import numpy as np
from sklearn.base import BaseEstimator, OutlierMixin
from sklearn.utils.validation import check_is_fitted, validate_data

from .._constraints import InstanceOf, Interval, NameOf, StrOptions
from ._calibration import conformal_p_values, conformal_threshold, min_corpus_for

# torch, tskernels and the members are imported on first use (in fit / scoring), so that
# ``from novelty import KernelNoveltyDetector`` costs scikit-learn's import alone.

__all__ = ["KernelNoveltyDetector"]

#: What ``kernel="auto"`` gets (it was retired; module docstring).
KERNEL_AUTO_RETIRED = (
    "kernel='auto' was retired: its label-free choice of kernels did not beat the default "
    "ensemble on the benchmark's tuning half (docs/results_detector.md), so use kernel=None "
    "(the default) or a tskernels kernel with scorer='auto' to choose the scorer"
)


# the names that ``scorer``, ``approximation`` and ``landmarks`` take, read when checked (the
# modules that list them import torch)
def _scorer_names() -> tuple[str, ...]:
    from ..scorers._scorer_registry import scorer_registry

    return (*scorer_registry(), "auto")


def _approximations() -> tuple[str, ...]:
    from ._approximation import APPROXIMATIONS

    return APPROXIMATIONS


def _landmark_rules() -> tuple[str, ...]:
    from ._approximation import LANDMARK_RULES

    return LANDMARK_RULES


def _kernel_hint(kernel) -> str:
    """What to pass instead of ``kernel`` (a string, or a static kernel on points)."""
    import tskernels as tk

    if isinstance(kernel, tk.StaticKernel):
        k = type(kernel).__name__
        return (
            f"{kernel!r} is a static kernel on points, not on series: put a series kernel "
            f"around it, e.g. FlattenedKernel({k}(...)) or IntegralKernel({k}(...))."
        )
    if not isinstance(kernel, str):
        return ""
    names = sorted(tk.kernel_registry())
    if kernel in names:
        return (
            f"For the registered kernel {kernel!r} pass an instance, e.g. "
            f"tskernels.make_kernel({kernel!r}) or its class with your parameters."
        )
    return f"Registered kernels: {', '.join(names)}."


class KernelNoveltyDetector(OutlierMixin, BaseEstimator):
    """Kernel novelty detector on series (scikit-learn API, +1 inlier / -1 outlier).

    Parameters
    ----------
    kernel : ``None`` (default) or a ``tskernels.Kernel``.
        ``None``: the default recipe (:func:`novelty.default_members`), chosen from the
        benchmark in docs/results_detector.md. A kernel: that kernel with ``scorer``; tuned
        through ``kernel__<param>`` in ``GridSearchCV``. ``"auto"`` was retired (a ValueError
        says so: it did not beat the default on the benchmark's tuning half).
    scorer : a name of :func:`novelty.scorer_registry`: "knn" (default), "conformance",
        "mahalanobis" (variance norm), "sse" (spectral support), "sosrep", "mean_embedding",
        "ocsvm"; an unfitted :class:`novelty.GramScorer` instance (its parameters tuned as
        ``scorer__<param>`` in ``GridSearchCV``); or "auto": the scorer chosen for the kernel
        on the normal series alone (:func:`novelty.detector._auto.select_members`: held-out
        normal series against synthetic anomalies; the kernel with the 1-NN scorer unless the
        evidence favours another), ``selection_`` shows the candidates. Ignored when
        ``kernel`` is None.
    contamination : float in (0, 0.5], default 0.05. The share of new normal series that
        ``predict`` may flag (a conformal guarantee: at most this, up to O(1/n)). A corpus of
        fewer than ``1/contamination - 1`` series cannot flag anything (a warning says so).
        A per-series false-alarm rate: the right control when each new series is judged on
        its own (monitoring, one alert at a time). For a batch, ``predict(X, fdr=q)`` instead
        (see Methods).
    alpha : float > 0, default 1e-2, Tikhonov parameter of the variance-norm scorers (relative
        to the normalised kernel, whose centred spectrum sums to at most 1).
    rank : int or None, components of the variance-norm scorers (None: every component above
        1e-10, at most 50).
    preprocess : True (default), "step" or False. Pre-processing fitted on the corpus before
        the kernel (:class:`tskernels.transforms.Preprocessor`): pooling to at most 100 steps,
        z-score, clip at 5, a zero basepoint. True z-scores per channel (series of any length
        can then be scored); "step" per (time step, channel), the reference protocol's.
    normalize : bool, normalise the kernel in feature space, K(x,y)/sqrt(K(x,x)K(y,y)).
    scorer_params : dict or None, constructor parameters of the named scorer's class
        (``n_neighbors`` and ``aggregate`` for "knn", ``lam``/``filter`` for "sse",
        ``lr``/``tol`` for "sosrep", ``nu`` for "ocsvm", ``threshold`` for the variance norm;
        an ``alpha`` or ``max_rank`` here overrides ``alpha`` / ``rank``). Checked in ``fit``
        against the class's declared constraints. Not allowed with a scorer instance.
    normal_label : label or None. None (default): ``fit`` ignores ``y`` and every series of X
        is normal. Otherwise ``fit(X, y)`` uses only the series with ``y == normal_label``.
    max_time : float, seconds that ``scorer="auto"`` may spend on the selection and the fit
        of the chosen member (default 60; :mod:`novelty.detector._auto`, "Time").
    random_state : int, seed of the synthetic anomalies and fold splits of the selection
        (``scorer="auto"``), and of the approximation's landmarks and calibration set.
    approximation : None (default, exact Grams), "nystroem" or "features". For large corpora:
        each member maps the series to ``n_components`` features (Nyström landmarks, or the
        kernel's explicit / random Fourier features) and its scorer works on them, so the
        N x N Gram is never formed (:mod:`novelty.detector._approx_member`; README, "Large
        corpora"). A corpus of at most ``n_components`` series is fitted exactly.
        ``scorer="auto"`` selects on a seeded subsample of ``n_components`` series.
    n_components : int, default 1000, landmarks (or random features) per member.
    landmarks : "uniform" (default), "kmeans++" or "leverage", the Nyström landmark rule.
    missing : "interpolate" (default) or "error", what NaN inside a series (a missing value)
        means. "interpolate": linear interpolation per channel between the neighbouring
        observed values, edge values held before the first / after the last
        (:func:`novelty._missing.interpolate_missing`); a channel that is NaN at every step of
        a series is an error. "error": NaN inside a series is an error. Either way trailing
        all-NaN rows of an array are padding of unequal lengths (tslearn), and Inf is an error.
    layout : None (default), "univariate" or "single": how a 2-D numpy array X is read, in
        ``fit`` and in scoring. None: a 2-D array is an error that says how to pass it (``X[None]``
        for one recording of T steps and d channels, ``X[..., None]`` for n univariate series),
        since reading it either way silently could be wrong. "univariate": rows are univariate
        series, (n, T) -> (n, T, 1) (scikit-learn's (n_samples, n_features) reading: set it for
        scikit-learn tools that pass 2-D arrays). "single": X is one recording (T, d) ->
        (1, T, d). Arrays of 3 dimensions, lists and containers are read as they are.
    verbose : bool or int, default False. True (or >= 1): a progress bar on stderr (tqdm)
        during ``fit`` (members, calibration refits, selection folds, with an ETA) and
        scoring (members).

    Attributes
    ----------
    members_ : list of fitted members; ``kernel_``, ``scorer_``, ``corpus_``,
        ``preprocessor_`` are those of the first member.
    calibration_scores_ : array (n_distinct,), held-out novelty scores of the distinct corpus
        series (n of them without exact copies): every copy of a series is held out with it,
        and a duplicated series is one calibration score (one held-out unit).
    offset_ : float, minus the conformal novelty threshold.
    selection_ : pandas DataFrame of the candidates with their selection scores
        (``scorer="auto"`` only).

    Methods
    -------
    predict(X, fdr=None) : +1 / -1 per series. ``fdr=None``: flag conformal p-values
        ``<= contamination``; among many normal series about ``contamination`` of them are
        flagged, so in a batch of 10,000 series with few anomalies most flags can be false.
        ``fdr=q`` (float in (0, 1)): flag the series that the Benjamini-Hochberg rule rejects
        among the batch's conformal p-values
        (:func:`novelty.detector._calibration.benjamini_hochberg`),
        so that the expected share of normal series among the flagged (the false-discovery
        rate) is at most ``q``, averaged over corpus draws. Use it when scoring a batch and
        acting on its flags; ``contamination`` is then not used.
    p_values(X) : the conformal p-values behind both.

    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> det = KernelNoveltyDetector().fit(rng.normal(size=(30, 20, 2)))
    >>> det.predict(rng.normal(size=(2, 20, 2)) + 5.0).tolist()
    [-1, -1]
    """

    _parameter_constraints = {
        "kernel": [None, InstanceOf("tskernels", "Kernel")],
        "scorer": [NameOf(_scorer_names), InstanceOf("novelty", "GramScorer")],
        "contamination": [Interval(Real, 0, 0.5, closed="right")],
        "alpha": [Interval(Real, 0, None, closed="neither")],
        "rank": [None, Interval(Integral, 1, None, closed="left")],
        "preprocess": [bool, None, StrOptions({"channel", "step"})],
        "normalize": ["boolean"],
        "scorer_params": [None, dict],
        "normal_label": "no_validation",  # any label of y
        "max_time": [Interval(Real, 0, None, closed="neither")],
        "random_state": [Interval(Integral, 0, None, closed="left")],
        "approximation": [None, NameOf(_approximations)],
        "n_components": [Interval(Integral, 1, None, closed="left")],  # >= 2 if approximating
        "landmarks": [NameOf(_landmark_rules)],
        "missing": [StrOptions({"interpolate", "error"})],
        "layout": [None, StrOptions({"univariate", "single"})],
        "verbose": ["verbose"],
    }

    def __init__(
        self,
        kernel=None,
        scorer: str = "knn",
        contamination: float = 0.05,
        alpha: float = 1e-2,
        rank: int | None = None,
        preprocess: bool | str = True,
        normalize: bool = True,
        scorer_params: dict | None = None,
        normal_label=None,
        max_time: float = 60.0,
        random_state: int = 0,
        approximation: str | None = None,
        n_components: int = 1000,
        landmarks: str = "uniform",
        missing: str = "interpolate",
        layout: str | None = None,
        verbose: bool | int = False,
    ):
        self.kernel = kernel
        self.scorer = scorer
        self.contamination = contamination
        self.alpha = alpha
        self.rank = rank
        self.preprocess = preprocess
        self.normalize = normalize
        self.scorer_params = scorer_params
        self.normal_label = normal_label
        self.max_time = max_time
        self.random_state = random_state
        self.approximation = approximation
        self.n_components = n_components
        self.landmarks = landmarks
        self.missing = missing
        self.layout = layout
        self.verbose = verbose

    # ------------------------------------------------------------------ sklearn API
    def fit(self, X, y=None) -> KernelNoveltyDetector:
        """Fit on normal series: all of X, or those with ``y == normal_label`` if that is set."""
        from ._progress import progress

        self._check_params()  # a bad parameter (verbose included) fails before any progress bar
        with progress(self.verbose, "fit"):
            return self._fit(X, y)

    def _fit(self, X, y) -> KernelNoveltyDetector:
        """``fit`` once its parameters are checked (by ``fit``, before the progress bar)."""
        from ._streaming import streamed_fit

        if streamed_fit(self, X, y):  # a memory-mapped corpus, in blocks (its module says when)
            return self
        start = time.perf_counter()
        Xs = self._series(X, reset=True)
        Xs = self._normal_rows(Xs, y)
        n = len(Xs)
        if n < 1:
            raise ValueError("KernelNoveltyDetector needs at least 1 normal series, got 0")
        self.n_channels_ = _channels(Xs)
        self.n_corpus_ = n
        from ._members import groups_of_digests, known_duplicate_groups, series_digest

        # the corpus hashed once: to tell when it is scored (in-sample scores: see _novelty),
        # and its exact copies for every member (Member.fit's duplicate_groups)
        digests = [series_digest(x) for x in Xs]
        self._corpus_digests = frozenset(digests)
        groups = groups_of_digests(digests, Xs.__getitem__)
        specs = self._member_specs(Xs, start)
        from ._members import planned_steps, scorer_class
        from ._progress import plan

        plan(sum(planned_steps(spec, n) for spec in specs))
        for spec in specs:
            need = scorer_class(spec.scorer).min_corpus
            if n < need:
                raise ValueError(
                    f"scorer {spec.label().rsplit('+', 1)[-1]!r} needs at least {need} normal "
                    f"series, got {n} sample{'s' if n != 1 else ''} (the 'knn' scorer works "
                    "from one)"
                )
        preprocessors: dict = {}
        from tskernels._random_convolution import sharing_features

        # members with equal MiniRocket transforms compute them once
        with sharing_features(), known_duplicate_groups(Xs, groups):
            members = [self._new_member(spec, n).fit(Xs, preprocessors) for spec in specs]
        self._set_calibration(members, n)  # sets members_ once the calibration is sound
        self.fit_seconds_ = time.perf_counter() - start
        return self

    def score_samples(self, X) -> np.ndarray:
        """Normality score per series (higher = more normal), array (n,)."""
        return -self._novelty(X)

    def decision_function(self, X) -> np.ndarray:
        """score_samples - offset_: negative exactly for predicted outliers, array (n,).

        0 where the score equals the threshold, infinite ones included (a +inf novelty at a
        +inf threshold is not flagged, as its p-value says): never NaN."""
        return self._decision(self.score_samples(X))

    def _decision(self, s: np.ndarray) -> np.ndarray:
        """``decision_function`` from the scores ``s`` (the one rule; 0 where ``s == offset_``)."""
        with np.errstate(invalid="ignore"):  # inf - inf, replaced by 0 below
            return np.where(s == self.offset_, 0.0, s - self.offset_)

    def predict(self, X, fdr: float | None = None) -> np.ndarray:
        """+1 for inliers, -1 for outliers, array (n,).

        ``fdr=None`` (default): outlier where the conformal p-value is ``<= contamination`` (a
        per-series false-alarm rate). ``fdr=q``, a float in (0, 1): outlier where the
        Benjamini-Hochberg rule at level ``q`` rejects among the conformal p-values of the
        series of X (:func:`novelty.detector._calibration.benjamini_hochberg`): the expected share
        of normal series among those flagged is at most ``q`` (conformal p-values of exchangeable
        normal series are PRDS; marginally over the corpus draw, up to the O(1/n) of held-out
        calibration scores). The flags then depend on the whole batch X. A corpus of one
        series (no calibration scores, p-values all 1) flags nothing. A conformal p-value is
        at least 1/(n+1) (n held-out normal series), so BH flags a lone series among the m of
        X only when n >= m/q - 1, and nothing at all when n < 1/q - 1; when nothing is flagged
        and that is why, a UserWarning names the corpus size needed
        (:func:`novelty.detector._calibration.fdr_shortfall`).
        """
        if fdr is None:
            return np.where(self.decision_function(X) >= 0, 1, -1)
        return np.where(self._assess(X, fdr)[2], -1, 1)  # fdr checked before any scoring

    def p_values(self, X) -> np.ndarray:
        r"""Conformal p-values :math:`(1 + \#\{c_i \ge s(x)\}) / (n + 1)`, array (n,): small =
        unlike the corpus; for a new normal series :math:`P(p \le \varepsilon) \le \varepsilon`."""
        return self._p_values_of(self._novelty(X))

    def _p_values_of(self, novelty: np.ndarray) -> np.ndarray:
        """``p_values`` from the novelty scores (``-score_samples``) of the series."""
        if self.calibration_scores_.size == 0:  # a corpus of one series
            return np.ones_like(novelty)
        return conformal_p_values(self.calibration_scores_, novelty)

    def _assess(self, X, fdr: float | None = None):
        """``(novelty, p, flagged)`` of X from one scoring pass: ``novelty == -score_samples(X)``,
        ``p == p_values(X)`` and ``flagged == (predict(X, fdr) == -1)`` (bool arrays (n,))."""
        if fdr is not None:  # before any scoring
            from tskernels._constraints import validate_parameter_constraints

            from ._calibration import FDR

            validate_parameter_constraints({"fdr": [None, FDR]}, {"fdr": fdr}, "predict")
        novelty = self._novelty(X)
        return (novelty, *self._outcome(novelty, fdr))

    def _outcome(self, novelty: np.ndarray, fdr: float | None = None):
        """``(p, flagged)`` of series whose novelty (``-score_samples``) is already known, by
        ``predict``'s rules: ``fdr=None``, ``decision_function < 0``; else Benjamini-Hochberg
        at ``fdr`` over these series, with ``predict``'s warning when it flagged nothing because
        it could not flag a lone series (:func:`~novelty.detector._calibration.fdr_shortfall`)."""
        novelty = np.asarray(novelty, dtype=np.float64)
        p = self._p_values_of(novelty)
        if fdr is None:
            return p, self._decision(-novelty) < 0
        from ._calibration import benjamini_hochberg

        q = float(fdr)  # checked by _assess
        flagged = benjamini_hochberg(p, q)
        if not flagged.any():  # say so when BH could not have flagged a lone series
            from ._calibration import fdr_shortfall

            why = fdr_shortfall(self.calibration_scores_.size, q, flagged.size)
            if why is not None:
                warnings.warn(why, UserWarning, stacklevel=4)  # predict's or _assess's caller
        return p, flagged

    def update(self, X_new, refit: bool = False) -> KernelNoveltyDetector:
        """Add confirmed-normal series ``X_new`` (read as ``fit`` reads X) to the corpus;
        returns self. ``refit=False``: what was fitted on the corpus stays frozen
        (pre-processing, kernel parameters, members); kNN members append the new rows
        (O(n_new N) kernel evaluations), other scorers are refitted on the stored Gram, and
        the calibration is updated so that the conformal guarantee holds. ``refit=True``:
        ``fit`` on the union. What is exchangeable with what: :mod:`novelty.detector._update`."""
        from ._update import update_detector

        return update_detector(self, X_new, refit=refit)

    def score(self, X, y=None) -> float:
        """ROC-AUC of ``score_samples`` on labelled series, normal as the positive class:
        ``y == normal_label`` when that is set, else ``y == 1`` (scikit-learn's inlier label,
        -1 or anything else being an anomaly). What ``GridSearchCV`` maximises when no
        ``scoring`` is given (the novelty detectors of scikit-learn have no ``score``).
        ``y`` is required and must hold both normal series and anomalies."""
        if y is None:
            raise ValueError(
                "score(X, y) needs labels y (normal = normal_label, or 1 when normal_label is "
                "None) to compute a ROC-AUC; for GridSearchCV pass y to fit, or a `scoring`"
            )
        from sklearn.metrics import roc_auc_score

        y = np.asarray(y).ravel()
        normal = y == (1 if self.normal_label is None else self.normal_label)
        if normal.all() or not normal.any():
            which = "anomalies" if normal.all() else "normal series"
            rule = "y == 1" if self.normal_label is None else f"y == {self.normal_label!r}"
            raise ValueError(
                f"score(X, y): y holds no {which} (normal: {rule}), so no ROC-AUC; "
                "set normal_label to the normal class"
            )
        return float(roc_auc_score(normal, self.score_samples(X)))

    def plot_scores(self, X, **kwargs):
        """Score distributions and flagged series on ``X``: :func:`novelty.plot_scores`."""
        from ._plot import plot_scores

        return plot_scores(self, X, **kwargs)

    def explain(self, X, **kwargs):
        """Per channel and per time step, how much each part of each series raises its novelty
        (occlusion: the drop when the part is replaced by the corpus's typical values): an
        :class:`novelty.Explanation`; options and formulas in
        :func:`novelty.detector._explain.explain`."""
        from ._explain import explain

        return explain(self, X, **kwargs)

    def plot_explanation(self, X, i: int = 0, **kwargs):
        """Series ``i`` of ``X`` with its channel ranking and time attribution:
        :func:`novelty.plot_explanation`."""
        from ._explain import plot_explanation

        return plot_explanation(self, X, i, **kwargs)

    def save(self, path):
        """Write the fitted detector to one file at ``path`` (atomically), returns the path.

        Format: :mod:`novelty.detector._persistence`: a SHA-256 checksum, a JSON header
        (versions, input contract) and the state, which holds only plain data, arrays and the
        names of the package's own classes, so that :meth:`load` runs no code from the file."""
        from ._persistence import save_detector

        return save_detector(self, path)

    @classmethod
    def load(cls, path, *, trust_pickle: bool = False, trusted=()) -> KernelNoveltyDetector:
        """The fitted detector saved at ``path`` by :meth:`save`, loaded without running code
        from the file (ValueError, naming it, for a file that names anything but the
        package's own classes and plain data; for a damaged file, by its checksum; for a file
        that is not a saved detector). UserWarning when another package version saved it.

        ``trust_pickle=True`` also loads a file saved by tskernels 0.1 (a joblib pickle:
        **loading it runs any code the file holds**, so only for files you trust; save it
        again to convert it). ``trusted``: ``"module.Class"`` names of your own classes
        (a custom kernel) that you vouch for."""
        from ._persistence import load_detector

        return load_detector(path, cls, trust_pickle=trust_pickle, trusted=trusted)

    def __repr__(self, N_CHAR_MAX=700):
        """scikit-learn's repr; a fitted detector with several members or a selection
        (``scorer="auto"``) adds what it fitted, e.g.
        ``# fitted: minirocket_std+knn(k=5) + minirocket+knn`` or
        ``# fitted: GlobalAlignmentKernel+knn (auto chose baseline)``."""
        text = super().__repr__(N_CHAR_MAX=N_CHAR_MAX)
        members = getattr(self, "members_", None)
        if not members or (len(members) == 1 and not hasattr(self, "selection_")):
            return text
        note = " + ".join(m.spec.label() for m in members)
        table = getattr(self, "selection_", None)
        if table is not None and "chosen" in table:
            chosen = table.loc[table["chosen"], "candidate"]
            if len(chosen):
                note += f" (auto chose {chosen.iloc[0]})"
        return f"{text}  # fitted: {note}"

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.allow_nan = self.missing == "interpolate"  # NaN gaps are filled
        tags.non_deterministic = False
        return tags

    # ------------------------------------------------------------------ single-member views
    @property
    def kernel_(self):
        check_is_fitted(self, "members_")
        return self.members_[0].kernel_

    @property
    def scorer_(self):
        check_is_fitted(self, "members_")
        return self.members_[0].scorer_

    @property
    def corpus_(self):
        check_is_fitted(self, "members_")
        return self.members_[0].corpus_

    @property
    def preprocessor_(self):
        check_is_fitted(self, "members_")
        return self.members_[0].preprocessor_

    # ------------------------------------------------------------------ internals
    def _new_member(self, spec, n: int):
        """The unfitted member of ``spec``: the class its ``kind`` names
        (:mod:`novelty.detector._member_kinds`); a ``"gram"`` spec with ``approximation``
        becomes an approximate member above ``n_components`` series."""
        from ._member_kinds import member_class

        if spec.kind != "gram" or self.approximation is None:
            return member_class(spec.kind)(spec)
        from ._approx_member import make_member

        return make_member(
            spec, self.approximation, self.n_components, self.landmarks, self.random_state, n
        )

    def _member_specs(self, Xs, start: float) -> list:
        from ._auto import default_members, select_members
        from ._members import MemberSpec

        if self.approximation is not None and len(Xs) > self.n_components:
            # the selection compares exact Grams: on a seeded subsample of n_components series
            rng = np.random.default_rng(self.random_state)
            keep = np.sort(rng.choice(len(Xs), size=self.n_components, replace=False))
            Xs = Xs[keep]

        if self.kernel is None:
            return default_members(Xs)
        if _is_auto(self.scorer):
            specs, self.selection_ = select_members(
                Xs,
                kernels=[self.kernel],
                max_time=float(self.max_time) - (time.perf_counter() - start),
                random_state=self.random_state,
                preprocess=self.preprocess,
                normalize=self.normalize,
            )
            return specs
        return [MemberSpec.of_detector(self)]

    def _set_calibration(self, members: list, n: int, context: str = "") -> None:
        """``members_``, ``scales_``, ``calibration_scores_``, ``threshold_``, ``offset_`` and
        ``n_corpus_`` (= ``n``) from the fitted ``members`` and their held-out scores, the one
        rule of ``fit`` and ``update``: several members are put on one scale by their
        calibrations (:func:`~novelty.detector._members.robust_scale`) and averaged
        (:meth:`_combine`); the threshold is the conformal one at ``contamination``
        (+inf without held-out scores), with a UserWarning (its text starting with
        ``context``) when nothing can be flagged. NaN held-out scores raise before anything
        is set (a ``fit`` that fails so leaves the detector unfitted)."""
        from ._members import robust_scale

        calibrations = [m.calibration_ for m in members]
        scales = [robust_scale(c) for c in calibrations] if len(members) > 1 else None
        cal = _combined(calibrations, scales)
        if np.isnan(cal).any():
            raise ValueError("held-out novelty scores of the corpus are NaN: the scorer failed")
        self.members_, self.scales_, self.n_corpus_ = members, scales, n
        self.calibration_scores_ = cal
        # one series has no held-out score: it can be scored against, never flagged
        threshold = conformal_threshold(cal, self.contamination) if cal.size else math.inf
        n_inf = int(np.isposinf(cal).sum())
        if (
            math.isinf(threshold)
            and threshold > 0
            and n_inf
            and cal.size >= min_corpus_for(self.contamination)
        ):
            warnings.warn(
                f"{context}{n_inf} of {cal.size} held-out novelty scores of the corpus are +inf "
                "(the kernel underflows: those series have kernel value 0 to every other corpus "
                "series; the bandwidth is probably too small), so the threshold is +inf and no "
                f"series can be flagged at contamination={self.contamination}",
                UserWarning,
                stacklevel=4,  # the caller of fit or update
            )
        elif math.isinf(threshold) and threshold > 0:
            warnings.warn(
                f"{context}with {n} corpus series{_distinct_note(members[0], n)} no series can "
                f"be flagged at contamination={self.contamination} (conformal p-values are at "
                f"least 1/(n+1)); use at least {min_corpus_for(self.contamination)} series or a "
                "larger contamination",
                UserWarning,
                stacklevel=4,  # the caller of fit or update
            )
        self.threshold_ = threshold
        self.offset_ = -threshold

    def _combine(self, scores: list[np.ndarray]) -> np.ndarray:
        return _combined(scores, self.scales_)

    def _novelty(self, X) -> np.ndarray:
        check_is_fitted(self, "members_")
        from tskernels import SeriesBatch

        arrays = self._series_arrays(X, reset=False)  # checked once, as numpy
        Xs = SeriesBatch.from_checked(arrays)  # the one crossing in (shared memory)
        self._check_channels(X, _channels(Xs))
        _warn_in_sample(self, arrays)  # hashes the numpy series (no crossing back)
        _warn_uncalibrated_lengths(self, arrays)
        from ._progress import plan, progress, step

        with progress(self.verbose, "score"):
            plan(len(self.members_))
            import torch

            scores = []
            for m in self.members_:
                scores.append(m.novelty_tensor(Xs).to(device="cpu", dtype=torch.float64))
                step(m.spec.label())
        return self._combine(list(torch.stack(scores).numpy()))  # one crossing out

    def _check_channels(self, X, d: int) -> None:
        """The one channel check of series given to the fitted detector: ``d``, the channels
        read from ``X``, must be ``n_channels_`` (ValueError naming both, with a hint when
        ``X`` looks like one series given as a collection)."""
        if d != self.n_channels_:
            from .._layouts import single_series_hint

            hint = single_series_hint(X, self.n_channels_)
            raise ValueError(
                f"channel mismatch: the detector was fitted on series with d={self.n_channels_} "
                f"channels, got d={d}" + (f"; {hint}" if hint else "")
            )

    def _normal_rows(self, Xs, y):
        if y is None:
            return Xs
        if self.normal_label is None:
            labels = np.unique(np.asarray(y).ravel())
            if len(labels) > 1:  # scikit-learn's convention: y is ignored, but say so
                shown = ", ".join(repr(v.item() if hasattr(v, "item") else v) for v in labels[:5])
                warnings.warn(
                    f"fit(X, y): y holds {len(labels)} labels ({shown}"
                    f"{', ...' if len(labels) > 5 else ''}) and normal_label is None, so y is "
                    "ignored and every series is taken as normal; set normal_label=<the normal "
                    "class> to fit on that class only",
                    UserWarning,
                    stacklevel=3,
                )
            return Xs
        y = np.asarray(y).ravel()
        if len(y) != len(Xs):
            raise ValueError(f"`y` has {len(y)} labels for {len(Xs)} series")
        keep = np.flatnonzero(y == self.normal_label)
        if len(keep) == 0:
            raise ValueError(
                f"no series has the label normal_label={self.normal_label!r} "
                f"(labels present: {sorted(set(y.tolist()))})"
            )
        return Xs[keep]

    def _check_params(self) -> None:
        """The declared constraints (``_parameter_constraints``), then what depends on
        several parameters: the scorer's own parameters and its need of a normalised kernel."""
        from .._constraints import InvalidParameterError, validate_params

        if isinstance(self.kernel, str) and self.kernel == "auto":
            raise InvalidParameterError(KERNEL_AUTO_RETIRED)
        try:
            validate_params(self)
        except InvalidParameterError as err:
            if str(err).startswith("The 'kernel' parameter") and _kernel_hint(self.kernel):
                raise InvalidParameterError(f"{err} {_kernel_hint(self.kernel)}") from None
            raise
        if self.approximation is not None and self.n_components < 2:
            raise InvalidParameterError(
                f"The 'n_components' parameter of KernelNoveltyDetector must be an int in the "
                f"range [2, inf) with approximation={self.approximation!r}. Got "
                f"{self.n_components!r} instead."
            )
        from ._members import MemberSpec, make_scorer

        if self.kernel is not None and not _is_auto(self.scorer):
            # the scorer and its parameters, checked before any Gram is computed
            scorer = make_scorer(MemberSpec.of_detector(self))
            validate_params(scorer)
            if scorer.requires_normalized and not self.normalize:
                name = self.scorer if isinstance(self.scorer, str) else type(self.scorer).__name__
                raise ValueError(f"scorer={name!r} needs a normalised kernel: set normalize=True")

    def _series(self, X, reset: bool):
        """The series of ``X`` as a checked float64 :class:`tskernels.SeriesBatch` (on the
        CPU): the one check of the input per public call (the members, their pre-processing
        and kernels take it as checked, :mod:`novelty.detector._members`). NaN gaps are filled or
        refused by ``missing``."""
        from tskernels import SeriesBatch

        return SeriesBatch.from_checked(self._series_arrays(X, reset))

    def _series_arrays(self, X, reset: bool):
        """numpy (n, T, d) array or list of (T_i, d) arrays, validated (:meth:`_series`)."""
        from .._layouts import as_series_collection

        if hasattr(X, "ndim") and X.ndim == 2 and not hasattr(X, "columns"):
            if self.layout is None:
                a, b = X.shape
                raise ValueError(
                    f"X is a 2-D array of shape ({a}, {b}), which reads two ways: pass one "
                    f"recording of {a} steps and {b} channels as X[None] (shape (1, {a}, {b})), "
                    f"or {a} univariate series of {b} steps as X[..., None] (shape ({a}, {b}, "
                    '1)); or say which with layout="single" or layout="univariate"'
                )
            if self.layout == "single":
                return as_series_collection(np.asarray(X)[None], missing=self.missing)
        if hasattr(X, "ndim") and X.ndim <= 2 and not hasattr(X, "columns"):
            # 2-D (n, T): univariate series, validated the scikit-learn way
            if self.missing != "interpolate":
                a = validate_data(self, X, reset=reset, dtype=np.float64, ensure_min_samples=1)
                return a[:, :, None]
            a = validate_data(
                self,
                X,
                reset=reset,
                dtype=np.float64,
                ensure_min_samples=1,
                ensure_all_finite="allow-nan",
            )
            # gaps interpolated; trailing all-NaN columns are padding of unequal lengths
            return as_series_collection(a[:, :, None], missing="interpolate")

        if reset and hasattr(self, "n_features_in_"):
            del self.n_features_in_
        return as_series_collection(X, missing=self.missing, layout=self.layout)


def _warn_in_sample(det, Xs) -> None:
    """Warn when series of the corpus itself are scored: a corpus series is its own nearest
    neighbour, so its score is in-sample (1-NN novelty 0), not comparable with new series'
    and not what the calibration used (the held-out scores, ``calibration_scores_``)."""
    digests = getattr(det, "_corpus_digests", None)
    if not digests:
        return
    from ._members import series_digest

    hits = sum(series_digest(x) in digests for x in Xs)
    if hits:
        warnings.warn(
            f"{hits} of {len(Xs)} scored series are exact copies of corpus series: their "
            "scores are in-sample (a corpus series is its own nearest neighbour, novelty 0 for "
            "1-NN), not held-out; the corpus's held-out novelty scores are "
            "calibration_scores_",
            UserWarning,
            stacklevel=4,
        )


def _warn_uncalibrated_lengths(det, Xs) -> None:
    """Warn when scored series have a length outside those the corpus calibrates
    (:func:`novelty.detector._persistence.calibrated_lengths`: the corpus's lengths, widened
    by the members' pooling): their scores rank, but their p-values are not calibrated."""
    from ._persistence import calibrated_lengths

    lo, hi = calibrated_lengths(det)
    lengths = [Xs.shape[1]] * len(Xs) if hasattr(Xs, "shape") else [len(x) for x in Xs]
    outside = sorted({t for t in lengths if not lo <= t <= hi})
    if not outside:
        return
    k = sum(not lo <= t <= hi for t in lengths)
    shown = ", ".join(map(str, outside[:5])) + (", ..." if len(outside) > 5 else "")
    calibrated = f"{lo}" if lo == hi else f"{lo} to {hi}"
    warnings.warn(
        f"{k} of {len(lengths)} scored series have length {shown}, outside the length the "
        f"corpus was calibrated on ({calibrated} steps): their scores still rank series, but "
        f"their p-values and flags are not calibrated (at another length normal series may "
        f"be flagged far more often than contamination={det.contamination}); score series "
        "of the corpus's length, or fit on series of this length",
        UserWarning,
        stacklevel=4,
    )


def _combined(scores: list[np.ndarray], scales: list | None) -> np.ndarray:
    r"""The members' novelty ``scores`` on one scale: the lone member's as float64, else the
    mean of :math:`(s - \operatorname{median}) / \operatorname{IQR}` over the members'
    ``scales``."""
    if scales is None:
        return np.asarray(scores[0], dtype=np.float64)
    z = [(s - med) / iqr for s, (med, iqr) in zip(scores, scales)]
    return np.mean(z, axis=0)


def _distinct_note(member, n: int) -> str:
    """Words for the warning when the corpus has exact copies: how many distinct series."""
    groups = getattr(member, "duplicate_groups_", None)
    if groups is None:
        return ""
    return f" ({int(groups.max()) + 1} distinct: copies of a series are one held-out unit)"


def _is_auto(scorer) -> bool:
    return isinstance(scorer, str) and scorer == "auto"


def _channels(Xs) -> int:
    return Xs.d
