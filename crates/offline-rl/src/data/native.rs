//! Our dataset format: one safetensors file, pure Rust, readable from Python with
//! `safetensors.numpy.load_file(path)`.
//!
//! | tensor | dtype | shape |
//! |---|---|---|
//! | `observations`, `next_observations` | F32 | `[N, O]` |
//! | `actions` | F32 | `[N, A]` |
//! | `rewards` | F32 | `[N]` |
//! | `terminals`, `timeouts` | U8 (0/1) | `[N]` |
//!
//! The safetensors metadata holds `format` = `frugal-rl.offline-dataset`, `format_version` =
//! `1` and `info` = the [`DatasetInfo`] as JSON. Values are stored
//! little-endian, so a round trip is bit-exact.

use std::collections::HashMap;
use std::path::Path;

use ndarray::{Array1, Array2};
use rl_core::Transitions;
use safetensors::tensor::{Dtype, SafeTensors, TensorView};

use super::{check_column_finite, Dataset, DatasetInfo, LoadReport};
use crate::error::{OfflineError, Result};

/// The `format` metadata value.
pub const FORMAT: &str = "frugal-rl.offline-dataset";
/// The `format_version` this crate writes and reads.
pub const FORMAT_VERSION: u32 = 1;

fn f32_bytes(v: impl Iterator<Item = f32>) -> Vec<u8> {
    v.flat_map(f32::to_le_bytes).collect()
}

/// Writes `dataset` to `path` (a temporary sibling, then a rename).
///
/// # Errors
/// I/O failures; [`OfflineError::Corrupt`] if serialisation fails.
pub fn write_native(dataset: &Dataset, path: impl AsRef<Path>) -> Result<()> {
    let path = path.as_ref();
    let t = dataset.transitions();
    let (n, o, a) = (t.len(), t.obs_dim(), t.act_dim());
    let obs = f32_bytes(t.obs().iter().copied());
    let next = f32_bytes(t.next_obs().iter().copied());
    let act = f32_bytes(t.action().iter().copied());
    let rew = f32_bytes(t.reward().iter().copied());
    let term: Vec<u8> = t.terminal().iter().map(|x| u8::from(*x == 1.0)).collect();
    let tout: Vec<u8> = t.timeout().iter().map(|x| u8::from(*x == 1.0)).collect();
    let err = |e: safetensors::SafeTensorError| OfflineError::corrupt(path, format!("safetensors: {e:?}"));
    let views = vec![
        ("observations", TensorView::new(Dtype::F32, vec![n, o], &obs).map_err(err)?),
        ("next_observations", TensorView::new(Dtype::F32, vec![n, o], &next).map_err(err)?),
        ("actions", TensorView::new(Dtype::F32, vec![n, a], &act).map_err(err)?),
        ("rewards", TensorView::new(Dtype::F32, vec![n], &rew).map_err(err)?),
        ("terminals", TensorView::new(Dtype::U8, vec![n], &term).map_err(err)?),
        ("timeouts", TensorView::new(Dtype::U8, vec![n], &tout).map_err(err)?),
    ];
    let meta: HashMap<String, String> = [
        ("format".to_owned(), FORMAT.to_owned()),
        ("format_version".to_owned(), FORMAT_VERSION.to_string()),
        ("info".to_owned(), serde_json::to_string(dataset.info())?),
    ]
    .into_iter()
    .collect();
    let bytes = safetensors::tensor::serialize(views, &Some(meta)).map_err(err)?;
    let dir = path.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir)?;
    let name = path.file_name().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default();
    let tmp = dir.join(format!(".{name}.tmp-{}", std::process::id()));
    std::fs::write(&tmp, bytes)?;
    std::fs::rename(&tmp, path)?;
    Ok(())
}

fn read_f32(
    st: &SafeTensors<'_>,
    path: &Path,
    key: &str,
    rows: Option<usize>,
    rank: usize,
) -> Result<(Vec<f32>, Vec<usize>)> {
    let v =
        st.tensor(key).map_err(|_| OfflineError::MissingKey { path: path.display().to_string(), key: key.into() })?;
    if v.dtype() != Dtype::F32 {
        return Err(OfflineError::Unsupported {
            path: path.display().to_string(),
            what: format!("dtype of `{key}`"),
            reason: format!("{:?}, expected F32", v.dtype()),
        });
    }
    let shape = v.shape().to_vec();
    if shape.len() != rank {
        return Err(OfflineError::shape(
            format!("{}: {key}", path.display()),
            format!("rank {rank}"),
            format!("{shape:?}"),
        ));
    }
    if let Some(r) = rows {
        if shape[0] != r {
            return Err(OfflineError::Length {
                path: path.display().to_string(),
                key: key.into(),
                expected: r,
                got: shape[0],
            });
        }
    }
    let values: Vec<f32> = v.data().chunks_exact(4).map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect();
    check_column_finite(key, &values, if rank == 2 { shape[1] } else { 1 })?;
    Ok((values, shape))
}

