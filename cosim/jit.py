"""The compiled backend's plumbing: is numba importable, where its on-disk
cache lives, and one ``njit`` wrapper (DESIGN.md "Compiled path").

* ``backend`` is ``"numba"``, ``"python"`` or ``"auto"`` (the default):
  numba where it is importable and the method/model pair has kernels, else
  the Python reference.  :func:`resolve_backend` says which one a run gets
  and why.
* Compiled code is cached on disk (``cache=True``) under
  ``$COSIM_CACHE_DIR`` or ``$XDG_CACHE_HOME/cosim/numba`` (default
  ``~/.cache/cosim/numba``); when that is not writable (an unpacked FMU on a
  read-only home, a ROS node under another user), a per-user directory in
  the system temp folder.  The compiled code lives in generated modules in
  ``<cache>/entries`` and numba caches it next to them (``__pycache__``), the
  same place whichever process imported numba first; ``NUMBA_CACHE_DIR`` is
  left to the user (setting it here only when cosim imported numba first gave
  two caches for one file and compiled twice).
* A first compilation says so on stderr, once per kernel set.
"""
from __future__ import annotations

import hashlib
import inspect
import os
import sys
import tempfile
import warnings

import numpy as np

from .errors import InvalidInputError

BACKENDS = ("auto", "numba", "python")
_state = {"numba": None, "error": None, "announced": set()}


class BackendFallbackWarning(UserWarning):
    """The compiled backend was asked for but the Python reference runs."""


def cache_dir():
    """The directory numba's cache uses (created 0700, writable, private to this user:
    :func:`cosim.private_dir.compile_cache_dir`; an existing one another user could
    write is an UnsafeDirectoryError naming it and the fix, COSIM_CACHE_DIR)."""
    from .private_dir import compile_cache_dir
    return compile_cache_dir()


def numba_module():
    """numba, imported once with the cache directory set; None if unavailable."""
    if _state["numba"] is None and _state["error"] is None:
        try:
            import numba  # noqa: PLC0415 (optional dependency, imported on demand)
        except Exception as exc:  # ImportError, or a broken llvmlite
            _state["error"] = f"{type(exc).__name__}: {exc}"
        else:
            _state["numba"] = numba
    return _state["numba"]


def numba_available():
    return numba_module() is not None


def unavailable_reason():
    numba_module()
    return _state["error"]


def check_backend(backend):
    """Validate a backend name (``None`` means ``"auto"``)."""
    name = "auto" if backend is None else str(backend).strip().lower()
    if name not in BACKENDS:
        raise InvalidInputError(f"backend must be one of {', '.join(BACKENDS)}, got {backend!r}")
    return name


# callables that also receive every notice (the FMU sends them to the host's FMI logger)
listeners = []


def say(message):
    """One notice on stderr (and to every listener)."""
    print(f"cosim: {message}", file=sys.stderr, flush=True)
    for listener in list(listeners):
        try:
            listener(message)
        except Exception:  # noqa: BLE001 - a broken listener must not stop a compile
            pass


def announce(key, message):
    """One line on stderr, once per ``key`` and process (compilation notices)."""
    if key in _state["announced"]:
        return
    _state["announced"].add(key)
    say(message)


class compiling:
    """Context manager around work that may compile for long (or only load from the
    cache): when it has taken ``quiet_for`` seconds, a line says what it compiles and
    an estimate, then one every ``every`` seconds while it runs, and one with the
    time it took — so no compile is silent for more than ~10 s, and a cache load
    says nothing."""

    periodic = True   # False: only the first and the last line (a warmup worker: its parent says)

    def __init__(self, what, estimate, every=10.0, quiet_for=2.0, cached=False):
        self.what, self.estimate, self.every, self.quiet_for = what, estimate, every, quiet_for
        self.cached = cached   # a cache entry exists: a slow load is said as a load, not a compile

    def __enter__(self):
        import threading  # noqa: PLC0415
        import time  # noqa: PLC0415
        self._time = time
        self._t0 = time.perf_counter()
        self._stop = threading.Event()
        self._said = False

        def tick():
            if self._stop.wait(self.quiet_for):
                return
            self._said = True
            if self.cached:
                say(f"loading {self.what} from the compile cache ({cache_dir()})…")
            else:
                say(f"compiling {self.what} ({self.estimate}; once, then cached in {cache_dir()})…")
            doing = "loading" if self.cached else "compiling"
            while not self._stop.wait(self.every):
                if self.periodic:
                    say(f"  … still {doing} {self.what} ({time.perf_counter() - self._t0:.0f} s so far)")

        self._thread = threading.Thread(target=tick, name="cosim-compile-progress", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, exc_type, exc, tb):
        self._stop.set()
        self._thread.join()
        if exc_type is None and self._said:
            say(f"{'loaded' if self.cached else 'compiled'} {self.what} in "
                f"{self._time.perf_counter() - self._t0:.1f} s")
        return False


def fall_back(requested, reason):
    """Tell the user that the Python reference runs instead of numba."""
    if requested == "numba":
        key = ("fallback", reason)
        if key not in _state["announced"]:
            _state["announced"].add(key)
            warnings.warn(f"backend 'numba' not used: {reason}; running the python backend",
                          BackendFallbackWarning, stacklevel=3)
    elif requested == "auto" and numba_module() is None:
        announce(("no-numba",), f"numba is not importable ({_state['error']}); using the python backend "
                                "(pip install 'cosim[fast]' for the compiled one)")
    elif requested == "auto" and UNCOMPILABLE in reason:
        # a user's kernel numba rejects: the run works, slower — say why once
        announce(("fallback", reason), f"{reason}; running the python backend")
    return "python"


