//! Reading and writing the weights of a model directory: `model.safetensors`, or shards listed
//! by `model.safetensors.index.json`, checked tensor by tensor against the config.

use std::borrow::Cow;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::{Path, PathBuf};

use safetensors::tensor::{Dtype, View};
use safetensors::SafeTensors;
use serde_json::Value;
use tch::{Kind, Tensor};

use crate::error::{HfError, Result};

/// File name of single-file weights.
pub const WEIGHTS_FILE: &str = "model.safetensors";
/// File name of the shard index of a sharded checkpoint.
pub const INDEX_FILE: &str = "model.safetensors.index.json";

fn shown(p: &Path) -> String {
    p.display().to_string()
}

fn read_file(path: &Path) -> Result<Vec<u8>> {
    match std::fs::read(path) {
        Ok(b) => Ok(b),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Err(HfError::MissingFile { path: shown(path) }),
        Err(e) => Err(e.into()),
    }
}

/// The weights files of `dir` and, for a sharded checkpoint, which tensor the index puts in
/// which file.
fn weight_files(dir: &Path) -> Result<Vec<(PathBuf, Option<BTreeSet<String>>)>> {
    let index = dir.join(INDEX_FILE);
    if index.is_file() {
        let text = std::fs::read_to_string(&index)?;
        let corrupt = |reason: String| HfError::Corrupt { path: shown(&index), reason };
        let v: Value = serde_json::from_str(&text).map_err(|e| corrupt(format!("not valid JSON: {e}")))?;
        let map =
            v.get("weight_map").and_then(Value::as_object).ok_or_else(|| corrupt("no `weight_map` object".into()))?;
        let mut files: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
        for (name, file) in map {
            let file = file.as_str().ok_or_else(|| corrupt(format!("weight_map[`{name}`] is not a string")))?;
            let plain = !file.is_empty()
                && !file.contains('/')
                && !file.contains('\\')
                && file != "."
                && file != ".."
                && file.ends_with(".safetensors");
            if !plain {
                return Err(corrupt(format!(
                    "weight_map[`{name}`] = `{file}` is not a .safetensors file name in the directory"
                )));
            }
            files.entry(file.to_owned()).or_default().insert(name.clone());
        }
        if files.is_empty() {
            return Err(corrupt("empty weight_map".into()));
        }
        Ok(files.into_iter().map(|(f, names)| (dir.join(f), Some(names))).collect())
    } else {
        let single = dir.join(WEIGHTS_FILE);
        if !single.is_file() {
            return Err(HfError::MissingFile { path: shown(&single) });
        }
        Ok(vec![(single, None)])
    }
}

fn kind_of(dtype: Dtype) -> Option<Kind> {
    match dtype {
        Dtype::F32 => Some(Kind::Float),
        Dtype::BF16 => Some(Kind::BFloat16),
        Dtype::F16 => Some(Kind::Half),
        _ => None,
    }
}

/// Reads every weights file of `dir`, checks each tensor against `expected` (name → shape) and
/// returns the tensors (CPU, in their stored kind), plus the stored kind of the first tensor.
///
/// Checks, in order: index and headers parse; every tensor a shard holds is the one the index
/// lists for it and appears in one file only; every expected name is present (first missing
/// one reported, sorted), its dtype is F32/BF16/F16 and its shape is the expected one; nothing
/// else is present (all extra names reported).
pub(crate) fn read_checked(dir: &Path, expected: &BTreeMap<String, Vec<i64>>) -> Result<BTreeMap<String, Tensor>> {
    read_files_checked(&weight_files(dir)?, &shown(dir), expected)
}

/// [`read_checked`] on one safetensors file (an adapter's weights), with the same checks.
pub(crate) fn read_file_checked(
    file: &Path,
    expected: &BTreeMap<String, Vec<i64>>,
) -> Result<BTreeMap<String, Tensor>> {
    if !file.is_file() {
        return Err(HfError::MissingFile { path: shown(file) });
    }
    read_files_checked(&[(file.to_path_buf(), None)], &shown(file), expected)
}

