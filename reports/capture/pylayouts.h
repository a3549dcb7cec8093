/* Where CPython keeps what a frame walk reads, per minor version (x86-64 and
 * other LP64 targets; release builds with the GIL). Internal structures
 * change between minor versions, so each has its own row; the rows are
 * checked against each installed version's own headers by
 * tests/python/layout_check.c (make test-pyframes).
 *
 * 3.10: frames are PyFrameObjects linked by f_back, each run by its own C
 *       call of the eval loop.
 * 3.11: _PyInterpreterFrame linked by previous, reached through
 *       tstate->cframe; is_entry marks the frame an eval-loop C call started
 *       with (Python-to-Python calls stay in one C call).
 * 3.12, 3.13: each eval-loop C call pushes a frame owned by the C stack
 *       (owner 3) below its first frame; 3.13 keeps the current frame in the
 *       thread state itself. */
#ifndef CA_PYLAYOUTS_H
#define CA_PYLAYOUTS_H

typedef struct ca_py_layout {
    unsigned version;      /* 0x030B for 3.11 */
    /* thread state -> innermost frame: directly (ts_frame) or through the
     * _PyCFrame (ts_cframe, then cframe_frame) */
    int ts_frame, ts_cframe, cframe_frame;
    /* frame fields; -1 when the version has none */
    int f_code;            /* code object (3.13: f_executable) */
    int f_previous;        /* the caller's frame (3.10: f_back) */
    int f_instr;           /* instruction pointer (prev_instr, instr_ptr) */
    int f_lasti;           /* 3.10: instruction index (int) */
    int f_owner;           /* char */
    int f_is_entry;        /* 3.11: bool */
    int owner_generator, owner_cstack;
    /* code object */
    int co_code;           /* first instruction (co_code_adaptive) */
    int co_firsttraceable; /* int: instructions before it run before the frame starts */
    int co_filename, co_name, co_firstlineno; /* co_name: co_qualname from 3.11 */
    /* str objects: where the characters start (compact ASCII, other compact) */
    int str_ascii_size, str_compact_size;
} ca_py_layout;

/* Offsets of fields every object has, and of str's length and state. */
#define CA_PY_OB_TYPE 8
#define CA_PY_STR_LENGTH 16
#define CA_PY_STR_STATE 32
#define CA_PY_STR_KIND(state) (((state) >> 2) & 7)
#define CA_PY_STR_COMPACT 0x20u
#define CA_PY_STR_ASCII 0x40u

static const ca_py_layout ca_py_layouts[] = {
    {.version = 0x030A, .ts_frame = 24, .ts_cframe = -1, .cframe_frame = -1,
     .f_code = 32, .f_previous = 24, .f_instr = -1, .f_lasti = 96, .f_owner = -1, .f_is_entry = -1,
     .owner_generator = -1, .owner_cstack = -1,
     .co_code = -1, .co_firsttraceable = -1, .co_filename = 104, .co_name = 112, .co_firstlineno = 40,
     .str_ascii_size = 48, .str_compact_size = 72},
    {.version = 0x030B, .ts_frame = -1, .ts_cframe = 56, .cframe_frame = 8,
     .f_code = 32, .f_previous = 48, .f_instr = 56, .f_lasti = -1, .f_owner = 69, .f_is_entry = 68,
     .owner_generator = 1, .owner_cstack = -1,
     .co_code = 184, .co_firsttraceable = 168, .co_filename = 112, .co_name = 128, .co_firstlineno = 72,
     .str_ascii_size = 48, .str_compact_size = 72},
    {.version = 0x030C, .ts_frame = -1, .ts_cframe = 56, .cframe_frame = 0,
     .f_code = 0, .f_previous = 8, .f_instr = 56, .f_lasti = -1, .f_owner = 70, .f_is_entry = -1,
     .owner_generator = 1, .owner_cstack = 3,
     .co_code = 192, .co_firsttraceable = 176, .co_filename = 112, .co_name = 128, .co_firstlineno = 68,
     .str_ascii_size = 40, .str_compact_size = 56},
    {.version = 0x030D, .ts_frame = 72, .ts_cframe = -1, .cframe_frame = -1,
     .f_code = 0, .f_previous = 8, .f_instr = 56, .f_lasti = -1, .f_owner = 70, .f_is_entry = -1,
     .owner_generator = 1, .owner_cstack = 3,
     .co_code = 200, .co_firsttraceable = 184, .co_filename = 112, .co_name = 128, .co_firstlineno = 68,
     .str_ascii_size = 40, .str_compact_size = 56},
};
#define CA_PY_N_LAYOUTS (sizeof ca_py_layouts / sizeof ca_py_layouts[0])

#endif
