/* How an importing process gets what an exported block is made of: a unix
 * socket of the exporter (abstract name "cudalloc-ipc-PID-TAG", TAG random
 * and carried in the handle, so no process can take the name first), served
 * by a thread started at its first export, each importer on a thread of its
 * own so that one that connects and sends nothing delays no other. A request
 * names an export and its nonce; the answer is the export's description,
 * then its file descriptors (SCM_RIGHTS, in batches). Every wait is bounded
 * (CA_IPC_TIMEOUT_S) on both sides, and each side checks the other's
 * credentials: the server answers processes of its user (or root), the
 * importer talks only to the process the handle names, of its user (or
 * root). The server calls no CUDA function: the fds were exported when the
 * handle was made (ipc.c), and are duplicated for each answer. */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
#include <unistd.h>

#include "preload/ipc.h"
#include "preload/log.h"

#define FDS_PER_MESSAGE 64

struct request {
    uint64_t id, nonce;
};

static int listener = -1;
static uint64_t listener_tag;
static pthread_mutex_t start_lock = PTHREAD_MUTEX_INITIALIZER;

static socklen_t address(pid_t pid, uint64_t tag, struct sockaddr_un *a) {
    memset(a, 0, sizeof *a);
    a->sun_family = AF_UNIX;
    int n = snprintf(a->sun_path + 1, sizeof a->sun_path - 1, "cudalloc-ipc-%d-%016llx", (int)pid,
                     (unsigned long long)tag);
    return (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + (size_t)n);
}

/* Every send and receive on s gives up after CA_IPC_TIMEOUT_S (connect too). */
static void bounded(int s) {
    struct timeval tv = {.tv_sec = CA_IPC_TIMEOUT_S};
    setsockopt(s, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    setsockopt(s, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
}

/* The peer's credentials: same user as us, or root; pid, when nonzero, must be it. */
static bool trusted(int s, pid_t pid) {
    struct ucred cred;
    socklen_t len = sizeof cred;
    return getsockopt(s, SOL_SOCKET, SO_PEERCRED, &cred, &len) == 0 && (cred.uid == geteuid() || cred.uid == 0) &&
           (!pid || cred.pid == pid);
}

static int send_fds(int sock, const void *data, size_t len, const int *fds, size_t nfds) {
    char control[CMSG_SPACE(FDS_PER_MESSAGE * sizeof(int))];
    struct iovec iov = {(void *)data, len};
    struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1};
    if (nfds) {
        memset(control, 0, sizeof control);
        msg.msg_control = control;
        msg.msg_controllen = CMSG_SPACE(nfds * sizeof(int));
        struct cmsghdr *c = CMSG_FIRSTHDR(&msg);
        c->cmsg_level = SOL_SOCKET;
        c->cmsg_type = SCM_RIGHTS;
        c->cmsg_len = CMSG_LEN(nfds * sizeof(int));
        memcpy(CMSG_DATA(c), fds, nfds * sizeof(int));
    }
    return sendmsg(sock, &msg, MSG_NOSIGNAL) == (ssize_t)len ? 0 : -1;
}

/* One message; its fds appended to fds[*nfds...] (at most cap). */
static int recv_fds(int sock, void *data, size_t len, int *fds, size_t *nfds, size_t cap) {
    char control[CMSG_SPACE(FDS_PER_MESSAGE * sizeof(int))];
    struct iovec iov = {data, len};
    struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = control, .msg_controllen = sizeof control};
    ssize_t got = recvmsg(sock, &msg, MSG_CMSG_CLOEXEC);
    if (got != (ssize_t)len) return -1;
    for (struct cmsghdr *c = CMSG_FIRSTHDR(&msg); c; c = CMSG_NXTHDR(&msg, c)) {
        if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
        size_t n = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
        int *in = (int *)CMSG_DATA(c);
        for (size_t i = 0; i < n; i++) {
            if (*nfds < cap) fds[(*nfds)++] = in[i];
            else close(in[i]);
        }
    }
    return 0;
}

/* One importer, on a thread of its own. */
static void *answer(void *arg) {
    int sock = (int)(intptr_t)arg;
    struct request rq;
    ca_ipc_export_desc desc = {.status = CUDA_ERROR_INVALID_HANDLE};
    int *fds = NULL;
    bounded(sock);
    if (recv(sock, &rq, sizeof rq, 0) != (ssize_t)sizeof rq) {
        close(sock); /* said nothing in time: nothing to answer */
        return NULL;
    }
    if (!trusted(sock, 0)) {
        desc.status = CUDA_ERROR_NOT_PERMITTED;
    } else {
        fds = ca_ipc_export_lookup(rq.id, rq.nonce, &desc); /* duplicates, ours to close */
    }
    if (send_fds(sock, &desc, sizeof desc, NULL, 0) == 0)
        for (size_t at = 0; at < desc.nfds;) {
            size_t n = desc.nfds - at < FDS_PER_MESSAGE ? desc.nfds - at : FDS_PER_MESSAGE;
            uint32_t count = (uint32_t)n;
            if (send_fds(sock, &count, sizeof count, fds + at, n) != 0) break;
            at += n;
        }
    for (size_t i = 0; fds && i < desc.nfds; i++) close(fds[i]);
    free(fds);
    close(sock);
    return NULL;
}

