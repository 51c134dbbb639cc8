/* The checks shared by the tests of tests/kernels: CHECK counts a failure and reports it
 * (FAIL file:line: message, on stdout) and goes on; OK stops the test at a call that does not
 * return GDTE_OK. Header-only: each test is one executable, and reads `failures` at its end. */
#ifndef GDTE_TESTS_KERNELS_CHECK_H
#define GDTE_TESTS_KERNELS_CHECK_H
#include <stdio.h>
#include <stdlib.h>
#include "gdte.h"

static int failures;
#define CHECK(cond, ...)                                                                           \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            failures++;                                                                            \
            printf("FAIL %s:%d: ", __FILE__, __LINE__);                                            \
            printf(__VA_ARGS__);                                                                   \
            printf("\n");                                                                          \
        }                                                                                          \
    } while (0)
#define OK(call)                                                                                   \
    do {                                                                                           \
        gdte_status_t st_ = (call);                                                                \
        if (st_ != GDTE_OK) {                                                                      \
            printf("FAIL %s:%d: %s: %s\n", __FILE__, __LINE__, #call, gdte_status_string(st_));   \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)

#endif
