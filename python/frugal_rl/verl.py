"""verl 0.9.1 plug-ins: frugal_rl advantage estimators and selector-driven prompt batches.

Load with ``VERL_USE_EXTERNAL_MODULES=frugal_rl.verl`` (verl imports it at ``import verl``,
``verl/__init__.py``), or import it yourself before building the trainer. It registers:

- advantage estimators ``frugal_<kind>`` for every kind in ``frugal_rl.ESTIMATORS``
  (``algorithm.adv_estimator=frugal_grpo``, ...) through ``register_adv_est``
  (``verl/trainer/ppo/core_algos.py``): verl calls them with ``token_level_rewards``,
  ``response_mask``, ``config``, ``index`` (the uid of each response's prompt) and, for ReMax,
  ``reward_baselines``; they return ``(advantages, returns)`` broadcast over the response tokens.
  ``frugal_grpo`` equals verl's ``grpo`` (tested) except on singleton groups, where verl gives
  ``score / (1 + eps)`` and ours gives 0 (``singleton: zero``). ``register_estimator(name, params)``
  registers one with your own ``AdvantageParams``.
  Each call also reports every group's outcomes (score >= ``success_threshold``) to
  :data:`FEEDBACK`, which is how the selector learns: verl has no other hook that sees the
  group rewards of the prompts it fetched.
- the trainer ``frugal_select`` (``trainer.v1.trainer_mode=frugal_select``, through
  ``register_trainer``, ``verl/trainer/ppo/v1/trainer_base.py``): verl 0.9.1's sync trainer
  (``PPOTrainerSync``, ``trainer_sync.py``) with ``_fetch_one_gen_batch`` overridden: each chunk
  of ``gen_batch_size`` prompts comes from a :class:`SelectorBatchSource` (the selector picks the
  dataset indices; the trainer's own ``collate_fn`` builds the batch) instead of the
  RandomSampler DataLoader. The curriculum-sampler hook of older verl
  (``verl.experimental.dataset``) no longer exists; ``_fetch_one_gen_batch`` is the hook used.
  Configure the selector with ``set_selector(Selector(...))`` before the trainer is built, or
  in a subclass.

Not covered: POPO replay through ``trainer.v1.sampler.custom_sampler`` (a ``ReplayBuffer``
subclass, ``v1/replay_buffer.py``, picks which *terminal groups currently in TransferQueue*
enter the batch; it has no way to keep an evicted group of an earlier step, with its rollout
log-probs, and re-insert it, and the policy loss receives ``rollout_is_weights`` rather than the
stored behaviour log-probs, so POPO's decoupled correction ``pi_prox / mu`` cannot be formed
from what the loss sees); LPO/POPO losses as ``register_policy_loss`` functions (not written:
LPO's listwise softmax needs each response's group, which verl's policy loss is not given, and
its micro-batches may split groups).
Nothing here starts Ray; the end-to-end verl run (Ray, vLLM/SGLang) was not run.

Written against verl 0.9.1's sources (read, not copied); engines.md §2 has the line numbers.
"""

from __future__ import annotations

import threading
import uuid
from typing import Any, Callable, Dict, List, Optional, Sequence

import numpy as np

from . import ESTIMATORS, Selector, advantages


class UidFeedback:
    """Maps verl's per-prompt ``uid`` to a dataset index and collects group outcomes by uid."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.uid_to_id: Dict[str, int] = {}
        self.ready: Dict[int, np.ndarray] = {}
        self.reported_groups = 0

    def register(self, uids: Sequence[str], ids: Sequence[int]) -> None:
        with self.lock:
            for u, i in zip(uids, ids):
                self.uid_to_id[str(u)] = int(i)

    def report(self, uids: Sequence[Any], outcomes01: np.ndarray) -> None:
        uids = np.asarray(uids, dtype=object)
        with self.lock:
            for u in dict.fromkeys(uids.tolist()):
                pid = self.uid_to_id.pop(str(u), None)
                if pid is None:
                    continue
                self.ready[pid] = outcomes01[uids == u].astype(np.float32)
                self.reported_groups += 1

    def drain(self):
        with self.lock:
            items = list(self.ready.items())
            self.ready.clear()
        if not items:
            return np.zeros(0, dtype=np.uint64), np.zeros((0, 1), dtype=np.float32)
        k = len(items[0][1])
        items = [(i, r) for i, r in items if len(r) == k]  # one group size per observe
        return (np.array([i for i, _ in items], dtype=np.uint64),
                np.stack([r for _, r in items]).astype(np.float32))


FEEDBACK = UidFeedback()
SUCCESS_THRESHOLD = 1.0


def estimator_fn(params: Optional[Dict[str, Any]] = None, feedback: Optional[UidFeedback] = None) -> Callable:
    """A verl advantage-estimator function computing frugal_rl's ``advantages`` with ``params``."""
    import torch

    def fn(token_level_rewards, response_mask, index=None, config=None, reward_baselines=None, **kwargs):
        scores = token_level_rewards.sum(dim=-1).detach().double().cpu().numpy()
        if index is None:
            raise ValueError("frugal_rl estimators need verl's per-prompt uid (index)")
        _, gid = np.unique(np.asarray(index, dtype=object).astype(str), return_inverse=True)
        lengths = response_mask.sum(dim=-1).detach().cpu().numpy().astype(np.int64)
        base = None if reward_baselines is None else reward_baselines.detach().double().cpu().numpy()
        p = dict(params or {})
        p.setdefault("singleton", "zero")
        a = advantages(scores, group_ids=gid.astype(np.uint64), params=p, lengths=lengths, baselines=base)
        (feedback or FEEDBACK).report(index, (scores >= SUCCESS_THRESHOLD).astype(np.float32))
        adv = torch.as_tensor(a, dtype=token_level_rewards.dtype, device=token_level_rewards.device)
        adv = adv.unsqueeze(-1) * response_mask
        return adv, adv

    return fn