static void *serve(void *arg) {
    int l = (int)(intptr_t)arg;
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    pthread_attr_setstacksize(&attr, 256 << 10); /* answer() needs little */
    for (;;) {
        int s = accept4(l, NULL, NULL, SOCK_CLOEXEC);
        if (s < 0) {
            if (errno == EINTR || errno == ECONNABORTED) continue;
            if (errno == EMFILE || errno == ENFILE || errno == ENOMEM) { /* short of descriptors: a while */
                usleep(10000);
                continue;
            }
            return NULL;
        }
        pthread_t t;
        if (pthread_create(&t, &attr, answer, (void *)(intptr_t)s) != 0) close(s); /* the importer retries or fails */
    }
}

int ca_ipc_serve(uint64_t *tag) {
    pthread_mutex_lock(&start_lock);
    if (listener < 0) {
        struct sockaddr_un a;
        if (getrandom(&listener_tag, sizeof listener_tag, 0) != sizeof listener_tag)
            listener_tag ^= (uint64_t)(uintptr_t)&a ^ (uint64_t)getpid() << 32;
        socklen_t alen = address(getpid(), listener_tag, &a);
        int l = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
        pthread_t t;
        pthread_attr_t attr;
        pthread_attr_init(&attr);
        pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
        if (l >= 0 && bind(l, (struct sockaddr *)&a, alen) == 0 && listen(l, 16) == 0 &&
            pthread_create(&t, &attr, serve, (void *)(intptr_t)l) == 0)
            listener = l;
        else if (l >= 0)
            close(l);
        pthread_attr_destroy(&attr);
    }
    int ok = listener >= 0 ? 0 : -1;
    *tag = listener_tag;
    pthread_mutex_unlock(&start_lock);
    return ok;
}

int *ca_ipc_fetch(pid_t pid, uint64_t tag, uint64_t id, uint64_t nonce, ca_ipc_export_desc *desc) {
    struct sockaddr_un a;
    socklen_t alen = address(pid, tag, &a);
    struct request rq = {id, nonce};
    int s = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
    int *fds = NULL;
    size_t nfds = 0;
    desc->status = CUDA_ERROR_INVALID_HANDLE; /* the exporter is gone, never served, or not who it should be */
    if (s >= 0) bounded(s);
    if (s < 0 || connect(s, (struct sockaddr *)&a, alen) != 0) {
        if (s >= 0) close(s);
        return NULL;
    }
    if (!trusted(s, pid)) {
        ca_warn("cudaIpcOpenMemHandle: the socket of process %d is held by another process or user: not used",
                (int)pid);
        close(s);
        return NULL;
    }
    if (send(s, &rq, sizeof rq, MSG_NOSIGNAL) != sizeof rq || recv_fds(s, desc, sizeof *desc, NULL, &nfds, 0) != 0) {
        if (errno == EAGAIN || errno == EWOULDBLOCK)
            ca_warn("cudaIpcOpenMemHandle: process %d did not answer within %d s", (int)pid, CA_IPC_TIMEOUT_S);
        close(s);
        desc->status = CUDA_ERROR_INVALID_HANDLE;
        return NULL;
    }
    if (desc->status == CUDA_SUCCESS && desc->nfds && !(fds = calloc(desc->nfds, sizeof *fds)))
        desc->status = CUDA_ERROR_OUT_OF_MEMORY;
    while (desc->status == CUDA_SUCCESS && nfds < desc->nfds) {
        uint32_t count;
        size_t before = nfds;
        if (recv_fds(s, &count, sizeof count, fds, &nfds, desc->nfds) != 0 || nfds - before != count)
            desc->status = CUDA_ERROR_INVALID_HANDLE;
    }
    close(s);
    if (desc->status != CUDA_SUCCESS) {
        for (size_t i = 0; i < nfds; i++) close(fds[i]);
        free(fds);
        return NULL;
    }
    return fds;
}

/* In a forked child: the parent's server is not there. */
void ca_ipc_share_after_fork(void) {
    pthread_mutex_init(&start_lock, NULL);
    if (listener >= 0) close(listener);
    listener = -1;
}
