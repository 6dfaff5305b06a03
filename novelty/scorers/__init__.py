"""novelty.scorers: the novelty scorers and their one definition.

Owns: the contract of a scorer on Gram matrices (:class:`GramScorer`: ``fit(K)``,
``score(K_test, diag_test)`` higher = more novel, ``sweep``, held-out scoring, the class
attributes that define a scorer), every built-in scorer (variance norm: Mahalanobis and
conformance; spectral support; SOSREP; the baselines kNN, mean embedding, one-class SVM), their
feature forms on explicit features (``_feature_scorers``), the registry (``_scorer_registry``),
the Gram checks (``_validation``) and the fold rule of held-out scores (``_folds``).

May import: ``tskernels``, ``density`` (SOSREP's solver) and ``novelty._constraints``; never
``novelty.detector``, ``novelty.adapters`` or ``experiments``. The public names are exported by
:mod:`novelty` itself.
"""
