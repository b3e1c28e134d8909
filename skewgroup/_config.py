"""One frozen, validated configuration per strategy, with the papers' defaults.

A config holds a strategy's parameters only; the worker count ``n`` and the seed come with
``build``. Defaults that depend on ``n`` (thresholds such as θ = 1/(5n)) are ``None`` here and
resolved in ``build``. Every check names the parameter, the allowed values and the value given.
"""
from dataclasses import asdict, dataclass, fields
from typing import ClassVar, Optional, Tuple

from skewgroup._validation import check_int, check_real

# Bytes of state per element, used by the documented state bounds (tests check them).
LOAD_VECTOR_BYTES = 8       # one int64 load per worker
KEYMAP_SLOT_BYTES = 16      # key + value; a KeyMap keeps load <= 1/2, so <= 4 slots per live key
SPACESAVING_COUNTER_BYTES = 64 + 4 * KEYMAP_SLOT_BYTES  # counter arrays + its index slots


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
        """Upper bound on the router's state bytes, whatever the number of distinct keys."""
        return LOAD_VECTOR_BYTES * workers + 64


def _plain(value):
    return list(value) if isinstance(value, tuple) else value


# --- baselines and PKG ---------------------------------------------------------------------


@dataclass(frozen=True)
class KGConfig(StrategyConfig):
    """Key grouping: worker = h_1(k), the baseline (Spark's own ``groupBy`` placement)."""

    name: ClassVar[str] = "kg"

    def build(self, workers, seed):
        from skewgroup._basic import KeyGrouping

        return KeyGrouping(workers, seed)


@dataclass(frozen=True)
class SGConfig(StrategyConfig):
    """Shuffle grouping: round robin per source, regardless of the key (the baseline)."""

    name: ClassVar[str] = "sg"

    def build(self, workers, seed):
        from skewgroup._basic import ShuffleGrouping

        return ShuffleGrouping(workers, seed)


@dataclass(frozen=True)
class PKGConfig(StrategyConfig):
    """Partial key grouping (d-choices-w-choices §II): the less loaded of h_1(k), h_2(k)."""

    name: ClassVar[str] = "pkg"

    def build(self, workers, seed):
        from skewgroup._basic import PartialKeyGrouping

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
        give error <= θ/2 (ALGORITHMS.md).
    """

    theta: Optional[float] = None
    capacity: Optional[int] = None

    def __post_init__(self):
        if self.theta is not None:
            check_real("theta", self.theta, 0.0, 1.0, closed="right")
        if self.capacity is not None:
            check_int("capacity", self.capacity, 1, 1 << 24)

    def _resolved(self, workers):
        theta = self.theta if self.theta is not None else 1.0 / (5 * workers)
        capacity = self.capacity if self.capacity is not None else int(-(-2.0 // theta))
        return theta, capacity

    def state_bound(self, workers):
        """Loads plus SpaceSaving's k counters: 8n + 128k bytes (k = 10n by default)."""
        _, capacity = self._resolved(workers)
        return LOAD_VECTOR_BYTES * workers + SPACESAVING_COUNTER_BYTES * capacity + 256


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
        check_int("update_every", self.update_every, 1)

    def build(self, workers, seed):
        from skewgroup._heavy import DChoices

        theta, capacity = self._resolved(workers)
        return DChoices(workers, seed, theta, capacity, self.epsilon, self.update_every)


@dataclass(frozen=True)
class WChoicesConfig(_HeadConfig):
    """W-Choices (d-choices-w-choices §III): head keys to the least loaded of all n, tail PKG."""

    name: ClassVar[str] = "wchoices"

    def build(self, workers, seed):
        from skewgroup._heavy import WChoices

        theta, capacity = self._resolved(workers)
        return WChoices(workers, seed, theta, capacity)


