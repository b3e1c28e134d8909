"""One frozen, validated configuration per strategy, with the papers' defaults.

A config holds a strategy's parameters only; the worker count ``n`` and the seed come with
``build``. Defaults that depend on ``n`` (thresholds such as θ = 1/(5n)) are ``None`` here and
resolved in ``build``. Every check names the parameter, the allowed values and the value given.
"""
from dataclasses import dataclass, fields
from typing import ClassVar, Optional, Tuple

from skewgroup._routing._validation import check_int, check_real

# The head of a stream over n workers: the keys with a share of at least 1 / (HEAD_DIVISOR n)
# (D-Choices paper §III), the default hot threshold θ and the head every balance figure uses.
HEAD_DIVISOR = 5

# Upper limits of parameters the native routers hold as C int or count tuples with (a tuple
# clock near 2**63 would wrap); without them a large value overflowed in the router's __init__.
C_INT_MAX = (1 << 31) - 1
CLOCK_MAX = 1 << 62


@dataclass(frozen=True)
class StrategyConfig:
    name: ClassVar[str] = ""
    supports_resize: ClassVar[bool] = False

    def params(self):
        """The parameters as a plain dict (JSON-serialisable)."""
        return {f.name: _plain(getattr(self, f.name)) for f in fields(self)}

    def build(self, workers, seed):
        raise NotImplementedError

    def state_bound(self, workers):
        """Upper bound on the router's state bytes, whatever the number of distinct keys (the
        formula sits beside the router: its ``state_bound``)."""
        from skewgroup._routing._router import router_state_bound

        return router_state_bound(workers)


def _plain(value):
    return list(value) if isinstance(value, tuple) else value


# --- baselines and PKG ---------------------------------------------------------------------


@dataclass(frozen=True)
class KGConfig(StrategyConfig):
    """Key grouping: worker = h_1(k), the baseline (Spark's own ``groupBy`` placement)."""

    name: ClassVar[str] = "kg"

    def build(self, workers, seed):
        from skewgroup._routing._basic import KeyGrouping

        return KeyGrouping(workers, seed)


@dataclass(frozen=True)
class SGConfig(StrategyConfig):
    """Shuffle grouping: round robin per source, regardless of the key (the baseline)."""

    name: ClassVar[str] = "sg"

    def build(self, workers, seed):
        from skewgroup._routing._basic import ShuffleGrouping

        return ShuffleGrouping(workers, seed)


@dataclass(frozen=True)
class PKGConfig(StrategyConfig):
    """Partial key grouping (d-choices-w-choices §II): the less loaded of h_1(k), h_2(k)."""

    name: ClassVar[str] = "pkg"

    def build(self, workers, seed):
        from skewgroup._routing._basic import PartialKeyGrouping

        return PartialKeyGrouping(workers, seed)


# --- head/tail strategies of d-choices-w-choices ---------------------------------------------


