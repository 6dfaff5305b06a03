"""Candidate score cache of the detector pool (issue 30): :mod:`.pool` computes, per benchmark
problem and candidate member, the held-out normal scores of the corpus and the raw test
scores; :mod:`.combine` evaluates ensembles of the cached candidates offline."""
