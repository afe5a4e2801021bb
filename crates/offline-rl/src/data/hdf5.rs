//! D4RL and Minari HDF5 files, read and written in pure Rust ([`hdf5_pure`], no C library).
//!
//! **D4RL** (one HDF5 file, as `d4rl.get_dataset` / `h5py` see it): row-aligned datasets
//! `observations [N, O]`, `actions [N, A]`, `rewards [N]`, `terminals [N]`, `timeouts [N]`
//! and, in the v2 locomotion files, `next_observations [N, O]`; other keys (`infos/*`,
//! `metadata/*`) are listed in the report and not read. Flags may be stored as booleans
//! (h5py's `enum {FALSE, TRUE}`), integers or floats equal to 0 or 1.
//!
//! **Minari** (a dataset directory, `minari.MinariDataset(path)`): `data/main_data.hdf5` with
//! one group `episode_{k}` per episode holding `observations [n + 1, O]` (the last one is the
//! observation after the final step), `actions [n, A]`, `rewards [n]`, `terminations [n]`,
//! `truncations [n]`, and `data/metadata.json` (`dataset_id`, `total_steps`, spaces,
//! `ref_min_score`/`ref_max_score` when the dataset has them). Dictionary observations (a
//! group instead of a dataset) are concatenated in the order of
//! [`MinariReadOptions::obs_keys`].
//!
//! Files written here are read by h5py and Minari 0.5.4 (checked by
//! `crates/offline-rl/scripts/check_h5py.py`); files written by h5py/Minari are read here
//! (committed fixtures from `crates/offline-rl/scripts/make_fixtures.py`).
//!
//! **Untrusted files.** Both readers charge the file and every column against the
//! [`MemoryBudget`] of their options before reading it (see [`crate::data`]); a column's size
//! is its declared shape times its element size, and a chunked column's chunk is checked
//! too, so a never-written `[200, 2^32]` dataset in a few-kB file is refused, not allocated.
//! HDF5 checksums only its metadata, and only in the newer format versions: superblock v2/v3,
//! version-2 object headers, B-trees v2 and heaps, which are what the files written here use
//! (hdf5-pure verifies them, the `checksum` feature). Raw data has no checksum (HDF5's
//! optional Fletcher-32 filter is not used by h5py's defaults, D4RL or Minari), and files
//! written by h5py with default settings (superblock v0, version-1 object headers) have no
//! checksum at all: a changed byte there that still parses is found only by the structural
//! checks below (shapes, row counts, finiteness, flags, Minari's episode indices and
//! `total_steps`). `tests/fuzz_readers.rs` flips every byte of files written here and checks
//! that a load either fails, or returns the original values, or the byte lay in a
//! dataset's raw data.

use std::path::{Path, PathBuf};

use hdf5_pure::{AttrValue, DType, File, FileBuilder};
use ndarray::{Array1, Array2};
use rl_core::{MemoryBudget, Transitions};
use serde::{Deserialize, Serialize};

use super::{check_column_finite, check_width, Charge, Dataset, DatasetInfo, LoadReport};
use crate::error::{OfflineError, Result};

/// The root attribute holding [`DatasetInfo`] as JSON in files written here.
pub const INFO_ATTR: &str = "frugal_rl_info";

/// Where [`read_d4rl`] takes `next_obs` from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum NextObs {
    /// `next_observations` when the file has it (every row kept), else the next row
    /// ([`NextObs::NextRow`]).
    #[default]
    Auto,
    /// `next_observations`, required ([`OfflineError::MissingKey`] without it).
    Stored,
    /// The next row's observation, exactly as `d4rl.qlearning_dataset(env)` builds it: every
    /// row with a timeout flag and the file's last row are dropped (their next row belongs to
    /// another episode); the kept row before a dropped timeout row gets the timeout flag, so
    /// episodes stay apart. Terminal rows keep the next row's observation, which is never
    /// bootstrapped from.
    NextRow,
}

/// Options of [`read_d4rl`].
///
/// | field | default | meaning |
/// |---|---|---|
/// | `next_obs` | `auto` | see [`NextObs`] |
/// | `require_timeouts` | true | a file without `timeouts` is an error; false: read it as all zeros (noted in the report) |
/// | `budget` | 16 GiB | the most bytes the read may allocate for the file and its columns (see [`crate::data`]) |
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct D4rlReadOptions {
    /// Source of `next_obs`.
    pub next_obs: NextObs,
    /// Whether `timeouts` must exist.
    pub require_timeouts: bool,
    /// Memory budget of the read.
    pub budget: MemoryBudget,
}

impl Default for D4rlReadOptions {
    fn default() -> Self {
        Self { next_obs: NextObs::Auto, require_timeouts: true, budget: MemoryBudget::default() }
    }
}

/// Options of [`write_d4rl`].
///
/// | field | default | meaning |
/// |---|---|---|
/// | `deflate` | `Some(4)` | gzip level 0-9 of every column (D4RL's files are gzip-compressed), `None`: uncompressed |
/// | `chunk_rows` | 16,384 | rows per chunk of a compressed column |
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct D4rlWriteOptions {
    /// Compression level.
    pub deflate: Option<u32>,
    /// Chunk height.
    pub chunk_rows: usize,
}

impl Default for D4rlWriteOptions {
    fn default() -> Self {
        Self { deflate: Some(4), chunk_rows: 16_384 }
    }
}

/// Options of [`read_minari`].
///
/// | field | default | meaning |
/// |---|---|---|
/// | `obs_keys` | none | for dictionary observations: the keys to concatenate, in order (e.g. `["observation", "desired_goal"]` for Minari's point mazes) |
/// | `budget` | 16 GiB | the most bytes the read may allocate for the files and their columns (see [`crate::data`]) |
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(default, deny_unknown_fields)]
pub struct MinariReadOptions {
    /// Keys of a dictionary observation.
    pub obs_keys: Option<Vec<String>>,
    /// Memory budget of the read.
    pub budget: MemoryBudget,
}

