//! Shared helpers of the golden-rollout tests: fixture loading and tolerant comparison.
#![allow(dead_code)]

use serde::Deserialize;

/// One recorded rollout (see `scripts/golden_rl_envs.py`).
#[derive(Debug, Deserialize)]
pub struct Case {
    pub env: String,
    pub seed: u64,
    #[serde(default)]
    pub reset_obs: Vec<f64>,
    pub actions: Vec<Vec<f64>>,
    pub obs: Vec<Vec<f64>>,
    pub rewards: Vec<f64>,
    pub terminated: Vec<bool>,
    pub truncated: Vec<bool>,
    #[serde(flatten)]
    pub extra: serde_json::Map<String, serde_json::Value>,
}

#[derive(Debug, Deserialize)]
pub struct Fixture {
    pub generator: String,
    pub cases: Vec<Case>,
}

pub fn load(name: &str) -> Fixture {
    let path = format!("{}/tests/fixtures/{name}.json", env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// `|got - want| <= tol * max(1, |want|)` for every entry; panics naming the first mismatch.
pub fn assert_close(what: &str, got: &[f64], want: &[f64], tol: f64) {
    assert_eq!(got.len(), want.len(), "{what}: length {} vs {}", got.len(), want.len());
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        let err = (g - w).abs();
        assert!(err <= tol * w.abs().max(1.0), "{what}[{i}]: got {g}, want {w} (|diff| = {err:e} > {tol:e})");
    }
}

/// Largest `|got - want| / max(1, |want|)`.
pub fn max_rel_err(got: &[f64], want: &[f64]) -> f64 {
    got.iter().zip(want).map(|(g, w)| (g - w).abs() / w.abs().max(1.0)).fold(0.0, f64::max)
}

pub fn to_f64(x: &ndarray::Array1<f32>) -> Vec<f64> {
    x.iter().map(|&v| f64::from(v)).collect()
}

pub fn action(a: &[f64]) -> ndarray::Array1<f32> {
    a.iter().map(|&v| v as f32).collect()
}

/// Checks a step's [`rl_core::Info`] against the reference's info dict (recorded by
/// `finfo` in `scripts/golden_rl_envs.py`): the same keys, flags equal,
/// numbers within `tol` (relative to `max(1, |want|)`; 0 = bit-identical). Returns the
/// largest error seen.
pub fn assert_info(what: &str, got: &rl_core::Info, want: &serde_json::Value, tol: f64) -> f64 {
    use rl_core::InfoValue;
    let want = want.as_object().unwrap_or_else(|| panic!("{what}: info is not an object"));
    // serde_json's map sorts the keys, so the order is not compared here
    let mut got_keys: Vec<&str> = got.iter().map(|(k, _)| k).collect();
    got_keys.sort_unstable();
    let want_keys: Vec<&str> = want.keys().map(String::as_str).collect();
    assert_eq!(got_keys, want_keys, "{what}: info keys");
    let mut worst = 0.0f64;
    for (k, v) in got.iter() {
        let w = &want[k];
        match v {
            InfoValue::Bool(b) => assert_eq!(Some(*b), w.as_bool(), "{what}: info[{k}]"),
            InfoValue::Float(x) => {
                let w = w.as_f64().unwrap_or_else(|| panic!("{what}: info[{k}] = {w} is not a number"));
                assert_close(&format!("{what} info[{k}]"), &[*x], &[w], tol);
                worst = worst.max(max_rel_err(&[*x], &[w]));
            }
            InfoValue::Int(i) => assert_eq!(Some(*i), w.as_i64(), "{what}: info[{k}]"),
            InfoValue::Array(a) => {
                let w: Vec<f64> = w.as_array().unwrap().iter().map(|x| x.as_f64().unwrap()).collect();
                assert_close(&format!("{what} info[{k}]"), a, &w, tol);
                worst = worst.max(max_rel_err(a, &w));
            }
        }
    }
    worst
}
