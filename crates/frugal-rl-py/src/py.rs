//! The PyO3 extension module `frugal_rl._native` (feature `python`).
//!
//! Arrays: ids are `uint64` (any integer array or sequence of non-negative ints is accepted and
//! converted), rewards `float32`/`float64` as documented per method. C-contiguous arrays of the
//! documented dtype are read in place; anything else is converted once. Every error is a
//! subclass of `frugal_rl.FrugalError` (itself a `ValueError`) carrying the Rust message.

use crate::build::{selector_from_json, SelectorKind};
use numpy::{PyArray1, PyArrayMethods, PyReadonlyArray1, PyReadonlyArray2, PyUntypedArrayMethods};
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyList};
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use rlvr_core::{AdvantageConfig, AdvantageParams, EffectivenessRule, Groups, RlvrCoreError};
use rlvr_replay::{FlatResponses, Group, GroupReplayBuffer, Origin, ReplayCheckpoint, ReplayError, ReplayParams};
use rlvr_select::{Candidates, ItemId, Outcome, RolloutOracle, SelectError, Selection};
use serde_json::Value;

pyo3::create_exception!(frugal_rl, FrugalError, PyValueError, "Base class of every frugal_rl error.");
pyo3::create_exception!(frugal_rl, InvalidParameterError, FrugalError, "A parameter is unknown or out of range.");
pyo3::create_exception!(frugal_rl, BatchSizeError, FrugalError, "A batch size of 0 or larger than the candidates.");
pyo3::create_exception!(frugal_rl, IdError, FrugalError, "An unknown or duplicate prompt id.");
pyo3::create_exception!(
    frugal_rl,
    OutcomeError,
    FrugalError,
    "Bad rewards: NaN/inf, outside [0, 1], empty or mismatched groups."
);
pyo3::create_exception!(frugal_rl, ShapeError, FrugalError, "An array of the wrong shape, dtype or length.");
pyo3::create_exception!(frugal_rl, OracleError, FrugalError, "The rollout oracle failed or returned a bad answer.");
pyo3::create_exception!(
    frugal_rl,
    StateError,
    FrugalError,
    "A saved state that cannot be loaded (corrupt, other kind)."
);
pyo3::create_exception!(frugal_rl, ReplayBufferError, FrugalError, "POPO replay buffer error.");
pyo3::create_exception!(frugal_rl, AdvantageError, FrugalError, "Advantage / effectiveness computation error.");

fn select_err(e: SelectError) -> PyErr {
    let msg = e.to_string();
    match e {
        SelectError::InvalidParameter { .. } => InvalidParameterError::new_err(msg),
        SelectError::ZeroBatch | SelectError::BatchTooLarge { .. } => BatchSizeError::new_err(msg),
        SelectError::DuplicateId { .. } | SelectError::UnknownId { .. } => IdError::new_err(msg),
        SelectError::NonFiniteReward { .. }
        | SelectError::RewardOutOfRange { .. }
        | SelectError::EmptyGroup { .. }
        | SelectError::GroupSizeMismatch { .. } => OutcomeError::new_err(msg),
        SelectError::Features(_) => ShapeError::new_err(msg),
        SelectError::OracleUnavailable { .. } | SelectError::OracleMismatch { .. } | SelectError::Oracle(_) => {
            OracleError::new_err(msg)
        }
        SelectError::InvalidState(_) | SelectError::Json(_) => StateError::new_err(msg),
        _ => FrugalError::new_err(msg),
    }
}

fn replay_err(e: ReplayError) -> PyErr {
    ReplayBufferError::new_err(e.to_string())
}

fn core_err(e: RlvrCoreError) -> PyErr {
    match e {
        RlvrCoreError::InvalidParameter { .. } => InvalidParameterError::new_err(e.to_string()),
        RlvrCoreError::Shape { .. } | RlvrCoreError::Groups(_) => ShapeError::new_err(e.to_string()),
        _ => AdvantageError::new_err(e.to_string()),
    }
}

/// A Python object (dict or None) to JSON through the `json` module (so every JSON-able value works).
fn to_json(py: Python<'_>, obj: Option<&Bound<'_, PyAny>>) -> PyResult<Value> {
    let Some(obj) = obj else { return Ok(Value::Null) };
    if obj.is_none() {
        return Ok(Value::Null);
    }
    let s: String = py
        .import("json")?
        .call_method1("dumps", (obj,))
        .map_err(|e| InvalidParameterError::new_err(format!("params are not JSON-serialisable: {e}")))?
        .extract()?;
    serde_json::from_str(&s).map_err(|e| InvalidParameterError::new_err(format!("params: {e}")))
}

fn from_json<'py>(py: Python<'py>, v: &Value) -> PyResult<Bound<'py, PyAny>> {
    py.import("json")?.call_method1("loads", (v.to_string(),))
}

/// Ids as a borrowed or owned `u64` slice holder.
enum Ids<'py> {
    Borrowed(PyReadonlyArray1<'py, u64>),
    Owned(Vec<u64>),
}

