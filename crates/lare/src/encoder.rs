//! Latent reward encoders `φ`: from a step `(s, a, s')` to a vector of reward factors.
//!
//! LaRe's encoder is code an LLM writes; here it is a sandboxed script
//! ([`crate::script::ScriptEncoder`]). The same trait covers native Rust closures
//! ([`NativeEncoder`], e.g. hand-written factors in tests and benchmarks) and the raw features
//! of the RD/RRD baselines ([`RawEncoder`]: `[s, a, s − s']`, LaRe's `RD.py`).

use ndarray::{Array2, ArrayView2};
use serde::{Deserialize, Serialize};

use crate::error::{check_finite, check_len, LareError, Result};

/// Which state the encoder reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum StateSource {
    /// `φ(s_t, a_t)` (LaRe's MuJoCo code).
    #[default]
    Current,
    /// `φ(s_{t+1})` with the action still available (LaRe's MPE code, `use_next_state=True`).
    Next,
}

/// One named part of an observation (or action) vector.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Field {
    /// Identifier the script uses (`obs.<name>`).
    pub name: String,
    /// First index in the vector.
    pub start: usize,
    /// Number of entries (1: a number; more: an array).
    pub len: usize,
    /// What the entries mean (goes into the prompt's observation form).
    pub description: String,
}

/// The named layout of a vector: which indices mean what. Scripts see an observation as a map
/// of these fields (`obs.cos_theta`, `obs.landmark_rel[2]`), and the prompt describes them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct Layout {
    /// Vector length.
    pub dim: usize,
    /// Fields, in index order.
    pub fields: Vec<Field>,
}

impl Layout {
    /// An empty layout.
    pub fn new() -> Self {
        Self::default()
    }

    /// Appends a field of one entry.
    #[must_use]
    pub fn scalar(self, name: &str, description: &str) -> Self {
        self.vector(name, 1, description)
    }

    /// Appends a field of `len` entries.
    #[must_use]
    pub fn vector(mut self, name: &str, len: usize, description: &str) -> Self {
        self.fields.push(Field { name: name.into(), start: self.dim, len, description: description.into() });
        self.dim += len;
        self
    }

    /// A layout of `dim` anonymous entries named `x0`, `x1`, ...
    pub fn anonymous(prefix: &str, dim: usize) -> Self {
        (0..dim).fold(Self::new(), |l, i| l.scalar(&format!("{prefix}{i}"), &format!("entry {i}")))
    }

    /// Checks names (identifiers, unique, not reserved) and index ranges (inside `dim`,
    /// non-overlapping, length >= 1).
    ///
    /// # Errors
    /// [`LareError::InvalidParameter`] naming the field.
    pub fn validate(&self) -> Result<()> {
        let mut seen = std::collections::BTreeSet::new();
        let mut covered = vec![false; self.dim];
        for (i, f) in self.fields.iter().enumerate() {
            let what = format!("fields[{i}].name");
            let ok_ident = f.name.chars().next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
                && f.name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
            if !ok_ident {
                return Err(LareError::invalid(what, &f.name, "must be an identifier ([A-Za-z_][A-Za-z0-9_]*)"));
            }
            if !seen.insert(f.name.as_str()) {
                return Err(LareError::invalid(what, &f.name, "repeated field name"));
            }
            if f.len == 0 || f.start + f.len > self.dim {
                return Err(LareError::invalid(
                    format!("fields[{i}]"),
                    format!("{}..{}", f.start, f.start + f.len),
                    format!("must be a non-empty range inside 0..{}", self.dim),
                ));
            }
            for c in &mut covered[f.start..f.start + f.len] {
                if *c {
                    return Err(LareError::invalid(format!("fields[{i}]"), &f.name, "overlaps another field"));
                }
                *c = true;
            }
        }
        Ok(())
    }

    /// The field called `name`.
    pub fn field(&self, name: &str) -> Option<&Field> {
        self.fields.iter().find(|f| f.name == name)
    }

    /// A text description, one line per field (`name` (indices i..j): description).
    pub fn describe(&self) -> String {
        let mut s = String::new();
        for f in &self.fields {
            let idx = if f.len == 1 {
                format!("index {}", f.start)
            } else {
                format!("indices {}..{}", f.start, f.start + f.len - 1)
            };
            let kind = if f.len == 1 { "number".to_string() } else { format!("array of {}", f.len) };
            s.push_str(&format!("- `{}` ({kind}, {idx}): {}\n", f.name, f.description));
        }
        s
    }
}

