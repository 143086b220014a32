"""The paper's capture table (Table 1/2 form) from bench/models.py results.

    python bench/capture_table.py RESULTS.json [MORE.json ...]

Prints markdown: per suite, models that run and match eager, the share of tensor operators captured
(summed over models: 1 - ops CPython still ran around pt2's graphs / ops eager ran), graphs per model
(mean and max), models by graph breaks (0 / 1-9 / 10+), then one row per model with its first
distinct break reasons.  docs/capture.md holds its output.
"""
import argparse
import collections
import json
import re


def load(paths):
    rows = []
    for path in paths:
        with open(path) as f:
            data = json.load(f)
        rows += data["records"] if isinstance(data, dict) else data
    return rows


def short_reason(text):
    """'call to a C function set ... (/long/path/site-packages/pkg/file.py:106)' -> '... (pkg/file.py:106)'."""
    text = re.sub(r"\([^()]*site-packages/([^()]*)\)$", r"(\1)", text)
    return re.sub(r"\([^()]*lib/python3\.\d+/([^()]*)\)$", r"(\1)", text)


def summary(rows):
    ok = [r for r in rows if r.get("ok")]
    total = sum(r.get("ops_total") or 0 for r in ok)
    outside = sum(r.get("ops_outside_graphs") or 0 for r in ok)
    graphs = [r["graphs"] for r in ok if r.get("graphs") is not None]
    buckets = collections.Counter(
        "0" if r["breaks"] == 0 else "1-9" if r["breaks"] < 10 else "10+" for r in ok if r.get("breaks") is not None)
    return {
        "works": f"{len(ok)}/{len(rows)}",
        "captured": f"{100.0 * (total - outside) / total:.1f} %" if total else "-",
        "graphs": f"{sum(graphs) / len(graphs):.1f} (max {max(graphs)})" if graphs else "-",
        "breaks": " / ".join(str(buckets.get(k, 0)) for k in ("0", "1-9", "10+")),
    }


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("results", nargs="+")
    args = p.parse_args()
    rows = load(args.results)
    by_suite = collections.defaultdict(list)
    for r in rows:
        by_suite[r.get("suite", "?")].append(r)
    print("| suite | models working | operators captured | graphs per model | models with 0 / 1-9 / 10+ breaks |")
    print("|---|---|---|---|---|")
    for suite, rs in by_suite.items():
        s = summary(rs)
        print(f"| {suite} | {s['works']} | {s['captured']} | {s['graphs']} | {s['breaks']} |")
    print()
    print("| model | ok | graphs | breaks | ops captured | blocking construct / first break reasons |")
    print("|---|---|---|---|---|---|")
    for r in rows:
        reasons = list(dict.fromkeys(short_reason(b) for b in r.get("break_reasons", [])))[:3]
        note = r.get("error", "")[:160] if "error" in r else "; ".join(reasons)
        pct = f"{r['ops_captured_pct']:.1f} %" if r.get("ops_captured_pct") is not None else "-"
        print(f"| {r['name']} | {'yes' if r.get('ok') else 'no'} | {r.get('graphs', '-')} | {r.get('breaks', '-')} | {pct} | "
              f"{note.replace('|', '/')} |")


if __name__ == "__main__":
    main()