fn path_str(p: &Path) -> String {
    p.display().to_string()
}

fn h5err(path: &Path, e: impl std::fmt::Display) -> OfflineError {
    OfflineError::corrupt(path, format!("HDF5: {e}"))
}

/// A numeric column read from a file: values as `f32`, row-major, and its shape.
struct Column {
    values: Vec<f32>,
    shape: Vec<u64>,
}

impl Column {
    fn rows(&self) -> usize {
        self.shape.first().copied().unwrap_or(1) as usize
    }

    /// Width of a `[N]`, `[N, D]` column (`[N]` has width 1).
    fn width(&self, path: &Path, key: &str) -> Result<usize> {
        match self.shape.len() {
            1 => Ok(1),
            2 => Ok(self.shape[1] as usize),
            _ => Err(OfflineError::shape(
                format!("{}: {key}", path_str(path)),
                "[N] or [N, D]",
                format!("{:?}", self.shape),
            )),
        }
    }
}

/// Reads a numeric column, charging its declared size (shape times element size, and its
/// chunk's size) to `charge` before anything is read.
fn read_column(ds: &hdf5_pure::Dataset, path: &Path, key: &str, charge: &mut Charge) -> Result<Column> {
    let e = |err: hdf5_pure::Error| h5err(path, format!("`{key}`: {err}"));
    let shape = ds.shape().map_err(e)?;
    let dtype = ds.dtype().map_err(e)?;
    let elem = ds.element_size().map_err(e)?;
    let what = format!("{}: `{key}`", path_str(path));
    let numeric = match &dtype {
        DType::F32 | DType::I32 | DType::U32 => elem == 4,
        DType::F64 | DType::I64 | DType::U64 => elem == 8,
        DType::I16 | DType::U16 => elem == 2,
        DType::I8 | DType::U8 | DType::Enum(_) => elem == 1,
        _ => true, // refused below with its type
    };
    if !numeric {
        return Err(OfflineError::Unsupported {
            path: path_str(path),
            what: format!("type of `{key}`"),
            reason: format!("{dtype} with {elem}-byte elements"),
        });
    }
    if let Some(chunk) = ds.chunk_shape().map_err(e)? {
        charge.transient(&format!("{what} (one chunk of {chunk:?})"), chunk_bytes(&chunk, elem))?;
    }
    let count = charge.column(&what, &shape, elem)?;
    let values: Vec<f32> = match dtype {
        DType::F32 => ds.read_f32().map_err(e)?,
        DType::F64 => ds.read_f64().map_err(e)?.into_iter().map(|v| v as f32).collect(),
        DType::I8 => ds.read_i8().map_err(e)?.into_iter().map(f32::from).collect(),
        DType::U8 => ds.read_u8().map_err(e)?.into_iter().map(f32::from).collect(),
        DType::I16 => ds.read_i16().map_err(e)?.into_iter().map(f32::from).collect(),
        DType::U16 => ds.read_u16().map_err(e)?.into_iter().map(f32::from).collect(),
        DType::I32 => ds.read_i32().map_err(e)?.into_iter().map(|v| v as f32).collect(),
        DType::U32 => ds.read_u32().map_err(e)?.into_iter().map(|v| v as f32).collect(),
        DType::I64 => ds.read_i64().map_err(e)?.into_iter().map(|v| v as f32).collect(),
        DType::U64 => ds.read_u64().map_err(e)?.into_iter().map(|v| v as f32).collect(),
        // h5py stores numpy booleans as an 8-bit enum {FALSE = 0, TRUE = 1}
        DType::Enum(_) => ds.read_i8().map_err(e)?.into_iter().map(f32::from).collect(),
        other => {
            return Err(OfflineError::Unsupported {
                path: path_str(path),
                what: format!("type of `{key}`"),
                reason: format!("{other} (numeric or boolean columns only)"),
            })
        }
    };
    if values.len() != count {
        return Err(h5err(path, format!("`{key}` holds {} values for shape {shape:?}", values.len())));
    }
    Ok(Column { values, shape })
}

/// Reads `key` of `group` as a matrix `[rows, width]` (a `[N]` column is `[N, 1]`).
fn matrix(col: Column, path: &Path, key: &str) -> Result<Array2<f32>> {
    let w = col.width(path, key)?;
    let n = col.rows();
    check_column_finite(key, &col.values, w)?;
    Array2::from_shape_vec((n, w), col.values).map_err(|e| h5err(path, format!("`{key}`: {e}")))
}

/// A `[N]` or `[N, 1]` column as a vector.
fn vector(col: Column, path: &Path, key: &str) -> Result<Array1<f32>> {
    let w = col.width(path, key)?;
    if w != 1 {
        return Err(OfflineError::shape(
            format!("{}: {key}", path_str(path)),
            "[N] or [N, 1]",
            format!("{:?}", col.shape),
        ));
    }
    check_column_finite(key, &col.values, 1)?;
    Ok(Array1::from(col.values))
}

/// A 0/1 flag column.
fn flags(col: Column, path: &Path, key: &str) -> Result<Array1<f32>> {
    let v = vector(col, path, key)?;
    if let Some((i, x)) = v.iter().enumerate().find(|(_, x)| **x != 0.0 && **x != 1.0) {
        return Err(OfflineError::InvalidFlag {
            path: path_str(path),
            key: key.into(),
            index: i,
            value: f64::from(*x),
        });
    }
    Ok(v)
}

/// Names (datasets and groups) directly under `group`.
fn members(group: &hdf5_pure::Group, path: &Path) -> Result<(Vec<String>, Vec<String>)> {
    let ds = group.datasets().map_err(|e| h5err(path, e))?;
    let gs = group.groups().map_err(|e| h5err(path, e))?;
    Ok((ds, gs))
}

