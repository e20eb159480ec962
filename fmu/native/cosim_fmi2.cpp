// FMI 2.0 Co-Simulation entry points of a cosim FMU: a thin C++ layer that
// forwards every call to the Python slave object (fmu/slave.py) in the
// embedding (or host) interpreter.
//
// Derived from PythonFMU 0.7.0's native wrapper (MIT licence, Copyright (c)
// 2019-2020 NTNU - Department of Ocean Operations and Civil Engineering,
// Copyright (c) 2019-2020 Safran SA),
// rewritten where 0.7.0 breaks the FMI 2.0.4 contract:
//  * The Python runtime is found and loaded by the binary itself (python_loader.h):
//    the host's Python when it has one, else a libpython it loads (a host without
//    Python, e.g. a C program, needs nothing preloaded).  No Python symbol is
//    referenced directly; glibc_compat.h keeps the binary loadable on glibc 2.28.
//  * fmi2Instantiate checks fmuGUID against the FMU's own (§2.1.5) and the FMU's
//    host contract (Python range, packages: cosim_fmu.json "host"); on failure it
//    logs one line saying why and how to fix it, and returns NULL.
//  * A Python exception in a call is fmi2Error with its message logged; the
//    instance stays alive (0.7.0 freed the slave object and returned fmi2Fatal).
//  * fmi2DoStep: True -> fmi2OK, False -> fmi2Discard, exception -> fmi2Error;
//    fmi2LastSuccessfulTime and fmi2Terminated are asked from the slave (§4.2.3)
//    (0.7.0 latched "terminated" on any discard).
//  * Messages of status warning/discard/error/fatal always reach the logger
//    callback; status-OK messages only with debug logging on (§2.1.5).
//  * The bundled Python code is loaded as one private package per FMU build by
//    a bootstrap (below) that never touches sys.path; no module dict
//    reference-count bug (0.7.0's findClass).
//  * The interpreter is never finalized by the FMU, and the library is linked
//    with -z nodelete: 0.7.0's Py_Finalize at library unload is the process-exit
//    use-after-free (pythonfmu PR #213, cppfmu issue #3).
//  * FMU state handles (§2.1.8) are tokens from a never-reused counter, mapped by the
//    instance to the slave's state objects until freed; fmi2Set/Free/Serialize of any
//    other value (freed, foreign, garbage) is fmi2Error with a log line, never
//    dereferenced.
//    The slave's handles are deep copies (fmu/slave.py _FmuState).
//  * The FMI state (§4.2.4) is the slave's, kept in its shared buffer (PHASE), so
//    the paths below that skip Python obey it too (inputs only up to stepComplete,
//    native steps only in stepComplete).
//  * Hot path (benchmarks/fmu_overhead.py): fmi2SetReal of inputs and fmi2GetReal
//    of inputs and valid outputs read/write the slave's shared float64 buffer
//    (CosimSlave._fmi_layout) without calling Python or taking the GIL;
//    fmi2DoStep is one call of a bound method looked up once per instance.
//    Any other reference or state takes the full Python path (same checks).
//  * Native step: after a completed fmi2DoStep the slave may hand over the
//    compiled record of its integrator (CosimSlave._native_arm: the address of the
//    C entry, cosim.jit.native_step_address / native_step.h, the record's arrays
//    and the model's and method's function addresses); fmi2DoStep then runs the plain case itself, without
//    Python or the GIL -- the slave's checks (time match, step budget, finite
//    inputs), new inputs written into the record in place, restart-then-advance
//    (entry mode 3) or advance (mode 0), outputs copied into the shared buffer.
//    Anything else (a failed or refused step included) first reports the steps
//    taken so to the slave (CosimSlave._native_sync), drops the record and runs
//    the Python method, which gives the same result, status and message.
#include "python_loader.h"  // the Python runtime, found and loaded at fmi2Instantiate
#include "glibc_compat.h"   // loads on glibc >= 2.28

#include "fmi2Functions.h"
#include "native_step.h"

#include <cmath>
#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <cstdint>
#include <string>
#include <atomic>
#include <unordered_map>
#include <vector>

