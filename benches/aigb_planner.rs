//! DiffBid planner sampling speed on CPU (one libtorch thread): one plan (a whole 48-tick
//! trajectory from tick 0, K = 10 guided denoising steps: 20 U-Net evaluations and the inverse
//! model) and one period of online re-planning (48 plans, one per tick, with the observed
//! prefix in-painted), at the reference's U-Net size (dim 128, multipliers 1, 2, 4) and at the
//! size of `examples/aigb_generative.rs` (dim 32). Weights are those after one training step
//! (speed does not depend on them).
//!
//! ```text
//! cargo bench --bench aigb_planner --features aigb-tch
//! cargo bench --bench aigb_planner --features aigb-tch -- dim32     # only the dim-32 cases
//! ```
//!
//! Sizes of the measurement, so that the whole bench finishes in minutes: the single-plan cases
//! use flat sampling (the same iterations per sample), criterion's minimum of 10 samples and a
//! 10 s measurement target (at least 10 plans); a period case is 48 plans (a minute at
//! dim 128 on a loaded 2-core machine), so the `aigb_planner_period` group uses flat sampling
//! (one iteration per sample), 10 samples (criterion's minimum), a 1 s warm-up (at least one
//! period) and a 1 s measurement target: 11 periods per case, whatever their length (criterion
//! warns that the target is too short; that is intended).

use std::time::Duration;

use aigb::diffusion::UnetParams;
use aigb::planner::{DiffusionPlanner, PlannerParams, PlannerTrainer};
use aigb::{auctionnet_advertisers, generate_dataset, DataGenParams, OnlineLpParams, SimParams, Simulator};
use criterion::{criterion_group, criterion_main, Criterion, SamplingMode};
use rl_core::Params;

fn bench(c: &mut Criterion) {
    tch::set_num_threads(1);
    let pv = 2_000;
    let scale = pv as f64 / 500_000.0;
    let sim = Simulator::new(SimParams::default().pv_num(pv).check().unwrap(), auctionnet_advertisers(scale)).unwrap();
    let gen = DataGenParams::default().online_lp(OnlineLpParams::default().budget_scale(scale)).check().unwrap();
    let data = generate_dataset(&sim, &[0], &gen, &|_| {}).unwrap();
    let observed: Vec<[f32; 16]> = data.trajectories[0].steps.iter().map(|s| s.state).collect();
    let mut planners = Vec::new();
    for dim in [128i64, 32] {
        let p = PlannerParams::default().unet(UnetParams::default().dim(dim)).batch_size(8).check().unwrap();
        let mut tr = PlannerTrainer::new(p, &data).unwrap();
        tr.train(1, &mut |_, _| {}).unwrap();
        planners.push((dim, DiffusionPlanner::from_snapshot(&tr.planner().snapshot("bench").unwrap()).unwrap()));
    }
    let mut rng = rl_core::rng_from_seed(0);
    let mut g = c.benchmark_group("aigb_planner");
    g.sampling_mode(SamplingMode::Flat).sample_size(10).measurement_time(Duration::from_secs(10));
    for (dim, planner) in &planners {
        g.bench_function(format!("plan_k10_dim{dim}"), |b| b.iter(|| planner.plan(&observed[..1], &mut rng).unwrap()));
    }
    g.finish();
    let mut g = c.benchmark_group("aigb_planner_period");
    g.sampling_mode(SamplingMode::Flat)
        .sample_size(10)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(1));
    for (dim, planner) in &planners {
        g.bench_function(format!("period_48_plans_k10_dim{dim}"), |b| {
            b.iter(|| {
                for t in 1..=observed.len() {
                    planner.plan(&observed[..t], &mut rng).unwrap();
                }
            })
        });
    }
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
