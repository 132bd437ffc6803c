/* mapped_file.c — read-only private memory maps of model files. */
#include "format.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

rlx_status fmt_map_file(const char *path, fmt_mapping *m) {
  m->data = NULL;
  m->size = 0;
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return rlx_set_error(RLX_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
  struct stat st;
  rlx_status status = RLX_OK;
  if (fstat(fd, &st) != 0) {
    status = rlx_set_error(RLX_ERR_IO, "%s: cannot stat: %s", path, strerror(errno));
  } else if (!S_ISREG(st.st_mode)) {
    status = rlx_set_error(RLX_ERR_IO, "%s: not a regular file", path);
  } else if ((uint64_t)st.st_size > SIZE_MAX) {
    status = rlx_set_error(RLX_ERR_IO, "%s: %lld bytes do not fit the address space", path, (long long)st.st_size);
  } else if (st.st_size > 0) {
    /* Pages are read on first touch only: opening a model costs no I/O
     * beyond the header, and weights are never copied. */
    void *p = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
    if (p == MAP_FAILED) {
      status = rlx_set_error(RLX_ERR_IO, "%s: cannot map %lld bytes: %s", path, (long long)st.st_size,
                             strerror(errno));
    } else {
      m->data = p;
      m->size = (size_t)st.st_size;
    }
  }
  close(fd);  /* the mapping keeps the file */
  return status;
}

void fmt_unmap(fmt_mapping *m) {
  if (m->data) munmap((void *)m->data, m->size);
  m->data = NULL;
  m->size = 0;
}
