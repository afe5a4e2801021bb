//! The script sandbox as an adversary meets it, and the committed encoders' outputs.
//!
//! `committed_scripts_give_the_recorded_factors` compares every committed encoder script (the
//! hand-written ones, the dialog fixtures' answers) and a script that touches every part of the
//! library LLM answers use, bit for bit, with `fixtures/sandbox_golden.json`. That file was
//! written by the engine before the sandbox was narrowed (all of Rhai's `StandardPackage`,
//! commit 96c7226); `LARE_WRITE_SANDBOX_GOLDEN=1 cargo test -p lare --test sandbox` rewrites it.

use std::time::{Duration, Instant};

use lare::llm::tasks;
use lare::{LareError, LatentEncoder, Layout, SandboxLimits, ScriptEncoder, ScriptErrorKind, ScriptSpec, StateSource};
use rand::Rng;
use rl_core::Params;

fn dir(p: &str) -> String {
    format!("{}/{p}", env!("CARGO_MANIFEST_DIR"))
}

/// A script that uses the parts of the language and library reward code needs.
const LIBRARY: &str = r#"
fn helper(x) { x * 2.0 }
fn evaluation_func(obs, act) {
    let a = [];
    for i in 0..5 { a.push(i * obs.theta_dot); }
    let s = 0.0;
    let k = 0;
    while k < a.len() { s += a[k]; k += 1; }
    let m = #{ x: obs.cos_theta, y: obs.sin_theta };
    m.z = 3;
    let b = a.map(|v| v * v).filter(|v| v > 0.1);
    let c = a;
    c.sort();
    let d = a;
    d.sort(|x, y| if x < y { 1 } else if x > y { -1 } else { 0 });
    let e = a;
    e.sort_desc();
    let r = a.reduce(|acc, v| acc + v, 0.0);
    let txt = "abc" + k;
    let parts = "1,2,3".split(",");
    let n = 0.0;
    for p in parts { n += parse_float(p); }
    let idx = a.index_of(|v| v > 0.5);
    let flag = if obs.theta_dot > 0.0 && act[0] < 1.0 || false { 1 } else { 0 };
    let dd = [1, 1, 2, 2, 3];
    dd.dedup();
    let ee = [1.0, 1.5, 3.0, 3.2];
    ee.dedup(|x, y| abs(x - y) < 0.6);
    let total = 0;
    for (v, i) in [3, 4, 5] { total += v * i; }
    [s, sum(a), mean(b), m.x * m.y + m.z, helper(obs.cos_theta), floor(obs.theta_dot * 10.0),
     ceiling(obs.sin_theta), round(obs.theta_dot * 3.0), exp(-sq(obs.theta_dot)),
     ln(1.0 + sq(obs.theta_dot)), log(2.0 + obs.cos_theta), sin(obs.theta_dot), cos(act[0]),
     tan(0.1 * obs.theta_dot), asin(0.5 * obs.sin_theta), acos(0.5 * obs.cos_theta),
     atan(obs.theta_dot), atan(obs.sin_theta, obs.cos_theta), sinh(0.2), tanh(obs.theta_dot),
     min(obs.cos_theta, obs.sin_theta), max(obs.theta_dot, 0.0), min(1, 2), max(3, 4),
     abs(-3), abs(obs.sin_theta), sqrt(2.0), PI(), E(), sign(obs.theta_dot), a[0], a[-1],
     c[0], d[0], e[0], r, txt.len(), m.len(), b.len(), 7 % 3, 2 ** 3, 2.0 ** 0.5, to_float(5) / 2,
     5 / 2, to_int(obs.theta_dot * 10.0), if a.contains(0.0) { 1 } else { 0 }, n, idx, flag,
     dd.len(), ee.len(), total, clip(obs.theta_dot, -1.0, 1.0), dist2d(0, 0, 3, 4),
     safe_div(1.0, obs.cos_theta), dot(act, act), norm(a), sq(act[0]),
     a.extract(1, 2).len(), [1, 2] + [3] == [1, 2, 3], fraction(obs.theta_dot), a.some(|v| v > 0.9),
     if "abc" < "abd" { 1 } else { 0 }, if m.contains("x") { 1 } else { 0 }, m.keys().len()]
}
"#;

