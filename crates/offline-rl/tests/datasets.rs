//! Dataset files: h5py/Minari fixtures read here (values from the formulas of
//! `scripts/make_fixtures.py`), bad files rejected with typed errors, and exact round trips
//! through D4RL HDF5, Minari and our safetensors format.

use std::path::{Path, PathBuf};

use offline_rl::data::{self, D4rlReadOptions, D4rlWriteOptions, MinariReadOptions, NativeReadOptions, NextObs};
use offline_rl::{Dataset, DatasetInfo, OfflineError};
use rl_core::MemoryBudget;

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures").join(name)
}

fn obs(i: usize, j: usize) -> f32 {
    (i as f64 + j as f64 / 10.0) as f32
}

fn act(i: usize, k: usize) -> f32 {
    (-(i as f64) / 100.0 + k as f64) as f32
}

#[test]
fn reads_h5py_d4rl_with_next_observations() {
    let (d, r) = data::read_d4rl(fixture("d4rl_small.hdf5"), &D4rlReadOptions::default()).unwrap();
    let t = d.transitions();
    assert_eq!((d.len(), d.obs_dim(), d.act_dim()), (40, 3, 2));
    for i in 0..40 {
        for j in 0..3 {
            assert_eq!(t.obs()[[i, j]], obs(i, j));
            assert_eq!(t.next_obs()[[i, j]], obs(i, j) + 1000.0);
        }
        for k in 0..2 {
            assert_eq!(t.action()[[i, k]], act(i, k));
        }
        assert_eq!(t.reward()[i], i as f32 / 2.0);
        assert_eq!(t.terminal()[i], f32::from(u8::from(i == 19)));
        assert_eq!(t.timeout()[i], f32::from(u8::from(i == 9 || i == 29)));
    }
    assert_eq!(r.rows, 40);
    assert_eq!(r.dropped_total(), 0);
    assert_eq!(r.next_obs_from, "next_observations");
    assert!(r.ignored_keys.contains(&"infos/".to_string()), "{:?}", r.ignored_keys);
    assert!(r.ignored_keys.contains(&"metadata/".to_string()));
    assert_eq!(d.episodes(), vec![0..10, 10..20, 20..30, 30..40]);
    assert_eq!(d.info().name, "d4rl_small");
}

#[test]
fn reads_d4rl_without_next_observations_like_qlearning_dataset() {
    let (d, r) = data::read_d4rl(fixture("d4rl_no_next.hdf5"), &D4rlReadOptions::default()).unwrap();
    // rows 9 and 29 (timeouts) and 39 (last) are dropped and counted
    assert_eq!(d.len(), 37);
    assert_eq!(r.dropped_total(), 3);
    assert_eq!(r.dropped.get("timeout row (its next row starts another episode)"), Some(&2));
    assert_eq!(r.dropped.get("last row of the file (no next row)"), Some(&1));
    assert_eq!(r.next_obs_from, "next row");
    let t = d.transitions();
    // kept rows: 0..9, 10..29 without 29, 30..39
    let kept: Vec<usize> = (0..39).filter(|i| *i != 9 && *i != 29).collect();
    for (k, &i) in kept.iter().enumerate() {
        assert_eq!(t.obs()[[k, 0]], obs(i, 0));
        assert_eq!(t.next_obs()[[k, 2]], obs(i + 1, 2));
    }
    // the row before each dropped timeout row now ends its episode
    assert_eq!(r.flags_added, 2);
    assert_eq!(t.timeout()[8], 1.0);
    assert_eq!(t.terminal()[18], 1.0); // row 19
    assert_eq!(d.episodes().len(), 4);
    // the stored column is ignored with NextObs::NextRow
    let opts = D4rlReadOptions { next_obs: NextObs::NextRow, ..Default::default() };
    let (q, _) = data::read_d4rl(fixture("d4rl_small.hdf5"), &opts).unwrap();
    assert_eq!(q.len(), 37);
    assert_eq!(q.transitions().next_obs()[[0, 0]], obs(1, 0));
    // and required with NextObs::Stored
    let opts = D4rlReadOptions { next_obs: NextObs::Stored, ..Default::default() };
    let e = data::read_d4rl(fixture("d4rl_no_next.hdf5"), &opts).unwrap_err();
    assert!(matches!(e, OfflineError::MissingKey { ref key, .. } if key == "next_observations"), "{e}");
}

