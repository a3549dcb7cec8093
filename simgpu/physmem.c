/* Physical memory for cuMemCreate: ranges of ONE memfd per process (one fd per
 * granule would run into the fd limit). Pages are committed when touched and
 * handed back with fallocate(PUNCH_HOLE) when a handle dies.
 *
 * After fork the child would share the memfd with its parent, and the two would
 * hand out and punch the same ranges. So the child's first VMM call moves its
 * memory to a fresh memfd (copying what is there) and remaps its mappings. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "simgpu/sim.h"

struct extent {
    off_t off;
    size_t size;
};

static int fd = -1;
static off_t fd_end;            /* file size: everything below was handed out once */
static struct extent *holes;    /* free ranges below fd_end, sorted, merged */
static size_t nholes, capholes;
static int forked;              /* set in the child by the atfork handler */

int ca_sim_phys_fd(void)
{
    if (fd < 0)
        fd = memfd_create("simgpu-vmm", MFD_CLOEXEC);
    return fd;
}

int ca_sim_phys_alloc(size_t size, off_t *off)
{
    if (ca_sim_phys_fd() < 0)
        return -1;
    for (size_t i = 0; i < nholes; i++) {
        if (holes[i].size < size)
            continue;
        *off = holes[i].off;
        holes[i].off += (off_t)size;
        holes[i].size -= size;
        if (holes[i].size == 0) {
            memmove(&holes[i], &holes[i + 1], (nholes - i - 1) * sizeof *holes);
            nholes--;
        }
        return 0;
    }
    if (ftruncate(fd, fd_end + (off_t)size) != 0)
        return -1;
    *off = fd_end;
    fd_end += (off_t)size;
    return 0;
}

/* Frees the pages and records the hole; a hole reaching the end shrinks the file.
 * Growing the hole array can fail: the range is then simply never reused. */
void ca_sim_phys_free(off_t off, size_t size)
{
    fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, off, (off_t)size);
    size_t i = 0;
    while (i < nholes && holes[i].off < off)
        i++;
    int joins_prev = i > 0 && holes[i - 1].off + (off_t)holes[i - 1].size == off;
    int joins_next = i < nholes && off + (off_t)size == holes[i].off;
    if (joins_prev && joins_next) {
        holes[i - 1].size += size + holes[i].size;
        memmove(&holes[i], &holes[i + 1], (nholes - i - 1) * sizeof *holes);
        nholes--;
        i--;
    } else if (joins_prev) {
        holes[--i].size += size;
    } else if (joins_next) {
        holes[i].off = off;
        holes[i].size += size;
    } else {
        if (nholes == capholes) {
            size_t cap = capholes ? capholes * 2 : 32;
            struct extent *h = realloc(holes, cap * sizeof *h);
            if (!h)
                return;
            holes = h;
            capholes = cap;
        }
        memmove(&holes[i + 1], &holes[i], (nholes - i) * sizeof *holes);
        holes[i] = (struct extent){off, size};
        nholes++;
    }
    if (holes[i].off + (off_t)holes[i].size == fd_end) {
        fd_end = holes[i].off;
        nholes--;
        /* A failed shrink leaves a longer file whose tail is holes: harmless. */
        (void)!ftruncate(fd, fd_end);
    }
}

/* Runs in the child right after fork: only async-signal-safe work here. */
void ca_sim_phys_after_fork(void)
{
    forked = fd >= 0;
}

/* Copies the data (not the holes) of the old memfd into a new one. */
static int copy_file(int from, int to)
{
    off_t pos = 0;
    char buf[1 << 16];
    for (;;) {
        off_t data = lseek(from, pos, SEEK_DATA);
        if (data < 0)
            return errno == ENXIO ? 0 : -1;
        off_t hole = lseek(from, data, SEEK_HOLE);
        if (hole < 0)
            return -1;
        for (off_t at = data; at < hole;) {
            size_t want = (size_t)(hole - at) < sizeof buf ? (size_t)(hole - at) : sizeof buf;
            ssize_t got = pread(from, buf, want, at);
            if (got <= 0 || pwrite(to, buf, (size_t)got, at) != got)
                return -1;
            at += got;
        }
        pos = hole;
    }
}

/* Called (lock held) by every VMM entry point: 0, or -1 if the child could
 * not get memory of its own. */
int ca_sim_phys_settle(void)
{
    if (!forked)
        return 0;
    int nfd = memfd_create("simgpu-vmm", MFD_CLOEXEC);
    if (nfd < 0 || ftruncate(nfd, fd_end) != 0 || copy_file(fd, nfd) != 0) {
        if (nfd >= 0)
            close(nfd);
        return -1;
    }
    for (size_t i = 0; i < ca_sim.mem.n; i++) {
        struct ca_sim_region *m = &ca_sim.mem.v[i];
        if (m->kind == CA_SIM_MAPPING && m->phys->own_fd < 0) /* a memfd of its own is shared anyway */
            mmap((void *)m->base, m->size, m->prot, MAP_SHARED | MAP_FIXED, nfd,
                 m->phys->off + (off_t)m->phys_off);
    }
    close(fd);
    fd = nfd;
    forked = 0;
    return 0;
}
