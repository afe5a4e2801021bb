"""TRL 1.16 GRPOTrainer with prompts drawn by a frugal_rl Selector: 2 real optimizer steps on CPU."""

import os

import numpy as np
import pytest

import frugal_rl as fr
from frugal_rl.trl import FeedbackReward, SelectorSampler, _Outcomes

pytestmark = pytest.mark.needs_trl


def test_sampler_layout_and_feedback():
    sel = fr.Selector("dps", n_items=20, seed=0)
    out = _Outcomes(group_size=3)
    s = SelectorSampler(sel, out, batch_size=4, num_generations=3, repeat_count=2, rounds=3)
    it = iter(s)
    first = [next(it) for _ in range(4 * 3 * 2)]
    assert first[:12] == first[12:]  # the round repeated repeat_count times
    assert all(first[i] == first[i - i % 3] for i in range(12))  # each index num_generations times
    ids = first[::3][:4]
    reward = FeedbackReward(lambda prompts, completions, **kw: [1.0, 0.0, 1.0] * 4, out)
    reward(prompts=["p"] * 12, completions=["c"] * 12, frugal_id=[i for i in ids for _ in range(3)])
    assert out.reported_groups == 4
    second = [next(it) for _ in range(24)]
    assert sel.step == 1  # the outcomes of round 0 were observed before round 1 was selected
    assert len(list(it)) == 24 and len(s) == 72
    assert len(set(second[::3][:4])) == 4


def test_grpo_trainer_two_steps_on_cpu(tmp_path):
    from datasets import Dataset
    from trl import GRPOConfig
    from frugal_rl.trl import SelectorGRPOTrainer
    from tiny_model import make_tiny_qwen2

    model_dir = make_tiny_qwen2(str(tmp_path / "tiny"))
    n = 16
    ds = Dataset.from_dict({"prompt": [f"two plus {i % 5} is" for i in range(n)], "frugal_id": list(range(n))})

    def reward(prompts, completions, **kw):
        # parity of the characters: varies between the sampled completions of one prompt
        return [float(sum(map(ord, c)) % 2) for c in completions]

    sel = fr.Selector("dps", n_items=n, seed=0)
    args = GRPOConfig(
        output_dir=str(tmp_path / "out"), use_cpu=True, max_steps=2, per_device_train_batch_size=8,
        num_generations=4, max_completion_length=6, learning_rate=1e-3, logging_steps=1, report_to=[],
        save_strategy="no", seed=0, bf16=False, dataloader_num_workers=0,
    )
    from transformers import AutoModelForCausalLM, AutoTokenizer
    model = AutoModelForCausalLM.from_pretrained(model_dir)
    before = [p.detach().clone() for p in model.parameters()]
    trainer = SelectorGRPOTrainer(model=model, reward_funcs=reward, args=args, train_dataset=ds,
                                  processing_class=AutoTokenizer.from_pretrained(model_dir), selector=sel)
    trainer.train()
    assert trainer.state.global_step == 2
    changed = any((a != b.detach()).any().item() for a, b in zip(before, trainer.model.parameters()))
    assert changed, "two optimizer steps left every weight unchanged"
    # the sampler's rounds came from the selector and outcomes came back
    assert trainer.frugal_sampler.selected
    assert trainer.frugal_outcomes.reported_groups > 0
    for ids in trainer.frugal_sampler.selected:
        assert len(set(ids.tolist())) == len(ids)
