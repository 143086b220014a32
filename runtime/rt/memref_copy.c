/*===- memref_copy.c - memrefCopy, which lowered memref.copy calls ----------===*
 *
 * finalize-memref-to-llvm turns a memref.copy between identity layouts into
 * llvm.memcpy, and any other copy (a strided slice returned as an output,
 * say) into a call `memrefCopy(elem_size, src, dst)` on unranked
 * descriptors: MLIR's runner-utils library provides it; pt2's kernels get it
 * from libpt2rt instead.
 *===----------------------------------------------------------------------===*/
#include <stdint.h>
#include <stdbool.h>
#include <string.h>

#define PT2RT_EXPORT __attribute__((visibility("default")))

typedef struct UnrankedMemRef {
    int64_t rank;
    void *descriptor; /* {allocated, aligned, offset, sizes[rank], strides[rank]} */
} UnrankedMemRef;

typedef struct RankedView {
    char *aligned;
    int64_t offset;
    const int64_t *sizes, *strides;
} RankedView;

static RankedView view_of(const UnrankedMemRef *m) {
    const int64_t *words = m->descriptor;
    RankedView v;
    memcpy(&v.aligned, &words[1], sizeof v.aligned);
    v.offset = words[2];
    v.sizes = &words[3];
    v.strides = &words[3 + m->rank];
    return v;
}

PT2RT_EXPORT void memrefCopy(int64_t elem_size, UnrankedMemRef *src_arg, UnrankedMemRef *dst_arg) {
    int64_t rank = src_arg->rank;
    RankedView src = view_of(src_arg), dst = view_of(dst_arg);
    int64_t total = 1;
    for (int64_t d = 0; d < rank; ++d) total *= src.sizes[d];
    if (total == 0) return;
    char *s = src.aligned + src.offset * elem_size, *t = dst.aligned + dst.offset * elem_size;
    if (rank == 0) {
        memcpy(t, s, (size_t)elem_size);
        return;
    }
    /* walk the index space with the innermost dimension as a run */
    int64_t index[16] = {0};
    int64_t inner = src.sizes[rank - 1];
    bool inner_contiguous = src.strides[rank - 1] == 1 && dst.strides[rank - 1] == 1;
    for (;;) {
        int64_t so = 0, to = 0;
        for (int64_t d = 0; d < rank - 1; ++d) {
            so += index[d] * src.strides[d];
            to += index[d] * dst.strides[d];
        }
        if (inner_contiguous) {
            memcpy(t + to * elem_size, s + so * elem_size, (size_t)(inner * elem_size));
        } else {
            for (int64_t i = 0; i < inner; ++i) {
                memcpy(t + (to + i * dst.strides[rank - 1]) * elem_size, s + (so + i * src.strides[rank - 1]) * elem_size,
                       (size_t)elem_size);
            }
        }
        int64_t d = rank - 2;
        while (d >= 0 && ++index[d] == src.sizes[d]) index[d--] = 0;
        if (d < 0) break;
    }
}
