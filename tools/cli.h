/* cli.h — pieces shared by the rlx command-line subcommands. */
#ifndef RLX_CLI_H
#define RLX_CLI_H

#include "rlx.h"

#include <stddef.h>
#include <stdio.h>

/* Reads a whole file into a NUL-terminated malloc'ed buffer; NULL (and a
 * message on stderr) on failure. */
char *cli_read_file(const char *path, size_t *len);
/* Text from a file made safe to print (cli_escape.c): control bytes, DEL
 * and invalid UTF-8 as \xNN; quoted: '"' and '\\' escaped too. */
void cli_put_escaped(FILE *out, const char *s, size_t len, int quoted);
/* s escaped into buf (cap >= 8 bytes; cut with "..." where it does not fit). */
const char *cli_escape(const char *s, char *buf, size_t cap);
/* UTF-8 (cli_escape.c): the length of the valid sequence at s (n bytes
 * left), or 0; the bytes of buf[0..n) that end on a whole character. */
int cli_utf8_seq(const unsigned char *s, size_t n);
size_t cli_utf8_complete(const unsigned char *buf, size_t n);
/* Prints "rlx: error: STATUS: last error" (escaped) and returns exit code 1. */
int cli_fail(rlx_status st, const char *what);
/* The library's setter of rlx_last_error (src/ir/status.c, exported), for
 * the CLI's own failures: cli_fail then prints a message, never an empty one. */
rlx_status rlx_set_error(rlx_status st, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

/* LLM pieces of rlx generate that rlx serve shares (cmd_generate.c):
 * the default model's path in buf (fetched once with pip when not cached;
 * 0 after a message when it cannot be had); text's tokens (malloc'ed);
 * whether chat text starts with the BOS token's text (tokenizing must not
 * add another); the chat template applied to msgs with the assistant's
 * turn opened (malloc'ed, NUL-terminated). */
int cli_default_model(char *buf, size_t cap);
rlx_status cli_tokenize(const rlx_tokenizer *tok, const char *text, size_t len, int add_special,
                        int parse_special, int32_t **ids, int64_t *n);
int cli_starts_with_bos(const rlx_tokenizer *tok, const char *text, size_t len);
rlx_status cli_chat_text(const rlx_model_file *f, const rlx_chat_message *msgs, int n, char **out, size_t *len);
/* A KV cache type's name (f32, f16, bf16, q8_0, q4_0) as *t; 0 for another. */
int cli_cache_type(const char *name, rlx_dtype *t);

int cmd_graph(int argc, char **argv);
int cmd_info(int argc, char **argv);
int cmd_train(int argc, char **argv);
int cmd_generate(int argc, char **argv);
int cmd_embed(int argc, char **argv);
int cmd_rerank(int argc, char **argv);
int cmd_run(int argc, char **argv);
int cmd_serve(int argc, char **argv); /* serve.c, built with libmicrohttpd and cJSON */
/* rlx info of a model file rlx_model_load reads (ONNX). */
int cmd_model_info(const char *path);

#endif