@dataclass(frozen=True)
class _HeadConfig(StrategyConfig):
    """Shared by D-Choices, W-Choices and Round-Robin (d-choices-w-choices §III).

    Parameters
    ----------
    theta : float or None, default None -> 1/(5n)
        Head threshold: a key is in the head H when its estimated frequency f_k/m >= theta.
    capacity : int or None, default None -> ceil(2/theta)
        SpaceSaving counters. With k counters every estimate is within m/k, so 2/θ counters
        give error <= θ/2 (docs/algorithms.md#head-and-tail).
    """

    theta: Optional[float] = None
    capacity: Optional[int] = None

    def __post_init__(self):
        if self.theta is not None:
            check_real("theta", self.theta, 0.0, 1.0, closed="right")
        if self.capacity is not None:
            check_int("capacity", self.capacity, 1, 1 << 24)

    def _resolved(self, workers):
        theta = self.theta if self.theta is not None else 1.0 / (HEAD_DIVISOR * workers)
        capacity = self.capacity if self.capacity is not None else int(-(-2.0 // theta))
        return theta, capacity

    def state_bound(self, workers):
        from skewgroup._routing._heavy import head_tail_state_bound

        return head_tail_state_bound(workers, self._resolved(workers)[1])


@dataclass(frozen=True)
class DChoicesConfig(_HeadConfig):
    """D-Choices (d-choices-w-choices §III-IV): head keys Greedy-d, tail PKG.

    Parameters
    ----------
    epsilon : float, default 1e-4
        Target imbalance ε in Proposition 4.1 (eq. 3) used by FINDOPTIMALCHOICES.
    update_every : int, default 1000
        Tuples between two runs of FINDOPTIMALCHOICES over the current SpaceSaving head. The
        paper calls it per head tuple; its answer only moves with the head's frequencies, so
        we refresh it on a tuple-count clock (deterministic, chunking-invariant).
    """

    name: ClassVar[str] = "dchoices"
    epsilon: float = 1e-4
    update_every: int = 1000

    def __post_init__(self):
        super().__post_init__()
        check_real("epsilon", self.epsilon, 0.0, 1.0, closed="neither")
        check_int("update_every", self.update_every, 1, C_INT_MAX)

    def build(self, workers, seed):
        from skewgroup._routing._heavy import DChoices

        theta, capacity = self._resolved(workers)
        return DChoices(workers, seed, theta, capacity, self.epsilon, self.update_every)

    def state_bound(self, workers):
        from skewgroup._routing._heavy import dchoices_state_bound

        return dchoices_state_bound(workers, *self._resolved(workers))


@dataclass(frozen=True)
class WChoicesConfig(_HeadConfig):
    """W-Choices (d-choices-w-choices §III): head keys to the least loaded of all n, tail PKG."""

    name: ClassVar[str] = "wchoices"

    def build(self, workers, seed):
        from skewgroup._routing._heavy import WChoices

        theta, capacity = self._resolved(workers)
        return WChoices(workers, seed, theta, capacity)


@dataclass(frozen=True)
class RoundRobinConfig(_HeadConfig):
    """Round-Robin (the paper's "RR" baseline): head keys round robin over all n, tail PKG."""

    name: ClassVar[str] = "roundrobin"

    def build(self, workers, seed):
        from skewgroup._routing._heavy import RoundRobinHead

        theta, capacity = self._resolved(workers)
        return RoundRobinHead(workers, seed, theta, capacity)


# --- Pd-Stream -------------------------------------------------------------------------------


@dataclass(frozen=True)
class PdStreamConfig(StrategyConfig):
    """Pd-Stream (pd-stream §V): sampling window, binomial hot-key probability, routing table.

    Parameters
    ----------
    alpha : int, default 4
        Window length N = alpha * n / 2 (§V-B; alpha = 4 gives N = 2n).
    window : int or None, default None -> alpha * n // 2
        Sets N directly (docs/algorithms.md#pdstream: N = 4n fits the paper's RF figures better).
    p_hat : float, default 0.99
        Expected probability P̂ of Algorithm 1 (Table III is reproduced by 0.99, not 99.9 %).
    epsilon : float, default 1e-4
        Binary-search margin of Algorithm 1.
    """

    name: ClassVar[str] = "pdstream"
    alpha: int = 4
    window: Optional[int] = None
    p_hat: float = 0.99
    epsilon: float = 1e-4

    def __post_init__(self):
        check_int("alpha", self.alpha, 1, 1 << 16)
        if self.window is not None:
            check_int("window", self.window, 1, 1 << 24)
        check_real("p_hat", self.p_hat, 0.0, 1.0, closed="neither")
        check_real("epsilon", self.epsilon, 0.0, 0.5, closed="neither")

    def window_length(self, workers):
        return self.window if self.window is not None else max(1, self.alpha * workers // 2)

    def state_bound(self, workers):
        from skewgroup._routing._pdstream import pdstream_state_bound

        return pdstream_state_bound(workers, self.window_length(workers))

    def build(self, workers, seed):
        from skewgroup._routing._pdstream import PdStream

        return PdStream(workers, seed, self.window_length(workers), self.p_hat, self.epsilon)


# --- FISH ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class FishConfig(StrategyConfig):
    """FISH (fish §4-5): decayed top-K hot keys, CHK choice counts, consistent-hash candidates.

    Parameters
    ----------
    epoch : int, default 1000
        N_epoch, tuples per epoch; counters are multiplied by ``alpha`` at each epoch end.
    alpha : float, default 0.2
        Decay factor of the counters.
    theta : float or None, default None -> 1/(4n)
        Hot threshold on the decayed frequency f_k (hot when f_k >= theta). The default
        follows n when the partitioner is resized.
    k_max : int, default 1000
        Counters (top-K_max with ReplaceMin).
    virtual_nodes : int, default 100
        Ring points per worker.
    d_min : int, default 2
        Fewest candidates a hot key gets.
    capacities : tuple of float or None, default None -> all equal
        Per-worker processing capacity P_w of Algorithm 3.
    interval : int or None, default None
        T, tuples between decays of the per-worker wait estimate C_w; None keeps C_w as the
        plain load, which with equal capacities reduces Algorithm 3 to least loaded.
    """

    name: ClassVar[str] = "fish"
    supports_resize: ClassVar[bool] = True
    epoch: int = 1000
    alpha: float = 0.2
    theta: Optional[float] = None
    k_max: int = 1000
    virtual_nodes: int = 100
    d_min: int = 2
    capacities: Optional[Tuple[float, ...]] = None
    interval: Optional[int] = None

    def __post_init__(self):
        check_int("epoch", self.epoch, 1, C_INT_MAX)
        check_real("alpha", self.alpha, 0.0, 1.0, closed="right")
        if self.theta is not None:
            check_real("theta", self.theta, 0.0, 1.0, closed="right")
        check_int("k_max", self.k_max, 1, 1 << 20)
        check_int("virtual_nodes", self.virtual_nodes, 1, 1 << 14)
        check_int("d_min", self.d_min, 1, C_INT_MAX)
        if self.capacities is not None:
            caps = tuple(self.capacities)
            for i, c in enumerate(caps):
                check_real(f"capacities[{i}]", c, 0.0, None, closed="neither")
            object.__setattr__(self, "capacities", tuple(float(c) for c in caps))
        if self.interval is not None:
            check_int("interval", self.interval, 1, CLOCK_MAX)

    def state_bound(self, workers):
        from skewgroup._routing._fish import fish_state_bound

        return fish_state_bound(workers, self.theta, self.k_max, self.virtual_nodes)

    def build(self, workers, seed):
        from skewgroup._routing._fish import Fish

        if self.capacities is not None and len(self.capacities) != workers:
            raise ValueError(
                f"The 'capacities' parameter must give one capacity per worker ({workers}). "
                f"Got {len(self.capacities)} values instead."
            )
        # theta None: Fish uses 1/(4n) and keeps it at 1/(4n) across resize().
        return Fish(workers, seed, self.epoch, self.alpha, self.theta, self.k_max,
                    self.virtual_nodes, self.d_min, self.capacities, self.interval)


# --- FlexD -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class FlexDConfig(StrategyConfig):
    """FlexD (flexd §4.3-4.4, Algorithm 1): per-segment SpaceSaving, worker sets grown by δ.

    The text of the paper does not hold its Table 1 (an image), so l, f and ε are our choice
    under §4.3's constraint 0 < ε < f <= 1 (see the compiled ``_flexd``): a key of frequency p
    ends with about 2 + log_δ(p / f) workers, so f must be small for a hot key to reach the
    p·n workers balance needs. With these defaults Zipf z = 1.4 is balanced at n = 64; larger
    n or skew are split less than W-Choices would, by design (a small replication factor).
    Time is a tuple count, never the wall clock, so runs are reproducible.

    Parameters
    ----------
    delta : float, default 1.5
        Growth factor δ > 1 of a key's T_f each time it gains a worker (§6, Fig. 7).
    segment : int, default 100_000
        Segment length l in tuples; SpaceSaving restarts every segment (§4.3).
    threshold : float, default 5e-5
        The hot threshold f on f_t = (count of k in the segment) / l: 5 occurrences in a
        segment of 100,000. Also T_f[k]'s start.
    capacity : int or None, default None -> ceil(2 / threshold)
        SpaceSaving counters ⌈1/ε⌉; the default ε = f/2 keeps an unmonitored key's estimate
        below f, so no key turns hot by estimation error alone (40,000 counters).
    prune_every : int, default 1_000_000
        Tuples between two prunings of the key tables (the paper's "every 10 min").
    prune_keep : int, default 50_000
        Keys a pruning keeps, the most recently used (the paper's "top 50k records").
    """

    name: ClassVar[str] = "flexd"
    delta: float = 1.5
    segment: int = 100_000
    threshold: float = 5e-5
    capacity: Optional[int] = None
    prune_every: int = 1_000_000
    prune_keep: int = 50_000

    def __post_init__(self):
        check_real("delta", self.delta, 1.0, None, closed="neither")
        check_int("segment", self.segment, 1, 1 << 40)
        check_real("threshold", self.threshold, 0.0, 1.0, closed="right")
        if self.capacity is not None:
            check_int("capacity", self.capacity, 1, 1 << 24)
        check_int("prune_every", self.prune_every, 1, CLOCK_MAX)
        check_int("prune_keep", self.prune_keep, 1, 1 << 31)

    def _capacity(self):
        if self.capacity is not None:
            return self.capacity
        return min(1 << 24, int(-(-2.0 // self.threshold)))

    def state_bound(self, workers):
        from skewgroup._routing._flexd import flexd_state_bound

        return flexd_state_bound(workers, self.delta, self.segment, self.threshold,
                                 self._capacity(), self.prune_every, self.prune_keep)

    def build(self, workers, seed):
        from skewgroup._routing._flexd import FlexD

        return FlexD(workers, seed, self.delta, self.segment, self.threshold, self._capacity(),
                     self.prune_every, self.prune_keep)


# --- DKG -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class DKGConfig(StrategyConfig):
    """DKG (dkg §4): generational key space; only keys in Old space scale out.

    The paper's clocks (the Key Space Manager's 15 s / 60 s cycles and the 15 s cold start,
    §4.1.3, Algorithm 5) are tuple counts here, never the wall clock, so runs are reproducible.
    The defaults take 1,000 tuples per second per source, the order of the paper's own rate
    (Table 3: DKG 4,529 rec/s with 5 spouts, about 900 per source).

    Parameters
    ----------
    expected_keys : int, default 100
        Expected distinct keys E, set by the administrator (the paper uses 100): Old space
        holds 10 %, Teenage 40 %, Baby 50 % of it after each cycle (§4.1.2).
    promote_every : int, default 15_000
        P_1, tuples between Baby -> Teenage promotions (Algorithm 1, the paper's 15 s).
    promote_every_old : int, default 60_000
        P_2, tuples between Teenage -> Old promotions (Algorithm 2, the paper's 60 s).
    warmup : int, default 15_000
        Tuples routed before any scale out (isWarmUp of Algorithm 5, the paper's 15 s).
    """

    name: ClassVar[str] = "dkg"
    expected_keys: int = 100
    promote_every: int = 15_000
    promote_every_old: int = 60_000
    warmup: int = 15_000

    def __post_init__(self):
        check_int("expected_keys", self.expected_keys, 1, 1 << 24)
        check_int("promote_every", self.promote_every, 1, 1 << 40)
        check_int("promote_every_old", self.promote_every_old, 1, 1 << 40)
        check_int("warmup", self.warmup, 0, CLOCK_MAX)

    def state_bound(self, workers):
        from skewgroup._routing._dkg import dkg_state_bound

        return dkg_state_bound(workers, self.expected_keys, self.promote_every)

    def build(self, workers, seed):
        from skewgroup._routing._dkg import DKG

        return DKG(workers, seed, self.expected_keys, self.promote_every,
                   self.promote_every_old, self.warmup)


# --- adaptive (ours, docs/adaptive.md) -------------------------------------------------------


@dataclass(frozen=True)
class AdaptiveConfig(StrategyConfig):
    """Adaptive (docs/adaptive.md): the tail on one hash, hot keys water-filling the gaps.

    Tail keys go to their hash worker h_1(k), as key grouping does (RF contribution 1). A key
    whose decayed share reaches θ is hot: it keeps to a set of workers that starts as
    {h_1(k)} and grows by the least loaded worker of all only when the set's least loaded
    worker is more than ``slack`` tuples above the mean load, up to
    ⌈p̂/H·n·(1 + headroom)⌉ + 1 workers (the lower bound ⌈p·n⌉ plus a margin; see ``burst``).
    Time is a tuple count, never the wall clock.

    Parameters
    ----------
    theta : float or None, default None -> 1/(32n)
        Hot threshold on a key's decayed share c_k / total. Keys below it are hashed; at
        1/(32n) the hashed tail of a Zipf z = 1.0 stream stays below the mean load on every
        worker (docs/adaptive.md, "Why it should reach the targets").
    epoch : int or None, default None -> ceil(8 / theta)
        Tuples between two decays of the counters (FISH §4) and prunings of the table; the
        decayed total settles near epoch / (1 - decay), so a hot key shows about 16
        occurrences at the defaults.
    decay : float, default 0.5
        Factor of every counter and of the total at each epoch end, in (0, 1]; 1 never forgets.
    slack : int, default 4
        Tuples above the mean load that a hot key's hash worker may be before the key leaves
        it, and its set's best worker before the set grows (up to its cap; see ``burst``).
        Smaller balances tighter and grows sets sooner.
    headroom : float, default 0.1
        A hot key may hold up to ⌈p̂·n·(1 + headroom)⌉ + 1 workers, p̂ its share (the decayed
        one or its rate since it got its set, whichever is larger).
    capacity : int or None, default None -> ceil(2 / theta)
        SpaceSaving counters: every estimate is within θ/2 of the total of the truth, so no
        key with a share below θ/2 is ever hot by estimation error.
    burst : int, default 12
        0 or at least ``slack`` (docs/adaptive.md, "Pairs against the mean"). The set of a
        hot key whose share is below its set's room grows only when its best worker is
        ``slack`` above the mean load or ``burst`` above the least load; a set whose best
        worker is ``burst`` above the mean (``slack`` for a key that fills its set) grows past
        its cap, which lags a dense burst. With 0 every set grows against the least load and
        caps are strict (with ``slack=2``).
    hold : int, default 0 (off)
        0 or at least ``slack``: a hot key whose share is below a worker's room for hot
        tuples keeps its hash worker up to ``hold`` tuples above the mean load (else
        ``slack``). ``hold=12`` lowers RF on natural-order streams by 0.04-0.06, but the
        windows of 1,000·n tuples after a drift reach LI 1-4e-2 (docs/adaptive.md).
    """

    name: ClassVar[str] = "adaptive"
    theta: Optional[float] = None
    epoch: Optional[int] = None
    decay: float = 0.5
    slack: int = 4
    headroom: float = 0.1
    capacity: Optional[int] = None
    burst: int = 12
    hold: int = 0
    doorkeeper: Optional[int] = None

    def __post_init__(self):
        if self.theta is not None:
            check_real("theta", self.theta, 0.0, 1.0, closed="right")
        if self.epoch is not None:
            check_int("epoch", self.epoch, 1, CLOCK_MAX)
        check_real("decay", self.decay, 0.0, 1.0, closed="right")
        check_int("slack", self.slack, 0, CLOCK_MAX)
        check_real("headroom", self.headroom, 0.0, 1e6)
        if self.capacity is not None:
            check_int("capacity", self.capacity, 1, 1 << 24)
        check_int("burst", self.burst, 0, CLOCK_MAX)
        check_int("hold", self.hold, 0, CLOCK_MAX)
        if self.doorkeeper is not None:
            check_int("doorkeeper", self.doorkeeper, 0, 1 << 24)
        for name in ("burst", "hold"):
            value = getattr(self, name)
            if value and value < self.slack:
                raise ValueError(f"The {name!r} parameter must be 0 or at least slack = "
                                 f"{self.slack}. Got {value!r} instead.")

    def _resolved(self, workers):
        """(theta, epoch, capacity) with the defaults that follow n."""
        theta = self.theta if self.theta is not None else 1.0 / (32 * workers)
        epoch = self.epoch if self.epoch is not None else min(CLOCK_MAX, int(-(-8.0 // theta)))
        capacity = (self.capacity if self.capacity is not None
                    else min(1 << 24, int(-(-2.0 // theta))))
        return theta, epoch, capacity

    def _doorkeeper_slots(self, workers):
        """Doorkeeper slots: ``doorkeeper``, by default ⌈4/θ⌉ (capped at 2^24)."""
        if self.doorkeeper is not None:
            return self.doorkeeper
        theta = self._resolved(workers)[0]
        return min(1 << 24, int(-(-4.0 // theta)))

    def state_bound(self, workers):
        from skewgroup._routing._adaptive import adaptive_state_bound

        theta, epoch, capacity = self._resolved(workers)
        return adaptive_state_bound(workers, theta, epoch, capacity,
                                    self._doorkeeper_slots(workers))

    def build(self, workers, seed):
        from skewgroup._routing._adaptive import Adaptive

        theta, epoch, capacity = self._resolved(workers)
        return Adaptive(workers, seed, theta, epoch, self.decay, self.slack, self.headroom,
                        capacity, self.burst, self.hold, self._doorkeeper_slots(workers))


STRATEGIES = {
    cls.name: cls
    for cls in (
        KGConfig, SGConfig, PKGConfig, DChoicesConfig, WChoicesConfig, RoundRobinConfig,
        PdStreamConfig, FishConfig, FlexDConfig, DKGConfig, AdaptiveConfig,
    )
}


def make_config(strategy, params):
    """The validated config for ``strategy`` with ``params``; errors name what is allowed."""
    if not isinstance(strategy, str):
        raise TypeError(
            f"The 'strategy' parameter must be a str among {sorted(STRATEGIES)}. "
            f"Got {strategy!r} of type {type(strategy).__name__} instead."
        )
    cls = STRATEGIES.get(strategy)
    if cls is None:
        raise ValueError(
            f"The 'strategy' parameter must be one of {sorted(STRATEGIES)}. Got {strategy!r} instead."
        )
    allowed = [f.name for f in fields(cls)]
    unknown = sorted(set(params) - set(allowed))
    if unknown:
        raise TypeError(
            f"Unknown parameter(s) {unknown} for strategy {strategy!r}; "
            f"it takes {allowed or 'no parameters'}."
        )
    return cls(**params)


__all__ = ["STRATEGIES", "make_config"] + [c.__name__ for c in STRATEGIES.values()]
