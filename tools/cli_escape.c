/* cli_escape.c — text from a file, made safe to print: every name or string
 * the CLI prints from a model file, graph or library message goes through
 * here, so that a file cannot send the terminal control sequences (clear
 * the screen, retitle the window) or break a line's layout. Control bytes,
 * DEL and invalid UTF-8 print as \xNN (\n, \t, \r as such); valid UTF-8
 * prints as it is. */
#include "cli.h"

#include <string.h>

/* Length of a UTF-8 sequence from its lead byte; 0 for a byte that cannot lead. */
static int utf8_len(unsigned char c) {
  return c < 0x80 ? 1 : c >= 0xc2 && c <= 0xdf ? 2 : c >= 0xe0 && c <= 0xef ? 3 : c >= 0xf0 && c <= 0xf4 ? 4 : 0;
}

int cli_utf8_seq(const unsigned char *s, size_t n) {
  int len = utf8_len(s[0]);
  if (!len || (size_t)len > n) return 0;
  for (int i = 1; i < len; i++)
    if ((s[i] & 0xc0) != 0x80) return 0;
  return len;
}

/* The escaped form of the character at u (n bytes left) in out (at least
 * 5 bytes); returns its length and sets *used to the bytes consumed. */
static size_t escape_one(const unsigned char *u, size_t n, int quoted, char *out, size_t *used) {
  unsigned char c = u[0];
  int l = cli_utf8_seq(u, n);
  *used = 1;
  if (quoted && (c == '"' || c == '\\')) return (size_t)(out[0] = '\\', out[1] = (char)c, 2);
  if (c == '\n') return memcpy(out, "\\n", 2), 2;
  if (c == '\t') return memcpy(out, "\\t", 2), 2;
  if (c == '\r') return memcpy(out, "\\r", 2), 2;
  if (c < 0x20 || c == 0x7f || !l) return (size_t)snprintf(out, 5, "\\x%02x", c);
  memcpy(out, u, (size_t)l);
  *used = (size_t)l;
  return (size_t)l;
}

void cli_put_escaped(FILE *out, const char *s, size_t len, int quoted) {
  const unsigned char *u = (const unsigned char *)s;
  for (size_t i = 0; i < len;) {
    char e[5];
    size_t used, n = escape_one(u + i, len - i, quoted, e, &used);
    fwrite(e, 1, n, out);
    i += used;
  }
}

const char *cli_escape(const char *s, char *buf, size_t cap) {
  const unsigned char *u = (const unsigned char *)s;
  size_t len = strlen(s), w = 0;
  for (size_t i = 0; i < len;) {
    char e[5];
    size_t used, n = escape_one(u + i, len - i, 0, e, &used);
    if (w + n + 4 > cap) { /* room for "..." and the NUL */
      memcpy(buf + w, "...", 3);
      w += 3;
      break;
    }
    memcpy(buf + w, e, n);
    w += n;
    i += used;
  }
  buf[w] = 0;
  return buf;
}

/* A trailing sequence still waiting for continuation bytes is held back:
 * pieces of byte-level tokens split characters. */
size_t cli_utf8_complete(const unsigned char *buf, size_t n) {
  for (size_t back = 1; back <= 3 && back <= n; back++) {
    unsigned char c = buf[n - back];
    if ((c & 0xc0) == 0x80) continue; /* a continuation byte: look further back */
    int len = utf8_len(c);
    return len > (int)back ? n - back : n;
  }
  return n;
}
