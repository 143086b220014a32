"""Plot bench/models.py results: speedup over eager per model, pt2 beside Inductor.

    python bench/plot.py RESULTS.json [MORE.json ...] --out docs/models.png [--title TEXT]

Bars per model (models that match eager): pt2, Inductor (when measured with --inductor) and pt2
behind Dynamo (--frontend dynamo); a line at 1x.  Needs matplotlib (`pip install matplotlib`); it is
not part of the test suite's dependencies.
"""
import argparse
import json
import math


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("results", nargs="+")
    p.add_argument("--out", required=True)
    p.add_argument("--title", default="speedup over eager PyTorch (CPU)")
    args = p.parse_args()
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    records = []
    for path in args.results:
        with open(path) as f:
            data = json.load(f)
        records += data["records"] if isinstance(data, dict) else data
    rows = [r for r in records if r.get("ok") and r.get("pt2_ms")]
    series = [("pt2_ms", "pt2"), ("inductor_ms", "Inductor"), ("pt2_dynamo_ms", "pt2 behind Dynamo")]
    series = [(k, label) for k, label in series if any(r.get(k) for r in rows)]
    width = 0.8 / len(series)
    fig, ax = plt.subplots(figsize=(max(6, 0.9 * len(rows) + 2), 4.5))
    for i, (key, label) in enumerate(series):
        xs = [j + (i - (len(series) - 1) / 2) * width for j in range(len(rows))]
        ys = [r["eager_ms"] / r[key] if r.get(key) else 0 for r in rows]
        vals = [y for y in ys if y > 0]
        geo = math.exp(sum(math.log(y) for y in vals) / len(vals)) if vals else float("nan")
        ax.bar(xs, ys, width, label=f"{label} (geomean {geo:.2f}x)")
    ax.axhline(1.0, color="black", linewidth=0.8)
    ax.set_xticks(range(len(rows)))
    ax.set_xticklabels([r["name"] for r in rows], rotation=30, ha="right", fontsize=8)
    ax.set_ylabel("speedup over eager")
    ax.set_title(args.title)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(args.out, dpi=110)
    print("wrote", args.out)


if __name__ == "__main__":
    main()