namespace {

const char* BOOTSTRAP = R"PY(
def _cosim_release(text):
    """(3, 11) of "3.11.7", (1, 26) of "1.26rc1": the leading numeric release."""
    out = []
    for part in str(text).split("."):
        digits = ""
        for ch in part:
            if not ch.isdigit():
                break
            digits += ch
        if not digits:
            break
        out.append(int(digits))
        if digits != part:
            break
    return tuple(out)


def _cosim_check_host(host, runtime, embedded):
    """The FMU's host contract (cosim_fmu.json "host", also in modelDescription.xml):
    ImportError with one line naming everything missing and how to install it."""
    import importlib, sys
    problems, install = [], []
    version = sys.version.split()[0]
    low, below = tuple(host.get("python_min") or ()), tuple(host.get("python_below") or ())
    if (low and sys.version_info[:len(low)] < low) or (below and sys.version_info[:len(below)] >= below):
        problems.append(f"it needs CPython {host.get('python')}, this is {version} (a host without "
                        "Python: set COSIM_FMU_LIBPYTHON to a libpython in that range)")
    for req in host.get("packages") or ():
        if not req.get("required", True):
            continue
        name, pip = req["module"], req.get("pip") or req["module"]
        what = pip if pip.split(">")[0].split("=")[0] == name else f"{name} (pip: {pip})"
        try:
            module = importlib.import_module(name)
        except Exception as exc:
            problems.append(f"{what} is missing ({type(exc).__name__}: {exc})")
            install.append(pip)
            continue
        have = _cosim_release(getattr(module, "__version__", ""))
        need = _cosim_release(req.get("min") or "")
        if have and need and have < need:
            problems.append(f"{what} is too old (found {module.__version__})")
            install.append(pip)
    if problems:
        where = runtime if embedded else f"{sys.executable or 'the host'}, Python {version}"
        text = f"this FMU cannot run in this Python ({where}): " + "; ".join(problems)
        if install:
            python = f"python{sys.version_info[0]}.{sys.version_info[1]}" if embedded or not sys.executable \
                else sys.executable
            text += "; install with: " + python + " -m pip install " + " ".join(f"'{p}'" for p in install)
            if embedded:
                text += " (into a site-packages folder on PYTHONPATH)"
        raise ImportError(text)


def _cosim_fmu_load(resource_uri, guid, paths=(), runtime="", embedded=False):
    """(slave class, resources folder) of this FMU; its code is imported as one
    private package named in cosim_fmu.json, never via sys.path (``paths``: the
    site-packages recorded at build time, added to an interpreter the binary started)."""
    import importlib, importlib.util, json, os, sys
    from urllib.parse import unquote, urlparse
    for path in paths:  # appended as they are: their .pth files are not run (one in the wild
        if isinstance(path, str) and path not in sys.path:  # re-executes sys.executable)
            sys.path.append(path)
    parsed = urlparse(resource_uri)
    resources = unquote(parsed.path) if parsed.scheme == "file" else resource_uri
    if os.name == "nt" and resources[:1] == "/" and resources[2:3] == ":":
        resources = resources[1:]
    config = os.path.join(resources, "cosim_fmu.json")
    with open(config, encoding="utf-8") as fh:
        cfg = json.load(fh)
    if cfg.get("guid") != guid:
        raise ValueError(f"fmuGUID {guid!r} is not the GUID of this FMU ({cfg.get('guid')!r}): "
                         "the modelDescription.xml does not belong to this binary (FMI 2.0.4 2.1.5)")
    _cosim_check_host(cfg.get("host") or {}, runtime, embedded)
    pkg = cfg["package"]
    root = os.path.join(resources, pkg)
    mod = sys.modules.get(pkg)
    if mod is not None and not os.path.isdir(list(mod.__path__)[0]):
        # the folder this build was imported from is gone (fmpy deletes its unzip folder
        # after freeInstance): its modules cannot read their sources any more (numba
        # compiles from them), so forget them and import the build afresh from here
        for name in [n for n in sys.modules if n == pkg or n.startswith(pkg + ".")]:
            del sys.modules[name]
        mod = None
    if mod is None:
        spec = importlib.util.spec_from_file_location(
            pkg, os.path.join(root, "__init__.py"), submodule_search_locations=[root])
        mod = importlib.util.module_from_spec(spec)
        sys.modules[pkg] = mod
        try:
            spec.loader.exec_module(mod)
        except BaseException:
            del sys.modules[pkg]
            raise
    else:
        old = list(mod.__path__)[0]
        if old != root:  # the same build (same GUID, same files) unzipped elsewhere
            for name, m in list(sys.modules.items()):
                if name == pkg or name.startswith(pkg + "."):
                    path = getattr(m, "__path__", None)
                    if path is not None and list(path) and list(path)[0].startswith(old):
                        m.__path__ = [root + list(path)[0][len(old):]]
    slave = importlib.import_module(pkg + ".slave_module")
    return slave.SLAVE_CLASS, resources
)PY";

PyObject* g_loader = nullptr;  // _cosim_fmu_load (never released)

// UTF-8 text of a str object (limited API: no PyUnicode_AsUTF8AndSize before 3.10)
std::string text_of(PyObject* obj)
{
    if (obj == nullptr || !PyUnicode_Check(obj)) return "";
    PyObject* b = PyUnicode_AsUTF8String(obj);
    if (b == nullptr) {
        PyErr_Clear();
        return "";
    }
    std::string s = PyBytes_AsString(b);
    Py_DECREF(b);
    return s;
}

std::string fetch_exception()
{
    PyObject *type = nullptr, *value = nullptr, *tb = nullptr;
    PyErr_Fetch(&type, &value, &tb);
    std::string text = "unknown Python error";
    if (type != nullptr) {
        PyObject* name = PyObject_GetAttrString(type, "__name__");
        PyObject* str = value ? PyObject_Str(value) : nullptr;
        std::string n = text_of(name);
        text = (n.empty() ? std::string("Exception") : n) + ": " + text_of(str);
        Py_XDECREF(name);
        Py_XDECREF(str);
    }
    PyErr_Clear();
    Py_XDECREF(type);
    Py_XDECREF(value);
    Py_XDECREF(tb);
    return text;
}

// the record the binary steps itself while armed (CosimSlave._native_arm)
struct Native
{
    CosimNativeStep entry = nullptr;   // null: not armed (native_step.h)
    PyObject* keep = nullptr;     // the record's arrays, kept alive while armed
    double* S = nullptr;
    std::int64_t nS = 0;
    std::int64_t* I = nullptr;
    std::int64_t nI = 0;
    double* LU = nullptr;
    std::int64_t rows = 0, cols = 0;
    double* u = nullptr;          // the held inputs (written in place)
    std::int64_t nu = 0;
    double* p = nullptr;
    std::int64_t np = 0;
    double* y = nullptr;          // outputs at the end of the step
    std::int64_t ny = 0;
    std::int64_t budget = 0;      // max steps per call
    std::int64_t tSlot = 0;       // S[tSlot]: the integrator's time
    std::int64_t* functions = nullptr;  // the model's compiled functions (addresses)
    std::int64_t nFunctions = 0;
    double budgetSpan = 0.0;      // longer steps go through Python (step-budget check)
    double timeMatch = 0.0;       // relative match of currentCommunicationPoint
    double maxInput = 0.0;        // the size bound of an input (cosim.validation.MAX_INPUT)
    std::int64_t steps = 0;       // fmi2DoStep calls taken here, not yet reported
    std::vector<double> uOld;

    enum : std::int64_t { ADVANCE = 0, RESTART_THEN_ADVANCE = 3 };  // ga_kernel.entry modes
};

struct Component
{
    std::string instanceName;
    fmi2CallbackLogger logger = nullptr;
    fmi2ComponentEnvironment environment = nullptr;
    bool debugLogging = false;
    PyObject* cls = nullptr;       // slave class
    PyObject* instance = nullptr;  // slave object
    PyObject* resources = nullptr; // str
    bool visible = false;
    std::vector<PyObject*> strings; // keeps fmi2GetString results alive until the next call
    std::unordered_map<void*, PyObject*> states; // live fmi2FMUstate handles -> their objects (owned)

    // hot path, bound to `instance` by bind() (all null when the slave has no layout)
    PyObject* doStep = nullptr;     // bound instance.do_step
    PyObject* refresh = nullptr;    // bound instance._refresh_outputs
    PyObject* nativeArm = nullptr;  // bound instance._native_arm (null: no native step)
    PyObject* logQueue = nullptr;   // instance.log_queue (a list, never rebound)
    PyObject* shared = nullptr;     // the slave's shared numpy buffer (kept alive)
    double* buf = nullptr;          // [inputs pending, outputs valid, FMI state, inputs..., outputs...]
    std::vector<std::int32_t> slot; // value reference -> index in buf (0: not in the buffer)
    std::uint32_t nIn = 0;
    std::uint32_t nOut = 0;
    Native native;

