"""The ``skewgroup`` command line (also ``python -m skewgroup``)."""
import argparse
import sys
import time

import numpy as np

from skewgroup import STRATEGIES, partitioner
from skewgroup.metrics import load_imbalance, loads, replication_factor
from skewgroup.streams import zipf


def _count(text):
    """'10M' -> 10_000_000, '500k' -> 500_000, '1e6' -> 1_000_000."""
    text = str(text).strip()
    scale = {"k": 10**3, "m": 10**6, "g": 10**9}.get(text[-1:].lower(), 1)
    number = text[:-1] if scale != 1 else text
    try:
        value = float(number) * scale
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a count such as 1M or 500k, got {text!r}")
    if value < 1 or value != int(value):
        raise argparse.ArgumentTypeError(f"expected a positive whole count, got {text!r}")
    return int(value)


def _strategies(text):
    names = sorted(STRATEGIES) if text == "all" else [s.strip() for s in text.split(",") if s.strip()]
    unknown = [s for s in names if s not in STRATEGIES]
    if unknown or not names:
        raise argparse.ArgumentTypeError(
            f"strategies must be 'all' or a comma list of {sorted(STRATEGIES)}; got {text!r}")
    return names


def simulate(args, out=sys.stdout):
    keys = zipf(args.z, args.messages, universe=args.universe, seed=args.seed)
    _, counts = np.unique(keys, return_counts=True)
    print(f"Zipf z={args.z}, {args.messages:,} messages, {counts.size:,} distinct keys, "
          f"p1={counts.max() / args.messages:.1%}, n={args.workers} workers", file=out)
    header = f"{'strategy':<11} {'LI':>10} {'RF':>6} {'ns/tuple':>9} {'state bytes':>12}"
    print(header, file=out)
    print("-" * len(header), file=out)
    rows = []
    for name in args.strategies:
        p = partitioner(name, args.workers, seed=args.seed)
        start = time.perf_counter()
        ids = p.route(keys)
        elapsed = time.perf_counter() - start
        imbalance = load_imbalance(loads(ids, args.workers))
        replication = replication_factor(keys, ids, args.workers)
        rows.append((name, imbalance, replication))
        print(f"{name:<11} {imbalance:>10.2e} {replication:>6.2f} "
              f"{elapsed / len(keys) * 1e9:>9.1f} {p.stats()['state_bytes']:>12,}", file=out)
    return rows


def main(argv=None):
    parser = argparse.ArgumentParser(prog="skewgroup", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    sim = sub.add_parser("simulate", help="route a generated Zipf stream with each strategy "
                                          "and print load imbalance (LI) and replication (RF)")
    sim.add_argument("--z", type=float, default=1.4, help="Zipf exponent (default 1.4)")
    sim.add_argument("--workers", type=int, default=64, help="downstream workers n (default 64)")
    sim.add_argument("--messages", type=_count, default=_count("2M"),
                     help="stream length, e.g. 10M (default 2M)")
    sim.add_argument("--universe", type=_count, default=_count("10M"),
                     help="distinct keys the Zipf law draws from (default 10M, Pd-Stream Table IV)")
    sim.add_argument("--strategies", type=_strategies, default=sorted(STRATEGIES),
                     help="'all' or a comma list (default all)")
    sim.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    if args.workers < 1:
        parser.error(f"--workers must be >= 1, got {args.workers}")
    if args.z < 0:
        parser.error(f"--z must be >= 0, got {args.z}")
    if args.command == "simulate":
        simulate(args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
