#!/usr/bin/env python3
"""Record golden rollouts of the reference implementations for the rl-envs tests.

Run with the provisioned venv (gymnasium, gymnasium-robotics, mpe2, mujoco==3.17.0):

    ~/.cache/frugal-rl/venv/bin/pip install gymnasium==1.4.0 gymnasium-robotics==1.4.2 mpe2==1.1.1
    ~/.cache/frugal-rl/venv/bin/python scripts/golden_rl_envs.py [classic|cartpole_after|maze|mpe|mpe_more|mujoco|mujoco_v5|numpy_sum|all]

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


def finfo(info):
    """A step's info dict as JSON: numbers as float64 (a float32 is exact), flags as bools,
    arrays flattened; the key order is the reference's."""
    out = {}
    for k, v in info.items():
        if isinstance(v, (bool, np.bool_)):
            out[k] = bool(v)
        elif np.ndim(v) == 0:
            out[k] = float(v)
        else:
            out[k] = f(v)
    return out


def gym_mujoco():
    """gymnasium with warnings off (its MuJoCo envs need `imageio` and `packaging` importable:
    `pip install "gymnasium[mujoco]"`, or `pip install --no-deps --target DIR imageio packaging`
    and PYTHONPATH=DIR)."""
    import warnings

    import gymnasium as gym

    warnings.filterwarnings("ignore")
    return gym


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


def cartpole_after():
    """CartPole-v1 stepped on after termination (gymnasium warns, then rewards 0 / -1)."""
    import warnings

    import gymnasium as gym

    warnings.filterwarnings("ignore")
    gym.logger.min_level = 40  # the "already returned terminated = True" warning
    cases = []

    def rollout(seed, prng, after, sutton_barto=False):
        kwargs = {"sutton_barto_reward": True} if sutton_barto else {}
        env = gym.make("CartPole-v1", **kwargs)
        obs, _ = env.reset(seed=seed)
        case = {"env": "CartPole-v1", "seed": seed, "kwargs": kwargs, "reset_obs": f(obs), "actions": [],
                "obs": [], "rewards": [], "terminated": [], "truncated": [], "steps_beyond_terminated": []}
        fell, left = False, after
        while left > 0:
            # random until the pole falls, then pushes under the leaning pole (so that some
            # later steps come back inside the thresholds)
            a = int(obs[2] + 0.5 * obs[3] > 0) if fell else int(prng.integers(0, 2))
            obs, r, term, trunc, _ = env.step(a)
            case["actions"].append([float(a)])
            case["obs"].append(f(obs))
            case["rewards"].append(float(r))
            case["terminated"].append(bool(term))
            case["truncated"].append(bool(trunc))
            case["steps_beyond_terminated"].append(env.unwrapped.steps_beyond_terminated)
            fell = fell or term
            if fell:
                left -= 1
            if trunc:
                break
        cases.append(case)

    for k, seed in enumerate([0, 1, 2]):
        rollout(seed, np.random.default_rng(600 + k), 40)
    rollout(3, np.random.default_rng(610), 40, sutton_barto=True)
    write("cartpole_after_termination", {"generator": "scripts/golden_rl_envs.py cartpole_after",
                                         "versions": versions("gymnasium", "numpy"), "cases": cases})


# ------------------------------------------------------------------------------------------
# point maze (gymnasium-robotics PointMaze_*-v3, MuJoCo)


def wall_distance(maze, xy):
    """Distance from xy to the nearest wall block (the ball's centre, not its surface)."""
    best = np.inf
    s = maze.maze_size_scaling
    for i in range(maze.map_length):
        for j in range(maze.map_width):
            if maze.maze_map[i][j] != 1:
                continue
            c = maze.cell_rowcol_to_xy(np.array([i, j]))
            d = np.maximum(np.abs(xy - c) - 0.5 * s, 0.0)
            inside = min(max(abs(xy[0] - c[0]) - 0.5 * s, abs(xy[1] - c[1]) - 0.5 * s), 0.0)
            best = min(best, float(np.sqrt(d @ d)) + inside)
    return best