fn need<'a>(names: &'a [String], key: &str, path: &Path, prefix: &str) -> Result<&'a String> {
    names
        .iter()
        .find(|n| n.as_str() == key)
        .ok_or_else(|| OfflineError::MissingKey { path: path_str(path), key: format!("{prefix}{key}") })
}

fn check_rows(path: &Path, key: &str, expected: usize, got: usize) -> Result<()> {
    if expected != got {
        return Err(OfflineError::Length { path: path_str(path), key: key.into(), expected, got });
    }
    Ok(())
}

fn open(path: &Path) -> Result<File> {
    if !path.exists() {
        return Err(OfflineError::Io(std::io::Error::new(
            std::io::ErrorKind::NotFound,
            format!("{}: no such file", path_str(path)),
        )));
    }
    File::open(path).map_err(|e| h5err(path, e))
}

fn info_from_attrs(attrs: &std::collections::HashMap<String, AttrValue>, path: &Path) -> Result<Option<DatasetInfo>> {
    match attrs.get(INFO_ATTR) {
        Some(AttrValue::String(s)) | Some(AttrValue::AsciiString(s)) => serde_json::from_str(s)
            .map(Some)
            .map_err(|e| OfflineError::corrupt(path, format!("attribute `{INFO_ATTR}`: {e}"))),
        _ => Ok(None),
    }
}

/// Bytes of one chunk of `chunk` elements of `elem` bytes (saturating).
fn chunk_bytes(chunk: &[u64], elem: u64) -> u64 {
    chunk.iter().fold(elem.max(1), |acc, &d| acc.saturating_mul(d))
}

/// Opens an HDF5 file after charging its size (it is read into memory whole).
fn open_charged(path: &Path, charge: &mut Charge) -> Result<File> {
    if let Ok(meta) = std::fs::metadata(path) {
        charge.keep(&format!("{} (the file)", path_str(path)), meta.len())?;
    }
    open(path)
}

fn stem(path: &Path) -> String {
    path.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default()
}

/// Reads a D4RL-layout HDF5 file (see the module docs), checking every column: a missing key
/// ([`OfflineError::MissingKey`]), columns of different lengths ([`OfflineError::Length`]),
/// NaN/inf ([`OfflineError::NonFinite`] with the key and row), flags other than 0/1
/// ([`OfflineError::InvalidFlag`]), wrong ranks or widths, observations or actions of width 0
/// ([`OfflineError::Shape`]), a file or column beyond [`D4rlReadOptions::budget`]
/// ([`rl_core::RlCoreError::TooLarge`] in [`OfflineError::Core`], before it is read).
///
/// The description comes from the file's `frugal_rl_info` attribute when it was written here,
/// else its name is the file stem (`hopper-medium-v2` → score id `hopper` when it starts with a
/// D4RL environment name, see [`crate::score::d4rl_family`]).
///
/// # Errors
/// As above; [`OfflineError::Corrupt`] for a file that is not HDF5; [`OfflineError::Empty`] for
/// no transition.
pub fn read_d4rl(path: impl AsRef<Path>, options: &D4rlReadOptions) -> Result<(Dataset, LoadReport)> {
    let path = path.as_ref();
    let mut charge = Charge::new(options.budget);
    let file = open_charged(path, &mut charge)?;
    let root = file.root();
    let (dsets, groups) = members(&root, path)?;
    let mut report = LoadReport { path: path_str(path), ..Default::default() };
    let mut get = |key: &str| -> Result<Column> {
        need(&dsets, key, path, "")?;
        let ds = file.dataset(key).map_err(|e| h5err(path, format!("`{key}`: {e}")))?;
        read_column(&ds, path, key, &mut charge)
    };
    let rewards = vector(get("rewards")?, path, "rewards")?;
    let n = rewards.len();
    let obs = matrix(get("observations")?, path, "observations")?;
    check_rows(path, "observations", n, obs.nrows())?;
    check_width(&format!("{}: observations", path_str(path)), obs.ncols())?;
    let actions = matrix(get("actions")?, path, "actions")?;
    check_rows(path, "actions", n, actions.nrows())?;
    check_width(&format!("{}: actions", path_str(path)), actions.ncols())?;
    let terminals = flags(get("terminals")?, path, "terminals")?;
    check_rows(path, "terminals", n, terminals.len())?;
    let has_timeouts = dsets.iter().any(|d| d == "timeouts");
    let timeouts = if has_timeouts {
        let t = flags(get("timeouts")?, path, "timeouts")?;
        check_rows(path, "timeouts", n, t.len())?;
        t
    } else if options.require_timeouts {
        return Err(OfflineError::MissingKey { path: path_str(path), key: "timeouts".into() });
    } else {
        report.ignored_keys.push("timeouts (absent: read as zeros)".into());
        Array1::zeros(n)
    };
    let has_next = dsets.iter().any(|d| d == "next_observations");
    let stored = match options.next_obs {
        NextObs::Auto => has_next,
        NextObs::Stored => {
            need(&dsets, "next_observations", path, "")?;
            true
        }
        NextObs::NextRow => false,
    };
    let used: &[&str] = &["observations", "actions", "rewards", "terminals", "timeouts", "next_observations"];
    report.ignored_keys.extend(dsets.iter().filter(|d| !used.contains(&d.as_str())).cloned());
    if !stored && has_next {
        report.ignored_keys.push("next_observations".into());
    }
    report.ignored_keys.extend(groups.iter().map(|g| format!("{g}/")));
    report.rows = n;
    let transitions = if stored {
        let next = matrix(get("next_observations")?, path, "next_observations")?;
        check_rows(path, "next_observations", n, next.nrows())?;
        if next.ncols() != obs.ncols() {
            return Err(OfflineError::shape(
                format!("{}: next_observations", path_str(path)),
                format!("[{n}, {}]", obs.ncols()),
                format!("[{n}, {}]", next.ncols()),
            ));
        }
        report.next_obs_from = "next_observations".into();
        Transitions::from_columns(obs, actions, rewards, next, terminals, timeouts)?
    } else {
        report.next_obs_from = "next row".into();
        next_row_transitions(&obs, &actions, &rewards, &terminals, &timeouts, &mut report)?
    };
    let info = match info_from_attrs(&root.attrs().map_err(|e| h5err(path, e))?, path)? {
        Some(i) => i,
        None => {
            let name = stem(path);
            DatasetInfo {
                score_env: crate::score::d4rl_family(&name).unwrap_or_default().to_owned(),
                name,
                source: format!("D4RL HDF5 file {}", path_str(path)),
                ..Default::default()
            }
        }
    };
    if transitions.is_empty() {
        return Err(OfflineError::Empty { what: format!("{}: transitions", path_str(path)) });
    }
    let ds = Dataset::new(transitions, info)?;
    report.transitions = ds.len();
    report.episodes = ds.episodes().len();
    Ok((ds, report))
}

