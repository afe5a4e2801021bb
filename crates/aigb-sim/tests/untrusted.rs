//! Untrusted input (issue 22): parameters that size an allocation are bounded by `check()` /
//! `Simulator::new` (the memory budget, fixed maxima), the traffic generator does not allocate
//! by category id, and the CSV reader refuses rows that contradict each other or the metadata
//! and sizes beyond its budget, each with a typed error naming the line and field.

use aigb_sim::dataset::MAX_ROW_BYTES;
use aigb_sim::*;
use rl_core::{MemoryBudget, Params, RlCoreError};

fn ads(n: usize, pv: usize) -> Vec<Advertiser> {
    auctionnet_advertisers(pv as f64 / 500_000.0).into_iter().take(n).collect()
}

fn invalid_name(e: &AigbError) -> &str {
    match e {
        AigbError::InvalidParameter { name, .. } => name,
        other => panic!("expected InvalidParameter, got {other:?}"),
    }
}

#[test]
fn huge_categories_neither_allocate_nor_overflow() {
    let p = SimParams::default().pv_num(2_000).check().unwrap();
    for category in [1_000_000_000usize, usize::MAX] {
        let mut a = ads(2, 2_000);
        a[1].category = category;
        let e = Simulator::new(p.clone(), a).unwrap_err();
        assert_eq!(invalid_name(&e), "advertisers[1].category", "{e}");
        assert!(e.to_string().contains(&MAX_CATEGORY.to_string()), "{e}");
        // the traffic generator itself takes any id: only the categories present get a curve
        let tr = PeriodTraffic::new(&p.traffic, &[0, category, category], 1, 0).unwrap();
        assert_eq!(tr.num_advertisers(), 3);
        let mut tt = TickTraffic::default();
        tr.fill_tick(10, &mut tt).unwrap();
        assert!(tt.pvalues.iter().all(|v| (0.0..=1.0).contains(v)));
    }
    // a sparse id draws the same curve as that id in a dense market: category 5 alone equals
    // category 5 among 0..=5
    let dense: Vec<usize> = (0..=5).collect();
    let a = PeriodTraffic::new(&p.traffic, &dense, 3, 2).unwrap();
    let b = PeriodTraffic::new(&p.traffic, &[5], 3, 2).unwrap();
    for t in 0..48 {
        assert_eq!(a.pvalue_mean(5, t), b.pvalue_mean(0, t));
    }
    // the largest allowed category builds and runs a market
    let mut a = ads(4, 2_000);
    a[3].category = MAX_CATEGORY;
    let s = Simulator::new(p, a).unwrap();
    let pid = PidParams::default().check().unwrap();
    let mut bidders: Vec<Box<dyn Bidder>> =
        (0..4).map(|_| Box::new(PidBidder::new(pid.clone())) as Box<dyn Bidder>).collect();
    s.run_period(0, &mut bidders, None).unwrap();
    assert!(aigb_sim::stats::traffic_stats(&s, 0).unwrap().contains_key(&format!("cat{MAX_CATEGORY}/pvalue_mean")));
}

