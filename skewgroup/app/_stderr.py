"""The local JVM's stderr, without the tracebacks of Python workers cut off by a stopped query.

Why. Stopping a streaming query cancels the micro-batch that runs at that moment (the job stops
after ``--batches``, and back-to-back batches leave it no moment between two of them). Spark
then asks the Python daemon to kill each cancelled task's worker and closes the worker's socket
at once; a worker still writing its results before the kill arrives gets ``BrokenPipeError``
(or ``ConnectionResetError``), and pyspark's daemon prints its traceback before the worker exits
(pyspark/daemon.py, ``manager``). Nothing failed: the batch was cancelled on purpose (a job
started again on its checkpoint redoes it). In local mode the workers' stderr is the JVM's,
which is this process's, so the user saw those tracebacks at the end of many runs (2 of 7 on
a 2-core machine).

A second message of the same stop: Spark's stream thread, interrupted by ``stop()``, asks
whether the error it caught is that interruption by matching a regular expression against the
cancelled job's message (``StreamExecution.isInterruptionException``); on a long message Java's
recursive regex matcher overflows the thread's stack, and the JVM prints
``Exception in thread "stream execution thread for ..." java.lang.StackOverflowError`` and a
thousand ``java.util.regex`` frames (about half the job's runs on a 2-core machine, pyspark
4.3). The query is stopped already; its batch was cancelled and is redone from the checkpoint.

A third, at every start: PySpark's worker that initialises a ``transformWithStateInPandas``
stage on the driver (pyspark/sql/streaming/transform_with_state_driver_worker.py, ``main``)
prints its progress with ``print`` (``Starting Streaming TransformWithStateInPandas Python
worker.`` and four more lines, each followed by an empty one), which reaches the JVM's stderr:
nine lines of a normal run that say nothing to its user. They are left out, each with its empty
line; an error of that worker is a traceback, which passes.

A fourth, at every start: two warnings about the machine, not the job. The JVM names the
incubating module Spark's launcher adds (``WARNING: Using incubator modules:
jdk.incubator.vector``), and Hadoop's ``NativeCodeLoader`` warns through log4j, while the
session starts and before the job can set a log level, that it runs without Hadoop's native
library (Spark's default on any machine without it). Both lines are left out; any other line
of a start passes.

The causes are in Spark (the order of closing and killing; the regex; the prints) and their output does not
go through log4j, so it cannot be turned off by a log level. Instead, when this process
launches the JVM, the JVM's stderr is a pipe that a thread copies to the real stderr line by line, leaving out
exactly those tracebacks and that overflow, and only once the job has said it is stopping the
query. Everything else, including any other traceback or Java error, passes through unchanged.
Workers cut off at the same moment write their tracebacks line by line into the same pipe, so
their lines may interleave: the tail of one (the daemon's frames and the hang-up) can follow
the end of another, and is recognised as such a block too.
"""
import os
import sys
import threading

_HANGUPS = (b"BrokenPipeError", b"ConnectionResetError")
_DAEMON_FRAME = b"pyspark/daemon.py"
# pyspark/daemon.py prints this line before the traceback when the last flush fails.
_FLUSH_FAILED = b"PySpark daemon failed to flush"
_TRACEBACK = b"Traceback (most recent call last):"
_STREAM_THREAD = b'Exception in thread "stream execution thread for '
_OVERFLOW = b"java.lang.StackOverflowError"
# The frames of Spark's interruption check: the regex engine's, Scala's Regex, the check itself.
_STOP_CHECK_FRAMES = (b"java.util.regex.", b"scala.util.matching.Regex", b".StreamExecution",
                      b"... ")
_MACHINE_WARNINGS = (b"WARNING: Using incubator modules: jdk.incubator.vector",
                     b" WARN NativeCodeLoader: Unable to load native-hadoop library")
_TWS_DRIVER_WORKER = (b"Starting Streaming TransformWithStateInPandas Python worker",
                      b"Streaming TransformWithStateInPandas Python worker ")


def _is_daemon_frame(line):
    # A frame of the daemon outside any block: the rest of a hang-up traceback whose first
    # lines went into another one's. Each worker writes its traceback line by line (stderr is
    # line-buffered), so two workers cut off at once interleave their lines.
    return line[:1] in (b" ", b"\t") and _DAEMON_FRAME in line


