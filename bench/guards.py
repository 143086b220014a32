"""What pt2's guard check costs on a cache hit, for models with thousands of guards.

For each model: the guards of its compiled forward counted by kind (pt2.explain), then the time of
one check of the forward's cache entry (pt2._C.check_guards, the hook's own check) warm (checked
again right away) and evicted (a 64 MB buffer touched before each check), and the guard time of
whole cache-hit calls (pt2._C.guard_timing: every check the hook ran during the call, resumed
frames included, right after the previous call's forward pass swept the caches).

    PYTHONPATH=python python bench/guards.py [--models visformer_small,resnet50,bert,synthetic] [--repeats 50]

PT2_DISABLE=guard-tags turns the version-tag fast path off (docs/capture.md, "Guards").
"""
import argparse
import collections
import inspect
import os
import statistics
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import pt2  # noqa: E402
from pt2 import _C  # noqa: E402


def build(name):
    if name in ("visformer_small", "resnet50"):
        from models import build_timm

        model, xs, kw = build_timm(name, 1)
        return model, xs, kw
    if name == "bert":
        import transformers

        model = transformers.BertModel(transformers.BertConfig()).eval()
        return model, (), {"input_ids": torch.randint(0, 1000, (1, 16))}
    if name == "synthetic":
        return synthetic(), (torch.randn(4, 32),), {}
    raise SystemExit(f"unknown model {name}")


class Block(torch.nn.Module):
    def __init__(self, n):
        super().__init__()
        self.fc = torch.nn.Linear(n, n)
        self.norm = torch.nn.LayerNorm(n)
        self.scale = 0.5

    def forward(self, x):
        return x + self.scale * self.norm(self.fc(x))


def synthetic(depth=100, width=32):
    """Many small submodules: the guards are most of a call."""
    return torch.nn.Sequential(*[Block(width) for _ in range(depth)]).eval()


def kind_of(text):
    if ".training == " in text and not text.split()[0].isupper():
        return "TRAINING"
    return text.split()[0]


def slots_of(fn, args, kwargs):
    """The forward frame's localsplus slots as the hook sees them (arguments bound, defaults applied)."""
    sig = inspect.signature(fn, follow_wrapped=False)
    bound = sig.bind(*args, **kwargs)
    bound.apply_defaults()
    code = fn.__code__
    names = code.co_varnames[: code.co_argcount + code.co_kwonlyargcount]
    slots = [bound.arguments[n] for n in names]
    for p in sig.parameters.values():
        if p.kind == p.VAR_POSITIONAL:
            slots.append(tuple(bound.arguments.get(p.name, ())))
        elif p.kind == p.VAR_KEYWORD:
            slots.append(dict(bound.arguments.get(p.name, {})))
    return tuple(slots) + (None,) * (code.co_nlocals + len(code.co_cellvars) + len(code.co_freevars) - len(slots))


def evict(buf):
    buf.add_(1.0)  # 64 MB written: the last-level cache holds none of the guards' objects after it


def median_us(xs):
    return 1e6 * statistics.median(xs)


def measure(name, repeats):
    torch.manual_seed(0)
    model, xs, kw = build(name)
    with torch.no_grad():
        expected = model(*xs, **kw)
        ex = pt2.explain(model)(*xs, **kw)
        kinds = collections.Counter(kind_of(g) for g in ex.out_guards)
        compiled = pt2.compile(model)
        compiled(*xs, **kw)
        compiled(*xs, **kw)
        fwd = type(model).forward
        slots = slots_of(fwd, (model,) + tuple(xs), kw)
        buf = torch.zeros(16 << 20)
        warm, cold = [], []
        ok, _, failure = _C.check_guards(fwd, slots)
        if not ok:
            raise SystemExit(f"{name}: the forward's guards fail on its own arguments: {failure}")
        for _ in range(repeats):
            warm.append(_C.check_guards(fwd, slots)[1])
        for _ in range(repeats):
            evict(buf)
            cold.append(_C.check_guards(fwd, slots)[1])
        _C.guard_timing(True)
        calls = max(5, repeats // 5)
        per_call, checks, guards_run = [], 0, 0
        for _ in range(calls):
            _C.guard_stats(True)
            out = compiled(*xs, **kw)
            s = _C.guard_stats(True)
            per_call.append(s["seconds"])
            checks += s["checks"]
            guards_run += s["guards_run"]
        _C.guard_timing(False)
    got = out[0] if isinstance(out, tuple) else getattr(out, "last_hidden_state", out)
    want = expected[0] if isinstance(expected, tuple) else getattr(expected, "last_hidden_state", expected)
    err = (got - want).abs().max().item()
    assert err <= 1e-3 * (1 + want.abs().max().item()), f"{name}: compiled result differs from eager by {err}"
    print(f"{name}: {len(ex.out_guards)} guards in {ex.graph_count} graphs "
          f"({', '.join(f'{k} {v}' for k, v in kinds.most_common())})")
    print(f"  forward entry check: warm {median_us(warm):.1f} us, evicted {median_us(cold):.1f} us "
          f"(median of {repeats})")
    print(f"  whole calls: {median_us(per_call):.1f} us of guard checks a call, "
          f"{checks / calls:.1f} checks and {guards_run / calls:.0f} guards run a call")
    pt2.reset()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--models", default="visformer_small,resnet50,bert,synthetic")
    ap.add_argument("--repeats", type=int, default=50)
    args = ap.parse_args()
    torch.set_num_threads(1)
    print(f"PT2_DISABLE={os.environ.get('PT2_DISABLE', '')}")
    for name in args.models.split(","):
        t0 = time.perf_counter()
        measure(name, args.repeats)
        print(f"  ({time.perf_counter() - t0:.0f} s)")


if __name__ == "__main__":
    main()