impl Ids<'_> {
    fn as_slice(&self) -> &[u64] {
        match self {
            Ids::Borrowed(a) => a.as_slice().unwrap_or(&[]),
            Ids::Owned(v) => v,
        }
    }
}

fn ids_from<'py>(obj: &Bound<'py, PyAny>, what: &str) -> PyResult<Ids<'py>> {
    if let Ok(a) = obj.extract::<PyReadonlyArray1<'py, u64>>() {
        if a.is_c_contiguous() {
            return Ok(Ids::Borrowed(a));
        }
        return Ok(Ids::Owned(a.as_array().iter().copied().collect()));
    }
    if let Ok(a) = obj.extract::<PyReadonlyArray1<'py, i64>>() {
        let mut v = Vec::with_capacity(a.len());
        for (i, &x) in a.as_array().iter().enumerate() {
            if x < 0 {
                return Err(IdError::new_err(format!("{what}[{i}] = {x} is negative")));
            }
            v.push(x as u64);
        }
        return Ok(Ids::Owned(v));
    }
    if obj.hasattr("ndim")? {
        let ndim: usize = obj.getattr("ndim")?.extract()?;
        let dtype = obj.getattr("dtype")?.str()?.to_string();
        if ndim != 1 {
            return Err(ShapeError::new_err(format!("{what} must be 1-D, got {ndim}-D")));
        }
        if !dtype.contains("int") {
            return Err(ShapeError::new_err(format!("{what} must hold integers, got dtype {dtype}")));
        }
        // other integer widths: convert through numpy
        let np = obj.py().import("numpy")?;
        let min: i128 = if obj.len()? == 0 { 0 } else { obj.call_method0("min")?.extract()? };
        if min < 0 {
            return Err(IdError::new_err(format!("{what} holds a negative id ({min})")));
        }
        let conv = np.call_method1("ascontiguousarray", (obj, "uint64"))?;
        let a = conv.extract::<PyReadonlyArray1<'py, u64>>()?;
        return Ok(Ids::Owned(a.as_array().to_vec()));
    }
    match obj.extract::<Vec<i128>>() {
        Ok(v) => v
            .into_iter()
            .enumerate()
            .map(|(i, x)| {
                u64::try_from(x).map_err(|_| IdError::new_err(format!("{what}[{i}] = {x} is not a valid id")))
            })
            .collect::<PyResult<Vec<u64>>>()
            .map(Ids::Owned),
        Err(_) => Err(PyTypeError::new_err(format!("{what} must be a 1-D integer array or a sequence of ints"))),
    }
}

/// A 2-D float array `(n, k)` as row-major f32, from float32 or float64 (or anything numpy converts).
fn rewards_2d(obj: &Bound<'_, PyAny>, what: &str) -> PyResult<(usize, usize, Vec<f32>)> {
    if let Ok(a) = obj.extract::<PyReadonlyArray2<'_, f32>>() {
        let s = a.shape();
        return Ok((s[0], s[1], a.as_array().iter().copied().collect()));
    }
    let np = obj.py().import("numpy")?;
    let conv = np
        .call_method1("asarray", (obj, "float32"))
        .map_err(|e| ShapeError::new_err(format!("{what}: cannot convert to a float array: {e}")))?;
    let ndim: usize = conv.getattr("ndim")?.extract()?;
    if ndim != 2 {
        return Err(ShapeError::new_err(format!("{what} must be 2-D (n_prompts, group_size), got {ndim}-D")));
    }
    let a = conv.extract::<PyReadonlyArray2<'_, f32>>()?;
    let s = a.shape();
    Ok((s[0], s[1], a.as_array().iter().copied().collect()))
}

fn f64_1d(obj: &Bound<'_, PyAny>, what: &str) -> PyResult<Vec<f64>> {
    let np = obj.py().import("numpy")?;
    let conv = np
        .call_method1("asarray", (obj, "float64"))
        .map_err(|e| ShapeError::new_err(format!("{what}: cannot convert to a float array: {e}")))?;
    let ndim: usize = conv.getattr("ndim")?.extract()?;
    if ndim != 1 {
        return Err(ShapeError::new_err(format!("{what} must be 1-D, got {ndim}-D")));
    }
    let a = conv.extract::<PyReadonlyArray1<'_, f64>>()?;
    Ok(a.as_array().to_vec())
}

fn generic_1d<'py, T: numpy::Element + Copy>(obj: &Bound<'py, PyAny>, dtype: &str, what: &str) -> PyResult<Vec<T>> {
    let np = obj.py().import("numpy")?;
    let conv = np
        .call_method1("asarray", (obj, dtype))
        .map_err(|e| ShapeError::new_err(format!("{what}: cannot convert to {dtype}: {e}")))?;
    let ndim: usize = conv.getattr("ndim")?.extract()?;
    if ndim != 1 {
        return Err(ShapeError::new_err(format!("{what} must be 1-D, got {ndim}-D")));
    }
    let a = conv.extract::<PyReadonlyArray1<'py, T>>()?;
    Ok(a.as_array().to_vec())
}

