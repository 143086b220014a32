"""Tensor metadata on the cache-hit path (capture/tensor_meta.c, capture/tensor_abi.cpp).

Every test runs twice: with the metadata read from torch's TensorImpl (the C++ path, when
pt2._C was built with it) and through Python attributes (pt2._C.tensor_abi(False), what
PT2_TENSOR_ABI=0 selects).  The oracle is torch itself: the tensor's own attributes and eager
results.
"""
import warnings

import pytest
import torch

import pt2
from pt2 import _C

DTYPES = {
    torch.float32: "float32", torch.float16: "float16", torch.bfloat16: "bfloat16", torch.float64: "float64",
    torch.int64: "int64", torch.int32: "int32", torch.int8: "int8", torch.bool: "bool", torch.int16: "int16",
    torch.uint8: "uint8",
}


def _abi_built():
    was = _C.tensor_abi()
    try:
        _C.tensor_abi(True)
    except RuntimeError:
        return False
    _C.tensor_abi(was)
    return True


@pytest.fixture(params=["abi", "attributes"])
def path(request):
    if request.param == "abi" and not _abi_built():
        pytest.skip("pt2._C was built without capture/tensor_abi.cpp")
    was = _C.tensor_abi(request.param == "abi")
    pt2.reset()
    yield request.param
    pt2.reset()
    _C.tensor_abi(was)


def _tensors():
    base = torch.arange(60, dtype=torch.float32).reshape(3, 4, 5)
    cases = {
        "contiguous": base,
        "transposed": base.transpose(0, 2),
        "sliced_with_step": base[:, ::2, 1::2],
        "storage_offset": base[1:, 2:],
        "expanded": torch.randn(4, 1).expand(4, 6),
        "unsqueezed": torch.randn(5)[None, :, None],
        "zero_d": torch.tensor(3.5),
        "no_elements": torch.empty(0, 7),
        "no_elements_offset": torch.empty(5)[5:],
        "rank_8": torch.randn([1, 2, 1, 2, 1, 2, 1, 2]),
        "rank_9": torch.randn([1] * 9),
        "requires_grad": torch.randn(3, requires_grad=True),
        "parameter": torch.nn.Parameter(torch.randn(2, 3)),
        "negative_view": torch.randn(4, dtype=torch.complex64).conj().imag,
        "conjugate_view": torch.randn(4, dtype=torch.complex64).conj(),
        "meta_device": torch.empty(2, 3, device="meta"),
        "uint16": torch.zeros(3, dtype=torch.uint16),
        "complex": torch.zeros(3, dtype=torch.complex64),
    }
    for dt in DTYPES:
        cases[f"dtype_{DTYPES[dt]}"] = torch.ones(2, 3, dtype=dt).t()
    return cases


class Doubling(torch.Tensor):
    """A subclass that could answer metadata in Python: never read through the C++ path."""


def _expected(t):
    rank = t.dim() if t.dim() <= 8 else -1
    dev = t.device
    return {
        "dtype": DTYPES.get(t.dtype, "invalid"),
        "device": -1 if dev.type == "cpu" else dev.index if dev.type == "cuda" else -2,
        "requires_grad": t.requires_grad,
        "neg_view": t.is_neg(),
        "rank": rank,
        "sizes": tuple(t.shape) if rank >= 0 else (),
        "strides": tuple(t.stride()) if rank >= 0 else (),
        "data_ptr": t.data_ptr(),
    }


@pytest.mark.parametrize("name", list(_tensors()))
def test_meta_is_torchs(path, name):
    t = _tensors()[name]
    assert _C._tensor_meta(t) == _expected(t)


def test_meta_of_a_subclass_and_a_non_tensor(path):
    t = torch.randn(3, 2).as_subclass(Doubling)
    assert _C._tensor_meta(t) == _expected(t)
    with pytest.raises(AttributeError):
        _C._tensor_meta(object())


def test_meta_of_a_cuda_tensor(path):
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device")
    t = torch.randn(4, 6, device="cuda")[:, 1:]
    assert _C._tensor_meta(t) == _expected(t)


@pytest.mark.parametrize("dtype", list(DTYPES))
def test_empty_is_a_cpu_tensor_of_the_dtype(path, dtype):
    for shape in [(), (0, 3), (3, 5, 2)]:
        t = _C.empty(shape, dtype)
        assert type(t) is torch.Tensor and t.dtype == dtype and tuple(t.shape) == shape
        assert t.device.type == "cpu" and t.is_contiguous() and not t.requires_grad


def test_outputs_stay_on_the_cpu_under_a_default_device(path):
    def f(x):
        return torch.relu(x * 2 - 1)

    x = torch.randn(5, 3)
    c = pt2.compile(f)
    c(x)
    with torch.device("meta"):  # a default device: factory calls without device= land there
        got = c(x)
    assert got.device.type == "cpu"
    torch.testing.assert_close(got, f(x))


