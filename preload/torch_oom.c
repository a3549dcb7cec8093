/* An out-of-memory answer PyTorch raises as torch.OutOfMemoryError.
 *
 * CUDAPluggableAllocator stores whatever the malloc function returns, NULL
 * included (torch/csrc/cuda/CUDAPluggableAllocator.cpp: malloc/allocate), and
 * the next kernel faults on it. PyTorch's own way to carry a Python exception
 * through its C++ is `python_error` (torch/csrc/Exceptions.h): a C++ exception
 * holding the Python exception's type, value and traceback, which every
 * binding's HANDLE_TH_ERRORS catches by reference and restores
 * (`catch (python_error& e) { e.restore(); }`). So cudalloc throws one, built
 * with the Itanium C++ ABI's runtime (__cxa_allocate_exception, __cxa_throw),
 * holding torch.OutOfMemoryError(message): the Python caller gets that
 * exception, as from PyTorch's own allocator.
 *
 * All of it is found at run time in the process (libstdc++ and CPython are
 * there when PyTorch is): libcudalloc.so has no C++ dependency, and outside a
 * Python process with torch imported nothing is thrown (the caller gets NULL).
 * The exception object is laid out as python_error is: a vtable pointer
 * (std::exception's: destructor, deleting destructor, what), then type,
 * value, traceback; PyTorch reads only those three (restore), and our own
 * what() and destructor. It is thrown from the outermost frame, with no lock
 * held. */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "preload/preload.h"

typedef struct _object PyObject;
typedef int PyGILState_STATE;

static struct {
    void *(*allocate_exception)(size_t);
    void (*throw_exception)(void *, void *, void (*)(void *));
    PyGILState_STATE (*gil_ensure)(void);
    void (*gil_release)(PyGILState_STATE);
    PyObject *(*get_module)(PyObject *);
    PyObject *(*from_string)(const char *);
    PyObject *(*get_attr)(PyObject *, const char *);
    PyObject *(*call_one)(PyObject *, PyObject *, PyObject *); /* PyObject_CallFunctionObjArgs */
    void (*decref)(PyObject *);
    void (*clear_error)(void);
    int (*is_initialized)(void);
    const void *std_exception_typeinfo; /* typeinfo for std::exception */
    const char *si_class_vtable;        /* vtable for __cxxabiv1::__si_class_type_info */
    bool found;
} rt;

/* The thrown object: python_error's layout. */
typedef struct python_error {
    const void *const *vptr;
    PyObject *type, *value, *traceback;
    char message[512]; /* where python_error has a std::string: only our what() reads it */
} python_error;

/* __si_class_type_info for "python_error", derived from std::exception. */
static struct {
    const void *vptr;
    const char *name;
    const void *base;
} typeinfo;

static void destroy(python_error *e) {
    PyGILState_STATE g = rt.gil_ensure();
    if (e->type) rt.decref(e->type);
    if (e->value) rt.decref(e->value);
    rt.gil_release(g);
}

static void destroy_and_delete(python_error *e) { destroy(e); } /* never deleted: the runtime frees it */

static const char *what(const python_error *e) { return e->message; }

/* offset to top, typeinfo, then std::exception's virtual functions */
static const void *vtable[5] = {NULL, &typeinfo, (void *)destroy, (void *)destroy_and_delete, (void *)what};

#define FIND(field, name) (rt.field = (__typeof__(rt.field))ca_real_dlsym(RTLD_DEFAULT, name))

static void find(void) {
    FIND(allocate_exception, "__cxa_allocate_exception");
    FIND(throw_exception, "__cxa_throw");
    FIND(gil_ensure, "PyGILState_Ensure");
    FIND(gil_release, "PyGILState_Release");
    FIND(get_module, "PyImport_GetModule");
    FIND(from_string, "PyUnicode_FromString");
    FIND(get_attr, "PyObject_GetAttrString");
    FIND(call_one, "PyObject_CallFunctionObjArgs");
    FIND(decref, "Py_DecRef");
    FIND(clear_error, "PyErr_Clear");
    FIND(is_initialized, "Py_IsInitialized");
    FIND(std_exception_typeinfo, "_ZTISt9exception");
    FIND(si_class_vtable, "_ZTVN10__cxxabiv120__si_class_type_infoE");
    if (!rt.allocate_exception || !rt.throw_exception || !rt.gil_ensure || !rt.gil_release || !rt.get_module ||
        !rt.from_string || !rt.get_attr || !rt.call_one || !rt.decref || !rt.clear_error || !rt.is_initialized ||
        !rt.std_exception_typeinfo || !rt.si_class_vtable)
        return;
    typeinfo.vptr = rt.si_class_vtable + 2 * sizeof(void *); /* past offset to top and typeinfo */
    typeinfo.name = "12python_error";                          /* matched by name across libraries */
    typeinfo.base = rt.std_exception_typeinfo;
    rt.found = true;
}

/* torch.OutOfMemoryError(message), when torch is imported; NULL otherwise. */
static PyObject *oom_error(const char *message, PyObject **type) {
    PyObject *name = rt.from_string("torch"), *torch = name ? rt.get_module(name) : NULL, *value = NULL;
    if (name) rt.decref(name);
    *type = torch ? rt.get_attr(torch, "OutOfMemoryError") : NULL;
    PyObject *text = *type ? rt.from_string(message) : NULL;
    if (text) value = rt.call_one(*type, text, NULL);
    if (text) rt.decref(text);
    if (torch) rt.decref(torch);
    if (!value && *type) {
        rt.decref(*type);
        *type = NULL;
    }
    if (!value) rt.clear_error(); /* no torch, or no OutOfMemoryError in it: not an error of the program's */
    return value;
}

void ca_torch_raise_oom(const char *message) {
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, find);
    if (!rt.found || !rt.is_initialized()) return;
    PyGILState_STATE g = rt.gil_ensure();
    PyObject *type = NULL, *value = oom_error(message, &type);
    rt.gil_release(g);
    if (!value) return; /* not PyTorch: the caller answers NULL */
    python_error *e = rt.allocate_exception(sizeof *e);
    memset(e, 0, sizeof *e);
    e->vptr = vtable + 2;
    e->type = type;
    e->value = value;
    snprintf(e->message, sizeof e->message, "%s", message);
    rt.throw_exception(e, &typeinfo, (void (*)(void *))destroy);
}
