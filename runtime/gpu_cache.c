/*===- gpu_cache.c - the GPU path's disk cache: plans and cubins ----------===*
 *
 * runtime/gpu_kernel.c keeps each compiled graph's launch plan (with a
 * .meta file naming its hash) and each module's cubins, per device and
 * driver, in the cache folder (PT2_CACHE_DIR).  Files are written to a
 * temporary name and renamed over the entry, so a reader sees a whole entry
 * or none; an entry is read only if it is a regular file of this user that
 * no one else can write.
 *===----------------------------------------------------------------------===*/
#include "gpu_cache.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "kernel_shared.h"
#include "pt2.h"

static char *read_whole_file(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    rewind(f);
    char *data = n < 0 ? NULL : malloc((size_t)n + 1);
    if (!data || fread(data, 1, (size_t)n, f) != (size_t)n) {
        free(data);
        data = NULL;
    } else {
        data[n] = 0;
    }
    fclose(f);
    return data;
}

static bool owned_private_file(const char *path) {
    struct stat st;
    return stat(path, &st) == 0 && S_ISREG(st.st_mode) && st.st_uid == getuid() && !(st.st_mode & (S_IWGRP | S_IWOTH));
}

/* Writes data to path atomically (a temporary file renamed over it). */
int pt2_gpu_publish_file(const char *path, const void *data, size_t n) {
    char tmp[4400];
    snprintf(tmp, sizeof tmp, "%s.%d.tmp", path, (int)getpid());
    FILE *f = fopen(tmp, "wb");
    if (!f || fwrite(data, 1, n, f) != n) {
        if (f) fclose(f);
        pt2_set_error("cannot write %s: %s", tmp, strerror(errno));
        return -1;
    }
    fclose(f);
    chmod(tmp, 0600);
    if (rename(tmp, path) != 0) {
        pt2_set_error("cannot publish %s: %s", path, strerror(errno));
        return -1;
    }
    return 0;
}

/* A cache entry is used only if its .meta names the plan's hash. */
char *pt2_gpu_cached_plan(const char *plan_path, const char *meta_path) {
    if (!owned_private_file(plan_path) || !owned_private_file(meta_path)) return NULL;
    char *meta = read_whole_file(meta_path), hash[65];
    bool ok = meta && pt2_kernel_hash_file(plan_path, hash) == 0 && strncmp(meta, hash, 64) == 0;
    free(meta);
    return ok ? read_whole_file(plan_path) : NULL;
}

/* A module's cubins in one cache file: "pt2-cubins <n>" and each size on
 * the first line, then the images back to back. */
int pt2_gpu_read_cubins(const char *path, Pt2Cubin **out, int *out_n) {
    if (!owned_private_file(path)) return -1;
    FILE *f = fopen(path, "rb");
    if (!f) return -1;
    int n = 0;
    Pt2Cubin *c = NULL;
    bool ok = fscanf(f, "pt2-cubins %d", &n) == 1 && n > 0 && n <= 64 && (c = calloc((size_t)n, sizeof *c));
    for (int i = 0; ok && i < n; ++i) ok = fscanf(f, " %zu", &c[i].size) == 1 && c[i].size > 0 && c[i].size < ((size_t)1 << 31);
    ok = ok && fgetc(f) == '\n';
    for (int i = 0; ok && i < n; ++i) ok = (c[i].data = malloc(c[i].size)) && fread(c[i].data, 1, c[i].size, f) == c[i].size;
    ok = ok && fgetc(f) == EOF;
    fclose(f);
    if (!ok) {
        for (int i = 0; c && i < n; ++i) free(c[i].data);
        free(c);
        return -1;
    }
    *out = c;
    *out_n = n;
    return 0;
}

void pt2_gpu_write_cubins(const char *path, const Pt2Cubin *c, int n) {
    size_t bytes = 32 + 24 * (size_t)n;
    for (int i = 0; i < n; ++i) bytes += c[i].size;
    char *buf = malloc(bytes);
    if (!buf) return;
    size_t at = (size_t)snprintf(buf, bytes, "pt2-cubins %d", n);
    for (int i = 0; i < n; ++i) at += (size_t)snprintf(buf + at, bytes - at, " %zu", c[i].size);
    buf[at++] = '\n';
    for (int i = 0; i < n; ++i) {
        memcpy(buf + at, c[i].data, c[i].size);
        at += c[i].size;
    }
    pt2_gpu_publish_file(path, buf, at); /* a cache that cannot be written is not an error */
    free(buf);
}