def _calls():
    """(name, function, argument lists): each list is called in turn; eager is the oracle."""
    base = torch.randn(6, 8)

    def add(x, y):
        return x * 2 + y

    def scale(x):
        return torch.sin(x) * 3

    def reduce_(x):
        return x.sum(dim=-1), x.amax()

    return [
        ("non_contiguous", add, [(base.t(), torch.randn(8, 6)), (torch.randn(6, 8).t(), torch.randn(8, 6))]),
        ("storage_offsets", add, [(base[1:], base[:-1]), (base[:-1], base[1:]), (base[2:4], base[3:5])]),
        ("views", add, [(base.view(8, 6), base.reshape(8, 6)), (base[:, ::2], base[:, 1::2])]),
        ("expanded", add, [(torch.randn(6, 1).expand(6, 8), base), (torch.randn(1, 8).expand(6, 8), base)]),
        ("zero_d", scale, [(torch.tensor(0.5),), (torch.tensor(-2.0),), (torch.randn(()),)]),
        ("no_elements", scale, [(torch.empty(0, 4),), (torch.empty(5)[5:],)]),
        ("dtype_change", scale, [(base,), (base.double(),), (base.half(),), (base.bfloat16(),), (base,)]),
        ("int_dtypes", reduce_, [(torch.randint(-9, 9, (3, 5)),), (torch.randint(-9, 9, (3, 5), dtype=torch.int32),),
                                 (torch.randint(-9, 9, (3, 5), dtype=torch.int8),)]),
        ("rank_change", scale, [(torch.randn(3),), (torch.randn(3, 1),), (torch.randn(3),)]),
    ]


@pytest.mark.parametrize("name,fn,arglists", _calls(), ids=[c[0] for c in _calls()])
def test_compiled_matches_eager(path, name, fn, arglists):
    c = pt2.compile(fn)
    for _ in range(2):  # the second round is all cache hits
        for args in arglists:
            got, exp = c(*args), fn(*args)
            torch.testing.assert_close(got, exp, rtol=1e-2 if args[0].dtype in (torch.float16, torch.bfloat16) else 1e-5, atol=1e-2)


def test_same_metadata_is_one_cache_entry(path):
    def f(x, y):
        return x + y

    c = pt2.compile(f)
    for _ in range(5):  # fresh tensors, same metadata: the guard passes every time
        a, b = torch.randn(10, 7)[:, 1:], torch.randn(6)
        torch.testing.assert_close(c(a, b), a + b)
    assert _C.cache_size(f.__code__) == 1


def test_requires_grad_flip_recompiles(path):
    def f(x):
        return x * 3 + 1

    c = pt2.compile(f)
    x = torch.randn(4)
    with torch.no_grad():  # requires_grad inputs are captured outside grad mode
        for t in (x, x.clone().requires_grad_(), x):
            torch.testing.assert_close(c(t), f(t))
    assert _C.cache_size(f.__code__) == 2


def test_subclass_runs_eagerly(path):
    def f(x):
        return x + 1

    c = pt2.compile(f)
    plain = torch.randn(3)
    c(plain)
    sub = plain.as_subclass(Doubling)
    got = c(sub)
    assert type(got) is Doubling
    torch.testing.assert_close(torch.Tensor(got), plain + 1)


def test_negative_view_is_never_read_as_its_memory(path):
    """z.conj().imag is a float view whose values are the negated memory: a cache entry made
    for a plain tensor of the same sizes and strides must not take it."""
    def f(x):
        return x + 1

    z = torch.randn(4, dtype=torch.complex64)
    plain = torch.randn(8)[1::2]  # sizes (4,), strides (2,), like z.conj().imag
    neg = z.conj().imag
    assert neg.is_neg() and neg.stride() == plain.stride()
    c = pt2.compile(f)
    torch.testing.assert_close(c(plain), plain + 1)
    torch.testing.assert_close(c(neg), neg + 1)
    torch.testing.assert_close(c(neg), -z.imag + 1)


def test_meta_device_runs_eagerly(path):
    """No CUDA here: a tensor on another device (meta) is never captured."""
    def f(x):
        return x * 2

    x = torch.empty(3, 4, device="meta")
    got = pt2.compile(f)(x)
    assert got.device.type == "meta" and got.shape == (3, 4)


def _recompile_warning(fn, calls):
    pt2.reset()
    _C.set_recompile_limit(1)
    try:
        c = pt2.compile(fn)
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            for args in calls:
                c(*args)
        return [str(x.message) for x in w if "recompile limit" in str(x.message)]
    finally:
        _C.set_recompile_limit(8)


def test_failed_guard_message_is_the_same_on_both_paths():
    def f(x):
        return x - 1

    calls = [(torch.randn(2, 3),), (torch.randn(3, 2).t(),)]
    messages = {}
    for abi in ([True, False] if _abi_built() else [False]):
        was = _C.tensor_abi(abi)
        try:
            messages[abi] = _recompile_warning(f, calls)
        finally:
            _C.tensor_abi(was)
    for msgs in messages.values():
        assert len(msgs) == 1
        assert "TENSOR_MATCH L['x']: float32, sizes [2, 3], strides [3, 1], requires_grad=False" in msgs[0], msgs[0]
    assert len(set(m[0] for m in messages.values())) == 1