/// The rollout oracle: a Python callable `oracle(ids: ndarray[uint64], k: int) -> rewards`,
/// rewards an `(m, k)` float array with `m <= len(ids)` (fewer rows = the oracle ran dry).
struct PyOracle<'py> {
    f: Bound<'py, PyAny>,
    spent: u64,
    error: Option<PyErr>,
}

impl RolloutOracle for PyOracle<'_> {
    fn rollout(&mut self, ids: &[ItemId], k: usize, _rng: &mut dyn rand::RngCore) -> rlvr_select::Result<Vec<Outcome>> {
        let py = self.f.py();
        let arr = PyArray1::from_slice(py, ids);
        let res = match self.f.call1((arr, k)) {
            Ok(r) => r,
            Err(e) => {
                let msg = e.to_string();
                self.error = Some(e);
                return Err(SelectError::Oracle(msg));
            }
        };
        let (m, kk, flat) = match rewards_2d(&res, "oracle result") {
            Ok(x) => x,
            Err(e) => {
                let msg = e.to_string();
                self.error = Some(e);
                return Err(SelectError::Oracle(msg));
            }
        };
        if m > ids.len() || (m > 0 && kk != k) {
            return Err(SelectError::Oracle(format!(
                "oracle returned shape ({m}, {kk}) for {} ids and k = {k}",
                ids.len()
            )));
        }
        self.spent += (m * k) as u64;
        Ok((0..m).map(|i| Outcome::new(ids[i], flat[i * k..(i + 1) * k].to_vec())).collect())
    }

    fn rollouts_spent(&self) -> u64 {
        self.spent
    }
}

const STATE_FORMAT: &str = "frugal_rl.selector/1";

/// A prompt selector: DPS, MoPPS, uniform, history resampling, DAPO dynamic sampling, the online
/// difficulty filter, DRM or GDRM behind one interface.
///
/// `Selector(kind, n_items=None, params=None, seed=0)`. `kind` is one of `frugal_rl.KINDS`;
/// `n_items` (the pool size, ids `0..n_items`) is required by `"dps"` and `"mopps"`; `params`
/// is a dict overlaid on the kind's defaults (unknown keys are errors, see docs/python.md);
/// `seed` seeds the selector's own ChaCha8 generator.
///
/// Protocol, once per training step: `ids = sel.select(batch_size)` (before the rollouts), roll
/// out, train, then `sel.observe(ids, rewards)` (which advances `sel.step`). Rollout-based
/// kinds (`dynamic_sampling`, `online_filter`, `drm`) need `oracle=`; their kept groups come
/// back in `select_detailed(...)["prefetched"]`.
#[pyclass(module = "frugal_rl._native", name = "Selector")]
struct PySelector {
    inner: Box<dyn rlvr_select::Selector + Send + Sync>,
    kind: String,
    n_items: Option<usize>,
    rng: ChaCha8Rng,
    step: u64,
    pool: Vec<u64>,
}

impl PySelector {
    fn run_select<'py>(
        &mut self,
        py: Python<'py>,
        batch_size: usize,
        candidates: Option<&Bound<'py, PyAny>>,
        oracle: Option<&Bound<'py, PyAny>>,
        features: Option<PyReadonlyArray2<'py, f32>>,
    ) -> PyResult<Selection> {
        let ids_holder;
        let ids: &[u64] = match candidates {
            Some(c) if !c.is_none() => {
                ids_holder = ids_from(c, "candidates")?;
                ids_holder.as_slice()
            }
            _ => {
                let n = self.n_items.ok_or_else(|| {
                    InvalidParameterError::new_err(format!("selector `{}` has no n_items: pass candidates=", self.kind))
                })?;
                if self.pool.len() != n {
                    self.pool = (0..n as u64).collect();
                }
                &self.pool
            }
        };
        let feats;
        let cands = match &features {
            Some(f) => {
                let s = f.shape();
                if s[0] != ids.len() {
                    return Err(ShapeError::new_err(format!(
                        "features has {} rows for {} candidates",
                        s[0],
                        ids.len()
                    )));
                }
                feats = f.as_array().iter().copied().collect::<Vec<f32>>();
                Candidates::with_features(ids, &feats, s[1]).map_err(select_err)?
            }
            None => Candidates::new(ids),
        };
        let step = self.step;
        let res = match oracle {
            Some(f) if !f.is_none() => {
                let mut o = PyOracle { f: f.clone(), spent: 0, error: None };
                let r = self.inner.select(step, cands, batch_size, &mut o, &mut self.rng);
                if let (Err(_), Some(e)) = (&r, o.error.take()) {
                    let wrapped = OracleError::new_err(format!("the oracle raised: {e}"));
                    wrapped.set_cause(py, Some(e));
                    return Err(wrapped);
                }
                r
            }
            _ => {
                let mut o = rlvr_select::NoRollouts;
                let inner = &mut self.inner;
                let rng = &mut self.rng;
                py.detach(|| inner.select(step, cands, batch_size, &mut o, rng))
            }
        };
        res.map_err(select_err)
    }
}

