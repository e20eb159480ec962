// The Python runtime of a cosim FMU binary: found and loaded at fmi2Instantiate,
// and every Python C API symbol the binary uses resolved through dlsym.
// Included once, by cosim_fmi2.cpp (one translation unit).
//
// The binary references no Python symbol directly (tests/test_fmu_hosts.py checks
// with nm), so a host that is not Python (OMSimulator's command line, ecos's
// out-of-process runner, a C program) can dlopen it.  At an fmi2Instantiate:
//  1. A Python already in the host process (FMPy, libcosimpy, a C host that loaded
//     libpython globally) is used as it is: its symbols are in the global scope.
//  2. Otherwise libpython is loaded with RTLD_GLOBAL (numpy's extension modules take
//     their Python symbols from the global scope), the first that loads of:
//       $COSIM_FMU_LIBPYTHON (when set, only that one),
//       the library recorded at build time (resources/cosim_python.cfg),
//       its soname on the library search path (LD_LIBRARY_PATH, ld.so.cache);
//     and the interpreter is started, never finalized.  Its home is $PYTHONHOME,
//     else the recorded home when the recorded library was loaded, else the
//     installation above the library (the first folder with lib/pythonX.Y/os.py);
//     the recorded site-packages folders are added when the versions match
//     (fmi2Instantiate passes them to the bootstrap); $PYTHONPATH works as for any
//     Python.
// When none loads, or its standard library is not found (Python would abort the
// host), fmi2Instantiate fails with one logged line naming what was tried and
// how to fix it.
//
// Portability: the dl* functions are bound to their oldest version (glibc 2.34
// moved them into libc.so.6 under a new one); see fmu/native/__init__.py for the
// other flags that keep the binary's glibc symbol versions <= 2.28.
#ifndef COSIM_PYTHON_LOADER_H
#define COSIM_PYTHON_LOADER_H

// types, constants and macros only: every function and data symbol goes through
// cosim_py (the #defines at the end of this file)
#define Py_LIMITED_API 0x03080000
#include <Python.h>

#include <dlfcn.h>
#include <pthread.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#if defined(__x86_64__) && defined(__GLIBC__)
__asm__(".symver dlopen,dlopen@GLIBC_2.2.5");
__asm__(".symver dlsym,dlsym@GLIBC_2.2.5");
__asm__(".symver dlerror,dlerror@GLIBC_2.2.5");
__asm__(".symver dladdr,dladdr@GLIBC_2.2.5");
#endif

// every function of the Python C API the binary calls (all in the stable ABI, 3.8+)
#define COSIM_PY_FUNCTIONS(X) \
    X(Py_IsInitialized) X(Py_InitializeEx) X(Py_GetVersion) X(PyEval_SaveThread) \
    X(PyGILState_Ensure) X(PyGILState_Release) X(Py_IncRef) X(Py_DecRef) X(PyType_GetFlags) \
    X(PyBool_FromLong) X(PyBytes_AsString) X(PyBytes_FromStringAndSize) X(PyBytes_Size) \
    X(PyDict_GetItemString) X(PyDict_New) X(PyDict_SetItemString) X(PyErr_Clear) X(PyErr_Fetch) \
    X(PyErr_Occurred) X(PyErr_SetString) X(PyEval_EvalCode) X(PyEval_GetBuiltins) \
    X(PyFloat_AsDouble) X(PyFloat_FromDouble) X(PyList_GetItem) X(PyList_New) X(PyList_SetItem) \
    X(PyList_SetSlice) X(PyList_Size) X(PyLong_AsLong) X(PyLong_AsLongLong) \
    X(PyLong_AsUnsignedLong) X(PyLong_AsVoidPtr) X(PyLong_FromLong) X(PyLong_FromUnsignedLong) \
    X(PyObject_Call) X(PyObject_CallFunction) X(PyObject_CallFunctionObjArgs) \
    X(PyObject_CallObject) X(PyObject_CallMethod) X(PyObject_GetAttrString) X(PyObject_IsTrue) \
    X(PyObject_Str) X(PySequence_List) X(PyTuple_GetItem) X(PyTuple_New) X(PyTuple_Size) \
    X(PyUnicode_AsUTF8String) X(PyUnicode_FromString) X(Py_BuildValue) X(Py_CompileString)

