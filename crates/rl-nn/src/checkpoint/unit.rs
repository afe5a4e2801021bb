//! Checkpoint units: several parts (checkpoint directories or files) that must resume together,
//! committed as one.
//!
//! A unit directory `dir` holds
//!
//! - `manifest.json`: `{"manifest": {"layout", "kind", "format_version", "data", "parts",
//!   "files"}, "sha256": ..}`, where `data` names the data directory, `parts` maps every part to
//!   the step count its writer recorded, `files` maps every file under the data directory
//!   (`part/relative/path`) to its size and SHA-256, and `sha256` is the hash of the manifest's
//!   own compact JSON;
//! - `data-<unique>/<part>/...`: the parts.
//!
//! [`UnitWriter`] writes every part into a fresh data directory, hashes every file (syncing it
//! to disk), and then commits by writing the manifest to a temporary file renamed over
//! `manifest.json`: one atomic rename. Until that rename the previous manifest and its data
//! directory are untouched; after it, the previous data directory and anything a crashed
//! writer left behind are removed. A crash at any point therefore leaves either the old unit
//! or the new one, never a mix; a data directory no manifest points to is never read.
//!
//! [`open_unit`] verifies the manifest's own hash, the layout, kind and format version, and
//! every file of the data directory (no file missing, none extra, each size and hash as
//! recorded) before it returns; [`Unit::check_step`] then compares each part's own counter,
//! read by its loader, with the step the manifest recorded for it. Every disagreement is an
//! [`RlNnError::CheckpointPart`] naming the part.
//!
//! ```
//! use rl_nn::checkpoint::{self, UnitWriter};
//! let root = tempfile::tempdir()?;
//! let dir = root.path().join("run");
//! let mut unit = UnitWriter::new(&dir, "my_run", 1)?;
//! checkpoint::save_dir::<_, &str>(unit.part("learner", 200)?, "learner", 1, &200u64, &[])?;
//! checkpoint::save_dir::<_, &str>(unit.part("loop", 200)?, "loop", 1, &200u64, &[])?;
//! unit.commit()?;
//!
//! let unit = checkpoint::open_unit(&dir, "my_run", 1)?;
//! let learner = checkpoint::load_dir::<u64>(unit.part("learner")?, "learner", 1)?;
//! unit.check_step("learner", learner.state)?;
//! assert!(unit.check_step("loop", 100).is_err());
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::{path_str, sha256_bytes, sha256_file, unique_suffix};
use crate::error::{Result, RlNnError};

/// The manifest file of a checkpoint unit.
pub const MANIFEST_FILE: &str = "manifest.json";
/// The version of the unit layout (`manifest.json` + one data directory) this code writes and
/// reads.
pub const UNIT_LAYOUT_VERSION: u32 = 1;

const DATA_PREFIX: &str = "data-";
const MANIFEST_TMP_PREFIX: &str = ".manifest.json.tmp-";

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct FileSum {
    bytes: u64,
    sha256: String,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Manifest {
    layout: u32,
    kind: String,
    format_version: u32,
    data: String,
    parts: BTreeMap<String, u64>,
    files: BTreeMap<String, FileSum>,
}

#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct ManifestFile {
    manifest: serde_json::Value,
    sha256: String,
}

/// Whether `name` is something a unit directory may hold: the manifest, data directories, and
/// manifest temporaries left by a crash.
fn ours(name: &str) -> bool {
    name == MANIFEST_FILE || name.starts_with(DATA_PREFIX) || name.starts_with(MANIFEST_TMP_PREFIX)
}

/// A part name: one path component of ASCII letters, digits, `_`, `-`, `.`, not starting with
/// `.`.
fn check_part_name(name: &str) -> Result<()> {
    let ok = !name.is_empty()
        && !name.starts_with('.')
        && name.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'));
    if ok {
        Ok(())
    } else {
        Err(RlNnError::InvalidName {
            name: name.into(),
            reason: "a unit's part name is one path component of ASCII letters, digits, `_`, `-`, `.`, not starting with `.`".into(),
        })
    }
}

