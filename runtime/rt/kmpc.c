/*===- kmpc.c - libpt2rt: the kernels' OpenMP calls on GNU OpenMP's team ---===*
 *
 * MLIR lowers the kernels' parallel loops (convert-scf-to-openmp, then
 * LLVM's OpenMPIRBuilder) to calls into the LLVM OpenMP runtime's entry
 * points:
 *
 *   __kmpc_global_thread_num   __kmpc_fork_call(loc, 1, outlined, &captured)
 *   __kmpc_for_static_init_8u  __kmpc_for_static_fini   __kmpc_barrier
 *
 * This file serves them on libgomp, the GNU OpenMP runtime, through its
 * GOMP_parallel / GOMP_barrier ABI, so that every thread pool in a PyTorch
 * process is one: torch's own parallel ops, oneDNN's (Debian builds it on
 * OpenMP), libpt2rt's matmul blocks (gcc -fopenmp) and the kernels' loops
 * all run on the libgomp that torch loaded (the dynamic linker reuses a
 * loaded libgomp.so.1 by its soname).  With libomp beside it, as before,
 * each runtime's idle threads spun for up to 200 ms after its last region
 * and took the cores from the other's: a CNN alternating oneDNN
 * convolutions with pt2 loops ran 3-15x slower than eager on 16 cores.
 * Inductor shares torch's libgomp the same way.  Without torch in the
 * process, the system's libgomp serves alone.
 *
 * Semantics follow the LLVM runtime's (openmp/runtime/src/kmp_sched.cpp):
 * static schedules split the iteration space the same way, so results do
 * not depend on which runtime ran them.  The team is libgomp's default:
 * omp_get_max_threads() of the calling thread (torch.set_num_threads, or
 * PT2_NUM_THREADS through runtime/kernel.c).
 *===----------------------------------------------------------------------===*/
#include "internal.h"

#include <omp.h>
#include <stdarg.h>
#include <stdint.h>

/* libgomp's ABI (what gcc emits for `#pragma omp parallel` / `barrier`) */
void GOMP_parallel(void (*fn)(void *), void *data, unsigned num_threads, unsigned flags);
void GOMP_barrier(void);

typedef struct ident ident_t; /* source location: unused */
typedef void (*Microtask)(int32_t *gtid, int32_t *btid, ...);

#define MAX_FORK_ARGS 16

typedef struct Fork {
    Microtask fn;
    int32_t argc;
    void *args[MAX_FORK_ARGS];
    Pt2rtRunStatus *run; /* the forking thread's run: where the members' index checks report (run.c) */
} Fork;

/* Each team member calls the outlined region with its thread number as
 * both ids (libgomp has no global ids; they only come back to this file),
 * reporting to the forking thread's run meanwhile. */
static void run_member(void *data) {
    const Fork *f = data;
    int32_t gtid = omp_get_thread_num(), btid = gtid;
    Pt2rtRunStatus *own_run = pt2rt_current_run;
    pt2rt_current_run = f->run;
    void *const *a = f->args;
    switch (f->argc) {
    case 0: f->fn(&gtid, &btid); break;
    case 1: f->fn(&gtid, &btid, a[0]); break;
    case 2: f->fn(&gtid, &btid, a[0], a[1]); break;
    case 3: f->fn(&gtid, &btid, a[0], a[1], a[2]); break;
    case 4: f->fn(&gtid, &btid, a[0], a[1], a[2], a[3]); break;
    case 5: f->fn(&gtid, &btid, a[0], a[1], a[2], a[3], a[4]); break;
    case 6: f->fn(&gtid, &btid, a[0], a[1], a[2], a[3], a[4], a[5]); break;
    case 7: f->fn(&gtid, &btid, a[0], a[1], a[2], a[3], a[4], a[5], a[6]); break;
    case 8: f->fn(&gtid, &btid, a[0], a[1], a[2], a[3], a[4], a[5], a[6], a[7]); break;
    case 9: f->fn(&gtid, &btid, a[0], a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8]); break;
    case 10: f->fn(&gtid, &btid, a[0], a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8], a[9]); break;
    case 11: f->fn(&gtid, &btid, a[0], a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8], a[9], a[10]); break;
    case 12: f->fn(&gtid, &btid, a[0], a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8], a[9], a[10], a[11]); break;
    case 13: f->fn(&gtid, &btid, a[0], a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8], a[9], a[10], a[11], a[12]); break;
    case 14: f->fn(&gtid, &btid, a[0], a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8], a[9], a[10], a[11], a[12], a[13]); break;
    case 15:
        f->fn(&gtid, &btid, a[0], a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8], a[9], a[10], a[11], a[12], a[13], a[14]);
        break;
    default:
        f->fn(&gtid, &btid, a[0], a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8], a[9], a[10], a[11], a[12], a[13], a[14],
              a[15]);
        break;
    }
    pt2rt_current_run = own_run;
}

PT2RT_EXPORT int32_t __kmpc_global_thread_num(ident_t *loc) {
    (void)loc;
    return omp_get_thread_num();
}

