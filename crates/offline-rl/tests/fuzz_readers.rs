//! Fuzz-style acceptance test of the dataset readers (issue 22): small files of each format
//! are damaged at every offset, one byte at a time (the byte xor 0xFF, and the byte + 1), and
//! truncated at every length, and each damaged file is read.
//!
//! The rule every damaged load must follow:
//! - no panic (every read runs under `catch_unwind`) and no abort (an abort would end this
//!   test process, so the test would fail);
//! - no silent change of a loaded value: the load fails with an error, or it returns exactly
//!   the original dataset (a hash of every column's bits, the shapes and the description),
//!   or, for HDF5 only (D4RL, Minari's `main_data.hdf5`), the damaged byte lies inside a
//!   dataset's raw data (a contiguous extent or a stored chunk of the original file): HDF5
//!   has checksums over its metadata (the superblock v2/v3 and version-2 object headers the
//!   files written here use, verified by hdf5-pure's `checksum` feature) but none over raw
//!   data, so a changed data byte that still decodes to finite values cannot be detected.
//!   A truncated HDF5 file must fail or load the original values. Minari's `metadata.json`
//!   has no checksum, but the reader checks what it takes from it (the counts against the
//!   episodes, the description against its copy in the HDF5 root attributes), so there no
//!   change is allowed at all.
//! - our safetensors format is stricter: every flip and every truncation must fail (its
//!   SHA-256 content hash covers the header and the data).
//!
//! The files written by h5py (the committed fixtures, superblock v0 without checksums) are
//! damaged at a sample of offsets and held only to "no panic, no abort": their metadata has no
//! checksum, so a changed address can silently move a column onto other bytes; the test
//! prints how often a value changed outside raw data.

use std::collections::hash_map::DefaultHasher;
use std::hash::{Hash, Hasher};
use std::ops::Range;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};

use offline_rl::data::{self, D4rlReadOptions, D4rlWriteOptions, MinariReadOptions, NativeReadOptions};
use offline_rl::{Dataset, DatasetInfo};

/// Two chained episodes of 3 steps (obs 3, action 2), the first ending in a timeout, the
/// second in a terminal; values that are not round.
fn small() -> Dataset {
    let mut t = rl_core::Transitions::empty(3, 2);
    let mut o = ndarray::array![0.1f32, -0.2, 0.3];
    for e in 0..2 {
        for k in 0..3 {
            let x = (e * 3 + k) as f32;
            let next = ndarray::array![o[0] + 0.37, (x * 0.013).sin(), o[2] * 0.9 + 1e-3];
            let (term, tout) = (e == 1 && k == 2, e == 0 && k == 2);
            t.push(o.view(), ndarray::array![(x * 0.1).cos(), -0.5].view(), x.sqrt() * 0.77, next.view(), term, tout)
                .unwrap();
            o = next;
        }
        o = ndarray::array![e as f32, 1.0 / 3.0, -2.5];
    }
    Dataset::new(t, DatasetInfo { name: "test/fuzz-v0".into(), source: "fuzz".into(), ..Default::default() }).unwrap()
}

/// A hash of every loaded value: shapes, the bits of every column, the description.
fn fingerprint(d: &Dataset) -> u64 {
    let mut h = DefaultHasher::new();
    let t = d.transitions();
    (t.len(), t.obs_dim(), t.act_dim()).hash(&mut h);
    for col in [t.obs(), t.action(), t.next_obs()] {
        col.iter().for_each(|v| v.to_bits().hash(&mut h));
    }
    for col in [t.reward(), t.terminal(), t.timeout()] {
        col.iter().for_each(|v| v.to_bits().hash(&mut h));
    }
    serde_json::to_string(d.info()).unwrap().hash(&mut h);
    h.finish()
}

/// How one damaged file read.
#[derive(Debug, Default)]
struct Tally {
    reads: usize,
    errors: usize,
    same: usize,
    changed_in_raw: usize,
    /// Loads that changed a value where the rule does not allow it.
    silent: Vec<String>,
    panics: Vec<String>,
}

impl Tally {
    fn check(&self, what: &str) {
        eprintln!(
            "{what}: {} reads, {} errors, {} same values, {} changed (damage in raw data)",
            self.reads, self.errors, self.same, self.changed_in_raw
        );
        assert!(self.panics.is_empty(), "{what}: {} panics, first: {:?}", self.panics.len(), &self.panics[..1]);
        assert!(self.silent.is_empty(), "{what}: {} silent changes, first: {:?}", self.silent.len(), &self.silent[..1]);
    }
}

/// The kinds of damage.
#[derive(Debug, Clone, Copy)]
enum Damage {
    Xor(usize),
    Inc(usize),
    Truncate(usize),
}

