//! A whole AuctionNet period replayed tick by tick (`tests/fixtures/auctionnet_period.json`,
//! written by `scripts/aigb_period_fixture.py`: AuctionNet's own `run_test` loop, drop loop and
//! `BiddingEnv` from a local, uncommitted copy, with every auction call's draws and every drop
//! choice recorded).
//!
//! Five advertisers bid with three simple rules, mirrored here in `f32` exactly as the script
//! computes them; the period has 8 ticks, 13 auction calls, 16 drop choices (partial and full,
//! second drop rounds in ticks 2 and 4, two advertisers overspending in tick 3) and two
//! advertisers that stop bidding. Compared exactly: every tick's remaining budgets, per
//! advertiser cost, conversions and wins, the final bids (after drops), every cell's slot,
//! price, exposure and conversion, the drop loop's candidates and the final budgets. The least
//! winning cost is compared as `f32`: the reference's bids are float64 (its zero bids for
//! advertisers out of budget are), so its reserve floor is the `f64` 0.01 where ours is
//! `f32(0.01)`; every other least winning cost is equal in `f64`.

use std::path::Path;
use std::sync::{Arc, Mutex};

use aigb_sim::{
    Advertiser, AigbError, AuctionParams, Bidder, DropChoice, DropSource, Observer, PeriodDraws, PeriodInfo,
    RecordedDraws, RecordedDrop, RecordedDrops, RecordedPeriodDraws, SimParams, Simulator, TickAuction, TickContext,
    TickTraffic,
};
use rl_core::Params;
use serde_json::Value;

const N_ADV: usize = 5;