#[pymethods]
impl PySelector {
    #[new]
    #[pyo3(signature = (kind, n_items=None, params=None, seed=0))]
    fn new(
        py: Python<'_>,
        kind: &str,
        n_items: Option<usize>,
        params: Option<&Bound<'_, PyAny>>,
        seed: u64,
    ) -> PyResult<Self> {
        let k = SelectorKind::parse(kind).map_err(select_err)?;
        let p = to_json(py, params)?;
        let inner = selector_from_json(k, n_items, &p).map_err(select_err)?;
        Ok(Self {
            inner,
            kind: kind.to_owned(),
            n_items,
            rng: ChaCha8Rng::seed_from_u64(seed),
            step: 0,
            pool: Vec::new(),
        })
    }

    /// The selector kind, as passed.
    #[getter]
    fn kind(&self) -> &str {
        &self.kind
    }

    /// The pool size (`None` for selectors without per-prompt state built without one).
    #[getter]
    fn n_items(&self) -> Option<usize> {
        self.n_items
    }

    /// The training step the next `select`/`observe` pair belongs to (0 at first; `observe`
    /// advances it). Settable, e.g. after loading a trainer checkpoint.
    #[getter]
    fn get_step(&self) -> u64 {
        self.step
    }

    #[setter]
    fn set_step(&mut self, step: u64) {
        self.step = step;
    }

