"""novelty.adapters: the detector and the kernels where users meet them.

Owns: the sktime adapters (``_sktime``), the aeon detector (``_aeon``), scoring in Dask
partitions (``_dask_scoring``) and the series files of the detection CLI (``_io``).

May import: ``tskernels``, ``novelty.detector``, ``novelty.scorers`` and the input boundary;
never ``experiments``. The public names are exported by :mod:`novelty` itself.
"""