fn read_files_checked(
    files: &[(PathBuf, Option<BTreeSet<String>>)],
    dir_shown: &str,
    expected: &BTreeMap<String, Vec<i64>>,
) -> Result<BTreeMap<String, Tensor>> {
    let dir_shown = dir_shown.to_owned();
    let mut out: BTreeMap<String, Tensor> = BTreeMap::new();
    let mut extra: BTreeSet<String> = BTreeSet::new();
    let mut seen: HashMap<String, PathBuf> = HashMap::new();
    for (file, listed) in files {
        let bytes = read_file(file)?;
        let st = SafeTensors::deserialize(&bytes)
            .map_err(|e| HfError::Corrupt { path: shown(file), reason: format!("safetensors: {e:?}") })?;
        let names: BTreeSet<String> = st.names().into_iter().cloned().collect();
        if let Some(listed) = listed {
            if let Some(n) = listed.difference(&names).next() {
                return Err(HfError::MissingTensor { path: shown(file), name: n.clone() });
            }
            if let Some(n) = names.difference(listed).next() {
                return Err(HfError::Corrupt {
                    path: shown(file),
                    reason: format!("holds `{n}`, which {INDEX_FILE} does not list for this file"),
                });
            }
        }
        for name in names {
            if let Some(first) = seen.insert(name.clone(), file.clone()) {
                return Err(HfError::Corrupt {
                    path: shown(file),
                    reason: format!("tensor `{name}` is also in {}", shown(&first)),
                });
            }
            let Some(shape) = expected.get(&name) else {
                extra.insert(name);
                continue;
            };
            let view = st
                .tensor(&name)
                .map_err(|e| HfError::Corrupt { path: shown(file), reason: format!("tensor `{name}`: {e:?}") })?;
            let kind = kind_of(view.dtype()).ok_or_else(|| HfError::TensorDtype {
                path: shown(file),
                name: name.clone(),
                dtype: format!("{:?}", view.dtype()),
            })?;
            let got: Vec<i64> = view.shape().iter().map(|&d| d as i64).collect();
            if &got != shape {
                return Err(HfError::TensorShape { path: shown(file), name, expected: shape.clone(), got });
            }
            let t = Tensor::f_from_data_size(view.data(), &got, kind)?;
            out.insert(name, t);
        }
    }
    if let Some(name) = expected.keys().find(|n| !out.contains_key(*n)) {
        return Err(HfError::MissingTensor { path: dir_shown, name: name.clone() });
    }
    if !extra.is_empty() {
        return Err(HfError::UnexpectedTensors { path: dir_shown, names: extra.into_iter().collect() });
    }
    Ok(out)
}

/// A tensor's bytes ready for `safetensors::serialize`.
struct Bytes {
    dtype: Dtype,
    shape: Vec<usize>,
    data: Vec<u8>,
}

impl View for &Bytes {
    fn dtype(&self) -> Dtype {
        self.dtype
    }
    fn shape(&self) -> &[usize] {
        &self.shape
    }
    fn data(&self) -> Cow<'_, [u8]> {
        Cow::Borrowed(&self.data)
    }
    fn data_len(&self) -> usize {
        self.data.len()
    }
}

fn to_bytes(t: &Tensor, kind: Kind) -> Result<Bytes> {
    let dtype = match kind {
        Kind::Float => Dtype::F32,
        Kind::BFloat16 => Dtype::BF16,
        Kind::Half => Dtype::F16,
        other => {
            return Err(HfError::InvalidParameter {
                name: "dtype".into(),
                value: format!("{other:?}"),
                reason: "weights are written as F32, BF16 or F16".into(),
            })
        }
    };
    let c = t.f_detach()?.f_to_device(tch::Device::Cpu)?.f_to_kind(kind)?.f_contiguous()?;
    let numel = c.numel();
    let mut data = vec![0u8; numel * kind.elt_size_in_bytes()];
    c.f_copy_data_u8(&mut data, numel)?;
    let shape = c.size().iter().map(|&d| d as usize).collect();
    Ok(Bytes { dtype, shape, data })
}