    /// `select(batch_size, candidates=None, oracle=None, features=None) -> ndarray[uint64]`
    ///
    /// Chooses `batch_size` prompt ids among `candidates` (default: the whole pool
    /// `0..n_items`), best first. Rollout-based kinds call `oracle(ids, k)` and may return
    /// fewer (see `select_detailed`).
    #[pyo3(signature = (batch_size, candidates=None, oracle=None, features=None))]
    fn select<'py>(
        &mut self,
        py: Python<'py>,
        batch_size: usize,
        candidates: Option<&Bound<'py, PyAny>>,
        oracle: Option<&Bound<'py, PyAny>>,
        features: Option<PyReadonlyArray2<'py, f32>>,
    ) -> PyResult<Bound<'py, PyArray1<u64>>> {
        let s = self.run_select(py, batch_size, candidates, oracle, features)?;
        Ok(PyArray1::from_vec(py, s.ids))
    }

    /// Like `select`, returning a dict: `ids`, `scores` (float64), `weights` (float32 or None,
    /// GDRM), `prefetched` (list of `(id, rewards)` groups rolled out during selection),
    /// `selection_rollouts`, `shortfall` (None or a string).
    #[pyo3(signature = (batch_size, candidates=None, oracle=None, features=None))]
    fn select_detailed<'py>(
        &mut self,
        py: Python<'py>,
        batch_size: usize,
        candidates: Option<&Bound<'py, PyAny>>,
        oracle: Option<&Bound<'py, PyAny>>,
        features: Option<PyReadonlyArray2<'py, f32>>,
    ) -> PyResult<Bound<'py, PyDict>> {
        let s = self.run_select(py, batch_size, candidates, oracle, features)?;
        let d = PyDict::new(py);
        d.set_item("ids", PyArray1::from_vec(py, s.ids))?;
        d.set_item("scores", PyArray1::from_vec(py, s.scores))?;
        match s.weights {
            Some(w) => d.set_item("weights", PyArray1::from_vec(py, w))?,
            None => d.set_item("weights", py.None())?,
        }
        let pre = PyList::empty(py);
        for o in s.prefetched {
            pre.append((o.id, PyArray1::from_vec(py, o.rewards)))?;
        }
        d.set_item("prefetched", pre)?;
        d.set_item("selection_rollouts", s.selection_rollouts)?;
        match s.shortfall {
            Some(sf) => d.set_item("shortfall", format!("{sf:?}"))?,
            None => d.set_item("shortfall", py.None())?,
        }
        Ok(d)
    }

    /// `observe(ids, rewards)`: feeds back the groups trained on at this step. `rewards` is an
    /// `(len(ids), k)` float array of per-response rewards in `[0, 1]` (1 = solved). An empty
    /// `ids` is legal and still advances DPS' dynamics. Advances `step` by one.
    fn observe(&mut self, py: Python<'_>, ids: &Bound<'_, PyAny>, rewards: &Bound<'_, PyAny>) -> PyResult<()> {
        let ids = ids_from(ids, "ids")?;
        let ids = ids.as_slice();
        let (n, k, flat) = if ids.is_empty() { (0, 0, Vec::new()) } else { rewards_2d(rewards, "rewards")? };
        if n != ids.len() {
            return Err(ShapeError::new_err(format!("rewards has {n} rows for {} ids", ids.len())));
        }
        let outcomes: Vec<Outcome> = (0..n).map(|i| Outcome::new(ids[i], flat[i * k..(i + 1) * k].to_vec())).collect();
        self.observe_outcomes(py, outcomes)
    }

    /// `observe_successes(ids, successes, k)`: like `observe` for binary rewards, with the number
    /// of solved responses out of `k` per prompt.
    fn observe_successes(
        &mut self,
        py: Python<'_>,
        ids: &Bound<'_, PyAny>,
        successes: &Bound<'_, PyAny>,
        k: usize,
    ) -> PyResult<()> {
        let ids = ids_from(ids, "ids")?;
        let ids = ids.as_slice();
        let succ = ids_from(successes, "successes")?;
        let succ = succ.as_slice();
        if succ.len() != ids.len() {
            return Err(ShapeError::new_err(format!("successes has {} entries for {} ids", succ.len(), ids.len())));
        }
        let outcomes = ids
            .iter()
            .zip(succ)
            .map(|(&id, &s)| Outcome::from_successes(id, s as usize, k))
            .collect::<rlvr_select::Result<Vec<_>>>()
            .map_err(select_err)?;
        self.observe_outcomes(py, outcomes)
    }

    /// `predict(candidates=None) -> dict | None`: the model's predicted success rate (`mean`),
    /// `std` and, for DPS, `class_probs` `(n, 3)` (unsolved, partial, solved); None for kinds
    /// without a model.
    #[pyo3(signature = (candidates=None))]
    fn predict<'py>(
        &mut self,
        py: Python<'py>,
        candidates: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<Option<Bound<'py, PyDict>>> {
        let holder;
        let ids: &[u64] = match candidates {
            Some(c) if !c.is_none() => {
                holder = ids_from(c, "candidates")?;
                holder.as_slice()
            }
            _ => {
                let n = self
                    .n_items
                    .ok_or_else(|| InvalidParameterError::new_err("no n_items: pass candidates=".to_string()))?;
                if self.pool.len() != n {
                    self.pool = (0..n as u64).collect();
                }
                &self.pool
            }
        };
        let Some(preds) = self.inner.predict(Candidates::new(ids)).map_err(select_err)? else { return Ok(None) };
        let d = PyDict::new(py);
        d.set_item("mean", PyArray1::from_vec(py, preds.iter().map(|p| p.mean).collect()))?;
        if preds.iter().all(|p| p.std.is_some()) {
            d.set_item("std", PyArray1::from_vec(py, preds.iter().map(|p| p.std.unwrap_or(f64::NAN)).collect()))?;
        } else {
            d.set_item("std", py.None())?;
        }
        if preds.iter().all(|p| p.class_probs.is_some()) {
            let flat: Vec<f64> = preds.iter().flat_map(|p| p.class_probs.unwrap_or([f64::NAN; 3])).collect();
            d.set_item("class_probs", PyArray1::from_vec(py, flat).reshape([preds.len(), 3])?)?;
        } else {
            d.set_item("class_probs", py.None())?;
        }
        Ok(Some(d))
    }

    /// The full state (selector, RNG, step) as UTF-8 JSON bytes; `load_state` restores it
    /// exactly (the same later selections).
    fn save_state<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyBytes>> {
        let s = self.state_value()?;
        Ok(PyBytes::new(py, s.to_string().as_bytes()))
    }

    /// The state as a JSON string (same content as `save_state`).
    fn state_json(&self) -> PyResult<String> {
        Ok(self.state_value()?.to_string())
    }

    /// Restores a state written by `save_state` / `state_json` (bytes or str) of a selector of
    /// the same kind and pool size. On error the selector is unchanged.
    fn load_state(&mut self, state: &Bound<'_, PyAny>) -> PyResult<()> {
        let text: String = if let Ok(b) = state.cast::<PyBytes>() {
            String::from_utf8(b.as_bytes().to_vec())
                .map_err(|e| StateError::new_err(format!("state is not UTF-8: {e}")))?
        } else if let Ok(s) = state.extract::<String>() {
            s
        } else {
            return Err(PyTypeError::new_err("state must be bytes or str"));
        };
        let v: Value =
            serde_json::from_str(&text).map_err(|e| StateError::new_err(format!("invalid saved state: {e}")))?;
        let field =
            |k: &str| v.get(k).ok_or_else(|| StateError::new_err(format!("invalid saved state: missing `{k}`")));
        if field("format")?.as_str() != Some(STATE_FORMAT) {
            return Err(StateError::new_err(format!("invalid saved state: format is not {STATE_FORMAT}")));
        }
        if field("kind")?.as_str() != Some(self.kind.as_str()) {
            return Err(StateError::new_err(format!(
                "saved state is of kind {}, this selector is `{}`",
                field("kind")?,
                self.kind
            )));
        }
        let n: Option<usize> = serde_json::from_value(field("n_items")?.clone())
            .map_err(|e| StateError::new_err(format!("invalid saved state: n_items: {e}")))?;
        if n != self.n_items {
            return Err(StateError::new_err(format!(
                "saved state has n_items {n:?}, this selector {:?}",
                self.n_items
            )));
        }
        let step = field("step")?.as_u64().ok_or_else(|| StateError::new_err("invalid saved state: step"))?;
        let rng: ChaCha8Rng = serde_json::from_value(field("rng")?.clone())
            .map_err(|e| StateError::new_err(format!("invalid saved state: rng: {e}")))?;
        // validate into a scratch copy first, so an error leaves `self` untouched
        let sel_state = field("selector")?;
        self.inner.load_state(sel_state).map_err(|e| StateError::new_err(e.to_string()))?;
        self.rng = rng;
        self.step = step;
        Ok(())
    }

    fn __repr__(&self) -> String {
        format!("Selector(kind={:?}, n_items={:?}, step={})", self.kind, self.n_items, self.step)
    }
}