def maze():
    """Point-maze rollouts with each step's info and the reset info. Without gymnasium-robotics in
    the venv: `pip install --no-deps --target DIR gymnasium-robotics==1.4.2 pettingzoo` (plus
    `imageio packaging`) and run with PYTHONPATH=DIR."""
    import gymnasium as gym
    import gymnasium_robotics
    from gymnasium_robotics.envs.maze import maps

    gym.register_envs(gymnasium_robotics)
    cases = []

    def flat(o):
        return f(np.concatenate([o["observation"], o["desired_goal"]]))

    def rollout(env_id, seed, policy, steps, **kwargs):
        env = gym.make(env_id, **kwargs)
        obs, info = env.reset(seed=seed)
        inner = env.unwrapped
        case = {"env": env_id, "seed": seed, "kwargs": kwargs, "reset_obs": flat(obs),
                "reset_wall_dist": wall_distance(inner.maze, obs["observation"][:2]),
                "reset_info": finfo(info),
                "actions": [], "obs": [], "rewards": [], "terminated": [], "truncated": [],
                "wall_dist": [], "infos": []}
        for t in range(steps):
            a = policy(obs, t)
            obs, r, term, trunc, info = env.step(a)
            case["infos"].append(finfo(info))
            case["actions"].append(f(a))
            case["obs"].append(flat(obs))
            case["rewards"].append(float(r))
            case["terminated"].append(bool(term))
            case["truncated"].append(bool(trunc))
            case["wall_dist"].append(wall_distance(inner.maze, obs["observation"][:2]))
            if term or trunc:
                break
        cases.append(case)

    def seek(prng, gain=2.0, noise=0.3):
        def pol(o, t):
            x = o["observation"]
            a = gain * (o["desired_goal"] - x[:2]) - 0.5 * x[2:] + prng.normal(0, noise, size=2)
            return np.clip(a, -1.0, 1.0).astype(np.float32)
        return pol

    def smooth_random(prng):
        state = {"a": np.zeros(2)}
        def pol(o, t):
            state["a"] = 0.9 * state["a"] + 0.45 * prng.normal(size=2)
            # partly outside [-1, 1]: clipped by the environment
            return np.clip(state["a"], -1.3, 1.3).astype(np.float32)
        return pol

    for k, name in enumerate(["Open", "UMaze", "Medium", "Large"]):
        prng = np.random.default_rng(1000 + k)
        rollout(f"PointMaze_{name}-v3", 10 * k, smooth_random(prng), 80)
        prng = np.random.default_rng(2000 + k)
        rollout(f"PointMaze_{name}Dense-v3", 10 * k + 1, seek(prng), 120)
    # episodes that end at the goal
    for seed in [3, 4]:
        prng = np.random.default_rng(3000 + seed)
        rollout("PointMaze_Open-v3", seed, seek(prng, gain=3.0, noise=0.1), 300, continuing_task=False)
    # a full episode to the registered time limit
    prng = np.random.default_rng(4000)
    rollout("PointMaze_UMaze-v3", 5, smooth_random(prng), 400)
    # diverse maps: resets drawn from their reset cells
    for name in ["Medium_Diverse_G", "Large_Diverse_GR"]:
        prng = np.random.default_rng(5000)
        rollout(f"PointMaze_{name}-v3", 6, seek(prng), 20)
    # continuing tasks with reset_target: the goal moves each time it is reached (success is
    # measured before the move; the observation still shows the old goal)
    prng = np.random.default_rng(6000)
    rollout("PointMaze_Open-v3", 7, seek(prng, gain=3.0, noise=0.1), 200, reset_target=True)
    prng = np.random.default_rng(6001)
    rollout("PointMaze_OpenDense-v3", 8, seek(prng, gain=3.0, noise=0.1), 200, reset_target=True)

    layouts = {n: [[str(c) for c in row] for row in getattr(maps, n)] for n in
               ["OPEN", "U_MAZE", "MEDIUM_MAZE", "LARGE_MAZE", "OPEN_DIVERSE_G", "OPEN_DIVERSE_GR",
                "MEDIUM_MAZE_DIVERSE_G", "MEDIUM_MAZE_DIVERSE_GR", "LARGE_MAZE_DIVERSE_G",
                "LARGE_MAZE_DIVERSE_GR"]}
    write("maze", {"generator": "scripts/golden_rl_envs.py maze",
                   "versions": versions("gymnasium", "gymnasium-robotics", "mujoco", "numpy"),
                   "maps": layouts, "cases": cases})


