//! aigb speed: one AuctionNet-size period (500 000 impressions, 48 advertisers, 48 ticks, PID
//! market) on one thread, split into traffic generation and the whole period; one tick's
//! auction.
//!
//! ```text
//! cargo bench --bench aigb --features aigb
//! ```
//! The side-by-side comparison with the AuctionNet Python simulator is
//! `benches/aigb_auctionnet.py`; the 48-period sweep on both cores is
//! `examples/aigb_simulate.rs --periods 48 --threads 2` (see docs/benchmarks.md).

use std::time::Duration;

use aigb::{
    auctionnet_advertisers, AuctionParams, Bidder, PidBidder, PidParams, SimParams, Simulator, TickAuction, TickTraffic,
};
use criterion::{criterion_group, criterion_main, Criterion};
use rl_core::Params;

fn bench(c: &mut Criterion) {
    let pv = 500_000;
    let sim = Simulator::new(SimParams::default().pv_num(pv).check().unwrap(), auctionnet_advertisers(1.0)).unwrap();
    let pid = PidParams::default().check().unwrap();
    let mut g = c.benchmark_group("aigb");
    g.sample_size(10).measurement_time(Duration::from_secs(15));
    g.bench_function("period_500k_48adv_pid_1thread", |b| {
        b.iter(|| {
            let mut bidders: Vec<Box<dyn Bidder>> =
                (0..48).map(|_| Box::new(PidBidder::new(pid.clone())) as Box<dyn Bidder>).collect();
            sim.run_period(0, &mut bidders, None).unwrap()
        })
    });
    let traffic = sim.traffic(0).unwrap();
    let mut tt = TickTraffic::default();
    g.bench_function("traffic_500k_48adv_all_ticks", |b| {
        b.iter(|| {
            for t in 0..48 {
                traffic.fill_tick(t, &mut tt).unwrap();
            }
        })
    });
    // the busiest tick's auction with bids 15 · pValue
    let t = (0..48).max_by_key(|&t| traffic.counts()[t]).unwrap();
    traffic.fill_tick(t, &mut tt).unwrap();
    let bids: Vec<f32> = tt.pvalues.iter().map(|p| 15.0 * p).collect();
    let bounds = sim.value_bounds(0);
    let params = AuctionParams::default().check().unwrap();
    let mut au = TickAuction::new();
    g.bench_function(format!("auction_tick_{}pv_48adv", tt.num_pv), |b| {
        b.iter(|| au.run(&params, &tt, &bids, &bounds, 7).unwrap())
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
