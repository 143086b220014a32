/*===- aten_calls.cpp - a pt2.aten's program, run by PyTorch's dispatcher --===*
 *
 * libpt2rt's pt2rt_aten_call (runtime/rt/aten.c) calls the function here,
 * which pt2._C registers (pt2SetCpuAtenKernel) when it loads; a GPU launch
 * plan's aten entry (runtime/gpu_aten.c) calls its twin
 * (pt2GpuSetAtenKernel), which runs the program on the current CUDA device
 * with the plan's stream as the current one.  Each gets the
 * op's description, "<operand types>|<result types>|<program>" (the program
 * as dialects/aten.c gives its syntax), and a table of the kernel's buffers:
 * for each operand, then each result, its data pointer, element offset,
 * sizes and strides.  The operands are wrapped as tensors that do not own
 * them (at::from_blob); each call of the program is looked up in the
 * dispatcher and run boxed with its arguments on the stack, as eager's
 * Python binding would; the tensors the program returns are copied into the
 * result buffers (Tensor.copy_: any strides, one dtype).
 *
 * The description lives in the kernel's constant data (in the launch plan
 * on the GPU); what its parse
 * gives (the operator handles, the types) is kept per description, so a
 * call after the first costs the dispatch alone.  Called without the GIL:
 * the Python dispatch keys are excluded (a TorchDispatchMode of the caller's
 * does not see the calls), as autograd is (the kernels never run under
 * grad).  c10's exceptions come back as the kind eager's binding would
 * raise (LinAlgError for a singular matrix), with their message.
 *===----------------------------------------------------------------------===*/
#include <ATen/core/Tensor.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/LegacyTypeDispatch.h>
#include <ATen/ops/empty_strided.h>
#include <ATen/ops/from_blob.h>
#include <c10/core/StreamGuard.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>
#include <c10/core/impl/LocalDispatchKeySet.h>
#include <c10/util/Exception.h>
#include <c10/util/accumulate.h>

#include <cstdio>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

extern "C" {
#include "pt2.h"
#include "../runtime/rt/pt2rt.h"
}

