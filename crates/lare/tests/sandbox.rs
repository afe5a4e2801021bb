//! The script sandbox as an adversary meets it, and the committed encoders' outputs.
//!
//! `committed_scripts_give_the_recorded_factors` compares every committed encoder script (the
//! hand-written ones, the dialog fixtures' answers) and a script that touches every part of the
//! library LLM answers use, bit for bit, with `fixtures/sandbox_golden.json`. That file was
//! written by the engine before the sandbox was narrowed (all of Rhai's `StandardPackage`,
//! commit 96c7226); `LARE_WRITE_SANDBOX_GOLDEN=1 cargo test -p lare --test sandbox` rewrites it.

use std::time::{Duration, Instant};

use lare::llm::tasks;
use lare::{
    LareError, LatentEncoder, Layout, SandboxLimit, SandboxLimits, ScriptEncoder, ScriptErrorKind, ScriptSpec,
    StateSource,
};
use ndarray::Array2;
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

/// An error's class as the golden file records it (`limit:<name>` for a sandbox limit).
fn class(kind: &ScriptErrorKind) -> String {
    match kind {
        ScriptErrorKind::Limit { limit, .. } => format!("limit:{limit}"),
        other => format!("{other:?}"),
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
        Err(LareError::Script { kind, .. }) => return serde_json::json!({ "compile_error": class(&kind) }),
        Err(e) => panic!("{e}"),
    };
    let rows: Vec<serde_json::Value> = states
        .iter()
        .map(|(o, a)| match enc.call(o, a) {
            Ok(f) => serde_json::json!(f.iter().map(|x| x.to_bits()).collect::<Vec<u32>>()),
            Err(LareError::Script { kind, .. }) => serde_json::json!(class(&kind)),
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

fn encoder(src: &str, limits: SandboxLimits) -> lare::Result<ScriptEncoder> {
    let spec = ScriptSpec {
        source: src.into(),
        obs_layout: Layout::new().scalar("x", ""),
        act_dim: 1,
        n_factors: 1,
        state_source: StateSource::Current,
    };
    ScriptEncoder::new(spec, limits.check().unwrap())
}

fn script_error(r: lare::Result<Vec<f32>>) -> (ScriptErrorKind, String) {
    match r {
        Err(LareError::Script { kind, message }) => (kind, message),
        other => panic!("expected a script error, got {other:?}"),
    }
}

#[test]
fn sleep_and_clocks_are_not_callable() {
    for f in ["sleep(5)", "sleep(0.02)", "timestamp()"] {
        let src = format!("fn evaluation_func(obs, act) {{ {f}; [1.0] }}");
        let enc = encoder(&src, SandboxLimits::default()).unwrap();
        let t = Instant::now();
        let (kind, message) = script_error(enc.call(&[0.0], &[0.0]));
        assert_eq!(kind, ScriptErrorKind::Runtime, "{f}");
        assert!(message.contains("Function not found"), "{f}: {message}");
        assert!(t.elapsed() < Duration::from_secs(2), "{f}: {:?}", t.elapsed());
    }
}

/// The slowest built-in left (a scan of a full 10 000-element array, whose element comparisons
/// are not operations of their own) in a loop: the call ends within 2x its wall limit.
#[test]
fn a_loop_of_the_slowest_builtin_ends_within_twice_the_wall_limit() {
    let src = "fn evaluation_func(obs, act) { let a = []; a.pad(10000, 1.5); let n = 0;
               loop { if a.contains(2.0) { n += 1; } } [n] }";
    let wall_ms = 300;
    let enc = encoder(src, SandboxLimits::default().max_operations(u64::MAX).max_wall_ms(wall_ms)).unwrap();
    let t = Instant::now();
    let (kind, _) = script_error(enc.call(&[0.0], &[0.0]));
    let took = t.elapsed();
    assert_eq!(kind, ScriptErrorKind::Limit { limit: SandboxLimit::MaxWallMs, value: wall_ms });
    assert!(took >= Duration::from_millis(wall_ms), "{took:?}");
    assert!(took < Duration::from_millis(2 * wall_ms), "{took:?}");
}

#[test]
fn encode_batch_has_one_budget_for_all_its_rows() {
    // each row spends ~1 000 operations: 100 rows fit in 200 000, not in 50 000
    let src = "fn evaluation_func(obs, act) { let s = 0; for i in 0..300 { s += i; } [s + obs.x] }";
    let rows = Array2::<f32>::zeros((100, 1));
    let ok = encoder(src, SandboxLimits::default()).unwrap();
    assert_eq!(ok.encode_batch(rows.view(), rows.view(), rows.view()).unwrap().nrows(), 100);
    let tight = encoder(src, SandboxLimits::default().max_batch_operations(50_000)).unwrap();
    let e = tight.encode_batch(rows.view(), rows.view(), rows.view()).unwrap_err();
    let LareError::Script { kind, message } = e else { panic!("{e}") };
    assert_eq!(kind, ScriptErrorKind::Limit { limit: SandboxLimit::MaxBatchOperations, value: 50_000 });
    assert!(message.starts_with("row "), "{message}");
    // every row well inside max_wall_ms, the batch past max_batch_wall_ms
    let slow = "fn evaluation_func(obs, act) { let s = 0; for i in 0..20000 { s += i; } [s] }";
    let limits = SandboxLimits::default().max_operations(u64::MAX).max_batch_wall_ms(50);
    let enc = encoder(slow, limits).unwrap();
    let rows = Array2::<f32>::zeros((100_000, 1));
    let t = Instant::now();
    let e = enc.encode_batch(rows.view(), rows.view(), rows.view()).unwrap_err();
    assert!(t.elapsed() < Duration::from_secs(5), "{:?}", t.elapsed());
    assert!(
        matches!(
            e,
            LareError::Script { kind: ScriptErrorKind::Limit { limit: SandboxLimit::MaxBatchWallMs, value: 50 }, .. }
        ),
        "{e}"
    );
    // after a batch, single calls have no batch budget left over
    assert_eq!(tight.call(&[1.0], &[0.0]).unwrap().len(), 1);
}

#[test]
fn non_finite_factors_are_errors_from_call_encode_and_encode_batch() {
    let enc = encoder("fn evaluation_func(obs, act) { [1.0 / obs.x] }", SandboxLimits::default()).unwrap();
    assert!(matches!(enc.call(&[0.0], &[0.0]), Err(LareError::NonFinite { index: 0, .. })));
    let mut out = [0.0f32];
    assert!(matches!(enc.encode(&[0.0], &[0.0], &[0.0], &mut out), Err(LareError::NonFinite { index: 0, .. })));
    let rows = ndarray::array![[1.0f32], [0.0]];
    let e = enc.encode_batch(rows.view(), rows.view(), rows.view()).unwrap_err();
    assert!(matches!(&e, LareError::NonFinite { index: 0, what, .. } if what.contains("row 1")), "{e}");
}

#[test]
fn huge_source_and_deep_nesting_are_refused() {
    let src = format!("fn evaluation_func(obs, act) {{ [1.0] }} // {}", "x".repeat(1 << 20));
    let t = Instant::now();
    let e = encoder(&src, SandboxLimits::default()).unwrap_err();
    assert!(t.elapsed() < Duration::from_secs(1));
    assert!(
        matches!(e, LareError::Script { kind: ScriptErrorKind::Limit { limit: SandboxLimit::MaxSourceBytes, .. }, .. }),
        "{e}"
    );
    let deep = format!("fn evaluation_func(obs, act) {{ [{}1.0{}] }}", "-(".repeat(500), ")".repeat(500));
    let e = encoder(&deep, SandboxLimits::default()).unwrap_err();
    assert!(
        matches!(
            e,
            LareError::Script { kind: ScriptErrorKind::Limit { limit: SandboxLimit::MaxExprDepth, value: 64 }, .. }
        ),
        "{e}"
    );
}
