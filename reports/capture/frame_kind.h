/* What a frame is, read from its names: the program's own code, a library's
 * Python, or the C++ runtime under it (PyTorch's, the allocator's, the C
 * library's); and whether it is the call of one pass of a model (a module's
 * forward, an optimizer's step, autograd's backward).
 *
 * Findings are named after the program's own code (REPORT.md, "Site
 * names"); the iteration detector does not take blocks repeated inside one
 * such pass for a training loop's iterations (reports/track/loops.h). Both
 * work on any frame with names: a Python frame, a frame read from a
 * snapshot, a native frame once symbolized. */
#ifndef CA_FRAME_KIND_H
#define CA_FRAME_KIND_H
#include <stdint.h>

typedef enum {
    CA_FRAME_PROGRAM = 0, /* the program's own code (and native code of unknown origin) */
    CA_FRAME_LIBRARY,     /* Python that comes with Python or is installed into it: site-packages,
                             dist-packages, lib/python3.*, frozen modules */
    CA_FRAME_RUNTIME,     /* C++ of PyTorch and its allocator (c10::, at::, torch::, ...), the C and C++
                             libraries: what runs the program's calls, not the program. CUDA's own
                             APIs (cudaMalloc) are not: the program called them */
} ca_frame_kind;

/* From a frame's function, file and module (the object it lives in; NULL or
 * "??" when unknown). */
ca_frame_kind ca_frame_kind_of(const char *function, const char *file, const char *module);

/* A Python frame: a file ending in ".py", or the Python frame module. */
int ca_frame_is_python(const char *file, const char *module);

typedef enum {
    CA_PASS_NONE = 0,
    CA_PASS_MODULE,    /* torch.nn.Module's __call__ (torch/nn/modules/): a forward */
    CA_PASS_OPTIMIZER, /* torch/optim/: an optimizer's step */
    CA_PASS_BACKWARD,  /* torch/autograd/, Tensor.backward, autograd's engine (C++) */
} ca_pass_kind;

/* Is this frame the call of one pass? */
ca_pass_kind ca_frame_pass(const char *function, const char *file);
/* The same for a named frame's ip (reports/capture/named_frames.h);
 * CA_PASS_NONE for a native return address (its names are not known until
 * a report symbolizes it). */
ca_pass_kind ca_ip_pass(uintptr_t ip);
/* A named frame's kind; CA_FRAME_PROGRAM for a native return address. */
ca_frame_kind ca_ip_kind(uintptr_t ip);

/* "a module's forward", "an optimizer step", "autograd's backward". */
const char *ca_pass_name(ca_pass_kind k);

#endif
