"""Invalid graph-builder calls raise pt2.Pt2Error naming the op and the
problem (never a crash, never a silently wrong graph)."""
import pytest
import torch

import pt2

F32 = torch.float32


def _graph():
    """A graph with x: f32 [3, 4], w: f32 [5], i: i64 [2, 2]."""
    g = pt2.Graph()
    return g, g.input(F32, (3, 4)), g.input(F32, (5,)), g.input(torch.int64, (2, 2))


# label → (build(g, x, w, i), words the message must contain)
INVALID = {
    "unknown op": (lambda g, x, w, i: g.op("frobnicate", x), ["frobnicate", "unknown"]),
    "too few operands": (lambda g, x, w, i: g.op("add", x), ["pt2.add", "expects 2 operands, got 1"]),
    "too many operands": (lambda g, x, w, i: g.op("neg", x, x), ["pt2.neg", "expects 1 operand, got 2"]),
    "operand to a creation op": (lambda g, x, w, i: g.op("full", x, shape=[2], value=1.0, dtype=F32), ["pt2.full", "0 operands"]),
    "operand not in the graph": (lambda g, x, w, i: g.op("neg", 999), ["pt2.neg", "not a value of this graph"]),
    "negative operand id": (lambda g, x, w, i: g.op("neg", -1), ["pt2.neg", "not a value of this graph"]),
    "float for an i64[] attribute": (lambda g, x, w, i: g.op("sum", x, dims=1.5), ["pt2.sum", "'dims'", "i64 array"]),
    "int for an i64[] attribute": (lambda g, x, w, i: g.op("sum", x, dims=1), ["pt2.sum", "'dims'", "i64 array"]),
    "string for a bool attribute": (lambda g, x, w, i: g.op("sum", x, keepdim="yes"), ["pt2.sum", "'keepdim'", "bool"]),
    "list for an i64 attribute": (lambda g, x, w, i: g.op("softmax", x, dim=[1]), ["pt2.softmax", "'dim'", "integer"]),
    "string for a float attribute": (lambda g, x, w, i: g.op("var", x, correction="a"), ["pt2.var", "'correction'", "float"]),
    "unknown attribute": (lambda g, x, w, i: g.op("sum", x, dimz=[0]), ["pt2.sum", "unknown attribute 'dimz'"]),
    "missing attribute": (lambda g, x, w, i: g.op("softmax", x), ["pt2.softmax", "needs attribute 'dim'"]),
    "missing dtype": (lambda g, x, w, i: g.op("full", shape=[2], value=1.0), ["pt2.full", "'dtype'"]),
    "bad string value": (lambda g, x, w, i: g.op("gelu", x, approximate="fast"), ["pt2.gelu", "approximate"]),
    "inexpressible attribute": (lambda g, x, w, i: g.op("sum", x, dims=object()), ["cannot express attribute"]),
    "shapes do not broadcast": (lambda g, x, w, i: g.op("add", x, w), ["pt2.add", "[3, 4] and [5] do not broadcast"]),
    "matmul contraction": (lambda g, x, w, i: g.op("matmul", x, x), ["pt2.matmul", "contraction sizes differ"]),
    "cat ranks": (lambda g, x, w, i: g.op("cat", x, w, dim=0), ["pt2.cat", "rank"]),
    "cat of 0-d": (lambda g, x, w, i: g.op("cat", g.op("sum", x), g.op("sum", x), dim=0), ["pt2.cat", "0-d"]),
    "reshape element count": (lambda g, x, w, i: g.op("reshape", x, shape=[5, 5]), ["pt2.reshape", "25 elements, the input 12"]),
    "reshape two -1": (lambda g, x, w, i: g.op("reshape", x, shape=[-1, -1]), ["pt2.reshape", "-1"]),
    "expand to a smaller rank": (lambda g, x, w, i: g.op("expand", x, shape=[2]), ["pt2.expand"]),
    "expand a non-1 size": (lambda g, x, w, i: g.op("expand", x, shape=[3, 5]), ["pt2.expand", "cannot expand"]),
    "permute repeats a dim": (lambda g, x, w, i: g.op("permute", x, perm=[0, 0]), ["pt2.permute", "repeated"]),
    "permute misses a dim": (lambda g, x, w, i: g.op("permute", x, perm=[0]), ["pt2.permute"]),
    "pads not in pairs": (lambda g, x, w, i: g.op("pad", x, pads=[1]), ["pt2.pad", "pairs"]),
    "pad crops below zero": (lambda g, x, w, i: g.op("pad", x, pads=[-3, -3]), ["pt2.pad", "negative size"]),
    "select index": (lambda g, x, w, i: g.op("select", x, dim=0, index=5), ["pt2.select", "index 5 out of range"]),
    "slice step": (lambda g, x, w, i: g.op("slice", x, dim=0, start=0, end=2, step=0), ["pt2.slice", "step"]),
    "reduce dim out of range": (lambda g, x, w, i: g.op("sum", x, dims=[3]), ["pt2.sum", "dim 3 out of range"]),
    "reduce dim repeated": (lambda g, x, w, i: g.op("sum", x, dims=[0, -2]), ["pt2.sum", "repeated"]),
    "softmax dim out of range": (lambda g, x, w, i: g.op("softmax", x, dim=5), ["pt2.softmax", "out of range"]),
    "argmax dim out of range": (lambda g, x, w, i: g.op("argmax", x, dim=2), ["pt2.argmax", "out of range"]),
    "index_select float index": (lambda g, x, w, i: g.op("index_select", x, x, dim=0), ["pt2.index_select", "int64/int32"]),
    "index_select 2-d index": (lambda g, x, w, i: g.op("index_select", x, i, dim=0), ["pt2.index_select", "1-d"]),
    "index without index operands": (lambda g, x, w, i: g.op("index", x, dims=[0]), ["pt2.index", "at least 2 operands, got 1"]),
    "index operand count": (lambda g, x, w, i: g.op("index", x, i, dims=[0, 1]), ["pt2.index", "1 index operands for 2 dims"]),
    "index operand types": (lambda g, x, w, i: g.op("index", x, i, g.op("convert", i, dtype=torch.int32), dims=[0, 1]),
                            ["pt2.index", "one type", "operand 2"]),
    "index shapes differ": (lambda g, x, w, i: g.op("index", x, i, g.op("reshape", i, shape=[4]), dims=[0, 1]),
                            ["pt2.index", "one type", "broadcast"]),
    "index dims order": (lambda g, x, w, i: g.op("index", x, i, i, dims=[1, 0]), ["pt2.index", "increasing"]),
    "index dims repeated": (lambda g, x, w, i: g.op("index", x, i, i, dims=[0, -2]), ["pt2.index", "repeated"]),
    "index dim out of range": (lambda g, x, w, i: g.op("index", x, i, dims=[2]), ["pt2.index", "out of range"]),
    "index float index": (lambda g, x, w, i: g.op("index", x, w, dims=[0]), ["pt2.index", "int64/int32"]),
    "gather index rank": (lambda g, x, w, i: g.op("gather", x, g.op("convert", w, dtype=torch.int64), dim=0), ["pt2.gather"]),
    "layer_norm normalized_ndim": (lambda g, x, w, i: g.op("layer_norm", x, w, w, normalized_ndim=3), ["pt2.layer_norm", "normalized_ndim"]),
    "layer_norm weight shape": (lambda g, x, w, i: g.op("layer_norm", x, w, w, normalized_ndim=1), ["pt2.layer_norm", "weight"]),
    "group_norm groups": (lambda g, x, w, i: g.op("group_norm", x, w, w, groups=5), ["pt2.group_norm", "groups"]),
    "batch_norm of 1-d": (lambda g, x, w, i: g.op("batch_norm", w, w, w, w, w), ["pt2.batch_norm", "(N, C, ...)"]),
    "linear weight": (lambda g, x, w, i: g.op("linear", x, g.op("reshape", w, shape=[5, 1])), ["pt2.linear", "weight"]),
    "addmm input shape": (lambda g, x, w, i: g.op("addmm", w, x, g.op("permute", x, perm=[1, 0])), ["pt2.addmm", "broadcast"]),
    "einsum diagonal": (lambda g, x, w, i: g.op("einsum", x, x, equation="ii,ij->ij"), ["pt2.einsum", "repeats", "diagonal"]),
    "einsum implicit output": (lambda g, x, w, i: g.op("einsum", x, x, equation="ij,jk"), ["pt2.einsum", "explicit output"]),
    "einsum ellipsis": (lambda g, x, w, i: g.op("einsum", x, x, equation="...j,jk->...k"), ["pt2.einsum", "letters"]),
    "einsum sizes": (lambda g, x, w, i: g.op("einsum", x, x, equation="ij,jk->ik"), ["pt2.einsum", "size mismatch for 'j'"]),
    "repeat fewer dims": (lambda g, x, w, i: g.op("repeat", x, repeats=[2]), ["pt2.repeat"]),
    "arange step 0": (lambda g, x, w, i: g.op("arange", end=5.0, step=0.0, dtype=F32), ["pt2.arange", "step"]),
    "arange step sign": (lambda g, x, w, i: g.op("arange", start=5.0, end=0.0, dtype=F32), ["pt2.arange", "sign"]),
    "arange infinite": (lambda g, x, w, i: g.op("arange", end=float("inf"), dtype=F32), ["pt2.arange", "finite"]),
    "eye negative": (lambda g, x, w, i: g.op("eye", n=-1, m=2, dtype=F32), ["pt2.eye", "negative"]),
    "full negative": (lambda g, x, w, i: g.op("full", shape=[-2], value=1.0, dtype=F32), ["pt2.full", "negative"]),
    "where arity": (lambda g, x, w, i: g.op("where", x, x), ["pt2.where", "expects 3 operands"]),
    # unsupported element types
    "neg of bool": (lambda g, x, w, i: g.op("neg", g.op("gt", x, x)), ["pt2.neg", "does not accept element type i1"]),
    "mean of int64": (lambda g, x, w, i: g.op("mean", i), ["pt2.mean", "does not accept element type i64"]),
    "layer_norm of int64": (lambda g, x, w, i: g.op("layer_norm", i, i, i, normalized_ndim=1), ["pt2.layer_norm", "i64"]),
    "argmax of bool": (lambda g, x, w, i: g.op("argmax", g.op("gt", x, x)), ["pt2.argmax", "i1"]),
    "convert to complex": (lambda g, x, w, i: g.op("convert", x, dtype=torch.complex64), ["complex64", "does not support"]),
    "input of complex": (lambda g, x, w, i: g.input(torch.complex64, (2,)), ["complex64", "does not support"]),
    "input of rank 9": (lambda g, x, w, i: g.input(F32, (1,) * 9), ["rank 9"]),
    # graph and kernel misuse
    "outputs set twice": (lambda g, x, w, i: (g.outputs(x), g.outputs(x)), ["outputs already set"]),
    "output not in the graph": (lambda g, x, w, i: g.outputs(1234), ["not a value of this graph"]),
    "text before outputs": (lambda g, x, w, i: g.text(), ["set the outputs first"]),
    "kernel input count": (lambda g, x, w, i: (g.outputs(g.op("neg", x)), g.compile()(torch.zeros(3, 4))), ["takes 3 inputs, got 1"]),
    "kernel input dtype": (lambda g, x, w, i: (g.outputs(g.op("neg", x)),
                                               g.compile()(torch.zeros(3, 4, dtype=torch.float64), torch.zeros(5), torch.zeros(2, 2, dtype=torch.int64))),
                           ["input 0", "float64"]),
}


