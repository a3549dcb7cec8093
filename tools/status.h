/* `cudalloc status PID [--json]` and `cudalloc top [-n N] PID`: a running
 * program's live figures, read from the status file its preload rewrites
 * (preload/live.c; reports/write/live.h has the format), with no signal and
 * no pause. Only the program's own user may read them. */
#ifndef CA_TOOLS_STATUS_H
#define CA_TOOLS_STATUS_H

/* argv[0] is "status" or "top"; returns the exit status. */
int ca_status_main(int argc, char **argv);

#endif
