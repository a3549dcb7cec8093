/* Tiny assertion helpers for whole-program tests: each check prints a line,
 * the program's exit status says whether all passed. */
#ifndef PRELOAD_CHECK_H
#define PRELOAD_CHECK_H
#include <stdio.h>
#include <stdlib.h>

static int check_failures;
#define CHECK(cond, ...)                                                                  \
    do {                                                                                  \
        if (cond) break;                                                                  \
        check_failures++;                                                                 \
        fprintf(stderr, "FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond);                   \
        fprintf(stderr, __VA_ARGS__);                                                     \
        fprintf(stderr, "\n");                                                            \
    } while (0)
#define CHECK_DONE(name)                                                                  \
    do {                                                                                  \
        printf("%s: %s\n", name, check_failures ? "FAILED" : "ok");                      \
        return check_failures ? 1 : 0;                                                    \
    } while (0)
#endif
