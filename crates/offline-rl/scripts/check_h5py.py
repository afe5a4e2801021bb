"""Checks that h5py, Minari and safetensors read the files offline-rl writes.

    mkdir -p /tmp/offline-h5py
    OFFLINE_RL_H5PY_DIR=/tmp/offline-h5py cargo test -p offline-rl --test datasets round_trips_are_exact
    ~/.cache/frugal-rl/venv/bin/python crates/offline-rl/scripts/check_h5py.py /tmp/offline-h5py

The test writes the same dataset (3 episodes of 6 steps, obs 3, action 2, chained; see
`chained` in tests/datasets.rs) as D4RL HDF5, a Minari dataset and safetensors; this script
reads each with the Python libraries and checks they agree with each other and with the
dataset's structure.
"""
import json
import pathlib
import sys

import h5py
import numpy as np
from minari import MinariDataset
from safetensors.numpy import load_file

d = pathlib.Path(sys.argv[1])
with h5py.File(d / "chained.hdf5", "r") as f:
    cols = {k: f[k][()] for k in ["observations", "actions", "rewards", "next_observations", "terminals", "timeouts"]}
    info = json.loads(f.attrs["frugal_rl_info"])
    assert f["terminals"].dtype == np.bool_, f["terminals"].dtype
    assert f["observations"].compression == "gzip"
n = cols["rewards"].shape[0]
assert n == 18 and cols["observations"].shape == (18, 3) and cols["actions"].shape == (18, 2)
assert cols["terminals"].sum() == 1 and cols["timeouts"].sum() == 2, (cols["terminals"], cols["timeouts"])
assert info["name"] == "test/chained-v0", info

st = load_file(str(d / "chained.safetensors"))
for k in ["observations", "actions", "rewards", "next_observations"]:
    assert np.array_equal(st[k], cols[k]), k
assert np.array_equal(st["terminals"].astype(bool), cols["terminals"])
assert np.array_equal(st["timeouts"].astype(bool), cols["timeouts"])

ds = MinariDataset(d / "chained_minari" / "data")
assert ds.total_episodes == 3 and ds.total_steps == 18, (ds.total_episodes, ds.total_steps)
row = 0
for ep in ds.iterate_episodes():
    m = len(ep.rewards)
    assert np.array_equal(ep.observations[:-1], cols["observations"][row : row + m])
    assert np.array_equal(ep.observations[1:], cols["next_observations"][row : row + m])
    assert np.array_equal(ep.actions, cols["actions"][row : row + m])
    assert np.allclose(ep.rewards, cols["rewards"][row : row + m])
    assert np.array_equal(ep.terminations, cols["terminals"][row : row + m])
    assert np.array_equal(ep.truncations, cols["timeouts"][row : row + m])
    row += m
assert row == n
print("h5py, Minari and safetensors read the files offline-rl wrote: OK")
