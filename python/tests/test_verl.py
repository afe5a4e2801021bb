"""verl 0.9.1 plug-ins driven without Ray: registries, the selector trainer's batch hook, and
verl's StatefulDataLoader driven by a frugal_rl selector."""

import numpy as np
import pytest

import frugal_rl as fr

pytestmark = pytest.mark.needs_verl


def batch(seed=0, groups=6, k=4, t=5):
    import torch

    rng = np.random.default_rng(seed)
    scores = rng.integers(0, 2, size=groups * k).astype(np.float32)
    scores[:k] = 1.0  # one all-success group
    mask = torch.ones(groups * k, t)
    mask[:, -1] = 0
    rewards = torch.zeros(groups * k, t)
    rewards[:, -2] = torch.from_numpy(scores)
    uids = np.array([f"u{g}" for g in range(groups) for _ in range(k)], dtype=object)
    perm = rng.permutation(groups * k)
    return rewards[perm], mask[perm], uids[perm]


def test_estimators_registered_and_grpo_equals_verl():
    import frugal_rl.verl  # noqa: F401  (what VERL_USE_EXTERNAL_MODULES does)
    from verl.trainer.ppo import core_algos

    for kind in fr.ESTIMATORS:
        assert f"frugal_{kind}" in core_algos.ADV_ESTIMATOR_REGISTRY
    r, m, uid = batch()
    ours, ret = core_algos.get_adv_estimator_fn("frugal_grpo")(token_level_rewards=r, response_mask=m, index=uid)
    theirs, _ = core_algos.compute_grpo_outcome_advantage(r, m, uid)
    assert ours.shape == theirs.shape
    assert (ours - theirs).abs().max().item() < 1e-5
    assert (ours[m == 0] == 0).all()
    for kind in fr.ESTIMATORS:
        fn = core_algos.get_adv_estimator_fn(f"frugal_{kind}")
        import torch
        kw = {"reward_baselines": torch.full((len(uid),), 0.5)} if kind == "remax" else {}
        a, _ = fn(token_level_rewards=r, response_mask=m, index=uid, **kw)
        assert torch.isfinite(a).all()


def test_verl_env_var_loads_the_plugin():
    import os
    import subprocess
    import sys

    code = ("import verl; from verl.trainer.ppo import core_algos as c; "
            "from verl.trainer.ppo.v1.trainer_base import get_trainer_cls; "
            "assert 'frugal_grpo' in c.ADV_ESTIMATOR_REGISTRY; get_trainer_cls('frugal_select'); print('ok')")
    env = dict(os.environ, VERL_USE_EXTERNAL_MODULES="frugal_rl.verl")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip().endswith("ok")


def test_selector_trainer_fetch_hook_and_feedback():
    import torch
    from omegaconf import OmegaConf
    import frugal_rl.verl as fv
    from verl.trainer.ppo.v1.trainer_base import get_trainer_cls
    from verl.trainer.ppo.v1.trainer_sync import PPOTrainerSync
    from verl.trainer.ppo import core_algos

    cls = get_trainer_cls("frugal_select")
    assert issubclass(cls, PPOTrainerSync)
    n, k = 40, 4
    dataset = [{"input_ids": torch.full((3,), i), "raw_prompt": f"prompt {i}"} for i in range(n)]
    trainer = cls.__new__(cls)  # the hook alone: no Ray, no workers
    trainer.config = OmegaConf.create({"data": {"train_batch_size": 8, "gen_batch_size": 8}})
    trainer.train_dataset = dataset
    sel = fr.Selector("dps", n_items=n, seed=0)
    fv.set_selector(sel)
    td = trainer._fetch_one_gen_batch()
    ids = td["frugal_id"].numpy()
    assert len(ids) == 8 and len(set(ids.tolist())) == 8
    assert (td["input_ids"][:, 0].numpy() == ids).all()
    uids = list(td["uid"])
    # rollouts: k responses per prompt; the estimator reports the outcomes by uid
    scores = torch.tensor([float((j + int(i)) % 2) for i in ids for j in range(k)])
    rewards = torch.zeros(len(scores), 3)
    rewards[:, -1] = scores
    index = np.array([u for u in uids for _ in range(k)], dtype=object)
    core_algos.get_adv_estimator_fn("frugal_grpo")(token_level_rewards=rewards, response_mask=torch.ones(len(scores), 3),
                                                   index=index)
    assert len(fv.FEEDBACK.ready) == 8
    td2 = trainer._fetch_one_gen_batch()
    assert sel.step == 1 and not fv.FEEDBACK.ready  # observed before the second selection
    assert len(td2["frugal_id"]) == 8


def test_stateful_dataloader_driven_by_selector():
    import torch
    from torchdata.stateful_dataloader import StatefulDataLoader
    from verl.utils.dataset.rl_dataset import collate_fn
    import frugal_rl.verl as fv

    n = 30
    dataset = [{"input_ids": torch.full((2,), i), "raw_prompt": f"p{i}"} for i in range(n)]
    sel = fr.Selector("mopps", n_items=n, seed=1)
    src = fv.SelectorBatchSource(sel, dataset, collate_fn, feedback=fv.UidFeedback())
    loader = StatefulDataLoader(dataset, batch_sampler=fv.SelectorBatchSampler(src, 6, 3), collate_fn=collate_fn)
    seen = [b["input_ids"][:, 0].tolist() for b in loader]
    assert len(seen) == 3 and all(len(set(s)) == 6 for s in seen)
    assert [list(map(int, x)) for x in src.selected] == seen
    assert sel.step == 2  # observed (empty) before rounds 2 and 3