fn check_data_name(name: &str) -> bool {
    name.len() > DATA_PREFIX.len()
        && name.starts_with(DATA_PREFIX)
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
}

/// Syncs a directory's entries to disk where the platform allows it (best effort).
fn sync_dir(dir: &Path) {
    #[cfg(unix)]
    if let Ok(f) = std::fs::File::open(dir) {
        let _ = f.sync_all();
    }
    #[cfg(not(unix))]
    let _ = dir;
}

/// Every regular file under `root`, by `/`-joined relative path, with its size and hash.
/// `sync` also flushes each file to disk (best effort). Symbolic links and other special
/// files are refused.
fn hash_tree(root: &Path, sync: bool) -> Result<BTreeMap<String, FileSum>> {
    fn walk(root: &Path, dir: &Path, rel: &str, sync: bool, out: &mut BTreeMap<String, FileSum>) -> Result<()> {
        let mut entries = std::fs::read_dir(dir)?.collect::<std::io::Result<Vec<_>>>()?;
        entries.sort_by_key(std::fs::DirEntry::file_name);
        for e in entries {
            let name = e.file_name().into_string().map_err(|n| RlNnError::InvalidName {
                name: n.to_string_lossy().into_owned(),
                reason: format!("a file name in checkpoint {} is not UTF-8", path_str(root)),
            })?;
            let key = if rel.is_empty() { name.clone() } else { format!("{rel}/{name}") };
            let meta = std::fs::symlink_metadata(e.path())?;
            if meta.is_dir() {
                walk(root, &e.path(), &key, sync, out)?;
                if sync {
                    sync_dir(&e.path());
                }
            } else if meta.is_file() {
                if sync {
                    if let Ok(f) = std::fs::File::open(e.path()) {
                        let _ = f.sync_all();
                    }
                }
                out.insert(key, FileSum { bytes: meta.len(), sha256: sha256_file(e.path())? });
            } else {
                return Err(RlNnError::InvalidName {
                    name: key,
                    reason: format!("checkpoint {} holds a link or special file", path_str(root)),
                });
            }
        }
        Ok(())
    }
    let mut out = BTreeMap::new();
    walk(root, root, "", sync, &mut out)?;
    Ok(out)
}

/// The names of the entries directly under `dir`, sorted.
fn entries(dir: &Path) -> Result<Vec<String>> {
    let mut names = Vec::new();
    for e in std::fs::read_dir(dir)? {
        names.push(e?.file_name().to_string_lossy().into_owned());
    }
    names.sort();
    Ok(names)
}

/// Writes a checkpoint unit: register each part with [`UnitWriter::part`] (which returns the
/// path to write it to), write it there, then [`UnitWriter::commit`]. Dropping the writer
/// without committing removes what it wrote and leaves the previous unit as it was.
///
/// Two writers must not write the same unit at the same time (the second commit removes the
/// first one's data directory).
#[derive(Debug)]
pub struct UnitWriter {
    dir: PathBuf,
    kind: String,
    format_version: u32,
    data: String,
    parts: BTreeMap<String, u64>,
    committed: bool,
}