def njit(*args, **kwargs):
    """``numba.njit`` with the project's defaults (cache on disk, no fastmath:
    results must match the Python reference to roundoff); a cache hit loads without
    setting up numba's compiler (:func:`_loads_without_compiler`)."""
    numba = numba_module()
    kwargs.setdefault("cache", True)
    kwargs.setdefault("nogil", True)
    if len(args) == 1 and callable(args[0]) and not kwargs.get("parallel"):  # njit(fn)
        dispatcher = numba.njit(*args, **kwargs)
        _loads_without_compiler(dispatcher)
        return dispatcher
    if not args and not kwargs.get("parallel"):                            # njit(**options)(fn)
        def decorate(fn):
            dispatcher = numba.njit(**kwargs)(fn)
            _loads_without_compiler(dispatcher)
            return dispatcher
        return decorate
    return numba.njit(*args, **kwargs)


# -- model kernels ----------------------------------------------------------------------------
def kernel_helper(fn=None, *, inline=False):
    """Mark a module-level helper that model kernels call (e.g. a geometry
    function shared by several kernels): plain Python for the reference, made
    callable from compiled kernels by :func:`model_functions`.
    ``@kernel_helper(inline=True)``: inlined by numba into the compiled kernels that
    call it (:func:`njit_footer`) instead of compiled on its own."""
    if fn is None:
        return lambda f: kernel_helper(f, inline=inline)
    fn.__cosim_kernel_helper__ = True
    fn.__cosim_inline__ = inline
    return fn


def _kernel_helpers(kernel_functions):
    """The marked helpers of the modules the kernels live in, registered with
    numba (``register_jitable`` leaves the Python function as it is)."""
    from numba.extending import register_jitable  # noqa: PLC0415
    found = []
    for mod in {sys.modules[f.__module__] for f in kernel_functions}:
        for obj in vars(mod).values():
            if callable(obj) and getattr(obj, "__cosim_kernel_helper__", False):
                if not getattr(obj, "__cosim_registered__", False):
                    register_jitable(obj)
                    obj.__cosim_registered__ = True
                found.append(obj)
    return sorted(found, key=lambda f: f.__qualname__)

# argument types of each kernel of the protocol (cosim.models.kernels): "a" a 1-d float
# array, "A" a 2-d one, "f" a float
KERNEL_SIGNATURES = {
    "mass": "afaA", "forces": "aafaaa", "constraints": "afaa", "constraint_jacobian": "afaA",
    "constraint_dt": "afaa", "gamma": "aafaa", "force_jacobians": "aafaaAA",
    "constraint_force_jacobian": "aafaA", "mass_jacobian_term": "aafaA", "outputs": "aafaaa",
    "nonholonomic_matrix": "afaA", "nonholonomic_offset": "afaa", "nonholonomic_gamma": "aafaa",
    "nonholonomic_force_jacobian": "aafaA", "nonholonomic_velocity_jacobian": "aafaA",
}
_kernel_checks = {}  # kernel function -> None or why it does not compile (this process)
UNCOMPILABLE = "does not compile with numba"   # in the reason: fall_back announces it


def kernels_uncompilable(kernel_set, model_name):
    """Why numba cannot compile a kernel of ``kernel_set`` (None: every given kernel
    compiles), so that a model whose kernels numba rejects (a call to an unmarked
    helper, a Python object, an unsupported function) runs on the Python reference
    with that reason instead of failing in its first compiled step.  Each kernel is
    compiled alone once with the protocol's argument types; a success is remembered
    on disk by the digest of its source (and its helpers'), so a warm run only hashes."""
    numba = numba_module()
    if numba is None:
        return None
    # a first check compiles each kernel alone (about a second each): never silently
    with compiling(f"the kernels of model {model_name!r} one by one (a check that they compile)",
                   "seconds"):
        for name, letters in KERNEL_SIGNATURES.items():
            fn = getattr(kernel_set, name, None)
            if fn is None:
                continue
            if fn not in _kernel_checks:
                _kernel_checks[fn] = _kernel_check(numba, fn, letters)
            why = _kernel_checks[fn]
            if why is not None:
                return f"kernel {name} of model {model_name!r} ({fn.__module__}.{fn.__qualname__}) " + why
    return None


_sources = {}   # function -> its source (this process)


def _function_source(fn):
    """``inspect.getsource(fn)``, once per function and process: a robot's nine kernels
    share ~20 helpers, and tokenising each helper again for every kernel (the compile
    check's digest, the pasted kernels) cost a URDF robot's set-up about 0.2 s."""
    if fn not in _sources:
        _sources[fn] = _module_level_source(fn) or inspect.getsource(fn)
    return _sources[fn]


def _last_line(code):
    """The last source line an instruction of ``code`` (nested code included) starts on."""
    last = max((line for _, _, line in code.co_lines() if line is not None),
               default=code.co_firstlineno)
    for const in code.co_consts:
        if isinstance(const, type(code)):
            last = max(last, _last_line(const))
    return last