def _is_machine_warning(line):
    # The JVM's line starts with its text; log4j's carries a timestamp before " WARN ".
    return line.startswith(_MACHINE_WARNINGS[0]) or _MACHINE_WARNINGS[1] in line


def is_worker_hangup(block):
    """Whether ``block`` (lines of one traceback) is pyspark's daemon reporting that its
    worker's socket to the JVM was closed."""
    return (block[-1].startswith(_HANGUPS)
            and any(_DAEMON_FRAME in line for line in block))


def is_stop_check_overflow(block):
    """Whether ``block`` (a Java error's header line and its frames) is the stream thread's
    stack overflow in Spark's check for an interruption by stop()."""
    return (block[0].startswith(_STREAM_THREAD) and _OVERFLOW in block[0]
            and all(any(f in line for f in _STOP_CHECK_FRAMES) for line in block[1:]))


def copy_without_hangups(lines, out, stopping):
    """Copy ``lines`` (bytes, each ending in a newline) to ``out``, leaving out PySpark's
    stateful driver worker's progress lines and the start's two machine warnings, and worker
    hang-up tracebacks and the stream thread's stop-check overflow once ``stopping`` (a
    threading.Event) is set. A traceback is held back until its exception line (the first line
    that is not indented after its frames) decides; a Java error until its frames end."""
    held, java = [], []
    after_progress = False
    for line in lines:
        if java:
            if line[:1] in (b" ", b"\t"):
                java.append(line)
                continue
            # The error's frames end here; the line that ends them is checked as any other
            # (a stateful stage started after the stop prints its progress next).
            if not (stopping.is_set() and is_stop_check_overflow(java)):
                out.write(b"".join(java))
            java = []
        if after_progress and line == b"\n":     # the empty line each progress line ends with
            after_progress = False
            continue
        after_progress = False
        if not held and line.startswith(_TWS_DRIVER_WORKER):
            after_progress = True
            continue
        if not held and _is_machine_warning(line):
            continue
        if not held and line.startswith(_STREAM_THREAD):
            java = [line]
            continue
        if not held and not (line.startswith((_TRACEBACK, _FLUSH_FAILED))
                             or _is_daemon_frame(line)):
            out.write(line)
            continue
        held.append(line)
        if line.startswith((_TRACEBACK, _FLUSH_FAILED)) or line[:1] in (b" ", b"\t"):
            continue                    # the block goes on: its header and its frames
        if not (stopping.is_set() and is_worker_hangup(held)):
            out.write(b"".join(held))
        held = []
    if java and not (stopping.is_set() and is_stop_check_overflow(java)):
        out.write(b"".join(java))
    if held:
        out.write(b"".join(held))


class JvmStderr:
    """``with JvmStderr() as stderr: SparkSession.builder...getOrCreate()``: a JVM launched in
    the block writes its stderr through the filter; ``stderr.stopping.set()`` before stopping a
    query. Only on POSIX and only for a JVM this process launches (not under spark-submit,
    whose JVM is this process's parent)."""

    def __init__(self):
        self.stopping = threading.Event()
        self._saved = None

    def __enter__(self):
        if os.name != "posix":
            return self
        read_end, write_end = os.pipe()
        sys.stderr.flush()
        self._saved = os.dup(2)
        # The copy starts before the JVM does: a JVM writing into a full pipe would block.
        threading.Thread(target=self._copy, args=(read_end, os.dup(self._saved)),
                         name="skewgroup-jvm-stderr", daemon=True).start()
        os.dup2(write_end, 2)           # what the JVM, a child started now, inherits as stderr
        os.close(write_end)
        return self

    def __exit__(self, *exc):
        if self._saved is not None:
            sys.stderr.flush()
            os.dup2(self._saved, 2)     # this process writes to the real stderr again
            os.close(self._saved)
            self._saved = None
        return False

    def _copy(self, read_end, target):
        with os.fdopen(read_end, "rb") as lines, os.fdopen(target, "wb", buffering=0) as out:
            copy_without_hangups(lines, out, self.stopping)
