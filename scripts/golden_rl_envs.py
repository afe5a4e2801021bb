#!/usr/bin/env python3
"""Record golden rollouts of the reference implementations for the rl-envs tests.

Run with the provisioned venv (gymnasium, gymnasium-robotics, mpe2, mujoco==3.17.0):

    ~/.cache/frugal-rl/venv/bin/pip install gymnasium==1.4.0 gymnasium-robotics==1.4.2 mpe2==1.1.1
    ~/.cache/frugal-rl/venv/bin/python scripts/golden_rl_envs.py [classic|maze|mpe|mujoco|all]

Writes crates/rl-envs/tests/fixtures/<family>.json. Each case records the seed given to
`reset(seed=...)`, the state right after the reset (for environments whose reset draws cannot be
reproduced bit for bit, the Rust test starts from this state), the actions (chosen here by a
seeded policy, then replayed verbatim by the Rust test) and, per step, the observation, reward,
terminated and truncated flags of the reference. Floats are written with Python's repr (the
shortest string that reads back to the same float64).
"""
import json
import os
import sys

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FIXTURES = os.path.join(ROOT, "crates", "rl-envs", "tests", "fixtures")


def f(x):
    return [float(v) for v in np.asarray(x, dtype=np.float64).ravel()]


def versions(*names):
    from importlib.metadata import version

    return {n: version(n) for n in names}


def write(name, payload):
    os.makedirs(FIXTURES, exist_ok=True)
    path = os.path.join(FIXTURES, name + ".json")
    with open(path, "w") as fh:
        json.dump(payload, fh, separators=(",", ":"))
        fh.write("\n")
    print(f"wrote {path} ({os.path.getsize(path)} bytes)")


# ------------------------------------------------------------------------------------------
# classic control


def classic():
    import gymnasium as gym

    cases = []

    def rollout(env_id, seed, policy, max_steps):
        env = gym.make(env_id)
        obs, _ = env.reset(seed=seed)
        case = {"env": env_id, "seed": seed, "reset_obs": f(obs), "actions": [], "obs": [],
                "rewards": [], "terminated": [], "truncated": []}
        for t in range(max_steps):
            a = policy(obs, t)
            obs, r, term, trunc, _ = env.step(a)
            case["actions"].append(f(a) if not isinstance(a, (int, np.integer)) else [float(a)])
            case["obs"].append(f(obs))
            case["rewards"].append(float(r))
            case["terminated"].append(bool(term))
            case["truncated"].append(bool(trunc))
            if term or trunc:
                break
        cases.append(case)

    for seed in [0, 1, 2]:
        prng = np.random.default_rng(100 + seed)
        # torques partly outside [-2, 2] (clipped by the env) for a full 200-step episode
        rollout("Pendulum-v1", seed, lambda o, t: prng.uniform(-2.5, 2.5, size=(1,)).astype(np.float32), 300)
    for seed in [0, 1, 2, 3]:
        prng = np.random.default_rng(200 + seed)
        rollout("CartPole-v1", seed, lambda o, t: int(prng.integers(0, 2)), 600)
    # a balancing controller, to reach the 500-step truncation
    rollout("CartPole-v1", 7, lambda o, t: int(o[2] + 0.5 * o[3] + 0.01 * o[0] + 0.1 * o[1] > 0), 600)
    for seed in [0, 1]:
        prng = np.random.default_rng(300 + seed)
        # energy pumping with noise; |a| up to 1.5 to cover the clipped branch
        rollout(
            "MountainCarContinuous-v0", seed,
            lambda o, t: np.array([np.sign(o[1] if o[1] != 0 else 1.0) * 1.2 + prng.normal(0, 0.4)],
                                  dtype=np.float32),
            1000)
    prng2 = np.random.default_rng(399)
    rollout("MountainCarContinuous-v0", 5,
            lambda o, t: prng2.uniform(-1.0, 1.0, size=(1,)).astype(np.float32), 1000)
    write("classic", {"generator": "scripts/golden_rl_envs.py classic",
                      "versions": versions("gymnasium", "numpy"), "cases": cases})


def main():
    which = sys.argv[1] if len(sys.argv) > 1 else "all"
    table = {"classic": classic}
    for k in (table if which == "all" else [which]):
        table[k]()


if __name__ == "__main__":
    main()
