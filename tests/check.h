/* check.h — the tiny assertion harness of the C unit tests. */
#ifndef RLX_CHECK_H
#define RLX_CHECK_H

#include <stdio.h>
#include <string.h>

static int check_passed, check_failed;

#define CHECK(cond, ...)                                              \
  do {                                                                \
    if (cond) {                                                       \
      check_passed++;                                                 \
    } else {                                                          \
      check_failed++;                                                 \
      printf("FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond);          \
      printf(__VA_ARGS__);                                            \
      printf("\n");                                                   \
    }                                                                 \
  } while (0)

/* Status equals want and rlx_last_error() contains every needle. */
#define CHECK_ERR(st, want, ...)                                               \
  do {                                                                         \
    rlx_status st_ = (st);                                                     \
    const char *needles_[] = {__VA_ARGS__, NULL};                              \
    int ok_ = st_ == (want);                                                   \
    for (int i_ = 0; ok_ && needles_[i_]; i_++)                                \
      ok_ = strstr(rlx_last_error(), needles_[i_]) != NULL;                    \
    CHECK(ok_, "status %s (want %s), message \"%s\"", rlx_status_name(st_),    \
          rlx_status_name(want), rlx_last_error());                            \
  } while (0)

static int check_report(void) {
  printf("%d passed, %d failed\n", check_passed, check_failed);
  return check_failed ? 1 : 0;
}

#endif