@dataclass(frozen=True)
class RoundRobinConfig(_HeadConfig):
    """Round-Robin (the paper's "RR" baseline): head keys round robin over all n, tail PKG."""

    name: ClassVar[str] = "roundrobin"

    def build(self, workers, seed):
        from skewgroup._heavy import RoundRobinHead

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
        Sets N directly (ALGORITHMS.md: N = 4n matches the paper's RF figures more closely).
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
        """Window N hashes, N routing-table slots of n candidates (a list and a bitset), a
        KeyMap of <= N keys: 8n + N (8 + 4n + 8 ceil(n/64) + 8 + 4 + 4 * 16) bytes; N = 2n by
        default, so O(n^2)."""
        window = self.window_length(workers)
        words = (workers + 63) // 64
        return (LOAD_VECTOR_BYTES * workers
                + window * (8 + 4 * workers + 8 * words + 8 + 4 + 4 * KEYMAP_SLOT_BYTES) + 256)

    def build(self, workers, seed):
        from skewgroup._pdstream import PdStream

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
        Hot threshold on the decayed frequency f_k.
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
        check_int("epoch", self.epoch, 1)
        check_real("alpha", self.alpha, 0.0, 1.0, closed="right")
        if self.theta is not None:
            check_real("theta", self.theta, 0.0, 1.0, closed="right")
        check_int("k_max", self.k_max, 1, 1 << 20)
        check_int("virtual_nodes", self.virtual_nodes, 1, 1 << 14)
        check_int("d_min", self.d_min, 1)
        if self.capacities is not None:
            caps = tuple(self.capacities)
            for i, c in enumerate(caps):
                check_real(f"capacities[{i}]", c, 0.0, None, closed="neither")
            object.__setattr__(self, "capacities", tuple(float(c) for c in caps))
        if self.interval is not None:
            check_int("interval", self.interval, 1)

    def state_bound(self, workers):
        """K_max SpaceSaving counters, M_k and cached candidate lists for K_max + 1/θ keys
        (n workers each), the ring (n * virtual_nodes points plus its lookup table), loads and
        wait estimates: 128 K + slots (64 + 4n + 8) + 48 n V + 36 n bytes."""
        theta = self.theta if self.theta is not None else 1.0 / (4 * workers)
        slots = self.k_max + int(1.0 / theta) + 1
        return (SPACESAVING_COUNTER_BYTES * self.k_max + slots * (64 + 4 * workers + 8)
                + 48 * workers * self.virtual_nodes + 36 * workers + 512)

    def build(self, workers, seed):
        from skewgroup._fish import Fish

        if self.capacities is not None and len(self.capacities) != workers:
            raise ValueError(
                f"The 'capacities' parameter must give one capacity per worker ({workers}). "
                f"Got {len(self.capacities)} values instead."
            )
        theta = self.theta if self.theta is not None else 1.0 / (4 * workers)
        return Fish(workers, seed, self.epoch, self.alpha, theta, self.k_max,
                    self.virtual_nodes, self.d_min, self.capacities, self.interval)


# --- FlexD -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class FlexDConfig(StrategyConfig):
    """FlexD (flexd §4.3-4.4): per-segment SpaceSaving, per-key worker sets grown by δ.

    Parameters
    ----------
    delta : float, default 1.5
        Growth factor δ of a key's threshold T_f each time it gains a worker.
    segment : int, default 10000
        Segment length l in tuples; SpaceSaving restarts every segment.
    threshold : float or None, default None -> 1/(5n)
        The high/low frequency threshold f on f_t = count in the segment / l.
    capacity : int or None, default None -> ceil(2/f)
        SpaceSaving counters ⌈1/ε⌉ with ε = f/2.
    prune_every : int, default 1_000_000
        Tuples between two prunings of the key tables.
    prune_keep : int, default 50_000
        Entries kept by a pruning (the most recently used), as the paper's "top 50k".
    """

    name: ClassVar[str] = "flexd"
    delta: float = 1.5
    segment: int = 10000
    threshold: Optional[float] = None
    capacity: Optional[int] = None
    prune_every: int = 1_000_000
    prune_keep: int = 50_000

    def __post_init__(self):
        check_real("delta", self.delta, 1.0, None, closed="neither")
        check_int("segment", self.segment, 1)
        if self.threshold is not None:
            check_real("threshold", self.threshold, 0.0, 1.0, closed="right")
        if self.capacity is not None:
            check_int("capacity", self.capacity, 1, 1 << 24)
        check_int("prune_every", self.prune_every, 1)
        check_int("prune_keep", self.prune_keep, 1)

    def _resolved(self, workers):
        threshold = self.threshold if self.threshold is not None else 1.0 / (5 * workers)
        capacity = self.capacity if self.capacity is not None else int(-(-2.0 // threshold))
        return threshold, capacity

    def state_bound(self, workers):
        """SpaceSaving's counters plus at most max_entries = prune_keep + (prune_every / l + 1)
        (1/f + 1) key entries, each T_f, last use, key, an n-bit worker set, a free-list slot
        and up to 4 KeyMap slots: 128 k + E (28 + 8 ceil(n/64) + 64) + 8n bytes."""
        threshold, capacity = self._resolved(workers)
        entries = self.prune_keep + int((self.prune_every // self.segment + 1)
                                        * (1.0 / threshold + 1))
        words = (workers + 63) // 64
        return (LOAD_VECTOR_BYTES * workers + SPACESAVING_COUNTER_BYTES * capacity
                + entries * (28 + 8 * words + 4 * KEYMAP_SLOT_BYTES) + 1024)

    def build(self, workers, seed):
        from skewgroup._flexd import FlexD

        threshold, capacity = self._resolved(workers)
        return FlexD(workers, seed, self.delta, self.segment, threshold, capacity,
                     self.prune_every, self.prune_keep)


# --- DKG -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class DKGConfig(StrategyConfig):
    """DKG (dkg §4): generational key space; only keys in Old space scale out.

    Parameters
    ----------
    expected_keys : int, default 100
        Expected distinct keys (the paper's 100): Old space 10 %, Teenage 40 %, Baby 50 %.
    promote_every : int, default 15_000
        Tuples between Baby -> Teenage promotions (the paper's 15 s at 1000 tuples/s).
    promote_every_old : int, default 60_000
        Tuples between Teenage -> Old promotions (the paper's 60 s).
    warmup : int, default 15_000
        Tuples before any scale out (the paper's 15 s cold start).
    """

    name: ClassVar[str] = "dkg"
    expected_keys: int = 100
    promote_every: int = 15_000
    promote_every_old: int = 60_000
    warmup: int = 15_000

    def __post_init__(self):
        check_int("expected_keys", self.expected_keys, 1, 1 << 24)
        check_int("promote_every", self.promote_every, 1)
        check_int("promote_every_old", self.promote_every_old, 1)
        check_int("warmup", self.warmup, 0)

    def state_bound(self, workers):
        """Key spaces of at most expected_keys + promote_every keys (Baby gains at most one key
        per tuple between two cycles), each in a KeyMap of <= 4 slots per key, plus widths for
        Old keys: 8n + 64 (expected_keys + promote_every) + 1024 bytes."""
        return (LOAD_VECTOR_BYTES * workers
                + 4 * KEYMAP_SLOT_BYTES * (self.expected_keys + self.promote_every) + 2048)

    def build(self, workers, seed):
        from skewgroup._dkg import DKG

        return DKG(workers, seed, self.expected_keys, self.promote_every,
                   self.promote_every_old, self.warmup)


STRATEGIES = {
    cls.name: cls
    for cls in (
        KGConfig, SGConfig, PKGConfig, DChoicesConfig, WChoicesConfig, RoundRobinConfig,
        PdStreamConfig, FishConfig, FlexDConfig, DKGConfig,
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


__all__ = ["STRATEGIES", "make_config", "asdict"] + [c.__name__ for c in STRATEGIES.values()]
