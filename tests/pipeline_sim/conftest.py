"""Fixtures shared by the pipeline_sim tests."""

import builtins
from pathlib import Path

import pytest


@pytest.fixture
def files_read(monkeypatch) -> list:
    """The resolved paths of every file read through Path.read_text, Path.read_bytes or open while the test runs
    (each call recorded, then passed on)."""
    read = []

    def spy(real):
        def f(p, *a, **k):
            read.append(Path(p).resolve())
            return real(p, *a, **k)
        return f

    monkeypatch.setattr(Path, "read_text", spy(Path.read_text))
    monkeypatch.setattr(Path, "read_bytes", spy(Path.read_bytes))
    monkeypatch.setattr(builtins, "open", spy(builtins.open))
    return read