#[test]
fn bad_d4rl_files_are_typed_errors() {
    let o = D4rlReadOptions::default();
    let e = data::read_d4rl(fixture("d4rl_nan.hdf5"), &o).unwrap_err();
    assert!(matches!(e, OfflineError::NonFinite { ref what, index: 5, .. } if what == "observations"), "{e}");
    let e = data::read_d4rl(fixture("d4rl_short_actions.hdf5"), &o).unwrap_err();
    assert!(matches!(e, OfflineError::Length { ref key, expected: 40, got: 39, .. } if key == "actions"), "{e}");
    let e = data::read_d4rl(fixture("d4rl_no_terminals.hdf5"), &o).unwrap_err();
    assert!(matches!(e, OfflineError::MissingKey { ref key, .. } if key == "terminals"), "{e}");
    let e = data::read_d4rl(fixture("d4rl_bad_flag.hdf5"), &o).unwrap_err();
    assert!(
        matches!(e, OfflineError::InvalidFlag { ref key, index: 7, value, .. } if key == "terminals" && value == 0.5),
        "{e}"
    );
    let e = data::read_d4rl(fixture("not_hdf5.hdf5"), &o).unwrap_err();
    assert!(matches!(e, OfflineError::Corrupt { .. }), "{e}");
    let e = data::read_d4rl(fixture("absent.hdf5"), &o).unwrap_err();
    assert!(matches!(e, OfflineError::Io(_)), "{e}");
}

#[test]
fn reads_minari_written_by_minari() {
    let (d, r) = data::read_minari(fixture("minari_small"), &MinariReadOptions::default()).unwrap();
    assert_eq!((d.len(), d.obs_dim(), d.act_dim()), (16, 3, 1));
    assert_eq!(d.episodes(), vec![0..5, 5..12, 12..16]);
    let t = d.transitions();
    // episode e holds steps s..s+n; its observations are rows s..=s+n of the formula
    let mut row = 0;
    for (s, n) in [(0usize, 5usize), (5, 7), (12, 4)] {
        for k in 0..n {
            assert_eq!(t.obs()[[row, 1]], obs(s + k, 1));
            assert_eq!(t.next_obs()[[row, 1]], obs(s + k + 1, 1));
            assert_eq!(t.action()[[row, 0]], act(s + k, 0));
            assert_eq!(t.reward()[row], (s + k) as f32 / 2.0);
            row += 1;
        }
    }
    assert_eq!(t.terminal().to_vec().iter().sum::<f32>(), 1.0);
    assert_eq!(t.terminal()[11], 1.0);
    assert_eq!((t.timeout()[4], t.timeout()[15]), (1.0, 1.0));
    assert_eq!((r.rows, r.dropped_total(), r.flags_added), (16, 0, 0));
    assert_eq!(d.info().name, "test/minari_small-v0");
    assert_eq!((d.info().ref_min, d.info().ref_max), (Some(-1.0), Some(9.0)));
    // the dataset's own directory or its data/ directory
    let (d2, _) = data::read_minari(fixture("minari_small/data"), &MinariReadOptions::default()).unwrap();
    assert_eq!(d2, d);
}

#[test]
fn minari_dict_observations_need_keys() {
    let e = data::read_minari(fixture("minari_dict"), &MinariReadOptions::default()).unwrap_err();
    assert!(matches!(e, OfflineError::Unsupported { ref reason, .. } if reason.contains("desired_goal")), "{e}");
    let opts =
        MinariReadOptions { obs_keys: Some(vec!["observation".into(), "desired_goal".into()]), ..Default::default() };
    let (d, _) = data::read_minari(fixture("minari_dict"), &opts).unwrap();
    assert_eq!(d.obs_dim(), 4);
    let t = d.transitions();
    assert_eq!(t.obs()[[0, 0]], 0.0);
    assert_eq!(t.obs()[[0, 1]], 0.1);
    assert_eq!((t.obs()[[6, 2]], t.obs()[[6, 3]]), (101.0, -100.0)); // episode 1's goal
    let opts = MinariReadOptions { obs_keys: Some(vec!["achieved_goal".into()]), ..Default::default() };
    let e = data::read_minari(fixture("minari_dict"), &opts).unwrap_err();
    assert!(
        matches!(e, OfflineError::MissingKey { ref key, .. } if key.ends_with("observations/achieved_goal")),
        "{e}"
    );
}

