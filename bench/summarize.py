"""Summarize several runs of the routing benchmarks: min, median and max of every figure.

    python bench/summarize.py bench/results/<date>-*-figures.json

One run of the suite is one process, and on a shared 2-core VM a process can land on a slow
memory layout for its whole life (every round of it is slow alike), so a single run's minimum
says little. Run the suite several times and pass all the saved figure files: the table gives,
per figure, the lowest, the median and the highest of the runs' minima.
"""
import argparse
import json
import statistics
from collections import defaultdict


def _collect(paths):
    ns = defaultdict(list)       # (strategy, what) -> ns/tuple, one per run
    ratios = defaultdict(list)   # name -> ratio, one per run
    for path in paths:
        with open(path) as f:
            rows = json.load(f)["rows"]
        for row in rows:
            if "ns_per_tuple" in row:
                ns[(row["strategy"], row["what"])].append(row["ns_per_tuple"])
            elif row.get("bench") == "spacesaving" and "impl" in row:
                ns[(row["impl"], "spacesaving update")].append(row["ns_per_update"])
            elif "ratio_python_over_route_pkg" in row:
                ratios["pure-Python PKG / our route() pkg"].append(
                    row["ratio_python_over_route_pkg"])
            elif "ratio_ours_over_datasketches" in row:
                ratios["our SpaceSaving / DataSketches (updates/s)"].append(
                    row["ratio_ours_over_datasketches"])
    return ns, ratios


def _line(name, values):
    return (f"| {name} | {min(values):.2f} | {statistics.median(values):.2f} | "
            f"{max(values):.2f} | {len(values)} |")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("files", nargs="+", help="figure files saved by bench/conftest.py")
    args = parser.parse_args(argv)
    ns, ratios = _collect(args.files)
    print("| figure | min | median | max | runs |")
    print("|---|---:|---:|---:|---:|")
    for (who, what), values in sorted(ns.items(), key=lambda item: (item[0][1], item[0][0])):
        print(_line(f"{who}: {what} (ns)", values))
    for name, values in sorted(ratios.items()):
        print(_line(f"{name} (x)", values))


if __name__ == "__main__":
    main()
