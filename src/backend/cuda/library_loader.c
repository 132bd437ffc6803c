/* library_loader.c — opening a CUDA library on first use (library_loader.h). */
#include "library_loader.h"

#include <dlfcn.h>
#include <stdio.h>

int cuda_library_load(const char *soname, const char *what, const cuda_library_symbol *symbols, int n, char *error,
                      size_t cap) {
  /* The loader's search path first, then the toolkit rlx was built with. */
  void *h = dlopen(soname, RTLD_NOW | RTLD_LOCAL);
#ifdef RLX_CUDA_LIBRARY_DIR
  if (!h) {
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", RLX_CUDA_LIBRARY_DIR, soname);
    h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  }
#endif
  if (!h) {
    snprintf(error, cap, "cannot load %s%s%s%s: %s", soname, what ? " (" : "", what ? what : "", what ? ")" : "",
             dlerror());
    return 0;
  }
  for (int i = 0; i < n; i++)
    /* POSIX's way to store dlsym's object pointer into a function pointer:
     * the slot is the function pointer's own storage. */
    if (!(*symbols[i].slot = dlsym(h, symbols[i].name))) {
      snprintf(error, cap, "%s lacks %s", soname, symbols[i].name);
      return 0;
    }
  return 1;
}
