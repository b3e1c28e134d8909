"""Command-line options: the argument types of ``skewgroup`` and the streaming job's options.

The job's parser is here, apart from the job itself, so that ``skewgroup run``,
``spark-submit skewgroup/app/job.py`` and ``skewgroup --help`` share one definition, and every option
error is found before pyspark is even imported. Each error names the option, what is allowed
and what was given.
"""
import argparse
import json
import tempfile
from pathlib import Path

from skewgroup import STRATEGIES
from skewgroup._routing.config import make_config
from skewgroup._routing.partitioner import MAX_WORKERS

# --- argument types: each error names what is allowed and what was given -------------------


def count_arg(text):
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


def int_in(low, high=None):
    def parse(text):
        try:
            value = int(text)
        except ValueError:
            value = None
        if value is None or value < low or (high is not None and value > high):
            upper = "inf" if high is None else f"{high:,}"
            raise argparse.ArgumentTypeError(
                f"expected an integer in [{low}, {upper}], got {text!r}")
        return value
    return parse


def nonneg_float(text):
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not value >= 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"expected a real number >= 0, got {text!r}")
    return value


def share_arg(text):
    value = nonneg_float(text)
    if value > 1:
        raise argparse.ArgumentTypeError(f"expected a share in [0, 1], got {text!r}")
    return value


def positive_float(text):
    value = nonneg_float(text)
    if value == 0:
        raise argparse.ArgumentTypeError(f"expected a real number > 0, got {text!r}")
    return value


def comma_list(parse):
    def parse_list(text):
        items = [t for t in str(text).split(",") if t.strip()]
        if not items:
            raise argparse.ArgumentTypeError(f"expected a comma list, got {text!r}")
        return tuple(parse(t.strip()) for t in items)
    return parse_list


def strategy_list(text):
    names = (sorted(STRATEGIES) if text == "all"
             else [s.strip() for s in text.split(",") if s.strip()])
    unknown = [s for s in names if s not in STRATEGIES]
    if unknown or not names:
        raise argparse.ArgumentTypeError(
            f"expected 'all' or a comma list of {sorted(STRATEGIES)}, got {text!r}")
    return names


def strategy_setting(text):
    """'pdstream.window=256' -> ('pdstream', 'window', 256)."""
    head, eq, value = str(text).partition("=")
    strategy, dot, name = head.partition(".")
    if not (eq and dot and strategy and name):
        raise argparse.ArgumentTypeError(
            f"expected STRATEGY.PARAMETER=VALUE such as pdstream.window=256, got {text!r}")
    if strategy not in STRATEGIES:
        raise argparse.ArgumentTypeError(
            f"expected a strategy among {sorted(STRATEGIES)} before the dot, got {strategy!r}")
    try:
        parsed = json.loads(value)
    except ValueError:
        parsed = value
    if isinstance(parsed, list):
        parsed = tuple(parsed)
    return strategy, name, parsed


# --- the streaming job's options ------------------------------------------------------------

SOURCES = ("sessions", "zipf", "drift", "files", "rate")
GENERATED_SOURCES = ("sessions", "zipf", "drift")
SINKS = ("memory", "console", "parquet")
FORMATS = ("parquet", "csv", "json")
# "score" is the job's stand-in for a per-row Python function summed (skewgroup.app.workload.score_row);
# the Python-merged ones are skewgroup.aggregators' (RowSample: sample:VALUE,ID; KllQuantiles,
# TopK, DistinctCount; LeastSquares: lsq:Y,X1[,X2...]), whose buffers skew_group merges in
# Python.
PYTHON_MERGED = ("sample", "quantiles", "topk", "distinct", "lsq")
# The columns each kind reads, (fewest, most; None: no limit), and how its usage is written.
COLUMNS_READ = {"sample": (2, 2, "sample:VALUE,ID"), "lsq": (2, None, "lsq:Y,X1[,X2...]")}
AGGREGATES = ("count", "sum", "min", "max", "mean", "score") + PYTHON_MERGED
JOB_FILE = "skewgroup-job.json"
# A generated source's micro-batches when --batches is not given: sessions runs long enough for
# its state to grow (new keys every micro-batch beside the hot ones).
DEFAULT_BATCHES = {"sessions": 20, "zipf": 10, "drift": 10}
# The columns of the sources whose schema is fixed, with their Spark types: what --key and
# --agg may name there. ``id`` is the row number, what ``sample`` ranks rows by.
GENERATED_TYPES = {"ts": "timestamp", "id": "bigint", "key": "bigint", "amount": "double",
                   "x1": "double", "x2": "double", "x3": "double", "y": "double"}