fn copy_dir(src: &Path, dst: &Path) {
    std::fs::create_dir_all(dst).unwrap();
    for e in std::fs::read_dir(src).unwrap() {
        let e = e.unwrap();
        if e.file_type().unwrap().is_dir() {
            copy_dir(&e.path(), &dst.join(e.file_name()));
        } else {
            std::fs::copy(e.path(), dst.join(e.file_name())).unwrap();
        }
    }
}

#[test]
fn bad_minari_datasets_are_typed_errors() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("m");
    copy_dir(&fixture("minari_small"), &dir);
    // wrong total_steps in the metadata
    let meta = dir.join("data/metadata.json");
    let text = std::fs::read_to_string(&meta).unwrap().replace("\"total_steps\": 16", "\"total_steps\": 17");
    std::fs::write(&meta, text).unwrap();
    let e = data::read_minari(&dir, &MinariReadOptions::default()).unwrap_err();
    assert!(matches!(e, OfflineError::Corrupt { ref reason, .. } if reason.contains("total_steps")), "{e}");
    std::fs::remove_file(&meta).unwrap();
    let e = data::read_minari(&dir, &MinariReadOptions::default()).unwrap_err();
    assert!(matches!(e, OfflineError::MissingKey { ref key, .. } if key == "data/metadata.json"), "{e}");
    let e = data::read_minari(tmp.path(), &MinariReadOptions::default()).unwrap_err();
    assert!(matches!(e, OfflineError::MissingKey { ref key, .. } if key == "data/main_data.hdf5"), "{e}");
}

/// A dataset with episodes that chain, in float values that are not round.
fn chained(n_episodes: usize, len: usize) -> Dataset {
    let mut t = rl_core::Transitions::empty(3, 2);
    let mut o = ndarray::array![0.1f32, -0.2, 0.3];
    for e in 0..n_episodes {
        for k in 0..len {
            let x = (e * len + k) as f32;
            let next = ndarray::array![o[0] + 0.37, (x * 0.013).sin(), o[2] * 0.9 + 1e-3];
            let terminal = e % 2 == 1 && k + 1 == len;
            let timeout = e % 2 == 0 && k + 1 == len;
            t.push(
                o.view(),
                ndarray::array![(x * 0.1).cos(), -0.5].view(),
                x.sqrt() * 0.77,
                next.view(),
                terminal,
                timeout,
            )
            .unwrap();
            o = next;
        }
        o = ndarray::array![e as f32, 1.0 / 3.0, -2.5];
    }
    let mut info = DatasetInfo {
        name: "test/chained-v0".into(),
        env: "Chain-v0".into(),
        score_env: String::new(),
        ref_min: Some(-1.5),
        ref_max: Some(33.25),
        source: "unit test".into(),
        ..Default::default()
    };
    info.extra.insert("action_low".into(), serde_json::json!([-1.0, -1.0]));
    info.extra.insert("action_high".into(), serde_json::json!([1.0, 1.0]));
    Dataset::new(t, info).unwrap()
}