/// `d4rl.qlearning_dataset`'s construction (see [`NextObs::NextRow`]).
fn next_row_transitions(
    obs: &Array2<f32>,
    actions: &Array2<f32>,
    rewards: &Array1<f32>,
    terminals: &Array1<f32>,
    timeouts: &Array1<f32>,
    report: &mut LoadReport,
) -> Result<Transitions> {
    let n = rewards.len();
    let mut keep = Vec::with_capacity(n);
    let mut flag_timeout: Vec<bool> = Vec::with_capacity(n);
    let (mut dropped_timeout, mut dropped_last) = (0, 0);
    for i in 0..n {
        if i + 1 == n {
            dropped_last += 1;
            continue;
        }
        if timeouts[i] == 1.0 {
            dropped_timeout += 1;
            // the previous kept row of this episode now ends it
            if let (Some(&prev), Some(last)) = (keep.last(), flag_timeout.last_mut()) {
                if prev + 1 == i && terminals[prev] == 0.0 && !*last {
                    *last = true;
                    report.flags_added += 1;
                }
            }
            continue;
        }
        keep.push(i);
        flag_timeout.push(false);
    }
    report.drop_rows("timeout row (its next row starts another episode)", dropped_timeout);
    report.drop_rows("last row of the file (no next row)", dropped_last);
    let m = keep.len();
    let (o, a) = (obs.ncols(), actions.ncols());
    let mut t_obs = Array2::zeros((m, o));
    let mut t_act = Array2::zeros((m, a));
    let mut t_next = Array2::zeros((m, o));
    let mut t_rew = Array1::zeros(m);
    let mut t_term = Array1::zeros(m);
    let mut t_tout = Array1::zeros(m);
    for (k, &i) in keep.iter().enumerate() {
        t_obs.row_mut(k).assign(&obs.row(i));
        t_act.row_mut(k).assign(&actions.row(i));
        t_next.row_mut(k).assign(&obs.row(i + 1));
        t_rew[k] = rewards[i];
        t_term[k] = terminals[i];
        t_tout[k] = if flag_timeout[k] { 1.0 } else { 0.0 };
    }
    Ok(Transitions::from_columns(t_obs, t_act, t_rew, t_next, t_term, t_tout)?)
}

fn bool_type() -> Result<hdf5_pure::Datatype> {
    hdf5_pure::EnumTypeBuilder::with_base(hdf5_pure::make_i8_type())
        .value("FALSE", 0)
        .value("TRUE", 1)
        .build()
        .map_err(|e| OfflineError::corrupt("<bool type>", e))
}

fn flags_u8(v: &Array1<f32>) -> Vec<u8> {
    v.iter().map(|x| u8::from(*x == 1.0)).collect()
}

/// Writes `path` through a temporary sibling and a rename.
fn write_atomically(path: &Path, bytes: &[u8]) -> Result<()> {
    let dir = path.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir)?;
    let tmp = dir.join(format!(".{}.tmp-{}", stem(path), std::process::id()));
    std::fs::write(&tmp, bytes)?;
    std::fs::rename(&tmp, path)?;
    Ok(())
}

/// Writes `dataset` as a D4RL-layout HDF5 file: `observations`, `actions`, `rewards`,
/// `next_observations` (`float32`), `terminals`, `timeouts` (booleans, h5py's enum), and the
/// [`DatasetInfo`] as the JSON root attribute `frugal_rl_info`. `h5py.File(path)` and
/// `d4rl`-style loaders read it; [`read_d4rl`] reads it back exactly.
///
/// # Errors
/// [`OfflineError::InvalidParameter`] for a deflate level above 9 or zero `chunk_rows`; I/O
/// failures.
pub fn write_d4rl(dataset: &Dataset, path: impl AsRef<Path>, options: &D4rlWriteOptions) -> Result<()> {
    let path = path.as_ref();
    if options.deflate.is_some_and(|l| l > 9) {
        return Err(OfflineError::invalid("deflate", format!("{:?}", options.deflate), "must be 0-9"));
    }
    crate::error::check::at_least("chunk_rows", options.chunk_rows, 1)?;
    let t = dataset.transitions();
    let n = t.len() as u64;
    let mut b = FileBuilder::new();
    let chunk = (options.chunk_rows as u64).min(n.max(1));
    let add = |b: &mut FileBuilder, name: &str, data: &[f32], width: Option<u64>| {
        let d = b.create_dataset(name);
        d.with_f32_data(data);
        match width {
            Some(w) => {
                d.with_shape(&[n, w]);
                if let Some(level) = options.deflate {
                    d.with_chunks(&[chunk, w]).with_deflate(level);
                }
            }
            None => {
                d.with_shape(&[n]);
                if let Some(level) = options.deflate {
                    d.with_chunks(&[chunk]).with_deflate(level);
                }
            }
        }
    };
    let contiguous = |a: &Array2<f32>| a.as_standard_layout().iter().copied().collect::<Vec<f32>>();
    add(&mut b, "observations", &contiguous(t.obs()), Some(t.obs_dim() as u64));
    add(&mut b, "actions", &contiguous(t.action()), Some(t.act_dim() as u64));
    add(&mut b, "rewards", &t.reward().to_vec(), None);
    add(&mut b, "next_observations", &contiguous(t.next_obs()), Some(t.obs_dim() as u64));
    for (name, col) in [("terminals", t.terminal()), ("timeouts", t.timeout())] {
        let d = b.create_dataset(name);
        d.with_enum_u8_data(bool_type()?, &flags_u8(col)).with_shape(&[n]);
        if let Some(level) = options.deflate {
            d.with_chunks(&[chunk]).with_deflate(level);
        }
    }
    b.set_attr(INFO_ATTR, AttrValue::String(serde_json::to_string(dataset.info())?));
    let bytes = b.finish().map_err(|e| h5err(path, e))?;
    write_atomically(path, &bytes)
}