def _module_level_source(fn):
    """The source of a module-level function without tokenising its file (inspect's
    block finder tokenised a whole module per function: ~1 ms each, ~40 functions on
    a robot's warm start): its lines from the first decorator to the last line an
    instruction starts on, then on while lines are blank or indented (the rest of a
    statement, a trailing ``pass``), trailing blank lines dropped.  That is
    ``inspect.getsource``'s text for every function of cosim
    (``tests/test_jit_cache_load.py``), so generated modules and their cache entries
    are unchanged.  None (ask inspect) for a nested function, an unreadable file, or
    an odd number of triple quotes (a string running on at column 0 past the last
    instruction)."""
    import linecache  # noqa: PLC0415
    code = getattr(fn, "__code__", None)
    if code is None or "." in fn.__qualname__:
        return None
    lines = linecache.getlines(code.co_filename, fn.__globals__)
    first = code.co_firstlineno - 1
    if not lines or first >= len(lines) or not lines[first].startswith(("def ", "@")):
        return None
    end = _last_line(code)           # 1-based: lines[:end] holds the last instruction
    while end < len(lines) and (not lines[end].strip() or lines[end][0] in " \t"):
        end += 1
    while end > first + 1 and not lines[end - 1].strip():
        end -= 1
    text = "".join(lines[first:end])
    if (text.count('"""') + text.count("'''")) % 2:  # a docstring running on at column 0
        return None
    return text


def _kernel_check(numba, fn, letters):
    try:
        helpers = _kernel_helpers([fn]) if fn.__module__ in sys.modules else []
        text = "".join(_function_source(f) for f in (fn, *helpers))
    except (OSError, TypeError):
        return None  # unreadable source: sources_unreadable() says so where it matters
    types = numba.types
    kinds = {"a": types.float64[:], "A": types.float64[:, :], "f": types.float64}
    digest = hashlib.sha256(f"{numba.__version__}\n{letters}\n{text}".encode()).hexdigest()[:20]
    base = cache_dir()   # (no private cache folder: no markers, the check runs each time)
    folder = os.path.join(base, "kernel_checks") if base else None
    marker = os.path.join(folder, digest) if folder else None
    if marker and os.path.exists(marker):
        return None
    try:
        numba.njit(tuple(kinds[c] for c in letters), cache=False, nogil=True)(fn)
    except numba.core.errors.NumbaError as exc:
        lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
        detail = next((line for line in lines if not line.startswith(("Failed in", "During:"))),
                      lines[0] if lines else type(exc).__name__)
        hint = ""
        if "Untyped global name" in detail and "function" in detail:
            hint = (" — a function a kernel calls must be marked @cosim.jit.kernel_helper (and "
                    "itself compile), or be inlined")
        return f"{UNCOMPILABLE}: {detail}{hint}"
    if marker:
        try:
            os.makedirs(folder, mode=0o700, exist_ok=True)
            with open(marker, "w", encoding="utf-8") as fh:
                fh.write(f"{fn.__module__}.{fn.__qualname__}\n")
        except OSError:
            pass
    return None


def _safe_source(obj):
    try:
        return inspect.getsource(obj)
    except (OSError, TypeError):
        return getattr(obj, "__qualname__", getattr(obj, "__name__", repr(obj)))


def _relative_import_lines(source):
    """Line numbers (1-based) of the module-level relative imports of ``source``
    (``from .x import …``, also over several lines), by the syntax tree."""
    import ast  # noqa: PLC0415
    drop = set()
    for node in ast.parse(source).body:
        if isinstance(node, ast.ImportFrom) and node.level > 0:
            drop.update(range(node.lineno, node.end_lineno + 1))
    return drop


def _relative_import_lines_scanned(lines):
    """:func:`_relative_import_lines` of cosim's own kernel modules without parsing them
    (parsing a method's five modules took ~20 ms of every warm start): a statement that
    starts a line with ``from .`` runs on while its parentheses are open or a line ends
    with a backslash (an import holds no string, so ``#`` starts a comment).  None when
    such a line may be inside a triple-quoted string (an odd number of triple quotes
    before it): then the tree decides.  ``tests/test_jit_cache_load.py`` checks that
    both agree on every method's modules."""
    drop = set()
    quoted = False
    i = 0
    while i < len(lines):
        line = lines[i]
        if line.startswith("from ."):
            if quoted:
                return None
            depth, j = 0, i
            while True:
                code = lines[j].split("#", 1)[0]
                depth += code.count("(") - code.count(")")
                drop.add(j + 1)
                if (depth <= 0 and not code.rstrip().endswith("\\")) or j + 1 == len(lines):
                    break
                j += 1
            i = j + 1
            continue
        quoted ^= (line.count('"""') + line.count("'''")) % 2 == 1
        i += 1
    return drop


def _module_body(module):
    """A method module's source for the generated file, its relative imports
    (``from .x import …``, also over several lines) dropped: their modules are
    pasted in too."""
    source = _safe_source(module)
    lines = source.splitlines()
    drop = _relative_import_lines_scanned(lines)
    if drop is None:
        drop = _relative_import_lines(source)
    lines = [ln for i, ln in enumerate(lines, 1) if i not in drop]
    return f"\n# ---- {module.__name__.rsplit('.', 1)[-1]} ----\n" + "\n".join(lines) + "\n"


def _global_names(code):
    """Global (and attribute) names a code object and its nested code use."""
    import types  # noqa: PLC0415
    names = set(code.co_names)
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            names |= _global_names(const)
    return names


def _literal(value):
    """Python source for a number (exact round trip), or None."""
    import math  # noqa: PLC0415
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    if isinstance(value, float) and not math.isfinite(value):
        return f"float({str(value)!r})"
    return repr(value)