fn write_atomic(path: &Path, bytes: &[u8]) -> Result<()> {
    let tmp = path.with_extension("tmp-rl-hf");
    std::fs::write(&tmp, bytes)?;
    std::fs::rename(&tmp, path)?;
    Ok(())
}

fn serialize(items: &[&(String, Bytes)]) -> Result<Vec<u8>> {
    let mut meta = HashMap::new();
    meta.insert("format".to_owned(), "pt".to_owned());
    safetensors::tensor::serialize(items.iter().map(|(n, b)| (n.as_str(), b)), &Some(meta)).map_err(|e| {
        HfError::InvalidParameter { name: "tensors".into(), value: String::new(), reason: format!("{e:?}") }
    })
}

/// Writes `tensors` (sorted by name) in `kind` as one safetensors file at `path` (written to a
/// temporary name, then renamed).
pub(crate) fn write_file(path: &Path, tensors: &BTreeMap<String, Tensor>, kind: Kind) -> Result<()> {
    let mut all: Vec<(String, Bytes)> = Vec::with_capacity(tensors.len());
    for (name, t) in tensors {
        all.push((name.clone(), to_bytes(t, kind)?));
    }
    let items: Vec<&(String, Bytes)> = all.iter().collect();
    write_atomic(path, &serialize(&items)?)
}

/// Writes `tensors` (sorted by name) as `model.safetensors`, or, when their total size is above
/// `max_shard_bytes`, as `model-0000i-of-0000n.safetensors` shards of at most that size (a
/// single tensor larger than it gets a shard of its own) plus `model.safetensors.index.json`.
/// A stale single file or index of the other layout is removed, so transformers reads the
/// new one. Returns the files written.
pub(crate) fn write(
    dir: &Path,
    tensors: &BTreeMap<String, Tensor>,
    kind: Kind,
    max_shard_bytes: u64,
) -> Result<Vec<PathBuf>> {
    std::fs::create_dir_all(dir)?;
    let mut all: Vec<(String, Bytes)> = Vec::with_capacity(tensors.len());
    for (name, t) in tensors {
        all.push((name.clone(), to_bytes(t, kind)?));
    }
    let total: u64 = all.iter().map(|(_, b)| b.data.len() as u64).sum();
    let mut shards: Vec<Vec<&(String, Bytes)>> = vec![Vec::new()];
    let mut cur = 0u64;
    for item in &all {
        let n = item.1.data.len() as u64;
        let last_empty = shards.last().is_none_or(Vec::is_empty);
        if !last_empty && cur + n > max_shard_bytes {
            shards.push(Vec::new());
            cur = 0;
        }
        cur += n;
        if let Some(last) = shards.last_mut() {
            last.push(item);
        }
    }
    let mut written = Vec::new();
    if shards.len() == 1 {
        let path = dir.join(WEIGHTS_FILE);
        write_atomic(&path, &serialize(&shards[0])?)?;
        let stale = dir.join(INDEX_FILE);
        if stale.is_file() {
            std::fs::remove_file(stale)?;
        }
        written.push(path);
    } else {
        let n = shards.len();
        let mut weight_map = serde_json::Map::new();
        for (i, shard) in shards.iter().enumerate() {
            let file = format!("model-{:05}-of-{n:05}.safetensors", i + 1);
            let path = dir.join(&file);
            write_atomic(&path, &serialize(shard)?)?;
            for (name, _) in shard {
                weight_map.insert(name.clone(), Value::from(file.clone()));
            }
            written.push(path);
        }
        let index = serde_json::json!({ "metadata": { "total_size": total }, "weight_map": weight_map });
        let path = dir.join(INDEX_FILE);
        write_atomic(&path, serde_json::to_string_pretty(&index)?.as_bytes())?;
        let stale = dir.join(WEIGHTS_FILE);
        if stale.is_file() {
            std::fs::remove_file(stale)?;
        }
        written.push(path);
    }
    Ok(written)
}
