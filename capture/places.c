/*===- places.c - CPU tensors in a CUDA graph -------------------------------===*
 *
 * A graph runs on one device, but code that runs on the GPU makes CPU tensors
 * along the way, and eager accepts them: a factory without device=
 * (torch.arange(3 * block), torch.tensor(head_dim)) whose result is moved to
 * the GPU later (.to(x.device)), or used as a CPU scalar beside CUDA tensors
 * (scores / torch.tensor(d).sqrt(), torch.where(m, x, torch.tensor(0.0))),
 * which eager's TensorIterator takes as a number; a CPU 0-d tensor passed in
 * (a plain tensor attribute, which module.cuda() does not move); x.cpu() of
 * a result returned.  These were graph breaks ("tensors on two devices").
 *
 * Each graph value has a place: the graph's device (inputs on it, factories
 * given its device=, what is computed from those), the host (factories made
 * on the CPU, what is computed from them alone; a 0-d one is a "CPU scalar"),
 * or any (constants and the operand-free ops of the rules' decompositions:
 * they take the place of what they meet).  The graph computes every value on
 * its device; the place is what the traced code and the caller see:
 *   - x.device, x.is_cuda, x.is_cpu of a host value say CPU (rules_ops.c);
 *   - an op mixing the graph's device with a host tensor that is not a CPU
 *     scalar ends the graph there (eager raises: cuda + cpu of shape [3]);
 *     the CPU index tensors of x[idx] and x[idx] = v move to x's device first,
 *     as aten.index and index_put_ move them;
 *   - x.to(device), x.cuda(), x.cpu(), type_as move a value between the two
 *     (a copy in the graph: a new value of the other place);
 *   - an in-place op keeps its tensor's place (the value written moved to it);
 *   - a host value returned or stored is copied to the CPU after the graph
 *     runs (results.c), and a CPU scalar passed in is copied to the device at
 *     each call (compiled.c), its guard requiring a CPU 0-d tensor.
 * In a CPU graph (or one with no device yet) both places are the CPU: a
 * factory without device= no longer fixes the graph's device, so a graph
 * that starts with torch.arange(n) and then reads CUDA inputs is one graph.
 *===----------------------------------------------------------------------===*/
#include <string.h>

#include "capture.h"
#include "rules_util.h"

int trace_place(Trace *t, int value) { return value >= 0 && value < t->cap_places ? t->places[value] : PLACE_ANY; }

void trace_set_place(Trace *t, int value, int place) {
    if (value < 0) return;
    if (value >= t->cap_places) {
        int cap = t->cap_places ? t->cap_places : 256;
        while (cap <= value) cap *= 2;
        uint8_t *grown = PyMem_Realloc(t->places, (size_t)cap);
        if (!grown) return; /* left "any": reported as the graph's device, never mixed wrongly */
        memset(grown + t->cap_places, PLACE_ANY, (size_t)(cap - t->cap_places));
        t->places = grown;
        t->cap_places = cap;
    }
    t->places[value] = (uint8_t)place;
}

static bool host_place(int place) { return place == PLACE_HOST || place == PLACE_HOST_SCALAR; }

bool var_on_host(Trace *t, const Var *x) { return x && x->kind == V_TENSOR && host_place(trace_place(t, x->value)); }

bool var_host_in_device_graph(Trace *t, const Var *x) { return pt2_trace_device() >= 0 && var_on_host(t, x); }

/* x.device: torch.device("cpu") for a host value, else the graph's (new reference) */
PyObject *places_device_object(Trace *t, const Var *x) {
    if (!var_host_in_device_graph(t, x)) return pt2_trace_device_object();
    PyObject *device = pt2_import_attr("torch", "device");
    PyObject *r = device ? PyObject_CallFunction(device, "s", "cpu") : NULL;
    Py_XDECREF(device);
    return r;
}

static int value_rank(Trace *t, int value) {
    int64_t sizes[PT2_MAX_RANK];
    return pt2GraphValueType(t->graph, value, NULL, sizes);
}

/* The place of a host value of this rank: a 0-d one is a CPU scalar. */
static int host_of_rank(int rank) { return rank == 0 ? PLACE_HOST_SCALAR : PLACE_HOST; }

