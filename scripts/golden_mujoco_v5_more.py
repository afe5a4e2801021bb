#!/usr/bin/env python3
"""Record golden rollouts of gymnasium 1.4's InvertedPendulum, InvertedDoublePendulum, Reacher,
Pusher (v5) and Humanoid (v5 and v4) on mujoco 3.17.0 for crates/rl-envs/tests/golden_mujoco_v5_more.rs.

Run with the provisioned venv (gymnasium 1.4, mujoco==3.17.0; gymnasium's MuJoCo envs need
`imageio` and `packaging` importable):

    ~/.cache/frugal-rl/venv/bin/pip install --no-deps --target /tmp/rlenvs/extra imageio packaging
    PYTHONPATH=/tmp/rlenvs/extra ~/.cache/frugal-rl/venv/bin/python scripts/golden_mujoco_v5_more.py

Writes crates/rl-envs/tests/fixtures/mujoco_v5_more.json: per case the env id, the seed given to
`reset(seed=...)`, the kwargs of `gym.make`, the reset observation, info and state (`qpos`,
`qvel`), then per step the action (uniform in 1.2 times the action box, so partly outside it:
MuJoCo clamps the control), observation, reward, terminated / truncated flags and info. The
helpers (f, finfo, write, versions, gym_mujoco) are those of scripts/golden_rl_envs.py.
Pusher-v4 is not recorded: gymnasium refuses it on mujoco >= 3.
"""
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from golden_rl_envs import f, finfo, gym_mujoco, versions, write  # noqa: E402


def main():
    gym = gym_mujoco()
    cases = []

    def rollout(env_id, seed, steps, prng, scale=1.2, policy=None, **kwargs):
        env = gym.make(env_id, **kwargs)
        obs, reset_info = env.reset(seed=seed)
        data = env.unwrapped.data
        lo, hi = env.action_space.low * scale, env.action_space.high * scale
        case = {"env": env_id, "seed": seed, "kwargs": kwargs, "reset_obs": f(obs),
                "reset_info": finfo(reset_info), "reset_qpos": f(data.qpos), "reset_qvel": f(data.qvel),
                "actions": [], "obs": [], "rewards": [], "terminated": [], "truncated": [], "infos": []}
        for _ in range(steps):
            a = prng.uniform(lo, hi) if policy is None else np.clip(policy(obs, prng), lo, hi)
            a = a.astype(np.float32)
            obs, r, term, trunc, info = env.step(a)
            case["actions"].append(f(a))
            case["obs"].append(f(obs))
            case["rewards"].append(float(r))
            case["terminated"].append(bool(term))
            case["truncated"].append(bool(trunc))
            case["infos"].append(finfo(info))
            if term or trunc:
                break
        print(env_id, seed, kwargs, len(case["actions"]), "steps, terminated" if case["terminated"][-1] else
              ("truncated" if case["truncated"][-1] else ""))
        cases.append(case)

    rollout("InvertedPendulum-v5", 0, 100, np.random.default_rng(400))
    # a noisy PD controller balances the pole until the time limit
    rollout("InvertedPendulum-v5", 1, 40, np.random.default_rng(401), reset_noise_scale=0.05, frame_skip=3,
            max_episode_steps=25,
            policy=lambda o, prng: np.array([20 * o[1] + 2 * o[3] + o[0] + o[2] + prng.uniform(-0.5, 0.5)]))
    rollout("InvertedPendulum-v4", 2, 100, np.random.default_rng(402))
    rollout("InvertedDoublePendulum-v5", 0, 100, np.random.default_rng(410))
    rollout("InvertedDoublePendulum-v5", 1, 100, np.random.default_rng(411), scale=0.3, healthy_reward=5.0,
            reset_noise_scale=0.05, frame_skip=4)
    rollout("InvertedDoublePendulum-v4", 2, 100, np.random.default_rng(412))
    rollout("Reacher-v5", 0, 60, np.random.default_rng(420))
    rollout("Reacher-v5", 1, 30, np.random.default_rng(421), reward_dist_weight=2.0, reward_control_weight=0.5,
            frame_skip=3)
    rollout("Reacher-v4", 2, 60, np.random.default_rng(422))
    rollout("Pusher-v5", 0, 120, np.random.default_rng(430))
    rollout("Pusher-v5", 1, 40, np.random.default_rng(431), reward_near_weight=1.0, reward_dist_weight=2.0,
            reward_control_weight=0.2, frame_skip=4)
    rollout("Humanoid-v5", 0, 100, np.random.default_rng(440))
    rollout("Humanoid-v5", 1, 30, np.random.default_rng(441), include_cinert_in_observation=False,
            include_cvel_in_observation=False, contact_cost_weight=1e-6, contact_cost_range=(0.0, 1e-3),
            terminate_when_unhealthy=False, healthy_z_range=(1.1, 2.0),
            exclude_current_positions_from_observation=False, frame_skip=4)
    rollout("Humanoid-v5", 2, 20, np.random.default_rng(442), include_qfrc_actuator_in_observation=False,
            include_cfrc_ext_in_observation=False, ctrl_cost_weight=0.2, forward_reward_weight=2.0,
            healthy_reward=3.0, reset_noise_scale=0.02)
    rollout("Humanoid-v4", 3, 100, np.random.default_rng(443))
    rollout("Humanoid-v4", 4, 20, np.random.default_rng(444), terminate_when_unhealthy=False,
            healthy_z_range=(1.2, 2.0), exclude_current_positions_from_observation=False, ctrl_cost_weight=0.3)
    write("mujoco_v5_more", {"generator": "scripts/golden_mujoco_v5_more.py",
                             "versions": versions("gymnasium", "mujoco", "numpy"), "cases": cases})


if __name__ == "__main__":
    main()