    enum { PENDING = 0, VALID = 1, PHASE = 2, FIRST = 3 };
    static constexpr double STEP_COMPLETE = 2.0;  // fmu/slave.py: INSTANTIATED .. ERROR = 0 .. 4

    // the buffer slot of value reference v: FIRST.. for inputs and outputs, 0 otherwise
    std::int32_t slotOf(fmi2ValueReference v) const { return v < slot.size() ? slot[v] : 0; }
    bool isInput(std::int32_t k) const { return k >= FIRST && k < FIRST + static_cast<std::int32_t>(nIn); }

    void unbind()
    {
        disarm();
        native.steps = 0;
        Py_CLEAR(doStep);
        Py_CLEAR(refresh);
        Py_CLEAR(nativeArm);
        Py_CLEAR(logQueue);
        Py_CLEAR(shared);
        buf = nullptr;
        slot.clear();
        nIn = nOut = 0;
    }

    void disarm()
    {
        native.entry = nullptr;
        Py_CLEAR(native.keep);
    }

    // with the GIL, before any other call into Python: the slave catches up with the
    // steps taken here, and the binary stops stepping until the next arm()
    void toPython()
    {
        if (native.steps > 0) {
            PyObject* r = PyObject_CallMethod(instance, "_native_sync", "(L)",
                static_cast<long long>(native.steps));
            native.steps = 0;
            if (r == nullptr) log(fmi2Warning, "logStatusWarning", "_native_sync: " + fetch_exception());
            Py_XDECREF(r);
        }
        disarm();
    }

    // with the GIL, after a completed fmi2DoStep in Python: take the slave's record
    void arm()
    {
        disarm();
        if (buf == nullptr || nativeArm == nullptr) return;
        PyObject* rec = PyObject_CallObject(nativeArm, nullptr);
        if (rec == nullptr) {
            PyErr_Clear();
            return;
        }
        if (rec == Py_None) {  // not now (the slave says why not in _native_arm)
            Py_DECREF(rec);
            return;
        }
        std::int64_t v[18];
        double f[3];
        bool ok = PyTuple_Check(rec) && PyTuple_Size(rec) == 3;
        PyObject* ints = ok ? PyTuple_GetItem(rec, 1) : nullptr;
        PyObject* floats = ok ? PyTuple_GetItem(rec, 2) : nullptr;
        ok = ok && PyTuple_Check(ints) && PyTuple_Size(ints) == 18 && PyTuple_Check(floats)
            && PyTuple_Size(floats) == 3;
        for (Py_ssize_t i = 0; ok && i < 18; ++i) {
            v[i] = static_cast<std::int64_t>(PyLong_AsLongLong(PyTuple_GetItem(ints, i)));
            ok = !PyErr_Occurred();
        }
        for (Py_ssize_t i = 0; ok && i < 3; ++i) {
            f[i] = PyFloat_AsDouble(PyTuple_GetItem(floats, i));
            ok = !PyErr_Occurred();
        }
        // sizes as the buffer's (the slave checked; a mismatch here: no native step)
        ok = ok && v[0] != 0 && v[1] != 0 && v[3] != 0 && v[5] != 0 && v[8] != 0 && v[10] != 0
            && v[12] != 0 && v[9] == static_cast<std::int64_t>(nIn) && v[13] == static_cast<std::int64_t>(nOut)
            && v[14] > 0 && v[15] >= 0 && v[15] < v[2] && v[6] > 0 && v[6] == v[7] && f[0] > 0.0 && f[2] > 0.0
            && v[16] != 0 && v[17] > 0;
        if (ok) {
            Native& n = native;
            n.entry = reinterpret_cast<CosimNativeStep>(static_cast<std::intptr_t>(v[0]));
            n.S = reinterpret_cast<double*>(static_cast<std::intptr_t>(v[1]));
            n.nS = v[2];
            n.I = reinterpret_cast<std::int64_t*>(static_cast<std::intptr_t>(v[3]));
            n.nI = v[4];
            n.LU = reinterpret_cast<double*>(static_cast<std::intptr_t>(v[5]));
            n.rows = v[6];
            n.cols = v[7];
            n.u = reinterpret_cast<double*>(static_cast<std::intptr_t>(v[8]));
            n.nu = v[9];
            n.p = reinterpret_cast<double*>(static_cast<std::intptr_t>(v[10]));
            n.np = v[11];
            n.y = reinterpret_cast<double*>(static_cast<std::intptr_t>(v[12]));
            n.ny = v[13];
            n.budget = v[14];
            n.tSlot = v[15];
            n.functions = reinterpret_cast<std::int64_t*>(static_cast<std::intptr_t>(v[16]));
            n.nFunctions = v[17];
            n.budgetSpan = f[0];
            n.timeMatch = f[1];
            n.maxInput = f[2];
            n.keep = PyTuple_GetItem(rec, 0);
            Py_INCREF(n.keep);
            n.uOld.resize(static_cast<size_t>(n.nu));
        }
        PyErr_Clear();
        Py_DECREF(rec);
    }

    // fmi2DoStep without Python while armed: true when the step is done; false
    // (nothing changed) when Python must take it -- CosimSlave.do_step's checks
    bool nativeStep(double t, double h)
    {
        Native& n = native;
        if (buf[PHASE] != STEP_COMPLETE) return false;  // Python refuses it, with the message
        const double now = n.S[n.tSlot];
        if (!(h > 0.0 && h <= n.budgetSpan && std::isfinite(h))) return false;
        if (!(t == now || std::fabs(t - now) <= n.timeMatch * std::fmax(1.0, std::fabs(now)))) return false;
        const double tEnd = t + h;
        if (!(tEnd > now)) return false;
        std::int64_t mode = Native::ADVANCE;
        bool changed = false;
        if (buf[PENDING] != 0.0) {  // Simulation.set_inputs: finite and bounded, restart only if changed
            for (std::uint32_t i = 0; i < nIn; ++i) {
                const double x = buf[FIRST + i];
                if (!(std::fabs(x) <= n.maxInput)) return false;  // Python discards it, with the message
                changed = changed || x != n.u[i];
            }
            if (changed) {
                std::memcpy(n.uOld.data(), n.u, nIn * sizeof(double));
                std::memcpy(n.u, buf + FIRST, nIn * sizeof(double));
                mode = Native::RESTART_THEN_ADVANCE;
            }
        }
        const std::int64_t status = n.entry(mode, n.S, n.nS, n.I, n.nI, n.LU, n.rows, n.u, n.nu,
            n.p, n.np, tEnd, n.budget, n.y, n.ny, n.functions, n.nFunctions);
        if (status == 0) {
            buf[PENDING] = 0.0;
            std::memcpy(buf + FIRST + nIn, n.y, nOut * sizeof(double));
            buf[VALID] = 1.0;
            ++n.steps;
            return true;
        }
        // the entry restored its record (all or nothing); Python repeats the step and
        // reports the failure as it does
        if (changed) std::memcpy(n.u, n.uOld.data(), nIn * sizeof(double));
        return false;
    }