#[test]
fn round_trips_are_exact() {
    let d = chained(3, 6);
    let tmp = tempfile::tempdir().unwrap();
    for opts in [D4rlWriteOptions::default(), D4rlWriteOptions { deflate: None, chunk_rows: 1 }] {
        let p = tmp.path().join("d.hdf5");
        data::write_d4rl(&d, &p, &opts).unwrap();
        let (back, r) = data::read_d4rl(&p, &D4rlReadOptions::default()).unwrap();
        assert_eq!(back, d);
        assert_eq!(r.dropped_total(), 0);
    }
    let m = tmp.path().join("minari");
    data::write_minari(&d, &m).unwrap();
    let (back, r) = data::read_minari(&m, &MinariReadOptions::default()).unwrap();
    assert_eq!(back, d);
    assert_eq!((r.episodes, r.flags_added), (3, 0));
    let s = tmp.path().join("d.safetensors");
    data::write_native(&d, &s).unwrap();
    let (back, _) = data::read_native(&s, &NativeReadOptions::default()).unwrap();
    assert_eq!(back, d);
    // load/save pick the format from the path
    for name in ["x.safetensors", "x.hdf5", "x_minari"] {
        let p = tmp.path().join(name);
        data::save(&d, &p).unwrap();
        assert_eq!(data::load(&p).unwrap().0, d, "{name}");
    }
    if let Some(dir) = std::env::var_os("OFFLINE_RL_H5PY_DIR") {
        // files for scripts/check_h5py.py
        let dir = PathBuf::from(dir);
        data::write_d4rl(&d, dir.join("chained.hdf5"), &D4rlWriteOptions::default()).unwrap();
        data::write_minari(&d, dir.join("chained_minari")).unwrap();
        data::write_native(&d, dir.join("chained.safetensors")).unwrap();
    }
}

#[test]
fn minari_needs_chained_episodes_and_a_name() {
    let d = chained(2, 4);
    let c = d.transitions().clone().into_columns();
    let mut next = c.next_obs.clone();
    next[[1, 0]] += 1.0;
    let t = rl_core::Transitions::from_columns(c.obs, c.action, c.reward, next, c.terminal, c.timeout).unwrap();
    let broken = Dataset::new(t, d.info().clone()).unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let e = data::write_minari(&broken, tmp.path().join("m")).unwrap_err();
    assert!(matches!(e, OfflineError::NotEpisodic { index: 1, .. }), "{e}");
    let mut unnamed = d.clone();
    unnamed.info_mut().name.clear();
    assert!(matches!(data::write_minari(&unnamed, tmp.path().join("n")), Err(OfflineError::InvalidParameter { .. })));
    assert!(data::write_d4rl(&d, tmp.path().join("z.hdf5"), &D4rlWriteOptions { deflate: Some(10), chunk_rows: 8 })
        .is_err());
}

#[test]
fn bad_native_files_are_typed_errors() {
    let d = chained(1, 5);
    let tmp = tempfile::tempdir().unwrap();
    let p = tmp.path().join("d.safetensors");
    data::write_native(&d, &p).unwrap();
    let bytes = std::fs::read(&p).unwrap();
    let cut = tmp.path().join("cut.safetensors");
    std::fs::write(&cut, &bytes[..bytes.len() - 7]).unwrap();
    assert!(matches!(data::read_native(&cut, &NativeReadOptions::default()), Err(OfflineError::Corrupt { .. })));
    let junk = tmp.path().join("junk.safetensors");
    std::fs::write(&junk, b"12345678not json").unwrap();
    assert!(matches!(data::read_native(&junk, &NativeReadOptions::default()), Err(OfflineError::Corrupt { .. })));
    // a NaN written into the observation bytes is found with its row
    let header = u64::from_le_bytes(bytes[..8].try_into().unwrap()) as usize;
    let text = std::str::from_utf8(&bytes[8..8 + header]).unwrap();
    let v: serde_json::Value = serde_json::from_str(text).unwrap();
    let start = v["observations"]["data_offsets"][0].as_u64().unwrap() as usize;
    let mut nan = bytes.clone();
    let at = 8 + header + start + 4 * (3 * 2 + 1); // row 2, column 1
    nan[at..at + 4].copy_from_slice(&f32::NAN.to_le_bytes());
    let p2 = tmp.path().join("nan.safetensors");
    std::fs::write(&p2, &nan).unwrap();
    // the content hash sees the change first
    let e = data::read_native(&p2, &NativeReadOptions::default()).unwrap_err();
    assert!(matches!(e, OfflineError::Corrupt { ref reason, .. } if reason.contains("content hash mismatch")), "{e}");
    // a file without a hash (written before hashes existed) is read unverified and checked
    std::fs::write(&p2, without_hash(&nan)).unwrap();
    let e = data::read_native(&p2, &NativeReadOptions::default()).unwrap_err();
    assert!(matches!(e, OfflineError::NonFinite { ref what, index: 2, .. } if what == "observations"), "{e}");
    // a flag byte of 2
    let start = v["terminals"]["data_offsets"][0].as_u64().unwrap() as usize;
    let mut flag = bytes.clone();
    flag[8 + header + start + 3] = 2;
    let p3 = tmp.path().join("flag.safetensors");
    std::fs::write(&p3, without_hash(&flag)).unwrap();
    let e = data::read_native(&p3, &NativeReadOptions::default()).unwrap_err();
    assert!(matches!(e, OfflineError::InvalidFlag { ref key, index: 3, .. } if key == "terminals"), "{e}");
}

