"""docs/ stays true: the generated op table matches the catalog."""
import os
import subprocess
import sys

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")


def test_dialect_doc_is_current():
    r = subprocess.run([sys.executable, os.path.join(ROOT, "scripts", "gen_dialect_doc.py"), "--check"], capture_output=True, text=True)
    assert r.returncode == 0, "docs/dialect.md is out of date: run `PYTHONPATH=python python3 scripts/gen_dialect_doc.py`\n" + r.stderr
