/* Runs a Check suite and gives the test program's exit status. */
#ifndef CA_CHECK_RUN_H
#define CA_CHECK_RUN_H
#include <check.h>
#include <stdlib.h>

static inline int ca_check_run(Suite *s) {
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
#endif
