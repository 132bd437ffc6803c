/* cli.h — pieces shared by the rlx command-line subcommands. */
#ifndef RLX_CLI_H
#define RLX_CLI_H

#include "rlx.h"

#include <stddef.h>

/* Reads a whole file into a NUL-terminated malloc'ed buffer; NULL (and a
 * message on stderr) on failure. */
char *cli_read_file(const char *path, size_t *len);
/* Prints "rlx: error: STATUS: last error" and returns exit code 1. */
int cli_fail(rlx_status st, const char *what);

int cmd_graph(int argc, char **argv);
int cmd_info(int argc, char **argv);
int cmd_train(int argc, char **argv);
int cmd_generate(int argc, char **argv);

#endif