/* The place of what op `op` computes from `operands` (trace_op), or -1 with
 * the trace broken: a host tensor other than a CPU scalar beside values of
 * a CUDA graph's device. */
int places_of_op(Trace *t, const char *op, int n, const int *operands) {
    int host = -1;
    bool device = false, any_host = false;
    for (int i = 0; i < n; ++i) {
        int p = trace_place(t, operands[i]);
        device = device || p == PLACE_DEVICE;
        any_host = any_host || host_place(p);
        if (p == PLACE_HOST && host < 0) host = operands[i];
    }
    if (device && host >= 0 && pt2_trace_device() >= 0) {
        int64_t sizes[PT2_MAX_RANK];
        int rank = pt2GraphValueType(t->graph, host, NULL, sizes);
        char shape[160] = "[";
        for (int d = 0; d < rank; ++d) {
            size_t len = strlen(shape);
            snprintf(shape + len, sizeof shape - len, "%s%lld", d ? ", " : "", (long long)sizes[d]);
        }
        trace_break(t, "a CPU tensor of shape %s] beside cuda:%d tensors in pt2.%s (eager raises: only 0-d CPU tensors "
                    "mix with CUDA ones)", shape, pt2_trace_device(), op);
        return -1;
    }
    return device ? PLACE_DEVICE : any_host ? PLACE_HOST : PLACE_ANY;
}

void places_set_results(Trace *t, int place, int n, const int *results) {
    if (place == PLACE_ANY) return;
    for (int i = 0; i < n; ++i) {
        trace_set_place(t, results[i], place == PLACE_HOST ? host_of_rank(value_rank(t, results[i])) : place);
    }
}

/*--- factories ---------------------------------------------------------------*/

/* A factory's device argument resolved (rules_create.c): where its result
 * goes, applied by rule_apply when the rule returns. */
void places_factory(Trace *t, int place) { t->factory_place = place; }

/* Marks what a factory returned (r, or a tuple's tensors) with its place;
 * values made before the rule (first_new) are not the factory's own: a
 * different place for one of them ends the graph. */
static bool mark(Trace *t, Var *r, int place, int first_new) {
    if (!r) return true;
    if (r->kind == V_TUPLE || r->kind == V_LIST) {
        for (int i = 0; i < r->n_items; ++i) {
            if (!mark(t, r->items[i], place, first_new)) return false;
        }
        return true;
    }
    if (r->kind != V_TENSOR) return true;
    int want = place == PLACE_HOST ? host_of_rank(r->rank) : place;
    if (r->value >= first_new) {
        trace_set_place(t, r->value, want);
        return true;
    }
    /* "any" is reported as the graph's device */
    if (host_place(trace_place(t, r->value)) == host_place(want)) return true;
    return trace_break(t, "internal: a factory's result is a value made before it, on another device"), false;
}

Var *places_mark_factory(Trace *t, Var *r, int saved, int first_new, Var **args, int n_args) {
    int place = t->factory_place;
    t->factory_place = saved;
    if (!r || place < 0) return r;
    if (place == PLACE_LIKE) { /* x.new_zeros(n), torch.zeros_like(x): x's device */
        Var *x = n_args > 0 && args[0]->kind == V_TENSOR ? args[0] : NULL;
        place = !x ? PLACE_ANY : var_on_host(t, x) ? PLACE_HOST : PLACE_DEVICE;
    }
    if (place == PLACE_ANY || pt2_trace_device() == PT2_DEVICE_CPU) return r;
    return mark(t, r, place, first_new) ? r : NULL;
}

/* A number folded at trace time (rules_util.c, fold_numbers) lives where its
 * tensors do: a CPU scalar of numbers alone or of CPU scalars, as eager's
 * torch.div(n, 256) is. */
Var *places_fold_result(Trace *t, Var *r, Var **args, int n) {
    if (!r || r->kind != V_TENSOR) return r;
    bool device = false;
    for (int i = 0; i < n; ++i) device = device || (args[i]->kind == V_TENSOR && !var_on_host(t, args[i]));
    trace_set_place(t, r->value, device ? PLACE_DEVICE : PLACE_HOST_SCALAR);
    return r;
}

