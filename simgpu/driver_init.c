/* cuInit and the driver's global state, its lock, and what fork needs. */
#include <stdlib.h>
#include <string.h>

#include "simgpu/sim.h"

struct ca_sim ca_sim = {
    .lock = PTHREAD_MUTEX_INITIALIZER,
    .next_id = 1,
};

void ca_sim_lock(void)
{
    pthread_mutex_lock(&ca_sim.lock);
}

void ca_sim_unlock(void)
{
    pthread_mutex_unlock(&ca_sim.lock);
}

/* Never hold the lock across fork: take it before, release it on both sides. */
static void before_fork(void)
{
    ca_sim_lock();
}

static void after_fork_parent(void)
{
    ca_sim_unlock();
}

/* With CUDALLOC_SIM_FORK=real, a child forked after cuInit cannot use the
 * driver, as on a GPU: every call, cuInit included, answers
 * CUDA_ERROR_NOT_INITIALIZED. */
static int fork_poisoned;

static void after_fork_child(void)
{
    ca_sim_unlock();
    ca_sim_phys_after_fork();
    const char *mode = getenv("CUDALLOC_SIM_FORK");
    if (mode && !strcmp(mode, "real") && __atomic_load_n(&ca_sim.initialized, __ATOMIC_ACQUIRE)) {
        fork_poisoned = 1;
        __atomic_store_n(&ca_sim.initialized, 0, __ATOMIC_RELEASE);
    }
}

__attribute__((constructor)) static void register_fork_handlers(void)
{
    pthread_atfork(before_fork, after_fork_parent, after_fork_child);
}

/* A sticky error (inject.c) answers every call after it, as on a GPU. */
CUresult ca_sim_check_init(void)
{
    return __atomic_load_n(&ca_sim.initialized, __ATOMIC_ACQUIRE) ? ca_sim_sticky()
                                                                   : CUDA_ERROR_NOT_INITIALIZED;
}

/* A malformed environment fails every cuInit: the first one says why. */
CA_EXPORT CUresult cuInit(unsigned int flags)
{
    static int env_state; /* 0 unread, 1 good, -1 bad */
    if (flags != 0)
        return CUDA_ERROR_INVALID_VALUE;
    if (fork_poisoned)
        return CUDA_ERROR_NOT_INITIALIZED;
    ca_sim_lock();
    if (env_state == 0)
        env_state = ca_sim_read_env() == 0 ? 1 : -1;
    if (env_state > 0 && !ca_sim.initialized) {
        for (int d = 0; d < ca_sim.ndev; d++)
            ca_sim.dev[d].primary.device = d;
        __atomic_store_n(&ca_sim.initialized, 1, __ATOMIC_RELEASE);
    }
    ca_sim_unlock();
    return env_state > 0 ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

CA_EXPORT CUresult cuDriverGetVersion(int *version)
{
    if (!version)
        return CUDA_ERROR_INVALID_VALUE;
    *version = ca_sim_driver_version();
    return CUDA_SUCCESS;
}