// data symbols (the table holds their addresses)
#define COSIM_PY_DATA(X) \
    X(PyExc_RuntimeError) X(PyExc_TypeError) X(PyExc_ValueError) \
    X(_Py_NoneStruct) X(_Py_TrueStruct) X(_Py_FalseStruct)

namespace {

struct PyApi
{
#define COSIM_PY_MEMBER(name) decltype(&::name) name = nullptr;
    COSIM_PY_FUNCTIONS(COSIM_PY_MEMBER)
    COSIM_PY_DATA(COSIM_PY_MEMBER)
#undef COSIM_PY_MEMBER
    // optional, used before starting an interpreter (Py_SetPythonHome is gone in 3.13)
    void (*SetPythonHome)(const wchar_t*) = nullptr;
    wchar_t* (*DecodeLocale)(const char*, size_t*) = nullptr;
};

PyApi cosim_py;  // filled once, then read only

// the name of the first symbol `handle` lacks, or nullptr when all were found
const char* resolve_python_api(void* handle, PyApi& api)
{
#define COSIM_PY_RESOLVE(name)                                                   \
    api.name = reinterpret_cast<decltype(api.name)>(dlsym(handle, #name));       \
    if (api.name == nullptr) return #name;
    COSIM_PY_FUNCTIONS(COSIM_PY_RESOLVE)
    COSIM_PY_DATA(COSIM_PY_RESOLVE)
#undef COSIM_PY_RESOLVE
    api.SetPythonHome = reinterpret_cast<void (*)(const wchar_t*)>(dlsym(handle, "Py_SetPythonHome"));
    api.DecodeLocale = reinterpret_cast<wchar_t* (*)(const char*, size_t*)>(dlsym(handle, "Py_DecodeLocale"));
    return nullptr;
}

// resources/cosim_python.cfg, written by `cosim fmu build` (fmu/builder.py):
// key=value lines; path= may repeat
struct RecordedPython
{
    std::string file;       // the file read ("" if none)
    std::string version;    // major.minor of the building interpreter, e.g. 3.11
    std::string requires_;  // supported range, e.g. >=3.11
    std::string libpython;  // its shared library (absolute; "" if it had none)
    std::string soname;     // e.g. libpython3.11.so.1.0
    std::string home;       // sys.base_prefix
    std::vector<std::string> paths;  // site-packages folders (numpy, scipy, ...)
};

RecordedPython read_recorded_python(const std::string& resources)
{
    RecordedPython r;
    std::string name = resources + "/cosim_python.cfg";
    std::FILE* fh = std::fopen(name.c_str(), "r");
    if (fh == nullptr) return r;
    r.file = name;
    char line[4096];
    while (std::fgets(line, sizeof line, fh) != nullptr) {
        std::string s(line);
        while (!s.empty() && (s.back() == '\n' || s.back() == '\r')) s.pop_back();
        if (s.empty() || s[0] == '#') continue;
        std::string::size_type eq = s.find('=');
        if (eq == std::string::npos) continue;
        std::string key = s.substr(0, eq), value = s.substr(eq + 1);
        if (key == "version") r.version = value;
        else if (key == "requires") r.requires_ = value;
        else if (key == "libpython") r.libpython = value;
        else if (key == "soname") r.soname = value;
        else if (key == "home") r.home = value;
        else if (key == "path") r.paths.push_back(value);
    }
    std::fclose(fh);
    return r;
}

// the local path of a file: URI (file:///a%20b, file://localhost/a, file:/a); other text as is
std::string path_of_uri(const char* uri)
{
    std::string s = uri ? uri : "";
    if (s.compare(0, 7, "file://") == 0) {
        s = s.substr(7);
        std::string::size_type slash = s.find('/');
        s = slash == std::string::npos ? std::string() : s.substr(slash);  // drop the host
    } else if (s.compare(0, 5, "file:") == 0) {
        s = s.substr(5);
    } else {
        return s;
    }
    std::string out;
    for (std::string::size_type i = 0; i < s.size(); ++i) {
        auto hex = [](char c) {
            return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10
                 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
        };
        if (s[i] == '%' && i + 2 < s.size() && hex(s[i + 1]) >= 0 && hex(s[i + 2]) >= 0) {
            out += static_cast<char>(hex(s[i + 1]) * 16 + hex(s[i + 2]));
            i += 2;
        } else {
            out += s[i];
        }
    }
    while (out.size() > 1 && out.back() == '/') out.pop_back();
    return out;
}

bool is_file(const std::string& path) { return !path.empty() && access(path.c_str(), R_OK) == 0; }

std::string real_path(const std::string& path)
{
    char* r = realpath(path.c_str(), nullptr);
    if (r == nullptr) return path;
    std::string s(r);
    std::free(r);
    return s;
}

std::string parent_of(const std::string& path)
{
    std::string::size_type slash = path.find_last_of('/');
    return slash == std::string::npos || slash == 0 ? std::string("/") : path.substr(0, slash);
}

// "3.11" of a Py_GetVersion() text "3.11.7 (main, ...)"
std::string major_minor(const char* version)
{
    std::string v = version ? version : "";
    std::string::size_type a = v.find('.');
    if (a == std::string::npos) return v;
    std::string::size_type b = v.find_first_not_of("0123456789", a + 1);
    return v.substr(0, b);
}

// does `home` hold the standard library of Python `mm` (lib/pythonX.Y/os.py)?
bool has_stdlib(const std::string& home, const std::string& mm)
{
    return is_file(home + "/lib/python" + mm + "/os.py") || is_file(home + "/lib64/python" + mm + "/os.py");
}

struct PythonRuntime
{
    pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
    bool ready = false;
    bool embedded = false;         // the binary started the interpreter
    std::string description;       // which Python, for the log
    std::vector<std::string> paths;  // recorded folders the bootstrap adds (embedded, same version)
};

PythonRuntime g_python;

void describe_library(void* symbol, std::string& library)
{
    Dl_info info;
    if (symbol != nullptr && dladdr(symbol, &info) != 0 && info.dli_fname != nullptr)
        library = info.dli_fname;
}

// Make a Python runtime usable (see the top of this file); false with a one-line
// `error` (what was tried, how to fix it) when there is none.  Thread-safe; once
// it succeeded, later calls return true at once.
bool load_python(const std::string& resources, std::string& error)
{
    pthread_mutex_lock(&g_python.lock);
    struct Unlock { ~Unlock() { pthread_mutex_unlock(&g_python.lock); } } unlock;
    if (g_python.ready) return true;
    RecordedPython rec = read_recorded_python(resources);
    const std::string want = rec.version.empty() ? std::string("3") : rec.version;
    const std::string range = rec.requires_.empty() ? std::string(">=") + want : rec.requires_;

    // 1. the host's own Python (its symbols in the global scope)
    void* handle = RTLD_DEFAULT;
    std::string library;
    if (dlsym(RTLD_DEFAULT, "Py_IsInitialized") == nullptr) {
        // 2. load libpython ourselves
        std::vector<std::pair<std::string, std::string>> candidates;  // (what, dlopen name)
        const char* env = std::getenv("COSIM_FMU_LIBPYTHON");
        if (env != nullptr && *env != '\0') {
            candidates.emplace_back("$COSIM_FMU_LIBPYTHON", env);
        } else {
            if (!rec.libpython.empty()) candidates.emplace_back("the build's", rec.libpython);
            if (!rec.soname.empty()) candidates.emplace_back("the library search path's", rec.soname);
        }
        std::string tried;
        handle = nullptr;
        for (const auto& c : candidates) {
            handle = dlopen(c.second.c_str(), RTLD_NOW | RTLD_GLOBAL);
            if (handle != nullptr) break;
            const char* why = dlerror();
            tried += (tried.empty() ? "" : "; ") + c.first + " " + (why ? why : c.second + ": not loadable");
        }
        if (handle == nullptr) {
            if (candidates.empty()) tried = "nothing (no libpython was recorded at build time: its Python had no shared library)";
            error = "no Python runtime: the host process has no Python loaded and this FMU needs CPython "
                + range + " (built with " + want + ") as a shared library with the packages named in "
                "its modelDescription.xml; tried " + tried + ". Set COSIM_FMU_LIBPYTHON to the path of a "
                "libpython" + want + ".so (e.g. the lib folder of the Python that built the FMU) "
                "and PYTHONPATH to a site-packages with those packages, or preload that library in the host";
            return false;
        }
    }
    PyApi api;
    if (const char* missing = resolve_python_api(handle, api)) {
        error = std::string("the Python runtime in the host lacks the C API function ") + missing
            + "; this FMU needs CPython " + range + " (a shared libpython or a python executable)";
        return false;
    }
    describe_library(reinterpret_cast<void*>(api.Py_IsInitialized), library);
    const std::string mm = major_minor(api.Py_GetVersion());
    std::string version = api.Py_GetVersion();
    version = version.substr(0, version.find(' '));
    if (api.Py_IsInitialized()) {
        g_python.description = "the host's Python " + version + " (" + library + ")";
    } else {  // start it: find its standard library first (Python aborts the process without it)
        std::string home;
        const char* env_home = std::getenv("PYTHONHOME");
        if (env_home != nullptr && *env_home != '\0') {
            std::string h(env_home);
            h = h.substr(0, h.find(':'));
            if (!has_stdlib(h, mm)) {
                error = "PYTHONHOME=" + std::string(env_home) + " holds no standard library of Python "
                    + mm + " (lib/python" + mm + "/os.py) for " + library
                    + "; set PYTHONHOME to the installation that library belongs to, or unset it";
                return false;
            }
        } else {
            if (!rec.home.empty() && !rec.libpython.empty() && real_path(library) == real_path(rec.libpython)
                && has_stdlib(rec.home, mm))
                home = rec.home;
            for (std::string dir = parent_of(real_path(library)); home.empty() && dir != "/"; dir = parent_of(dir))
                if (has_stdlib(dir, mm)) home = dir;
            if (home.empty()) {
                error = "found " + library + " (Python " + version + ") but not its standard library "
                    "(lib/python" + mm + "/os.py in a folder above it); set PYTHONHOME to the "
                    "Python installation that library belongs to";
                return false;
            }
            // (Py_SetPythonHome keeps the pointer: the decoded copy is never freed)
            wchar_t* w = api.DecodeLocale ? api.DecodeLocale(home.c_str(), nullptr) : nullptr;
            if (api.SetPythonHome != nullptr && w != nullptr) {
                api.SetPythonHome(w);
            } else {
                setenv("PYTHONHOME", home.c_str(), 0);  // Python >= 3.13: no Py_SetPythonHome
            }
        }
        api.Py_InitializeEx(0);  // no signal handlers: the host owns them
        api.PyEval_SaveThread();
        g_python.embedded = true;
        g_python.description = "Python " + version + " loaded from " + library
            + " (the host had none; home " + (home.empty() ? std::string(env_home) : home) + ")";
        if (mm == rec.version)
            for (const auto& p : rec.paths)
                if (access(p.c_str(), R_OK | X_OK) == 0) g_python.paths.push_back(p);
    }
    cosim_py = api;
    g_python.ready = true;
    return true;
}

}  // namespace

// -- the binary's Python calls go through cosim_py ------------------------------------
#define Py_IsInitialized (cosim_py.Py_IsInitialized)
#define Py_InitializeEx (cosim_py.Py_InitializeEx)
#define Py_GetVersion (cosim_py.Py_GetVersion)
#define PyEval_SaveThread (cosim_py.PyEval_SaveThread)
#define PyGILState_Ensure (cosim_py.PyGILState_Ensure)
#define PyGILState_Release (cosim_py.PyGILState_Release)
#define Py_IncRef (cosim_py.Py_IncRef)
#define Py_DecRef (cosim_py.Py_DecRef)
#define PyType_GetFlags (cosim_py.PyType_GetFlags)
#define PyBool_FromLong (cosim_py.PyBool_FromLong)
#define PyBytes_AsString (cosim_py.PyBytes_AsString)
#define PyBytes_FromStringAndSize (cosim_py.PyBytes_FromStringAndSize)
#define PyBytes_Size (cosim_py.PyBytes_Size)
#define PyDict_GetItemString (cosim_py.PyDict_GetItemString)
#define PyDict_New (cosim_py.PyDict_New)
#define PyDict_SetItemString (cosim_py.PyDict_SetItemString)
#define PyErr_Clear (cosim_py.PyErr_Clear)
#define PyErr_Fetch (cosim_py.PyErr_Fetch)
#define PyErr_Occurred (cosim_py.PyErr_Occurred)
#define PyErr_SetString (cosim_py.PyErr_SetString)
#define PyEval_EvalCode (cosim_py.PyEval_EvalCode)
#define PyEval_GetBuiltins (cosim_py.PyEval_GetBuiltins)
#define PyFloat_AsDouble (cosim_py.PyFloat_AsDouble)
#define PyFloat_FromDouble (cosim_py.PyFloat_FromDouble)
#define PyList_GetItem (cosim_py.PyList_GetItem)
#define PyList_New (cosim_py.PyList_New)
#define PyList_SetItem (cosim_py.PyList_SetItem)
#define PyList_SetSlice (cosim_py.PyList_SetSlice)
#define PyList_Size (cosim_py.PyList_Size)
#define PyLong_AsLong (cosim_py.PyLong_AsLong)
#define PyLong_AsLongLong (cosim_py.PyLong_AsLongLong)
#define PyLong_AsUnsignedLong (cosim_py.PyLong_AsUnsignedLong)
#define PyLong_AsVoidPtr (cosim_py.PyLong_AsVoidPtr)
#define PyLong_FromLong (cosim_py.PyLong_FromLong)
#define PyLong_FromUnsignedLong (cosim_py.PyLong_FromUnsignedLong)
#define PyObject_Call (cosim_py.PyObject_Call)
#define PyObject_CallFunction (cosim_py.PyObject_CallFunction)
#define PyObject_CallFunctionObjArgs (cosim_py.PyObject_CallFunctionObjArgs)
#define PyObject_CallObject (cosim_py.PyObject_CallObject)
#define PyObject_CallMethod (cosim_py.PyObject_CallMethod)
#define PyObject_GetAttrString (cosim_py.PyObject_GetAttrString)
#define PyObject_IsTrue (cosim_py.PyObject_IsTrue)
#define PyObject_Str (cosim_py.PyObject_Str)
#define PySequence_List (cosim_py.PySequence_List)
#define PyTuple_GetItem (cosim_py.PyTuple_GetItem)
#define PyTuple_New (cosim_py.PyTuple_New)
#define PyTuple_Size (cosim_py.PyTuple_Size)
#define PyUnicode_AsUTF8String (cosim_py.PyUnicode_AsUTF8String)
#define PyUnicode_FromString (cosim_py.PyUnicode_FromString)
#define Py_BuildValue (cosim_py.Py_BuildValue)
#define Py_CompileString (cosim_py.Py_CompileString)
#define PyExc_RuntimeError (*cosim_py.PyExc_RuntimeError)
#define PyExc_TypeError (*cosim_py.PyExc_TypeError)
#define PyExc_ValueError (*cosim_py.PyExc_ValueError)
#define _Py_NoneStruct (*cosim_py._Py_NoneStruct)
#define _Py_TrueStruct (*cosim_py._Py_TrueStruct)
#define _Py_FalseStruct (*cosim_py._Py_FalseStruct)

// the header's inline reference counting and type checks call _Py_Dealloc and
// PyType_GetFlags directly: the same through the table
#undef Py_INCREF
#undef Py_DECREF
#undef Py_XINCREF
#undef Py_XDECREF
#undef Py_CLEAR
#undef PyType_FastSubclass
#define Py_INCREF(op) Py_IncRef(reinterpret_cast<PyObject*>(op))
#define Py_DECREF(op) Py_DecRef(reinterpret_cast<PyObject*>(op))
#define Py_XINCREF(op) Py_IncRef(reinterpret_cast<PyObject*>(op))  /* Py_IncRef(NULL) is a no-op */
#define Py_XDECREF(op) Py_DecRef(reinterpret_cast<PyObject*>(op))
#define Py_CLEAR(op)                                          \
    do {                                                      \
        PyObject* cosim_tmp_ = reinterpret_cast<PyObject*>(op); \
        if (cosim_tmp_ != nullptr) {                          \
            (op) = nullptr;                                   \
            Py_DecRef(cosim_tmp_);                            \
        }                                                     \
    } while (0)
#define PyType_FastSubclass(type, flag) ((PyType_GetFlags(type) & (flag)) != 0)

#endif  // COSIM_PYTHON_LOADER_H
