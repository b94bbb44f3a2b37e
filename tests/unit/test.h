/* A minimal test harness: a suite is one program of TEST functions.
 *
 *   TEST(idx_roundtrip_preserves_tokens) { ... CHECK(a == b, "a=%d", a); ... }
 *   int main(void) { RUN(idx_roundtrip_preserves_tokens); return test_summary("indexed"); }
 *
 * A test passes when none of its CHECKs failed. test_summary() prints
 * "SUITE: N passed, N failed" (tests/run.sh adds these up) and returns the exit code. */
#ifndef PL_TEST_H
#define PL_TEST_H

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int test_passed_, test_failed_, test_cur_failed_;
static const char *test_cur_name_;

#define TEST(name) static void name(void)

#define CHECK(cond, ...)                                                                           \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            test_cur_failed_ = 1;                                                                  \
            fprintf(stderr, "  FAIL %s (%s:%d): %s: ", test_cur_name_, __FILE__, __LINE__, #cond); \
            fprintf(stderr, __VA_ARGS__);                                                          \
            fprintf(stderr, "\n");                                                                 \
        }                                                                                          \
    } while (0)

/* CHECK that a pl_status call succeeded, printing the library's message if not. */
#define CHECK_OK(expr)                                                                             \
    do {                                                                                           \
        pl_status check_st_ = (expr);                                                              \
        CHECK(check_st_ == PL_OK, "%s: %s", pl_status_str(check_st_), pl_error_msg());            \
    } while (0)

#define RUN(name)                                                                                  \
    do {                                                                                           \
        test_cur_name_ = #name;                                                                    \
        test_cur_failed_ = 0;                                                                      \
        name();                                                                                    \
        if (test_cur_failed_) {                                                                    \
            test_failed_++;                                                                        \
            printf("not ok %s\n", #name);                                                          \
        } else {                                                                                   \
            test_passed_++;                                                                        \
            printf("ok %s\n", #name);                                                              \
        }                                                                                          \
        fflush(stdout);                                                                            \
    } while (0)

static inline int test_summary(const char *suite)
{
    printf("%s: %d passed, %d failed\n", suite, test_passed_, test_failed_);
    return test_failed_ ? 1 : 0;
}

/* Directory for scratch files of this test program (created by tests/run.sh). */
static inline const char *test_tmpdir(void)
{
    const char *d = getenv("PLAIT_TEST_TMP");
    return d && *d ? d : "/tmp";
}

/* Path of a fetched data file under data/ (scripts/setup.sh). */
static inline const char *test_datadir(void)
{
    const char *d = getenv("PLAIT_DATA");
    return d && *d ? d : "data";
}

#endif
