"""``--plot FILE.png``: each compared way's micro-batch seconds over the stream and the state it
holds after each micro-batch, drawn with matplotlib (the ``cli`` extra; the job's options check
it is installed before Spark starts)."""


# A marker and a dash a way: ways holding the same buffers draw nearly the same state line, and
# each must stay visible where they overlap.
STYLES = [{"marker": "o", "linestyle": "-"}, {"marker": "s", "linestyle": "--", "markersize": 8,
                                              "fillstyle": "none"},
          {"marker": "^", "linestyle": "-."}, {"marker": "x", "linestyle": ":", "markersize": 9},
          {"marker": "D", "linestyle": "-", "markersize": 4}]


def draw(path, measured, batches):
    """Write the PNG ``path`` of ``measured`` (way -> :class:`skewgroup.app.figures.Measurement`
    over the run's ``batches`` micro-batches)."""
    # The figure object alone, no pyplot: no GUI backend, no global state in a job's driver.
    from matplotlib.figure import Figure

    figure = Figure(figsize=(9, 7), layout="constrained")
    seconds_axes, state_axes = figure.subplots(2, 1, sharex=True)
    for (way, measurement), style in zip(measured.items(), STYLES * len(measured)):
        steps = range(1, len(measurement.seconds) + 1)
        seconds_axes.plot(steps, measurement.seconds, label=way, **style)
        held = [(step, b / 1e6) for step, b in zip(steps, measurement.state_bytes)
                if b is not None]
        state_axes.plot([s for s, _ in held], [mb for _, mb in held], label=way, **style)
    seconds_axes.set_title(f"The same {batches} micro-batches, each way from a fresh checkpoint "
                           f"into Spark's noop sink")
    seconds_axes.set_ylabel("micro-batch (s)")
    seconds_axes.set_ylim(bottom=0)
    state_axes.set_ylabel("state held on disk (MB)")
    state_axes.set_ylim(bottom=0)
    state_axes.set_xlabel("micro-batch")
    state_axes.xaxis.get_major_locator().set_params(integer=True)
    for axes in (seconds_axes, state_axes):
        axes.grid(alpha=0.3)
    seconds_axes.legend(loc="upper left", bbox_to_anchor=(1.01, 1))
    figure.savefig(path, format="png", dpi=110)