def _pasted_kernels(kernel_functions, reserved, aliases=True, inlined=None):
    """The kernels' own source, made self-contained: the module-level functions
    and marked helpers they call, the modules they use (``math``, ``numpy``) and
    the number constants they read.  Numba's cached code then refers to nothing
    outside the generated file, so every copy of the package (an FMU's private
    ``cosim_fmu_<guid>.cosim``) shares one entry and one compilation.  ``None``
    when a kernel cannot be pasted (a closure, a global that is not a number or a
    plain module, a name clash): the kernels are then handed in by reference."""
    import types  # noqa: PLC0415
    defined, imports, constants, sources = {}, {}, {}, []
    queue = list(dict.fromkeys(kernel_functions))
    while queue:
        fn = queue.pop(0)
        if not isinstance(fn, types.FunctionType) or "." in fn.__qualname__ or fn.__closure__:
            return None
        name = fn.__name__
        if name in defined:
            if defined[name] is not fn:
                return None
            continue
        if name in reserved:
            return None
        defined[name] = fn
        if inlined is not None and getattr(fn, "__cosim_inline__", False):
            inlined.add(name)
        try:
            src = _function_source(fn)
        except (OSError, TypeError):
            return None
        lines = src.splitlines()
        while lines and lines[0].lstrip().startswith("@"):
            lines.pop(0)
        if not lines or not lines[0].startswith("def "):
            return None
        sources.append("\n".join(lines) + "\n")
        g = fn.__globals__
        for ref in sorted(_global_names(fn.__code__)):
            if ref not in g:
                continue  # a builtin or an attribute name
            obj = g[ref]
            if isinstance(obj, types.ModuleType):
                if obj.__name__ not in ("math", "numpy", "cmath"):
                    return None
                line = f"import {obj.__name__} as {ref}" if ref != obj.__name__ else f"import {ref}"
                if imports.setdefault(ref, line) != line:
                    return None
            elif isinstance(obj, types.FunctionType):
                if obj in kernel_functions or getattr(obj, "__cosim_kernel_helper__", False):
                    queue.append(obj)
                else:
                    return None
            else:
                literal = _literal(obj)
                if literal is None or constants.setdefault(ref, literal) != literal:
                    return None
    standard = {"math": "import math", "np": "import numpy as np", "numpy": "import numpy",
                "cmath": "import cmath"}
    clashing = {k for k, line in imports.items() if standard.get(k) != line}
    names = set(defined) | clashing | set(constants)
    if names & reserved or set(imports) & set(constants):
        return None
    text = "\n# ---- model kernels ----\n"
    text += "".join(line + "\n" for line in sorted(imports.values()))
    text += "".join(f"{k} = {v}\n" for k, v in sorted(constants.items()))
    text += "\n\n" + "\n\n".join(sources)
    if aliases:
        text += "".join(f"_k{i} = {fn.__name__}\n" for i, fn in enumerate(kernel_functions))
    return text


def kernel_fields():
    """The model functions a method receives, in order: cosim.models.kernels'
    MultibodyKernels fields (mass … outputs, then the nonholonomic ones)."""
    from .models.kernels import COMPILED_FIELDS, NONHOLONOMIC_FIELDS  # noqa: PLC0415
    return COMPILED_FIELDS + NONHOLONOMIC_FIELDS


def kernel_signature(name):
    """numba signature of the model kernel ``name`` (KERNEL_SIGNATURES letters)."""
    types = numba_module().types
    kinds = {"a": types.float64[:], "A": types.float64[:, :], "f": types.float64}
    return types.void(*(kinds[c] for c in KERNEL_SIGNATURES[name]))


def model_functions_type():
    """numba type of the tuple of a model's functions (first-class function types)."""
    types = numba_module().types
    return types.Tuple(tuple(types.FunctionType(kernel_signature(f)) for f in kernel_fields()))


METHOD_FORMAT = 1  # bump when a generated method module's layout changes
_methods = {}      # method module name -> compiled entry_at
_models = {}       # tuple of kernel functions -> (compiled functions, their addresses)

_METHOD_HEADER = '''"""{method}, compiled once per machine (generated by cosim.jit from the
source of {sources}; do not edit).  Source digest {digest}, format {fmt}."""
import types as _types

import numba as _numba
'''

# a first-class function value from its two addresses (the C wrapper and the
# numba-convention function): the model's functions in a method's entry_at, the
# method's entry_at in the C entry (cosim.jit.native_step_address)
_FUNCTION_AT = '''from numba import types as _nt
from numba.core import cgutils as _cg
from numba.extending import intrinsic as _intrinsic


@_intrinsic
def _function_at(typingctx, c_addr, jit_addr, fntype):
    ft = fntype.instance_type

    def codegen(context, builder, signature, args):
        fn = _cg.create_struct_proxy(ft)(context, builder)
        vp = context.get_value_type(_nt.voidptr)
        fn.c_addr = builder.inttoptr(args[0], vp)
        fn.jit_addr = builder.inttoptr(args[1], vp)
        fn.py_addr = _cg.get_null_value(vp)
        return fn._getvalue()
    return ft(_nt.int64, _nt.int64, fntype), codegen
'''

# the compiled entry takes the model's functions as an int64 array of addresses (row k:
# the C wrapper and the numba-convention function of kernel k, cosim.jit.model_functions)
# and makes them first-class function values again, so a call costs what a call with
# plain arrays costs (a tuple of dispatchers as an argument is unboxed per call: ~0.4 ms)
_METHOD_ENTRY_AT = '''

# ---- entry by addresses (cosim.jit.method_entry) ----
''' + _FUNCTION_AT + '''
_KINDS = {{"a": _nt.float64[:], "A": _nt.float64[:, :], "f": _nt.float64}}
{function_types}


def entry_at(addresses, mode, S, I, LU, u, p, t_target, max_steps, y_out):
    """entry() with the model's functions given by address."""
    fns = ({functions})
    # the caller owns the arrays for the whole call: no reference counts on them inside
    S, I, LU, u, p, y_out = _unowned((S, I, LU, u, p, y_out))
    return entry(fns, mode, S, I, LU, u, p, t_target, max_steps, y_out)
'''