namespace {

c10::ScalarType scalar_type_of(Pt2DType dt) {
    switch (dt) {
    case PT2_F32: return c10::ScalarType::Float;
    case PT2_F16: return c10::ScalarType::Half;
    case PT2_BF16: return c10::ScalarType::BFloat16;
    case PT2_F64: return c10::ScalarType::Double;
    case PT2_I64: return c10::ScalarType::Long;
    case PT2_I32: return c10::ScalarType::Int;
    case PT2_I16: return c10::ScalarType::Short;
    case PT2_I8: return c10::ScalarType::Char;
    case PT2_U8: return c10::ScalarType::Byte;
    case PT2_BOOL: return c10::ScalarType::Bool;
    default: throw std::runtime_error("pt2.aten: a tensor of no pt2 dtype");
    }
}

/* A dtype argument by torch's name (dfloat32). */
c10::ScalarType scalar_type_named(const std::string &name) {
    static const std::unordered_map<std::string, c10::ScalarType> names = {
        {"float32", c10::ScalarType::Float},     {"float64", c10::ScalarType::Double},       {"float16", c10::ScalarType::Half},
        {"bfloat16", c10::ScalarType::BFloat16}, {"int64", c10::ScalarType::Long},           {"int32", c10::ScalarType::Int},
        {"int16", c10::ScalarType::Short},       {"int8", c10::ScalarType::Char},            {"uint8", c10::ScalarType::Byte},
        {"bool", c10::ScalarType::Bool},         {"complex64", c10::ScalarType::ComplexFloat},
        {"complex128", c10::ScalarType::ComplexDouble}, {"complex32", c10::ScalarType::ComplexHalf}};
    auto it = names.find(name);
    if (it == names.end()) throw std::runtime_error("pt2.aten: unknown dtype " + name);
    return it->second;
}

struct TensorType {
    c10::ScalarType dtype;
    int rank;
    bool skipped;                 /* "_": a result nothing reads, which has no buffer */
    std::vector<int64_t> strides; /* "{5,1}": an operand's layout in the recorded calls (empty: any) */
};

/* "f32[5,5]{5,1};_;i64[]" (dialects/aten.c reads it) */
std::vector<TensorType> parse_types(const std::string &text) {
    Pt2AtenType parsed[PT2_ATEN_MAX_OPERANDS];
    char err[256];
    int n = pt2AtenParseTypes(text.c_str(), parsed, PT2_ATEN_MAX_OPERANDS, err, sizeof err);
    if (n < 0) throw std::runtime_error(std::string("pt2.aten: ") + err);
    std::vector<TensorType> types;
    for (int i = 0; i < n; ++i) {
        const Pt2AtenType &t = parsed[i];
        if (t.skipped) {
            types.push_back({c10::ScalarType::Float, 0, true, {}});
        } else {
            types.push_back({scalar_type_of(t.dtype), t.rank, false, {t.strides, t.strides + t.n_strides}});
        }
    }
    return types;
}

struct Program {
    std::string desc;
    std::vector<TensorType> operands, results;
    std::unique_ptr<Pt2AtenProgram, void (*)(Pt2AtenProgram *)> parsed{nullptr, pt2AtenProgramFree};
    std::vector<c10::OperatorHandle> ops;
};

std::shared_ptr<Program> parse(const char *desc, size_t len) {
    auto p = std::make_shared<Program>();
    p->desc.assign(desc, len);
    size_t a = p->desc.find('|'), b = a == std::string::npos ? a : p->desc.find('|', a + 1);
    if (b == std::string::npos) throw std::runtime_error("pt2.aten: a description without its types");
    p->operands = parse_types(p->desc.substr(0, a));
    p->results = parse_types(p->desc.substr(a + 1, b - a - 1));
    char err[256];
    p->parsed.reset(pt2AtenProgramParse(p->desc.data() + b + 1, len - b - 1, err, sizeof err));
    if (!p->parsed) throw std::runtime_error(err);
    for (int i = 0; i < p->parsed->n_calls; ++i) {
        const Pt2AtenCall &c = p->parsed->calls[i];
        p->ops.push_back(c10::Dispatcher::singleton().findSchemaOrThrow(c.name, c.overload));
    }
    return p;
}

/* The parse of desc, made once per description (keyed by its address in the kernel's constants, checked by its text). */
std::shared_ptr<Program> program_of(const char *desc, size_t len) {
    static std::mutex mutex;
    static std::unordered_map<const char *, std::shared_ptr<Program>> programs;
    std::lock_guard<std::mutex> lock(mutex);
    auto it = programs.find(desc);
    if (it != programs.end() && it->second->desc.size() == len && std::memcmp(it->second->desc.data(), desc, len) == 0) {
        return it->second;
    }
    auto p = parse(desc, len);
    programs[desc] = p;
    return p;
}

struct Run {
    const Program &prog;
    c10::Device device;
    std::vector<at::Tensor> operands;
    std::vector<std::vector<c10::IValue>> results;

    at::Tensor tensor(const Pt2AtenArg &a) const {
        if (a.kind == PT2_ATEN_OPERAND) return operands.at(static_cast<size_t>(a.i));
        const c10::IValue &v = results.at(static_cast<size_t>(a.i)).at(static_cast<size_t>(a.result));
        return a.element < 0 ? v.toTensor() : v.toTensorList().get(static_cast<size_t>(a.element));
    }

