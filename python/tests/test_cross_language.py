"""The same selection sequence from Python (the wheel) and from Rust (rlvr-select driven
directly by crates/frugal-rl-py/examples/select_sequence.rs) for a fixed seed and outcome
stream. `make test-python` writes the Rust side and points FRUGAL_RUST_SEQUENCE at it."""

import json
import os

import numpy as np
import pytest

import frugal_rl as fr


def successes(ids, t, k):
    return (ids * np.uint64(2654435761) + np.uint64(t * 40503)) % np.uint64(k + 1)


@pytest.fixture(scope="module")
def rust():
    path = os.environ.get("FRUGAL_RUST_SEQUENCE")
    if not path:
        pytest.skip("FRUGAL_RUST_SEQUENCE not set (make test-python sets it)")
    with open(path) as f:
        return json.load(f)


@pytest.mark.parametrize("kind", ["dps", "mopps"])
def test_python_sequence_equals_rust(rust, kind):
    sel = fr.Selector(kind, n_items=rust["n"], seed=rust["seed"])
    k = rust["k"]
    got = []
    for t in range(rust["steps"]):
        ids = sel.select(rust["batch"])
        sel.observe_successes(ids, successes(ids, t, k), k)
        got.append(ids.tolist())
    assert got == rust[kind]
