/* hf_folder.c — opening a Hugging Face model folder (hf_folder.h). */
#include "hf_folder.h"

#include "../ir/ir.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

char *hf_path(const hf_folder *h, const char *rel) {
  size_t n = strlen(h->dir) + strlen(rel) + 2;
  char *p = malloc(n);
  if (p) snprintf(p, n, "%s/%s", h->dir, rel);
  return p;
}

static const hf_vfile *vfile(const hf_folder *h, const char *rel) {
  for (int i = 0; i < h->n_vfiles; i++)
    if (!strcmp(h->vfiles[i].rel, rel)) return &h->vfiles[i];
  return NULL;
}

rlx_status hf_add_vfile(hf_folder *h, const char *rel, char *text, size_t len) {
  hf_vfile *v = realloc(h->vfiles, (size_t)(h->n_vfiles + 1) * sizeof *v);
  char *r = malloc(strlen(rel) + 1);
  if (v) h->vfiles = v;
  if (!v || !r) {
    free(text);
    free(r);
    return rlx_set_error(RLX_ERR_NOMEM, "out of memory");
  }
  strcpy(r, rel);
  h->vfiles[h->n_vfiles++] = (hf_vfile){r, text, len};
  return RLX_OK;
}

rlx_status hf_read_text(const hf_folder *h, const char *rel, char **text, size_t *len) {
  const hf_vfile *v = vfile(h, rel);
  *text = NULL;
  *len = 0;
  if (v) {
    if (!(*text = malloc(v->len + 1))) return rlx_set_error(RLX_ERR_NOMEM, "out of memory");
    memcpy(*text, v->text, v->len);
    (*text)[v->len] = 0;
    *len = v->len;
    return RLX_OK;
  }
  char *p = hf_path(h, rel);
  if (!p) return rlx_set_error(RLX_ERR_NOMEM, "out of memory");
  rlx_status st = json_read_file(p, text, len);
  free(p);
  return st;
}

int hf_exists(const hf_folder *h, const char *rel) {
  if (vfile(h, rel)) return 1;
  char *p = hf_path(h, rel);
  struct stat s;
  int ok = p && stat(p, &s) == 0 && S_ISREG(s.st_mode);
  free(p);
  return ok;
}

rlx_status hf_read_json(const hf_folder *h, const char *rel, char **text, json_doc *doc) {
  char *p = hf_path(h, rel);
  size_t len;
  *text = NULL;
  memset(doc, 0, sizeof *doc);
  rlx_status st = p ? hf_read_text(h, rel, text, &len) : rlx_set_error(RLX_ERR_NOMEM, "out of memory");
  if (!st) st = json_parse(*text, len, p, doc);
  if (st) {
    free(*text);
    *text = NULL;
  }
  free(p);
  return st;
}

static rlx_status add_shard(hf_folder *h, const char *rel) {
  char *p = hf_path(h, rel);
  if (!p) return rlx_set_error(RLX_ERR_NOMEM, "out of memory");
  rlx_model_file **s = realloc(h->shards, (size_t)(h->n_shards + 1) * sizeof *s);
  rlx_status st = RLX_OK;
  if (!s) st = rlx_set_error(RLX_ERR_NOMEM, "out of memory");
  else h->shards = s;
  if (!st) st = rlx_model_file_open(p, &h->shards[h->n_shards]);
  if (!st && rlx_model_file_format(h->shards[h->n_shards]) != RLX_FILE_SAFETENSORS) {
    rlx_model_file_close(h->shards[h->n_shards]);
    st = rlx_set_error(RLX_ERR_FORMAT, "%s: not a safetensors file", p);
  }
  if (!st) h->n_shards++;
  free(p);
  return st;
}

/* The distinct files of the index's weight_map, each opened once. A file
 * name must be a plain name inside the folder. */
static rlx_status open_index(hf_folder *h) {
  char *text;
  json_doc d;
  rlx_status st = hf_read_json(h, "model.safetensors.index.json", &text, &d);
  if (st) return st;
  int64_t map = json_get(&d, 0, "weight_map");
  if (json_kind(&d, map) != JSON_OBJECT || d.tok[map].size == 0)
    st = rlx_set_error(RLX_ERR_FORMAT, "%s/model.safetensors.index.json: no weight_map object", h->dir);
  char **seen = NULL;
  int n_seen = 0;
  for (int64_t k = json_first(&d, map); !st && k >= 0 && (uint32_t)k < d.tok[map].next; k = json_next(&d, json_next(&d, k))) {
    char *file = json_strdup(&d, json_next(&d, k), NULL);
    if (!file || !*file || strchr(file, '/') || !strcmp(file, "..")) {
      st = rlx_set_error(RLX_ERR_FORMAT, "%s/model.safetensors.index.json: a weight_map entry is not a file name in the folder",
                         h->dir);
      free(file);
      break;
    }
    int dup = 0;
    for (int i = 0; i < n_seen && !dup; i++) dup = !strcmp(seen[i], file);
    char **ns = dup ? seen : realloc(seen, (size_t)(n_seen + 1) * sizeof *ns);
    if (dup || !ns) {
      free(file);
      if (!ns) st = rlx_set_error(RLX_ERR_NOMEM, "out of memory");
      continue;
    }
    seen = ns;
    seen[n_seen++] = file;
    st = add_shard(h, file);
  }
  for (int i = 0; i < n_seen; i++) free(seen[i]);
  free(seen);
  json_free(&d);
  free(text);
  return st;
}