    c10::IValue value(const Pt2AtenArg &a) const {
        switch (a.kind) {
        case PT2_ATEN_OPERAND: case PT2_ATEN_RESULT: return tensor(a);
        case PT2_ATEN_INT: case PT2_ATEN_LAYOUT: case PT2_ATEN_FORMAT: return c10::IValue(a.i);
        case PT2_ATEN_FLOAT: return c10::IValue(a.f);
        case PT2_ATEN_COMPLEX: return c10::IValue(c10::complex<double>(a.f, a.f_imag));
        case PT2_ATEN_BOOL: return c10::IValue(a.i != 0);
        case PT2_ATEN_NONE: return c10::IValue();
        case PT2_ATEN_STR: return c10::IValue(std::string(a.s, static_cast<size_t>(a.len)));
        case PT2_ATEN_DTYPE: return c10::IValue(static_cast<int64_t>(scalar_type_named(std::string(a.s, static_cast<size_t>(a.len)))));
        case PT2_ATEN_DEVICE: return c10::IValue(device);
        case PT2_ATEN_INTS: {
            std::vector<int64_t> v;
            for (int i = 0; i < a.n; ++i) v.push_back(a.items[i].i);
            return c10::IValue(v);
        }
        case PT2_ATEN_FLOATS: {
            std::vector<double> v;
            for (int i = 0; i < a.n; ++i) v.push_back(a.items[i].f);
            return c10::IValue(v);
        }
        case PT2_ATEN_BOOLS: {
            c10::List<bool> v;
            for (int i = 0; i < a.n; ++i) v.push_back(a.items[i].i != 0);
            return c10::IValue(v);
        }
        case PT2_ATEN_TENSORS: {
            c10::List<at::Tensor> v;
            for (int i = 0; i < a.n; ++i) v.push_back(tensor(a.items[i]));
            return c10::IValue(v);
        }
        case PT2_ATEN_OPTIONAL_TENSORS: {
            c10::List<std::optional<at::Tensor>> v;
            for (int i = 0; i < a.n; ++i) {
                v.push_back(a.items[i].kind == PT2_ATEN_NONE ? std::optional<at::Tensor>() : std::optional<at::Tensor>(tensor(a.items[i])));
            }
            return c10::IValue(v);
        }
        }
        throw std::runtime_error("pt2.aten: an argument of unknown kind");
    }
};

/* The table's next tensor of type t on device: pointer, offset, sizes, strides.  One of no elements is a
 * fresh empty tensor: its pointer (NULL, or a host address for an empty buffer) is nothing from_blob may
 * check against the device. */
at::Tensor wrap(const int64_t *&table, const TensorType &t, c10::Device device) {
    char *data = reinterpret_cast<char *>(static_cast<intptr_t>(table[0]));
    int64_t offset = table[1];
    c10::IntArrayRef sizes(table + 2, static_cast<size_t>(t.rank)), strides(table + 2 + t.rank, static_cast<size_t>(t.rank));
    table += 2 + 2 * t.rank;
    at::TensorOptions options = at::TensorOptions().dtype(t.dtype).device(device);
    if (c10::multiply_integers(sizes) == 0) return at::empty_strided(sizes, strides, options);
    return at::from_blob(data + offset * static_cast<int64_t>(c10::elementSize(t.dtype)), sizes, strides, options);
}

/* Whether x is laid out with these strides (a dim of one element may have any). */
bool same_layout(const at::Tensor &x, const std::vector<int64_t> &strides) {
    for (int64_t d = 0; d < x.dim(); ++d) {
        if (x.size(d) > 1 && x.stride(d) != strides[static_cast<size_t>(d)]) return false;
    }
    return true;
}

void run(const char *desc, size_t len, const int64_t *table, c10::Device device) {
    std::shared_ptr<Program> prog = program_of(desc, len);
    c10::impl::ExcludeDispatchKeyGuard no_python(
        c10::DispatchKeySet({c10::DispatchKey::Python, c10::DispatchKey::PythonTLSSnapshot, c10::DispatchKey::PreDispatch}));
    at::AutoDispatchBelowADInplaceOrView no_autograd;
    Run r{*prog, device, {}, {}};
    for (const TensorType &t : prog->operands) {
        at::Tensor x = wrap(table, t, device);
        if (!t.strides.empty() && !same_layout(x, t.strides)) {
            /* the layout the calls were recorded with, which eager's had: kernels whose results depend on it
             * (vectorized and scalar paths rounding apart) compute what eager's computed */
            x = at::empty_strided(x.sizes(), t.strides, x.options()).copy_(x);
        }
        r.operands.push_back(x);
    }
    std::vector<at::Tensor> outs;
    for (const TensorType &t : prog->results) outs.push_back(t.skipped ? at::Tensor() : wrap(table, t, device));
    const Pt2AtenProgram &p = *prog->parsed;
    for (int c = 0; c < p.n_calls; ++c) {
        std::vector<c10::IValue> stack;
        for (int i = 0; i < p.calls[c].n_args; ++i) stack.push_back(r.value(p.calls[c].args[i]));
        prog->ops[static_cast<size_t>(c)].callBoxed(stack);
        r.results.push_back(std::move(stack));
    }
    for (int j = 0; j < p.n_outputs && j < static_cast<int>(outs.size()); ++j) {
        if (outs[static_cast<size_t>(j)].defined()) outs[static_cast<size_t>(j)].copy_(r.tensor(p.outputs[j]));
    }
}

int report(char *err, size_t cap, const char *what, int kind) {
    size_t n = 0;
    while (what[n] && what[n] != '\n') ++n;
    snprintf(err, cap, "%.*s", static_cast<int>(n), what);
    return kind;
}

/* f's exceptions as the kind eager's binding raises (Pt2rtAtenErrorKind) with the message in err; 0 if none. */
template <typename F>
int guarded(F f, char *err, size_t cap) {
    try {
        f();
        return 0;
    } catch (const c10::LinAlgError &e) {
        return report(err, cap, e.what_without_backtrace(), PT2RT_ATEN_LINALG);
    } catch (const c10::IndexError &e) {
        return report(err, cap, e.what_without_backtrace(), PT2RT_ATEN_INDEX);
    } catch (const c10::ValueError &e) {
        return report(err, cap, e.what_without_backtrace(), PT2RT_ATEN_VALUE);
    } catch (const c10::TypeError &e) {
        return report(err, cap, e.what_without_backtrace(), PT2RT_ATEN_TYPE);
    } catch (const c10::NotImplementedError &e) {
        return report(err, cap, e.what_without_backtrace(), PT2RT_ATEN_NOT_IMPLEMENTED);
    } catch (const c10::Error &e) {
        return report(err, cap, e.what_without_backtrace(), PT2RT_ATEN_RUNTIME);
    } catch (const std::exception &e) {
        return report(err, cap, e.what(), PT2RT_ATEN_RUNTIME);
    } catch (...) {
        return report(err, cap, "pt2.aten: an unknown C++ exception", PT2RT_ATEN_RUNTIME);
    }
}

int aten_call(const char *desc, size_t len, const int64_t *table, char *err, size_t cap) {
    return guarded([&] { run(desc, len, table, c10::Device(c10::DeviceType::CPU)); }, err, cap);
}

/* On the GPU: the current CUDA device, the plan's stream as its current stream (c10's id of a stream made
 * outside PyTorch is its CUstream; 0 the default stream), so that the kernels and the caching allocator's
 * blocks go with the plan's launches. */
int gpu_aten_call(const char *desc, size_t len, const int64_t *table, void *stream, char *err, size_t cap) {
    return guarded(
        [&] {
            c10::DeviceIndex index = c10::impl::getDeviceGuardImpl(c10::DeviceType::CUDA)->getDevice().index();
            c10::Device device(c10::DeviceType::CUDA, index);
            c10::StreamGuard on_stream(
                c10::Stream(c10::Stream::UNSAFE, device, static_cast<c10::StreamId>(reinterpret_cast<intptr_t>(stream))));
            run(desc, len, table, device);
        },
        err, cap);
}

} // namespace

extern "C" void pt2_aten_calls_register(void) {
    pt2GpuSetAtenKernel(gpu_aten_call);
    Pt2rtAtenFn fn = aten_call;
    void *p;
    static_assert(sizeof p == sizeof fn, "a function pointer held as a void pointer");
    std::memcpy(&p, &fn, sizeof p);
    pt2SetCpuAtenKernel(p);
}
