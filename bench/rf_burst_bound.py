"""How many (key, worker) pairs a natural-order stream needs if no worker may ever be
more than E tuples above the mean (docs/adaptive.md, "A lower bound for bursty streams").

    python bench/rf_burst_bound.py [identifiers|prose] [n ...] [--slack FACTOR]

For every key and every window length L (40 lengths from 64 tuples to the whole stream, each
window starting at one of the key's tuples), the key's count cnt in its densest window of
length L must fit on its w workers: each of them takes at least cnt / w of the key's tuples
while the mean grows by L / n, so cnt / w - L / n <= E, w >= cnt / (E + L / n). Each key
needs the largest such w (at least 1); RF >= sum / keys. It ignores every other key's
tuples (a relaxation), but assumes the key's workers start each window at the mean: a worker
x tuples below it could take x more (``--slack 2`` doubles E for that).
E is the end-of-stream allowance of the target LI <= 1e-3: E = 1e-3 · m / n. An online router
does not know where the stream ends, so it must keep that bound at every point of the stream
(the excess allowed at an earlier end is smaller still).
"""
import sys

import numpy as np

from skewgroup import hash_keys, metrics, streams


def bound(codes, distinct, n, excess):
    m = codes.size
    order = np.argsort(codes, kind="stable")
    starts = np.searchsorted(codes[order], np.arange(distinct))
    ends = np.searchsorted(codes[order], np.arange(distinct), side="right")
    lengths = np.unique(np.geomspace(64, m, 40).astype(np.int64))
    need = np.ones(distinct)
    for k in np.flatnonzero(ends - starts > excess):
        pos = order[starts[k]:ends[k]]
        for length in lengths:
            densest = (np.searchsorted(pos, pos + length) - np.arange(pos.size)).max()
            need[k] = max(need[k], np.ceil(densest / (excess + length / n) - 1e-9))
    return need.sum() / distinct


def main(argv):
    scale = 1.0
    if "--slack" in argv:
        i = argv.index("--slack")
        scale = float(argv[i + 1])
        argv = argv[:i] + argv[i + 2:]
    kinds = [a for a in argv if not a.isdigit()] or ["identifiers", "prose"]
    ns = [int(a) for a in argv if a.isdigit()] or [16, 64, 128]
    for kind in kinds:
        keys = streams.python_source(kind)
        codes, distinct = metrics.key_codes(hash_keys(keys, 0))
        counts = np.bincount(codes, minlength=distinct)
        for n in ns:
            excess = scale * 1e-3 * codes.size / n
            flat = np.maximum(1, np.ceil(counts * n / codes.size - 1e-9)).sum() / distinct
            print(f"{kind} n={n}: E = {excess:.1f} tuples, RF >= {bound(codes, distinct, n, excess):.4f}"
                  f" (whole-stream bound {flat:.4f})", flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
