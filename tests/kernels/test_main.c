/* The kernel unit tests (CPU twin): one runner, a suite per file. */
#include <stdlib.h>

#include "tests/kernels/kt.h"

int main(void) {
    SRunner *sr = srunner_create(kt_suite_bf16());
    srunner_add_suite(sr, kt_suite_adamw());
    srunner_add_suite(sr, kt_suite_forward());
    srunner_add_suite(sr, kt_suite_grad());
    srunner_add_suite(sr, kt_suite_attention());
    srunner_add_suite(sr, kt_suite_mixed());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
