import numpy as np
import pytest

import frugal_rl as fr


def group(pid, version, rewards, length=3):
    k = len(rewards)
    return {
        "prompt_id": pid,
        "policy_version": version,
        "tokens": np.arange(k * length, dtype=np.uint32),
        "behaviour_logp": np.full(k * length, -0.5, dtype=np.float32),
        "lengths": np.full(k, length, dtype=np.uint64),
        "rewards": np.asarray(rewards, dtype=np.float32),
    }


def test_popo_replaces_ineffective_groups():
    buf = fr.ReplayBuffer({"group_size": 4, "max_age": 4, "capacity_groups": 16, "seed": 1})
    b0 = buf.fill([group(0, 0, [1, 0, 1, 0]), group(1, 0, [1, 1, 0, 0])], 0)
    assert [g["origin"] for g in b0] == ["fresh", "fresh"]
    assert len(buf) == 2
    b1 = buf.fill([group(2, 1, [0, 0, 0, 0]), group(3, 1, [1, 0, 0, 0])], 1)
    assert b1[0]["origin"] == "replayed" and b1[0]["is_replayed"] and b1[0]["age"] == 1
    assert b1[0]["prompt_id"] in (0, 1)
    assert b1[1]["origin"] == "fresh"
    np.testing.assert_allclose(b1[1]["advantages"].sum(), 0.0, atol=1e-5)
    m = buf.metrics()
    # group 3 stored, group 1 evicted after its one replay (max_replays = 1)
    assert m["len"] == 2 and m["totals"]["replayed"] == 1 and m["last_report"]["exhausted_evicted"] == 1
    state = buf.save_state()
    again = fr.ReplayBuffer.load_state(state)
    x = buf.fill([group(4, 2, [0, 0, 0, 0])], 2)
    y = again.fill([group(4, 2, [0, 0, 0, 0])], 2)
    assert x[0]["prompt_id"] == y[0]["prompt_id"] and x[0]["origin"] == y[0]["origin"]


def test_replay_errors():
    with pytest.raises(fr.InvalidParameterError):
        fr.ReplayBuffer({"group_size": 0})
    with pytest.raises(fr.InvalidParameterError):
        fr.ReplayBuffer({"group_size": 4, "max_ages": 2})
    buf = fr.ReplayBuffer({"group_size": 4})
    with pytest.raises(fr.ReplayBufferError):
        buf.fill([group(0, 0, [1, 0, 1])], 0)  # group size 3
    g = group(0, 0, [1, 0, 1, 0])
    g["behaviour_logp"][0] = np.nan
    with pytest.raises(fr.ReplayBufferError):
        buf.fill([g], 0)
    g = group(0, 0, [1, 0, 1, 0])
    g["behaviour_logp"][0] = 0.5
    with pytest.raises(fr.ReplayBufferError):
        buf.fill([g], 0)
    with pytest.raises(fr.ReplayBufferError):
        buf.fill([group(0, 5, [1, 0, 1, 0])], 0)  # future version
    g = group(0, 0, [1, 0, 1, 0])
    del g["lengths"]
    with pytest.raises(fr.ShapeError, match="lengths"):
        buf.fill([g], 0)
    with pytest.raises(fr.StateError):
        fr.ReplayBuffer.load_state(b"{}")
    assert len(buf) == 0 and buf.step == 0


def test_grpo_equals_numpy_and_rloo_matches_the_rust_doc():
    rng = np.random.default_rng(0)
    r = rng.integers(0, 2, size=32).astype(np.float64)
    a = fr.advantages(r, group_size=8)
    g = r.reshape(4, 8)
    want = (g - g.mean(1, keepdims=True)) / (g.std(1, ddof=1, keepdims=True) + 1e-6)
    want[np.all(g == g[:, :1], axis=1)] = 0.0
    np.testing.assert_allclose(a, want.ravel(), atol=1e-12)
    np.testing.assert_allclose(fr.advantages([1.0, 0, 0, 1], group_size=4, params={"estimator": {"kind": "rloo"}}),
                               [2 / 3, -2 / 3, -2 / 3, 2 / 3])
    # group ids (verl's uid) in any order give the same as consecutive groups
    perm = rng.permutation(32)
    b = fr.advantages(r[perm], group_ids=np.repeat(np.arange(4), 8)[perm])
    np.testing.assert_allclose(b, a[perm], atol=1e-12)
    d = fr.advantages(r, group_size=8, detailed=True)
    assert d["effective"].dtype == bool and len(d["reason"]) == 4


@pytest.mark.parametrize("kind", fr.ESTIMATORS)
def test_every_estimator_runs(kind):
    r = np.array([1, 0, 0, 1, 1, 1, 0, 1], dtype=np.float64)
    kw = {}
    if kind == "remax":
        kw["baselines"] = np.full(8, 0.5)
    a = fr.advantages(r, group_size=4, params={"estimator": {"kind": kind}},
                      lengths=np.full(8, 5), **kw)
    assert a.shape == (8,) and np.isfinite(a).all()


def test_advantage_errors():
    with pytest.raises(fr.AdvantageError, match="finite|NaN"):
        fr.advantages([1.0, np.nan, 0.0, 1.0], group_size=2)
    with pytest.raises(fr.ShapeError):
        fr.advantages([1.0, 0.0, 0.0], group_size=2)
    with pytest.raises(fr.ShapeError):
        fr.advantages(np.zeros((2, 2)), group_size=2)
    with pytest.raises(fr.InvalidParameterError):
        fr.advantages([1.0, 0.0], group_size=2, params={"estimator": {"kind": "nope"}})
    with pytest.raises(fr.InvalidParameterError):
        fr.advantages([1.0, 0.0], group_size=2, params={"estimator": {"kind": "grpo", "eps": -1.0}})
    with pytest.raises(fr.InvalidParameterError):
        fr.advantages([1.0, 0.0])


def test_classify():
    assert fr.classify([1, 0, 1, 0]) == (True, None)
    eff, why = fr.classify([0, 0, 0, 0])
    assert not eff and why
    eff, why = fr.classify([1, 1, 1, 1])
    assert not eff and why and why != fr.classify([0, 0, 0, 0])[1]
    assert not fr.classify([1.0])[0]
    assert fr.classify([0.2, 0.4], rule={"reward_std": {"tol": 0.01}})[0]
    with pytest.raises(fr.OutcomeError):
        fr.classify([np.inf, 0.0])
    with pytest.raises(fr.InvalidParameterError):
        fr.classify([1, 0], rule={"bogus": {}})
    with pytest.raises(fr.ShapeError):
        fr.classify([1, 0], outcomes=[True])