/* The captured values arrive as pointer-sized varargs, as the LLVM runtime
 * reads them; LLVM's OpenMPIRBuilder passes one (a pointer to an aggregate
 * of everything the region uses). */
PT2RT_EXPORT void __kmpc_fork_call(ident_t *loc, int32_t argc, Microtask fn, ...) {
    (void)loc;
    if (argc < 0 || argc > MAX_FORK_ARGS) pt2rt_fatal("OpenMP region with more than 16 captured values (a compiler bug: see runtime/rt/kmpc.c)");
    Fork f = {.fn = fn, .argc = argc, .run = pt2rt_current_run};
    va_list ap;
    va_start(ap, fn);
    for (int32_t i = 0; i < argc; ++i) f.args[i] = va_arg(ap, void *);
    va_end(ap);
    GOMP_parallel(run_member, &f, 0, 0);
}

PT2RT_EXPORT void __kmpc_barrier(ident_t *loc, int32_t gtid) {
    (void)loc;
    (void)gtid;
    GOMP_barrier();
}

PT2RT_EXPORT void __kmpc_for_static_fini(ident_t *loc, int32_t gtid) {
    (void)loc;
    (void)gtid;
}

/* kmp_sched_t values the compiler passes */
enum { SCHED_STATIC_CHUNKED = 33, SCHED_STATIC = 34 };

/* This thread's share of the loop lower..upper (inclusive) by incr:
 * kmp_sch_static (balanced: the first trip % n threads get one more) or
 * kmp_sch_static_chunked (chunks dealt round robin, *stride apart).  T is
 * the bound type, U its unsigned twin, S the signed one. */
#define STATIC_INIT(NAME, T, U, S)                                                                                              \
    PT2RT_EXPORT void NAME(ident_t *loc, int32_t gtid, int32_t schedtype, int32_t *plastiter, T *plower, T *pupper, S *pstride, \
                           S incr, S chunk) {                                                                                   \
        (void)loc;                                                                                                              \
        (void)gtid;                                                                                                             \
        int32_t nth = omp_get_num_threads(), tid = omp_get_thread_num();                                                        \
        if (incr == 0) pt2rt_fatal("OpenMP loop with a zero increment (a compiler bug)");                                      \
        if (incr > 0 ? (*pupper < *plower) : (*plower < *pupper)) { /* no iteration */                                          \
            if (plastiter) *plastiter = 0;                                                                                      \
            *pstride = incr;                                                                                                    \
            return;                                                                                                             \
        }                                                                                                                       \
        U trip = incr == 1    ? (U)(*pupper - *plower) + 1                                                                      \
                 : incr == -1 ? (U)(*plower - *pupper) + 1                                                                      \
                 : incr > 0   ? (U)(*pupper - *plower) / (U)incr + 1                                                            \
                              : (U)(*plower - *pupper) / (U)(-incr) + 1;                                                        \
        if (nth <= 1) {                                                                                                         \
            if (plastiter) *plastiter = 1;                                                                                      \
            *pstride = incr > 0 ? (S)(*pupper - *plower + 1) : -(S)(*plower - *pupper + 1);                                     \
            return;                                                                                                             \
        }                                                                                                                       \
        if (schedtype == SCHED_STATIC_CHUNKED) {                                                                                \
            if (chunk < 1) chunk = 1;                                                                                           \
            S span = chunk * incr;                                                                                              \
            *pstride = span * nth;                                                                                              \
            *plower = *plower + (T)(span * tid);                                                                                \
            *pupper = *plower + (T)span - (T)incr;                                                                              \
            if (plastiter) *plastiter = (U)tid == ((trip - 1) / (U)chunk) % (U)nth;                                             \
            return;                                                                                                             \
        }                                                                                                                       \
        /* kmp_sch_static and anything else the compiler might pass: balanced */                                              \
        if (trip < (U)nth) {                                                                                                    \
            if ((U)tid < trip) {                                                                                                \
                *pupper = *plower = *plower + (T)(tid * incr);                                                                  \
            } else {                                                                                                            \
                *plower = *pupper + (T)incr;                                                                                    \
            }                                                                                                                   \
            if (plastiter) *plastiter = (U)tid == trip - 1;                                                                     \
        } else {                                                                                                                \
            U small = trip / (U)nth, extras = trip % (U)nth, t = (U)tid;                                                        \
            *plower += (T)(incr * (S)(t * small + (t < extras ? t : extras)));                                                  \
            *pupper = *plower + (T)((S)small * incr) - (t < extras ? 0 : (T)incr);                                              \
            if (plastiter) *plastiter = tid == nth - 1;                                                                         \
        }                                                                                                                       \
        *pstride = (S)trip;                                                                                                     \
    }

STATIC_INIT(__kmpc_for_static_init_4, int32_t, uint32_t, int32_t)
STATIC_INIT(__kmpc_for_static_init_4u, uint32_t, uint32_t, int32_t)
STATIC_INIT(__kmpc_for_static_init_8, int64_t, uint64_t, int64_t)
STATIC_INIT(__kmpc_for_static_init_8u, uint64_t, uint64_t, int64_t)
