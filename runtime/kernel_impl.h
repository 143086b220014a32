/*===- kernel_impl.h - the compiled kernel object, inside libpt2 ----------===*
 *
 * Pt2Kernel as kernel.c makes it (compile, cache, load) and kernel_call.c
 * uses it (accessors, the frozen inputs' prologue and constants, calls).
 *===----------------------------------------------------------------------===*/
#ifndef PT2_RUNTIME_KERNEL_IMPL_H
#define PT2_RUNTIME_KERNEL_IMPL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>

#include "../dialects/catalog.h"
#include "pt2.h"
#include "rt/pt2rt.h"

typedef void (*EntryFn)(void **descriptors);
typedef void (*RunFn)(EntryFn entry, void **descriptors, Pt2rtRunStatus *status);
typedef Pt2rtConstants *(*ConstantsCreateFn)(void);
typedef void (*ConstantsFreeFn)(Pt2rtConstants *c);

struct Pt2Kernel {
    int n_inputs, n_outputs;
    Pt2TensorType *types; /* the signature: inputs then outputs */
    void *handle;
    EntryFn entry;
    RunFn run; /* libpt2rt's pt2rt_run; NULL: the kernel does not link libpt2rt */
    bool from_cache;
    double compile_seconds;
    /* Frozen inputs (pt2.h).  With a prologue, the entry's arguments are the
     * inputs, the prologue's results (`hoisted`), then the outputs. */
    bool *frozen;            /* per input */
    Pt2Kernel *prologue;     /* takes the frozen inputs in order, returns `hoisted` */
    int n_hoisted;
    void **hoisted;          /* owned, allocated when compiled */
    Pt2TensorType *entry_types; /* the entry's arguments: inputs, hoisted, outputs */
    atomic_bool hoisted_ready;
    pthread_mutex_t prologue_lock;
    /* What libpt2rt derives once from the frozen inputs and the prologue's
     * results (a convolution's reordered weights: runtime/rt/constants.c),
     * handed to the runs whose frozen inputs are the ones it was filled from
     * (`frozen_seen`, recorded by the first run since it was emptied); null
     * without frozen inputs or libpt2rt. */
    Pt2rtConstants *constants;
    ConstantsFreeFn constants_clear, constants_destroy;
    void **frozen_seen; /* per frozen input, in order */
    atomic_bool frozen_seen_ready;
};

#endif
