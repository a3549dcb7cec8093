/* Reference counts of storages and tensors (see tensor.h). */
#include "demo_trainer/tensor.h"

#include "demo_trainer/autograd.h"

long dt_live_tensors, dt_live_storages;

dt_storage *storage_wrap(void *ptr, size_t bytes, dt_mem_kind kind) {
    dt_storage *s = malloc(sizeof *s);
    if (!s) DT_FATAL("out of host memory");
    *s = (dt_storage){.ptr = ptr, .bytes = bytes, .refs = 1, .kind = kind};
    dt_live_storages++;
    return s;
}

dt_storage *storage_retain(dt_storage *s) {
    if (s) s->refs++;
    return s;
}

void storage_release(dt_storage *s) {
    if (!s) return;
    if (s->refs <= 0) DT_FATAL("storage released once too often");
    if (--s->refs) return;
    dev_release(s->ptr, s->bytes, s->kind);
    free(s);
    dt_live_storages--;
}

dt_tensor *tensor_wrap(dt_storage *st, kernels_dtype dt, int B, int T, int C) {
    dt_tensor *t = malloc(sizeof *t);
    if (!t) DT_FATAL("out of host memory");
    *t = (dt_tensor){.st = st, .refs = 1, .dt = dt, .B = B, .T = T, .C = C, .numel = (size_t)B * T * C};
    if (tensor_bytes(t) > st->bytes) DT_FATAL("a (%d,%d,%d) tensor on a storage of %zu bytes", B, T, C, st->bytes);
    dt_live_tensors++;
    return t;
}

dt_tensor *tensor_retain(dt_tensor *t) {
    if (t) t->refs++;
    return t;
}

void tensor_release(dt_tensor *t) {
    if (!t) return;
    if (t->refs <= 0) DT_FATAL("tensor released once too often");
    if (--t->refs) return;
    storage_release(t->st);
    ag_node_release(t->grad_fn);
    free(t);
    dt_live_tensors--;
}