@pytest.mark.parametrize("label", list(INVALID))
def test_invalid_call_raises(label):
    build, words = INVALID[label]
    g, x, w, i = _graph()
    with pytest.raises(pt2.Pt2Error) as info:
        build(g, x, w, i)
    message = str(info.value)
    for word in words:
        assert word in message, f"{label}: {word!r} not in the message {message!r}"


def test_graph_still_usable_after_an_error():
    """A rejected op leaves the graph as it was: building goes on."""
    g, x, w, i = _graph()
    with pytest.raises(pt2.Pt2Error):
        g.op("add", x, w)
    g.outputs(g.op("sum", x, dims=[1]))
    (out,) = g.compile()(torch.ones(3, 4), torch.ones(5), torch.ones(2, 2, dtype=torch.int64))
    assert torch.equal(out, torch.full((3,), 4.0))


def test_verifier_rejects_bad_text():
    """Hand-written IR goes through the same rules (errors name the op and the line)."""
    text = """
func.func @main(%x: tensor<3x4xf32>) -> tensor<3xf32> {
  %y = "pt2.sum"(%x) {dims = array<i64: 5>, keepdim = false} : (tensor<3x4xf32>) -> tensor<3xf32>
  return %y : tensor<3xf32>
}
"""
    with pytest.raises(pt2.Pt2Error, match="pt2.sum") as info:
        pt2.compile_text(text, "bad.mlir")
    assert "bad.mlir:3" in str(info.value)
