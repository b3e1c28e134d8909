"""The long run of the crafted-state fuzzer: every strategy, many mutated states.

    python bench/fuzz_states.py --examples 2000            # per strategy
    python bench/fuzz_states.py --examples 200 --strategies pdstream sg

Each example mutates a real saved state (tests/_state_fuzz.py: values set to -1, n, huge or
past-the-end, arrays truncated, extended, retyped, fields dropped or added, metadata changed),
then loads and routes it: ``from_bytes`` must raise ValueError or the ids must stay in [0, n).
Examples are numbered seeds, so a run is deterministic; the case being run is written to
``--last-case`` first, so if the native code crashes the process, that file names the case
(replay it with ``tests/_state_fuzz.fuzz_one``).
"""
import argparse
import collections
import pathlib
import sys
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent / "tests"))

from _state_fuzz import VARIANTS, fuzz_one  # noqa: E402


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--examples", type=int, default=2000, help="examples per strategy")
    parser.add_argument("--strategies", nargs="+", default=sorted(VARIANTS),
                        choices=sorted(VARIANTS))
    parser.add_argument("--first-seed", type=int, default=0)
    parser.add_argument("--last-case", default="/tmp/skewgroup_fuzz_last_case.txt")
    args = parser.parse_args(argv)
    last_case = pathlib.Path(args.last_case)
    total = collections.Counter()
    print(f"{'strategy':<12}{'examples':>10}{'rejected':>10}{'accepted':>10}{'seconds':>9}")
    for name in args.strategies:
        outcomes = collections.Counter()
        start = time.perf_counter()
        for i in range(args.examples):
            seed = args.first_seed + i
            variant = seed % len(VARIANTS[name])
            last_case.write_text(f"fuzz_one({name!r}, {variant}, {seed})\n")
            outcome, _ = fuzz_one(name, variant, seed)
            outcomes[outcome] += 1
        total.update(outcomes)
        print(f"{name:<12}{args.examples:>10}{outcomes['rejected']:>10}"
              f"{outcomes['accepted']:>10}{time.perf_counter() - start:>9.1f}", flush=True)
    print(f"{'all':<12}{sum(total.values()):>10}{total['rejected']:>10}{total['accepted']:>10}"
          "   no crash, every accepted state routed within [0, n)")


if __name__ == "__main__":
    main()
