"""experiments.window_bench: the benchmark of novelty inside long recordings (issue 32).

Owns the streams (``_data``: NAB files, streams built from UCR/UEA sets, the seeded
tuning/confirmation split), the methods (``_methods``: ``WindowNoveltyDetector`` and its
tuning candidates, Sub-kNN, stumpy, aeon's and PyOD's detectors) and the resumable run and
report (``_run``). The command line is ``benchmarks/bench_windows.py``. May import
``novelty``; nothing in the package imports it.
"""
