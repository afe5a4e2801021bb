#!/usr/bin/env python3
"""Environment steps per second in Python, side by side with `benches/envs.rs` and
`benches/envs_mujoco.rs`: the same environments in gymnasium 1.4 / gymnasium-robotics 1.4.2 /
mpe2 1.1.1 (and mujoco 3.17.0), one thread, fixed pseudo-random actions, resetting when an
episode ends.

    ~/.cache/frugal-rl/venv/bin/python benches/envs_gym.py            # pure-Python envs
    ~/.cache/frugal-rl/venv/bin/python benches/envs_gym.py --mujoco   # MuJoCo envs

Each environment is timed as users run it (`gym.make(id)`: with gymnasium's default wrappers)
and unwrapped (`env.unwrapped`, the bare `step`; the time limit is counted by hand), best of
`--reps` runs. The batch figure is `gymnasium.vector.SyncVectorEnv` of 64 environments, in
environment steps per second.
"""
import argparse
import json
import os
import time
import warnings

import numpy as np

warnings.filterwarnings("ignore")
os.environ.setdefault("OMP_NUM_THREADS", "1")


def best_of(reps, fn):
    return max(fn() for _ in range(reps))


def time_env(env, actions, limit):
    """Steps/s of `env` over `actions`, resetting at the end of an episode (or after `limit`
    steps for an unwrapped env)."""
    env.reset(seed=0)
    t = 0
    start = time.perf_counter()
    for a in actions:
        _, _, term, trunc, _ = env.step(a)
        t += 1
        if term or trunc or (limit and t >= limit):
            env.reset()
            t = 0
    return len(actions) / (time.perf_counter() - start)


def gym_env(env_id, steps, reps, prng, discrete=None, low=-1.0, high=1.0, limit=None, **kwargs):
    import gymnasium as gym

    env = gym.make(env_id, **kwargs)
    shape = env.action_space.shape
    if discrete:
        actions = [int(a) for a in prng.integers(0, discrete, size=steps)]
    else:
        actions = list(prng.uniform(low, high, size=(steps,) + shape).astype(np.float32))
    wrapped = best_of(reps, lambda: time_env(env, actions, None))
    raw = best_of(reps, lambda: time_env(env.unwrapped, actions, limit or env.spec.max_episode_steps))
    return {"env": env_id, "gym_make": wrapped, "unwrapped": raw}


def gym_batch(env_id, rounds, reps, prng, discrete=None, low=-1.0, high=1.0, n=64, **kwargs):
    import gymnasium as gym

    venv = gym.vector.SyncVectorEnv([lambda: gym.make(env_id, **kwargs) for _ in range(n)])
    shape = venv.single_action_space.shape
    if discrete:
        actions = [prng.integers(0, discrete, size=n) for _ in range(rounds)]
    else:
        actions = [prng.uniform(low, high, size=(n,) + shape).astype(np.float32) for _ in range(rounds)]

    def run():
        venv.reset(seed=0)
        start = time.perf_counter()
        for a in actions:
            venv.step(a)
        return rounds * n / (time.perf_counter() - start)

    return {"env": env_id, "batch64_sync_vector_env": best_of(reps, run)}


def mpe_env(name, steps, reps, prng):
    import importlib

    module = importlib.import_module(f"mpe2.{name}")
    env = module.parallel_env()
    env.reset(seed=0)
    agents = list(env.possible_agents)
    actions = [{a: int(x) for a, x in zip(agents, prng.integers(0, 5, size=len(agents)))} for _ in range(steps)]

    def run():
        env.reset(seed=0)
        start = time.perf_counter()
        for acts in actions:
            _, _, term, trunc, _ = env.step(acts)
            if all(term.values()) or all(trunc.values()) or not env.agents:
                env.reset()
        return steps / (time.perf_counter() - start)

    return {"env": name, "gym_make": best_of(reps, run), "unwrapped": None}


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--mujoco", action="store_true", help="time the MuJoCo environments instead")
    p.add_argument("--steps", type=int, default=20000, help="steps per timed run")
    p.add_argument("--reps", type=int, default=3, help="timed runs per environment (best is kept)")
    p.add_argument("--json", help="also write the results here")
    args = p.parse_args()
    prng = np.random.default_rng(0)
    rows = []
    if not args.mujoco:
        import gymnasium as gym
        import gymnasium_robotics

        gym.register_envs(gymnasium_robotics)
        rows.append(gym_env("Pendulum-v1", args.steps, args.reps, prng, low=-2.0, high=2.0))
        rows.append(gym_env("CartPole-v1", args.steps, args.reps, prng, discrete=2))
        rows.append(gym_env("MountainCarContinuous-v0", args.steps, args.reps, prng))
        rows.append(gym_env("PointMaze_Medium-v3", args.steps // 4, args.reps, prng))
        for name in ["simple_spread_v3", "simple_tag_v3", "simple_adversary_v3"]:
            rows.append(mpe_env(name, args.steps // 4, args.reps, prng))
        rounds = max(args.steps // 64 // 4, 10)
        rows.append(gym_batch("Pendulum-v1", rounds, args.reps, prng, low=-2.0, high=2.0))
        rows.append(gym_batch("CartPole-v1", rounds, args.reps, prng, discrete=2))
        rows.append(gym_batch("PointMaze_Medium-v3", rounds // 4, args.reps, prng))
    else:
        import gymnasium as gym
        import gymnasium_robotics

        gym.register_envs(gymnasium_robotics)
        steps = args.steps // 4
        for env_id in ["Hopper-v4", "HalfCheetah-v4", "Walker2d-v4", "Ant-v4"]:
            rows.append(gym_env(env_id, steps, args.reps, prng))
        rows.append(gym_env("PointMaze_Medium-v3", steps, args.reps, prng))
        rows.append(gym_batch("HalfCheetah-v4", max(steps // 64, 10), args.reps, prng))
    fmt = lambda v: "—" if v is None else f"{v:,.0f}"
    print("| environment | gym.make steps/s | unwrapped steps/s | SyncVectorEnv(64) env-steps/s |")
    print("|---|---|---|---|")
    for r in rows:
        print(f"| {r['env']} | {fmt(r.get('gym_make'))} | {fmt(r.get('unwrapped'))} | "
              f"{fmt(r.get('batch64_sync_vector_env'))} |")
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(rows, fh, indent=1)


if __name__ == "__main__":
    main()