impl PySelector {
    fn observe_outcomes(&mut self, py: Python<'_>, outcomes: Vec<Outcome>) -> PyResult<()> {
        let step = self.step;
        let inner = &mut self.inner;
        let rng = &mut self.rng;
        py.detach(|| inner.observe(step, &outcomes, rng)).map_err(select_err)?;
        self.step += 1;
        Ok(())
    }

    fn state_value(&self) -> PyResult<Value> {
        let sel = self.inner.save_state().map_err(select_err)?;
        let rng = serde_json::to_value(&self.rng).map_err(|e| StateError::new_err(e.to_string()))?;
        Ok(serde_json::json!({
            "format": STATE_FORMAT,
            "kind": self.kind,
            "n_items": self.n_items,
            "step": self.step,
            "rng": rng,
            "selector": sel,
        }))
    }
}

/// POPO's prioritized group replay buffer.
///
/// `ReplayBuffer(params)`: `params` a dict of `ReplayParams` (`group_size` required; see
/// docs/python.md). `fill(groups, policy_version)` takes this step's on-policy groups (dicts
/// with `prompt_id`, `policy_version`, `tokens`, `behaviour_logp`, `lengths`, `rewards`, and
/// optional `mask`, `outcomes`) and returns the training batch: one dict per slot with the
/// group's arrays, `advantages`, `origin` (`"fresh"`, `"replayed"`, `"unfilled"`) and, for
/// replayed groups, `age`. Ineffective on-policy groups are replaced by stored effective ones.
#[pyclass(module = "frugal_rl._native", name = "ReplayBuffer")]
struct PyReplayBuffer {
    inner: GroupReplayBuffer,
}

fn group_from_dict(d: &Bound<'_, PyAny>, i: usize) -> PyResult<Group> {
    let get = |k: &str| -> PyResult<Bound<'_, PyAny>> {
        d.get_item(k).map_err(|_| ShapeError::new_err(format!("groups[{i}] has no `{k}`")))
    };
    let opt = |k: &str| -> PyResult<Option<Bound<'_, PyAny>>> {
        match d.get_item(k) {
            Ok(v) if !v.is_none() => Ok(Some(v)),
            _ => Ok(None),
        }
    };
    let prompt_id: u64 = get("prompt_id")?.extract()?;
    let version: u64 = get("policy_version")?.extract()?;
    let tokens: Vec<u32> = generic_1d(&get("tokens")?, "uint32", &format!("groups[{i}].tokens"))?;
    let behaviour_logp: Vec<f32> =
        generic_1d(&get("behaviour_logp")?, "float32", &format!("groups[{i}].behaviour_logp"))?;
    let lengths: Vec<u64> = ids_from(&get("lengths")?, &format!("groups[{i}].lengths"))?.as_slice().to_vec();
    let rewards: Vec<f32> = generic_1d(&get("rewards")?, "float32", &format!("groups[{i}].rewards"))?;
    let mask: Vec<bool> = match opt("mask")? {
        Some(m) => generic_1d(&m, "bool", &format!("groups[{i}].mask"))?,
        None => Vec::new(),
    };
    let flat = FlatResponses {
        tokens,
        behaviour_logp,
        mask,
        lengths: lengths.into_iter().map(|x| x as usize).collect(),
        rewards,
    };
    let mut g = Group::from_flat(prompt_id, version, flat).map_err(replay_err)?;
    if let Some(o) = opt("outcomes")? {
        let o: Vec<bool> = generic_1d(&o, "bool", &format!("groups[{i}].outcomes"))?;
        g = g.with_outcomes(o).map_err(replay_err)?;
    }
    Ok(g)
}

#[pymethods]
impl PyReplayBuffer {
    #[new]
    fn new(py: Python<'_>, params: &Bound<'_, PyAny>) -> PyResult<Self> {
        let v = to_json(py, Some(params))?;
        let p: rl_core::Valid<ReplayParams> =
            serde_json::from_value(v).map_err(|e| InvalidParameterError::new_err(format!("replay params: {e}")))?;
        Ok(Self { inner: GroupReplayBuffer::new(p).map_err(replay_err)? })
    }

    /// Stored groups.
    fn __len__(&self) -> usize {
        self.inner.len()
    }

    /// Fill steps so far.
    #[getter]
    fn step(&self) -> u64 {
        self.inner.step()
    }

