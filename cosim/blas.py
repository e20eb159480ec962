"""Single-threaded BLAS inside kernels whose bits must not depend on the thread count.

OpenBLAS splits a matrix product differently with 1 and with 2 threads, so
``expm`` and ``Φ @ y`` of a 160-state LTI model differed bit-wise between
``OPENBLAS_NUM_THREADS=1`` and ``=2`` (issue 14, item 5).  :func:`single_threaded`
sets every OpenBLAS loaded in the process (numpy's and scipy's bundled
copies) to one thread for the duration of a block and restores the previous
count.  The thread count is process-wide, as threadpoolctl's is; the libraries
are found once in ``/proc/self/maps`` and driven through their exported
``*_set_num_threads`` / ``*_get_num_threads`` (no new dependency).  Where no
OpenBLAS is found (another BLAS, another OS) it does nothing.
"""
import ctypes
import threading
from contextlib import contextmanager

_PREFIXES = ("openblas", "scipy_openblas")
_SUFFIXES = ("", "64_")
_lock = threading.RLock()
_libs = None


def _find():
    found = []
    try:
        with open("/proc/self/maps") as f:
            paths = sorted({line.split()[-1] for line in f if "openblas" in line.lower()
                            and line.split()[-1].startswith("/")})
    except OSError:
        return found
    for path in paths:
        try:
            lib = ctypes.CDLL(path)
        except OSError:
            continue
        for prefix in _PREFIXES:
            for suffix in _SUFFIXES:
                get = getattr(lib, f"{prefix}_get_num_threads{suffix}", None)
                put = getattr(lib, f"{prefix}_set_num_threads{suffix}", None)
                if get is not None and put is not None:
                    get.restype = ctypes.c_int
                    put.argtypes = [ctypes.c_int]
                    found.append((get, put))
                    break
            else:
                continue
            break
    return found


def libraries():
    """(get, set) thread-count functions of the OpenBLAS copies in this process."""
    global _libs
    if _libs is None:
        import numpy.linalg  # noqa: F401  load numpy's and scipy's BLAS before looking
        import scipy.linalg  # noqa: F401
        _libs = _find()
    return _libs


@contextmanager
def single_threaded():
    """Run the block with every OpenBLAS at one thread (restored afterwards)."""
    libs = libraries()
    with _lock:
        previous = [get() for get, _ in libs]
        for (_, put), n in zip(libs, previous):
            if n != 1:
                put(1)
        try:
            yield
        finally:
            for (_, put), n in zip(libs, previous):
                if n != 1:
                    put(n)