# Arrays without their owner in a compiled method (kernel_common.unowned, keep_alive).
# numba counts references on every array it passes, slices, unpacks from a tuple or
# drops, with atomic increments and decrements: they were about a third of a two_link
# generalized-alpha step (benchmarks/do_step_overhead.py).  An array whose meminfo is
# null costs none of that, only a test of the pointer.  ``_unowned`` returns such
# copies of arrays (of a tuple of arrays, nested); the memory stays alive through an
# owned reference: entry_at's caller owns its arguments, and each method's advance()
# keeps its owned work arrays alive with ``keep_alive(owned)`` after end_advance —
# a use numba must keep, so it releases them only after the last view is used.
_UNOWNED = '''

# ---- arrays without reference counting (kernel_common.unowned; cosim.jit) ----
@_intrinsic
def _unowned(typingctx, arrays):
    # (nested: the footer compiles every plain function of this module)
    def plain(ty):
        return isinstance(ty, _nt.Array) or (isinstance(ty, _nt.BaseTuple) and all(plain(t) for t in ty))

    def strip(context, builder, ty, value):
        if isinstance(ty, _nt.Array):
            array = context.make_array(ty)(context, builder, value)
            array.meminfo = _cg.get_null_value(array.meminfo.type)
            array.parent = _cg.get_null_value(array.parent.type)
            return array._getvalue()
        for k, member in enumerate(ty):
            value = builder.insert_value(value, strip(context, builder, member,
                                                      builder.extract_value(value, k)), k)
        return value

    def codegen(context, builder, signature, args):
        return strip(context, builder, signature.args[0], args[0])
    return (arrays(arrays), codegen) if plain(arrays) else None


@_intrinsic
def _keep_alive(typingctx, owned):
    def codegen(context, builder, signature, args):
        return context.get_dummy_value()
    return _nt.none(owned), codegen


unowned, keep_alive = _unowned, _keep_alive
'''

# The njit options of a generated method module.  numba compiles every function as its
# own library and links into it, optimises and generates again the code of everything
# it calls, so compiling a method costs about the sum, over its functions, of all the
# code each one reaches (the .nbc cache files show it: benchmarks/compile_time.py).  The
# method's top three levels, entry -> advance -> step, are each called from one place
# and each reach nearly the whole method: they are inlined by numba into the compiled
# entry_at (inline="always": not compiled on their own; the same operations, so the
# same numbers — benchmarks/kernel_bits.py), which saved about 15-30 % of each
# method's compile (CPU).  A function inlined this way that gained a second caller
# would be compiled into both: correct, only slower to compile.  The quasi-Newton loop
# (kernel_common.quasi_newton, one caller in each method, called once per job of a solve)
# is inlined too: called on its own it cost generalized-α ~0.3 µs more of a two_link
# step (benchmarks/do_step_overhead.py).
_METHOD_FOOTER = '''

# error_model="numpy": x / 0.0 is inf/nan, which the kernels' finiteness checks turn
# into a status code with the record restored; numba's default raises a Python
# exception from the middle of a step and leaves the record half-written
for _name, _obj in list(globals().items()):
    if isinstance(_obj, _types.FunctionType) and _obj.__module__ == __name__:
        globals()[_name] = _numba.njit(cache=True, nogil=True, error_model="numpy",
                                       inline="always" if _name in _INLINE else "never")(_obj)
'''


def _quiet_experimental():
    """Silence numba's "first-class function type feature is experimental" warning
    (it is the documented mechanism this module relies on, tested here)."""
    from numba.core.errors import NumbaExperimentalFeatureWarning  # noqa: PLC0415
    warnings.filterwarnings("ignore", category=NumbaExperimentalFeatureWarning)


def _generated_module(kind, label, text, preset=None):
    """Import ``text`` from ``<cache>/entries/cosim_<kind>_<label>_<digest>.py`` (its
    first ``{digest}`` replaced by the text's digest; written once, atomically: numba's
    cache is keyed to the file's stamp), with ``preset`` globals bound before it runs."""
    import importlib.util  # noqa: PLC0415
    digest = hashlib.sha256(text.encode()).hexdigest()[:16]
    source = text.replace("{digest}", digest, 1)
    folder = os.path.join(cache_dir() or tempfile.mkdtemp(prefix="cosim-"), "entries")
    os.makedirs(folder, exist_ok=True)
    safe = "".join(c if c.isalnum() else "_" for c in label)
    modname = f"cosim_{kind}_{safe}_{digest}"
    if modname in sys.modules:
        return sys.modules[modname]
    path = os.path.join(folder, modname + ".py")
    current = None
    if os.path.exists(path):
        with open(path, encoding="utf-8") as fh:
            current = fh.read()
    if current != source:
        tmp = path + f".{os.getpid()}.tmp"
        with open(tmp, "w", encoding="utf-8") as fh:
            fh.write(source)
        os.replace(tmp, path)
    spec = importlib.util.spec_from_file_location(modname, path)
    module = importlib.util.module_from_spec(spec)
    module.__dict__.update(preset or {})
    sys.modules[modname] = module  # numba's cache re-imports it by name when it loads
    spec.loader.exec_module(module)
    return module


def method_signature():
    """numba signature of a method's ``entry_at(addresses, mode, S, I, LU, u, p,
    t_target, max_steps, y_out)``."""
    types = numba_module().types
    f1, i1 = types.float64[::1], types.int64[::1]
    return types.int64(types.int64[:, ::1], types.int64, f1, i1, types.float64[:, ::1], f1, f1,
                       types.float64, types.int64, f1)


