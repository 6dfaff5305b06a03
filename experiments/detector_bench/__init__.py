"""The detector benchmark: our ``KernelNoveltyDetector`` against ROCKAD and PyOD on 58 data sets.

The command lines are ``benchmarks/bench_detector.py`` (this protocol, SQLite store) and
``benchmarks/bench_aeon.py`` (the same problems through aeon's API, JSONL store); the protocol
lives here, one job per module:

* :mod:`.problems`: the data sets, the **tuning / confirmation halves** and the one-versus-rest
  problems;
* :mod:`.inputs`: the peers' input (missing values filled, lengths resampled, PyOD's flattening);
* :mod:`.methods`: the benchmarked methods (ours, ROCKAD, the recipe, PyOD, ``--extra``);
* :mod:`.evaluate`: one method on one problem, the metrics of a row;
* :mod:`.store`: the resumable results store and the run loop;
* :mod:`.report`: the markdown tables and the critical-difference diagram;
* :mod:`.aeon`: the aeon-API route (its problems, estimators, JSONL store, run) and
  :mod:`.aeon_report` its tables.

**Data sets**: the 11 UEA multivariate sets and the 47 UCR univariate sets of
``../shared/data`` (``data/uea`` and ``data/ucr`` inside the checkout, git-ignored). They are
split once into a **tuning half** and a **confirmation half** (:func:`.problems.halves`): within
each collection (UEA, UCR) the names, sorted, are permuted with the fixed seed ``SPLIT_SEED``
(21) and the first ceil(n / 2) go to the tuning half. The rule never looks at results; every
choice of the detector is made on the tuning half, and the confirmation half is what the docs
quote.

**Problems**: for every data set and at most 5 of its classes (a seeded choice among the sorted
labels when there are more, :func:`.problems.choose_classes`; fixed before any result was
seen), one class c is normal (one-versus-rest); the corpus is the training series of class c,
subsampled without replacement to at most 100 series; the test set is the test split, a
stratified (by class) subsample of at most 300 series, the same for every class of a data set;
label 1 = anomaly (class != c). Both subsamples are drawn with the seed, which every method also
gets as its ``random_state``.

**Methods** (:data:`.methods.METHODS`; the groups ``ours`` and ``peers`` expand):

* ``ours_default`` = ``KernelNoveltyDetector()`` and every ``--extra NAME=EXPR``: an
  estimator on raw series (arrays (n, T, d) or lists of (T_i, d) arrays; it pre-processes
  itself). EXPR is evaluated afresh for every problem with ``np``, ``novelty``, ``tskernels``,
  ``density`` and every public name of ``tskernels`` and ``novelty`` in scope; a
  ``random_state`` parameter left at None is set to the seed. Anomaly score =
  ``-score_samples(X)``; false alarms = test normals with ``predict(X) == -1``, nominal rate
  ``contamination`` if the detector has it, else ``1 - quantile``.
* ``ours_auto`` (``KernelNoveltyDetector(kernel="auto", scorer="auto")``) is no longer run:
  ``kernel="auto"`` was retired (:data:`.methods.RETIRED`; docs/results_detector.md); rows of
  it in a store still report, after ``ours_default``.
* ``rockad``: aeon's ROCKAD with its defaults and ``random_state=seed`` on the raw series in
  aeon's layout (n, d, T); its ``predict`` is an anomaly score (mean k-NN distance in the
  power-transformed ROCKET features: higher = more anomalous). It has no threshold, so no
  false-alarm rate. Its k-NN queries only test series against a bootstrap sample of the
  corpus, so ``n_neighbors = min(5, N)`` for a corpus of N < 5 series (StandWalkJump: 4).
  ``rockad_mean5``: the same for seeds 0-4 (ROCKET's draws vary), its ROC-AUC and AP the means
  of the five (each seed's figures in ``params``; a seed whose scores are not finite is left
  out of the mean and counted there); fit and score seconds are the totals.
* ``rockad_recipe``: ROCKAD's recipe written out, :class:`experiments.peers.RocketRecipe`
  (sktime's MiniRocket, multivariate, 10,000 kernels, ``random_state=seed``; unequal lengths
  resampled as for ROCKAD): features of the corpus standardised (scikit-learn's
  ``StandardScaler`` fitted on the corpus), anomaly score = mean Euclidean distance to the
  ``min(5, N)`` nearest corpus series (scikit-learn's ``NearestNeighbors``).
* ``pyod_knn``, ``pyod_iforest``, ``pyod_lof``, ``pyod_ocsvm``, ``pyod_ecod``: PyOD with its
  defaults (``random_state=seed`` for IForest) on flattened series
  (:class:`.inputs.Flattener`: :class:`tskernels.transforms.Preprocessor` without basepoint,
  i.e. average pooling with window ``1 + (T - 1) // 100`` when T > 100, z-score per (time
  step, channel) with the corpus's mean and std, ``(x - mean) / (std + 1e-4)``, clipping to
  +-5; then flattening to T * d columns). Anomaly score = ``decision_function``; false alarms =
  test normals with ``predict == 1``, nominal rate = ``contamination`` (0.1). PyOD's ECOD
  recomputes its empirical CDFs on the training data *plus the batch it scores*, so a test set
  made mostly of anomalies (as in one-versus-rest) would shift its own tails; ECOD therefore
  scores (and predicts) each test series in a call of its own: training data plus that one
  series. KNN and LOF fit the k-NN of corpus points among the others, so
  ``n_neighbors = min(default, N - 1)`` (defaults 5 and 20).
* Unequal lengths, for ROCKAD and PyOD only: every series whose length differs from the
  corpus's maximum length is resampled linearly (:func:`novelty._missing.resample_linear`: per
  channel, both ends kept) to that length before anything else. Our detectors get the list of
  series.
* Missing values (NaN inside series: DodgerLoopDay, DodgerLoopWeekend, MelbournePedestrian),
  for the peers only: filled first by ``novelty.interpolate_missing`` (linear per channel,
  edges held), the rule our detector applies itself (``missing="interpolate"``). Our detectors
  get the series with their NaN.
* A method that cannot run on a problem (PyOD's KNN and LOF need two corpus series; a corpus
  of one series occurs in Fungi and DiatomSizeReduction) records the error: "n/a" in the
  tables, and ROC-AUC 0.5 (chance) in the means and ranks of the report (``failed="chance"``,
  the command line's default), so every method is averaged over the same problems;
  ``failed="leave-out"`` drops data sets where any shown method failed instead.

**Metrics** per (data set, class, method, seed): ROC-AUC and average precision of the anomaly
score with the anomaly as the positive class, the false-alarm rate and its nominal value, fit
seconds (including the peers' flattening of the corpus) and score seconds (score and predict,
including the flattening of the test series), corpus and test sizes. A method's first
problem in a process also pays numba compilation or cache loading (ROCKET, our kernels): the
report gives median fit times. A method that raises records the error (one line) and the run
goes on.

**Store**: results go to SQLite, one committed row per problem and method, so an interrupted
run resumes and recomputes nothing done (:func:`.store.run_benchmark`); a rerun of a method
recomputes it, ``retry_errors`` the rows that failed. A method is identified by its name and,
for ``--extra``, its expression: a changed expression under a stored name is refused unless
the method is rerun, which then deletes the old rows. The store is the experiments package's
(:class:`experiments._store.DetectorBenchStore`, a ``SQLiteStore``): the limits (corpus, test,
classes) are its one setting (other limits are refused), each run is logged in its ``runs``
table (revision, device, package versions), and one run writes at a time (a second is refused
at once; a report reads during a run). A store of the former layout (before issue 24) is
converted in place by a run, read as is by a report.

Submodules import ``novelty``, ``tskernels``, aeon, sktime and PyOD lazily, where used.
"""


class CLIError(Exception):
    """A bad command line or store state: printed as one line, no traceback."""


__all__ = ["CLIError"]
