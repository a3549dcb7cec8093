/* The live status file's place and its process's identity (live_file.h). */
#include "util/live_file.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

void ca_live_dir(const char *xdg, unsigned uid, char *buf, size_t n) {
    struct stat st;
    if (xdg && *xdg == '/' && stat(xdg, &st) == 0 && S_ISDIR(st.st_mode) && st.st_uid == uid)
        snprintf(buf, n, "%s/cudalloc", xdg);
    else
        snprintf(buf, n, "/tmp/cudalloc-%u", uid);
}

unsigned long long ca_proc_start_ticks(long pid) {
    char path[64], buf[1024];
    if (pid) snprintf(path, sizeof path, "/proc/%ld/stat", pid);
    else snprintf(path, sizeof path, "/proc/self/stat");
    FILE *f = fopen(path, "r");
    if (!f) return 0;
    size_t len = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[len] = 0;
    const char *p = strrchr(buf, ')'); /* the command name may hold spaces and parentheses */
    for (int field = 2; p && *p && field < 22; p++)
        if (*p == ' ') field++;
    return p ? strtoull(p, NULL, 10) : 0;
}
