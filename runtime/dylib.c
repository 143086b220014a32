/*===- dylib.c - a library opened with dlopen and its table of functions ---===*/
#include "dylib.h"

#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

void *pt2_dylib_open(const char *const *names, int n_names, int dlopen_flags, const Pt2DylibSymbol *symbols, int n_symbols,
                     char *error, size_t error_size) {
    void *lib = NULL;
    const char *loaded = NULL;
    size_t len = (size_t)snprintf(error, error_size, "cannot load");
    for (int i = 0; i < n_names && !lib; ++i) {
        if (!names[i] || !names[i][0]) continue;
        lib = dlopen(names[i], dlopen_flags);
        loaded = names[i];
        if (!lib && len < error_size) len += (size_t)snprintf(error + len, error_size - len, " %s (%s);", names[i], dlerror());
    }
    if (!lib) return NULL;
    for (int i = 0; i < n_symbols; ++i) {
        void *sym = dlsym(lib, symbols[i].name);
        if (!sym && !symbols[i].optional) {
            snprintf(error, error_size, "%s has no %s (too old a version?)", loaded, symbols[i].name);
            return NULL;
        }
        memcpy(symbols[i].slot, &sym, sizeof sym);
    }
    error[0] = 0;
    return lib;
}
