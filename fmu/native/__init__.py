"""The FMU binary: ``cosim_fmi2.cpp`` (FMI 2.0 entry points forwarding to the
Python slave), compiled once per source version and cached.

It replaces pythonfmu 0.7.0's prebuilt wrapper, whose status codes, GUID
check, termination flag and interpreter finalization break the FMI 2.0.4
contract (see the header of ``cosim_fmi2.cpp``).  Built with the limited
Python C API (abi3, >= 3.8) and without linking libpython or referencing any
Python symbol: ``python_loader.h`` resolves them at ``fmi2Instantiate``, from
the host's Python if it has one, else from a libpython it loads itself (the one
recorded at build time in ``resources/cosim_python.cfg``, or
``$COSIM_FMU_LIBPYTHON``).

Portability (``glibc_compat.h``): libstdc++ is linked statically and libgcc
dynamically, ``_FORTIFY_SOURCE`` is off, and the few glibc symbols a newer static
libstdc++ or glibc would pull in are bound to old versions or replaced, so the
binary's highest GLIBC symbol version stays <= 2.28 (``objdump -T``).

The binary does not depend on the Python version (it uses the limited API and
binds every Python symbol at run time), so one build serves every CPython on
linux x86-64.  ``python -m fmu.native prebuild`` compiles it into
``fmu/native/prebuilt/<digest>/`` (package data: a wheel built after it carries the
binary, and ``cosim fmu build`` then needs no compiler); :func:`native_library`
uses a prebuilt binary only when its digest is that of these sources and flags
and the machine is x86-64 Linux, else the cached or freshly compiled one.
"""
from __future__ import annotations

import hashlib
import os
import platform
import shutil
import sys
import subprocess
import sysconfig
import tempfile
from pathlib import Path

from cosim.errors import CosimError
from cosim.private_dir import UnsafeDirectoryError, private_dir

HERE = Path(__file__).resolve().parent
SOURCES = ("cosim_fmi2.cpp", "native_step.h", "python_loader.h", "glibc_compat.h", "fmi2Functions.h",
           "fmi2FunctionTypes.h", "fmi2TypesPlatform.h")
FLAGS = ("-std=c++17", "-O2", "-shared", "-fPIC", "-fvisibility=hidden", "-U_FORTIFY_SOURCE",
         "-D_FORTIFY_SOURCE=0", "-static-libstdc++", "-Wl,-z,nodelete",
         "-Wl,--wrap=__libc_single_threaded", "-Wl,--wrap=arc4random",
         # dlopen & co. live in libdl.so.2 before glibc 2.34 (a stub after): always loaded
         "-Wl,--push-state,--no-as-needed", "-l:libdl.so.2", "-Wl,--pop-state")
GLIBC_BASELINE = (2, 28)  # the highest GLIBC symbol version the binary may need
PLATFORM = "linux64"


class NativeBuildError(CosimError):
    """The FMU binary could not be compiled."""


def _cache_root():
    """``$COSIM_CACHE_DIR/fmu-native``, else ``$XDG_CACHE_HOME/cosim/fmu-native`` (default
    ``~/.cache/cosim/fmu-native``)."""
    if os.environ.get("COSIM_CACHE_DIR"):
        return Path(os.environ["COSIM_CACHE_DIR"]) / "fmu-native"
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "cosim" / "fmu-native"


def _compiler():
    for name in (os.environ.get("CXX"), "g++", "c++", "clang++"):
        if name and shutil.which(name):
            return shutil.which(name)
    return None


PREBUILT = HERE / "prebuilt"


def source_digest():
    """16 hex digits identifying the binary: SHA-256 of the sources and compiler flags."""
    digest = hashlib.sha256()
    for name in SOURCES:
        digest.update((HERE / name).read_bytes())
    digest.update(" ".join(FLAGS).encode())
    return digest.hexdigest()[:16]


def native_library(prebuilt=None):
    """Path of the FMU binary: the one shipped in ``prebuilt`` for these sources (x86-64
    Linux), else the cached one, else compiled now and cached (by source digest)."""
    if not sysconfig.get_platform().startswith("linux"):
        raise NativeBuildError("cosim fmu build makes linux64 FMU binaries only (this is "
                               f"{sysconfig.get_platform()})")
    digest = source_digest()
    shipped = Path(PREBUILT if prebuilt is None else prebuilt) / digest / "cosim_fmi2.so"
    if platform.machine() in ("x86_64", "AMD64") and shipped.is_file():
        return shipped
    target = _cache_root() / digest / "cosim_fmi2.so"
    try:  # the binary goes into every FMU: its folder must be this user's alone
        private_dir(target.parent, "FMU binary cache folder")
    except UnsafeDirectoryError:
        raise
    except OSError as exc:
        raise NativeBuildError(f"cannot create the FMU binary cache folder {str(target.parent)!r} "
                               f"({exc.strerror}); set COSIM_CACHE_DIR to a writable folder") from None
    if target.exists():
        return target
    return compile_library(target)


def compile_library(target):
    """Compile the FMU binary into ``target`` (atomically) and return it."""
    include = sysconfig.get_paths()["include"]
    target = Path(target)
    cxx = _compiler()
    if cxx is None:
        raise NativeBuildError("cosim fmu build compiles the FMU binary once and needs a C++17 "
                               "compiler (g++ or clang++; set CXX)")
    if not (Path(include) / "Python.h").exists():
        raise NativeBuildError(f"cosim fmu build needs the Python headers (Python.h not in {include})")
    target.parent.mkdir(parents=True, exist_ok=True)   # (the cache folder: made private already)
    with tempfile.TemporaryDirectory(dir=target.parent) as tmp:
        out = Path(tmp) / "cosim_fmi2.so"
        cmd = [cxx, *FLAGS, f"-I{include}", f"-I{HERE}", str(HERE / "cosim_fmi2.cpp"), "-o", str(out)]
        proc = subprocess.run(cmd, capture_output=True, text=True)
        if proc.returncode != 0:
            raise NativeBuildError(f"compiling the FMU binary failed ({' '.join(cmd)}):\n"
                                   f"{proc.stderr[-4000:]}")
        os.replace(out, target)  # atomic: concurrent builds never see a partial file
    return target


def main(argv=None):
    """``python -m fmu.native prebuild [FOLDER]``: compile the binary into FOLDER/<digest>/
    (default: this package's ``prebuilt/``, which a wheel built afterwards carries)."""
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] != "prebuild" or len(args) > 2:
        print("usage: python -m fmu.native prebuild [FOLDER]", file=sys.stderr)
        return 2
    if platform.machine() not in ("x86_64", "AMD64") or not sys.platform.startswith("linux"):
        print(f"prebuild: the shipped binary is for x86-64 Linux, this is {sysconfig.get_platform()}",
              file=sys.stderr)
        return 1
    folder = Path(args[1]) if len(args) == 2 else PREBUILT
    print(f"compiling the FMU binary into {folder / source_digest()} ...", flush=True)
    try:
        path = compile_library(folder / source_digest() / "cosim_fmi2.so")
    except NativeBuildError as exc:
        print(f"prebuild failed: {exc}", file=sys.stderr)
        return 1
    print(path)
    return 0
