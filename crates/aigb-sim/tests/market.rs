//! Market-level tests: budget cut-off and drop loop, bad input, determinism, bidder smoke runs,
//! logged data round trips and held-out evaluation.

use aigb_sim::*;
use rl_core::Params;

const PV: usize = 4_000;

fn sim(pv: usize) -> Simulator {
    Simulator::new(SimParams::default().pv_num(pv).check().unwrap(), auctionnet_advertisers(pv as f64 / 500_000.0))
        .unwrap()
}

fn pid_market(n: usize) -> Vec<Box<dyn Bidder>> {
    let p = PidParams::default().check().unwrap();
    (0..n).map(|_| Box::new(PidBidder::new(p.clone())) as Box<dyn Bidder>).collect()
}

#[derive(Debug)]
struct Constant(f32);
impl Bidder for Constant {
    fn name(&self) -> String {
        "constant".into()
    }
    fn begin_period(&mut self, _: &PeriodInfo) -> Result<()> {
        Ok(())
    }
    fn bid(&mut self, _: &TickContext<'_>, out: &mut [f32]) -> Result<()> {
        out.fill(self.0);
        Ok(())
    }
}

#[test]
fn score_by_hand() {
    assert_eq!(score(10.0, 300.0, 40.0, 2.0), 10.0);
    assert!((score(10.0, 500.0, 40.0, 2.0) - 6.4).abs() < 1e-9); // CPA 50 > 40: 10 · 0.8²
    assert_eq!(score(0.0, 5.0, 40.0, 2.0), 0.0);
}

#[test]
fn overspenders_are_cut_back_to_their_budget_and_stop() {
    // four advertisers bidding far above everyone's value: all would overspend in tick 0
    let ads: Vec<Advertiser> =
        [50.0, 100.0, 200.0, 5000.0].iter().map(|&b| Advertiser { budget: b, cpa: 100.0, category: 0 }).collect();
    let s = Simulator::new(SimParams::default().pv_num(20_000).check().unwrap(), ads).unwrap();
    let mut bidders: Vec<Box<dyn Bidder>> = vec![
        Box::new(Constant(1.0)),
        Box::new(Constant(0.9)),
        Box::new(Constant(0.8)),
        Box::new(Constant(0.7)),
        // padding advertiser 5 is absent: 4 bidders, 4 advertisers
    ];
    let res = s.run_period(3, &mut bidders, None).unwrap();
    assert!(res.drop_rounds > 0);
    for a in &res.advertisers {
        assert!(a.cost() <= a.info.budget + 1e-9, "{} spent {} of {}", a.info.advertiser, a.cost(), a.info.budget);
        // once below the minimum remaining budget the advertiser no longer takes part
        let mut out = false;
        for t in &a.ticks {
            if out {
                assert!(!t.active && t.wins == 0 && t.cost == 0.0);
            }
            out |= t.remaining_budget - t.cost < 0.1;
        }
    }
    // the cut-off spends the budget (the drop loop removes no more than needed)
    for a in &res.advertisers[..3] {
        assert!(a.cost() >= 0.95 * a.info.budget, "{} spent {}", a.info.budget, a.cost());
    }
    // the lowest bidder never ranks in the top 3 while the others bid, and alone it wins nothing
    // (AuctionNet's reserve rule: a slot sells only if the next bid exceeds the reserve)
    assert_eq!(res.advertisers[3].wins(), 0);
}

#[test]
fn bad_bids_and_bad_markets_are_typed_errors() {
    let s = sim(PV);
    let mut b = pid_market(48);
    b[5] = Box::new(Constant(f32::NAN));
    match s.run_period(0, &mut b, None) {
        Err(AigbError::InvalidBid { advertiser: 5, tick: 0, index: 0, .. }) => {}
        other => panic!("{other:?}"),
    }
    b[5] = Box::new(Constant(-0.1));
    assert!(matches!(s.run_period(0, &mut b, None), Err(AigbError::InvalidBid { advertiser: 5, .. })));
    // AuctionNet clips negative bids
    let clip = Simulator::new(
        SimParams::default().pv_num(PV).compat(CompatParams::auctionnet()).check().unwrap(),
        auctionnet_advertisers(PV as f64 / 500_000.0),
    )
    .unwrap();
    let r = clip.run_period(0, &mut b, None).unwrap();
    assert_eq!(r.advertisers[5].wins(), 0);
    // wrong number of bidders, zero budget, empty market
    assert!(matches!(s.run_period(0, &mut pid_market(47), None), Err(AigbError::Shape { .. })));
    let mut ads = auctionnet_advertisers(1.0);
    ads[2].budget = 0.0;
    let e = Simulator::new(SimParams::default().check().unwrap(), ads).unwrap_err();
    assert!(e.to_string().contains("advertisers[2].budget"), "{e}");
    assert!(matches!(Simulator::new(SimParams::default().check().unwrap(), vec![]), Err(AigbError::Empty { .. })));
    assert!(SimParams::default().pv_num(0).check().unwrap_err().to_string().contains("traffic.pv_num"));
}