/// The same safetensors file without its `content_sha256` entry (as written before hashes).
fn without_hash(bytes: &[u8]) -> Vec<u8> {
    let st = safetensors::SafeTensors::deserialize(bytes).unwrap();
    let (_, header) = safetensors::SafeTensors::read_metadata(bytes).unwrap();
    let mut meta = header.metadata().clone().unwrap();
    assert!(meta.remove("content_sha256").is_some());
    safetensors::tensor::serialize(st.tensors(), &Some(meta)).unwrap()
}

#[test]
fn native_files_carry_a_verified_hash_and_old_files_still_load() {
    let d = chained(2, 3);
    let tmp = tempfile::tempdir().unwrap();
    let p = tmp.path().join("d.safetensors");
    data::write_native(&d, &p).unwrap();
    let (back, r) = data::read_native(&p, &NativeReadOptions::default()).unwrap();
    assert_eq!(back, d);
    let hash = r.content_sha256.expect("a verified hash");
    assert_eq!(hash.len(), 64);
    let old = tmp.path().join("old.safetensors");
    std::fs::write(&old, without_hash(&std::fs::read(&p).unwrap())).unwrap();
    let (back, r) = data::read_native(&old, &NativeReadOptions::default()).unwrap();
    assert_eq!((back, r.content_sha256), (d, None));
}

fn too_large(e: &OfflineError) -> Option<(&str, u64)> {
    match e {
        OfflineError::Core(rl_core::RlCoreError::TooLarge { what, bytes, .. }) => Some((what.as_str(), *bytes)),
        _ => None,
    }
}

/// The reproduction of issue 22: a chunked `observations` whose declared shape is
/// `[N, 2^32]` but whose chunks were never written, in a file of a few kB, used to allocate
/// the whole declared size and abort. Made here from the h5py fixture (superblock v0, no
/// metadata checksums) by rewriting the dataspace dimensions `[40, 3]` to `[40, 2^32]`.
#[test]
fn declared_sizes_beyond_the_budget_are_refused_before_reading() {
    let tmp = tempfile::tempdir().unwrap();
    let mut bytes = std::fs::read(fixture("d4rl_small.hdf5")).unwrap();
    let from: Vec<u8> = [40u64, 3].iter().flat_map(|d| d.to_le_bytes()).collect();
    let to: Vec<u8> = [40u64, 1 << 32].iter().flat_map(|d| d.to_le_bytes()).collect();
    let mut patched = 0;
    for i in 0..bytes.len() - from.len() {
        if bytes[i..i + from.len()] == from[..] {
            bytes[i..i + to.len()].copy_from_slice(&to);
            patched += 1;
        }
    }
    assert!(patched >= 1);
    let p = tmp.path().join("huge.hdf5");
    std::fs::write(&p, &bytes).unwrap();
    assert!(bytes.len() < 32 << 10);
    let e = data::read_d4rl(&p, &D4rlReadOptions::default()).unwrap_err();
    let (what, bytes) = too_large(&e).unwrap_or_else(|| panic!("{e}"));
    assert!(what.contains("huge.hdf5") && what.contains("`observations`"), "{e}");
    assert!(bytes >= 40 << 34, "{e}");

    // a small budget refuses ordinary files too, naming the file or the column
    let d = chained(3, 6);
    let small = MemoryBudget::bytes(600);
    let h = tmp.path().join("d.hdf5");
    data::write_d4rl(&d, &h, &D4rlWriteOptions::default()).unwrap();
    let e = data::read_d4rl(&h, &D4rlReadOptions { budget: small, ..Default::default() }).unwrap_err();
    assert!(too_large(&e).is_some_and(|(w, _)| w.contains("d.hdf5")), "{e}");
    let ok = MemoryBudget::bytes(std::fs::metadata(&h).unwrap().len() + 1000);
    let e = data::read_d4rl(&h, &D4rlReadOptions { budget: ok, ..Default::default() }).unwrap_err();
    assert!(too_large(&e).is_some_and(|(w, _)| w.contains('`')), "a column is named: {e}");
    let m = tmp.path().join("m");
    data::write_minari(&d, &m).unwrap();
    let e = data::read_minari(&m, &MinariReadOptions { budget: small, ..Default::default() }).unwrap_err();
    assert!(too_large(&e).is_some(), "{e}");
    let s = tmp.path().join("d.safetensors");
    data::write_native(&d, &s).unwrap();
    let e = data::read_native(&s, &NativeReadOptions { budget: small }).unwrap_err();
    assert!(too_large(&e).is_some_and(|(w, _)| w.contains("d.safetensors")), "{e}");
    assert!(data::load_with_budget(&s, small).is_err());
    // the default budget reads them all
    assert_eq!(data::load_with_budget(&s, MemoryBudget::default()).unwrap().0, d);
    assert_eq!(data::read_minari(&m, &MinariReadOptions::default()).unwrap().0, d);
}