    /// Builds this step's batch (see the class docs). Nothing changes on error.
    fn fill<'py>(
        &mut self,
        py: Python<'py>,
        groups: &Bound<'py, PyAny>,
        policy_version: u64,
    ) -> PyResult<Bound<'py, PyList>> {
        let mut gs = Vec::new();
        for (i, g) in groups.try_iter()?.enumerate() {
            gs.push(group_from_dict(&g?, i)?);
        }
        let batch = self.inner.fill(gs, policy_version).map_err(replay_err)?;
        let out = PyList::empty(py);
        for bg in batch.iter() {
            let d = PyDict::new(py);
            let g = bg.group();
            d.set_item("slot", bg.slot())?;
            match bg.origin() {
                Origin::Fresh => d.set_item("origin", "fresh")?,
                Origin::Replayed { age, times_replayed, .. } => {
                    d.set_item("origin", "replayed")?;
                    d.set_item("age", age)?;
                    d.set_item("times_replayed", times_replayed)?;
                }
                Origin::Unfilled { reason } => {
                    d.set_item("origin", "unfilled")?;
                    d.set_item("reason", reason.map(|r| r.name()))?;
                }
            }
            d.set_item("is_replayed", bg.is_replayed())?;
            d.set_item("prompt_id", g.prompt_id())?;
            d.set_item("policy_version", g.policy_version())?;
            d.set_item("tokens", PyArray1::from_slice(py, g.tokens()))?;
            d.set_item("behaviour_logp", PyArray1::from_slice(py, g.behaviour_logp()))?;
            let lens: Vec<u64> = g.responses().map(|r| r.tokens.len() as u64).collect();
            d.set_item("lengths", PyArray1::from_vec(py, lens))?;
            d.set_item("rewards", PyArray1::from_slice(py, g.rewards()))?;
            d.set_item("advantages", PyArray1::from_slice(py, bg.advantages()))?;
            out.append(d)?;
        }
        Ok(out)
    }

    /// The last fill's report and running totals, as a dict.
    fn metrics<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let v = serde_json::json!({
            "last_report": self.inner.last_report(),
            "totals": self.inner.totals(),
            "len": self.inner.len(),
            "bytes": self.inner.bytes(),
        });
        from_json(py, &v)
    }

    /// The full buffer (groups, RNG, totals) as JSON bytes.
    fn save_state<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyBytes>> {
        let s = serde_json::to_vec(&self.inner.checkpoint()).map_err(|e| StateError::new_err(e.to_string()))?;
        Ok(PyBytes::new(py, &s))
    }

    /// A buffer restored from `save_state` bytes (resumes exactly).
    #[staticmethod]
    fn load_state(state: &[u8]) -> PyResult<Self> {
        let c: ReplayCheckpoint =
            serde_json::from_slice(state).map_err(|e| StateError::new_err(format!("invalid replay state: {e}")))?;
        Ok(Self { inner: GroupReplayBuffer::restore(c).map_err(|e| StateError::new_err(e.to_string()))? })
    }

    fn __repr__(&self) -> String {
        format!("ReplayBuffer(len={}, step={})", self.inner.len(), self.inner.step())
    }
}

fn groups_of(
    py: Python<'_>,
    n: usize,
    group_ids: Option<&Bound<'_, PyAny>>,
    group_size: Option<usize>,
) -> PyResult<Groups> {
    let _ = py;
    match (group_ids, group_size) {
        (Some(g), None) if !g.is_none() => {
            let ids = ids_from(g, "group_ids")?;
            let ids = ids.as_slice();
            if ids.len() != n {
                return Err(ShapeError::new_err(format!("group_ids has {} entries for {n} rewards", ids.len())));
            }
            Groups::from_ids(ids).map_err(core_err)
        }
        (None, Some(k)) => {
            if k == 0 || n % k != 0 {
                return Err(ShapeError::new_err(format!("{n} rewards do not split into groups of {k}")));
            }
            Groups::uniform(n / k, k).map_err(core_err)
        }
        _ => Err(InvalidParameterError::new_err("pass exactly one of group_ids= and group_size=".to_string())),
    }
}