# ------------------------------------------------------------------------------------------
# multi-agent particle environments (mpe2, PettingZoo parallel API)


def _mpe_rollout(module, name, seed, kwargs, policy):
    env = module.parallel_env(**kwargs)
    obs, _ = env.reset(seed=seed)
    agents = list(env.possible_agents)
    case = {"env": name, "seed": seed, "kwargs": kwargs, "agents": agents,
            "reset_obs": [f(obs[a]) for a in agents], "actions": [], "obs": [], "rewards": [],
            "terminated": [], "truncated": []}
    for t in range(100):
        acts = {a: policy(a, obs[a], t) for a in env.agents}
        obs, rew, term, trunc, _ = env.step(acts)
        case["actions"].append([f(acts[a]) if not isinstance(acts[a], (int, np.integer))
                                else [float(acts[a])] for a in agents])
        case["obs"].append([f(obs[a]) for a in agents])
        case["rewards"].append([float(rew[a]) for a in agents])
        case["terminated"].append([bool(term[a]) for a in agents])
        case["truncated"].append([bool(trunc[a]) for a in agents])
        if all(term[a] or trunc[a] for a in agents):
            break
    return case


def _mpe_discrete(prng):
    return lambda a, o, t: int(prng.integers(0, 5))


def _mpe_continuous(prng):
    # partly outside [0, 1]: mpe2's ClipOutOfBoundsWrapper clips
    return lambda a, o, t: prng.uniform(-0.2, 1.2, size=5).astype(np.float32)


def mpe():
    import warnings

    from mpe2 import simple_adversary_v3, simple_spread_v3, simple_tag_v3

    warnings.filterwarnings("ignore")
    modules = {"simple_spread_v3": simple_spread_v3, "simple_tag_v3": simple_tag_v3,
               "simple_adversary_v3": simple_adversary_v3}
    cases = []

    def rollout(name, seed, kwargs, policy):
        cases.append(_mpe_rollout(modules[name], name, seed, kwargs, policy))

    discrete, continuous = _mpe_discrete, _mpe_continuous

    def to_centre(prng):
        # pushes everyone together so that contact forces and collision rewards occur
        def pol(a, o, t):
            pos = o[2:4]
            act = np.zeros(5, dtype=np.float32)
            act[1], act[2] = max(pos[0], 0), max(-pos[0], 0)
            act[3], act[4] = max(pos[1], 0), max(-pos[1], 0)
            return np.clip(act + prng.uniform(0, 0.3, size=5), 0, 1).astype(np.float32)
        return pol

    rollout("simple_spread_v3", 0, {}, discrete(np.random.default_rng(10)))
    rollout("simple_spread_v3", 2, {"continuous_actions": True}, continuous(np.random.default_rng(12)))
    rollout("simple_spread_v3", 3, {"N": 5, "continuous_actions": True, "max_cycles": 12}, to_centre(np.random.default_rng(13)))
    rollout("simple_spread_v3", 4, {"N": 4, "num_agent_neighbors": 2, "num_landmark_neighbors": 2},
            discrete(np.random.default_rng(14)))
    rollout("simple_tag_v3", 0, {}, discrete(np.random.default_rng(20)))
    rollout("simple_tag_v3", 2, {"continuous_actions": True, "num_good": 2, "num_adversaries": 4,
                                 "num_obstacles": 3, "max_cycles": 15}, to_centre(np.random.default_rng(22)))
    rollout("simple_tag_v3", 3, {"num_agent_neighbors": 2, "num_landmark_neighbors": 1},
            discrete(np.random.default_rng(23)))
    rollout("simple_adversary_v3", 0, {}, discrete(np.random.default_rng(30)))
    rollout("simple_adversary_v3", 2, {"N": 3, "continuous_actions": True}, continuous(np.random.default_rng(32)))
    write("mpe", {"generator": "scripts/golden_rl_envs.py mpe",
                  "versions": versions("mpe2", "pettingzoo", "numpy"), "cases": cases})