def _has_cache_index(dispatcher):
    """Whether numba's disk cache holds an index for ``dispatcher`` (its generated
    module is named by the digest of its source, so an index is this source's
    compilation); False where numba's cache layout is not the one read here."""
    try:
        return os.path.exists(dispatcher._cache._cache_file._index_path)
    except AttributeError:
        return False


# symbols numba registers with LLVM only when its full compiler is set up (the string
# hash secret, numba.cpython.hashing); every other symbol a cached function can use is
# registered when numba's CPU context is created (its C helpers, libm, exceptions) or by
# the NRT initialisation done below
_LATE_SYMBOLS = (b"_numba_hashsecret_",)


_lazy_classes = {}   # numba code-library class -> its subclass parsing the bitcode when needed


def _lazy_linking_class(base):
    """``base`` (numba's JIT code library) whose copy of the code as LLVM bitcode — kept
    only to be linked into a later compilation that calls this function (and to list the
    library's symbols) — is parsed when first needed instead of at load: parsing a
    method's (~0.7 MB) took ~30 ms of a warm start, and nothing in a run needs it."""
    if base not in _lazy_classes:
        import llvmlite.binding as ll  # noqa: PLC0415

        class LazyLinkingLibrary(base):
            _lazy_bitcode = None

            def _parse_bitcode(self):
                bitcode, self._lazy_bitcode = self._lazy_bitcode, None
                if bitcode is not None:   # what numba's _unserialize does at load
                    self._shared_module = ll.parse_bitcode(bitcode)
                    self._codegen._engine._load_defined_symbols(self._shared_module)

            def _get_module_for_linking(self):
                self._parse_bitcode()
                return super()._get_module_for_linking()

            def get_pointer_to_function(self, name):
                if not self._codegen._engine.is_symbol_defined(name):
                    self._parse_bitcode()
                return super().get_pointer_to_function(name)

        _lazy_classes[base] = LazyLinkingLibrary
    return _lazy_classes[base]


def _unserialize_lazily(codegen, libdata, names):
    """numba's ``CPUCodeLibrary._unserialize`` of an object-code cache entry, its bitcode
    parsed later (:func:`_lazy_linking_class`).  The symbols a load and cosim ask for
    (``names``: the function, its Python and its C wrapper) are registered now, those
    the object code holds; asking for any other parses the bitcode first, as numba
    would have at load.  None (numba's own way) for another kind of entry."""
    name, kind, data = libdata
    engine = getattr(codegen, "_engine", None)
    if kind != "object" or not isinstance(getattr(engine, "_defined_symbols", None), set):
        return None
    object_code, shared_bitcode = data
    library = codegen.create_library(name)
    library.__class__ = _lazy_linking_class(type(library))
    library.enable_object_caching()
    library._set_compiled_object(object_code)
    library._lazy_bitcode = shared_bitcode
    library._finalize_final_module()
    engine._defined_symbols.update(n for n in names if n.encode() in object_code)
    return library


def _loads_without_compiler(dispatcher, lazy_linking=False):
    """Make ``dispatcher`` load a cache hit without setting up numba's compiler.

    numba refreshes its whole typing and lowering context before it even looks in the
    disk cache: it imports ~100 implementation modules (and scipy.linalg through its
    BLAS check) and installs their registries — about a quarter of the CPU time of a
    warm first ``Simulation(...)`` (benchmarks/construct_time.py), none of it used by
    loading machine code.  Here a hit is rebuilt after only the NRT
    initialisation (the allocator a cached function may call); a miss, or an entry that
    needs more (object mode, lifted loops, parfors, the hash secret), refreshes the
    context first as numba does, so a compilation always has its full compiler.  Any
    other numba cache layout keeps numba's own path.  ``lazy_linking``: the copy of the
    code kept for linking is parsed when first needed (:func:`_unserialize_lazily`)."""
    cache = getattr(dispatcher, "_cache", None)
    if not all(hasattr(cache, a) for a in ("_enabled", "_index_key", "_cache_file", "_impl",
                                           "_guard_against_spurious_io_errors")):
        return
    from numba.core.runtime import rtsys  # noqa: PLC0415

    def load_overload(sig, target_context):
        if not cache._enabled:
            return None
        with cache._guard_against_spurious_io_errors():   # (numba's: Windows EACCES)
            data = cache._cache_file.load(cache._index_key(sig, target_context.codegen()))
        if data is None:
            return None
        try:
            (_, kind, code), objectmode, lifted, reload_init = data[0], data[4], data[5], data[7]
            light = (kind == "object" and not objectmode and not lifted and not reload_init
                     and not any(s in part for s in _LATE_SYMBOLS for part in code))
        except (TypeError, ValueError, IndexError):
            light = False
        if light:
            rtsys.initialize(target_context)
        else:
            target_context.refresh()
        if light and lazy_linking:
            codegen = target_context.codegen()
            try:
                fndesc = data[1]
                names = (fndesc.llvm_func_name, fndesc.llvm_cpython_wrapper_name,
                         fndesc.llvm_cfunc_wrapper_name)
            except (AttributeError, IndexError, TypeError):
                names = None

            def unserialize(libdata):
                lazy = _unserialize_lazily(codegen, libdata, names) if names else None
                return lazy if lazy is not None else type(codegen).unserialize_library(codegen, libdata)

            # (numba's global compiler lock is held here: no other load sees the swap)
            codegen.unserialize_library = unserialize
            try:
                return cache._impl.rebuild(target_context, data)
            finally:
                del codegen.unserialize_library
        return cache._impl.rebuild(target_context, data)

    cache.load_overload = load_overload