/// A latent reward encoder `φ`.
pub trait LatentEncoder: Send + Sync + std::fmt::Debug {
    /// Number of factors.
    fn dim(&self) -> usize;

    /// Which state the encoder reads (what [`LatentEncoder::encode_batch`] passes as `obs`).
    fn state_source(&self) -> StateSource {
        StateSource::Current
    }

    /// Writes the factors of one step into `out` (`out.len() == dim()`); `obs` is `s_t` or
    /// `s_{t+1}` according to [`LatentEncoder::state_source`], `next_obs` is always `s_{t+1}`.
    ///
    /// # Errors
    /// Implementation specific (a script error, wrong lengths).
    fn encode(&self, obs: &[f32], act: &[f32], next_obs: &[f32], out: &mut [f32]) -> Result<()>;

    /// A short description for logs and result tables.
    fn label(&self) -> String;

    /// The factors of every row: `[B, dim]` from `s_t`, `a_t`, `s_{t+1}` (`[B, ·]` each).
    ///
    /// # Errors
    /// Row counts that differ, an encoder error (naming the row), non-finite factors.
    fn encode_batch(
        &self,
        obs: ArrayView2<'_, f32>,
        act: ArrayView2<'_, f32>,
        next_obs: ArrayView2<'_, f32>,
    ) -> Result<Array2<f32>> {
        encode_rows(self, obs, act, next_obs)
    }
}

/// The row-by-row body of [`LatentEncoder::encode_batch`] (its default, and what
/// [`crate::ScriptEncoder`] runs inside its per-batch budget).
pub(crate) fn encode_rows<E: LatentEncoder + ?Sized>(
    enc: &E,
    obs: ArrayView2<'_, f32>,
    act: ArrayView2<'_, f32>,
    next_obs: ArrayView2<'_, f32>,
) -> Result<Array2<f32>> {
    let b = obs.nrows();
    check_len("actions rows", b, act.nrows())?;
    check_len("next_obs rows", b, next_obs.nrows())?;
    let d = enc.dim();
    let mut out = Array2::<f32>::zeros((b, d));
    let mut o = vec![0.0f32; obs.ncols()];
    let mut a = vec![0.0f32; act.ncols()];
    let mut n = vec![0.0f32; next_obs.ncols()];
    let mut row = vec![0.0f32; d];
    for i in 0..b {
        o.iter_mut().zip(obs.row(i)).for_each(|(x, y)| *x = *y);
        a.iter_mut().zip(act.row(i)).for_each(|(x, y)| *x = *y);
        n.iter_mut().zip(next_obs.row(i)).for_each(|(x, y)| *x = *y);
        let src = if enc.state_source() == StateSource::Next { &n } else { &o };
        row.fill(0.0);
        enc.encode(src, &a, &n, &mut row).map_err(|e| match e {
            LareError::Script { kind, message } => LareError::Script { kind, message: format!("row {i}: {message}") },
            LareError::NonFinite { what, index, value } => {
                LareError::NonFinite { what: format!("{what} of row {i}"), index, value }
            }
            other => other,
        })?;
        check_finite(&format!("factors of row {i}"), row.iter().copied())?;
        out.row_mut(i).assign(&ndarray::ArrayView1::from(&row[..]));
    }
    Ok(out)
}

/// The raw features of the RD/RRD baselines.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RawFeatures {
    /// `[s, a, s − s']` (LaRe's MuJoCo `RD.py` / `rrd.py`; width `2·obs + act`).
    StateActionDelta,
    /// `s'` only (LaRe's MPE RD baseline, `--only_s`).
    NextState,
}

/// Raw features as the "encoder" of RD and RRD: LaRe differs from them only by `φ`.
#[derive(Debug, Clone)]
pub struct RawEncoder {
    obs_dim: usize,
    act_dim: usize,
    kind: RawFeatures,
}

impl RawEncoder {
    /// Raw features of the given kind for the given widths.
    pub fn new(obs_dim: usize, act_dim: usize, kind: RawFeatures) -> Self {
        Self { obs_dim, act_dim, kind }
    }
}

impl LatentEncoder for RawEncoder {
    fn dim(&self) -> usize {
        match self.kind {
            RawFeatures::StateActionDelta => 2 * self.obs_dim + self.act_dim,
            RawFeatures::NextState => self.obs_dim,
        }
    }