#[test]
fn runs_are_deterministic_and_threads_do_not_change_results() {
    let s = sim(PV);
    let a = s.run_period(4, &mut pid_market(48), None).unwrap();
    let b = s.run_period(4, &mut pid_market(48), None).unwrap();
    assert_eq!(a, b);
    let par = s.run_periods(&[4, 5, 6], 2, |_| Ok(pid_market(48))).unwrap();
    assert_eq!(par[0], a);
    let seq5 = s.run_period(5, &mut pid_market(48), None).unwrap();
    assert_eq!(par[1], seq5);
    assert_ne!(par[1], par[2]);
}

#[test]
fn every_rule_bidder_runs_and_respects_its_budget() {
    let s = sim(PV);
    let lp = OnlineLpParams::default().budget_scale(PV as f64 / 500_000.0).check().unwrap();
    let table = build_online_lp_table(&s, &[777], &lp).unwrap();
    assert!(!table.points(0, 0).is_empty());
    let specs = [
        BidderSpec::FixedCpa { cpa_multiplier: 1.0 },
        BidderSpec::Pid { initial_alpha: 15.0 },
        BidderSpec::PidCpa { cpa_multiplier: 1.0 },
        BidderSpec::OnlineLp,
    ];
    let mut bidders = build_lineup(&specs, 48, Some(&table), &lp).unwrap();
    bidders[7] = Box::new(NoisyBidder::new(
        PidBidder::new(PidParams::default().check().unwrap()),
        NoiseParams::default().check().unwrap(),
    ));
    let res = s.run_period(1, &mut bidders, None).unwrap();
    for a in &res.advertisers {
        assert!(a.cost() <= a.info.budget + 1e-9);
        assert!(a.score() >= 0.0 && a.score() <= a.conversions() as f64);
    }
    let names: Vec<&str> = res.advertisers[..4].iter().map(|a| a.bidder.as_str()).collect();
    assert_eq!(names, ["fixed-cpa", "pid", "pid-log", "online-lp"]);
    assert!(res.advertisers.iter().map(|a| a.conversions()).sum::<u64>() > 0);
}

#[test]
fn datasets_round_trip_and_malformed_files_are_rejected() {
    let s = sim(PV);
    let p = DataGenParams::default()
        .online_lp(OnlineLpParams::default().budget_scale(PV as f64 / 500_000.0))
        .lp_history_periods(vec![999])
        .check()
        .unwrap();
    let ds = generate_dataset(&s, &[0, 1], &p, &|_| {}).unwrap();
    assert_eq!(ds.trajectories.len(), 96);
    assert_eq!(ds.num_steps(), 96 * 48);
    assert_eq!(ds.periods(), vec![0, 1]);
    // heterogeneous mix: several behaviour bidders, varied actions
    let mut kinds: Vec<&str> = ds.trajectories.iter().map(|t| t.bidder.split('+').next().unwrap()).collect();
    kinds.sort_unstable();
    kinds.dedup();
    assert!(kinds.len() >= 3, "{kinds:?}");
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("d.csv");
    ds.save(&path).unwrap();
    let back = TrajectoryDataset::load(&path).unwrap();
    assert_eq!(back.trajectories, ds.trajectories);
    assert_eq!(back.meta.periods, vec![0, 1]);
    let pad = back.padded(48).unwrap();
    assert_eq!(pad.states.len(), 96 * 48 * STATE_DIM);
    assert!(pad.mask.iter().all(|&m| m == 0.0 || m == 1.0));
    // malformed variants: each names its line
    let text = std::fs::read_to_string(&path).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    let bad = |mutate: &dyn Fn(&mut Vec<String>), expect: &str| {
        let mut l: Vec<String> = lines.iter().map(|s| (*s).to_owned()).collect();
        mutate(&mut l);
        let p = dir.path().join("bad.csv");
        std::fs::write(&p, l.join("\n")).unwrap();
        match TrajectoryDataset::load(&p) {
            Err(AigbError::Corrupt { reason, .. }) => assert!(reason.contains(expect), "{reason} !~ {expect}"),
            other => panic!("{expect}: {other:?}"),
        }
    };
    bad(&|l| l[0] = "hello".into(), "line 1");
    bad(&|l| l[1] = l[1].replace("state_3", "state_x"), "header");
    bad(&|l| l[5] = l[5].replacen(',', ",,", 1), "line 6");
    let set_field = |l: &mut Vec<String>, line: usize, col: usize, v: &str| {
        let mut f: Vec<String> = l[line].split(',').map(str::to_owned).collect();
        f[col] = v.to_owned();
        l[line] = f.join(",");
    };
    bad(&|l| set_field(l, 5, 8, "abc"), "line 6: column 9 (`state_1`) is not a number");
    bad(&|l| set_field(l, 5, 8, "inf"), "not finite");
    bad(&|l| set_field(l, 5, 3, "-1"), "must be > 0");
    bad(&|l| set_field(l, 7, 4, "55.5"), "line 8: column 5 (`cpa`) = 55.5 differs from the metadata");
    bad(&|l| set_field(l, 7, 5, "someone-else"), "constant within a trajectory");
    bad(&|l| drop(l.remove(9)), "line 10: tick");
    bad(&|l| set_field(l, 4, 31, "2"), "`done` must be 0 or 1");
}