    // look the hot-path objects up once (after create); a slave without _fmi_layout
    // (or a malformed one) simply runs every call through the Python methods
    void bind()
    {
        unbind();
        doStep = PyObject_GetAttrString(instance, "do_step");
        nativeArm = PyObject_GetAttrString(instance, "_native_arm");
        if (nativeArm == nullptr) PyErr_Clear();
        PyObject* q = PyObject_GetAttrString(instance, "log_queue");
        if (q != nullptr && PyList_Check(q)) logQueue = q;
        else Py_XDECREF(q);
        PyErr_Clear();
        PyObject* layout = PyObject_CallMethod(instance, "_fmi_layout", nullptr);
        refresh = PyObject_GetAttrString(instance, "_refresh_outputs");
        if (layout == nullptr || refresh == nullptr || !PyTuple_Check(layout) || PyTuple_Size(layout) != 4) {
            Py_XDECREF(layout);
            Py_CLEAR(refresh);
            PyErr_Clear();
            return;
        }
        PyObject* ins = PyTuple_GetItem(layout, 2);
        PyObject* outs = PyTuple_GetItem(layout, 3);
        void* address = PyLong_AsVoidPtr(PyTuple_GetItem(layout, 1));
        bool ok = address != nullptr && PyTuple_Check(ins) && PyTuple_Check(outs);
        std::vector<std::int32_t> table;
        Py_ssize_t n = ok ? PyTuple_Size(ins) + PyTuple_Size(outs) : 0;
        for (Py_ssize_t i = 0; ok && i < n; ++i) {
            PyObject* item = i < PyTuple_Size(ins) ? PyTuple_GetItem(ins, i)
                                                   : PyTuple_GetItem(outs, i - PyTuple_Size(ins));
            unsigned long v = PyLong_AsUnsignedLong(item);
            ok = !PyErr_Occurred() && v < (1ul << 20);  // our own references: small integers
            if (!ok) break;
            if (v >= table.size()) table.resize(v + 1, 0);
            table[v] = static_cast<std::int32_t>(FIRST + i);
        }
        if (ok) {
            shared = PyTuple_GetItem(layout, 0);
            Py_INCREF(shared);
            buf = static_cast<double*>(address);
            slot.swap(table);
            nIn = static_cast<std::uint32_t>(PyTuple_Size(ins));
            nOut = static_cast<std::uint32_t>(PyTuple_Size(outs));
        } else {
            Py_CLEAR(refresh);
        }
        Py_DECREF(layout);
        PyErr_Clear();
    }

    void log(fmi2Status status, const char* category, const std::string& message) const
    {
        if (logger == nullptr) return;
        if (status == fmi2OK && !debugLogging) return;
        std::string format;  // the message is a printf format: escape '%'
        for (char ch : message) {
            format += ch;
            if (ch == '%') format += '%';
        }
        logger(environment, instanceName.c_str(), status,
            (category && *category) ? category : nullptr, format.c_str());
    }

    // forward the slave's queued messages (pythonfmu LogMsg: status, category, msg)
    void drainLog() const
    {
        if (instance == nullptr) return;
        if (logQueue != nullptr && PyList_Size(logQueue) == 0) return;  // the usual case
        PyObject* queue = PyObject_GetAttrString(instance, "log_queue");
        if (queue == nullptr) {
            PyErr_Clear();
            return;
        }
        Py_ssize_t n = PyList_Check(queue) ? PyList_Size(queue) : 0;
        for (Py_ssize_t i = 0; i < n; ++i) {
            PyObject* item = PyList_GetItem(queue, i);  // borrowed
            PyObject* st = PyObject_GetAttrString(item, "status");
            PyObject* cat = PyObject_GetAttrString(item, "category");
            PyObject* msg = PyObject_GetAttrString(item, "msg");
            long status = st ? PyLong_AsLong(st) : 3;
            PyErr_Clear();
            std::string c = text_of(cat);
            log(static_cast<fmi2Status>(status), c.c_str(), text_of(msg));
            Py_XDECREF(st);
            Py_XDECREF(cat);
            Py_XDECREF(msg);
        }
        if (n > 0) PyList_SetSlice(queue, 0, n, nullptr);
        Py_DECREF(queue);
        PyErr_Clear();
    }

    // a Python exception: fmi2Error with its message (§2.1.3), instance kept
    fmi2Status error(const char* function)
    {
        std::string text = std::string(function) + ": " + fetch_exception();
        drainLog();
        log(fmi2Error, "logStatusError", text);
        return fmi2Error;
    }

    PyObject* create()
    {
        PyObject* args = PyTuple_New(0);
        PyObject* kwargs = Py_BuildValue("{sssOsO}", "instance_name", instanceName.c_str(),
            "resources", resources, "visible", visible ? Py_True : Py_False);
        PyObject* obj = PyObject_Call(cls, args, kwargs);
        Py_DECREF(args);
        Py_DECREF(kwargs);
        return obj;
    }
};

class Gil
{
public:
    Gil() : state_(PyGILState_Ensure()) { }
    ~Gil() { PyGILState_Release(state_); }
    Gil(const Gil&) = delete;
    Gil& operator=(const Gil&) = delete;

private:
    PyGILState_STATE state_;
};

// the GIL, with the slave brought up to date with the binary's own steps (a call
// into the slave's Python methods)
class Python
{
public:
    explicit Python(Component* c) { c->toPython(); }

private:
    Gil gil_;
};

Component* comp(fmi2Component c) { return static_cast<Component*>(c); }

