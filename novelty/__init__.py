"""novelty: scorers that consume Gram matrices, and detectors on series."""

__all__: list[str] = []
