/* test_safetensors.c — the safetensors reader against files written by the
 * PyPI safetensors package (and by hand where its writer is too regular).
 *
 * usage: test_safetensors PYTHON REF_DIR WORK_DIR RLX_BIN
 *
 * Runs REF_DIR/make_safetensors_cases.py --out WORK_DIR, then checks every
 * line of its manifest (format_check.h): the metadata strings and every
 * tensor (dtype, shape, offset, bytes in place, F32/F16/BF16 values through
 * a session that borrows the mapped data) as Python's json module reads
 * the header; every bad file's status and message; every prefix of two
 * valid files; then the API on a safetensors file and `rlx info`.
 */
#include "format_check.h"

static int no_other_lines(char *line, char **save) {
  (void)line, (void)save;
  return 0;
}

static void check_api(void) {
  rlx_model_file *f = NULL;
  if (rlx_model_file_open(work_path("all.safetensors"), &f) != RLX_OK) {
    CHECK(0, "all.safetensors: %s", rlx_last_error());
    return;
  }
  const char *s;
  size_t len;
  uint32_t u32;
  rlx_file_tensor t;
  CHECK(rlx_model_file_format(f) == RLX_FILE_SAFETENSORS && rlx_model_file_version(f) == 0 &&
        rlx_model_file_alignment(f) == 1 && !strcmp(rlx_file_format_name(RLX_FILE_SAFETENSORS), "safetensors"),
        "format");
  CHECK(rlx_meta_get_string(f, "format", &s, &len) == RLX_OK && !strcmp(s, "pt") && len == 2, "format = pt");
  CHECK_ERR(rlx_meta_get_u32(f, "format", &u32), RLX_ERR_DTYPE, "'format' (string) does not convert to u32");
  CHECK_ERR(rlx_meta_get_string(f, "t.f32", &s, &len), RLX_ERR_INVALID, "no metadata key 't.f32'");
  CHECK(rlx_model_file_find_tensor(f, "t.u16", &t) == RLX_OK && !t.supported && t.dtype == RLX_DTYPE_COUNT &&
        !strcmp(t.type_name, "U16") && t.type_code == -1 && t.nbytes == 2 * (size_t)t.numel, "t.u16 is listed, unsupported");
  CHECK(rlx_model_file_find_tensor(f, "t.bf16", &t) == RLX_OK && t.supported && t.dtype == RLX_BF16, "t.bf16");
  CHECK(rlx_model_file_find_tensor(f, "t.rank8", &t) == RLX_OK && t.rank == 8 && t.numel == 16, "rank 8");
  rlx_model_file_close(f);

  const char *needles[] = {"format:      safetensors", "string         \"pt\"",
                           "t.bf16", "U16*", "t.rank8", "[1, 2, 1, 2, 1, 2, 1, 2]", NULL};
  check_info(work_path("all.safetensors"), needles);
}

int main(int argc, char **argv) {
  int st = format_test_main(argc, argv, "make_safetensors_cases.py", no_other_lines);
  if (st) return st;
  check_api();
  CHECK(manifest_files >= 4 && manifest_bad_files >= 40, "only %d files and %d bad files in the manifest",
        manifest_files, manifest_bad_files);
  return check_report();
}
