/* hf_folder.h — a Hugging Face model folder (hf_folder.c): config.json
 * parsed, the weights of model.safetensors or of every shard a
 * model.safetensors.index.json names, memory-mapped and looked up by name
 * across the shards, and the folder's other JSON files read on request.
 *
 * A GGUF encoder opens as such a folder too (gguf_bert.c): its files are
 * made up from the metadata (vfiles, found before any on disk) and its
 * tensors found under their Hugging Face names (rename). Internal. */
#ifndef RLX_MODEL_HF_FOLDER_H
#define RLX_MODEL_HF_FOLDER_H

#include "json.h"

typedef struct {
  char *rel, *text;
  size_t len;
} hf_vfile;

typedef struct {
  char *dir;
  char *config_text;
  json_doc config;          /* config.json; token 0 is its object */
  rlx_model_file **shards;
  int n_shards;
  hf_vfile *vfiles;
  int n_vfiles;
  /* A Hugging Face tensor name to the shards' (into out); 0: no such
   * tensor. NULL: the names are the shards'. */
  int (*rename)(const char *name, char *out, size_t cap);
} hf_folder;

/* Opens dir: config.json (an object) and the safetensors weights. */
rlx_status hf_open(const char *dir, hf_folder *out);
void       hf_close(hf_folder *h);
/* A GGUF encoder file (architecture bert) as a folder (gguf_bert.c). */
rlx_status hf_open_gguf(const char *path, hf_folder *out);

/* Tensor name in whichever shard holds it; RLX_ERR_INVALID (message naming
 * the tensor and folder) when none does. */
rlx_status hf_tensor(const hf_folder *h, const char *name, rlx_file_tensor *out);
int        hf_has_tensor(const hf_folder *h, const char *name);

/* rel as a made-up file of the folder: text (malloc'd, NUL-terminated)
 * is the folder's from here on, even on failure. */
rlx_status hf_add_vfile(hf_folder *h, const char *rel, char *text, size_t len);
/* dir/rel (or the made-up rel) read whole, NUL-terminated, into *text. */
rlx_status hf_read_text(const hf_folder *h, const char *rel, char **text, size_t *len);

/* dir/rel read and parsed into *doc (its text in *text, to free after
 * json_free). RLX_ERR_IO when the file does not exist, which callers of
 * optional files test with hf_exists first. */
rlx_status hf_read_json(const hf_folder *h, const char *rel, char **text, json_doc *doc);
int        hf_exists(const hf_folder *h, const char *rel);
/* dir/rel into *path (malloc'd). */
char      *hf_path(const hf_folder *h, const char *rel);

/* config.json fields: an integer in [lo, hi] (def when absent; a present
 * field of the wrong type or range is RLX_ERR_FORMAT naming it), a number,
 * a string (NULL when absent). */
rlx_status hf_config_int(const hf_folder *h, const char *key, int64_t lo, int64_t hi, int64_t def, int64_t *out);
rlx_status hf_config_num(const hf_folder *h, const char *key, double def, double *out);
int64_t    hf_config_tok(const hf_folder *h, const char *key);

#endif