impl Damage {
    fn apply(self, bytes: &[u8]) -> Vec<u8> {
        match self {
            Damage::Xor(i) => {
                let mut b = bytes.to_vec();
                b[i] ^= 0xFF;
                b
            }
            Damage::Inc(i) => {
                let mut b = bytes.to_vec();
                b[i] = b[i].wrapping_add(1);
                b
            }
            Damage::Truncate(n) => bytes[..n].to_vec(),
        }
    }
}

/// Every flip at `flips` and every truncation shorter than the file.
fn damages(len: usize, flips: impl Iterator<Item = usize>) -> Vec<Damage> {
    let mut out: Vec<Damage> = flips.flat_map(|i| [Damage::Xor(i), Damage::Inc(i)]).collect();
    out.extend((0..len).map(Damage::Truncate));
    out
}

/// Writes each damaged version of `bytes` to `target`, reads it with `read` and records the
/// outcome; `may_change(damage)` says whether the rule allows a changed value.
fn fuzz(
    bytes: &[u8],
    target: &Path,
    list: &[Damage],
    original: u64,
    read: &dyn Fn() -> offline_rl::Result<Dataset>,
    may_change: &dyn Fn(Damage) -> bool,
) -> Tally {
    let mut tally = Tally::default();
    for &d in list {
        std::fs::write(target, d.apply(bytes)).unwrap();
        tally.reads += 1;
        match catch_unwind(AssertUnwindSafe(read)) {
            Err(p) => {
                let msg = p
                    .downcast_ref::<String>()
                    .cloned()
                    .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
                    .unwrap_or_default();
                tally.panics.push(format!("{d:?}: {msg}"));
            }
            Ok(Err(_)) => tally.errors += 1,
            Ok(Ok(ds)) if fingerprint(&ds) == original => {
                tally.same += 1;
                if std::env::var_os("FUZZ_DEBUG").is_some() {
                    eprintln!("same: {d:?}");
                }
            }
            Ok(Ok(_)) if may_change(d) => tally.changed_in_raw += 1,
            Ok(Ok(_)) => tally.silent.push(format!("{d:?}")),
        }
    }
    std::fs::write(target, bytes).unwrap();
    tally
}

/// The byte ranges of every dataset's raw data in the HDF5 file `path`: contiguous extents
/// and stored chunks (compact data lives in the object header, which is metadata).
fn raw_extents(path: &Path) -> Vec<Range<usize>> {
    fn walk(g: &hdf5_pure::Group, out: &mut Vec<Range<usize>>) {
        for name in g.datasets().unwrap() {
            let ds = g.dataset(&name).unwrap();
            match ds.layout().unwrap() {
                hdf5_pure::Layout::Contiguous { address: Some(a), size } => out.push(a as usize..(a + size) as usize),
                hdf5_pure::Layout::Chunked { .. } => {
                    for c in ds.chunks().unwrap() {
                        out.push(c.address as usize..(c.address + c.storage_size) as usize);
                    }
                }
                _ => {}
            }
        }
        for name in g.groups().unwrap() {
            walk(&g.group(&name).unwrap(), out);
        }
    }
    let f = hdf5_pure::File::open(path).unwrap();
    let mut out = Vec::new();
    walk(&f.root(), &mut out);
    assert!(!out.is_empty());
    out
}

fn in_raw(extents: &[Range<usize>]) -> impl Fn(Damage) -> bool + '_ {
    move |d| match d {
        Damage::Xor(i) | Damage::Inc(i) => extents.iter().any(|r| r.contains(&i)),
        Damage::Truncate(_) => false,
    }
}

/// `d4rl_case` flips every byte outside raw data and every `raw_stride`-th byte inside it.
fn d4rl_case(opts: &D4rlWriteOptions, name: &str, raw_stride: usize) {
    let d = small();
    let original = fingerprint(&d);
    let tmp = scratch();
    let p = tmp.path().join(format!("{name}.hdf5"));
    data::write_d4rl(&d, &p, opts).unwrap();
    let bytes = std::fs::read(&p).unwrap();
    assert_eq!(fingerprint(&data::read_d4rl(&p, &D4rlReadOptions::default()).unwrap().0), original);
    let extents = raw_extents(&p);
    let read = || data::read_d4rl(&p, &D4rlReadOptions::default()).map(|r| r.0);
    let raw = in_raw(&extents);
    let flips = (0..bytes.len()).filter(|&i| i % raw_stride == 0 || !raw(Damage::Xor(i)));
    let tally = fuzz(&bytes, &p, &damages(bytes.len(), flips), original, &read, &raw);
    tally.check(&format!("D4RL {name} ({} bytes, raw data sampled every {raw_stride})", bytes.len()));
    assert!(tally.errors > 0);
}

#[test]
fn d4rl_uncompressed_every_offset() {
    d4rl_case(&D4rlWriteOptions { deflate: None, chunk_rows: 1 }, "uncompressed", 1);
}