fn fixture() -> Value {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/auctionnet_period.json");
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

fn floats(v: &Value) -> Vec<f64> {
    v.as_array().unwrap().iter().map(|x| x.as_f64().unwrap()).collect()
}

fn ints(v: &Value) -> Vec<usize> {
    v.as_array().unwrap().iter().map(|x| x.as_u64().unwrap() as usize).collect()
}

fn bools(v: &Value) -> Vec<bool> {
    ints(v).into_iter().map(|x| x == 1).collect()
}

/// The script's rules: `bid = f32(alpha) · pValue` with `alpha = m·cpa` (fixed),
/// `m·cpa·remaining/budget` (paced), `m·cpa·(1.5 − 0.5·last tick's win rate)` (winrate).
#[derive(Debug)]
struct Rule {
    kind: String,
    m: f64,
    cpa: f64,
}

impl Bidder for Rule {
    fn name(&self) -> String {
        self.kind.clone()
    }
    fn begin_period(&mut self, _: &PeriodInfo) -> aigb_sim::Result<()> {
        Ok(())
    }
    fn bid(&mut self, ctx: &TickContext<'_>, out: &mut [f32]) -> aigb_sim::Result<()> {
        let alpha = match self.kind.as_str() {
            "fixed" => self.m * self.cpa,
            "paced" => self.m * self.cpa * ctx.remaining_budget / ctx.info.budget,
            _ => match ctx.history.last() {
                Some(r) => self.m * self.cpa * (1.5 - 0.5 * (r.wins as f64 / r.num_pv as f64)),
                None => self.m * self.cpa,
            },
        };
        for (b, &p) in out.iter_mut().zip(ctx.pvalues) {
            *b = alpha as f32 * p;
        }
        Ok(())
    }
}

struct Setup {
    sim: Simulator,
    traffic: Vec<TickTraffic>,
    draws: RecordedPeriodDraws,
    drops: Vec<RecordedDrop>,
    won: Vec<Vec<usize>>,
}

fn setup(fx: &Value) -> Setup {
    assert_eq!(fx["num_advertisers"].as_u64().unwrap() as usize, N_ADV);
    let (cpas, budgets) = (floats(&fx["cpas"]), floats(&fx["budgets"]));
    let advertisers: Vec<Advertiser> =
        (0..N_ADV).map(|a| Advertiser { budget: budgets[a], cpa: cpas[a], category: a }).collect();
    let params = SimParams::default()
        .auction(
            AuctionParams::default()
                .reserve_price(fx["reserve"].as_f64().unwrap())
                .exposure(floats(&fx["slot_coefficients"])),
        )
        .min_remaining_budget(fx["min_remaining_budget"].as_f64().unwrap())
        .check()
        .unwrap();
    let sim = Simulator::new(params, advertisers).unwrap();
    let (mut traffic, mut calls, mut drops, mut won) = (vec![], vec![], vec![], vec![]);
    for tk in fx["ticks"].as_array().unwrap() {
        let n = tk["num_pv"].as_u64().unwrap() as usize;
        let f32s = |k: &str| floats(&tk[k]).into_iter().map(|x| x as f32).collect::<Vec<f32>>();
        traffic.push(TickTraffic::from_values(traffic.len(), n, f32s("pvalues"), f32s("sigmas")).unwrap());
        let conv = bools(&tk["conversion_draw"]);
        calls.push(
            tk["exposure_draws"]
                .as_array()
                .unwrap()
                .iter()
                .map(|e| RecordedDraws::new(n, 3, N_ADV, bools(e), conv.clone()).unwrap())
                .collect::<Vec<_>>(),
        );
        for d in tk["drops"].as_array().unwrap() {
            drops.push(RecordedDrop {
                tick: d["tick"].as_u64().unwrap() as usize,
                round: d["round"].as_u64().unwrap() as usize,
                advertiser: d["advertiser"].as_u64().unwrap() as usize,
                slot: d["slot"].as_u64().unwrap() as usize,
                dropped: ints(&d["dropped"]),
            });
            won.push(ints(&d["won"]));
        }
    }
    Setup { sim, traffic, draws: RecordedPeriodDraws::new(calls), drops, won }
}

fn bidders(fx: &Value) -> Vec<Box<dyn Bidder>> {
    let cpas = floats(&fx["cpas"]);
    fx["rules"]
        .as_array()
        .unwrap()
        .iter()
        .zip(cpas)
        .map(|(r, cpa)| {
            Box::new(Rule { kind: r[0].as_str().unwrap().into(), m: r[1].as_f64().unwrap(), cpa }) as Box<dyn Bidder>
        })
        .collect()
}

/// Recorded drops that also check the drop loop's candidates against the reference's.
struct CheckedDrops {
    inner: RecordedDrops,
    won: Vec<Vec<usize>>,
    asked: usize,
}

impl DropSource for CheckedDrops {
    fn begin_period(&mut self, num_ticks: usize) -> aigb_sim::Result<()> {
        self.inner.begin_period(num_ticks)
    }
    fn choose(&mut self, choice: &DropChoice<'_>, out: &mut Vec<usize>) -> aigb_sim::Result<()> {
        assert_eq!(choice.won, &self.won[self.asked][..], "candidates of drop choice {}", self.asked);
        self.asked += 1;
        self.inner.choose(choice, out)
    }
    fn end_tick(&mut self, tick: usize, rounds: usize) -> aigb_sim::Result<()> {
        self.inner.end_tick(tick, rounds)
    }
}

#[derive(Default)]
struct Seen {
    bids: Vec<Vec<f32>>,
    auctions: Vec<TickAuction>,
}

struct Keep(Arc<Mutex<Seen>>);

impl Observer for Keep {
    fn on_tick(&mut self, _: u64, _: &TickTraffic, bids: &[f32], auction: &TickAuction) {
        let mut s = self.0.lock().unwrap();
        s.bids.push(bids.to_vec());
        s.auctions.push(auction.clone());
    }
}

#[test]
fn a_recorded_auctionnet_period_replays_tick_by_tick() {
    let fx = fixture();
    let Setup { sim, traffic, mut draws, drops, won } = setup(&fx);
    let n_drops = drops.len();
    let mut drops = CheckedDrops { inner: RecordedDrops::new(drops), won, asked: 0 };
    let seen = Arc::new(Mutex::new(Seen::default()));
    let mut keep = Keep(seen.clone());
    let res = sim.replay_period(0, &traffic, &mut bidders(&fx), Some(&mut keep), &mut draws, &mut drops).unwrap();
    assert_eq!((drops.asked, drops.inner.used(), n_drops), (16, 16, 16));
    assert_eq!(draws.calls().iter().sum::<usize>(), 13);
    assert_eq!(res.drop_rounds, 5);
    let seen = seen.lock().unwrap();
    let (mut floored, mut inactive) = (0, 0);
    for (t, tk) in fx["ticks"].as_array().unwrap().iter().enumerate() {
        let n = tk["num_pv"].as_u64().unwrap() as usize;
        let (remaining, cost) = (floats(&tk["remaining_budget"]), floats(&tk["advertiser_cost"]));
        let (conv, wins) = (ints(&tk["advertiser_conversions"]), ints(&tk["advertiser_wins"]));
        for a in 0..N_ADV {
            let r = &res.advertisers[a].ticks[t];
            assert_eq!(r.remaining_budget, remaining[a], "tick {t}: remaining budget of advertiser {a}");
            assert_eq!(r.cost, cost[a], "tick {t}: cost of advertiser {a}");
            assert_eq!(r.conversions as usize, conv[a], "tick {t}: conversions of advertiser {a}");
            assert_eq!(r.wins as usize, wins[a], "tick {t}: wins of advertiser {a}");
            assert_eq!(r.active, remaining[a] >= 0.3, "tick {t}: advertiser {a} active");
            inactive += usize::from(!r.active);
        }
        let bids: Vec<f32> = floats(&tk["bids"]).into_iter().map(|x| x as f32).collect();
        assert_eq!(seen.bids[t], bids, "tick {t}: bids after the drop loop");
        let au = &seen.auctions[t];
        let (slot, price, exposed, convs) =
            (floats(&tk["slot"]), floats(&tk["cost"]), bools(&tk["exposed"]), bools(&tk["conversion"]));
        for a in 0..N_ADV {
            for i in 0..n {
                let s = (0..3).find(|&s| au.winner[i * 3 + s] == a as u32);
                let c = a * n + i;
                assert_eq!(s.map_or(0.0, |s| (s + 1) as f64), slot[c], "tick {t}: slot of {a} in impression {i}");
                let (pr, ex, cv) = s.map_or((0.0, false, false), |s| {
                    (f64::from(au.price[i * 3 + s]), au.exposed[i * 3 + s], au.conversion[i * 3 + s])
                });
                assert_eq!(pr, price[c], "tick {t}: price of {a} in impression {i}");
                assert_eq!(ex, exposed[c], "tick {t}: exposure of {a} in impression {i}");
                assert_eq!(cv, convs[c], "tick {t}: conversion of {a} in impression {i}");
            }
        }
        for (i, lwc) in floats(&tk["least_winning_cost"]).into_iter().enumerate() {
            assert_eq!(au.least_winning_cost[i], lwc as f32, "tick {t}: least winning cost of impression {i}");
            if f64::from(au.least_winning_cost[i]) != lwc {
                assert_eq!(lwc, 0.01, "only the reserve floor differs in f64");
                floored += 1;
            }
        }
    }
    assert!(floored > 0 && inactive >= 6, "{floored} {inactive}");
    // AuctionNet's exposure stream: NumPy draws one uniform for each of an impression's three
    // top-ranked cells (p = 1, 0.8, 0.6; none for p = 0), so between two calls of a tick only
    // the impressions whose bids the drop round changed can see other draws
    let mut moved = 0;
    for tk in fx["ticks"].as_array().unwrap() {
        let calls: Vec<Vec<bool>> = tk["exposure_draws"].as_array().unwrap().iter().map(bools).collect();
        for c in 1..calls.len() {
            let dropped: Vec<usize> = tk["drops"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|d| d["round"].as_u64() == Some(c as u64))
                .flat_map(|d| ints(&d["dropped"]))
                .collect();
            for i in 0..tk["num_pv"].as_u64().unwrap() as usize {
                let same = calls[c][i * 3..i * 3 + 3] == calls[c - 1][i * 3..i * 3 + 3];
                assert!(same || dropped.contains(&i), "impression {i} kept its bids but not its draws");
                moved += usize::from(!same);
            }
        }
    }
    assert!(moved > 0);
    let final_budget = floats(&fx["final_remaining_budget"]);
    for (a, adv) in res.advertisers.iter().enumerate() {
        let r = adv.ticks.last().unwrap();
        assert_eq!(r.remaining_budget - r.cost, final_budget[a], "final budget of advertiser {a}");
    }
}

#[test]
fn recordings_that_do_not_fit_the_period_are_typed_errors() {
    let fx = fixture();
    let replay = |draws: &mut RecordedPeriodDraws, drops: &mut RecordedDrops, traffic: &[TickTraffic]| {
        let s = setup(&fx);
        s.sim.replay_period(0, traffic, &mut bidders(&fx), None, draws, drops)
    };
    let s = setup(&fx);
    let calls = |s: &Setup| -> Vec<Vec<RecordedDraws>> {
        (0..s.traffic.len())
            .map(|t| {
                let mut d = s.draws.clone();
                (0..d.calls()[t]).map(|c| d.draws(t, c).unwrap().clone()).collect()
            })
            .collect()
    };
    let is_replay = |r: aigb_sim::Result<aigb_sim::PeriodResult>| matches!(r, Err(AigbError::Replay { .. }));
    // the recording is fine as it is
    assert!(replay(&mut s.draws.clone(), &mut RecordedDrops::new(s.drops.clone()), &s.traffic).is_ok());
    // the draws run out (tick 2 lost its last drop-round call)
    let mut short = calls(&s);
    short[2].pop();
    let err = replay(&mut RecordedPeriodDraws::new(short), &mut RecordedDrops::new(s.drops.clone()), &s.traffic);
    assert!(is_replay(err));
    // a call left over (tick 1 never had a drop round)
    let mut long = calls(&s);
    let extra = long[1][0].clone();
    long[1].push(extra);
    let err = replay(&mut RecordedPeriodDraws::new(long), &mut RecordedDrops::new(s.drops.clone()), &s.traffic);
    assert!(is_replay(err));
    // another number of ticks
    let mut fewer = calls(&s);
    fewer.pop();
    let err = replay(&mut RecordedPeriodDraws::new(fewer), &mut RecordedDrops::new(s.drops.clone()), &s.traffic);
    assert!(is_replay(err));
    // draws of another shape
    let mut shaped = calls(&s);
    shaped[0][0] = RecordedDraws::new(1, 3, N_ADV, vec![true; 3], vec![false; N_ADV]).unwrap();
    let err = replay(&mut RecordedPeriodDraws::new(shaped), &mut RecordedDrops::new(s.drops.clone()), &s.traffic);
    assert!(matches!(err, Err(AigbError::Shape { .. })));
    // drop choices run out, are left over, name another advertiser, or drop what was not won
    let mut d = s.drops.clone();
    d.pop();
    assert!(is_replay(replay(&mut s.draws.clone(), &mut RecordedDrops::new(d), &s.traffic)));
    let mut d = s.drops.clone();
    d.insert(0, RecordedDrop { tick: 0, round: 1, advertiser: 0, slot: 0, dropped: vec![0] });
    assert!(is_replay(replay(&mut s.draws.clone(), &mut RecordedDrops::new(d), &s.traffic)));
    let mut d = s.drops.clone();
    d[0].advertiser = (d[0].advertiser + 1) % N_ADV;
    assert!(is_replay(replay(&mut s.draws.clone(), &mut RecordedDrops::new(d), &s.traffic)));
    let mut d = s.drops.clone();
    let not_won = (0..).find(|i| !s.won[0].contains(i)).unwrap();
    d[0].dropped[0] = not_won;
    assert!(is_replay(replay(&mut s.draws.clone(), &mut RecordedDrops::new(d), &s.traffic)));
    let mut d = s.drops.clone();
    d[0].dropped.pop();
    assert!(is_replay(replay(&mut s.draws.clone(), &mut RecordedDrops::new(d), &s.traffic)));
    let mut d = s.drops.clone();
    d.push(RecordedDrop { tick: 99, round: 1, advertiser: 0, slot: 0, dropped: vec![0] });
    assert!(is_replay(replay(&mut s.draws.clone(), &mut RecordedDrops::new(d), &s.traffic)));
    // impressions of another market
    let t = TickTraffic::from_values(0, 2, vec![0.1; 4], vec![0.0; 4]).unwrap();
    let err = replay(&mut s.draws.clone(), &mut RecordedDrops::new(s.drops.clone()), &[t]);
    assert!(matches!(err, Err(AigbError::Shape { .. })));
    assert!(matches!(
        replay(&mut s.draws.clone(), &mut RecordedDrops::new(s.drops.clone()), &[]),
        Err(AigbError::Empty { .. })
    ));
}

fn seeded_market() -> (Simulator, Vec<Box<dyn Bidder>>) {
    use aigb_sim::{auctionnet_advertisers, FixedCpaBidder, FixedCpaParams, PidBidder, PidParams};
    let pv = 3_000;
    let sim = Simulator::new(
        SimParams::default().pv_num(pv).check().unwrap(),
        auctionnet_advertisers(pv as f64 / 500_000.0 * 2.0),
    )
    .unwrap();
    let (pid, fixed) =
        (PidParams::default().check().unwrap(), FixedCpaParams::default().cpa_multiplier(3.0).check().unwrap());
    let bidders = (0..48)
        .map(|i| -> Box<dyn Bidder> {
            if i % 3 == 0 {
                Box::new(FixedCpaBidder::new(fixed.clone()))
            } else {
                Box::new(PidBidder::new(pid.clone()))
            }
        })
        .collect();
    (sim, bidders)
}

fn fresh_bidders() -> Vec<Box<dyn Bidder>> {
    seeded_market().1
}

/// The seeded draws, but every drop round re-runs every impression (as with a recording).
struct FullRerun(aigb_sim::SeededPeriodDraws);

impl PeriodDraws for FullRerun {
    type Draws = aigb_sim::SeededDraws;
    fn draws(&mut self, tick: usize, call: usize) -> aigb_sim::Result<&mut aigb_sim::SeededDraws> {
        self.0.draws(tick, call)
    }
    fn same_draws_every_call(&self) -> bool {
        false
    }
}

#[test]
fn the_seeded_sources_replay_run_period_on_given_impressions_and_with_full_reruns() {
    let (sim, mut bidders) = seeded_market();
    let period = 4;
    let base = sim.run_period(period, &mut bidders, None).unwrap();
    assert!(base.drop_rounds > 0);
    // the same period on its own impressions, handed in
    let pt = sim.traffic(period).unwrap();
    let traffic: Vec<TickTraffic> = (0..pt.counts().len())
        .map(|t| {
            let mut tt = TickTraffic::default();
            pt.fill_tick(t, &mut tt).unwrap();
            tt
        })
        .collect();
    let (mut d, mut s) = (sim.seeded_draws(period), sim.seeded_drops(period));
    let given = sim.replay_period(period, &traffic, &mut fresh_bidders(), None, &mut d, &mut s).unwrap();
    assert_eq!(given, base);
    // re-running every impression in each drop round changes nothing with counter-based draws
    let (mut d, mut s) = (FullRerun(sim.seeded_draws(period)), sim.seeded_drops(period));
    let full = sim.run_period_with(period, &mut fresh_bidders(), None, &mut d, &mut s).unwrap();
    assert_eq!(full, base);
    // another period's drop stream gives another period
    let (mut d, mut s) = (sim.seeded_draws(period), sim.seeded_drops(period + 1));
    let other = sim.run_period_with(period, &mut fresh_bidders(), None, &mut d, &mut s).unwrap();
    assert_ne!(other, base);
}

/// A rule that makes a drop choice from the loop's request.
type Choose = fn(&DropChoice<'_>) -> Vec<usize>;

/// A drop source that returns what it is told to, to check the simulator's checks.
struct Bad(Choose);

impl DropSource for Bad {
    fn choose(&mut self, choice: &DropChoice<'_>, out: &mut Vec<usize>) -> aigb_sim::Result<()> {
        out.extend((self.0)(choice));
        Ok(())
    }
}

#[test]
fn a_drop_source_must_give_n_drop_distinct_won_impressions() {
    let (sim, _) = seeded_market();
    let cases: [(&str, Choose); 4] = [
        ("needs", |c| c.won[..c.n_drop - 1].to_vec()),
        ("needs", |c| c.won.iter().copied().chain([usize::MAX]).take(c.n_drop + 1).collect()),
        // a repeat where two are asked for, the right count otherwise (then the loop goes on)
        ("twice", |c| if c.n_drop >= 2 { vec![c.won[0]; c.n_drop] } else { c.won[..1].to_vec() }),
        ("not one the advertiser won", |c| (0..).filter(|i| !c.won.contains(i)).take(c.n_drop).collect()),
    ];
    for (reason, f) in cases {
        let mut d = sim.seeded_draws(4);
        match sim.run_period_with(4, &mut fresh_bidders(), None, &mut d, &mut Bad(f)) {
            Err(AigbError::Replay { reason: r, .. }) => assert!(r.contains(reason), "{reason}: {r}"),
            other => panic!("{reason}: {other:?}"),
        }
    }
    // the first n_drop candidates are a valid (if not uniform) choice
    let mut d = sim.seeded_draws(4);
    let r = sim.run_period_with(4, &mut fresh_bidders(), None, &mut d, &mut Bad(|c| c.won[..c.n_drop].to_vec()));
    assert!(r.unwrap().drop_rounds > 0);
}