    fn encode(&self, obs: &[f32], act: &[f32], next_obs: &[f32], out: &mut [f32]) -> Result<()> {
        check_len("obs", self.obs_dim, obs.len())?;
        check_len("action", self.act_dim, act.len())?;
        check_len("next_obs", self.obs_dim, next_obs.len())?;
        check_len("factors", self.dim(), out.len())?;
        match self.kind {
            RawFeatures::StateActionDelta => {
                let (s, rest) = out.split_at_mut(self.obs_dim);
                let (a, d) = rest.split_at_mut(self.act_dim);
                s.copy_from_slice(obs);
                a.copy_from_slice(act);
                for ((d, x), y) in d.iter_mut().zip(obs).zip(next_obs) {
                    *d = x - y;
                }
            }
            RawFeatures::NextState => out.copy_from_slice(next_obs),
        }
        Ok(())
    }

    fn label(&self) -> String {
        match self.kind {
            RawFeatures::StateActionDelta => "raw [s, a, s - s']".into(),
            RawFeatures::NextState => "raw s'".into(),
        }
    }

    fn encode_batch(
        &self,
        obs: ArrayView2<'_, f32>,
        act: ArrayView2<'_, f32>,
        next_obs: ArrayView2<'_, f32>,
    ) -> Result<Array2<f32>> {
        check_len("obs width", self.obs_dim, obs.ncols())?;
        check_len("actions width", self.act_dim, act.ncols())?;
        check_len("next_obs width", self.obs_dim, next_obs.ncols())?;
        check_len("actions rows", obs.nrows(), act.nrows())?;
        check_len("next_obs rows", obs.nrows(), next_obs.nrows())?;
        match self.kind {
            RawFeatures::StateActionDelta => {
                let delta = &obs - &next_obs;
                let mut out = Array2::<f32>::zeros((obs.nrows(), self.dim()));
                let (o, a) = (self.obs_dim, self.act_dim);
                out.slice_axis_mut(ndarray::Axis(1), (0..o).into()).assign(&obs);
                out.slice_axis_mut(ndarray::Axis(1), (o..o + a).into()).assign(&act);
                out.slice_axis_mut(ndarray::Axis(1), (o + a..2 * o + a).into()).assign(&delta);
                Ok(out)
            }
            RawFeatures::NextState => Ok(next_obs.to_owned()),
        }
    }
}

/// The signature of a native encoder: `(obs, act, next_obs, out)`.
pub type EncodeFn = dyn Fn(&[f32], &[f32], &[f32], &mut [f32]) + Send + Sync;

/// An encoder written as a Rust closure (hand-written factors, tests, the native side of the
/// sandbox benchmark).
pub struct NativeEncoder {
    dim: usize,
    label: String,
    source: StateSource,
    f: Box<EncodeFn>,
}

impl std::fmt::Debug for NativeEncoder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NativeEncoder").field("dim", &self.dim).field("label", &self.label).finish_non_exhaustive()
    }
}

impl NativeEncoder {
    /// An encoder of `dim` factors computed by `f(obs, act, next_obs, out)`.
    ///
    /// # Errors
    /// [`LareError::InvalidParameter`] for `dim == 0`.
    pub fn new(
        dim: usize,
        label: impl Into<String>,
        f: impl Fn(&[f32], &[f32], &[f32], &mut [f32]) + Send + Sync + 'static,
    ) -> Result<Self> {
        if dim == 0 {
            return Err(LareError::invalid("dim", 0, "an encoder needs >= 1 factor"));
        }
        Ok(Self { dim, label: label.into(), source: StateSource::Current, f: Box::new(f) })
    }

    /// Sets which state the closure reads as `obs`.
    #[must_use]
    pub fn with_state_source(mut self, source: StateSource) -> Self {
        self.source = source;
        self
    }
}

impl LatentEncoder for NativeEncoder {
    fn dim(&self) -> usize {
        self.dim
    }
    fn state_source(&self) -> StateSource {
        self.source
    }
    fn encode(&self, obs: &[f32], act: &[f32], next_obs: &[f32], out: &mut [f32]) -> Result<()> {
        check_len("factors", self.dim, out.len())?;
        (self.f)(obs, act, next_obs, out);
        Ok(())
    }
    fn label(&self) -> String {
        self.label.clone()
    }
}