def mpe_more():
    """The scenarios added after spread/tag/adversary, in their own fixture (mpe_more.json)."""
    import warnings

    from mpe2 import (simple_crypto_v3, simple_push_v3, simple_reference_v3, simple_speaker_listener_v4,
                      simple_world_comm_v3)

    warnings.filterwarnings("ignore")
    cases = []

    def toward_other(prng):
        # each agent heads for the other one (noisy), so that the two collide and push
        def pol(a, o, t):
            rel = o[-2:]
            act = np.zeros(5, dtype=np.float32)
            act[1], act[2] = max(-rel[0], 0), max(rel[0], 0)
            act[3], act[4] = max(-rel[1], 0), max(rel[1], 0)
            return np.clip(3 * act + prng.uniform(0, 0.3, size=5), 0, 1).astype(np.float32)
        return pol

    cases.append(_mpe_rollout(simple_push_v3, "simple_push_v3", 0, {}, _mpe_discrete(np.random.default_rng(40))))
    cases.append(_mpe_rollout(simple_push_v3, "simple_push_v3", 1, {"continuous_actions": True, "max_cycles": 20},
                              _mpe_continuous(np.random.default_rng(41))))
    cases.append(_mpe_rollout(simple_push_v3, "simple_push_v3", 2, {"continuous_actions": True},
                              toward_other(np.random.default_rng(42))))

    def by_space(module, kwargs, prng, lo=-0.2, hi=1.2):
        # per-agent spaces (speakers' differ): discrete uniform over all choices, or continuous
        # uniform on [lo, hi] (clipped to [0, 1] by mpe2's ClipOutOfBoundsWrapper)
        spaces = {a: module.parallel_env(**kwargs).action_space(a) for a in module.parallel_env(**kwargs).possible_agents}

        def pol(a, o, t):
            sp = spaces[a]
            if hasattr(sp, "n"):
                return int(prng.integers(0, sp.n))
            return prng.uniform(lo, hi, size=sp.shape).astype(np.float32)
        return pol

    comm = [(simple_reference_v3, "simple_reference_v3", 0, {}),
            (simple_reference_v3, "simple_reference_v3", 1, {"continuous_actions": True, "local_ratio": 0.3}),
            (simple_speaker_listener_v4, "simple_speaker_listener_v4", 0, {}),
            (simple_speaker_listener_v4, "simple_speaker_listener_v4", 1, {"continuous_actions": True, "max_cycles": 20}),
            (simple_crypto_v3, "simple_crypto_v3", 0, {}),
            (simple_crypto_v3, "simple_crypto_v3", 1, {"continuous_actions": True})]
    for k, (module, name, seed, kwargs) in enumerate(comm):
        prng = np.random.default_rng(50 + k)
        cases.append(_mpe_rollout(module, name, seed, kwargs, by_space(module, kwargs, prng)))
    # messages often all zero after clipping: crypto's rewards skip silent messages
    cases.append(_mpe_rollout(simple_crypto_v3, "simple_crypto_v3", 2, {"continuous_actions": True},
                              by_space(simple_crypto_v3, {"continuous_actions": True},
                                       np.random.default_rng(60), lo=-1.0, hi=0.6)))

    def world_comm_gather(prng):
        # everyone heads for the centre (forests, food and each other: hiding, eating, catching);
        # the leader's message is random
        def pol(a, o, t):
            pos = o[2:4]
            act = np.zeros(5, dtype=np.float32)
            act[1], act[2] = max(pos[0], 0), max(-pos[0], 0)
            act[3], act[4] = max(pos[1], 0), max(-pos[1], 0)
            act = np.clip(2 * act + prng.uniform(0, 0.4, size=5), 0, 1)
            if a.startswith("lead"):
                act = np.concatenate([act, prng.uniform(-0.2, 1.2, size=4)])
            return act.astype(np.float32)
        return pol

    wc = simple_world_comm_v3
    cases.append(_mpe_rollout(wc, "simple_world_comm_v3", 0, {}, by_space(wc, {}, np.random.default_rng(70))))
    cases.append(_mpe_rollout(wc, "simple_world_comm_v3", 1, {"continuous_actions": True},
                              world_comm_gather(np.random.default_rng(71))))
    kw = {"num_good": 3, "num_adversaries": 3, "num_obstacles": 2, "num_food": 3, "num_forests": 1,
          "continuous_actions": True, "max_cycles": 20}
    cases.append(_mpe_rollout(wc, "simple_world_comm_v3", 2, kw, by_space(wc, kw, np.random.default_rng(72))))
    write("mpe_more", {"generator": "scripts/golden_rl_envs.py mpe_more",
                       "versions": versions("mpe2", "pettingzoo", "numpy"), "cases": cases})