/// The directory holding `main_data.hdf5` and `metadata.json`: `dir/data` when it exists,
/// else `dir` itself.
fn minari_data_dir(dir: &Path) -> PathBuf {
    let d = dir.join("data");
    if d.is_dir() {
        d
    } else {
        dir.to_path_buf()
    }
}

/// The episode index of a group named `episode_{k}`: `None` for another name, an error for
/// `episode_` followed by anything but decimal digits (a name Minari does not write, so a
/// damaged one). Leading zeros are read (`episode_01` is index 1, a duplicate of
/// `episode_1` when both exist).
fn episode_index(name: &str, h5: &Path) -> Result<Option<u64>> {
    let Some(k) = name.strip_prefix("episode_") else { return Ok(None) };
    let digits = !k.is_empty() && k.bytes().all(|b| b.is_ascii_digit());
    match k.parse::<u64>() {
        Ok(v) if digits => Ok(Some(v)),
        _ => Err(OfflineError::corrupt(
            h5,
            format!("group `{name}`: not an episode index (Minari writes `episode_0`, `episode_1`, ...)"),
        )),
    }
}

/// The episode groups in index order, which must be exactly `0..n`.
fn episode_groups(groups: Vec<String>, h5: &Path, report: &mut LoadReport) -> Result<Vec<(u64, String)>> {
    let mut episodes: Vec<(u64, String)> = Vec::new();
    for g in groups {
        match episode_index(&g, h5)? {
            Some(k) => episodes.push((k, g)),
            None => report.ignored_keys.push(format!("{g}/")),
        }
    }
    episodes.sort();
    for (i, (k, name)) in episodes.iter().enumerate() {
        if *k != i as u64 {
            let reason = if i > 0 && episodes[i - 1].0 == *k {
                format!("episode index {k} appears twice (`{}`, `{name}`)", episodes[i - 1].1)
            } else {
                format!("episode indices have a gap: `episode_{i}` is missing (next is `{name}`)")
            };
            return Err(OfflineError::corrupt(h5, reason));
        }
    }
    Ok(episodes)
}

/// A non-negative integer of `metadata.json` (`None` when absent, an error for another value).
fn meta_count(meta: &serde_json::Map<String, serde_json::Value>, key: &str, path: &Path) -> Result<Option<u64>> {
    match meta.get(key) {
        None => Ok(None),
        Some(v) => v
            .as_u64()
            .map(Some)
            .ok_or_else(|| OfflineError::corrupt(path, format!("`{key}` = {v} is not a non-negative integer"))),
    }
}

/// An integer attribute of an episode group (`None` when absent, an error for another type).
fn attr_count(
    attrs: &std::collections::HashMap<String, AttrValue>,
    key: &str,
    h5: &Path,
    group: &str,
) -> Result<Option<u64>> {
    let v = match attrs.get(key) {
        None => return Ok(None),
        Some(AttrValue::I64(v)) => u64::try_from(*v).ok(),
        Some(AttrValue::I32(v)) => u64::try_from(*v).ok(),
        Some(AttrValue::I16(v)) => u64::try_from(*v).ok(),
        Some(AttrValue::I8(v)) => u64::try_from(*v).ok(),
        Some(AttrValue::U64(v)) => Some(*v),
        Some(AttrValue::U32(v)) => Some(u64::from(*v)),
        Some(AttrValue::U16(v)) => Some(u64::from(*v)),
        Some(AttrValue::U8(v)) => Some(u64::from(*v)),
        Some(_) => None,
    };
    v.map(Some)
        .ok_or_else(|| OfflineError::corrupt(h5, format!("attribute `{group}.{key}` is not a non-negative integer")))
}

