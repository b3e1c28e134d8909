"""The skewgroup streaming job, an application above the Spark layer: ``skewgroup run [options]``
or ``spark-submit skewgroup/app/job.py``.

With no options it runs on local Spark over a generated stream shaped as production's
(``sessions``: 4 hot keys with 30 % of the rows beside sessions that keep arriving, 75k new
ones per micro-batch of 100k rows; 8 workers, adaptive) a uniform sample of 5 rows per key
(``sample:amount,id``, :class:`skewgroup.aggregators.RowSample`: the rows whose id hashes
smallest), whose buffers skew_group merges in Python. Spark has no function for it with bounded
state: its way keeps every row of a key (``collect_list``) and sorts and slices after, one of
the ways below. Each micro-batch shows the busiest worker's rows under plain groupBy's hash
placement beside skew_group's. It stops after 20 batches; then the summary runs, on the same
micro-batches, skew_group and the hand-written ways a Spark expert would write for the same
aggregate (:mod:`baselines`: bucketed ``applyInPandasWithState``; a round-robin ``mapInArrow``
partial with the bucketed merge; ``foreachBatch`` into a table; Spark's own functions), prints
each one's median micro-batch and names the fastest, whichever it is. ``--agg score:COL``
instead runs the sum of a per-row pure-Python function (:func:`workload.score_row`), whose
busiest task is measured under skew_group and projected for groupBy; ``--agg
lsq:y,x1,x2,x3`` a least-squares fit per key (:class:`skewgroup.aggregators.LeastSquares`; each
key's rows follow a model of its own, :func:`workload.draw_features`), which Spark's way
computes as sums of the normal equations' terms. Every piece can be swapped::

    skewgroup run --source files --input events/ --format parquet --max-files-per-trigger 1 \\
        --key user --agg count --agg sum:amount --strategy pdstream --workers 16 \\
        --trigger availableNow --checkpoint ck/ --sink parquet --output out/

Sources: ``sessions`` / ``zipf`` / ``drift`` (generated: keys drawn by a counter-based hash of
the row number, so a replayed micro-batch draws the same keys, and the row number as ``id``;
``sessions`` hot keys beside sessions that keep arriving, ``zipf`` a Zipf law, ``drift`` one
whose hot keys are replaced every ``--drift-every`` rows, as FISH §6.1's time-evolving
streams), ``files`` (a directory of parquet / CSV / JSON files) and ``rate`` (Spark's rate
source: ``timestamp``, ``value``).
Sinks: ``memory`` (complete mode; the top rows are printed at the end), ``console`` (update
mode) and ``parquet`` (update mode through ``foreachBatch``: micro-batch ``b`` writes its updated
rows to ``OUTPUT/batch=b``, overwriting on replay, so with the checkpoint the output is exactly
once; :func:`query.final_result` reads the latest row per key).

Exactly once. Spark's checkpoint holds the source offsets and the merge state; a job killed at
any point and started again on the same ``--checkpoint`` replays the unfinished micro-batch and
goes on, and the parquet sink's per-batch overwrite makes the replay idempotent. The routers are
soft state, outside the checkpoint (``skewgroup.spark._routers``): snapshots by Spark's query
id let a restarted job route on as before; without them (another machine) only balance suffers
for a while, never the result.

Restarts. The job records its options (keys, aggregates, strategy, parameters, workers, seed)
in ``CHECKPOINT/skewgroup-job.json``. Spark's state in the checkpoint holds the groups and the
aggregates: a restart with another ``--key`` or ``--agg`` is refused. Everything else only
routes rows and may change: the merge is keyed by the grouping key, not by worker, so a restart
with another ``--workers`` (or ``--strategy``, ``--param``, ``--seed``) stays exactly once;
FISH's routers resize to the new number of workers, the others start fresh.

Modules: ``options`` (the parser and every check of the options, before pyspark is imported),
``workload`` (the generated keys and the aggregates an ``--agg`` kind names), ``sources``,
``query`` (the query and its sinks), ``baselines`` (the hand-written ways, measured on the
same micro-batches; the benches' too), ``display`` (the live table and the summary) and ``main``
(the session and the run). It uses the Spark layer's public API (``skew_group``, ``agg``,
``balance``), and two facts of its private modules: the stream merge's bucket count, which the
hand-written ways share (``_stream_merge.BUCKETS``), and the session started outside the
checkout (``_session.spark_session``).
"""