# ------------------------------------------------------------------------------------------
# MuJoCo locomotion (gymnasium v4 on mujoco 3.17.0)


def mujoco_envs():
    gym = gym_mujoco()
    cases = []

    def rollout(env_id, seed, steps, prng, lo=-1.2, hi=1.2, **kwargs):
        env = gym.make(env_id, **kwargs)
        obs, _ = env.reset(seed=seed)
        data = env.unwrapped.data
        nu = env.action_space.shape[0]
        case = {"env": env_id, "seed": seed, "kwargs": kwargs, "reset_obs": f(obs),
                "reset_qpos": f(data.qpos), "reset_qvel": f(data.qvel), "actions": [], "obs": [],
                "rewards": [], "terminated": [], "truncated": [], "infos": []}
        for t in range(steps):
            # partly outside [-1, 1]: MuJoCo clamps the control, the cost uses the raw action
            a = prng.uniform(lo, hi, size=nu).astype(np.float32)
            obs, r, term, trunc, info = env.step(a)
            case["infos"].append(finfo(info))
            case["actions"].append(f(a))
            case["obs"].append(f(obs))
            case["rewards"].append(float(r))
            case["terminated"].append(bool(term))
            case["truncated"].append(bool(trunc))
            if term or trunc:
                break
        cases.append(case)

    for seed in [0, 1]:
        rollout("Hopper-v4", seed, 100, np.random.default_rng(40 + seed))
        rollout("Walker2d-v4", seed, 100, np.random.default_rng(50 + seed))
    rollout("HalfCheetah-v4", 0, 60, np.random.default_rng(60))
    rollout("Ant-v4", 0, 40, np.random.default_rng(70))
    rollout("Ant-v4", 1, 20, np.random.default_rng(71), use_contact_forces=True)
    # small actions: the hopper stays up long enough to be cut by a short time limit
    rollout("Hopper-v4", 2, 60, np.random.default_rng(42), lo=-0.1, hi=0.1, max_episode_steps=50)
    write("mujoco", {"generator": "scripts/golden_rl_envs.py mujoco",
                     "versions": versions("gymnasium", "mujoco", "numpy"), "cases": cases})


# ------------------------------------------------------------------------------------------
# NumPy 2's summation order: np.sum(np.square(a)) on random float32 / float64 arrays


def numpy_sum():
    """Only the sums are written: the Rust test redraws the arrays with its port of
    default_rng(seed).uniform(-1.2, 1.2, size=n) (then .astype(dtype)), one array after the
    other; float64 arrays at odd positions are clip(3a, -1, 1) (many equal entries, like
    clipped contact forces)."""
    cases = []
    for dtype, lengths, count in [("float32", [1, 2, 3, 5, 6, 7, 8, 9, 16, 17, 21, 33], 500),
                                  ("float64", [3, 8, 17, 78, 84, 130, 300], 100)]:
        for n in lengths:
            seed = 2027 + n + (1000 if dtype == "float64" else 0)
            prng = np.random.default_rng(seed)
            sums = []
            for i in range(count):
                a = prng.uniform(-1.2, 1.2, size=n).astype(dtype)
                if dtype == "float64" and i % 2:
                    a = np.clip(a * 3.0, -1.0, 1.0)
                sums.append(float(np.sum(np.square(a))))
            cases.append({"dtype": dtype, "n": n, "seed": seed, "sums": sums})
    write("numpy_sum", {"generator": "scripts/golden_rl_envs.py numpy_sum", "versions": versions("numpy"),
                        "cases": cases})


# ------------------------------------------------------------------------------------------
# MuJoCo v5 (gymnasium 1.4 *_v5.py on mujoco 3.17.0) and Swimmer-v4, with infos and reset infos


