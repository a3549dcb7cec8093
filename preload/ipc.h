/* CUDA IPC of cudalloc's blocks (ipc.c), and how an importer gets an export
 * from its exporter's process (ipc_share.c). */
#ifndef CA_PRELOAD_IPC_H
#define CA_PRELOAD_IPC_H

#include <stdlib.h>
#include <sys/types.h>

#include "preload/preload.h"

enum { CA_IPC_GRANULES = 1, CA_IPC_SEGMENT = 2 };

/* What an export is made of, as the exporter's server answers. */
typedef struct ca_ipc_export_desc {
    int32_t status;         /* CUresult: CUDA_SUCCESS, or why not */
    int32_t kind;           /* CA_IPC_GRANULES (nfds shareable handles) or CA_IPC_SEGMENT */
    int32_t device;
    uint32_t nfds;
    uint64_t offset;        /* of the block in its first granule, or in its segment */
    uint64_t granule;
    CUipcMemHandle segment; /* CA_IPC_SEGMENT: the driver's handle of the segment */
} ca_ipc_export_desc;

/* ipc.c, for the server: the export's description and duplicates of its fds
 * (malloc'd; the caller closes and frees them); NULL with desc->status set
 * when there is no such export (freed since) or the nonce is wrong. */
int *ca_ipc_export_lookup(uint64_t id, uint64_t nonce, ca_ipc_export_desc *desc);

/* The most an exporter and an importer wait for each other, each step. */
#define CA_IPC_TIMEOUT_S 5
/* ipc_share.c: start serving this process's exports (once); 0 when served,
 * with *tag the server's name, which handles carry. */
int ca_ipc_serve(uint64_t *tag);
/* Ask process pid (its server `tag`) for export id: its fds (malloc'd,
 * desc->nfds of them) or NULL with desc->status saying why. */
int *ca_ipc_fetch(pid_t pid, uint64_t tag, uint64_t id, uint64_t nonce, ca_ipc_export_desc *desc);
void ca_ipc_share_after_fork(void);

#endif
