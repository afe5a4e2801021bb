import json

import numpy as np
import pytest

import frugal_rl as fr


def stream(ids, t, k=8):
    return (ids.astype(np.uint64) * np.uint64(2654435761) + np.uint64(t * 40503)) % np.uint64(k + 1)


@pytest.mark.parametrize("kind", ["dps", "mopps", "uniform", "history_resampling", "gdrm"])
def test_predictive_kinds_select_and_observe(kind):
    sel = fr.Selector(kind, n_items=100, seed=3)
    for t in range(5):
        ids = sel.select(10)
        assert ids.dtype == np.uint64 and ids.shape == (10,)
        assert len(set(ids.tolist())) == 10 and ids.max() < 100
        rewards = (np.arange(10 * 4).reshape(10, 4) % 3 == 0).astype(np.float32)
        sel.observe(ids, rewards)
        assert sel.step == t + 1


def test_dps_prefers_partially_solved_prompts():
    n, k = 200, 8
    sel = fr.Selector("dps", n_items=n, seed=0)
    # prompts < 50 are always partially solved, the rest never / always
    for _ in range(30):
        ids = sel.select(50)
        succ = np.where(ids < 50, 4, np.where(ids % 2 == 0, 0, k)).astype(np.uint64)
        sel.observe_successes(ids, succ, k)
    ids = sel.select(50)
    assert (ids < 50).mean() > 0.9
    pred = sel.predict(np.arange(n, dtype=np.uint64))
    assert pred["class_probs"].shape == (n, 3)
    assert pred["mean"][:50].mean() > 0.3


def test_candidates_and_dtypes():
    sel = fr.Selector("mopps", n_items=50, seed=1)
    for c in (np.arange(20, dtype=np.uint64), np.arange(20, dtype=np.int64), list(range(20)),
              np.arange(40, dtype=np.int32)[::2]):
        ids = sel.select(5, candidates=c)
        assert set(ids.tolist()) <= set(np.asarray(c).tolist())


def test_state_roundtrip_is_exact():
    a = fr.Selector("dps", n_items=300, seed=9)
    for t in range(4):
        ids = a.select(20)
        a.observe_successes(ids, stream(ids, t), 8)
    state = a.save_state()
    b = fr.Selector("dps", n_items=300, seed=123)
    b.load_state(state)
    assert b.step == a.step
    json.loads(a.state_json())
    for t in range(4, 8):
        x, y = a.select(20), b.select(20)
        np.testing.assert_array_equal(x, y)
        a.observe_successes(x, stream(x, t), 8)
        b.observe_successes(y, stream(y, t), 8)


def test_bad_input_raises_typed_errors_with_messages():
    sel = fr.Selector("dps", n_items=10)
    with pytest.raises(fr.IdError, match="unknown id 10"):
        sel.select(2, candidates=[1, 10])
    with pytest.raises(fr.IdError, match="duplicate"):
        sel.select(2, candidates=[1, 1, 2])
    with pytest.raises(fr.IdError, match="negative"):
        sel.select(1, candidates=np.array([-1, 2]))
    with pytest.raises(fr.BatchSizeError):
        sel.select(0)
    with pytest.raises(fr.BatchSizeError):
        sel.select(11)
    with pytest.raises(fr.OutcomeError, match="non-finite"):
        sel.observe([1, 2], np.array([[np.nan, 1.0], [0.0, 1.0]]))
    with pytest.raises(fr.OutcomeError, match="outside"):
        sel.observe([1], np.array([[2.0, 1.0]]))
    with pytest.raises(fr.ShapeError):
        sel.observe([1, 2], np.zeros((3, 4)))
    with pytest.raises(fr.ShapeError):
        sel.observe([1, 2], np.zeros(2))
    with pytest.raises(fr.InvalidParameterError, match="more successes"):
        sel.observe_successes([1], [9], 8)
    with pytest.raises(fr.IdError):
        sel.observe([42], np.zeros((1, 4)))
    assert sel.step == 0  # nothing advanced on errors
    with pytest.raises(fr.InvalidParameterError, match="decay"):
        fr.Selector("dps", n_items=10, params={"decay": 3.0})
    with pytest.raises(fr.InvalidParameterError, match="unknown field"):
        fr.Selector("dps", n_items=10, params={"decai": 0.5})
    with pytest.raises(fr.InvalidParameterError, match="unknown selector"):
        fr.Selector("dpz", n_items=10)
    with pytest.raises(fr.InvalidParameterError, match="n_items"):
        fr.Selector("dps")
    with pytest.raises(fr.InvalidParameterError, match="budget"):
        fr.Selector("dps", n_items=10**13)  # would abort the interpreter on allocation
    with pytest.raises(fr.OutcomeError, match="group size 0"):
        sel.observe([1], np.zeros((1, 0)))
    with pytest.raises(fr.ShapeError, match="integers"):
        sel.select(1, candidates=np.array([1.5, 2.0]))
    with pytest.raises(fr.StateError):
        sel.load_state(b"{not json")
    with pytest.raises(fr.StateError):
        sel.load_state(fr.Selector("mopps", n_items=10).save_state())
    with pytest.raises(fr.StateError):
        sel.load_state(fr.Selector("dps", n_items=11).save_state())
    bad = json.loads(sel.state_json())
    bad["selector"] = {"garbage": 1}
    with pytest.raises(fr.StateError):
        sel.load_state(json.dumps(bad))
    with pytest.raises(TypeError):
        sel.select(1, candidates="abc")
    # all of them are FrugalError and ValueError
    assert issubclass(fr.IdError, fr.FrugalError) and issubclass(fr.FrugalError, ValueError)
    for name in ("FrugalError", "OutcomeError", "StateError", "IdError"):
        assert getattr(fr, name).__module__ == "frugal_rl"



def test_rollout_based_selectors_use_the_oracle():
    calls = []

    def oracle(ids, k):
        calls.append(len(ids))
        # even ids: mixed outcomes (kept), odd: all solved (filtered)
        r = np.zeros((len(ids), k), dtype=np.float32)
        r[ids % 2 == 1] = 1.0
        r[ids % 2 == 0, : k // 2] = 1.0
        return r

    sel = fr.Selector("dynamic_sampling", params={"group_size": 4}, seed=0)
    d = sel.select_detailed(8, candidates=np.arange(64), oracle=oracle)
    assert calls and all(i % 2 == 0 for i in d["ids"].tolist())
    assert len(d["prefetched"]) == len(d["ids"])
    pid, rewards = d["prefetched"][0]
    assert rewards.shape == (4,)
    with pytest.raises(fr.OracleError):
        sel.select(8, candidates=np.arange(64))

    def broken(ids, k):
        raise RuntimeError("rollout server down")

    with pytest.raises(fr.OracleError, match="rollout server down") as e:
        sel.select(8, candidates=np.arange(64), oracle=broken)
    assert isinstance(e.value.__cause__, RuntimeError)

    def wrong_shape(ids, k):
        return np.zeros((len(ids), k + 1))

    with pytest.raises(fr.OracleError, match="shape"):
        sel.select(8, candidates=np.arange(64), oracle=wrong_shape)


def test_drm_and_online_filter_build():
    for kind in ("drm", "online_filter"):
        sel = fr.Selector(kind, seed=0)
        d = sel.select_detailed(
            4, candidates=np.arange(32),
            oracle=lambda ids, k: (np.arange(len(ids) * k).reshape(len(ids), k) % 2).astype(np.float32),
        )
        assert len(d["ids"]) <= 4
