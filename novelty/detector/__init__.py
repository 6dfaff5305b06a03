"""novelty.detector: ``KernelNoveltyDetector`` and its pipeline.

Owns: the detector (``_detector``), its members (pre-processing, kernel, scorer fitted on a
corpus, held-out calibration scores: ``_members``), the default recipe and the label-free
selection on synthetic anomalies (``_auto``, ``_perturbations``), the conformal calibration and
FDR control (``_calibration``), the approximate members (``_approximation``,
``_approx_member``), ``update`` (``_update``), ``explain`` (``_explain``), saving and loading
(``_persistence``), progress (``_progress``) and the score plot (``_plot``).

May import: ``tskernels``, ``novelty.scorers``, the input boundary ``novelty._layouts`` /
``novelty._missing`` and ``novelty._constraints``; never ``novelty.adapters`` or
``experiments``. The public names are exported by :mod:`novelty` itself.
"""