GENERATED_COLUMNS = tuple(GENERATED_TYPES)
RATE_TYPES = {"timestamp": "timestamp", "value": "bigint"}
# The default aggregate on a generated stream: a uniform sample of 5 rows' amounts per key,
# which no Spark function computes with bounded state.
DEFAULT_GENERATED_AGG = ("sample", "amount,id")
# Spark's integer types: a row id (sample's second column) must be one of them.
INTEGER_TYPES = ("tinyint", "smallint", "int", "bigint")
# skew_group's plans a stream takes (skewgroup.spark.PLANS less split, which is for batch).
PLANS = ("auto", "local", "hash", "routed", "spread")


class JobError(ValueError):
    """A bad option of the job, found before Spark starts."""


# --- options ---------------------------------------------------------------------------------


def aggregate_arg(text):
    """'count' -> ('count', None); 'sum:amount' -> ('sum', 'amount')."""
    kind, _, column = str(text).partition(":")
    if kind not in AGGREGATES:
        raise argparse.ArgumentTypeError(
            f"expected one of {', '.join(AGGREGATES)} (with ':COLUMN' except count), "
            f"got {text!r}")
    if kind != "count" and not column:
        usage = COLUMNS_READ[kind][2] if kind in COLUMNS_READ else f"{kind}:COLUMN"
        raise argparse.ArgumentTypeError(f"expected {usage}, got {text!r}")
    if kind in COLUMNS_READ:
        fewest, most, usage = COLUMNS_READ[kind]
        read = len([c for c in column.split(",") if c.strip()])
        if read < fewest or (most is not None and read > most):
            raise argparse.ArgumentTypeError(
                f"expected {usage} ({fewest}{'' if most == fewest else ' or more'} columns), "
                f"got {text!r} ({read} column{'s' if read != 1 else ''})")
    elif column and "," in column:
        raise argparse.ArgumentTypeError(f"expected {kind}:COLUMN (one column), got {text!r}")
    return kind, column or None


def param_arg(text):
    """'window=256' -> ('window', 256): the value is read as JSON when it parses."""
    name, eq, value = str(text).partition("=")
    if not (eq and name):
        raise argparse.ArgumentTypeError(f"expected NAME=VALUE such as window=256, got {text!r}")
    try:
        parsed = json.loads(value)
    except ValueError:
        parsed = value
    return name, tuple(parsed) if isinstance(parsed, list) else parsed


def trigger_arg(text):
    """'availableNow', 'once', or a processing-time interval such as '5 seconds'."""
    if text in ("availableNow", "once"):
        return text
    number, _, unit = str(text).strip().partition(" ")
    try:
        seconds = float(number)
    except ValueError:
        seconds = -1.0
    if seconds < 0 or unit.rstrip("s") not in ("second", ""):
        raise argparse.ArgumentTypeError(
            f"expected availableNow, once, or an interval such as '5 seconds', got {text!r}")
    return f"{seconds:g} seconds"