# The functions of a method inlined by numba into their one caller: entry -> advance
# -> step and the quasi-Newton loop, and each module's ``INLINED`` (helpers with at
# most one calling function in the method: tests/test_inlined.py).  A call of a
# function compiled on its own passes every argument by value, a tuple flattened into
# its members: the work tuple of ~50 arrays made each call of a helper cost up to a
# few hundred ns.  docs/compiled-backend.md ("Inlined helpers") has each method's step
# and compile times before and after.
METHOD_INLINED = ("entry", "advance", "step", "quasi_newton")


def method_inlined(modules):
    """The names numba inlines in a method made of ``modules`` (sorted)."""
    names = set(METHOD_INLINED)
    for module in modules:
        names.update(getattr(module, "INLINED", ()))
    return tuple(sorted(names))


def njit_footer(inlined):
    """The end of a generated module: every function of it compiled with the njit
    options of :data:`_METHOD_FOOTER`, those named in ``inlined`` inlined into their
    callers."""
    return f"\n_INLINE = {tuple(inlined)!r}\n" + _METHOD_FOOTER


def method_entry(method_module, method_name, helpers=(), estimate="about 1-3 min"):
    """The compiled ``entry_at(addresses, mode, S, I, LU, u, p, t_target, max_steps,
    y_out)`` of ``method_module`` — its ``entry(fns, …)`` with the model's functions
    given by the addresses :func:`model_functions` returns — compiled once per
    machine for every model, cached on disk, with progress lines while it compiles.
    Compiled from a generated copy of the sources (``helpers`` pasted first) in the
    cache folder, so that every copy of the package (an FMU's private one) shares
    one compilation."""
    key = method_module.__name__
    if key in _methods:
        return _methods[key]
    numba_module()
    _quiet_experimental()
    fields = kernel_fields()
    modules = (*helpers, method_module)
    body = "".join(_module_body(m) for m in modules)
    types_text = "\n".join(f"_FT{k} = _nt.FunctionType(_nt.void(*(_KINDS[c] for c in "
                           f"{KERNEL_SIGNATURES[name]!r})))  # {name}"
                           for k, name in enumerate(fields))
    calls = ", ".join(f"_function_at(addresses[{k}, 0], addresses[{k}, 1], _FT{k})"
                      for k in range(len(fields)))
    text = (_METHOD_HEADER.format(method=method_name, digest="{digest}", fmt=METHOD_FORMAT,
                                  sources=", ".join(m.__name__.rsplit(".", 1)[-1] for m in modules))
            + body + _METHOD_ENTRY_AT.format(function_types=types_text, functions=calls)
            + _UNOWNED + njit_footer(method_inlined(modules)))
    module = _generated_module("method", method_name, text)
    signature = method_signature()
    entry = module.entry_at
    if tuple(signature.args) not in entry.overloads:  # (else: another copy of cosim loaded it)
        _loads_without_compiler(entry, lazy_linking=True)
        with compiling(f"method {method_name}", estimate, cached=_has_cache_index(entry)):
            entry.compile(signature)
        entry.disable_compile()  # other argument types are a bug, not a new compilation
    _methods[key] = entry
    return entry


# The C entry: one numba cfunc for every method, which calls the method's compiled
# entry_at by the address in the last row of ``addresses`` (native_addresses): it
# links none of the method's code, so it compiles in seconds, once per machine, and
# runs the very machine code a Python caller's entry_at runs
_NATIVE_STEP = '''"""The C entry of the compiled methods (generated by cosim.jit; do not edit).
Source digest {digest}."""
import numba as _numba
''' + _FUNCTION_AT + '''
_F1, _I1 = _nt.float64[::1], _nt.int64[::1]
_ENTRY = _nt.FunctionType(_nt.int64(_nt.int64[:, ::1], _nt.int64, _F1, _I1, _nt.float64[:, ::1], _F1, _F1,
                                    _nt.float64, _nt.int64, _F1))   # cosim.jit.method_signature


def native_step(mode, S, n_S, I, n_I, LU, N, u, n_u, p, n_p, t_target, max_steps, y_out, n_y,
                addresses, n_functions):
    """A method's entry_at() for a C caller (cosim.jit.native_step_address): every array
    as a pointer and its length (LU: N×N, addresses: n_functions×2, its last row the
    method's entry_at), C-contiguous."""
    rows = _numba.carray(addresses, (n_functions, 2))
    entry_at = _function_at(rows[n_functions - 1, 0], rows[n_functions - 1, 1], _ENTRY)
    return entry_at(rows, mode, _numba.carray(S, (n_S,)), _numba.carray(I, (n_I,)),
                    _numba.carray(LU, (N, N)), _numba.carray(u, (n_u,)), _numba.carray(p, (n_p,)),
                    t_target, max_steps, _numba.carray(y_out, (n_y,)))
'''

_native_step = []  # the cfunc, once made


def native_step_signature():
    """C signature of ``native_step`` (see :func:`native_step_address`)."""
    types = numba_module().types
    i8, f8 = types.int64, types.float64
    pf, pi = types.CPointer(f8), types.CPointer(i8)
    return i8(i8, pf, i8, pi, i8, pf, i8, pf, i8, pf, i8, f8, i8, pf, i8, pi, i8)


