"""What does a model batch cost: how many pairs can it hold and still finish
before the deadlines of the calls in it?

A cross-encoder batch costs roughly a fixed per-call overhead (tokenization,
dispatch) plus a cost per *padded* token: every pair in a batch is padded to
the longest one, so a batch of k pairs costs like k × its longest pair. Token
counts are estimated from characters (tokenizing twice would cost as much as a
small batch); because the per-token cost is calibrated against the same
estimate, a constant bias in characters-per-token cancels out.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable, Sequence

# English subword tokenizers average ~4-5 characters per token; 4 leans towards
# over-estimating tokens, i.e. towards stopping early rather than late.
CHARS_PER_TOKEN = 4.0
# [CLS] query [SEP] passage [SEP]
SPECIAL_TOKENS = 3


class TokenEstimator:
    """Estimates tokens of (query, passage) pairs, capped by the model's max length."""

    def __init__(self, max_length: int, chars_per_token: float = CHARS_PER_TOKEN) -> None:
        self.max_length = max_length
        self.chars_per_token = chars_per_token

    def pair_tokens(self, query_chars: int, passage_chars: int) -> int:
        raw = math.ceil((query_chars + passage_chars) / self.chars_per_token) + SPECIAL_TOKENS
        return min(self.max_length, raw)

    def padded_batch_tokens(self, query: str, passages: Sequence[str]) -> int:
        if not passages:
            return 0
        longest = max(len(passage) for passage in passages)
        return len(passages) * self.pair_tokens(len(query), longest)


class BatchCostModel:
    """Predicts a batch's run time as `overhead + ms_per_token × padded tokens`.

    The overhead is measured once at warm-up; the per-token cost starts from the
    warm-up measurement and then follows real batches as an exponentially
    weighted moving average, so it tracks load on the machine. The average
    rises fast and falls slowly (a slow batch on a busy machine predicts the
    next one better than a fast one does), and predictions are inflated by
    `headroom`. A batch that overruns makes no answer late (each call is
    answered at its deadline with what was scored), but what it scored for
    the calls it overran is lost, all of it when it was their first batch
    (measured on 2 shared cores, MiniLM-L6 torch, a deadline of 270 ms: 1.5
    scored 5.4 pairs per call alone, 1.2 only 3.6, its larger batches
    overrunning more often).

    A cost inflated by a few slow batches could lock itself in: once no call
    seems to have time for even one pair, nothing runs and nothing corrects
    it. So every such refusal (`relax`) moves the cost back towards the
    warm-up's by `fall`, as a fast batch would, until calls run again and
    real batches say what the cost is now.

    The warm-up itself can be what is wrong: measured while the machine was
    busy (`make run` warms the Reranker up while the Indexer embeds the demo
    corpus: 214 ms a pair against ~40 ms idle), it refused every call, since
    no call had time for one pair at that cost and relaxing never goes below
    it. So the cost is on trial (`trial_due`) until a real batch has confirmed
    it, and again once it has refused calls for `retrial_after_s` without a
    batch running: a call it would refuse gets its first pair tried instead
    (answered at its deadline as before if the pair overruns), and that
    batch's measurement replaces the cost rather than moving it by `fall`.
    """

    def __init__(
        self,
        rise: float = 0.7,
        fall: float = 0.2,
        headroom: float = 1.5,
        retrial_after_s: float = 2.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        for name, weight in (("rise", rise), ("fall", fall)):
            if not 0 < weight <= 1:
                raise ValueError(f"{name} must be in (0, 1], got {weight}")
        self.rise = rise
        self.fall = fall
        self.headroom = headroom
        self.retrial_after_s = retrial_after_s
        self.overhead_ms = 0.0
        self.ms_per_token: float | None = None
        self.warm_up_ms_per_token: float | None = None
        self.confirmed = False  # a real batch has been measured since calibration
        self._refusing_since: float | None = None
        self._clock = clock
        self._lock = threading.Lock()

    @property
    def calibrated(self) -> bool:
        return self.ms_per_token is not None

    def calibrate(self, overhead_ms: float, tokens: int, elapsed_ms: float) -> None:
        """Set the model from warm-up: a minimal call and a full batch of `tokens`."""
        with self._lock:
            self.overhead_ms = max(overhead_ms, 0.0)
            self.ms_per_token = self._per_token(tokens, elapsed_ms)
            self.warm_up_ms_per_token = self.ms_per_token
            self.confirmed, self._refusing_since = False, None

    def observe(self, tokens: int, elapsed_ms: float) -> None:
        sample = self._per_token(tokens, elapsed_ms)
        with self._lock:
            if self.ms_per_token is None or self._on_trial():
                self.ms_per_token = sample  # a measurement now, not a nudge
                if self.warm_up_ms_per_token is not None:
                    self.warm_up_ms_per_token = min(self.warm_up_ms_per_token, sample)
            else:
                weight = self.rise if sample > self.ms_per_token else self.fall
                self.ms_per_token += weight * (sample - self.ms_per_token)
            self.confirmed, self._refusing_since = True, None

    def relax(self) -> None:
        """A call was refused as having no time for one pair: lean back
        towards the warm-up cost (never below it), and start the clock after
        which the cost is tried again (`trial_due`)."""
        with self._lock:
            floor, cost = self.warm_up_ms_per_token, self.ms_per_token
            if floor is not None and cost is not None and cost > floor:
                self.ms_per_token = cost + self.fall * (floor - cost)
            if self._refusing_since is None:
                self._refusing_since = self._clock()

    def trial_due(self) -> bool:
        """Should a call this cost would refuse get one pair tried instead?"""
        with self._lock:
            return self._on_trial()

    def _on_trial(self) -> bool:
        if self.ms_per_token is None:
            return False  # uncalibrated: predictions are None, one pair is tried anyway
        if not self.confirmed:
            return True
        since = self._refusing_since
        return since is not None and self._clock() - since >= self.retrial_after_s

    def predict_ms(self, tokens: int) -> float | None:
        """Expected run time of a batch of `tokens` padded tokens, None before any measurement."""
        if self.ms_per_token is None:
            return None
        return self.headroom * (self.overhead_ms + self.ms_per_token * tokens)

    def _per_token(self, tokens: int, elapsed_ms: float) -> float:
        return max(elapsed_ms - self.overhead_ms, 0.0) / max(tokens, 1)


class BatchPlanner:
    """What a model batch of given pairs is predicted to cost, from each pair's
    estimated tokens (`pair_tokens`): the padded batch is `len × longest`.
    The batch scheduler (`services.reranker.batching`) asks it which pairs of
    the waiting requests still fit before each of their deadlines."""

    def __init__(
        self, max_length: int, batch_size: int, cost: BatchCostModel | None = None
    ) -> None:
        self.tokens = TokenEstimator(max_length)
        self.batch_size = batch_size
        self.cost = cost or BatchCostModel()

    def pair_tokens(self, query: str, passage: str) -> int:
        return self.tokens.pair_tokens(len(query), len(passage))

    def batch_ms(self, pair_tokens: Sequence[int]) -> float | None:
        """Predicted run time of one batch of these pairs (None: not calibrated)."""
        if not pair_tokens:
            return 0.0
        return self.cost.predict_ms(padded_tokens(pair_tokens))

    def observe(self, pair_tokens: Sequence[int], elapsed_ms: float) -> None:
        self.cost.observe(padded_tokens(pair_tokens), elapsed_ms)


def padded_tokens(pair_tokens: Sequence[int]) -> int:
    """Tokens of a batch padded to its longest pair."""
    return len(pair_tokens) * max(pair_tokens, default=0)