/// Reads a Minari dataset directory (the dataset's own directory holding `data/`, or `data/`
/// itself); see the module docs. Episode groups are read in the order of their index `k`.
/// Checks: `main_data.hdf5` and `metadata.json` present, per episode every key present
/// ([`OfflineError::MissingKey`] naming `episode_k/key`), `observations` one row longer than
/// the other columns ([`OfflineError::Length`]), finite values, 0/1 flags, equal widths
/// across episodes, none of them 0 ([`OfflineError::Shape`]), and ([`OfflineError::Corrupt`])
/// the episode groups numbered exactly `episode_0 .. episode_{n-1}` (a gap, a duplicate or a
/// malformed `episode_*` name is an error), the metadata's `total_steps` and
/// `total_episodes` non-negative integers equal to the steps and episodes found (either may
/// be absent), and each episode's `id` and `total_steps` attributes, where present, equal to
/// its index and its steps, and `frugal_rl_info` of the metadata equal to the root attribute
/// of the same name when both exist (files written here). An episode that ends without a termination or truncation
/// flag (a collector stopped mid-episode) gets a timeout flag on its last step, counted in
/// the report.
///
/// # Errors
/// As above; [`OfflineError::Unsupported`] for dictionary actions or dictionary
/// observations without [`MinariReadOptions::obs_keys`] (the error lists the keys); a file
/// or column beyond [`MinariReadOptions::budget`] ([`rl_core::RlCoreError::TooLarge`] in
/// [`OfflineError::Core`], before it is read).
pub fn read_minari(dir: impl AsRef<Path>, options: &MinariReadOptions) -> Result<(Dataset, LoadReport)> {
    let dir = dir.as_ref();
    let data = minari_data_dir(dir);
    let h5 = data.join("main_data.hdf5");
    let meta_path = data.join("metadata.json");
    if !h5.exists() {
        return Err(OfflineError::MissingKey { path: path_str(dir), key: "data/main_data.hdf5".into() });
    }
    if !meta_path.exists() {
        return Err(OfflineError::MissingKey { path: path_str(dir), key: "data/metadata.json".into() });
    }
    let mut charge = Charge::new(options.budget);
    let meta_len = std::fs::metadata(&meta_path)?.len();
    charge.keep(&format!("{} (the file)", path_str(&meta_path)), meta_len)?;
    let meta_text = std::fs::read(&meta_path)?;
    let meta: serde_json::Map<String, serde_json::Value> =
        serde_json::from_slice(&meta_text).map_err(|e| OfflineError::corrupt(&meta_path, e))?;
    let total_steps = meta_count(&meta, "total_steps", &meta_path)?;
    let total_episodes = meta_count(&meta, "total_episodes", &meta_path)?;
    let file = open_charged(&h5, &mut charge)?;
    let root = file.root();
    let (root_ds, groups) = members(&root, &h5)?;
    let mut report =
        LoadReport { path: path_str(dir), next_obs_from: "episode observations".into(), ..Default::default() };
    report.ignored_keys.extend(root_ds);
    let episodes = episode_groups(groups, &h5, &mut report)?;
    if let Some(total) = total_episodes {
        if total != episodes.len() as u64 {
            return Err(OfflineError::corrupt(
                &meta_path,
                format!("total_episodes = {total}, but the file holds {} episodes", episodes.len()),
            ));
        }
    }
    let mut cols: Vec<Transitions> = Vec::with_capacity(episodes.len());
    let mut widths: Option<(usize, usize)> = None;
    let mut unflagged = 0;
    for (index, name) in &episodes {
        let g = file.group(name).map_err(|e| h5err(&h5, format!("`{name}`: {e}")))?;
        let (ds, subgroups) = members(&g, &h5)?;
        let attrs = g.attrs().map_err(|e| h5err(&h5, format!("`{name}`: {e}")))?;
        if let Some(id) = attr_count(&attrs, "id", &h5, name)? {
            if id != *index {
                return Err(OfflineError::corrupt(&h5, format!("`{name}` has attribute id = {id}")));
            }
        }
        let steps_attr = attr_count(&attrs, "total_steps", &h5, name)?;
        let key = |k: &str| format!("{name}/{k}");
        let get = |k: &str, charge: &mut Charge| -> Result<Column> {
            need(&ds, k, &h5, &format!("{name}/"))?;
            let d = g.dataset(k).map_err(|e| h5err(&h5, format!("`{}`: {e}", key(k))))?;
            read_column(&d, &h5, &key(k), charge)
        };
        let obs = if ds.iter().any(|d| d == "observations") {
            matrix(get("observations", &mut charge)?, &h5, &key("observations"))?
        } else if subgroups.iter().any(|s| s == "observations") {
            dict_observations(&file, &h5, name, options, &mut charge)?
        } else {
            return Err(OfflineError::MissingKey { path: path_str(&h5), key: key("observations") });
        };
        if subgroups.iter().any(|s| s == "actions") {
            return Err(OfflineError::Unsupported {
                path: path_str(&h5),
                what: key("actions"),
                reason: "dictionary actions; only Box actions are read".into(),
            });
        }
        check_width(&format!("{}: {}", path_str(&h5), key("observations")), obs.ncols())?;
        let actions = matrix(get("actions", &mut charge)?, &h5, &key("actions"))?;
        check_width(&format!("{}: {}", path_str(&h5), key("actions")), actions.ncols())?;
        let rewards = vector(get("rewards", &mut charge)?, &h5, &key("rewards"))?;
        let n = rewards.len();
        let terms = flags(get("terminations", &mut charge)?, &h5, &key("terminations"))?;
        let mut truncs = flags(get("truncations", &mut charge)?, &h5, &key("truncations"))?;
        check_rows(&h5, &key("observations"), n + 1, obs.nrows())?;
        check_rows(&h5, &key("actions"), n, actions.nrows())?;
        check_rows(&h5, &key("terminations"), n, terms.len())?;
        check_rows(&h5, &key("truncations"), n, truncs.len())?;
        if let Some(steps) = steps_attr {
            if steps != n as u64 {
                return Err(OfflineError::corrupt(
                    &h5,
                    format!("`{name}` has attribute total_steps = {steps}, but {n} steps"),
                ));
            }
        }
        report.rows += n;
        if n == 0 {
            continue;
        }
        let w = (obs.ncols(), actions.ncols());
        if let Some(first) = widths {
            if first != w {
                return Err(OfflineError::shape(
                    format!("{}: {name}", path_str(&h5)),
                    format!("observations width {}, actions width {}", first.0, first.1),
                    format!("observations width {}, actions width {}", w.0, w.1),
                ));
            }
        }
        widths = Some(w);
        if terms[n - 1] == 0.0 && truncs[n - 1] == 0.0 {
            truncs[n - 1] = 1.0;
            unflagged += 1;
        }
        let next = obs.slice_axis(ndarray::Axis(0), ndarray::Slice::from(1..)).to_owned();
        let cur = obs.slice_axis(ndarray::Axis(0), ndarray::Slice::from(..n)).to_owned();
        cols.push(Transitions::from_columns(cur, actions, rewards, next, terms, truncs)?);
    }
    report.flags_added += unflagged;
    if let Some(total) = total_steps {
        if total != report.rows as u64 {
            return Err(OfflineError::corrupt(
                &meta_path,
                format!("total_steps = {total}, but the episodes hold {} steps", report.rows),
            ));
        }
    }
    let (o, a) = widths.ok_or_else(|| OfflineError::Empty { what: format!("{}: episodes", path_str(dir)) })?;
    let mut all = Transitions::empty(o, a);
    let (mut ob, mut ac, mut re, mut ne, mut te, mut ti) = (vec![], vec![], vec![], vec![], vec![], vec![]);
    for t in &cols {
        ob.push(t.obs().view());
        ac.push(t.action().view());
        re.push(t.reward().view());
        ne.push(t.next_obs().view());
        te.push(t.terminal().view());
        ti.push(t.timeout().view());
    }
    if !cols.is_empty() {
        let cat2 = |v: &[ndarray::ArrayView2<'_, f32>]| ndarray::concatenate(ndarray::Axis(0), v);
        let cat1 = |v: &[ndarray::ArrayView1<'_, f32>]| ndarray::concatenate(ndarray::Axis(0), v);
        let shape = |e: ndarray::ShapeError| h5err(&h5, e);
        all = Transitions::from_columns(
            cat2(&ob).map_err(shape)?,
            cat2(&ac).map_err(shape)?,
            cat1(&re).map_err(shape)?,
            cat2(&ne).map_err(shape)?,
            cat1(&te).map_err(shape)?,
            cat1(&ti).map_err(shape)?,
        )?;
    }
    let info = minari_info(&meta, &meta_path, &root, &h5)?;
    let ds = Dataset::new(all, info)?;
    report.transitions = ds.len();
    report.episodes = ds.episodes().len();
    Ok((ds, report))
}

fn dict_observations(
    file: &File,
    h5: &Path,
    episode: &str,
    options: &MinariReadOptions,
    charge: &mut Charge,
) -> Result<Array2<f32>> {
    let g = file.group(&format!("{episode}/observations")).map_err(|e| h5err(h5, e))?;
    let (ds, _) = members(&g, h5)?;
    let keys = options.obs_keys.as_ref().ok_or_else(|| OfflineError::Unsupported {
        path: path_str(h5),
        what: format!("{episode}/observations"),
        reason: format!("dictionary observation with keys {ds:?}; set MinariReadOptions::obs_keys to concatenate some"),
    })?;
    let mut parts = Vec::with_capacity(keys.len());
    for k in keys {
        need(&ds, k, h5, &format!("{episode}/observations/"))?;
        let d = g.dataset(k).map_err(|e| h5err(h5, e))?;
        let key = format!("{episode}/observations/{k}");
        parts.push(matrix(read_column(&d, h5, &key, charge)?, h5, &key)?);
    }
    let rows = parts.first().map(|p| p.nrows()).unwrap_or(0);
    for (k, p) in keys.iter().zip(&parts) {
        check_rows(h5, &format!("{episode}/observations/{k}"), rows, p.nrows())?;
    }
    let views: Vec<_> = parts.iter().map(|p| p.view()).collect();
    ndarray::concatenate(ndarray::Axis(1), &views).map_err(|e| h5err(h5, e))
}

/// The description: `frugal_rl_info` of `metadata.json` and of the HDF5 root attributes
/// (files written here have both, and they must agree: the HDF5 copy is covered by the
/// object header's checksum, the JSON copy by nothing), else one of them, else Minari's own
/// fields.
fn minari_info(
    meta: &serde_json::Map<String, serde_json::Value>,
    meta_path: &Path,
    root: &hdf5_pure::Group,
    h5: &Path,
) -> Result<DatasetInfo> {
    let from_meta: Option<DatasetInfo> = match meta.get(INFO_ATTR) {
        None => None,
        Some(serde_json::Value::String(s)) => {
            Some(serde_json::from_str(s).map_err(|e| OfflineError::corrupt(meta_path, format!("`{INFO_ATTR}`: {e}")))?)
        }
        Some(other) => {
            return Err(OfflineError::corrupt(meta_path, format!("`{INFO_ATTR}` is not a string: {other}")));
        }
    };
    let from_attr = info_from_attrs(&root.attrs().map_err(|e| h5err(h5, e))?, h5)?;
    match (from_meta, from_attr) {
        (Some(m), Some(a)) if m != a => {
            return Err(OfflineError::corrupt(
                meta_path,
                format!("`{INFO_ATTR}` differs from the root attribute `{INFO_ATTR}` of {}", path_str(h5)),
            ))
        }
        (Some(i), _) | (None, Some(i)) => return Ok(i),
        (None, None) => {}
    }
    let id = meta.get("dataset_id").and_then(|v| v.as_str()).unwrap_or_default().to_owned();
    let env = meta
        .get("env_spec")
        .and_then(|v| v.as_str())
        .and_then(|s| serde_json::from_str::<serde_json::Value>(&json_without_infinities(s)).ok())
        .and_then(|v| v.get("id").and_then(|i| i.as_str().map(str::to_owned)))
        .unwrap_or_default();
    Ok(DatasetInfo {
        score_env: crate::score::minari_family(&id).unwrap_or_default().to_owned(),
        name: id.clone(),
        env,
        ref_min: meta.get("ref_min_score").and_then(serde_json::Value::as_f64),
        ref_max: meta.get("ref_max_score").and_then(serde_json::Value::as_f64),
        source: format!("Minari dataset {id}"),
        ..Default::default()
    })
}

/// Python's `json.dumps` writes infinite bounds as the bare tokens `Infinity`/`-Infinity`
/// (and `NaN`), which are not JSON; they become `null` here.
fn json_without_infinities(s: &str) -> String {
    s.replace("-Infinity", "null").replace("Infinity", "null").replace("NaN", "null")
}

/// A gymnasium `Box` space as Minari serialises it (a JSON string inside `metadata.json`);
/// infinite bounds as Python writes them.
fn box_space_json(dim: usize, low: Option<&[f64]>, high: Option<&[f64]>) -> String {
    let fmt = |v: f64| -> String {
        if v == f64::INFINITY {
            "Infinity".into()
        } else if v == f64::NEG_INFINITY {
            "-Infinity".into()
        } else {
            format!("{v:?}")
        }
    };
    let list = |b: Option<&[f64]>, default: f64| -> String {
        let v: Vec<String> = (0..dim).map(|i| fmt(b.and_then(|b| b.get(i).copied()).unwrap_or(default))).collect();
        format!("[{}]", v.join(", "))
    };
    format!(
        "{{\"type\": \"Box\", \"dtype\": \"float32\", \"shape\": [{dim}], \"low\": {}, \"high\": {}}}",
        list(low, f64::NEG_INFINITY),
        list(high, f64::INFINITY)
    )
}

fn bounds(info: &DatasetInfo, key: &str) -> Option<Vec<f64>> {
    info.extra.get(key).and_then(|v| serde_json::from_value(v.clone()).ok())
}

/// The Minari version whose layout [`write_minari`] follows (and writes into `metadata.json`).
pub const MINARI_VERSION: &str = "0.5.4";

/// Writes `dataset` as a Minari dataset directory `dir` (`dir/data/main_data.hdf5` and
/// `dir/data/metadata.json`, Minari 0.5.4's HDF5 layout): one group `episode_{k}` per episode
/// of [`Dataset::episodes`] with `observations [n + 1, O]` (the episode's observations and the
/// last `next_obs`), `actions`, `rewards` (`float64`, as Minari stores them), `terminations`,
/// `truncations` (booleans), attributes `id` and `total_steps`. The metadata names the
/// dataset (`dataset_id` = `info.name`), its size, `Box` spaces (bounds from
/// `info.extra["observation_low"/"observation_high"/"action_low"/"action_high"]`, infinite
/// when absent), `ref_min_score`/`ref_max_score` when set, and the full [`DatasetInfo`]
/// under `frugal_rl_info` (also a root attribute of `main_data.hdf5`, which
/// [`read_minari`] compares with it). `minari.MinariDataset(dir + "/data")` reads it.
///
/// # Errors
/// [`OfflineError::NotEpisodic`] when transitions do not chain inside an episode (Minari
/// stores one observation array per episode); [`OfflineError::InvalidParameter`] for an empty
/// `info.name`; I/O failures.
pub fn write_minari(dataset: &Dataset, dir: impl AsRef<Path>) -> Result<()> {
    let dir = dir.as_ref();
    dataset.check_episodic()?;
    let info = dataset.info();
    if info.name.is_empty() {
        return Err(OfflineError::invalid("info.name", "\"\"", "Minari needs a dataset_id"));
    }
    let t = dataset.transitions();
    let mut b = FileBuilder::new();
    let episodes = dataset.episodes();
    for (k, e) in episodes.iter().enumerate() {
        let n = e.len();
        let mut g = b.create_group(&format!("episode_{k}"));
        g.set_attr("id", AttrValue::I64(k as i64));
        g.set_attr("total_steps", AttrValue::I64(n as i64));
        let mut obs: Vec<f32> = Vec::with_capacity((n + 1) * t.obs_dim());
        for i in e.clone() {
            obs.extend(t.obs().row(i).iter());
        }
        obs.extend(t.next_obs().row(e.end - 1).iter());
        g.create_dataset("observations").with_f32_data(&obs).with_shape(&[n as u64 + 1, t.obs_dim() as u64]);
        let act: Vec<f32> = e.clone().flat_map(|i| t.action().row(i).to_vec()).collect();
        g.create_dataset("actions").with_f32_data(&act).with_shape(&[n as u64, t.act_dim() as u64]);
        let rew: Vec<f64> = e.clone().map(|i| f64::from(t.reward()[i])).collect();
        g.create_dataset("rewards").with_f64_data(&rew).with_shape(&[n as u64]);
        let term: Vec<u8> = e.clone().map(|i| u8::from(t.terminal()[i] == 1.0)).collect();
        let trunc: Vec<u8> = e.clone().map(|i| u8::from(t.timeout()[i] == 1.0)).collect();
        g.create_dataset("terminations").with_enum_u8_data(bool_type()?, &term).with_shape(&[n as u64]);
        g.create_dataset("truncations").with_enum_u8_data(bool_type()?, &trunc).with_shape(&[n as u64]);
        b.add_group(g.finish());
    }
    b.set_attr(INFO_ATTR, AttrValue::String(serde_json::to_string(info)?));
    let data = dir.join("data");
    std::fs::create_dir_all(&data)?;
    let bytes = b.finish().map_err(|e| h5err(&data, e))?;
    write_atomically(&data.join("main_data.hdf5"), &bytes)?;
    let mut meta = serde_json::Map::new();
    meta.insert("dataset_id".into(), info.name.clone().into());
    meta.insert("minari_version".into(), MINARI_VERSION.into());
    meta.insert("total_episodes".into(), episodes.len().into());
    meta.insert("total_steps".into(), t.len().into());
    meta.insert("data_format".into(), "hdf5".into());
    meta.insert("jpeg_encoding".into(), false.into());
    let ol = bounds(info, "observation_low");
    let oh = bounds(info, "observation_high");
    let al = bounds(info, "action_low");
    let ah = bounds(info, "action_high");
    meta.insert("observation_space".into(), box_space_json(t.obs_dim(), ol.as_deref(), oh.as_deref()).into());
    meta.insert("action_space".into(), box_space_json(t.act_dim(), al.as_deref(), ah.as_deref()).into());
    if let (Some(lo), Some(hi)) = (info.ref_min, info.ref_max) {
        meta.insert("ref_min_score".into(), lo.into());
        meta.insert("ref_max_score".into(), hi.into());
    }
    meta.insert("algorithm_name".into(), info.source.clone().into());
    meta.insert(INFO_ATTR.into(), serde_json::to_string(info)?.into());
    let text = serde_json::to_string_pretty(&serde_json::Value::Object(meta))?;
    write_atomically(&data.join("metadata.json"), text.as_bytes())
}
