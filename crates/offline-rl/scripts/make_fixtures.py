"""Writes the HDF5 fixtures of crates/offline-rl/tests/datasets.rs with h5py and Minari.

Run from the repository root with the provisioned venv (h5py and minari from PyPI):

    ~/.cache/frugal-rl/venv/bin/pip install h5py==3.16.0 minari==0.5.4
    ~/.cache/frugal-rl/venv/bin/python crates/offline-rl/scripts/make_fixtures.py

Every value follows a formula the Rust test recomputes (row i, column j):
    observations[i, j]      = i + j / 10
    actions[i, k]           = -i / 100 + k
    rewards[i]              = i / 2
    next_observations[i, j] = observations[i, j] + 1000   (so the stored column is recognisable)
D4RL files: 40 rows, timeouts at rows 9 and 29, a terminal at row 19, row 39 without a flag.
Minari datasets: episodes of 5 (truncated), 7 (terminated) and 4 (truncated) steps written by
Minari's own HDF5Storage.update_episodes (the code path of DataCollector.create_dataset).
"""
import os
import pathlib
import shutil

import gymnasium as gym
import h5py
import numpy as np
from minari.data_collector import EpisodeBuffer
from minari.dataset.minari_storage import MinariStorage

OUT = pathlib.Path(__file__).resolve().parent.parent / "tests" / "fixtures"
N, O, A = 40, 3, 2


def columns(n=N, o=O, a=A):
    i = np.arange(n, dtype=np.float64)[:, None]
    obs = (i + np.arange(o)[None, :] / 10).astype(np.float32)
    act = (-i / 100 + np.arange(a)[None, :]).astype(np.float32)
    rew = (np.arange(n) / 2).astype(np.float32)
    term = np.zeros(n, dtype=bool)
    tout = np.zeros(n, dtype=bool)
    tout[[9, 29]] = True
    term[19] = True
    return obs, act, rew, term, tout


def d4rl(name, drop=(), next_obs=True, mutate=None, compression="gzip"):
    obs, act, rew, term, tout = columns()
    cols = {
        "observations": obs,
        "actions": act,
        "rewards": rew,
        "terminals": term,
        "timeouts": tout,
    }
    if next_obs:
        cols["next_observations"] = obs + 1000
    if mutate:
        mutate(cols)
    with h5py.File(OUT / name, "w") as f:
        for k, v in cols.items():
            if k in drop:
                continue
            f.create_dataset(k, data=v, compression=compression)
        f.create_dataset("infos/qpos", data=np.zeros((N, 2)), compression=compression)
        f.create_dataset("metadata/algorithm", data="SAC")


def minari(name, dict_obs=False):
    root = (OUT / name).absolute()
    shutil.rmtree(root, ignore_errors=True)
    data = root / "data"
    data.mkdir(parents=True)
    if dict_obs:
        obs_space = gym.spaces.Dict(
            {
                "observation": gym.spaces.Box(-np.inf, np.inf, (2,), np.float32),
                "desired_goal": gym.spaces.Box(-np.inf, np.inf, (2,), np.float32),
            }
        )
    else:
        obs_space = gym.spaces.Box(-np.inf, np.inf, (O,), np.float32)
    act_space = gym.spaces.Box(-1.0, 1.0, (1,), np.float32)
    st = MinariStorage.new(data, observation_space=obs_space, action_space=act_space, data_format="hdf5")
    episodes = []
    step = 0
    for ep, (n, terminated) in enumerate([(5, False), (7, True), (4, False)]):
        rows = np.arange(step, step + n + 1, dtype=np.float64)[:, None]
        if dict_obs:
            obs = {
                "observation": (rows + np.arange(2)[None, :] / 10).astype(np.float32),
                "desired_goal": np.repeat(np.array([[100.0 + ep, -100.0]], dtype=np.float32), n + 1, 0),
            }
        else:
            obs = [r for r in (rows + np.arange(O)[None, :] / 10).astype(np.float32)]
        acts = [np.array([-(step + t) / 100], dtype=np.float32) for t in range(n)]
        rews = [(step + t) / 2 for t in range(n)]
        te = [terminated and t == n - 1 for t in range(n)]
        tr = [(not terminated) and t == n - 1 for t in range(n)]
        episodes.append(
            EpisodeBuffer(id=ep, seed=ep, observations=obs, actions=acts, rewards=rews, terminations=te, truncations=tr, infos={})
        )
        step += n
    st.update_episodes(episodes)
    # the metadata Minari's DataCollector adds on top of the storage's
    import json

    meta_path = data / "metadata.json"
    meta = json.loads(meta_path.read_text())
    meta.update({"dataset_id": f"test/{name}-v0", "minari_version": "0.5.4", "ref_min_score": -1.0, "ref_max_score": 9.0})
    meta_path.write_text(json.dumps(meta))


def main():
    OUT.mkdir(parents=True, exist_ok=True)
    d4rl("d4rl_small.hdf5")
    d4rl("d4rl_no_next.hdf5", next_obs=False, compression=None)

    def nan(c):
        c["observations"][5, 1] = np.nan

    d4rl("d4rl_nan.hdf5", mutate=nan)

    def short(c):
        c["actions"] = c["actions"][:-1]

    d4rl("d4rl_short_actions.hdf5", mutate=short)
    d4rl("d4rl_no_terminals.hdf5", drop=("terminals",))

    def bad_flag(c):
        t = c["terminals"].astype(np.float32)
        t[7] = 0.5
        c["terminals"] = t

    d4rl("d4rl_bad_flag.hdf5", mutate=bad_flag)
    (OUT / "not_hdf5.hdf5").write_bytes(b"this is not an HDF5 file\n" * 4)
    minari("minari_small")
    minari("minari_dict", dict_obs=True)
    print("fixtures written to", OUT)


if __name__ == "__main__":
    main()