#[test]
fn d4rl_deflate_every_offset() {
    // decompression in a debug build is slow: the compressed chunks are sampled
    d4rl_case(&D4rlWriteOptions::default(), "deflate", 5);
}

#[test]
fn minari_every_offset() {
    let d = small();
    let original = fingerprint(&d);
    let tmp = scratch();
    let dir = tmp.path().join("m");
    data::write_minari(&d, &dir).unwrap();
    let read = || data::read_minari(&dir, &MinariReadOptions::default()).map(|r| r.0);
    assert_eq!(fingerprint(&read().unwrap()), original);
    let h5 = dir.join("data/main_data.hdf5");
    let bytes = std::fs::read(&h5).unwrap();
    let extents = raw_extents(&h5);
    let tally = fuzz(&bytes, &h5, &damages(bytes.len(), 0..bytes.len()), original, &read, &in_raw(&extents));
    tally.check(&format!("Minari main_data.hdf5 ({} bytes)", bytes.len()));
    // metadata.json has no checksum, but what the reader takes from it is checked: the counts
    // against the episodes, the description against its copy in the HDF5 root attributes (under
    // the object header's checksum); every other field is not read. So no change is allowed.
    let meta = dir.join("data/metadata.json");
    let mbytes = std::fs::read(&meta).unwrap();
    let tally = fuzz(&mbytes, &meta, &damages(mbytes.len(), 0..mbytes.len()), original, &read, &|_| false);
    tally.check(&format!("Minari metadata.json ({} bytes)", mbytes.len()));
}

#[test]
fn native_every_offset_is_detected() {
    let d = small();
    let original = fingerprint(&d);
    let tmp = scratch();
    let p = tmp.path().join("d.safetensors");
    data::write_native(&d, &p).unwrap();
    let bytes = std::fs::read(&p).unwrap();
    let read = || data::read_native(&p, &NativeReadOptions::default()).map(|r| r.0);
    assert_eq!(fingerprint(&read().unwrap()), original);
    let tally = fuzz(&bytes, &p, &damages(bytes.len(), 0..bytes.len()), original, &read, &|_| false);
    tally.check(&format!("native safetensors ({} bytes)", bytes.len()));
    assert_eq!(tally.errors, tally.reads, "every flip and truncation is an error: {tally:?}");
}

/// A temporary directory, in memory where the system has `/dev/shm` (every damaged file is
/// written once).
fn scratch() -> tempfile::TempDir {
    tempfile::tempdir_in("/dev/shm").or_else(|_| tempfile::tempdir()).unwrap()
}

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures").join(name)
}

/// h5py's files (no checksums): no panic, no abort at a sample of offsets (every offset of
/// the first 512 bytes, which hold the superblock and the root group, then every 41st, so
/// that every object header and heap is hit; truncations every 97th length).
#[test]
fn h5py_fixtures_never_panic() {
    let tmp = scratch();
    let sample = |len: usize| -> Vec<Damage> {
        let mut out: Vec<Damage> =
            (0..len).filter(|i| *i < 512 || i % 41 == 0).flat_map(|i| [Damage::Xor(i), Damage::Inc(i)]).collect();
        out.extend((0..len).step_by(97).map(Damage::Truncate));
        out
    };
    let p = tmp.path().join("d4rl_small.hdf5");
    let bytes = std::fs::read(fixture("d4rl_small.hdf5")).unwrap();
    std::fs::write(&p, &bytes).unwrap();
    let read = || data::read_d4rl(&p, &D4rlReadOptions::default()).map(|r| r.0);
    let original = fingerprint(&read().unwrap());
    let extents = raw_extents(&p);
    let tally = fuzz(&bytes, &p, &sample(bytes.len()), original, &read, &in_raw(&extents));
    eprintln!("h5py D4RL fixture: {} silent changes outside raw data (no metadata checksums)", tally.silent.len());
    assert!(tally.panics.is_empty(), "{:?}", &tally.panics[..1]);

    let dir = tmp.path().join("m");
    std::fs::create_dir_all(dir.join("data")).unwrap();
    for f in ["main_data.hdf5", "metadata.json"] {
        std::fs::copy(fixture("minari_small/data").join(f), dir.join("data").join(f)).unwrap();
    }
    let h5 = dir.join("data/main_data.hdf5");
    let bytes = std::fs::read(&h5).unwrap();
    let read = || data::read_minari(&dir, &MinariReadOptions::default()).map(|r| r.0);
    let original = fingerprint(&read().unwrap());
    let extents = raw_extents(&h5);
    let tally = fuzz(&bytes, &h5, &sample(bytes.len()), original, &read, &in_raw(&extents));
    eprintln!("h5py Minari fixture: {} silent changes outside raw data (no metadata checksums)", tally.silent.len());
    assert!(tally.panics.is_empty(), "{:?}", &tally.panics[..1]);
}
