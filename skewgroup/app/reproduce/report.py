"""Shared pieces of the reproduction report: options, comparisons, markdown, figures."""
import math
from dataclasses import dataclass, field
from typing import Optional, Tuple

GAP = 0.05   # every gap over 5 % gets a sentence


@dataclass(frozen=True)
class Options:
    """What ``skewgroup reproduce`` may change; None keeps each paper's own setting."""

    messages: Optional[int] = None
    z: Optional[Tuple[float, ...]] = None
    workers: Optional[Tuple[int, ...]] = None
    seed: int = 0
    jobs: int = 1
    strategies: Optional[Tuple[str, ...]] = None   # None: every strategy each paper uses

    def m(self, paper):
        return self.messages or paper

    def zs(self, paper):
        return tuple(self.z) if self.z else tuple(paper)

    def ns(self, paper):
        return tuple(self.workers) if self.workers else tuple(paper)


@dataclass
class Comparison:
    """One number (or claim) a paper prints beside ours.

    ``paper`` is a number, or None for a claim; ``holds`` says whether a claim holds for ours.
    ``why`` explains a gap (used only when there is one).
    """

    figure: str
    setting: str
    strategy: str
    metric: str
    paper: Optional[float]
    ours: float
    claim: str = ""
    holds: Optional[bool] = None
    why: str = ""

    @property
    def diff(self):
        if self.paper is None or self.paper == 0:
            return None
        return (self.ours - self.paper) / abs(self.paper)

    @property
    def gap(self):
        if self.paper is None:
            return self.holds is False
        return self.diff is not None and abs(self.diff) > GAP

    def as_dict(self):
        return dict(figure=self.figure, setting=self.setting, strategy=self.strategy,
                    metric=self.metric, paper=self.paper, claim=self.claim, ours=self.ours,
                    diff=self.diff, holds=self.holds, gap=self.gap,
                    why=self.why if self.gap else "")


@dataclass
class Section:
    """One paper's part of the report."""

    key: str
    title: str
    setup: str
    tables: list = field(default_factory=list)      # (caption, markdown)
    comparisons: list = field(default_factory=list)
    figures: list = field(default_factory=list)     # (file name, caption)

    def markdown(self):
        lines = [f"## {self.title}", "", self.setup, ""]
        if self.comparisons:
            lines += ["### The paper's figures beside ours", "",
                      "| figure | setting | strategy | metric | paper | ours | difference |",
                      "|---|---|---|---|---|---|---|"]
            for c in self.comparisons:
                paper = fmt(c.paper) if c.paper is not None else c.claim
                if c.paper is None:
                    diff = "holds" if c.holds else "**does not hold**"
                else:
                    diff = pct(c.diff) + (" **gap**" if c.gap else "")
                lines.append(f"| {c.figure} | {c.setting} | {c.strategy} | {c.metric} | "
                             f"{paper} | {fmt(c.ours)} | {diff} |")
            lines.append("")
            gaps = [c for c in self.comparisons if c.gap]
            lines += [f"### Gaps over {GAP:.0%} ({len(gaps)} of {len(self.comparisons)})", ""]
            if not gaps:
                lines.append("None.")
            for c in gaps:
                head = (f"paper {fmt(c.paper)}, ours {fmt(c.ours)} ({pct(c.diff)})"
                        if c.paper is not None else f"claim '{c.claim}', ours {fmt(c.ours)}")
                lines.append(f"- **{c.figure}, {c.setting}, {c.strategy}, {c.metric}**: "
                             f"{head}. {c.why or 'No explanation recorded.'}")
            lines.append("")
        for caption, table in self.tables:
            lines += [f"### {caption}", "", table, ""]
        for name, caption in self.figures:
            lines += [f"![{caption}]({name})", "", f"*{caption}*", ""]
        return "\n".join(lines)


def fmt(x):
    """Numbers for tables: 3 significant digits, scientific below 1e-3."""
    if x is None:
        return "—"
    if isinstance(x, str):
        return x
    if x == 0:
        return "0"
    if not math.isfinite(x):
        return str(x)
    if abs(x) < 1e-3 or abs(x) >= 1e6:
        return f"{x:.2e}"
    return f"{x:.3g}" if abs(x) < 1000 else f"{x:,.0f}"


def pct(x):
    return "—" if x is None else f"{x:+.1%}"


def table(header, rows):
    """A markdown table from a header list and rows of cells (already strings or numbers)."""
    out = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for row in rows:
        out.append("| " + " | ".join(fmt(v) if not isinstance(v, str) else v for v in row) + " |")
    return "\n".join(out)


def index(results, *fields):
    """{(r[f] for f in fields): r} over results."""
    return {tuple(r[f] for f in fields): r for r in results}


def pyplot():
    """matplotlib's pyplot on the file-only Agg backend (no display needed)."""
    from skewgroup.app.console import pyplot as agg_pyplot

    plt = agg_pyplot()
    from cycler import cycler       # matplotlib's own dependency

    # Eleven and more lines per panel: tab10 would repeat its colours, tab20 does not.
    tab20 = plt.get_cmap("tab20").colors
    plt.rcParams["axes.prop_cycle"] = cycler(color=list(tab20[::2] + tab20[1::2]))
    return plt


def grid_figure(panels, title, ylabel, path, *, logy=False, xlabel="Zipf exponent z",
                paper_points=None, floors=None):
    """One panel per key of ``panels``: {panel: {line label: (xs, ys)}}; saves a PNG.

    ``paper_points``: {panel: [(x, y, label)]} drawn as black markers (the paper's numbers).
    ``floors``: {panel: one tuple's worth of the metric}; on a log axis zeros are drawn at half
    of it and a dotted line marks it, so "perfect" stays visible and is not mistaken for tiny.
    """
    plt = pyplot()
    keys = list(panels)
    cols = min(2, len(keys)) or 1
    rows = math.ceil(len(keys) / cols) or 1
    fig, axes = plt.subplots(rows, cols, figsize=(6.2 * cols, 3.9 * rows), squeeze=False)
    for ax, key in zip(axes.flat, keys):
        floor = (floors or {}).get(key)
        for label, (xs, ys) in panels[key].items():
            if logy:
                ys = [max(y, floor / 2 if floor else 1e-9) for y in ys]
            ax.plot(xs, ys, marker="o", markersize=3, label=label)
        if logy and floor:
            ax.axhline(floor, color="grey", linestyle=":", linewidth=1)
            ax.annotate("one tuple", (0.01, floor), xycoords=("axes fraction", "data"),
                        fontsize=7, color="grey", va="bottom")
        for x, y, label in (paper_points or {}).get(key, []):
            ax.plot([x], [y], marker="*", color="black", markersize=11, linestyle="none")
            ax.annotate(label, (x, y), textcoords="offset points", xytext=(4, 4), fontsize=7)
        ax.set_title(str(key), fontsize=10)
        ax.set_xlabel(xlabel)
        ax.set_ylabel(ylabel)
        if logy:
            ax.set_yscale("log")
        ax.grid(alpha=0.3)
    for ax in list(axes.flat)[len(keys):]:
        ax.set_visible(False)
    axes.flat[0].legend(fontsize=7, ncol=2)
    fig.suptitle(title + ("   (★ = the paper's number)" if paper_points else ""), fontsize=11)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
