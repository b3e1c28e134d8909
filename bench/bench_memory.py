"""Routing state and process memory stay bounded over 10^8 distinct keys.

    python bench/bench_memory.py                          # every strategy, 10^8 keys, n = 16
    python bench/bench_memory.py --keys 1e7 --workers 128 --strategies fish flexd

Each strategy runs in its own process so that its peak RSS is its own. The process first routes
one chunk with a throw-away key-grouping partitioner, so that the chunk's temporaries (keys,
hashes, ids: ~20 MB) are in the baseline peak; then it routes ``--keys`` distinct keys
(np.arange blocks of 10^6, hashed) with every fifth tuple one hot key, as the bounded-state test
of tests/test_partitioner.py does, so the per-key tables see both churn and a head key. It
reports the largest ``stats()["state_bytes"]`` seen after any chunk, the strategy's documented
``skewgroup.state_bound(name, workers)``, and the growth of the peak RSS (ru_maxrss) over the
baseline; the run passes when both stay within the bound (RSS: plus ``--slack-mib`` for the
allocator's and numpy's own overhead).
"""
import argparse
import json
import resource
import subprocess
import sys
import time

import numpy as np

CHUNK = 1_000_000  # keys per chunk; a chunk routes 1.25 CHUNK tuples


def peak_rss_bytes():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # KiB on Linux


def route_distinct(p, first, last, stream, seed):
    """Route keys first .. last-1 (a multiple of CHUNK apart) through p, chunk by chunk, with
    the hot key in stream's last column; returns the largest state_bytes after a chunk."""
    import skewgroup

    state_bytes = 0
    for start in range(first, last, CHUNK):
        fresh = skewgroup.hash_keys(np.arange(start, start + CHUNK, dtype=np.int64), seed=seed)
        stream[:, :4] = fresh.reshape(-1, 4)
        del fresh  # before the next chunk's, so both are never alive at once
        p.route_hashes(stream.ravel())
        state_bytes = max(state_bytes, p.stats()["state_bytes"])
    return state_bytes


def measure(name, keys, workers):
    import skewgroup

    seed = 2
    stream = np.empty((CHUNK // 4, 5), dtype=np.uint64)  # every fifth tuple is the hot key
    stream[:, 4] = skewgroup.hash_keys([-1], seed=seed)[0]
    # Warm-up: the same loop with a throw-away key grouping, so the chunk's temporaries (and
    # numpy's first allocations) are in the baseline peak.
    route_distinct(skewgroup.partitioner("kg", workers, seed=seed), -2 * CHUNK, 0, stream, seed)
    baseline = peak_rss_bytes()
    p = skewgroup.partitioner(name, workers, seed=seed)
    start = time.perf_counter()
    state_bytes = route_distinct(p, 0, keys, stream, seed)
    return {"strategy": name, "workers": workers, "distinct_keys": keys,
            "tuples": int(p.stats()["routed"]), "seconds": round(time.perf_counter() - start, 1),
            "state_bytes": state_bytes, "state_bound": skewgroup.state_bound(name, workers),
            "rss_growth": peak_rss_bytes() - baseline}


def main(argv=None):
    import skewgroup

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--keys", type=float, default=1e8, help="distinct keys (a multiple of "
                                                                "10^6)")
    parser.add_argument("--workers", type=int, default=16)
    parser.add_argument("--strategies", nargs="+", default=sorted(skewgroup.STRATEGIES))
    parser.add_argument("--slack-mib", type=float, default=16.0)
    parser.add_argument("--one", help=argparse.SUPPRESS)  # the per-strategy child process
    args = parser.parse_args(argv)
    keys = int(args.keys) // CHUNK * CHUNK
    if args.one:
        print(json.dumps(measure(args.one, keys, args.workers)))
        return 0
    slack = int(args.slack_mib * 2**20)
    print(f"{keys:,} distinct keys (+ a hot key on every fifth tuple), n = {args.workers}, "
          f"RSS slack {args.slack_mib:g} MiB")
    print(f"| strategy | tuples | s | state bytes (max) | state_bound | peak RSS growth | ok |")
    print(f"|---|---:|---:|---:|---:|---:|---|")
    failed = False
    for name in args.strategies:
        out = subprocess.run([sys.executable, __file__, "--one", name, "--keys", str(keys),
                              "--workers", str(args.workers)],
                             check=True, capture_output=True, text=True).stdout
        row = json.loads(out.strip().splitlines()[-1])
        ok = (row["state_bytes"] <= row["state_bound"]
              and row["rss_growth"] <= row["state_bound"] + slack)
        failed |= not ok
        print(f"| {name} | {row['tuples']:,} | {row['seconds']} | {row['state_bytes']:,} | "
              f"{row['state_bound']:,} | {row['rss_growth']:,} | {'yes' if ok else 'NO'} |",
              flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