impl UnitWriter {
    /// Starts writing the unit `dir` for component `kind`, format `format_version`: creates
    /// `dir` (when absent) and a fresh data directory inside it. An existing unit in `dir`
    /// stays readable until [`commit`](Self::commit).
    ///
    /// # Errors
    /// [`RlNnError::InvalidName`] when `dir` exists and is not a unit directory (a file, or a
    /// directory holding anything but `manifest.json` and data directories: e.g. a checkpoint
    /// of the layout before units, which is refused rather than deleted); I/O failures.
    pub fn new(dir: impl AsRef<Path>, kind: &str, format_version: u32) -> Result<Self> {
        let dir = dir.as_ref().to_path_buf();
        match std::fs::symlink_metadata(&dir) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => std::fs::create_dir_all(&dir)?,
            Err(e) => return Err(e.into()),
            Ok(m) if !m.is_dir() => {
                return Err(RlNnError::InvalidName {
                    name: path_str(&dir),
                    reason: "exists and is not a checkpoint unit directory; refusing to replace it".into(),
                })
            }
            Ok(_) => {
                if let Some(other) = entries(&dir)?.into_iter().find(|n| !ours(n)) {
                    return Err(RlNnError::InvalidName {
                        name: path_str(&dir),
                        reason: format!(
                            "holds `{other}`, not only {MANIFEST_FILE} and data directories (not a checkpoint unit, \
                             or one of the layout before units); refusing to replace it"
                        ),
                    });
                }
            }
        }
        let data = format!("{DATA_PREFIX}{}", unique_suffix());
        std::fs::create_dir(dir.join(&data))?;
        Ok(Self { dir, kind: kind.into(), format_version, data, parts: BTreeMap::new(), committed: false })
    }

    /// Registers the part `name` at step `step` (the part's own counter, which its loader
    /// passes to [`Unit::check_step`]) and returns the path to write it to (it does not exist
    /// yet: write a checkpoint directory or a file there).
    ///
    /// # Errors
    /// [`RlNnError::InvalidName`] for a name that is not one plain path component, or one
    /// registered before.
    pub fn part(&mut self, name: &str, step: u64) -> Result<PathBuf> {
        check_part_name(name)?;
        if self.parts.insert(name.into(), step).is_some() {
            return Err(RlNnError::InvalidName { name: name.into(), reason: "part registered twice".into() });
        }
        Ok(self.dir.join(&self.data).join(name))
    }

    /// The unit directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Commits the unit: hashes every file of every part (syncing each to disk), writes the
    /// manifest to a temporary file and renames it over `manifest.json`, then removes the
    /// previous data directory and any leftovers of crashed writers.
    ///
    /// # Errors
    /// [`RlNnError::CheckpointPart`] for a registered part that was not written or an entry
    /// that is no registered part, [`RlNnError::Empty`] for a unit without parts; I/O
    /// failures (the previous unit is then still in place).
    pub fn commit(mut self) -> Result<()> {
        let data_dir = self.dir.join(&self.data);
        let shown = path_str(&self.dir);
        if self.parts.is_empty() {
            return Err(RlNnError::Empty { what: format!("parts of checkpoint unit {shown}") });
        }
        let on_disk = entries(&data_dir)?;
        for name in self.parts.keys() {
            if !on_disk.contains(name) {
                return Err(RlNnError::CheckpointPart {
                    path: shown,
                    part: name.clone(),
                    reason: "registered, but nothing was written".into(),
                });
            }
        }
        if let Some(extra) = on_disk.iter().find(|n| !self.parts.contains_key(n.as_str())) {
            return Err(RlNnError::CheckpointPart {
                path: shown,
                part: extra.clone(),
                reason: "written, but not registered with `UnitWriter::part`".into(),
            });
        }
        let files = hash_tree(&data_dir, true)?;
        sync_dir(&data_dir);
        let manifest = Manifest {
            layout: UNIT_LAYOUT_VERSION,
            kind: self.kind.clone(),
            format_version: self.format_version,
            data: self.data.clone(),
            parts: self.parts.clone(),
            files,
        };
        let value = serde_json::to_value(&manifest)?;
        let sha256 = sha256_bytes(&serde_json::to_vec(&value)?);
        let json = serde_json::to_vec_pretty(&ManifestFile { manifest: value, sha256 })?;
        let tmp = self.dir.join(format!("{MANIFEST_TMP_PREFIX}{}", unique_suffix()));
        let write = || -> Result<()> {
            use std::io::Write;
            let mut f = std::fs::File::create(&tmp)?;
            f.write_all(&json)?;
            f.sync_all()?;
            std::fs::rename(&tmp, self.dir.join(MANIFEST_FILE))?;
            Ok(())
        };
        if let Err(e) = write() {
            let _ = std::fs::remove_file(&tmp);
            return Err(e);
        }
        self.committed = true;
        sync_dir(&self.dir);
        // Committed: what the manifest does not name is garbage now.
        for name in entries(&self.dir).unwrap_or_default() {
            if name != MANIFEST_FILE && name != self.data && ours(&name) {
                let p = self.dir.join(&name);
                let _ = if p.is_dir() { std::fs::remove_dir_all(&p) } else { std::fs::remove_file(&p) };
            }
        }
        Ok(())
    }
}

