/*===- run.c - libpt2rt: a kernel's run and the index errors it reports -----===*
 *
 * A kernel cannot raise: pt2-lower's index checks (passes/lower.c) clamp an
 * index out of range and call pt2rt_index_error on that branch, which
 * records the first such report of the run in the caller's Pt2rtRunStatus;
 * runtime/kernel.c turns it into the error eager PyTorch raises once the
 * run is over.  The status is found through a thread-local pointer that
 * pt2rt_run sets on the calling thread and __kmpc_fork_call (kmpc.c) copies
 * to every member of the teams the kernel forks, so that concurrent runs (two
 * Python threads calling compiled code) never see each other's reports.
 *===----------------------------------------------------------------------===*/
#include "internal.h"

_Thread_local Pt2rtRunStatus *pt2rt_current_run;

PT2RT_EXPORT void pt2rt_run(void (*entry)(void **), void **argv, Pt2rtRunStatus *status) {
    Pt2rtRunStatus *outer = pt2rt_current_run; /* a kernel's run never nests today; restoring costs nothing */
    pt2rt_current_run = status;
    entry(argv);
    pt2rt_current_run = outer;
}

PT2RT_EXPORT void pt2rt_index_error(int64_t value, int64_t size, int64_t dim, int32_t error) {
    Pt2rtRunStatus *status = pt2rt_current_run;
    if (!status) return;
    /* the first reporter claims the status; the team's join orders its
     * writes before the caller reads them */
    int32_t unclaimed = 0;
    if (!__atomic_compare_exchange_n(&status->failed, &unclaimed, 1, false, __ATOMIC_RELAXED, __ATOMIC_RELAXED)) return;
    status->error = error;
    status->value = value;
    status->size = size;
    status->dim = dim;
}