#[test]
fn pv_num_and_ticks_are_bounded_by_the_memory_budget() {
    // 10^12 impressions passed check() and aborted in the first tick
    let e = SimParams::default().pv_num(1_000_000_000_000).check().unwrap_err();
    assert_eq!(invalid_name(&e), "traffic.pv_num", "{e}");
    assert!(e.to_string().contains("memory budget"), "{e}");
    // beyond 2^53 per tick even an unlimited budget refuses (the counts would not be exact)
    let e = SimParams::default().pv_num(usize::MAX).memory_budget(MemoryBudget::unlimited()).check().unwrap_err();
    assert_eq!(invalid_name(&e), "traffic.pv_num", "{e}");
    let e = TrafficParams::default().tick_weights(vec![1e300, 1e300]).check().unwrap_err();
    assert_eq!(invalid_name(&e), "pv_num", "{e}");
    // a configurable budget: 10^7 impressions need ~100 MB per tick for one advertiser
    let big = SimParams::default().pv_num(10_000_000);
    assert!(big.clone().check().is_ok());
    let e = big.clone().memory_budget(MemoryBudget::bytes(10 << 20)).check().unwrap_err();
    assert_eq!(invalid_name(&e), "traffic.pv_num", "{e}");
    // ticks: a million ticks of one impression each fit per tick but not per period
    let ticks = SimParams::default()
        .traffic(TrafficParams::default().pv_num(1_000_000).tick_weights(vec![1e-6; 1_000_000]))
        .memory_budget(MemoryBudget::bytes(50 << 20));
    let e = ticks.check().unwrap_err();
    assert_eq!(invalid_name(&e), "traffic.tick_weights", "{e}");
    // the market size: one advertiser fits, 48 do not
    let p = SimParams::default().pv_num(1_000_000).memory_budget(MemoryBudget::bytes(20 << 20)).check().unwrap();
    let e = Simulator::new(p.clone(), ads(48, 1_000_000)).unwrap_err();
    assert_eq!(invalid_name(&e), "advertisers", "{e}");
    assert!(Simulator::new(p, ads(1, 1_000_000)).is_ok());
    // the budget is a plain byte count in a config file
    let p: SimParams = serde_json::from_str(r#"{"memory_budget": 1048576}"#).unwrap();
    assert_eq!(p, SimParams::default().memory_budget(MemoryBudget::bytes(1 << 20)));
    assert_eq!(serde_json::from_str::<SimParams>("{}").unwrap(), SimParams::default());
    // the defaults (AuctionNet's market) are far inside the default budget
    let d = SimParams::default();
    let bytes = d.memory_bytes(48, 6).unwrap();
    assert!(bytes < 200 << 20, "{bytes}");
    assert!(Simulator::new(d.check().unwrap(), auctionnet_advertisers(1.0)).is_ok());
}

#[test]
fn the_traffic_generator_checks_its_own_buffers() {
    // PeriodTraffic::new takes unchecked parameters: they are validated, and the tick buffers
    // are checked against the budget before any is allocated
    let p = TrafficParams::default().pv_num(1_000_000_000_000);
    let cats: Vec<usize> = (0..48).map(|i| i / 8).collect();
    match PeriodTraffic::new(&p, &cats, 1, 0) {
        Err(AigbError::Core(RlCoreError::TooLarge { what, limit, .. })) => {
            assert!(what.contains("impressions"), "{what}");
            assert_eq!(limit, MemoryBudget::DEFAULT_BYTES);
        }
        other => panic!("{other:?}"),
    }
    let e = PeriodTraffic::new(&TrafficParams::default().traffic_window(0), &cats, 1, 0).unwrap_err();
    assert_eq!(invalid_name(&e), "traffic.traffic_window", "{e}");
    let small = TrafficParams::default().pv_num(100_000);
    assert!(PeriodTraffic::new_within(&small, &cats, 1, 0, MemoryBudget::bytes(1 << 20)).is_err());
    assert!(PeriodTraffic::new_within(&small, &cats, 1, 0, MemoryBudget::bytes(64 << 20)).is_ok());
}

#[test]
fn thread_counts_and_evaluation_grids_are_bounded() {
    let e = DataGenParams::default().threads(1_000_000).check().unwrap_err();
    assert_eq!(invalid_name(&e), "threads");
    let e = EvalParams::default().threads(aigb_sim::eval::MAX_THREADS + 1).check().unwrap_err();
    assert_eq!(invalid_name(&e), "threads");
    assert!(EvalParams::default().threads(aigb_sim::eval::MAX_THREADS).check().is_ok());
    // 1000^5 runs would be listed before the first one starts
    let e = EvalParams::default()
        .seeds((0..1000).collect())
        .periods((0..1000).collect())
        .budget_ratios(vec![1.0; 1000])
        .cpa_ratios(vec![1.0; 1000])
        .slots(vec![0; 1000])
        .check()
        .unwrap_err();
    assert!(e.to_string().contains("evaluation runs"), "{e}");
}

#[test]
fn online_lp_tables_refuse_absurd_ids_and_sizes() {
    let p = OnlineLpParams::default();
    let s = |category| LpSample { category, tick: 0, pvalue: 0.001, least_winning_cost: 0.01 };
    assert!(matches!(OnlineLpTable::build(&[s(usize::MAX)], 48, &p), Err(AigbError::UnknownId { .. })));
    assert!(matches!(OnlineLpTable::build(&[s(0)], 1 << 40, &p), Err(AigbError::Core(RlCoreError::TooLarge { .. }))));
    assert!(OnlineLpTable::build(&[s(MAX_CATEGORY)], 48, &p).is_ok());
}

/// A small logged dataset (4 advertisers, 2 periods) with its metadata declared.
fn dataset() -> TrajectoryDataset {
    let pv = 2_000;
    let s = Simulator::new(SimParams::default().pv_num(pv).check().unwrap(), ads(4, pv)).unwrap();
    let pid = PidParams::default().check().unwrap();
    let mut ds = TrajectoryDataset::new(DatasetMeta {
        format_version: aigb_sim::dataset::FORMAT_VERSION,
        num_ticks: 48,
        advertisers: s.advertisers().to_vec(),
        ..DatasetMeta::default()
    });
    for period in [3, 4] {
        let mut b: Vec<Box<dyn Bidder>> =
            (0..4).map(|_| Box::new(PidBidder::new(pid.clone())) as Box<dyn Bidder>).collect();
        ds.push_period(&s.run_period(period, &mut b, None).unwrap(), s.params().min_remaining_budget);
    }
    ds
}

#[test]
fn padded_refuses_absurd_horizons() {
    let ds = dataset();
    for h in [usize::MAX, 1 << 40] {
        assert!(matches!(ds.padded(h), Err(AigbError::Core(RlCoreError::TooLarge { .. }))), "{h}");
    }
    assert!(matches!(ds.padded(10), Err(AigbError::Shape { .. })));
    assert!(matches!(ds.padded_within(48, MemoryBudget::bytes(1000)), Err(AigbError::Core(_))));
    assert_eq!(ds.padded(48).unwrap().n, 8);
}

#[test]
fn the_csv_reader_refuses_contradictions_and_sizes_beyond_its_budget() {
    let ds = dataset();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("d.csv");
    ds.save(&path).unwrap();
    let back = TrajectoryDataset::load(&path).unwrap();
    assert_eq!(back, ds);
    let text = std::fs::read_to_string(&path).unwrap();
    let lines: Vec<String> = text.lines().map(str::to_owned).collect();
    // rows: line index 2 + 48·trajectory + tick; columns as in the header
    let (c_period, c_adv, c_cat, c_budget, c_cpa, c_tick) = (0, 1, 2, 3, 4, 6);
    let (c_remaining, c_reward, c_wins, c_exposures, c_num_pv, c_done) = (23, 25, 28, 29, 30, 31);
    let field = |l: &[String], line: usize, col: usize| -> String { l[line].split(',').nth(col).unwrap().to_owned() };
    let set = |l: &mut Vec<String>, line: usize, col: usize, v: &str| {
        let mut f: Vec<String> = l[line].split(',').map(str::to_owned).collect();
        f[col] = v.to_owned();
        l[line] = f.join(",");
    };
    let check = |mutate: &dyn Fn(&mut Vec<String>), expect: &[&str]| {
        let mut l = lines.clone();
        mutate(&mut l);
        let p = dir.path().join("bad.csv");
        std::fs::write(&p, l.join("\n")).unwrap();
        match TrajectoryDataset::load(&p) {
            Err(AigbError::Corrupt { reason, .. }) => {
                for e in expect {
                    assert!(reason.contains(e), "{reason} !~ {e}");
                }
            }
            other => panic!("{expect:?}: {other:?}"),
        }
    };
    // against the metadata
    check(&|l| (2..50).for_each(|i| set(l, i, c_adv, "57")), &["line 3", "`advertiser`", "unknown advertiser 57"]);
    check(
        &|l| (50..98).for_each(|i| set(l, i, c_budget, "12345")),
        &["line 51", "`budget`", "differs from the metadata"],
    );
    check(&|l| (50..98).for_each(|i| set(l, i, c_cpa, "1")), &["line 51", "`cpa`", "metadata's advertiser 1"]);
    check(&|l| (2..50).for_each(|i| set(l, i, c_cat, "3")), &["line 3", "`category`"]);
    check(&|l| (2..50).for_each(|i| set(l, i, c_period, "99")), &["line 3", "period 99 is not among"]);
    check(&|l| set(l, 49, c_tick, "48"), &["line 50", "`tick`", "out of range"]);
    // rows that contradict each other: the same (period, advertiser, tick) twice with other values
    check(
        &|l| {
            l.insert(11, l[10].clone());
            set(l, 11, c_reward, "0");
        },
        &["line 12", "duplicate row", "tick 8 is already on line 11"],
    );
    check(&|l| drop(l.remove(20)), &["line 21", "a tick is missing"]);
    check(&|l| l.push(l[5].clone()), &["appears twice", "first on line 3"]);
    check(
        &|l| {
            let v: f64 = field(l, 20, c_remaining).parse().unwrap();
            set(l, 20, c_remaining, &(v * 1.01 + 1.0).to_string());
        },
        &["line 21", "`remaining_budget`", "contradicts the previous row"],
    );
    check(&|l| set(l, 2, c_remaining, "1"), &["line 3", "differs from the budget"]);
    check(
        &|l| set(l, 60, c_num_pv, &(field(l, 60, c_num_pv).parse::<u64>().unwrap() + 1).to_string()),
        &["line 61", "`num_pv`", "differs from line 13"],
    );
    assert_eq!(field(&lines, 31, c_done), "0", "advertiser 0 must still be bidding at tick 29");
    check(&|l| set(l, 30, c_done, "1"), &["line 32", "`done` returns to 0"]);
    // rows that contradict themselves
    check(
        &|l| set(l, 7, c_exposures, &(field(l, 7, c_wins).parse::<u64>().unwrap() + 1).to_string()),
        &["line 8", "exceeds `wins`"],
    );
    check(&|l| set(l, 7, c_wins, "999999999"), &["line 8", "exceeds `num_pv`"]);
    check(&|l| set(l, 7, c_reward, "1e6"), &["line 8", "`reward`", "exceeds `exposures`"]);
    // an advertiser id that does not fit, a line that never ends
    check(&|l| set(l, 2, c_adv, "99999999999999999999999"), &["line 3", "`advertiser`"]);
    check(&|l| l[4] = "1".repeat(MAX_ROW_BYTES + 10), &["line 5", "longer than"]);
    // sizes: the rows read, and the steps the metadata declares, against the budget
    let too_large =
        |p: &std::path::Path, budget: MemoryBudget, expect: &str| match TrajectoryDataset::load_within(p, budget) {
            Err(AigbError::Core(RlCoreError::TooLarge { what, .. })) => {
                assert!(what.contains(expect) && what.contains(&p.display().to_string()), "{what}")
            }
            other => panic!("{other:?}"),
        };
    too_large(&path, MemoryBudget::bytes(20_000), "declares");
    assert!(TrajectoryDataset::load_within(&path, MemoryBudget::bytes(10 << 20)).is_ok());
    let with_meta = |meta: &DatasetMeta| {
        let mut l = lines.clone();
        l[0] = format!("# aigb-trajectories v1 {}", serde_json::to_string(meta).unwrap());
        let p = dir.path().join("meta.csv");
        std::fs::write(&p, l.join("\n")).unwrap();
        p
    };
    // without declared periods the rows are counted as they are read
    let mut meta = ds.meta.clone();
    meta.periods.clear();
    too_large(&with_meta(&meta), MemoryBudget::bytes(20_000), "steps read");
    let mut meta = ds.meta.clone();
    meta.num_ticks = 1 << 50;
    too_large(&with_meta(&meta), MemoryBudget::default(), "declares");
    // a metadata advertiser that is itself invalid
    let mut meta = ds.meta.clone();
    meta.advertisers[2].category = usize::MAX;
    let p = with_meta(&meta);
    assert!(
        matches!(TrajectoryDataset::load(&p), Err(AigbError::Corrupt { reason, .. }) if reason.contains("advertisers[2].category"))
    );
}

#[test]
fn a_policy_with_absurd_layer_sizes_is_a_shape_error() {
    // `input · output` overflowed (a panic in debug builds) on a deserialised policy
    let json = format!(
        r#"{{"norm": {{"mean": {m:?}, "std": {m:?}}}, "layers": [{{"input": 16, "output": {big}, "weight": [], "bias": []}}],
            "cpa_relative": false, "name": "x"}}"#,
        m = vec![0.0f32; 16],
        big = usize::MAX / 4
    );
    let p: MlpPolicy = serde_json::from_str(&json).unwrap();
    assert!(matches!(p.validate(), Err(AigbError::Shape { what, .. }) if what == "layers[0]"));
}
