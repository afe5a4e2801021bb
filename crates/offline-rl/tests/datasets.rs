//! Dataset files: h5py/Minari fixtures read here (values from the formulas of
//! `scripts/make_fixtures.py`), bad files rejected with typed errors, and exact round trips
//! through D4RL HDF5, Minari and our safetensors format.

use std::path::{Path, PathBuf};

use offline_rl::data::{self, D4rlReadOptions, D4rlWriteOptions, MinariReadOptions, NextObs};
use offline_rl::{Dataset, DatasetInfo, OfflineError};

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
    let opts = MinariReadOptions { obs_keys: Some(vec!["observation".into(), "desired_goal".into()]) };
    let (d, _) = data::read_minari(fixture("minari_dict"), &opts).unwrap();
    assert_eq!(d.obs_dim(), 4);
    let t = d.transitions();
    assert_eq!(t.obs()[[0, 0]], 0.0);
    assert_eq!(t.obs()[[0, 1]], 0.1);
    assert_eq!((t.obs()[[6, 2]], t.obs()[[6, 3]]), (101.0, -100.0)); // episode 1's goal
    let opts = MinariReadOptions { obs_keys: Some(vec!["achieved_goal".into()]) };
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
    let (back, _) = data::read_native(&s).unwrap();
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
    assert!(matches!(data::read_native(&cut), Err(OfflineError::Corrupt { .. })));
    let junk = tmp.path().join("junk.safetensors");
    std::fs::write(&junk, b"12345678not json").unwrap();
    assert!(matches!(data::read_native(&junk), Err(OfflineError::Corrupt { .. })));
    // a NaN written into the observation bytes is found with its row
    let header = u64::from_le_bytes(bytes[..8].try_into().unwrap()) as usize;
    let text = std::str::from_utf8(&bytes[8..8 + header]).unwrap();
    let v: serde_json::Value = serde_json::from_str(text).unwrap();
    let start = v["observations"]["data_offsets"][0].as_u64().unwrap() as usize;
    let mut nan = bytes.clone();
    let at = 8 + header + start + 4 * (3 * 2 + 1); // row 2, column 1
    nan[at..at + 4].copy_from_slice(&f32::NAN.to_le_bytes());
    let p2 = tmp.path().join("nan.safetensors");
    std::fs::write(&p2, nan).unwrap();
    let e = data::read_native(&p2).unwrap_err();
    assert!(matches!(e, OfflineError::NonFinite { ref what, index: 2, .. } if what == "observations"), "{e}");
    // a flag byte of 2
    let start = v["terminals"]["data_offsets"][0].as_u64().unwrap() as usize;
    let mut flag = bytes.clone();
    flag[8 + header + start + 3] = 2;
    let p3 = tmp.path().join("flag.safetensors");
    std::fs::write(&p3, flag).unwrap();
    let e = data::read_native(&p3).unwrap_err();
    assert!(matches!(e, OfflineError::InvalidFlag { ref key, index: 3, .. } if key == "terminals"), "{e}");
}