#[test]
fn held_out_evaluation_shares_nothing_with_training() {
    let s = sim(PV);
    let train = [0u64, 1, 2];
    let held = EvalParams::default()
        .periods(vec![10_000])
        .seeds(vec![0])
        .budget_ratios(vec![0.5, 1.0])
        .slots(vec![3])
        .lp_history_periods(vec![20_000])
        .check()
        .unwrap();
    let lp = OnlineLpParams::default().budget_scale(PV as f64 / 500_000.0);
    // a training period in the evaluation set (or in the competitors' history) is refused
    let leak = held.clone().into_inner().periods(vec![2]).check().unwrap();
    assert!(matches!(Evaluator::new(leak, &s, &train, lp.clone()), Err(AigbError::Leak { period: 2 })));
    let leak = held.clone().into_inner().lp_history_periods(vec![1]).check().unwrap();
    assert!(matches!(Evaluator::new(leak, &s, &train, lp.clone()), Err(AigbError::Leak { period: 1 })));
    // held-out traffic shares no random stream and no impression values with training traffic
    let cats = s.categories();
    for &tp in &train {
        let a = s.traffic(tp).unwrap();
        let b = s.traffic(10_000).unwrap();
        assert_ne!(a.counts(), b.counts());
        for t in [0, 20, 47] {
            for adv in [0, 17, 47] {
                assert_ne!(a.tick_stream_seed(t, adv), b.tick_stream_seed(t, adv));
            }
        }
        let (mut x, mut y) = (TickTraffic::default(), TickTraffic::default());
        a.fill_tick(20, &mut x).unwrap();
        b.fill_tick(20, &mut y).unwrap();
        let xs: std::collections::HashSet<u32> = x.pvalues.iter().filter(|v| **v > 0.0).map(|v| v.to_bits()).collect();
        let shared = y.pvalues.iter().filter(|v| **v > 0.0 && xs.contains(&v.to_bits())).count();
        assert!(shared * 1000 < y.pvalues.len(), "{shared} shared pValues of {}", y.pvalues.len());
        assert_eq!(cats.len(), 48);
    }
    let ev = Evaluator::new(held, &s, &train, lp).unwrap();
    let fixed = FixedCpaParams::default().check().unwrap();
    let rep = ev
        .evaluate("fixed-cpa", &|| Ok(Box::new(FixedCpaBidder::new(fixed.clone())) as Box<dyn Bidder>), &|_, _| {})
        .unwrap();
    assert_eq!(rep.rows.len(), 2);
    assert_eq!(rep.summary.len(), 2);
    assert!((rep.rows[0].budget - 0.5 * rep.rows[1].budget).abs() < 1e-9);
    assert!(rep.rows.iter().all(|r| r.slot == 3 && r.period == 10_000 && r.score >= 0.0));
}

/// The log-PID competitor (`BidderSpec::PidCpa`) keeps α ≤ 1.5·CPA, and the cap binds: in a
/// market at a small budget-per-impression its coefficient rises to the cap at some tick (part 1's
/// spec never passed the cap to the bidder, so the evaluation numbers did not move when it was
/// added; this test fails on that code: the uncapped log-PID ends far above 1.5·CPA).
#[test]
fn log_pid_cap_binds() {
    let s = sim(PV);
    let lp = OnlineLpParams::default().budget_scale(PV as f64 / 500_000.0).check().unwrap();
    let mut bidders = build_lineup(&[BidderSpec::PidCpa { cpa_multiplier: 1.0 }], 48, None, &lp).unwrap();
    let res = s.run_period(3, &mut bidders, None).unwrap();
    let mut at_cap = 0;
    for a in &res.advertisers {
        let cap = PID_CPA_CAP * a.info.cpa;
        for t in a.ticks.iter().filter(|t| t.active && t.pvalue_sum > 0.0) {
            let alpha = t.action();
            assert!(
                alpha <= cap * (1.0 + 1e-5),
                "advertiser {} tick {}: α {alpha} > cap {cap}",
                a.info.advertiser,
                t.tick
            );
            if alpha >= cap * (1.0 - 1e-5) {
                at_cap += 1;
            }
        }
    }
    assert!(at_cap > 0, "the cap never bound");
    // and the uncapped rule does exceed it in the same market (so the cap is what holds α down)
    let uncapped =
        PidParams::default().initial_alpha_cpa_multiplier(Some(1.0)).rule(PacingRule::pid()).check().unwrap();
    let mut free: Vec<Box<dyn Bidder>> =
        (0..48).map(|_| Box::new(PidBidder::new(uncapped.clone())) as Box<dyn Bidder>).collect();
    let res = s.run_period(3, &mut free, None).unwrap();
    let above = res
        .advertisers
        .iter()
        .flat_map(|a| a.ticks.iter().map(move |t| (t, a.info.cpa)))
        .filter(|(t, cpa)| t.active && t.action() > PID_CPA_CAP * cpa * 1.01)
        .count();
    assert!(above > 0);
}
