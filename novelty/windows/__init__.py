"""novelty.windows: novelty inside long recordings, one score per time step.

Owns: :class:`WindowNoveltyDetector` (``_detector``: sliding windows of one or a few long
recordings, nearest normal windows, per-step scores, per-step conformal p-values calibrated on
held-out blocks), its window engine (``_engine``: window features in blocks, blocked
nearest-neighbour distances, window-to-step aggregation, streaming), the automatic window
(``_period``) and the recording command line (``_cli``, reached through ``tskernels-detect
fit/score --window``).

May import: ``novelty.detector._calibration`` and ``novelty.detector._progress`` (conformal
p-values, progress bars), the input boundary ``novelty._missing`` and the parameter dialect
``novelty._constraints``; the command line ``_cli`` alone also imports the file boundary
(``novelty.adapters._io`` to read, ``novelty.adapters._outputs`` to write); never
``experiments``. The public name is exported by :mod:`novelty` itself.
"""