def job_parser():
    parser = argparse.ArgumentParser(
        prog="skewgroup run",
        description="The skewgroup streaming job: a stream grouped by key with skew_group, "
                    "its balance shown per micro-batch.",
        epilog="spark-submit skewgroup/app/job.py takes the same options.")
    src = parser.add_argument_group("source")
    src.add_argument("--source", choices=SOURCES, default="sessions",
                     help="sessions, zipf or drift (generated), files (a directory), rate "
                          "(Spark's rate source); default sessions: a few hot keys beside "
                          "sessions that keep arriving")
    src.add_argument("--input", help="--source files: the directory to read")
    src.add_argument("--format", choices=FORMATS, default="parquet",
                     help="--source files: file format (default parquet)")
    src.add_argument("--max-files-per-trigger", type=int_in(1), default=1,
                     help="--source files: files per micro-batch (default 1)")
    src.add_argument("--rows-per-batch", type=count_arg, default=100_000,
                     help="generated sources: rows per micro-batch (default 100k)")
    src.add_argument("--rate", type=positive_float, default=None,
                     help="generated sources, rate: rows per second (Spark's rate source) "
                          "instead of --rows-per-batch")
    src.add_argument("--hot-keys", type=int_in(1, 1_000_000), default=4,
                     help="sessions: hot keys (a bot, a popular item), keys 0, 1, ...; hot key "
                          "i draws a share of the hot rows proportional to 1 / (i + 1) "
                          "(default 4)")
    src.add_argument("--hot-share", type=share_arg, default=0.3,
                     help="sessions: the share of rows that go to the hot keys, in [0, 1] "
                          "(default 0.3)")
    src.add_argument("--new-keys", type=count_arg, default=75_000,
                     help="sessions: sessions that start per --rows-per-batch rows, each "
                          "lasting that many rows; the rows not hot go to the sessions live "
                          "then, uniformly. A run of B micro-batches starts (B + 1) x NEW_KEYS "
                          "sessions, with (1 - HOT_SHARE) x ROWS_PER_BATCH / NEW_KEYS rows "
                          "each on average (default 75k: about 900k keys seen in the "
                          "default 20 micro-batches)")
    src.add_argument("--z", type=nonneg_float, default=1.4,
                     help="zipf/drift: Zipf exponent (default 1.4)")
    src.add_argument("--universe", type=count_arg, default=100_000,
                     help="zipf/drift: distinct keys drawn from (default 100k)")
    src.add_argument("--drift-every", type=count_arg, default=500_000,
                     help="drift: rows between two replacements of the hot keys (default 500k)")
    src.add_argument("--partitions", type=int_in(1, 4096), default=2,
                     help="generated sources, rate: input partitions, i.e. the papers' sources "
                          "(default 2)")

    grp = parser.add_argument_group("grouping")
    grp.add_argument("--key", action="append", default=None,
                     help="key column, repeatable (default: 'key'; 'value' for --source rate)")
    grp.add_argument("--agg", type=aggregate_arg, action="append", default=None,
                     metavar="AGG[:COLUMN]",
                     help="count, sum:COL, min:COL, max:COL, mean:COL, score:COL (the sum of a "
                          "per-row pure-Python function of COL), or a Python "
                          "aggregator whose merge is Python: sample:VALUE,ID (a uniform sample "
                          "of 5 rows' VALUE per key, the rows whose integer ID hashes "
                          "smallest), quantiles:COL (KLL sketch), topk:COL, distinct:COL, "
                          "lsq:Y,X1[,X2...] (least-squares fit with an intercept), mixed "
                          "freely; repeatable (default: sample:amount,id on generated "
                          "streams, count elsewhere)")
    grp.add_argument("--plan", choices=PLANS, default=None,
                     help="where skew_group runs the partial (docs/plans.md): auto (the default, "
                          "what a user who writes no plan= gets; routed when --strategy or "
                          "--param is given), local, hash, routed or spread")
    grp.add_argument("--strategy", choices=sorted(STRATEGIES), default=None,
                     help="routing strategy, with --plan routed (default adaptive)")
    grp.add_argument("--param", type=param_arg, action="append", default=[], metavar="NAME=VALUE",
                     help="a strategy parameter, e.g. window=64 (repeatable)")
    grp.add_argument("--workers", type=int_in(1, MAX_WORKERS), default=8,
                     help="workers, i.e. partitions of the partial stage (default 8)")
    grp.add_argument("--state-partitions", type=int_in(1, MAX_WORKERS), default=None,
                     help="partitions of the stateful stages (spark.sql.shuffle.partitions; "
                          "default: the cores Spark gives the job). Each stateful task costs "
                          "a fixed time whatever its rows, so more tasks than cores only add "
                          "waves; fixed in the checkpoint at the first start")
    grp.add_argument("--seed", type=int_in(0, (1 << 63) - 1), default=0,
                     help="seed of the key hash and of generated streams (default 0)")

    run = parser.add_argument_group("run")
    run.add_argument("--trigger", type=trigger_arg, default=None,
                     help="availableNow, once, or '<n> seconds' (default: batches back to back)")
    run.add_argument("--batches", type=int_in(1), default=None,
                     help="stop after this many micro-batches (default 20 for sessions, 10 "
                          "for zipf and drift; files and rate: none)")
    run.add_argument("--checkpoint", help="checkpoint directory (default: a temporary one, "
                                          "removed at the end)")
    run.add_argument("--sink", choices=SINKS, default="memory",
                     help="memory (default; the top rows are printed), console, or parquet")
    run.add_argument("--output", help="--sink parquet: the output directory")
    run.add_argument("--metrics",
                     help="append each micro-batch's balance as a JSON line here, and after "
                          "the comparison of the ways one line a way (with a 'way' key)")
    run.add_argument("--plot", metavar="FILE.png",
                     help="draw each compared way's micro-batch seconds and the state it holds "
                          "after each micro-batch into this PNG (needs matplotlib: "
                          "pip install \"skewgroup[cli]\")")
    run.add_argument("--master", default=None,
                     help="Spark master (default local[*]; under spark-submit, spark-submit's)")
    run.add_argument("--quiet", action="store_true", help="no live display, only the summary")
    return parser