#[test]
fn width_zero_columns_are_refused() {
    let tmp = tempfile::tempdir().unwrap();
    for (o, a, bad) in [(0u64, 2u64, "observations"), (3, 0, "actions")] {
        let p = tmp.path().join(format!("w{o}{a}.hdf5"));
        let mut b = hdf5_pure::FileBuilder::new();
        let n = 4u64;
        b.create_dataset("rewards").with_f32_data(&[0.0; 4]).with_shape(&[n]);
        for (k, w) in [("observations", o), ("next_observations", o), ("actions", a)] {
            let d = b.create_dataset(k);
            if w == 0 {
                d.with_dtype(hdf5_pure::make_f32_type()).with_shape(&[n, 0]);
            } else {
                d.with_f32_data(&vec![0.5; (n * w) as usize]).with_shape(&[n, w]);
            }
        }
        for k in ["terminals", "timeouts"] {
            b.create_dataset(k).with_u8_data(&[0; 4]).with_shape(&[n]);
        }
        std::fs::write(&p, b.finish().unwrap()).unwrap();
        let e = data::read_d4rl(&p, &D4rlReadOptions::default()).unwrap_err();
        assert!(
            matches!(e, OfflineError::Shape { ref what, ref got, .. } if what.ends_with(bad) && got == "width 0"),
            "{e}"
        );
    }
    // and in memory
    let t = rl_core::Transitions::from_columns(
        ndarray::Array2::zeros((2, 0)),
        ndarray::Array2::zeros((2, 1)),
        ndarray::Array1::zeros(2),
        ndarray::Array2::zeros((2, 0)),
        ndarray::Array1::zeros(2),
        ndarray::Array1::zeros(2),
    );
    if let Ok(t) = t {
        assert!(matches!(Dataset::new(t, DatasetInfo::default()), Err(OfflineError::Shape { .. })));
    }
}

/// Rewrites `metadata.json` of the Minari dataset `dir` with `f`.
fn edit_meta(dir: &Path, f: impl FnOnce(&mut serde_json::Map<String, serde_json::Value>)) {
    let p = dir.join("data/metadata.json");
    let mut m: serde_json::Map<String, serde_json::Value> =
        serde_json::from_str(&std::fs::read_to_string(&p).unwrap()).unwrap();
    f(&mut m);
    std::fs::write(&p, serde_json::to_string(&m).unwrap()).unwrap();
}