fn read_flags(st: &SafeTensors<'_>, path: &Path, key: &str, rows: usize) -> Result<Array1<f32>> {
    let v =
        st.tensor(key).map_err(|_| OfflineError::MissingKey { path: path.display().to_string(), key: key.into() })?;
    if v.dtype() != Dtype::U8 || v.shape().len() != 1 {
        return Err(OfflineError::Unsupported {
            path: path.display().to_string(),
            what: format!("`{key}`"),
            reason: format!("{:?} {:?}, expected U8 [N]", v.dtype(), v.shape()),
        });
    }
    if v.shape()[0] != rows {
        return Err(OfflineError::Length {
            path: path.display().to_string(),
            key: key.into(),
            expected: rows,
            got: v.shape()[0],
        });
    }
    if let Some((i, x)) = v.data().iter().enumerate().find(|(_, x)| **x > 1) {
        return Err(OfflineError::InvalidFlag {
            path: path.display().to_string(),
            key: key.into(),
            index: i,
            value: f64::from(*x),
        });
    }
    Ok(v.data().iter().map(|x| f32::from(*x)).collect())
}

/// Reads a file written by [`write_native`], checking the format tag and version, every
/// column's presence, dtype, rank and length, finiteness and 0/1 flags.
///
/// # Errors
/// [`OfflineError::Corrupt`] for a file that is not safetensors or carries another format;
/// [`OfflineError::MissingKey`], [`OfflineError::Length`], [`OfflineError::Shape`],
/// [`OfflineError::NonFinite`], [`OfflineError::InvalidFlag`], [`OfflineError::Unsupported`]
/// (another dtype or a newer `format_version`).
pub fn read_native(path: impl AsRef<Path>) -> Result<(Dataset, LoadReport)> {
    let path = path.as_ref();
    let bytes = std::fs::read(path)?;
    let (_, header) =
        SafeTensors::read_metadata(&bytes).map_err(|e| OfflineError::corrupt(path, format!("safetensors: {e:?}")))?;
    let meta = header.metadata().clone().unwrap_or_default();
    if meta.get("format").map(String::as_str) != Some(FORMAT) {
        return Err(OfflineError::corrupt(path, format!("not a {FORMAT} file (format = {:?})", meta.get("format"))));
    }
    let version: u32 = meta
        .get("format_version")
        .and_then(|v| v.parse().ok())
        .ok_or_else(|| OfflineError::corrupt(path, "missing or bad format_version"))?;
    if version != FORMAT_VERSION {
        return Err(OfflineError::Unsupported {
            path: path.display().to_string(),
            what: "format_version".into(),
            reason: format!("{version}; this crate reads {FORMAT_VERSION}"),
        });
    }
    let info: DatasetInfo = match meta.get("info") {
        Some(s) => serde_json::from_str(s).map_err(|e| OfflineError::corrupt(path, format!("info: {e}")))?,
        None => DatasetInfo::default(),
    };
    let st =
        SafeTensors::deserialize(&bytes).map_err(|e| OfflineError::corrupt(path, format!("safetensors: {e:?}")))?;
    let (rew, rshape) = read_f32(&st, path, "rewards", None, 1)?;
    let n = rshape[0];
    let (obs, oshape) = read_f32(&st, path, "observations", Some(n), 2)?;
    let (next, nshape) = read_f32(&st, path, "next_observations", Some(n), 2)?;
    if nshape[1] != oshape[1] {
        return Err(OfflineError::shape(
            format!("{}: next_observations", path.display()),
            format!("[{n}, {}]", oshape[1]),
            format!("{nshape:?}"),
        ));
    }
    let (act, ashape) = read_f32(&st, path, "actions", Some(n), 2)?;
    let term = read_flags(&st, path, "terminals", n)?;
    let tout = read_flags(&st, path, "timeouts", n)?;
    let m =
        |v: Vec<f32>, s: &[usize]| Array2::from_shape_vec((s[0], s[1]), v).map_err(|e| OfflineError::corrupt(path, e));
    let t = Transitions::from_columns(
        m(obs, &oshape)?,
        m(act, &ashape)?,
        Array1::from(rew),
        m(next, &nshape)?,
        term,
        tout,
    )?;
    let ds = Dataset::new(t, info)?;
    let report = LoadReport {
        path: path.display().to_string(),
        rows: n,
        transitions: n,
        episodes: ds.episodes().len(),
        next_obs_from: "next_observations".into(),
        ..Default::default()
    };
    Ok((ds, report))
}