rlx_status hf_open(const char *dir, hf_folder *out) {
  memset(out, 0, sizeof *out);
  struct stat s;
  if (stat(dir, &s) != 0 || !S_ISDIR(s.st_mode)) return rlx_set_error(RLX_ERR_IO, "%s: not a folder", dir);
  out->dir = malloc(strlen(dir) + 1);
  if (!out->dir) return rlx_set_error(RLX_ERR_NOMEM, "out of memory");
  strcpy(out->dir, dir);
  rlx_status st = hf_exists(out, "config.json") ? hf_read_json(out, "config.json", &out->config_text, &out->config)
                                                : rlx_set_error(RLX_ERR_IO, "%s: no config.json", dir);
  if (!st && json_kind(&out->config, 0) != JSON_OBJECT)
    st = rlx_set_error(RLX_ERR_FORMAT, "%s/config.json: not a JSON object", dir);
  if (!st) {
    if (hf_exists(out, "model.safetensors")) st = add_shard(out, "model.safetensors");
    else if (hf_exists(out, "model.safetensors.index.json")) st = open_index(out);
    else st = rlx_set_error(RLX_ERR_IO, "%s: no model.safetensors or model.safetensors.index.json", dir);
  }
  if (st) hf_close(out);
  return st;
}

void hf_close(hf_folder *h) {
  for (int i = 0; i < h->n_shards; i++) rlx_model_file_close(h->shards[i]);
  free(h->shards);
  for (int i = 0; i < h->n_vfiles; i++) {
    free(h->vfiles[i].rel);
    free(h->vfiles[i].text);
  }
  free(h->vfiles);
  json_free(&h->config);
  free(h->config_text);
  free(h->dir);
  memset(h, 0, sizeof *h);
}

int hf_has_tensor(const hf_folder *h, const char *name) {
  rlx_file_tensor t;
  char own[160];
  if (h->rename && !h->rename(name, own, sizeof own)) return 0;
  if (h->rename) name = own;
  for (int i = 0; i < h->n_shards; i++)
    if (rlx_model_file_find_tensor(h->shards[i], name, &t) == RLX_OK) return 1;
  return 0;
}

rlx_status hf_tensor(const hf_folder *h, const char *name, rlx_file_tensor *out) {
  char own[160];
  const char *find = h->rename && h->rename(name, own, sizeof own) ? own : h->rename ? NULL : name;
  for (int i = 0; find && i < h->n_shards; i++)
    if (rlx_model_file_find_tensor(h->shards[i], find, out) == RLX_OK) return RLX_OK;
  if (find && find != name)
    return rlx_set_error(RLX_ERR_INVALID, "%s: no tensor %s (Hugging Face name %s)", h->dir, find, name);
  return rlx_set_error(RLX_ERR_INVALID, "%s: no tensor %s in the weights", h->dir, name);
}

int64_t hf_config_tok(const hf_folder *h, const char *key) { return json_get(&h->config, 0, key); }

rlx_status hf_config_int(const hf_folder *h, const char *key, int64_t lo, int64_t hi, int64_t def, int64_t *out) {
  int64_t v = hf_config_tok(h, key);
  if (v < 0 || json_kind(&h->config, v) == JSON_NULL) {
    if (def < lo) return rlx_set_error(RLX_ERR_FORMAT, "%s/config.json: no %s", h->dir, key);
    *out = def;
    return RLX_OK;
  }
  if (!json_int(&h->config, v, lo, hi, out))
    return rlx_set_error(RLX_ERR_FORMAT, "%s/config.json: %s is not an integer in [%lld, %lld]", h->dir, key,
                         (long long)lo, (long long)hi);
  return RLX_OK;
}

rlx_status hf_config_num(const hf_folder *h, const char *key, double def, double *out) {
  int64_t v = hf_config_tok(h, key);
  if (v < 0 || json_kind(&h->config, v) == JSON_NULL) {
    *out = def;
    return RLX_OK;
  }
  if (!json_num(&h->config, v, out) || !(*out == *out))
    return rlx_set_error(RLX_ERR_FORMAT, "%s/config.json: %s is not a number", h->dir, key);
  return RLX_OK;
}
