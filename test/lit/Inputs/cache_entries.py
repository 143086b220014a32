#!/usr/bin/env python3
"""Tampers with pt2's kernel cache (DIR/<key>.so + DIR/<key>.meta) for the
pt2-run cache tests.

    cache_entries.py list DIR                 prints the keys, sorted
    cache_entries.py corrupt-so DIR KEYFILE   overwrites bytes of the .so of the key in KEYFILE
    cache_entries.py alias DIR KEYFILE        copies the one other entry's .so and .meta over
                                              the entry of the key in KEYFILE: a consistent
                                              entry whose .meta names another key
"""
import os
import shutil
import sys


def keys(d):
    return sorted(f[:-5] for f in os.listdir(d) if f.endswith(".meta") and "." not in f[:-5])


def main():
    cmd, d = sys.argv[1], sys.argv[2]
    if cmd == "list":
        print("\n".join(keys(d)))
        return
    key = open(sys.argv[3]).read().split()[0]
    if cmd == "corrupt-so":
        path = os.path.join(d, key + ".so")
        size = os.path.getsize(path)
        with open(path, "r+b") as f:
            f.seek(size // 2)
            f.write(b"\xde\xad\xbe\xef" * 16)
    elif cmd == "alias":
        other = [k for k in keys(d) if k != key]
        assert len(other) == 1, other
        for ext in (".so", ".meta"):
            shutil.copyfile(os.path.join(d, other[0] + ext), os.path.join(d, key + ext))
    else:
        sys.exit(f"unknown command {cmd}")


if __name__ == "__main__":
    main()