def native_step_address():
    """Address of ``int64 native_step(int64 mode, double *S, int64 n_S, int64 *I,
    int64 n_I, double *LU, int64 N, double *u, int64 n_u, double *p, int64 n_p,
    double t_target, int64 max_steps, double *y_out, int64 n_y, int64 *addresses,
    int64 n_functions)``: a method's compiled entry (:func:`method_entry`) for a
    caller without Python (the FMU binary, fmu/native/native_step.h), a numba
    ``cfunc`` with a plain C signature; ``addresses`` are :func:`native_addresses`
    (the model's functions, then the entry's own).  Returns the entry's status (0:
    done).  One for every method, compiled once per machine (seconds), cached."""
    if not _native_step:
        numba_module()
        _quiet_experimental()
        module = _generated_module("native", "step", _NATIVE_STEP)
        from numba.core import sigutils  # noqa: PLC0415
        from numba.core.ccallback import CFunc  # noqa: PLC0415
        if module._ENTRY.signature != method_signature():
            raise RuntimeError("cosim.jit: native_step's entry signature is not method_signature()")
        # numba.cfunc(signature, cache=True, ...)(native_step), with the cache hit loaded
        # as :func:`_loads_without_compiler` loads one (numba.cfunc compiles or loads
        # before it returns, so the loader is set on the CFunc it would make)
        entry = CFunc(module.native_step, sigutils.normalize_signature(native_step_signature()),
                      locals={}, options={"nogil": True, "error_model": "numpy"})
        entry.enable_caching()
        _loads_without_compiler(entry)
        with compiling("the C entry of the compiled methods", "seconds"):
            entry.compile()
        _native_step.append(entry)
    return _native_step[0].address


def native_addresses(entry, addresses):
    """The ``addresses`` :func:`native_step_address`'s C entry takes: the model's
    (:func:`model_functions`), then a row for the method's compiled ``entry``
    (:func:`method_entry`): its C wrapper and its numba-convention function."""
    return np.vstack([addresses, _address_rows([entry], [method_signature()])])


def _address_rows(dispatchers, signatures):
    """One row per compiled function of its signature: its C wrapper's address and its
    numba-convention function's (what ``_function_at`` makes a function value of)."""
    from numba.experimental.function_type import (  # noqa: PLC0415
        _get_jit_address, _get_wrapper_address)
    return np.array([[_get_wrapper_address(d, s), _get_jit_address(d, s)]
                     for d, s in zip(dispatchers, signatures)], dtype=np.int64).reshape(-1, 2)


_KERNELS_HEADER = '''"""Compiled model functions of {model} (generated by cosim.jit from their source;
do not edit).  Source digest {digest}."""
import types as _types

import numba as _numba
'''


# A generated model-kernel module (:func:`model_functions`) takes the methods' footer
# (:func:`njit_footer`) with its helpers marked ``kernel_helper(inline=True)`` inlined
# into the kernels that call them (the same operations, so the same numbers —
# benchmarks/kernel_bits.py).  A call to a helper compiled on its own increfs and
# decrefs each of its array arguments (tuple members included); the kernels, called
# by address from the methods, and the other helpers are compiled on their own.


def pasted_dispatchers(functions, kind, label, inline_helpers=False):
    """numba dispatchers (cached on disk) of ``functions``, made from one generated
    module that holds their source and that of every helper they call
    (:func:`_pasted_kernels`), so that the cache is keyed on all of that source — a
    function compiled by reference is cached on its own file's stamp only, and a
    changed helper in another file would load stale code.  ``inline_helpers``: the
    helpers marked ``kernel_helper(inline=True)`` inlined into their callers
    (:func:`njit_footer`).  None when the functions cannot be pasted."""
    inlined = set()
    pasted = _pasted_kernels(tuple(functions), {"_types", "_numba", "_name", "_obj", "_INLINE"},
                             aliases=False, inlined=inlined)
    if pasted is None:
        return None
    footer = njit_footer(sorted(inlined) if inline_helpers else ())
    text = _KERNELS_HEADER.format(model=label, digest="{digest}") + pasted + footer
    module = _generated_module(kind, label, text)
    compiled = [getattr(module, fn.__name__) for fn in functions]
    for dispatcher in compiled:
        _loads_without_compiler(dispatcher, lazy_linking=True)
    return compiled


def compiled_kernels(kernel_functions, *names):
    """The compiled functions (callable from Python) of the fields ``names`` of a kernel
    set :func:`model_functions` has compiled in this process, or None if it has not."""
    entry = _models.get(tuple(kernel_functions))
    if entry is None:
        return None
    fields = kernel_fields()
    return tuple(entry[0][fields.index(name)] for name in names)


def model_functions(kernel_functions, model_name):
    """The model's kernels (all of :func:`kernel_fields`, stubs for missing ones)
    compiled alone with the protocol's signatures (seconds; cached on disk; models
    sharing a kernel set, e.g. every URDF robot, share them), as the int64 array of
    their addresses that :func:`method_entry`'s ``entry_at`` takes: row k holds the
    C wrapper and the numba-convention function of kernel k."""
    key = tuple(kernel_functions)
    if key in _models:
        return _models[key][1]
    numba_module()
    fields = kernel_fields()
    if len(key) != len(fields):
        raise InvalidInputError(f"model {model_name!r}: {len(key)} kernel functions, the protocol "
                                f"has {len(fields)}")
    for fn in key:
        if "<locals>" in fn.__qualname__ or fn.__name__ == "<lambda>":
            raise InvalidInputError(f"kernel {fn.__qualname__!r} of model {model_name!r} must be a "
                                    f"module-level function to be compiled")
    compiled = pasted_dispatchers(key, "kernels", model_name, inline_helpers=True)
    if compiled is None:  # by reference: numba caches them by their own module
        _kernel_helpers(key)
        compiled = [njit(error_model="numpy")(fn) for fn in key]
    signatures = [kernel_signature(f) for f in fields]
    with compiling(f"the kernels of model {model_name}", "seconds"):
        for dispatcher, signature in zip(compiled, signatures):
            dispatcher.compile(signature)
    addresses = _address_rows(compiled, signatures)
    _models[key] = (tuple(compiled), addresses)  # the functions live as long as the process
    return addresses
