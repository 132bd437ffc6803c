/* ref_script.h — running a reference generator (a Python script the tests
 * compare against) as the shell command "PYTHON" "DIR/SCRIPT" ARGS: its
 * exit status, or what it prints. A script that cannot run here
 * (a package missing) says why and exits REF_SKIP. */
#ifndef RLX_REF_SCRIPT_H
#define RLX_REF_SCRIPT_H

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#define REF_SKIP 77

/* The exit status of a command system() or pclose() waited for; -1 when
 * it did not run or was killed. */
static inline int exit_status(int rc) { return rc != -1 && WIFEXITED(rc) ? WEXITSTATUS(rc) : -1; }

static inline void ref_command(char *cmd, size_t cap, const char *python, const char *dir, const char *script,
                               const char *fmt, va_list ap) {
  int n = snprintf(cmd, cap, "\"%s\" \"%s/%s\" ", python, dir, script);
  if (n >= 0 && (size_t)n < cap) vsnprintf(cmd + n, cap - (size_t)n, fmt, ap);
}

/* Runs script with the arguments fmt formats; its exit status. A failure
 * other than REF_SKIP is printed with the command. */
static inline int run_ref_script(const char *python, const char *dir, const char *script, const char *fmt, ...) {
  char cmd[16384];
  va_list ap;
  va_start(ap, fmt);
  ref_command(cmd, sizeof cmd, python, dir, script, fmt, ap);
  va_end(ap);
  const int rc = exit_status(system(cmd));
  if (rc != 0 && rc != REF_SKIP) printf("FAIL: %s (exit %d)\n", cmd, rc);
  return rc;
}

/* run_ref_script that keeps the first cap - 1 bytes the script prints in
 * out (NUL-terminated; out may be NULL, the output then dropped). */
static inline int ref_script_output(char *out, size_t cap, const char *python, const char *dir, const char *script,
                                    const char *fmt, ...) {
  char cmd[16384], sink[256];
  va_list ap;
  va_start(ap, fmt);
  ref_command(cmd, sizeof cmd, python, dir, script, fmt, ap);
  va_end(ap);
  if (out && cap) out[0] = 0;
  FILE *p = popen(cmd, "r");
  if (!p) {
    printf("FAIL: %s (did not start)\n", cmd);
    return -1;
  }
  if (out && cap) out[fread(out, 1, cap - 1, p)] = 0;
  while (fread(sink, 1, sizeof sink, p) > 0) {}
  const int rc = exit_status(pclose(p));
  if (rc != 0 && rc != REF_SKIP) printf("FAIL: %s (exit %d)\n", cmd, rc);
  return rc;
}

#endif /* RLX_REF_SCRIPT_H */