/*--- moves between the host and the device -----------------------------------*/

/* x on the host (to_host) or the graph's device: x itself where it is there
 * already, else a copy of it there (its strides preserved, as eager's .to()
 * keeps a dense layout) that is a new value of that place. */
Var *places_move(Trace *t, Var *x, bool to_host) {
    if (!x || x->kind != V_TENSOR) return x;
    if (pt2_trace_device() < 0 || var_on_host(t, x) == to_host) return x; /* "any" is on the device */
    Var *copy = in_memory_format(t, x, NULL, LAYOUT_CLONE);
    if (!copy) return NULL;
    copy->known = x->known;
    trace_set_place(t, copy->value, to_host ? host_of_rank(copy->rank) : PLACE_DEVICE);
    return copy;
}

/* The index of x[index] (a tensor, or a tuple of items) with its CPU index tensors moved to the
 * device where x is there; NULL with the trace broken. */
Var *places_indices_for(Trace *t, Var *x, Var *index) {
    if (!index || var_on_host(t, x) || pt2_trace_device() < 0) return index;
    if (index->kind == V_TENSOR) return places_move(t, index, false);
    if (index->kind != V_TUPLE) return index;
    bool any = false;
    for (int i = 0; i < index->n_items; ++i) any = any || var_on_host(t, index->items[i]);
    if (!any) return index;
    Var *moved = var_new(t, V_TUPLE);
    for (int i = 0; i < index->n_items; ++i) {
        Var *item = places_move(t, index->items[i], false);
        if (!item) return NULL;
        var_push_item(t, moved, item);
    }
    return moved;
}

/* The target of a device argument (x.to(d), x.cuda(d)): 1 the host, 0 the
 * graph's device (fixing a graph with none yet to it), -1 with the trace
 * broken for a device the graph cannot hold. */
int places_target(Trace *t, PyObject *device, const char *what) {
    char name[64];
    int code = pt2_device_code(t, device, name, sizeof name);
    if (code == PT2_DEVICE_CPU) return 1;
    if (code >= 0 && pt2_trace_device() == PT2_DEVICE_UNSET) return pt2_trace_accept_device(t, code, name) ? 0 : -1;
    if (code >= 0 && code == pt2_trace_device()) return 0;
    trace_break(t, "%s: moving to a device other than the graph's (%s)", what, name);
    return -1;
}

/* x.cuda(device=None, non_blocking=False, memory_format=torch.preserve_format),
 * x.cpu(memory_format=torch.preserve_format) */
Var *h_device_move(Trace *t, const RuleEntry *e, Var **args, int n, PyObject *kwn, Var **kwv, int nkw) {
    bool cuda = strcmp(e->op, "cuda") == 0;
    BIND(cuda ? "input, device=None, non_blocking=False, memory_format=None" : "input, memory_format=None");
    Var *x = arg(&b, "input"), *dev = arg(&b, "device"), *format = arg(&b, "memory_format");
    if (!x || x->kind != V_TENSOR) return trace_break(t, "Tensor.%s() of a non-tensor", e->op);
    if (format && !(format->kind == V_CONST && format->obj == Py_None) && memory_format_kind(format) != 3) {
        return trace_break(t, "Tensor.%s(memory_format=...) other than torch.preserve_format", e->op);
    }
    int target = 1;
    if (cuda) {
        if (dev && dev->kind != V_CONST) return trace_break(t, "Tensor.cuda(device=...) not known at trace time");
        PyObject *d = !dev || dev->obj == Py_None ? PyUnicode_FromString("cuda")
                      : PyLong_Check(dev->obj)    ? PyUnicode_FromFormat("cuda:%ld", PyLong_AsLong(dev->obj))
                                                  : Py_NewRef(dev->obj);
        target = d ? places_target(t, d, "Tensor.cuda()") : -1;
        Py_XDECREF(d);
        if (target == 1) return trace_break(t, "Tensor.cuda(device='cpu') (eager raises)");
    }
    if (target < 0) return NULL;
    if (pt2_trace_device() < 0) return x; /* a CPU graph, or none yet: every tensor is on the CPU, x.cpu() is x */
    return places_move(t, x, target == 1);
}