def mujoco_v5():
    gym = gym_mujoco()
    cases = []

    def rollout(env_id, seed, steps, prng, lo=-1.2, hi=1.2, **kwargs):
        env = gym.make(env_id, **kwargs)
        obs, reset_info = env.reset(seed=seed)
        data = env.unwrapped.data
        nu = env.action_space.shape[0]
        case = {"env": env_id, "seed": seed, "kwargs": kwargs, "reset_obs": f(obs),
                "reset_info": finfo(reset_info), "reset_qpos": f(data.qpos), "reset_qvel": f(data.qvel),
                "actions": [], "obs": [], "rewards": [], "terminated": [], "truncated": [], "infos": []}
        for t in range(steps):
            a = prng.uniform(lo, hi, size=nu).astype(np.float32)
            obs, r, term, trunc, info = env.step(a)
            case["actions"].append(f(a))
            case["obs"].append(f(obs))
            case["rewards"].append(float(r))
            case["terminated"].append(bool(term))
            case["truncated"].append(bool(trunc))
            case["infos"].append(finfo(info))
            if term or trunc:
                break
        cases.append(case)

    rollout("Hopper-v5", 0, 100, np.random.default_rng(140))
    rollout("Hopper-v5", 1, 60, np.random.default_rng(141), terminate_when_unhealthy=False,
            healthy_reward=2.0, ctrl_cost_weight=0.01, exclude_current_positions_from_observation=False)
    rollout("Walker2d-v5", 0, 100, np.random.default_rng(150))
    rollout("Walker2d-v5", 1, 40, np.random.default_rng(151), forward_reward_weight=1.5,
            healthy_z_range=(0.9, 2.0), reset_noise_scale=0.02, frame_skip=3)
    rollout("HalfCheetah-v5", 0, 60, np.random.default_rng(160))
    rollout("HalfCheetah-v5", 1, 30, np.random.default_rng(161), forward_reward_weight=2.0,
            ctrl_cost_weight=0.3, exclude_current_positions_from_observation=False)
    rollout("Ant-v5", 0, 40, np.random.default_rng(170))
    rollout("Ant-v5", 1, 30, np.random.default_rng(171), include_cfrc_ext_in_observation=False,
            contact_cost_weight=1e-3, contact_force_range=(-0.5, 0.5), main_body="torso",
            healthy_z_range=(0.3, 1.0), forward_reward_weight=0.5)
    rollout("Ant-v5", 2, 25, np.random.default_rng(172), exclude_current_positions_from_observation=False,
            terminate_when_unhealthy=False, healthy_reward=0.5, reset_noise_scale=0.05, frame_skip=4)
    # a model named by `xml_file` (relative names are looked up in gymnasium's assets folder)
    rollout("Walker2d-v5", 2, 40, np.random.default_rng(152), xml_file="walker2d.xml")
    rollout("Swimmer-v5", 0, 60, np.random.default_rng(180))
    rollout("Swimmer-v5", 1, 30, np.random.default_rng(181), forward_reward_weight=2.0, ctrl_cost_weight=1e-3,
            reset_noise_scale=0.05, exclude_current_positions_from_observation=False, frame_skip=5)
    rollout("Swimmer-v4", 0, 40, np.random.default_rng(182))
    rollout("Swimmer-v4", 1, 20, np.random.default_rng(183), forward_reward_weight=0.5, ctrl_cost_weight=2e-4,
            reset_noise_scale=0.2, exclude_current_positions_from_observation=False)
    # small actions: cut by a short time limit
    rollout("Hopper-v5", 2, 60, np.random.default_rng(142), lo=-0.1, hi=0.1, max_episode_steps=50)
    write("mujoco_v5", {"generator": "scripts/golden_rl_envs.py mujoco_v5",
                        "versions": versions("gymnasium", "mujoco", "numpy"), "cases": cases})


def main():
    which = sys.argv[1] if len(sys.argv) > 1 else "all"
    table = {"classic": classic, "cartpole_after": cartpole_after, "maze": maze, "mpe": mpe, "mpe_more": mpe_more,
             "mujoco": mujoco_envs, "numpy_sum": numpy_sum, "mujoco_v5": mujoco_v5}
    for k in (table if which == "all" else [which]):
        table[k]()


if __name__ == "__main__":
    main()