#[test]
fn minari_counts_and_episode_indices_are_checked() {
    let tmp = tempfile::tempdir().unwrap();
    let o = MinariReadOptions::default();
    let corrupt = |e: OfflineError, needle: &str| {
        assert!(matches!(e, OfflineError::Corrupt { ref reason, .. } if reason.contains(needle)), "{needle}: {e}");
    };
    for (k, bad) in [
        ("total_steps", serde_json::json!(16.5)),
        ("total_steps", serde_json::json!("16")),
        ("total_steps", serde_json::json!(-1)),
        ("total_episodes", serde_json::json!(3.0)),
        ("total_episodes", serde_json::json!(4)),
    ] {
        let dir = tmp.path().join(format!("{k}{bad}"));
        copy_dir(&fixture("minari_small"), &dir);
        edit_meta(&dir, |m| {
            m.insert(k.into(), bad.clone());
        });
        corrupt(data::read_minari(&dir, &o).unwrap_err(), k);
    }
    // episode groups: a gap, a duplicate index, a malformed name
    let d = chained(3, 2);
    let write = |names: &[&str], dir: &Path| {
        let mut b = hdf5_pure::FileBuilder::new();
        for (e, name) in names.iter().enumerate() {
            let mut g = b.create_group(name);
            let obs: Vec<f32> = (0..9).map(|x| (x + 10 * e) as f32).collect();
            g.create_dataset("observations").with_f32_data(&obs).with_shape(&[3, 3]);
            g.create_dataset("actions").with_f32_data(&[0.5; 4]).with_shape(&[2, 2]);
            g.create_dataset("rewards").with_f64_data(&[1.0, 2.0]).with_shape(&[2]);
            g.create_dataset("terminations").with_u8_data(&[0, 1]).with_shape(&[2]);
            g.create_dataset("truncations").with_u8_data(&[0, 0]).with_shape(&[2]);
            b.add_group(g.finish());
        }
        std::fs::create_dir_all(dir.join("data")).unwrap();
        std::fs::write(dir.join("data/main_data.hdf5"), b.finish().unwrap()).unwrap();
        std::fs::write(dir.join("data/metadata.json"), format!("{{\"total_steps\": {}}}", 2 * names.len())).unwrap();
    };
    let ok = tmp.path().join("ok");
    write(&["episode_1", "episode_0", "episode_2"], &ok);
    assert_eq!(data::read_minari(&ok, &o).unwrap().0.len(), 6);
    let cases: [(&[&str], &str); 4] = [
        (&["episode_0", "episode_2"], "episode_1` is missing"),
        (&["episode_1", "episode_2"], "episode_0` is missing"),
        (&["episode_0", "episode_1", "episode_01"], "appears twice"),
        (&["episode_0", "episode_+1"], "not an episode index"),
    ];
    for (i, (names, needle)) in cases.iter().enumerate() {
        let dir = tmp.path().join(format!("case{i}"));
        write(names, &dir);
        corrupt(data::read_minari(&dir, &o).unwrap_err(), needle);
    }
    // an episode's own id / total_steps attributes must agree with its index and steps
    let m = tmp.path().join("m");
    data::write_minari(&d, &m).unwrap();
    assert!(data::read_minari(&m, &o).is_ok());
    for (attr, value, needle) in
        [("id", 1i64, "id = 1"), ("total_steps", 3, "total_steps = 3"), ("id", -1, "not a non-negative")]
    {
        let mut b = hdf5_pure::FileBuilder::new();
        let mut g = b.create_group("episode_0");
        g.set_attr(attr, hdf5_pure::AttrValue::I64(value));
        g.create_dataset("observations").with_f32_data(&[0.0; 9]).with_shape(&[3, 3]);
        g.create_dataset("actions").with_f32_data(&[0.5; 4]).with_shape(&[2, 2]);
        g.create_dataset("rewards").with_f64_data(&[1.0, 2.0]).with_shape(&[2]);
        g.create_dataset("terminations").with_u8_data(&[0, 1]).with_shape(&[2]);
        g.create_dataset("truncations").with_u8_data(&[0, 0]).with_shape(&[2]);
        b.add_group(g.finish());
        std::fs::write(m.join("data/main_data.hdf5"), b.finish().unwrap()).unwrap();
        std::fs::write(m.join("data/metadata.json"), "{}").unwrap();
        corrupt(data::read_minari(&m, &o).unwrap_err(), needle);
    }
}
