/* Frames by their names; see frame_kind.h. */
#include "reports/capture/frame_kind.h"

#include <string.h>

#include "reports/capture/named_frames.h"
#include "reports/capture/pyframes.h"

static int has(const char *s, const char *part) { return s && strstr(s, part); }

static int starts(const char *s, const char *prefix) { return s && !strncmp(s, prefix, strlen(prefix)); }

static int ends(const char *s, const char *suffix) {
    size_t n = s ? strlen(s) : 0, k = strlen(suffix);
    return n >= k && !strcmp(s + n - k, suffix);
}

int ca_frame_is_python(const char *file, const char *module) {
    return ends(file, ".py") || (module && !strcmp(module, CA_PY_MODULE));
}

/* file with Windows' separators as '/' (snapshots come from Windows too:
 * "D:\\venv\\Lib\\site-packages\\torch\\functional.py"), in buf. */
static const char *slashes(const char *file, char *buf, size_t n) {
    if (!file || !strchr(file, '\\')) return file;
    size_t i = 0;
    for (; file[i] && i + 1 < n; i++) buf[i] = file[i] == '\\' ? '/' : file[i];
    buf[i] = 0;
    return buf;
}

static int library_python(const char *file) {
    char buf[1024];
    file = slashes(file, buf, sizeof buf);
    return has(file, "/site-packages/") || has(file, "/dist-packages/") || has(file, "/lib/python3.") ||
           has(file, "/lib64/python3.") || has(file, "/Lib/") || starts(file, "<frozen ");
}

/* C++ namespaces and C functions of the runtime under a program's calls. A
 * demangled name may start with its return type ("void at::native::..."). */
static int runtime_name(const char *fn) {
    static const char *const spaces[] = {"c10::", "at::", "torch::", "caffe2::", "std::", "__gnu_cxx::",
                                         "pybind11::"};
    static const char *const exact[] = {"clone", "__clone", "clone3", "start_thread", "execute_native_thread_routine",
                                        "pthread_condattr_setpshared", "__libc_start_main", "_start",
                                        "__libc_start_call_main"};
    for (size_t i = 0; i < sizeof spaces / sizeof *spaces; i++)
        if (starts(fn, spaces[i])) return 1;
    for (size_t i = 0; i < sizeof exact / sizeof *exact; i++)
        if (!strcmp(fn, exact[i])) return 1;
    return 0;
}

static int runtime_function(const char *fn) {
    if (!fn) return 0;
    if (runtime_name(fn)) return 1;
    /* past a return type: "void at::native::foo(...)" */
    size_t word = strcspn(fn, " <(");
    return fn[word] == ' ' && runtime_name(fn + word + 1);
}

/* Shared objects of the runtime, by the base name of their path. */
static int runtime_object(const char *module) {
    static const char *const objects[] = {"libtorch", "libc10", "libcaffe2", "libc.so", "libstdc++", "libpthread",
                                          "ld-linux"};
    if (!module) return 0;
    const char *base = strrchr(module, '/');
    base = base ? base + 1 : module;
    for (size_t i = 0; i < sizeof objects / sizeof *objects; i++)
        if (starts(base, objects[i])) return 1;
    return 0;
}

ca_frame_kind ca_frame_kind_of(const char *function, const char *file, const char *module) {
    if (ca_frame_is_python(file, module)) return library_python(file) ? CA_FRAME_LIBRARY : CA_FRAME_PROGRAM;
    if (runtime_function(function) || runtime_object(module)) return CA_FRAME_RUNTIME;
    /* PyTorch's own sources, as its C++ symbolizer names them in snapshots */
    char buf[1024];
    file = slashes(file, buf, sizeof buf);
    if (has(file, "/c10/") || has(file, "/aten/src/") || has(file, "/torch/csrc/")) return CA_FRAME_RUNTIME;
    return CA_FRAME_PROGRAM;
}

ca_pass_kind ca_frame_pass(const char *function, const char *file) {
    char buf[1024];
    file = slashes(file, buf, sizeof buf);
    if (ends(file, ".py")) {
        if (has(file, "torch/nn/modules/")) return CA_PASS_MODULE;
        if (has(file, "torch/optim/")) return CA_PASS_OPTIMIZER;
        if (has(file, "torch/autograd/") || (ends(file, "torch/_tensor.py") && function && !strcmp(function, "backward")))
            return CA_PASS_BACKWARD;
        return CA_PASS_NONE;
    }
    if (has(function, "torch::autograd::Engine::") || has(function, "torch::autograd::python::PythonEngine::"))
        return CA_PASS_BACKWARD;
    return CA_PASS_NONE;
}

ca_pass_kind ca_ip_pass(uintptr_t ip) {
    const char *function, *file, *module;
    unsigned line;
    if (!ca_named_frame_get(ip, &function, &file, &line, &module)) return CA_PASS_NONE;
    return ca_frame_pass(function, file);
}

ca_frame_kind ca_ip_kind(uintptr_t ip) {
    const char *function, *file, *module;
    unsigned line;
    if (!ca_named_frame_get(ip, &function, &file, &line, &module)) return CA_FRAME_PROGRAM;
    return ca_frame_kind_of(function, file, module);
}

const char *ca_pass_name(ca_pass_kind k) {
    switch (k) {
    case CA_PASS_MODULE: return "a module's forward";
    case CA_PASS_OPTIMIZER: return "an optimizer step";
    case CA_PASS_BACKWARD: return "autograd's backward";
    default: return "one call";
    }
}
