"""The integrator modules stay reviewable: none longer than 600 lines (the one-algorithm
design's rule; a module that grows past it is split where its parts separate)."""
from pathlib import Path

import pytest

INTEGRATORS = Path(__file__).resolve().parents[1] / "cosim" / "integrators"


@pytest.mark.parametrize("path", sorted(INTEGRATORS.glob("*.py")), ids=lambda p: p.name)
def test_no_integrator_module_is_longer_than_600_lines(path):
    lines = len(path.read_text(encoding="utf-8").splitlines())
    assert lines <= 600, f"{path.name} has {lines} lines, more than 600"