impl Drop for UnitWriter {
    fn drop(&mut self) {
        if !self.committed {
            let _ = std::fs::remove_dir_all(self.dir.join(&self.data));
        }
    }
}

/// A checkpoint unit verified by [`open_unit`]: every file as the manifest recorded it.
#[derive(Debug, Clone)]
pub struct Unit {
    path: String,
    data: PathBuf,
    parts: BTreeMap<String, u64>,
}

impl Unit {
    /// The path of part `name` (a checkpoint directory or file, for its loader).
    ///
    /// # Errors
    /// [`RlNnError::CheckpointPart`] when the manifest has no such part.
    pub fn part(&self, name: &str) -> Result<PathBuf> {
        self.step(name)?;
        Ok(self.data.join(name))
    }

    /// The step the writer recorded for part `name`.
    ///
    /// # Errors
    /// [`RlNnError::CheckpointPart`] when the manifest has no such part.
    pub fn step(&self, name: &str) -> Result<u64> {
        self.parts.get(name).copied().ok_or_else(|| RlNnError::CheckpointPart {
            path: self.path.clone(),
            part: name.into(),
            reason: format!("the manifest has no such part (it has {:?})", self.parts.keys().collect::<Vec<_>>()),
        })
    }

    /// Checks that part `name`, as its loader read it, is at step `got`: the step the writer
    /// recorded for it when the unit was committed.
    ///
    /// # Errors
    /// [`RlNnError::CheckpointPart`] naming the part, both steps, or a part the manifest lacks.
    pub fn check_step(&self, name: &str, got: u64) -> Result<()> {
        let want = self.step(name)?;
        if want == got {
            Ok(())
        } else {
            Err(RlNnError::CheckpointPart {
                path: self.path.clone(),
                part: name.into(),
                reason: format!("holds step {got}, the manifest records step {want} for it"),
            })
        }
    }

    /// Every part with its recorded step.
    pub fn parts(&self) -> &BTreeMap<String, u64> {
        &self.parts
    }

    /// The unit directory, for error messages.
    pub fn path(&self) -> &str {
        &self.path
    }
}

