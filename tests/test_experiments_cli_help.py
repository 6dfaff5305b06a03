"""``python -m experiments --help`` names every command the README uses."""

from __future__ import annotations

import pytest

from experiments.__main__ import main


def test_help_lists_every_command(capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["--help"])
    assert exit_.value.code == 0
    usage = capsys.readouterr().out.splitlines()[0]
    for command in ("run", "report", "list", "demo", "adbench", "mauceri"):
        assert command in usage.split("{")[1], command


def test_mauceri_passes_its_arguments_through(capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["mauceri", "--help"])
    assert exit_.value.code == 0
    assert capsys.readouterr().out.startswith("usage: python -m experiments mauceri")