/// `advantages(rewards, group_ids=None, group_size=None, params=None, lengths=None,
/// outcomes=None, baselines=None, detailed=False)`
///
/// Outcome-reward advantages of a batch (one scalar reward per sequence) with any estimator of
/// rlvr-core (`params={"estimator": {"kind": "grpo"}}` is verl's GRPO; see docs/python.md).
/// Groups are given by `group_ids` (one id per sequence, verl's `uid`) or `group_size` (the
/// batch is consecutive groups of that size). Returns a float64 array, or with `detailed=True`
/// a dict with `values` and per-group `mean`, `std`, `effective`, `reason`.
#[pyfunction]
#[pyo3(signature = (rewards, group_ids=None, group_size=None, params=None, lengths=None, outcomes=None, baselines=None, detailed=false))]
#[allow(clippy::too_many_arguments)]
fn advantages<'py>(
    py: Python<'py>,
    rewards: &Bound<'py, PyAny>,
    group_ids: Option<&Bound<'py, PyAny>>,
    group_size: Option<usize>,
    params: Option<&Bound<'py, PyAny>>,
    lengths: Option<&Bound<'py, PyAny>>,
    outcomes: Option<&Bound<'py, PyAny>>,
    baselines: Option<&Bound<'py, PyAny>>,
    detailed: bool,
) -> PyResult<Bound<'py, PyAny>> {
    let r = f64_1d(rewards, "rewards")?;
    let groups = groups_of(py, r.len(), group_ids, group_size)?;
    let p = to_json(py, params)?;
    let p: rl_core::Valid<AdvantageParams> =
        serde_json::from_value(if p.is_null() { serde_json::json!({}) } else { p })
            .map_err(|e| InvalidParameterError::new_err(format!("advantage params: {e}")))?;
    let cfg = AdvantageConfig::new(p);
    let lens: Option<Vec<usize>> = match lengths {
        Some(l) if !l.is_none() => Some(ids_from(l, "lengths")?.as_slice().iter().map(|&x| x as usize).collect()),
        _ => None,
    };
    let outs: Option<Vec<bool>> = match outcomes {
        Some(o) if !o.is_none() => Some(generic_1d(o, "bool", "outcomes")?),
        _ => None,
    };
    let base: Option<Vec<f64>> = match baselines {
        Some(b) if !b.is_none() => Some(f64_1d(b, "baselines")?),
        _ => None,
    };
    let mut x = rlvr_core::AdvantageInputs::new(&r, &groups);
    if let Some(l) = &lens {
        x = x.lengths(l);
    }
    if let Some(o) = &outs {
        x = x.outcomes(o);
    }
    if let Some(b) = &base {
        x = x.baselines(b);
    }
    let adv = cfg.compute_inputs(&x).map_err(core_err)?;
    if !detailed {
        return Ok(PyArray1::from_vec(py, adv.values).into_any());
    }
    let d = PyDict::new(py);
    d.set_item("values", PyArray1::from_vec(py, adv.values))?;
    d.set_item("mean", PyArray1::from_vec(py, adv.groups.iter().map(|g| g.mean).collect()))?;
    d.set_item("std", PyArray1::from_vec(py, adv.groups.iter().map(|g| g.std_unbiased).collect()))?;
    d.set_item("effective", PyArray1::from_vec(py, adv.groups.iter().map(|g| g.verdict.is_effective()).collect()))?;
    let reasons = PyList::empty(py);
    for g in &adv.groups {
        reasons.append(g.verdict.reason().map(|r| r.name()))?;
    }
    d.set_item("reason", reasons)?;
    Ok(d.into_any())
}

/// `classify(rewards, outcomes=None, rule=None) -> (effective: bool, reason: str | None)`
///
/// The effectiveness rule of rlvr-core on one group (default: by outcome, success =
/// `reward >= 1`; a group whose responses all succeed or all fail carries no signal).
#[pyfunction]
#[pyo3(signature = (rewards, outcomes=None, rule=None))]
fn classify(
    py: Python<'_>,
    rewards: &Bound<'_, PyAny>,
    outcomes: Option<&Bound<'_, PyAny>>,
    rule: Option<&Bound<'_, PyAny>>,
) -> PyResult<(bool, Option<&'static str>)> {
    let r = f64_1d(rewards, "rewards")?;
    if let Some(i) = r.iter().position(|x| !x.is_finite()) {
        return Err(OutcomeError::new_err(format!("rewards[{i}] = {} is not finite", r[i])));
    }
    let rule_v = to_json(py, rule)?;
    let rule: EffectivenessRule = if rule_v.is_null() {
        EffectivenessRule::default()
    } else {
        serde_json::from_value(rule_v).map_err(|e| InvalidParameterError::new_err(format!("rule: {e}")))?
    };
    rule.validate_at("rule").map_err(core_err)?;
    let outs: Option<Vec<bool>> = match outcomes {
        Some(o) if !o.is_none() => Some(generic_1d(o, "bool", "outcomes")?),
        _ => None,
    };
    if let Some(o) = &outs {
        if o.len() != r.len() {
            return Err(ShapeError::new_err(format!("outcomes has {} entries for {} rewards", o.len(), r.len())));
        }
    }
    let v = rule.classify(&r, outs.as_deref());
    Ok((v.is_effective(), v.reason().map(|x| x.name())))
}

/// The extension module.
#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    m.add_class::<PySelector>()?;
    m.add_class::<PyReplayBuffer>()?;
    m.add_function(wrap_pyfunction!(advantages, m)?)?;
    m.add_function(wrap_pyfunction!(classify, m)?)?;
    m.add("KINDS", crate::build::KINDS.to_vec())?;
    m.add(
        "ESTIMATORS",
        vec![
            "grpo",
            "dr_grpo",
            "rloo",
            "reinforce_plus_plus",
            "reinforce_plus_plus_baseline",
            "max_rl",
            "pass_k",
            "opo",
            "batch_std",
            "remax",
            "gpg",
        ],
    )?;
    m.add("FrugalError", py.get_type::<FrugalError>())?;
    m.add("InvalidParameterError", py.get_type::<InvalidParameterError>())?;
    m.add("BatchSizeError", py.get_type::<BatchSizeError>())?;
    m.add("IdError", py.get_type::<IdError>())?;
    m.add("OutcomeError", py.get_type::<OutcomeError>())?;
    m.add("ShapeError", py.get_type::<ShapeError>())?;
    m.add("OracleError", py.get_type::<OracleError>())?;
    m.add("StateError", py.get_type::<StateError>())?;
    m.add("ReplayBufferError", py.get_type::<ReplayBufferError>())?;
    m.add("AdvantageError", py.get_type::<AdvantageError>())?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