def register_estimator(name: str, params: Optional[Dict[str, Any]] = None) -> Callable:
    """Registers ``estimator_fn(params)`` with verl under ``name``."""
    from verl.trainer.ppo.core_algos import register_adv_est

    return register_adv_est(name)(estimator_fn(params))


class SelectorBatchSource:
    """Prompt batches chosen by a selector: ``next_batch(n)`` observes the outcomes reported
    since the last call (possibly none), selects ``n`` dataset indices and collates them."""

    def __init__(self, selector: Selector, dataset, collate_fn: Callable, feedback: Optional[UidFeedback] = None):
        if selector.n_items != len(dataset):
            raise ValueError(f"selector n_items {selector.n_items} != dataset size {len(dataset)}")
        self.selector, self.dataset, self.collate_fn = selector, dataset, collate_fn
        self.feedback = feedback or FEEDBACK
        self.calls = 0
        self.selected: List[np.ndarray] = []

    def next_ids(self, n: int) -> np.ndarray:
        if self.calls:
            ids, rewards = self.feedback.drain()
            self.selector.observe(ids, rewards)
        self.calls += 1
        ids = self.selector.select(n)
        self.selected.append(ids)
        return ids

    def next_batch(self, n: int) -> Dict[str, Any]:
        ids = self.next_ids(n)
        batch = self.collate_fn([self.dataset[int(i)] for i in ids])
        uids = np.array([str(uuid.uuid4()) for _ in range(len(ids))], dtype=object)
        batch["uid"] = uids
        import torch

        batch["frugal_id"] = torch.as_tensor(ids.astype(np.int64))
        self.feedback.register(uids, ids.tolist())
        return batch


class SelectorBatchSampler:
    """A ``batch_sampler`` for torch / torchdata DataLoaders (verl's ``StatefulDataLoader``):
    each batch is ``batch_size`` dataset indices chosen by the source's selector, ``num_batches``
    batches per epoch. Use with ``SelectorBatchSource.feedback.register`` of the batch's uids
    when the loader's consumer assigns them (``frugal_id`` identifies the prompt)."""

    def __init__(self, source: SelectorBatchSource, batch_size: int, num_batches: int):
        self.source, self.batch_size, self.num_batches = source, batch_size, num_batches

    def __len__(self) -> int:
        return self.num_batches

    def __iter__(self):
        for _ in range(self.num_batches):
            yield [int(i) for i in self.source.next_ids(self.batch_size)]


_SELECTOR: Optional[Selector] = None


def set_selector(selector: Selector) -> None:
    """The selector the ``frugal_select`` trainer uses (``n_items`` = the train dataset size)."""
    global _SELECTOR
    _SELECTOR = selector


def _register_all() -> None:
    try:
        from verl.trainer.ppo.core_algos import ADV_ESTIMATOR_REGISTRY
    except ImportError:  # verl not installed: the module still imports (docs, tests)
        return
    for kind in ESTIMATORS:
        name = f"frugal_{kind}"
        if name not in ADV_ESTIMATOR_REGISTRY:
            register_estimator(name, {"estimator": {"kind": kind}})
    try:
        from verl.trainer.ppo.v1.trainer_base import TRAINER_REGISTRY, register_trainer
        from verl.trainer.ppo.v1.trainer_sync import PPOTrainerSync
        from verl.utils import tensordict_utils as tu
    except ImportError:  # pragma: no cover - verl without its v1 trainer dependencies
        return
    if "frugal_select" in TRAINER_REGISTRY:
        return

    @register_trainer("frugal_select")
    class FrugalSelectTrainer(PPOTrainerSync):
        """verl's sync trainer with prompts chosen by a frugal_rl selector (see module docs)."""

        def _fetch_one_gen_batch(self):
            if getattr(self, "frugal_source", None) is None:
                if _SELECTOR is None:
                    raise RuntimeError("call frugal_rl.verl.set_selector(...) before building the trainer")
                from verl.utils.dataset.rl_dataset import collate_fn

                self.frugal_source = SelectorBatchSource(_SELECTOR, self.train_dataset, collate_fn)
            n = self.config.data.get("gen_batch_size", None) or self.config.data.train_batch_size
            return tu.get_tensordict(self.frugal_source.next_batch(n))

    globals()["FrugalSelectTrainer"] = FrugalSelectTrainer


_register_all()
