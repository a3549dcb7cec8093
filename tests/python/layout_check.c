/* The offsets of reports/capture/pylayouts.h against CPython's own headers: walker.sh
 * builds this with each installed Python's include directory (internal
 * headers included) and runs it. */
#define Py_BUILD_CORE 1
#include <Python.h>
#include <frameobject.h>
#if PY_VERSION_HEX >= 0x030B0000
#include <internal/pycore_frame.h>
#endif
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "reports/capture/pylayouts.h"

static int good, bad;

static void same(const char *what, long ours, long theirs) {
    if (ours == theirs) {
        good++;
        return;
    }
    bad++;
    printf("FAIL layout %s: %s is %ld in pylayouts.h, %ld in the headers\n", PY_VERSION, what, ours, theirs);
}
#define SAME(field, expr) same(#field, L->field, (long)(expr))

/* The bit a one-bit field of str's state sets, found by setting it. */
#define STATE_BITS(field, value)                                                                   \
    ({                                                                                             \
        PyASCIIObject a_;                                                                          \
        unsigned s_;                                                                               \
        memset(&a_, 0, sizeof a_);                                                                 \
        a_.state.field = value;                                                                    \
        memcpy(&s_, (char *)&a_ + offsetof(PyASCIIObject, state), sizeof s_);                      \
        s_;                                                                                        \
    })

int main(void) {
    const ca_py_layout *L = NULL;
    for (size_t i = 0; i < CA_PY_N_LAYOUTS; i++)
        if (ca_py_layouts[i].version == (PY_MAJOR_VERSION << 8 | PY_MINOR_VERSION)) L = &ca_py_layouts[i];
    if (!L) {
        printf("layout (python %s): no row in pylayouts.h: not supported\n", PY_VERSION);
        return 0;
    }
#if PY_VERSION_HEX >= 0x030D0000
    SAME(ts_frame, offsetof(PyThreadState, current_frame));
    SAME(f_code, offsetof(_PyInterpreterFrame, f_executable));
    SAME(f_instr, offsetof(_PyInterpreterFrame, instr_ptr));
#elif PY_VERSION_HEX >= 0x030B0000
    SAME(ts_cframe, offsetof(PyThreadState, cframe));
    SAME(cframe_frame, offsetof(_PyCFrame, current_frame));
    SAME(f_code, offsetof(_PyInterpreterFrame, f_code));
    SAME(f_instr, offsetof(_PyInterpreterFrame, prev_instr));
#else
    SAME(ts_frame, offsetof(PyThreadState, frame));
    SAME(f_code, offsetof(PyFrameObject, f_code));
    SAME(f_previous, offsetof(PyFrameObject, f_back));
    SAME(f_lasti, offsetof(PyFrameObject, f_lasti));
    SAME(co_name, offsetof(PyCodeObject, co_name));
#endif
#if PY_VERSION_HEX >= 0x030B0000
    SAME(f_previous, offsetof(_PyInterpreterFrame, previous));
    SAME(f_owner, offsetof(_PyInterpreterFrame, owner));
    SAME(owner_generator, FRAME_OWNED_BY_GENERATOR);
    SAME(co_code, offsetof(PyCodeObject, co_code_adaptive));
    SAME(co_firsttraceable, offsetof(PyCodeObject, _co_firsttraceable));
    SAME(co_name, offsetof(PyCodeObject, co_qualname));
#endif
#if PY_VERSION_HEX >= 0x030C0000
    SAME(owner_cstack, FRAME_OWNED_BY_CSTACK);
#elif PY_VERSION_HEX >= 0x030B0000
    SAME(f_is_entry, offsetof(_PyInterpreterFrame, is_entry));
#endif
    SAME(co_filename, offsetof(PyCodeObject, co_filename));
    SAME(co_firstlineno, offsetof(PyCodeObject, co_firstlineno));
    SAME(str_ascii_size, sizeof(PyASCIIObject));
    SAME(str_compact_size, sizeof(PyCompactUnicodeObject));
    same("CA_PY_OB_TYPE", CA_PY_OB_TYPE, offsetof(PyObject, ob_type));
    same("CA_PY_STR_LENGTH", CA_PY_STR_LENGTH, offsetof(PyASCIIObject, length));
    same("CA_PY_STR_STATE", CA_PY_STR_STATE, offsetof(PyASCIIObject, state));
    same("CA_PY_STR_KIND", CA_PY_STR_KIND(STATE_BITS(kind, 4)), 4);
    same("CA_PY_STR_COMPACT", CA_PY_STR_COMPACT, STATE_BITS(compact, 1));
    same("CA_PY_STR_ASCII", CA_PY_STR_ASCII, STATE_BITS(ascii, 1));
    printf("layout (python %s): %d passed, %d failed\n", PY_VERSION, good, bad);
    return bad != 0;
}
