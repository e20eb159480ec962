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


@pytest.fixture(scope="session", autouse=True)
def compiled_kernels_warm():
    """Compile (or load) the numba kernels of the library models and of URDF robots
    (one shared entry, cosim.models.rigid_body; ~65 s of CPU cold) once, before any
    test: a first compilation takes minutes on a loaded 2-core machine and prints
    a notice on stderr, which must not land inside a subprocess test (CLI one-line
    errors, FMU and ROS nodes with time limits).  Without numba: nothing to do."""
    from cosim.jit import numba_available
    if numba_available():
        import os

        from cosim.commands.warmup import warm_up
        warm_up(workers=min(2, os.cpu_count() or 1))  # a cold machine compiles two at a time
    yield