def parse_job_args(argv=None):
    """Parse and check the job's options; every error is raised before Spark starts."""
    parser = job_parser()
    args = parser.parse_args(argv)
    try:
        _check(args)
    except JobError as error:
        parser.error(str(error))
    return args


def _check(args):
    generated = args.source in GENERATED_SOURCES
    if args.source == "files":
        if not args.input:
            raise JobError("--source files needs --input DIR")
        if not Path(args.input).is_dir():
            raise JobError(f"--input must be an existing directory; got {args.input!r}, "
                           f"which {'is not a directory' if Path(args.input).exists() else 'does not exist'}")
        args.input = str(Path(args.input).resolve())
        if not _has_data_files(args.input):
            raise JobError(
                f"--input {args.input} has no files to infer a schema from; put at least one "
                f"{args.format} file in it before starting the job (its columns are read once, "
                f"at the start)")
    elif args.input:
        raise JobError(f"--input goes with --source files; got --source {args.source}")
    # Which were left to their defaults: an error about a column names them as such.
    args.defaulted = {option for option, value in (("--key", args.key), ("--agg", args.agg))
                      if value is None}
    if args.key is None:
        args.key = ["value"] if args.source == "rate" else ["key"]
    if args.agg is None:
        args.agg = [DEFAULT_GENERATED_AGG] if generated else [("count", None)]
    if args.batches is None and generated:
        args.batches = DEFAULT_BATCHES[args.source]
    if args.source != "files":      # a fixed schema: checked now; files once Spark read theirs
        check_columns(args, GENERATED_TYPES if generated else RATE_TYPES)
    if args.trigger in ("availableNow", "once") and args.source == "rate":
        raise JobError(f"--trigger {args.trigger} needs a source with an end; the rate source "
                       f"has none (use --batches)")
    # A strategy is a routing choice: naming one (or its parameters) asks for the routed plan.
    if args.plan is None:
        args.plan = "routed" if args.strategy is not None or args.param else "auto"
    elif args.plan != "routed" and (args.strategy is not None or args.param):
        raise JobError(f"--strategy and --param route rows: they go with --plan routed; got "
                       f"--plan {args.plan}")
    if args.strategy is None:
        args.strategy = "adaptive"
    params = dict(args.param)
    try:
        make_config(args.strategy, params)
    except (TypeError, ValueError) as error:
        raise JobError(f"--param: {error}") from None
    args.params = params
    if args.sink == "parquet":
        if not args.output:
            raise JobError("--sink parquet needs --output DIR")
        args.output = _writable_dir(args.output, "--output")
    elif args.output:
        raise JobError(f"--output goes with --sink parquet; got --sink {args.sink}")
    if args.checkpoint:
        args.checkpoint = _writable_dir(args.checkpoint, "--checkpoint")
        _check_restart(args)
    if args.metrics:
        _writable_dir(str(Path(args.metrics).resolve().parent), "--metrics (its directory)")
        args.metrics = str(Path(args.metrics).resolve())
    if args.plot:
        _check_plot(args)


def _check_plot(args):
    """--plot draws the ways compared after the run: refused where they are not, or where
    matplotlib (the cli extra, not the spark one) is missing, before Spark starts."""
    if Path(args.plot).suffix.lower() != ".png":
        raise JobError(f"--plot must name a .png file; got {args.plot!r}")
    problem = _matplotlib_problem()
    if problem:
        raise JobError(f"--plot needs matplotlib >= {MATPLOTLIB_AT_LEAST[0]}."
                       f"{MATPLOTLIB_AT_LEAST[1]}, {problem}: pip install \"skewgroup[cli]\"")
    if not any(kind in PYTHON_MERGED for kind, _ in args.agg) or not args.batches:
        kinds = ", ".join(f"{kind}:..." for kind in PYTHON_MERGED)
        given = " ".join(kind + (f":{column}" if column else "") for kind, column in args.agg)
        raise JobError(f"--plot draws the ways compared after the run, which the job runs "
                       f"with a Python aggregator (--agg {kinds}) and --batches; got --agg "
                       f"{given}{'' if args.batches else ' and no --batches'}")
    _writable_dir(str(Path(args.plot).resolve().parent), "--plot (its directory)")
    args.plot = str(Path(args.plot).resolve())


