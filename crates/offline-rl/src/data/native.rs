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
//! `1`, `info` = the [`DatasetInfo`] as JSON and `content_sha256` = a SHA-256 content hash
//! (lowercase hex). Values are stored little-endian, so a round trip is bit-exact.
//!
//! **Content hash.** [`read_native`] recomputes the hash and refuses a file whose contents do
//! not match it ([`OfflineError::Corrupt`]), so every changed or missing byte is an error:
//! the hash covers every tensor's name, dtype, shape and data bytes and every metadata entry
//! but itself; the tensors' offsets are not hashed but safetensors requires them to tile the
//! data section exactly, which the reader checks. The hashed bytes, in order (`u64` = 8
//! bytes little-endian, a string = its `u64` byte length then its UTF-8 bytes):
//!
//! ```text
//! "frugal-rl.offline-dataset.sha256.v1"
//! u64 number of metadata entries but content_sha256; then, sorted by key: key, value
//! u64 number of tensors; then, sorted by name: name, dtype (as in the header, "F32"),
//!     u64 rank, u64 each dimension, u64 byte length, the data bytes
//! ```
//!
//! SHA-256 rather than a faster 64-bit hash: it is the hash anyone can recompute (Python's
//! `hashlib`), it is already in the workspace (lare's request cache), it runs at several
//! hundred MB/s (far below the cost of reading a dataset from disk), and a 256-bit digest
//! makes an undetected random corruption impossible in practice. It detects corruption, not
//! tampering: whoever edits a file can recompute the hash, and such a file still has to pass
//! every check below. Files written before the hash existed (no `content_sha256`) still
//! load, unverified ([`LoadReport::content_sha256`] is `None`); a metadata key other than
//! these four is an error, so a damaged `content_sha256` key cannot pass for such a file.
//!
//! **Untrusted files.** The reader charges the file (read whole) and each decoded column
//! against [`NativeReadOptions::budget`] before allocating; declared shapes cannot exceed the
//! file, since safetensors checks every tensor's byte span against its shape (with overflow
//! checks) and the header length against the file.

use std::collections::HashMap;
use std::path::Path;

use ndarray::{Array1, Array2};
use rl_core::{MemoryBudget, Transitions};
use safetensors::tensor::{Dtype, SafeTensors, TensorView};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::{check_column_finite, check_width, Charge, Dataset, DatasetInfo, LoadReport};
use crate::error::{OfflineError, Result};

/// The `format` metadata value.
pub const FORMAT: &str = "frugal-rl.offline-dataset";
/// The `format_version` this crate writes and reads.
pub const FORMAT_VERSION: u32 = 1;
/// The metadata key of the content hash.
pub const HASH_KEY: &str = "content_sha256";
const HASH_DOMAIN: &[u8] = b"frugal-rl.offline-dataset.sha256.v1";
/// Every metadata key of the format; another one is an error.
const METADATA_KEYS: [&str; 4] = ["format", "format_version", "info", HASH_KEY];

/// Options of [`read_native`].
///
/// | field | default | meaning |
/// |---|---|---|
/// | `budget` | 16 GiB | the most bytes the read may allocate for the file and its columns (see [`crate::data`]) |
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(default, deny_unknown_fields)]
pub struct NativeReadOptions {
    /// Memory budget of the read.
    pub budget: MemoryBudget,
}

fn dtype_name(d: Dtype) -> String {
    match serde_json::to_value(d) {
        Ok(serde_json::Value::String(s)) => s,
        _ => format!("{d:?}"),
    }
}

/// The content hash (lowercase hex) of `metadata` (the entry [`HASH_KEY`] left out) and
/// `tensors` (`name, dtype, shape, data`), as described in the module docs.
fn content_hash<'a>(
    metadata: &HashMap<String, String>,
    tensors: impl IntoIterator<Item = (&'a str, Dtype, &'a [usize], &'a [u8])>,
) -> String {
    let mut h = Sha256::new();
    let put = |h: &mut Sha256, b: &[u8]| {
        h.update((b.len() as u64).to_le_bytes());
        h.update(b);
    };
    h.update(HASH_DOMAIN);
    let mut meta: Vec<(&String, &String)> = metadata.iter().filter(|(k, _)| k.as_str() != HASH_KEY).collect();
    meta.sort();
    h.update((meta.len() as u64).to_le_bytes());
    for (k, v) in meta {
        put(&mut h, k.as_bytes());
        put(&mut h, v.as_bytes());
    }
    let mut ts: Vec<_> = tensors.into_iter().collect();
    ts.sort_by(|a, b| a.0.cmp(b.0));
    h.update((ts.len() as u64).to_le_bytes());
    for (name, dtype, shape, data) in ts {
        put(&mut h, name.as_bytes());
        put(&mut h, dtype_name(dtype).as_bytes());
        h.update((shape.len() as u64).to_le_bytes());
        for d in shape {
            h.update((*d as u64).to_le_bytes());
        }
        put(&mut h, data);
    }
    h.finalize().iter().map(|b| format!("{b:02x}")).collect()
}