impl<T: LatentEncoder + ?Sized> LatentEncoder for Box<T> {
    fn dim(&self) -> usize {
        (**self).dim()
    }
    fn state_source(&self) -> StateSource {
        (**self).state_source()
    }
    fn encode(&self, obs: &[f32], act: &[f32], next_obs: &[f32], out: &mut [f32]) -> Result<()> {
        (**self).encode(obs, act, next_obs, out)
    }
    fn label(&self) -> String {
        (**self).label()
    }
    fn encode_batch(
        &self,
        obs: ArrayView2<'_, f32>,
        act: ArrayView2<'_, f32>,
        next_obs: ArrayView2<'_, f32>,
    ) -> Result<Array2<f32>> {
        (**self).encode_batch(obs, act, next_obs)
    }
}

impl<T: LatentEncoder + ?Sized> LatentEncoder for std::sync::Arc<T> {
    fn dim(&self) -> usize {
        (**self).dim()
    }
    fn state_source(&self) -> StateSource {
        (**self).state_source()
    }
    fn encode(&self, obs: &[f32], act: &[f32], next_obs: &[f32], out: &mut [f32]) -> Result<()> {
        (**self).encode(obs, act, next_obs, out)
    }
    fn label(&self) -> String {
        (**self).label()
    }
    fn encode_batch(
        &self,
        obs: ArrayView2<'_, f32>,
        act: ArrayView2<'_, f32>,
        next_obs: ArrayView2<'_, f32>,
    ) -> Result<Array2<f32>> {
        (**self).encode_batch(obs, act, next_obs)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ndarray::array;

    #[test]
    fn layout_validates_and_describes() {
        let l = Layout::new().scalar("cos_theta", "cosine").vector("pos", 2, "position");
        l.validate().unwrap();
        assert_eq!(l.dim, 3);
        assert_eq!(l.field("pos").unwrap().start, 1);
        assert!(l.describe().contains("`pos` (array of 2, indices 1..2)"));
        assert!(Layout::new().scalar("1x", "").validate().is_err());
        assert!(Layout::new().scalar("a", "").scalar("a", "").validate().is_err());
        let mut bad = Layout::new().scalar("a", "");
        bad.fields[0].len = 2;
        assert!(bad.validate().is_err());
        assert_eq!(Layout::anonymous("x", 3).fields[2].name, "x2");
    }

    #[test]
    fn raw_features_match_lare_rd() {
        let e = RawEncoder::new(2, 1, RawFeatures::StateActionDelta);
        let obs = array![[1.0, 2.0], [3.0, 4.0]];
        let act = array![[0.5], [-0.5]];
        let next = array![[1.5, 1.0], [3.0, 5.0]];
        let f = e.encode_batch(obs.view(), act.view(), next.view()).unwrap();
        assert_eq!(f, array![[1.0, 2.0, 0.5, -0.5, 1.0], [3.0, 4.0, -0.5, 0.0, -1.0]]);
        // the per-row path agrees with the batched one
        let mut row = [0.0; 5];
        e.encode(&[1.0, 2.0], &[0.5], &[1.5, 1.0], &mut row).unwrap();
        assert_eq!(row.to_vec(), f.row(0).to_vec());
        assert!(e.encode_batch(obs.view(), array![[0.0, 1.0]].view(), next.view()).is_err());
        let n = RawEncoder::new(2, 1, RawFeatures::NextState);
        assert_eq!(n.encode_batch(obs.view(), act.view(), next.view()).unwrap(), next);
    }

    #[test]
    fn native_encoder_checks_finiteness_per_row() {
        let e = NativeEncoder::new(1, "inverse", |o, _, _, out| out[0] = 1.0 / o[0]).unwrap();
        let obs = array![[1.0], [0.0]];
        let err = e.encode_batch(obs.view(), Array2::zeros((2, 0)).view(), obs.view()).unwrap_err();
        assert!(err.to_string().contains("row 1"), "{err}");
        assert!(NativeEncoder::new(0, "none", |_, _, _, _| {}).is_err());
        let next =
            NativeEncoder::new(1, "next", |o, _, _, out| out[0] = o[0]).unwrap().with_state_source(StateSource::Next);
        let f = next.encode_batch(array![[1.0]].view(), Array2::zeros((1, 0)).view(), array![[7.0]].view()).unwrap();
        assert_eq!(f[[0, 0]], 7.0);
    }
}
