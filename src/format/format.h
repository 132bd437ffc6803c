/* format.h — internals of the model-file readers (GGUF, safetensors).
 *
 * model_file.c owns the rlx_model_file object: opening (mapping, format
 * detection), the metadata and tensor tables, name lookup, the checks that
 * both formats share (unique names, tensor data inside the file and not
 * overlapping) and every public accessor. gguf.c and safetensors.c only
 * parse: each fills the tables from the bytes, checking every read against
 * the end of the file.
 */
#ifndef RLX_FORMAT_H
#define RLX_FORMAT_H

#include "../ir/ir.h"

#include <stddef.h>
#include <stdint.h>

/* ---------------------------------------------------------------- mapping (mapped_file.c) */

typedef struct {
  const uint8_t *data;   /* NULL for an empty file */
  size_t size;
  int watched, fd;       /* fmt_map_file_watched: the file, kept open to check its size */
} fmt_mapping;

/* Maps a regular file read-only, private. RLX_ERR_IO with a message on failure. */
rlx_status fmt_map_file(const char *path, fmt_mapping *m);
/* The same, keeping the file open so that fmt_mapping_check can tell
 * whether it shrank under the mapping (a read past its new end would be
 * SIGBUS). */
rlx_status fmt_map_file_watched(const char *path, fmt_mapping *m);
/* RLX_ERR_IO naming the file if a watched mapping's file is now shorter
 * than the mapping; RLX_OK otherwise (and for unwatched mappings). */
rlx_status fmt_mapping_check(const fmt_mapping *m, const char *name);
void       fmt_unmap(fmt_mapping *m);
/* Maps the pages of [p, p + n) into the page tables now (advice: where the
 * kernel cannot, they fault in when first read, as before). */
void       fmt_populate(const void *p, size_t n);


/* ---------------------------------------------------------------- the file object */

/* Arrays nested deeper than this are rejected (a bound on the parser's
 * recursion; real files nest at most once). */
#define FMT_MAX_ARRAY_DEPTH 8

typedef struct {
  const char *key;        /* NUL-terminated copy */
  rlx_meta_type type, elem_type;
  uint64_t count;         /* arrays */
  uint64_t pos;           /* GGUF: offset of a scalar, or of an array's first element */
  uint64_t index;         /* arrays of strings or arrays: first entry in elems[] */
  const char *str;        /* strings: NUL-terminated copy of len bytes */
  size_t len;
} fmt_meta;

/* One element of an array whose elements have variable size (strings,
 * arrays): its offset in the file and, for an array of strings or arrays,
 * the first elems[] entry of its own elements. Indexing these at open time
 * makes element access O(1). */
typedef struct {
  uint64_t pos, index;
} fmt_elem;

/* Open-addressing hash index from names to table positions. */
typedef struct {
  int64_t *slots;         /* position + 1; 0 = empty */
  uint64_t mask;
} fmt_index;

typedef struct fmt_chunk fmt_chunk;

struct rlx_model_file {
  rlx_file_format format;
  const char *name;       /* path or "<memory>", for messages */
  const uint8_t *base;
  uint64_t size;
  fmt_mapping map;        /* size 0 when the bytes are borrowed */
  int mapped;
  uint32_t version;
  uint64_t alignment, data_offset;

  fmt_meta *meta;
  int64_t n_meta;
  fmt_elem *elems;
  uint64_t n_elems, cap_elems;
  rlx_file_tensor *tensors;
  int64_t n_tensors;
  fmt_index meta_index, tensor_index;
  fmt_chunk *strings;     /* storage of the NUL-terminated copies */
};

/* Parsers: fill f's tables from f->base / f->size (set by the caller),
 * with each tensor's offset relative to f->data_offset (fmt_finish checks
 * it and makes it absolute). On failure they return the status (the message
 * set) and leave what they allocated in f for rlx_model_file_close. */
rlx_status fmt_gguf_parse(rlx_model_file *f);
rlx_status fmt_safetensors_parse(rlx_model_file *f);

/* A NUL-terminated copy of len bytes owned by f; NULL (and NOMEM set) on failure. */
char *fmt_strdup(rlx_model_file *f, const void *s, size_t len);
/* Reserves n consecutive elems[] entries; returns the first, or UINT64_MAX
 * (NOMEM set). */
uint64_t fmt_reserve_elems(rlx_model_file *f, uint64_t n);

/* The checks both formats share, run after parsing: unique keys and tensor
 * names (building the lookup indexes), and tensor data inside the file
 * (f->data_offset + relative offset + nbytes <= size) without overlaps.
 * Sets each tensor's absolute offset and data pointer. */
rlx_status fmt_finish(rlx_model_file *f);

/* Sets rlx_last_error to "NAME: FORMAT: message" (FORMAT from f->format). */
rlx_status fmt_fail(const rlx_model_file *f, rlx_status st, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;

/* Little-endian reads (the formats are little-endian whatever the host). */
static inline uint16_t fmt_rd16(const uint8_t *p) { return (uint16_t)(p[0] | p[1] << 8); }
static inline uint32_t fmt_rd32(const uint8_t *p) {
  return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}
static inline uint64_t fmt_rd64(const uint8_t *p) { return fmt_rd32(p) | (uint64_t)fmt_rd32(p + 4) << 32; }

/* Bytes of one element of a fixed-size metadata type; 0 for strings, arrays
 * and invalid codes. */
int fmt_meta_type_size(uint32_t t);

#endif /* RLX_FORMAT_H */