fn f32_bytes(v: impl Iterator<Item = f32>) -> Vec<u8> {
    v.flat_map(f32::to_le_bytes).collect()
}

/// Writes `dataset` to `path` (a temporary sibling, then a rename), with its content hash.
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
    let mut meta: HashMap<String, String> = [
        ("format".to_owned(), FORMAT.to_owned()),
        ("format_version".to_owned(), FORMAT_VERSION.to_string()),
        ("info".to_owned(), serde_json::to_string(dataset.info())?),
    ]
    .into_iter()
    .collect();
    let hash = content_hash(&meta, views.iter().map(|(name, v)| (*name, v.dtype(), v.shape(), v.data())));
    meta.insert(HASH_KEY.to_owned(), hash);
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
    charge: &mut Charge,
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
    charge.keep(&format!("{}: `{key}`", path.display()), v.data().len() as u64)?;
    let values: Vec<f32> = v.data().chunks_exact(4).map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect();
    check_column_finite(key, &values, if rank == 2 { shape[1] } else { 1 })?;
    Ok((values, shape))
}

fn read_flags(st: &SafeTensors<'_>, path: &Path, key: &str, rows: usize, charge: &mut Charge) -> Result<Array1<f32>> {
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
    charge.keep(&format!("{}: `{key}`", path.display()), (v.data().len() as u64).saturating_mul(4))?;
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

/// Reads a file written by [`write_native`], checking the file size against the budget, the
/// format tag and version, that the metadata holds no other key, the content hash (when the file has one, see the module docs),
/// every column's presence, dtype, rank and length, widths of at least 1, finiteness and
/// 0/1 flags.
///
/// # Errors
/// [`OfflineError::Corrupt`] for a file that is not safetensors, carries another format or an
/// unknown metadata key, or does not match its content hash; [`OfflineError::MissingKey`], [`OfflineError::Length`],
/// [`OfflineError::Shape`], [`OfflineError::NonFinite`], [`OfflineError::InvalidFlag`],
/// [`OfflineError::Unsupported`] (another dtype or a newer `format_version`); a file or
/// column beyond [`NativeReadOptions::budget`] ([`rl_core::RlCoreError::TooLarge`] in
/// [`OfflineError::Core`], before it is read).
pub fn read_native(path: impl AsRef<Path>, options: &NativeReadOptions) -> Result<(Dataset, LoadReport)> {
    let path = path.as_ref();
    let mut charge = Charge::new(options.budget);
    charge.keep(&format!("{} (the file)", path.display()), std::fs::metadata(path)?.len())?;
    let bytes = std::fs::read(path)?;
    let (_, header) =
        SafeTensors::read_metadata(&bytes).map_err(|e| OfflineError::corrupt(path, format!("safetensors: {e:?}")))?;
    let meta = header.metadata().clone().unwrap_or_default();
    if meta.get("format").map(String::as_str) != Some(FORMAT) {
        return Err(OfflineError::corrupt(path, format!("not a {FORMAT} file (format = {:?})", meta.get("format"))));
    }
    // no other key: a damaged `content_sha256` key must not pass as a file without a hash
    let mut unknown: Vec<&String> = meta.keys().filter(|k| !METADATA_KEYS.contains(&k.as_str())).collect();
    unknown.sort();
    if let Some(k) = unknown.first() {
        return Err(OfflineError::corrupt(
            path,
            format!("unknown metadata key {k:?} (this format has {METADATA_KEYS:?})"),
        ));
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
    let verified = match meta.get(HASH_KEY) {
        Some(recorded) => {
            let tensors = st.tensors();
            let got = content_hash(&meta, tensors.iter().map(|(n, v)| (n.as_str(), v.dtype(), v.shape(), v.data())));
            if &got != recorded {
                return Err(OfflineError::corrupt(
                    path,
                    format!(
                        "content hash mismatch: the file records {HASH_KEY} = {recorded:?}, its contents hash to {got}"
                    ),
                ));
            }
            Some(got)
        }
        None => None,
    };
    let (rew, rshape) = read_f32(&st, path, "rewards", None, 1, &mut charge)?;
    let n = rshape[0];
    let (obs, oshape) = read_f32(&st, path, "observations", Some(n), 2, &mut charge)?;
    check_width(&format!("{}: observations", path.display()), oshape[1])?;
    let (next, nshape) = read_f32(&st, path, "next_observations", Some(n), 2, &mut charge)?;
    if nshape[1] != oshape[1] {
        return Err(OfflineError::shape(
            format!("{}: next_observations", path.display()),
            format!("[{n}, {}]", oshape[1]),
            format!("{nshape:?}"),
        ));
    }
    let (act, ashape) = read_f32(&st, path, "actions", Some(n), 2, &mut charge)?;
    check_width(&format!("{}: actions", path.display()), ashape[1])?;
    let term = read_flags(&st, path, "terminals", n, &mut charge)?;
    let tout = read_flags(&st, path, "timeouts", n, &mut charge)?;
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
        content_sha256: verified,
        ..Default::default()
    };
    Ok((ds, report))
}
