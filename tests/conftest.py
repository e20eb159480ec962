import pytest


@pytest.fixture
def harness(monkeypatch, request):
    """Factory of in-process plant + tester harnesses (ros_nodes.testing.Harness),
    closed after the test."""
    from ros_nodes.testing import Harness
    made = []

    def make(overrides=(), yaml_path=None):
        h = Harness(monkeypatch, request.node.name, overrides, yaml_path)
        made.append(h)
        return h
    yield make
    for h in made:
        h.close()
