"""TRL 1.16 plug-in: prompt selection by a :class:`frugal_rl.Selector` inside ``GRPOTrainer``.

Pieces (docs/python.md has a runnable recipe):

- :class:`SelectorSampler` - a torch ``Sampler`` with the layout of TRL's ``RepeatSampler``: per
  generation round it asks the selector for ``batch_size`` distinct prompts and yields each
  index ``num_generations`` times in a row, the round repeated ``repeat_count`` times
  (``num_iterations * steps_per_generation``).
- :class:`FeedbackReward` - wraps a reward function; it returns the wrapped rewards unchanged
  and records the per-prompt group outcomes for the sampler.
- :class:`SelectorGRPOTrainer` - ``GRPOTrainer`` whose ``_get_train_sampler`` returns a
  :class:`SelectorSampler`. The dataset must carry the prompt's pool index in a column
  (default ``"frugal_id"``, ``0..n_items``).

Feedback lag: the DataLoader (and accelerate) prefetch the next round's indices before the
rewards of the current round are computed, so the selector observes a round's outcomes one
round late (at the next-but-one ``select``); rounds whose outcomes have not arrived are observed
empty, which still advances DPS' dynamics. Outcomes are grouped by prompt within the process:
with several processes each group's completions are spread over processes, so this plug-in is
for single-process training (what the test runs); POPO replay is not wired into TRL (its loop
regenerates each round and has no hook for swapping groups before the advantage computation
short of overriding ``_generate_and_score_completions``).

Written against trl/trainer/grpo_trainer.py and trl/trainer/utils.py of TRL 1.16.0 (read, not
copied).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Any, Callable, Dict, Iterator, List, Optional

import numpy as np

from . import Selector

try:  # TRL is optional: the module imports without it, the trainer class needs it
    from torch.utils.data import Sampler
except ImportError:  # pragma: no cover
    Sampler = object  # type: ignore


class _Outcomes:
    """Group outcomes reported by :class:`FeedbackReward`, waiting for the sampler."""

    def __init__(self, group_size: int):
        self.group_size = group_size
        self.lock = threading.Lock()
        self.partial: Dict[int, List[float]] = {}
        self.ready: "OrderedDict[int, List[float]]" = OrderedDict()
        self.reported_groups = 0

    def add(self, pid: int, reward01: float) -> None:
        with self.lock:
            r = self.partial.setdefault(pid, [])
            r.append(reward01)
            if len(r) == self.group_size:
                self.ready.pop(pid, None)
                self.ready[pid] = self.partial.pop(pid)
                self.reported_groups += 1

    def drain(self):
        with self.lock:
            items = list(self.ready.items())
            self.ready.clear()
        if not items:
            return np.zeros(0, dtype=np.uint64), np.zeros((0, self.group_size), dtype=np.float32)
        ids = np.array([i for i, _ in items], dtype=np.uint64)
        rewards = np.array([r for _, r in items], dtype=np.float32)
        return ids, rewards


class SelectorSampler(Sampler):
    """Yields prompt indices chosen by ``selector`` in TRL's ``RepeatSampler`` layout.

    ``len(sampler)`` is ``rounds * batch_size * num_generations * repeat_count`` with ``rounds``
    one pass's worth (``ceil(n_items / batch_size)``) unless given.
    """

    def __init__(
        self,
        selector: Selector,
        outcomes: _Outcomes,
        batch_size: int,
        num_generations: int,
        repeat_count: int = 1,
        rounds: Optional[int] = None,
    ):
        if selector.n_items is None:
            raise ValueError("the selector needs n_items (the dataset size)")
        self.selector = selector
        self.outcomes = outcomes
        self.batch_size = batch_size
        self.num_generations = num_generations
        self.repeat_count = repeat_count
        n = selector.n_items
        self.rounds = rounds if rounds is not None else -(-n // batch_size)
        self.selected: List[np.ndarray] = []

    def __len__(self) -> int:
        return self.rounds * self.batch_size * self.num_generations * self.repeat_count

    def next_round(self) -> np.ndarray:
        if self.selected:  # observe whatever arrived since the last round (maybe nothing)
            ids, rewards = self.outcomes.drain()
            self.selector.observe(ids, rewards)
        ids = self.selector.select(self.batch_size)
        self.selected.append(ids)
        return ids

    def __iter__(self) -> Iterator[int]:
        for _ in range(self.rounds):
            ids = self.next_round().tolist()
            for _ in range(self.repeat_count):
                for i in ids:
                    for _ in range(self.num_generations):
                        yield int(i)


class FeedbackReward:
    """A TRL reward function that forwards to ``reward_fn`` and reports outcomes.

    Each completion's reward becomes a success in ``[0, 1]``: ``to_outcome(reward)`` (default
    ``1.0 if reward >= success_threshold else 0.0``). ``id_column`` is the dataset column with the
    pool index.
    """

    def __init__(
        self,
        reward_fn: Callable[..., List[float]],
        outcomes: _Outcomes,
        id_column: str = "frugal_id",
        success_threshold: float = 1.0,
        to_outcome: Optional[Callable[[float], float]] = None,
    ):
        self.reward_fn = reward_fn
        self.outcomes = outcomes
        self.id_column = id_column
        self.to_outcome = to_outcome or (lambda r: 1.0 if r >= success_threshold else 0.0)
        self.__name__ = getattr(reward_fn, "__name__", "reward")

    def __call__(self, prompts=None, completions=None, **kwargs: Any) -> List[float]:
        rewards = self.reward_fn(prompts=prompts, completions=completions, **kwargs)
        ids = kwargs.get(self.id_column)
        if ids is None:
            raise KeyError(f"the dataset has no column {self.id_column!r} (the prompt's pool index)")
        for pid, r in zip(ids, rewards):
            if r is None or not np.isfinite(r):
                continue
            self.outcomes.add(int(pid), float(min(1.0, max(0.0, self.to_outcome(float(r))))))
        return rewards


def _trainer_base():
    from trl import GRPOTrainer

    return GRPOTrainer


def make_selector_trainer_class():
    """The ``GRPOTrainer`` subclass (built lazily so that importing this module needs no TRL)."""
    GRPOTrainer = _trainer_base()

    class SelectorGRPOTrainer(GRPOTrainer):
        """``GRPOTrainer(..., selector=Selector("dps", n_items=len(train_dataset)))``.

        ``reward_funcs`` are wrapped: the first one's rewards are the outcomes fed back (pass
        ``feedback_reward_index`` to choose another).
        """

        def __init__(self, *args, selector: Selector, id_column: str = "frugal_id",
                     success_threshold: float = 1.0, feedback_reward_index: int = 0,
                     rounds: Optional[int] = None, **kwargs):
            if args:
                raise TypeError("pass model=, reward_funcs=, args=, ... as keywords")
            g = getattr(kwargs.get("args"), "num_generations", None) or 8
            self.frugal_outcomes = _Outcomes(g)
            self.frugal_selector = selector
            self.frugal_rounds = rounds
            funcs = kwargs.get("reward_funcs")
            if funcs is None:
                raise ValueError("pass reward_funcs= as a keyword")
            funcs = list(funcs) if isinstance(funcs, (list, tuple)) else [funcs]
            funcs[feedback_reward_index] = FeedbackReward(
                funcs[feedback_reward_index], self.frugal_outcomes, id_column, success_threshold)
            kwargs["reward_funcs"] = funcs
            super().__init__(*args, **kwargs)
            if self.frugal_outcomes.group_size != self.num_generations:
                self.frugal_outcomes.group_size = self.num_generations

        def _get_train_sampler(self, dataset=None):
            n = len(dataset if dataset is not None else self.train_dataset)
            if self.frugal_selector.n_items != n:
                raise ValueError(f"selector n_items {self.frugal_selector.n_items} != dataset size {n}")
            self.frugal_sampler = SelectorSampler(
                self.frugal_selector,
                self.frugal_outcomes,
                batch_size=self.args.generation_batch_size // self.num_generations,
                num_generations=self.num_generations,
                repeat_count=self.num_iterations * self.args.steps_per_generation,
                rounds=self.frugal_rounds,
            )
            return self.frugal_sampler

    return SelectorGRPOTrainer


def __getattr__(name: str):
    if name == "SelectorGRPOTrainer":
        return make_selector_trainer_class()
    raise AttributeError(name)