// call a method returning None; exception -> fmi2Error
fmi2Status call_void(Component* c, const char* function, PyObject* result)
{
    if (result == nullptr) return c->error(function);
    Py_DECREF(result);
    c->drainLog();
    return fmi2OK;
}

PyObject* vr_list(const fmi2ValueReference vr[], size_t nvr)
{
    PyObject* list = PyList_New(static_cast<Py_ssize_t>(nvr));
    for (size_t i = 0; i < nvr; ++i)
        PyList_SetItem(list, static_cast<Py_ssize_t>(i), PyLong_FromUnsignedLong(vr[i]));
    return list;
}

// getter: the Python method returns a sequence of nvr values
template <typename Convert>
fmi2Status get_values(fmi2Component c, const char* function, const char* method,
    const fmi2ValueReference vr[], size_t nvr, Convert convert)
{
    Component* self = comp(c);
    Python gil(self);
    PyObject* vrs = vr_list(vr, nvr);
    PyObject* values = PyObject_CallMethod(self->instance, method, "(O)", vrs);
    Py_DECREF(vrs);
    if (values == nullptr) return self->error(function);
    PyObject* seq = PySequence_List(values);
    Py_DECREF(values);
    if (seq == nullptr) return self->error(function);
    if (PyList_Size(seq) != static_cast<Py_ssize_t>(nvr)) {
        Py_DECREF(seq);
        PyErr_SetString(PyExc_RuntimeError, "wrong number of values");
        return self->error(function);
    }
    for (size_t i = 0; i < nvr; ++i) {
        if (!convert(self, i, PyList_GetItem(seq, static_cast<Py_ssize_t>(i)))) {
            Py_DECREF(seq);
            return self->error(function);
        }
    }
    Py_DECREF(seq);
    self->drainLog();
    return fmi2OK;
}

template <typename Make>
fmi2Status set_values(fmi2Component c, const char* function, const char* method,
    const fmi2ValueReference vr[], size_t nvr, Make make)
{
    Component* self = comp(c);
    Python gil(self);
    PyObject* vrs = vr_list(vr, nvr);
    PyObject* values = PyList_New(static_cast<Py_ssize_t>(nvr));
    for (size_t i = 0; i < nvr; ++i) PyList_SetItem(values, static_cast<Py_ssize_t>(i), make(i));
    PyObject* r = PyObject_CallMethod(self->instance, method, "(OO)", vrs, values);
    Py_DECREF(vrs);
    Py_DECREF(values);
    return call_void(self, function, r);
}

} // namespace

