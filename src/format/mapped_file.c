#define _DEFAULT_SOURCE /* madvise's MADV_POPULATE_READ, beside the project-wide _POSIX_C_SOURCE */
/* mapped_file.c — read-only private memory maps of model files. */
#include "format.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

/* Files from this size on are mapped at a 2 MiB boundary with huge pages
 * advised: a decode step reads every weight once, and over 4 KiB pages its
 * streams stalled on TLB misses (BENCHMARKS.md); aligned, the page cache
 * can hold and map the file in 2 MiB pages. */
#define HUGE_MAP_MIN ((size_t)2 << 20)

/* The file's first size bytes mapped read-only, private, at a HUGE_MAP_MIN
 * boundary where the address space allows it. */
static void *map_aligned(int fd, size_t size) {
#if defined(MADV_HUGEPAGE) && defined(MAP_ANONYMOUS) && defined(MAP_FIXED)
  const size_t page = (size_t)sysconf(_SC_PAGESIZE);
  if (size >= HUGE_MAP_MIN && size <= SIZE_MAX - 2 * HUGE_MAP_MIN) {
    const size_t len = (size + page - 1) / page * page, span = len + HUGE_MAP_MIN;
    uint8_t *r = mmap(NULL, span, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (r != MAP_FAILED) {
      uint8_t *a = (uint8_t *)(((uintptr_t)r + HUGE_MAP_MIN - 1) & ~(uintptr_t)(HUGE_MAP_MIN - 1));
      void *p = mmap(a, size, PROT_READ, MAP_PRIVATE | MAP_FIXED, fd, 0);
      if (p == MAP_FAILED) {
        munmap(r, span);
        return p;
      }
      if (a > r) munmap(r, (size_t)(a - r)); /* the reservation's ends */
      munmap(a + len, (size_t)(r + span - (a + len)));
      (void)madvise(p, size, MADV_HUGEPAGE); /* advice: without it the pages stay small */
      return p;
    }
  }
#endif
  return mmap(NULL, size, PROT_READ, MAP_PRIVATE, fd, 0);
}

static rlx_status map_file(const char *path, fmt_mapping *m, int watch) {
  m->data = NULL;
  m->size = 0;
  m->watched = 0;
  m->fd = -1;
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
    void *p = map_aligned(fd, (size_t)st.st_size);
    if (p == MAP_FAILED) {
      status = rlx_set_error(RLX_ERR_IO, "%s: cannot map %lld bytes: %s", path, (long long)st.st_size,
                             strerror(errno));
    } else {
      m->data = p;
      m->size = (size_t)st.st_size;
    }
  }
  if (watch && m->data) {
    m->watched = 1;
    m->fd = fd;
  } else {
    close(fd);  /* the mapping keeps the file */
  }
  return status;
}

rlx_status fmt_map_file(const char *path, fmt_mapping *m) { return map_file(path, m, 0); }
rlx_status fmt_map_file_watched(const char *path, fmt_mapping *m) { return map_file(path, m, 1); }

rlx_status fmt_mapping_check(const fmt_mapping *m, const char *name) {
  struct stat st;
  if (!m->watched || fstat(m->fd, &st) != 0 || (uint64_t)st.st_size >= (uint64_t)m->size) return RLX_OK;
  return rlx_set_error(RLX_ERR_IO,
                       "%s: the file shrank from %zu to %lld bytes while mapped (truncated or rewritten in place); "
                       "its data can no longer be read: reopen it", name, m->size, (long long)st.st_size);
}

void fmt_populate(const void *p, size_t n) {
#ifdef MADV_POPULATE_READ
  const uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE), at = (uintptr_t)p & ~(page - 1);
  if (n) (void)madvise((void *)at, (uintptr_t)p + n - at, MADV_POPULATE_READ);
#else
  (void)p, (void)n;
#endif
}

void fmt_unmap(fmt_mapping *m) {
  if (m->data) munmap((void *)m->data, m->size);
  if (m->watched) close(m->fd);
  m->data = NULL;
  m->size = 0;
  m->watched = 0;
  m->fd = -1;
}
