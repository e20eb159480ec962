import os

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
    errors, FMU and ROS nodes with time limits).  Without numba: nothing to do.
    COSIM_TEST_WARMUP=0 skips it (a run of a few tests on a warm machine)."""
    from cosim.jit import numba_available
    if numba_available() and os.environ.get("COSIM_TEST_WARMUP", "1") != "0":
        from cosim.commands.warmup import warm_up
        warm_up(workers=min(2, os.cpu_count() or 1))  # a cold machine compiles two at a time
    yield


@pytest.fixture(params=["python", "numba"])
def backend(request):
    """Runs a test twice: the method compiled (numba) and as plain Python — one
    implementation, two ways to execute it (cosim.integrators.ga_kernel)."""
    if request.param == "numba":
        from cosim.jit import numba_available
        if not numba_available():
            pytest.skip("numba is not importable")
    return request.param