/// Opens the checkpoint unit `dir` written by [`UnitWriter`] for component `kind`, format
/// `format_version`, and verifies it completely: the manifest's own hash, the layout, kind and
/// format version, and every file under the data directory (none missing, none extra, each
/// size and SHA-256 as recorded, every part present). Data directories the manifest does not
/// name (left by a crashed writer) are ignored. Nothing is read into any object: the parts'
/// loaders read [`Unit::part`] next, then call [`Unit::check_step`].
///
/// # Errors
/// [`RlNnError::MissingFile`] (no directory, or no manifest yet: a first save that never
/// committed), [`RlNnError::FormatMismatch`] (another kind, format or layout version, or a
/// directory of the layout before units: parts but no manifest), [`RlNnError::CorruptCheckpoint`]
/// (a manifest that does not parse or whose hash differs, a missing data directory),
/// [`RlNnError::CheckpointPart`] naming the part whose files differ from the manifest.
pub fn open_unit(dir: impl AsRef<Path>, kind: &str, format_version: u32) -> Result<Unit> {
    let dir = dir.as_ref();
    let shown = path_str(dir);
    if !dir.is_dir() {
        return Err(RlNnError::MissingFile { path: shown });
    }
    let mpath = dir.join(MANIFEST_FILE);
    let mshown = path_str(&mpath);
    let bytes = match std::fs::read(&mpath) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return match entries(dir)?.into_iter().find(|n| !ours(n)) {
                Some(other) => Err(RlNnError::FormatMismatch {
                    path: mshown,
                    what: "layout".into(),
                    expected: format!("a checkpoint unit ({MANIFEST_FILE} and one data directory)"),
                    got: format!("no {MANIFEST_FILE} but `{other}` (a checkpoint of the layout before units?)"),
                }),
                None => Err(RlNnError::MissingFile { path: mshown }),
            };
        }
        Err(e) => return Err(RlNnError::CorruptCheckpoint { path: mshown, reason: e.to_string() }),
    };
    let corrupt = |reason: String| RlNnError::CorruptCheckpoint { path: mshown.clone(), reason };
    let file: ManifestFile = serde_json::from_slice(&bytes).map_err(|e| corrupt(e.to_string()))?;
    let sum = sha256_bytes(&serde_json::to_vec(&file.manifest)?);
    if sum != file.sha256 {
        return Err(corrupt(format!("the manifest hashes to sha256 {sum}, the file records {}", file.sha256)));
    }
    let m: Manifest = serde_json::from_value(file.manifest).map_err(|e| corrupt(e.to_string()))?;
    let mismatch = |what: &str, expected: String, got: String| RlNnError::FormatMismatch {
        path: mshown.clone(),
        what: what.into(),
        expected,
        got,
    };
    if m.layout != UNIT_LAYOUT_VERSION {
        return Err(mismatch("layout", UNIT_LAYOUT_VERSION.to_string(), m.layout.to_string()));
    }
    if m.kind != kind {
        return Err(mismatch("kind", kind.into(), m.kind));
    }
    if m.format_version != format_version {
        return Err(mismatch("format_version", format_version.to_string(), m.format_version.to_string()));
    }
    if !check_data_name(&m.data) {
        return Err(corrupt(format!("`{}` is not a data directory name", m.data)));
    }
    let data = dir.join(&m.data);
    if !data.is_dir() {
        return Err(corrupt(format!("its data directory `{}` is missing", m.data)));
    }
    let part_of = |key: &str| key.split('/').next().unwrap_or(key).to_owned();
    let bad = |part: String, reason: String| RlNnError::CheckpointPart { path: shown.clone(), part, reason };
    for name in entries(&data)? {
        if !m.parts.contains_key(&name) {
            return Err(bad(name, "is in the data directory, but the manifest has no such part".into()));
        }
    }
    for name in m.parts.keys() {
        check_part_name(name)?;
        if !data.join(name).exists() {
            return Err(bad(name.clone(), "is missing from the data directory".into()));
        }
    }
    let found = hash_tree(&data, false)?;
    for (key, sum) in &found {
        match m.files.get(key) {
            None => return Err(bad(part_of(key), format!("file `{key}` is not in the manifest"))),
            Some(want) if want.bytes != sum.bytes => {
                return Err(bad(
                    part_of(key),
                    format!("file `{key}` has {} bytes, the manifest records {}", sum.bytes, want.bytes),
                ))
            }
            Some(want) if want.sha256 != sum.sha256 => {
                return Err(bad(
                    part_of(key),
                    format!("file `{key}` hashes to sha256 {}, the manifest records {}", sum.sha256, want.sha256),
                ))
            }
            Some(_) => {}
        }
    }
    if let Some(key) = m.files.keys().find(|k| !found.contains_key(*k)) {
        return Err(bad(part_of(key), format!("file `{key}` is missing")));
    }
    Ok(Unit { path: shown, data, parts: m.parts })
}