/// Every committed script: (name, task, source).
fn committed_scripts() -> Vec<(String, String, String)> {
    let mut out = Vec::new();
    for task in ["pendulum", "simple_spread", "hopper", "half_cheetah"] {
        let src = std::fs::read_to_string(dir(&format!("encoders/hand_written/{task}.rhai"))).unwrap();
        out.push((format!("hand_written/{task}"), task.to_string(), src));
    }
    for dialog in ["pendulum_repair", "always_broken"] {
        let text = std::fs::read_to_string(dir(&format!("tests/fixtures/dialogs/{dialog}.json"))).unwrap();
        let mut sources = Vec::new();
        collect_functions(&serde_json::from_str(&text).unwrap(), &mut sources);
        assert!(!sources.is_empty(), "{dialog}");
        for (i, src) in sources.into_iter().enumerate() {
            out.push((format!("dialogs/{dialog}[{i}]"), "pendulum".to_string(), src));
        }
    }
    // the library script (its `bool` factors are not numbers: the last four make it a BadOutput,
    // so it is run once as is and once without them)
    out.push(("library".into(), "pendulum".into(), LIBRARY.into()));
    let cut = LIBRARY.rfind(", [1, 2] + [3]").unwrap();
    let numeric = format!("{}]\n}}\n", &LIBRARY[..cut]);
    out.push(("library_numeric".into(), "pendulum".into(), numeric));
    out
}

/// The `Functions` strings of the JSON answers inside a dialog fixture.
fn collect_functions(v: &serde_json::Value, out: &mut Vec<String>) {
    match v {
        serde_json::Value::String(s) => {
            let body = s.trim().trim_start_matches("```json").trim_end_matches("```").trim();
            if let Ok(serde_json::Value::Object(m)) = serde_json::from_str::<serde_json::Value>(body) {
                if let Some(serde_json::Value::String(f)) = m.get("Functions") {
                    out.push(f.clone());
                }
            }
        }
        serde_json::Value::Array(a) => a.iter().for_each(|x| collect_functions(x, out)),
        serde_json::Value::Object(m) => m.values().for_each(|x| collect_functions(x, out)),
        _ => {}
    }
}

fn task_interface(task: &str) -> (Layout, usize, StateSource) {
    let p = match task {
        "simple_spread" => tasks::simple_spread(3).unwrap(),
        other => tasks::by_name(other).unwrap(),
    };
    (p.obs_layout, p.act_dim, p.state_source)
}

/// What one script gives on 16 fixed states: factor bit patterns per state, or an error class.
fn run(task: &str, src: &str) -> serde_json::Value {
    let (layout, act_dim, source) = task_interface(task);
    let mut rng = rl_core::rng_from_seed(7);
    let states: Vec<(Vec<f32>, Vec<f32>)> = (0..16)
        .map(|_| {
            let o = (0..layout.dim).map(|_| rng.random_range(-1.0f32..1.0)).collect();
            let a = (0..act_dim).map(|_| rng.random_range(-1.0f32..1.0)).collect();
            (o, a)
        })
        .collect();
    let spec = ScriptSpec { source: src.into(), obs_layout: layout, act_dim, n_factors: 1, state_source: source };
    let enc = match ScriptEncoder::new(spec, SandboxLimits::default().check().unwrap()) {
        Ok(e) => e,
        Err(LareError::Script { kind, .. }) => return serde_json::json!({ "compile_error": format!("{kind:?}") }),
        Err(e) => panic!("{e}"),
    };
    let rows: Vec<serde_json::Value> = states
        .iter()
        .map(|(o, a)| match enc.call(o, a) {
            Ok(f) => serde_json::json!(f.iter().map(|x| x.to_bits()).collect::<Vec<u32>>()),
            Err(LareError::Script { kind, .. }) => serde_json::json!(format!("{kind:?}")),
            Err(e) => panic!("{e}"),
        })
        .collect();
    serde_json::Value::Array(rows)
}

#[test]
fn committed_scripts_give_the_recorded_factors() {
    let got: serde_json::Map<String, serde_json::Value> =
        committed_scripts().into_iter().map(|(name, task, src)| (name, run(&task, &src))).collect();
    let path = dir("tests/fixtures/sandbox_golden.json");
    if std::env::var_os("LARE_WRITE_SANDBOX_GOLDEN").is_some() {
        std::fs::write(&path, serde_json::to_string_pretty(&got).unwrap() + "\n").unwrap();
    }
    let want: serde_json::Map<String, serde_json::Value> =
        serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    assert_eq!(got.keys().collect::<Vec<_>>(), want.keys().collect::<Vec<_>>());
    for (name, w) in &want {
        assert_eq!(&got[name], w, "{name}");
    }
    // the library script really ran (not an error on every state)
    assert!(got["library_numeric"][0].is_array(), "{}", got["library_numeric"]);
}
