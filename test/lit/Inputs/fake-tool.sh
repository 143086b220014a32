#!/bin/sh
# Stands in for pt2-opt in check_broken.py's self-test (Tools/broken-inputs.test):
# FAKE_TOOL=segv crashes, FAKE_TOOL=exit2 fails with a located error but status 2.
if [ "$FAKE_TOOL" = exit2 ]; then
    echo "$1:1:1: error: fake" >&2
    exit 2
fi
kill -SEGV $$