extern "C" {

FMI2_Export const char* fmi2GetTypesPlatform(void) { return fmi2TypesPlatform; }
FMI2_Export const char* fmi2GetVersion(void) { return fmi2Version; }

FMI2_Export fmi2Component fmi2Instantiate(fmi2String instanceName, fmi2Type fmuType,
    fmi2String fmuGUID, fmi2String fmuResourceLocation, const fmi2CallbackFunctions* functions,
    fmi2Boolean visible, fmi2Boolean loggingOn)
{
    auto* c = new Component();
    c->instanceName = instanceName ? instanceName : "";
    if (functions != nullptr) {
        c->logger = functions->logger;
        c->environment = functions->componentEnvironment;
    }
    c->debugLogging = loggingOn == fmi2True;
    c->visible = visible == fmi2True;
    if (fmuType != fmi2CoSimulation) {
        c->log(fmi2Error, "logStatusError", "fmi2Instantiate: this FMU supports Co-Simulation only");
        delete c;
        return nullptr;
    }
    if (fmuGUID == nullptr || fmuResourceLocation == nullptr) {
        c->log(fmi2Error, "logStatusError", "fmi2Instantiate: fmuGUID and fmuResourceLocation are required");
        delete c;
        return nullptr;
    }
    std::string why;
    if (!load_python(path_of_uri(fmuResourceLocation), why)) {
        c->log(fmi2Error, "logStatusError", "fmi2Instantiate failed: " + why);
        delete c;
        return nullptr;
    }
    Gil gil;
    if (g_loader == nullptr) {
        PyObject* globals = PyDict_New();
        PyDict_SetItemString(globals, "__builtins__", PyEval_GetBuiltins());
        PyObject* code = Py_CompileString(BOOTSTRAP, "<cosim_fmu_bootstrap>", Py_file_input);
        PyObject* r = code ? PyEval_EvalCode(code, globals, globals) : nullptr;
        Py_XDECREF(code);
        Py_XDECREF(r);
        if (r != nullptr) {
            g_loader = PyDict_GetItemString(globals, "_cosim_fmu_load");
            Py_XINCREF(g_loader);
        }
        Py_DECREF(globals);
        if (g_loader == nullptr) {
            c->log(fmi2Error, "logStatusError", "fmi2Instantiate: bootstrap failed: " + fetch_exception());
            delete c;
            return nullptr;
        }
    }
    // the site-packages folders the bootstrap adds (to an interpreter the binary started)
    PyObject* paths = PyList_New(static_cast<Py_ssize_t>(g_python.paths.size()));
    for (size_t i = 0; paths != nullptr && i < g_python.paths.size(); ++i) {
        PyObject* item = PyUnicode_FromString(g_python.paths[i].c_str());
        if (item == nullptr) {  // undecodable: skipped by the bootstrap
            PyErr_Clear();
            Py_INCREF(Py_None);
            item = Py_None;
        }
        PyList_SetItem(paths, static_cast<Py_ssize_t>(i), item);  // steals item
    }
    PyObject* loaded = PyObject_CallFunction(g_loader, "ssOsi", fmuResourceLocation, fmuGUID, paths,
        g_python.description.c_str(), g_python.embedded ? 1 : 0);
    Py_XDECREF(paths);
    if (loaded != nullptr && PyTuple_Check(loaded) && PyTuple_Size(loaded) == 2) {
        c->cls = PyTuple_GetItem(loaded, 0);
        c->resources = PyTuple_GetItem(loaded, 1);
        Py_INCREF(c->cls);
        Py_INCREF(c->resources);
        c->instance = c->create();
        if (c->instance != nullptr) c->bind();
    }
    Py_XDECREF(loaded);
    if (c->instance == nullptr) {
        std::string text = "fmi2Instantiate failed: " + fetch_exception();
        c->log(fmi2Error, "logStatusError", text);
        Py_XDECREF(c->cls);
        Py_XDECREF(c->resources);
        delete c;
        return nullptr;
    }
    c->log(fmi2OK, "cosimRuntime", "Python runtime: " + g_python.description);
    c->drainLog();
    return c;
}

FMI2_Export void fmi2FreeInstance(fmi2Component c)
{
    if (c == nullptr) return;
    Component* self = comp(c);
    {
        Gil gil;
        for (auto* s : self->strings) Py_DECREF(s);
        for (auto& s : self->states) Py_DECREF(s.second);
        self->states.clear();
        self->unbind();
        Py_XDECREF(self->instance);
        Py_XDECREF(self->cls);
        Py_XDECREF(self->resources);
    }
    delete self;
}

FMI2_Export fmi2Status fmi2SetDebugLogging(fmi2Component c, fmi2Boolean loggingOn, size_t, const fmi2String[])
{
    comp(c)->debugLogging = loggingOn == fmi2True;
    return fmi2OK;
}

FMI2_Export fmi2Status fmi2SetupExperiment(fmi2Component c, fmi2Boolean toleranceDefined,
    fmi2Real tolerance, fmi2Real startTime, fmi2Boolean stopTimeDefined, fmi2Real stopTime)
{
    Component* self = comp(c);
    Python gil(self);
    PyObject* tol = toleranceDefined ? PyFloat_FromDouble(tolerance) : (Py_INCREF(Py_None), Py_None);
    PyObject* stop = stopTimeDefined ? PyFloat_FromDouble(stopTime) : (Py_INCREF(Py_None), Py_None);
    PyObject* r = PyObject_CallMethod(self->instance, "setup_experiment", "(dOO)", startTime, stop, tol);
    Py_DECREF(tol);
    Py_DECREF(stop);
    return call_void(self, "fmi2SetupExperiment", r);
}

#define COSIM_VOID_CALL(fmiName, method)                                              \
    FMI2_Export fmi2Status fmiName(fmi2Component c)                                   \
    {                                                                                 \
        Component* self = comp(c);                                                    \
        Python gil(self);                                                                \
        return call_void(self, #fmiName, PyObject_CallMethod(self->instance, method, nullptr)); \
    }

COSIM_VOID_CALL(fmi2EnterInitializationMode, "enter_initialization_mode")
COSIM_VOID_CALL(fmi2ExitInitializationMode, "exit_initialization_mode")
COSIM_VOID_CALL(fmi2Terminate, "terminate")

FMI2_Export fmi2Status fmi2Reset(fmi2Component c)
{
    Component* self = comp(c);
    Gil gil;
    PyObject* fresh = self->create();  // back to the state after fmi2Instantiate
    if (fresh == nullptr) return self->error("fmi2Reset");
    self->unbind();
    Py_XDECREF(self->instance);
    self->instance = fresh;
    self->bind();
    self->drainLog();
    return fmi2OK;
}

FMI2_Export fmi2Status fmi2GetReal(fmi2Component c, const fmi2ValueReference vr[], size_t nvr, fmi2Real value[])
{
    Component* self = comp(c);
    if (self->buf != nullptr && (nvr == 0 || vr != nullptr)) {  // inputs and outputs: from the buffer
        bool outputs = false, known = true;
        for (size_t i = 0; i < nvr && known; ++i) {
            std::int32_t k = self->slotOf(vr[i]);
            known = k != 0;
            outputs = outputs || (known && !self->isInput(k));
        }
        if (known) {
            if (outputs && self->buf[Component::VALID] == 0.0) {  // compute them (may raise)
                Python gil(self);
                PyObject* r = PyObject_CallObject(self->refresh, nullptr);
                if (r == nullptr) return self->error("fmi2GetReal");
                Py_DECREF(r);
                self->drainLog();
            }
            if (!outputs || self->buf[Component::VALID] != 0.0) {
                for (size_t i = 0; i < nvr; ++i) value[i] = self->buf[self->slotOf(vr[i])];
                return fmi2OK;
            }
        }
    }
    return get_values(c, "fmi2GetReal", "get_real", vr, nvr, [value](Component*, size_t i, PyObject* v) {
        value[i] = PyFloat_AsDouble(v);
        return !(value[i] == -1.0 && PyErr_Occurred());
    });
}

FMI2_Export fmi2Status fmi2GetInteger(fmi2Component c, const fmi2ValueReference vr[], size_t nvr, fmi2Integer value[])
{
    return get_values(c, "fmi2GetInteger", "get_integer", vr, nvr, [value](Component*, size_t i, PyObject* v) {
        long x = PyLong_AsLong(v);
        value[i] = static_cast<fmi2Integer>(x);
        return !(x == -1 && PyErr_Occurred());
    });
}

FMI2_Export fmi2Status fmi2GetBoolean(fmi2Component c, const fmi2ValueReference vr[], size_t nvr, fmi2Boolean value[])
{
    return get_values(c, "fmi2GetBoolean", "get_boolean", vr, nvr, [value](Component*, size_t i, PyObject* v) {
        int x = PyObject_IsTrue(v);
        value[i] = x > 0 ? fmi2True : fmi2False;
        return x >= 0;
    });
}

FMI2_Export fmi2Status fmi2GetString(fmi2Component c, const fmi2ValueReference vr[], size_t nvr, fmi2String value[])
{
    {
        Gil gil;
        for (auto* s : comp(c)->strings) Py_DECREF(s);
        comp(c)->strings.clear();
    }
    return get_values(c, "fmi2GetString", "get_string", vr, nvr, [value](Component* self, size_t i, PyObject* v) {
        PyObject* bytes = PyUnicode_AsUTF8String(v);
        if (bytes == nullptr) return false;
        self->strings.push_back(bytes);
        value[i] = PyBytes_AsString(bytes);
        return true;
    });
}

FMI2_Export fmi2Status fmi2SetReal(fmi2Component c, const fmi2ValueReference vr[], size_t nvr, const fmi2Real value[])
{
    Component* self = comp(c);
    if (self->buf != nullptr && nvr > 0 && vr != nullptr && value != nullptr
        && self->buf[Component::PHASE] <= Component::STEP_COMPLETE) {
        bool inputs = true;  // only inputs: settable up to stepComplete, validated when used
        for (size_t i = 0; i < nvr && inputs; ++i) inputs = self->isInput(self->slotOf(vr[i]));
        if (inputs) {  // CosimSlave._set_input, all of them
            for (size_t i = 0; i < nvr; ++i) self->buf[self->slotOf(vr[i])] = value[i];
            self->buf[Component::PENDING] = 1.0;
            self->buf[Component::VALID] = 0.0;
            return fmi2OK;
        }
    }
    return set_values(c, "fmi2SetReal", "set_real", vr, nvr, [value](size_t i) { return PyFloat_FromDouble(value[i]); });
}

FMI2_Export fmi2Status fmi2SetInteger(fmi2Component c, const fmi2ValueReference vr[], size_t nvr, const fmi2Integer value[])
{
    return set_values(c, "fmi2SetInteger", "set_integer", vr, nvr, [value](size_t i) { return PyLong_FromLong(value[i]); });
}

FMI2_Export fmi2Status fmi2SetBoolean(fmi2Component c, const fmi2ValueReference vr[], size_t nvr, const fmi2Boolean value[])
{
    return set_values(c, "fmi2SetBoolean", "set_boolean", vr, nvr, [value](size_t i) { return PyBool_FromLong(value[i]); });
}

FMI2_Export fmi2Status fmi2SetString(fmi2Component c, const fmi2ValueReference vr[], size_t nvr, const fmi2String value[])
{
    return set_values(c, "fmi2SetString", "set_string", vr, nvr, [value](size_t i) {
        return PyUnicode_FromString(value[i] ? value[i] : "");
    });
}

// -- FMU state (§2.1.8) ------------------------------------------------------------------
// An fmi2FMUstate is an opaque token, never a pointer: a number taken from a
// process-wide counter (never reused, so a freed handle cannot come back as a new
// one), mapped by Component::states to a strong reference to the slave's state
// object until freed (or the instance is).  Any other value -- freed, foreign,
// garbage -- is refused with fmi2Error before anything is done; it is never
// dereferenced.
std::atomic<std::uintptr_t> g_state_tokens{0};

// null when `state` is a live handle of this instance, else why not (to log)
static const char* unknown_state(Component* self, fmi2FMUstate state)
{
    if (state == nullptr) return "FMUstate is NULL";
    if (self->states.count(state) == 0)
        return "FMUstate is not a live state of this instance (never handed out by it, or already freed)";
    return nullptr;
}

static PyObject* state_object(Component* self, fmi2FMUstate state) { return self->states.at(state); }

// a new handle into *state (§2.1.8: a non-NULL *state is a handle of ours to replace)
static fmi2Status hand_out(Component* self, fmi2FMUstate* state, PyObject* s)
{
    if (*state != nullptr) {  // checked live by the caller
        Py_DECREF(state_object(self, *state));
        self->states.erase(*state);
    }
    void* token = reinterpret_cast<void*>((g_state_tokens.fetch_add(1) + 1) << 4);
    self->states.emplace(token, s);
    *state = token;
    self->drainLog();
    return fmi2OK;
}

static fmi2Status refuse_state(Component* self, const char* function, const char* why)
{
    self->log(fmi2Error, "logStatusError", std::string(function) + ": " + why + "; nothing changed");
    return fmi2Error;
}

FMI2_Export fmi2Status fmi2GetFMUstate(fmi2Component c, fmi2FMUstate* state)
{
    Component* self = comp(c);
    if (state == nullptr) return refuse_state(self, "fmi2GetFMUstate", "the FMUstate pointer is NULL");
    if (*state != nullptr && unknown_state(self, *state) != nullptr)
        return refuse_state(self, "fmi2GetFMUstate", unknown_state(self, *state));
    Python gil(self);
    PyObject* s = PyObject_CallMethod(self->instance, "_get_fmu_state", nullptr);
    if (s == nullptr) return self->error("fmi2GetFMUstate");
    return hand_out(self, state, s);
}

FMI2_Export fmi2Status fmi2SetFMUstate(fmi2Component c, fmi2FMUstate state)
{
    Component* self = comp(c);
    if (const char* why = unknown_state(self, state)) return refuse_state(self, "fmi2SetFMUstate", why);
    Python gil(self);
    PyObject* r = PyObject_CallMethod(self->instance, "_set_fmu_state", "(O)", state_object(self, state));
    return call_void(self, "fmi2SetFMUstate", r);
}

FMI2_Export fmi2Status fmi2FreeFMUstate(fmi2Component c, fmi2FMUstate* state)
{
    if (state == nullptr || *state == nullptr) return fmi2OK;  // §2.1.8: ignored
    Component* self = comp(c);
    if (const char* why = unknown_state(self, *state)) return refuse_state(self, "fmi2FreeFMUstate", why);
    Gil gil;
    Py_DECREF(state_object(self, *state));
    self->states.erase(*state);
    *state = nullptr;
    return fmi2OK;
}

// a live handle's serialized bytes (checked live by the caller)
static PyObject* state_bytes(Component* self, fmi2FMUstate state)
{
    PyObject* b = PyObject_CallMethod(self->instance, "_fmu_state_to_bytes", "(O)", state_object(self, state));
    if (b != nullptr && !PyBytes_Check(b)) {
        Py_DECREF(b);
        PyErr_SetString(PyExc_TypeError, "serialized FMU state is not bytes");
        return nullptr;
    }
    return b;
}

FMI2_Export fmi2Status fmi2SerializedFMUstateSize(fmi2Component c, fmi2FMUstate state, size_t* size)
{
    Component* self = comp(c);
    if (const char* why = unknown_state(self, state)) return refuse_state(self, "fmi2SerializedFMUstateSize", why);
    Python gil(self);
    PyObject* b = state_bytes(self, state);
    if (b == nullptr) return self->error("fmi2SerializedFMUstateSize");
    *size = static_cast<size_t>(PyBytes_Size(b));
    Py_DECREF(b);
    self->drainLog();
    return fmi2OK;
}

FMI2_Export fmi2Status fmi2SerializeFMUstate(fmi2Component c, fmi2FMUstate state, fmi2Byte serializedState[], size_t size)
{
    Component* self = comp(c);
    if (const char* why = unknown_state(self, state)) return refuse_state(self, "fmi2SerializeFMUstate", why);
    Python gil(self);
    PyObject* b = state_bytes(self, state);
    if (b == nullptr) return self->error("fmi2SerializeFMUstate");
    if (static_cast<size_t>(PyBytes_Size(b)) != size) {
        Py_DECREF(b);
        PyErr_SetString(PyExc_ValueError, "size differs from fmi2SerializedFMUstateSize");
        return self->error("fmi2SerializeFMUstate");
    }
    std::memcpy(serializedState, PyBytes_AsString(b), size);
    Py_DECREF(b);
    self->drainLog();
    return fmi2OK;
}

FMI2_Export fmi2Status fmi2DeSerializeFMUstate(fmi2Component c, const fmi2Byte serializedState[], size_t size, fmi2FMUstate* state)
{
    Component* self = comp(c);
    if (state == nullptr) return refuse_state(self, "fmi2DeSerializeFMUstate", "the FMUstate pointer is NULL");
    if (*state != nullptr && unknown_state(self, *state) != nullptr)
        return refuse_state(self, "fmi2DeSerializeFMUstate", unknown_state(self, *state));
    if (size > 0 && serializedState == nullptr)
        return refuse_state(self, "fmi2DeSerializeFMUstate", "serializedState is NULL");
    Python gil(self);
    PyObject* b = PyBytes_FromStringAndSize(size ? serializedState : "", static_cast<Py_ssize_t>(size));
    if (b == nullptr) return self->error("fmi2DeSerializeFMUstate");
    PyObject* s = PyObject_CallMethod(self->instance, "_fmu_state_from_bytes", "(O)", b);
    Py_DECREF(b);
    if (s == nullptr) return self->error("fmi2DeSerializeFMUstate");  // state untouched
    return hand_out(self, state, s);
}

FMI2_Export fmi2Status fmi2GetDirectionalDerivative(fmi2Component c, const fmi2ValueReference[], size_t,
    const fmi2ValueReference[], size_t, const fmi2Real[], fmi2Real[])
{
    comp(c)->log(fmi2Error, "logStatusError", "fmi2GetDirectionalDerivative is not supported");
    return fmi2Error;
}

// -- Co-Simulation (§4.2) ----------------------------------------------------------------
FMI2_Export fmi2Status fmi2SetRealInputDerivatives(fmi2Component c, const fmi2ValueReference[], size_t,
    const fmi2Integer[], const fmi2Real[])
{
    comp(c)->log(fmi2Error, "logStatusError", "fmi2SetRealInputDerivatives is not supported (canInterpolateInputs=false)");
    return fmi2Error;
}

FMI2_Export fmi2Status fmi2GetRealOutputDerivatives(fmi2Component c, const fmi2ValueReference[], size_t,
    const fmi2Integer[], fmi2Real[])
{
    comp(c)->log(fmi2Error, "logStatusError", "fmi2GetRealOutputDerivatives is not supported (maxOutputDerivativeOrder=0)");
    return fmi2Error;
}

FMI2_Export fmi2Status fmi2DoStep(fmi2Component c, fmi2Real currentCommunicationPoint,
    fmi2Real communicationStepSize, fmi2Boolean)
{
    Component* self = comp(c);
    if (self->native.entry != nullptr && self->nativeStep(currentCommunicationPoint, communicationStepSize))
        return fmi2OK;
    Python gil(self);
    PyObject* r;
    if (self->doStep != nullptr) {
        PyObject* t = PyFloat_FromDouble(currentCommunicationPoint);
        PyObject* h = PyFloat_FromDouble(communicationStepSize);
        r = (t && h) ? PyObject_CallFunctionObjArgs(self->doStep, t, h, nullptr) : nullptr;
        Py_XDECREF(t);
        Py_XDECREF(h);
    } else {
        r = PyObject_CallMethod(self->instance, "do_step", "(dd)", currentCommunicationPoint, communicationStepSize);
    }
    if (r == nullptr) return self->error("fmi2DoStep");
    int ok = PyObject_IsTrue(r);
    Py_DECREF(r);
    if (ok < 0) return self->error("fmi2DoStep");
    self->drainLog();
    if (ok) self->arm();
    return ok ? fmi2OK : fmi2Discard;  // §4.2.2
}

FMI2_Export fmi2Status fmi2CancelStep(fmi2Component c)
{
    comp(c)->log(fmi2Error, "logStatusError", "fmi2CancelStep: fmi2DoStep never returns fmi2Pending");
    return fmi2Error;
}

FMI2_Export fmi2Status fmi2GetStatus(fmi2Component c, const fmi2StatusKind, fmi2Status*)
{
    comp(c)->log(fmi2Discard, "logStatusDiscard", "fmi2GetStatus: fmi2DoStep never returns fmi2Pending");
    return fmi2Discard;
}

FMI2_Export fmi2Status fmi2GetRealStatus(fmi2Component c, const fmi2StatusKind s, fmi2Real* value)
{
    Component* self = comp(c);
    if (s != fmi2LastSuccessfulTime) {
        self->log(fmi2Discard, "logStatusDiscard", "fmi2GetRealStatus: only fmi2LastSuccessfulTime");
        return fmi2Discard;
    }
    Python gil(self);
    PyObject* r = PyObject_CallMethod(self->instance, "last_successful_time", nullptr);
    if (r == nullptr) return self->error("fmi2GetRealStatus");
    *value = PyFloat_AsDouble(r);
    Py_DECREF(r);
    if (PyErr_Occurred()) return self->error("fmi2GetRealStatus");
    return fmi2OK;
}

FMI2_Export fmi2Status fmi2GetIntegerStatus(fmi2Component c, const fmi2StatusKind, fmi2Integer*)
{
    comp(c)->log(fmi2Discard, "logStatusDiscard", "fmi2GetIntegerStatus: no integer status");
    return fmi2Discard;
}

FMI2_Export fmi2Status fmi2GetBooleanStatus(fmi2Component c, const fmi2StatusKind s, fmi2Boolean* value)
{
    Component* self = comp(c);
    if (s != fmi2Terminated) {
        self->log(fmi2Discard, "logStatusDiscard", "fmi2GetBooleanStatus: only fmi2Terminated");
        return fmi2Discard;
    }
    Python gil(self);
    PyObject* r = PyObject_CallMethod(self->instance, "terminated", nullptr);
    if (r == nullptr) return self->error("fmi2GetBooleanStatus");
    int t = PyObject_IsTrue(r);
    Py_DECREF(r);
    if (t < 0) return self->error("fmi2GetBooleanStatus");
    *value = t ? fmi2True : fmi2False;
    return fmi2OK;
}

FMI2_Export fmi2Status fmi2GetStringStatus(fmi2Component c, const fmi2StatusKind, fmi2String*)
{
    comp(c)->log(fmi2Discard, "logStatusDiscard", "fmi2GetStringStatus: no string status");
    return fmi2Discard;
}

} // extern "C"
