/* preload/users.c alone (Check): a holder never overlaps a user of the
 * device, with the users' fence left to the holder's membarrier(2) and with
 * each use fencing itself (membarrier:false); nested uses, and a use that
 * spans its own thread's hold, leave no mark behind that would keep a later
 * holder waiting. Each test runs in its own process (CK_FORK): the fence is
 * chosen once a process (ca_users_init). */
#include <check.h>
#include <linux/membarrier.h>
#include <pthread.h>
#include <stdatomic.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "preload/preload.h"
#include "tests/check_run.h"

static ca_device dev;

static void make_device(int ordinal) {
    pthread_mutexattr_t recursive;
    pthread_mutexattr_init(&recursive);
    pthread_mutexattr_settype(&recursive, PTHREAD_MUTEX_RECURSIVE);
    pthread_mutex_init(&dev.hold_lock, &recursive);
    dev.ordinal = ordinal;
    dev.bit = (uint64_t)1 << ordinal;
}

static bool kernel_has_membarrier(void) {
    long cmds = syscall(SYS_membarrier, MEMBARRIER_CMD_QUERY, 0, 0);
    return cmds > 0 && (cmds & MEMBARRIER_CMD_PRIVATE_EXPEDITED);
}

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

/* Users: each marks itself inside (a relaxed store on a line of its own, no
 * fence of its own) and looks, for a while, whether the holder is in. The
 * holder: once held, looks whether any user is inside. */
#define USERS 3
static struct {
    _Alignas(64) atomic_int inside;
} marks[USERS];
static atomic_int holder_in, stop;
static atomic_long overlaps, uses, holds;

static void *user_loop(void *arg) {
    atomic_int *inside = &marks[(long)arg].inside;
    while (!atomic_load_explicit(&stop, memory_order_relaxed)) {
        ca_device_use(&dev);
        atomic_store_explicit(inside, 1, memory_order_relaxed);
        for (int i = 0; i < 20; i++)
            if (atomic_load_explicit(&holder_in, memory_order_relaxed)) atomic_fetch_add(&overlaps, 1);
        atomic_store_explicit(inside, 0, memory_order_relaxed);
        ca_device_done(&dev);
        atomic_fetch_add_explicit(&uses, 1, memory_order_relaxed);
    }
    return NULL;
}

static void race(bool membarrier, double seconds) {
    ca_conf.membarrier = membarrier;
    ca_users_init();
    make_device(3);
    ck_assert(ca_users_asymmetric() == (membarrier && kernel_has_membarrier()));
    pthread_t t[USERS];
    for (long i = 0; i < USERS; i++) pthread_create(&t[i], NULL, user_loop, (void *)i);
    for (double end = now() + seconds; now() < end;) {
        ca_device_hold(&dev);
        atomic_store_explicit(&holder_in, 1, memory_order_relaxed);
        for (int k = 0; k < 50; k++)
            for (int i = 0; i < USERS; i++)
                if (atomic_load_explicit(&marks[i].inside, memory_order_relaxed)) atomic_fetch_add(&overlaps, 1);
        atomic_store_explicit(&holder_in, 0, memory_order_relaxed);
        ca_device_unhold(&dev);
        holds++; /* and again at once: a missing fence shows only under holds this close */
    }
    atomic_store(&stop, 1);
    for (int i = 0; i < USERS; i++) pthread_join(t[i], NULL);
    ck_assert_msg(overlaps == 0, "%ld overlaps of a holder and a user (%ld holds, %ld uses)", (long)overlaps,
                  (long)holds, (long)uses);
    ck_assert_msg(holds > 100 && uses > 1000, "too little raced: %ld holds, %ld uses", (long)holds, (long)uses);
}

START_TEST(a_holder_never_overlaps_a_user_fenced_by_membarrier)
{
    race(true, 1.5);
}
END_TEST

START_TEST(a_holder_never_overlaps_a_user_fencing_itself)
{
    race(false, 1.5);
}
END_TEST

/* Another thread holds the device: it must not wait on marks left behind. */
static atomic_int held_by_other;
static void *hold_once(void *arg) {
    ca_device_hold(&dev);
    ca_device_unhold(&dev);
    atomic_store(&held_by_other, 1);
    return NULL;
}

static void another_thread_can_hold(void) {
    atomic_store(&held_by_other, 0);
    pthread_t t;
    pthread_create(&t, NULL, hold_once, NULL);
    for (int i = 0; i < 2000 && !atomic_load(&held_by_other); i++) usleep(1000);
    ck_assert_msg(atomic_load(&held_by_other), "another thread waits on a use that ended");
    pthread_join(t, NULL);
}

START_TEST(nested_uses_and_a_use_across_a_hold_leave_no_mark)
{
    ca_conf.membarrier = _i;
    ca_users_init();
    make_device(5);
    ca_device_use(&dev); /* nested */
    ca_device_use(&dev);
    ca_device_done(&dev);
    ca_device_done(&dev);
    another_thread_can_hold();
    ca_device_use(&dev); /* the thread holds the device while inside a use, which ends first */
    ca_device_hold(&dev);
    ca_device_use(&dev);
    ca_device_done(&dev);
    ca_device_done(&dev);
    ca_device_unhold(&dev);
    another_thread_can_hold();
    ca_device_hold(&dev); /* uses inside a (recursive) hold */
    ca_device_hold(&dev);
    ca_device_use(&dev);
    ca_device_unhold(&dev);
    ca_device_done(&dev);
    ca_device_unhold(&dev);
    another_thread_can_hold();
    ca_device_use(&dev); /* and a plain use again */
    ca_device_done(&dev);
    another_thread_can_hold();
}
END_TEST

int main(void) {
    Suite *s = suite_create("users");
    TCase *tc = tcase_create("users");
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, a_holder_never_overlaps_a_user_fenced_by_membarrier);
    tcase_add_test(tc, a_holder_never_overlaps_a_user_fencing_itself);
    tcase_add_loop_test(tc, nested_uses_and_a_use_across_a_hold_leave_no_mark, 0, 2);
    suite_add_tcase(s, tc);
    return ca_check_run(s);
}