MATPLOTLIB_AT_LEAST = (3, 8)


def _matplotlib_problem():
    """Why matplotlib cannot draw the plot (not installed, too old), or None; read from its
    installed metadata, without importing it."""
    from importlib import metadata

    try:
        version = metadata.version("matplotlib")
    except metadata.PackageNotFoundError:
        return "which is not installed"
    numbers = tuple(int(part) for part in version.split(".")[:2] if part.isdigit())
    if numbers < MATPLOTLIB_AT_LEAST:
        return f"and {version} is installed"
    return None


def _has_data_files(directory):
    """Whether ``directory`` holds a file Spark reads: it skips names starting with '_' or '.'
    (_SUCCESS, .crc files, hidden files) at any depth. Stops at the first one."""
    root = Path(directory)
    return any(p.is_file() and not any(part.startswith(("_", "."))
                                       for part in p.relative_to(root).parts)
               for p in root.rglob("*"))


def describe_source(args):
    if args.source == "files":
        return f"the {args.format} files in --input {args.input}"
    return f"--source {args.source}"


def check_columns(args, types):
    """Every option naming a column names one of the source's, and a ``sample``'s row id is an
    integer column; else a JobError naming the option, the column and what there is.
    ``types``: the source's columns, each with its Spark type (simpleString)."""
    columns = list(types)
    references = [("--key", "--key", name) for name in args.key]
    references += [("--agg", f"--agg {kind}:{column}", name)
                   for kind, column in args.agg if column for name in column.split(",")]
    for option, given, name in references:
        if name not in columns:
            raise JobError(f"argument {given}{_defaulted(args, option)}: {name!r} is not a "
                           f"column of {describe_source(args)}; its columns are "
                           f"{', '.join(columns)}")
    for kind, column in args.agg:
        if kind == "sample":
            row_id = column.split(",")[1]
            if types[row_id] not in INTEGER_TYPES:
                integers = [c for c in columns if types[c] in INTEGER_TYPES]
                raise JobError(
                    f"argument --agg {kind}:{column}{_defaulted(args, '--agg')}: the row id "
                    f"{row_id!r} must be an integer column ({', '.join(INTEGER_TYPES)}); it is "
                    f"{types[row_id]}. The integer columns of {describe_source(args)}: "
                    f"{', '.join(integers) or 'none'}")


def _defaulted(args, option):
    return " (the default)" if option in args.defaulted else ""


def _writable_dir(path, option):
    """``path`` made absolute, created if missing, and proven writable by writing a file."""
    target = Path(path).resolve()
    try:
        target.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=target, prefix=".skewgroup-write-test"):
            pass
    except OSError as error:
        raise JobError(f"{option} must be a writable directory; {str(path)!r} is not "
                       f"({error.strerror or error})") from None
    return str(target)


def routing_config(args):
    """The options the job records in its checkpoint (``JOB_FILE``)."""
    return {"keys": list(args.key), "aggregates": [list(a) for a in args.agg],
            "strategy": args.strategy, "params": {k: v for k, v in sorted(args.params.items())},
            "workers": args.workers, "seed": args.seed, "plan": args.plan}


# What Spark's state in the checkpoint depends on, and the option that sets it. The other
# recorded options only route rows (soft state): a restart may change them.
STATE_OPTIONS = {"keys": "--key", "aggregates": "--agg"}


def _check_restart(args):
    saved_path = Path(args.checkpoint) / JOB_FILE
    if not saved_path.exists():
        return
    saved = json.loads(saved_path.read_text())
    ours = json.loads(json.dumps(routing_config(args)))
    changed = [k for k in STATE_OPTIONS if saved.get(k) != ours[k]]
    if not changed:
        return
    options = " and ".join(STATE_OPTIONS[k] for k in changed)
    what = ", ".join(f"{STATE_OPTIONS[k]} {saved.get(k)!r} -> {ours[k]!r}" for k in changed)
    raise JobError(
        f"checkpoint {args.checkpoint} was started with other {options} ({what}). Spark's state "
        f"in it holds those groups and aggregates; restart with the same {options}, or start a "
        f"new --checkpoint to change them (--workers, --strategy, --param and --seed may change "
        f"on a restart).")
