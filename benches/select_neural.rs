//! Neural selectors: acquisition time for 10^4 and 10^5 candidates (GPS, MPTS, PDTS at B = 256)
//! and learner update time per observed batch of 256.
//!
//! `cargo bench --bench select_neural --features rlvr-select`
use rl_core::Params;
use std::hint::black_box;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion};
use rand::Rng;
use rlvr_select::neural::{Gps, GpsParams, Mpts, MptsParams, Pdts, PdtsParams};
use rlvr_select::{Candidates, NoRollouts, Outcome, Selector};

const B: usize = 256;
const GPS_DIM: usize = 8;

fn features(n: usize, dim: usize, seed: u64) -> Vec<f32> {
    let mut rng = rl_core::rng_from_seed(seed);
    (0..n * dim).map(|_| rng.random_range(-1.0f32..1.0)).collect()
}

/// A batch of outcomes with features and risks/success rates.
fn outcomes(ids: &[u64], x: &[f32], dim: usize) -> Vec<Outcome> {
    ids.iter()
        .enumerate()
        .map(|(i, &id)| {
            let f = x[i * dim..(i + 1) * dim].to_vec();
            let p = (0.5 + 0.4 * f[0]).clamp(0.0, 1.0);
            let s = (p * 8.0).round() as usize;
            Outcome { features: Some(f), risk: None, ..Outcome::from_successes(id, s, 8).expect("successes <= 8") }
        })
        .collect()
}

/// Warms a selector with a few observed batches so acquisition re-encodes a real history.
fn warm(sel: &mut dyn Selector, dim: usize) {
    let mut rng = rl_core::rng_from_seed(1);
    for step in 0..3u64 {
        let ids: Vec<u64> = (step * B as u64..(step + 1) * B as u64).collect();
        let x = features(B, dim, step);
        if sel.observe(step, &outcomes(&ids, &x, dim), &mut rng).is_err() {
            unreachable!("valid warm-up batch");
        }
    }
}

fn acquisition(c: &mut Criterion) {
    tch::set_num_threads(1);
    let mut g = c.benchmark_group("neural_acquisition_b256");
    g.sample_size(10);
    for &n in &[10_000usize, 100_000] {
        let ids: Vec<u64> = (0..n as u64).collect();
        let x2 = features(n, 2, 7);
        let xg = features(n, GPS_DIM, 8);
        let cases: Vec<(&str, Box<dyn Selector>, usize)> = vec![
            (
                "mpts_m20",
                Box::new(Mpts::new(MptsParams::default().check().unwrap(), 2).unwrap_or_else(|_| unreachable!())),
                2,
            ),
            (
                "pdts",
                Box::new(Pdts::new(PdtsParams::default().check().unwrap(), 2).unwrap_or_else(|_| unreachable!())),
                2,
            ),
            (
                "pdts_min",
                Box::new(
                    Pdts::new(PdtsParams::domain_randomisation(1.0).check().unwrap(), 2)
                        .unwrap_or_else(|_| unreachable!()),
                ),
                2,
            ),
            (
                "gps_d8",
                Box::new(Gps::new(GpsParams::default().check().unwrap(), GPS_DIM).unwrap_or_else(|_| unreachable!())),
                GPS_DIM,
            ),
        ];
        for (name, mut sel, dim) in cases {
            warm(sel.as_mut(), dim);
            let x = if dim == 2 { &x2 } else { &xg };
            let mut rng = rl_core::rng_from_seed(3);
            g.bench_with_input(BenchmarkId::new(name, n), &n, |bch, _| {
                bch.iter(|| {
                    let Ok(cands) = Candidates::with_features(&ids, x, dim) else { unreachable!() };
                    black_box(sel.select(10, cands, B, &mut NoRollouts, &mut rng).map(|s| s.ids.len()).unwrap_or(0))
                })
            });
        }
    }
    g.finish();
}

fn update(c: &mut Criterion) {
    tch::set_num_threads(1);
    let mut g = c.benchmark_group("neural_update_b256");
    g.sample_size(20);
    let ids: Vec<u64> = (0..B as u64).collect();
    let cases: Vec<(&str, Box<dyn Selector>, usize)> = vec![
        (
            "mpts_sinusoid",
            Box::new(Mpts::new(MptsParams::default().check().unwrap(), 2).unwrap_or_else(|_| unreachable!())),
            2,
        ),
        (
            "mpts_dr_10steps",
            Box::new(
                Mpts::new(MptsParams::domain_randomisation().check().unwrap(), 2).unwrap_or_else(|_| unreachable!()),
            ),
            2,
        ),
        (
            "gps_d8",
            Box::new(Gps::new(GpsParams::default().check().unwrap(), GPS_DIM).unwrap_or_else(|_| unreachable!())),
            GPS_DIM,
        ),
    ];
    for (name, mut sel, dim) in cases {
        let x = features(B, dim, 11);
        let batch = outcomes(&ids, &x, dim);
        let mut rng = rl_core::rng_from_seed(4);
        g.bench_function(name, |bch| bch.iter(|| black_box(sel.observe(0, &batch, &mut rng).is_ok())));
    }
    g.finish();
}

criterion_group!(benches, acquisition, update);
criterion_main!(benches);
