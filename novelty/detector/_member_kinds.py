"""The member kinds the detector can build: one table, read by the detector and by model files.

A *member kind* is a :class:`~novelty.detector._members.BaseMember` subclass: what the detector
fits on the corpus, scales by its held-out scores and averages (docs/architecture.md, "Adding a
detector member kind"). :data:`MEMBER_KINDS` names each built-in kind's class by (module,
class name), so that

* :meth:`KernelNoveltyDetector._new_member` builds the class a spec's ``kind`` names
  (:func:`member_class`; the ``"gram"`` kind becomes an approximate member when the detector
  has ``approximation=``), and
* :data:`novelty.detector._persistence.SAFE_GLOBALS` lets a model file name every class of the
  table (:func:`member_globals`), and no other member class.

A built-in kind is therefore one new module and one line here. This module imports nothing
of the package at import time (the persistence module reads the table without loading the
members).

May import: the standard library only.
"""

from __future__ import annotations

import importlib

__all__ = ["MEMBER_KINDS", "member_class", "member_globals"]

#: kind -> (module, class name). ``"gram"``: pre-processing, kernel Gram, scorer
#: (:class:`~novelty.detector._members.Member`); ``"approximate"``: the same on explicit
#: features (:class:`~novelty.detector._approx_member.ApproximateMember`, built for a ``"gram"``
#: spec when the detector has ``approximation=``).
MEMBER_KINDS: dict[str, tuple[str, str]] = {
    "gram": ("novelty.detector._members", "Member"),
    "approximate": ("novelty.detector._approx_member", "ApproximateMember"),
}


def member_class(kind: str) -> type:
    """The class of member kind ``kind`` (a key of :data:`MEMBER_KINDS`); ValueError naming the
    kinds for any other value."""
    if kind not in MEMBER_KINDS:
        known = ", ".join(repr(k) for k in MEMBER_KINDS)
        raise ValueError(f"unknown member kind {kind!r}: the kinds are {known}")
    module, name = MEMBER_KINDS[kind]
    return getattr(importlib.import_module(module), name)


def member_globals() -> set[tuple[str, str]]:
    """The (module, class name) of every member kind: what a model file may name."""
    return set(MEMBER_KINDS.values())
