//! Latent reward encoders as sandboxed scripts (the language an LLM writes them in).
//!
//! LaRe's LLM writes a Python `evaluation_func(observation, action)` over numpy batches and
//! the reference code `exec`s it in the training process. Here the LLM writes a
//! [Rhai](https://rhai.rs) function for **one** step, run in a sandbox:
//!
//! ```text
//! fn evaluation_func(obs, act) {
//!     let angle = atan(obs.sin_theta, obs.cos_theta);   // named observation fields
//!     [abs(angle), obs.theta_dot * obs.theta_dot, act[0] * act[0]]
//! }
//! ```
//!
//! - `obs` is a map of the task's named fields ([`Layout`]): a number for a one-entry field,
//!   an array for a longer one. `act` is an array of numbers. `fn evaluation_func(obs)` (one
//!   parameter) is accepted too.
//! - The function returns an array of numbers: the latent factors.
//! - The sandbox: an engine without I/O (`print`/`debug` go nowhere), without modules
//!   (`import` does not parse), without `eval`, without a clock; limits on operations per call
//!   (an endless loop stops with [`ScriptErrorKind::TooManyOperations`]), wall time per call
//!   ([`ScriptErrorKind::Timeout`]), array/string/map sizes (unbounded allocation stops with
//!   [`ScriptErrorKind::TooLarge`]), call and expression depth ([`ScriptErrorKind::TooDeep`]).
//! - Helpers registered for scripts: `norm(a)`, `dot(a, b)`, `sum(a)`, `mean(a)`,
//!   `clip(x, lo, hi)`, `dist2d(x1, y1, x2, y2)`, `safe_div(a, b)` (0 when `|b| < 1e-8`),
//!   `sq(x)`; plus Rhai's standard math (`abs`, `sqrt`, `sin`, `cos`, `atan(y, x)`, `exp`,
//!   `ln`, `min`, `max`, `floor`, ...). Integers are accepted wherever numbers are.

use std::cell::Cell;
use std::time::{Duration, Instant};

use rhai::packages::Package;
use rhai::{Array, CallFnOptions, Dynamic, Engine, EvalAltResult, Map, Scope, AST};
use rl_core::{Params, Valid};
use serde::{Deserialize, Serialize};

use crate::encoder::{LatentEncoder, Layout, StateSource};
use crate::error::{check_len, LareError, Result, ScriptErrorKind};

/// The function every encoder script defines.
pub const ENTRY_POINT: &str = "evaluation_func";

/// Limits of the script sandbox.
///
/// | name | default | purpose | range |
/// |---|---|---|---|
/// | `max_operations` | 200 000 | operations per call (stops endless loops) | `>= 1` |
/// | `max_wall_ms` | 200 | wall-clock budget per call in ms (checked every 256 operations) | `>= 1` |
/// | `max_array_size` | 10 000 | elements of one array (stops unbounded allocation) | `>= 1` |
/// | `max_string_size` | 10 000 | bytes of one string | `>= 1` |
/// | `max_map_size` | 1 000 | entries of one map | `>= 1` |
/// | `max_call_levels` | 16 | function-call depth (stops runaway recursion) | `>= 1` |
/// | `max_expr_depth` | 64 | expression nesting at compile time | `>= 1` |
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SandboxLimits {
    /// Operations per call.
    pub max_operations: u64,
    /// Wall-clock budget per call (ms).
    pub max_wall_ms: u64,
    /// Elements of one array.
    pub max_array_size: usize,
    /// Bytes of one string.
    pub max_string_size: usize,
    /// Entries of one map.
    pub max_map_size: usize,
    /// Call depth.
    pub max_call_levels: usize,
    /// Expression depth.
    pub max_expr_depth: usize,
}

impl Default for SandboxLimits {
    fn default() -> Self {
        Self {
            max_operations: 200_000,
            max_wall_ms: 200,
            max_array_size: 10_000,
            max_string_size: 10_000,
            max_map_size: 1_000,
            max_call_levels: 16,
            max_expr_depth: 64,
        }
    }
}

impl SandboxLimits {
    /// Sets `max_operations`.
    #[must_use]
    pub fn max_operations(mut self, v: u64) -> Self {
        self.max_operations = v;
        self
    }
    /// Sets `max_wall_ms`.
    #[must_use]
    pub fn max_wall_ms(mut self, v: u64) -> Self {
        self.max_wall_ms = v;
        self
    }
    /// Sets `max_array_size`.
    #[must_use]
    pub fn max_array_size(mut self, v: usize) -> Self {
        self.max_array_size = v;
        self
    }
    /// Sets `max_string_size`.
    #[must_use]
    pub fn max_string_size(mut self, v: usize) -> Self {
        self.max_string_size = v;
        self
    }
    /// Sets `max_map_size`.
    #[must_use]
    pub fn max_map_size(mut self, v: usize) -> Self {
        self.max_map_size = v;
        self
    }
    /// Sets `max_call_levels`.
    #[must_use]
    pub fn max_call_levels(mut self, v: usize) -> Self {
        self.max_call_levels = v;
        self
    }
    /// Sets `max_expr_depth`.
    #[must_use]
    pub fn max_expr_depth(mut self, v: usize) -> Self {
        self.max_expr_depth = v;
        self
    }
}

impl Params for SandboxLimits {
    type Error = LareError;
    fn validate(&self) -> Result<()> {
        let fields: [(&str, u64); 7] = [
            ("max_operations", self.max_operations),
            ("max_wall_ms", self.max_wall_ms),
            ("max_array_size", self.max_array_size as u64),
            ("max_string_size", self.max_string_size as u64),
            ("max_map_size", self.max_map_size as u64),
            ("max_call_levels", self.max_call_levels as u64),
            ("max_expr_depth", self.max_expr_depth as u64),
        ];
        for (name, v) in fields {
            if v == 0 {
                return Err(LareError::invalid(name, v, "must be >= 1"));
            }
        }
        Ok(())
    }
}

thread_local! {
    /// The wall-clock deadline of the script call running on this thread.
    static DEADLINE: Cell<Option<Instant>> = const { Cell::new(None) };
}

type RhaiResult<T> = std::result::Result<T, Box<EvalAltResult>>;

fn num(d: &Dynamic) -> RhaiResult<f64> {
    if let Ok(f) = d.as_float() {
        return Ok(f);
    }
    if let Ok(i) = d.as_int() {
        return Ok(i as f64);
    }
    Err(format!("expected a number, got {}", d.type_name()).into())
}

fn nums(a: &Array) -> RhaiResult<Vec<f64>> {
    a.iter().map(num).collect()
}

/// Builds the sandboxed engine.
fn sandbox_engine(limits: &SandboxLimits) -> Engine {
    let mut engine = Engine::new_raw();
    engine.register_global_module(rhai::packages::StandardPackage::new().as_shared_module());
    engine.on_print(|_| {});
    engine.on_debug(|_, _, _| {});
    engine.disable_symbol("eval");
    // reading a field the layout does not have is an error naming it, not a silent `()`
    engine.set_fail_on_invalid_map_property(true);
    engine.set_max_operations(limits.max_operations);
    engine.set_max_array_size(limits.max_array_size);
    engine.set_max_string_size(limits.max_string_size);
    engine.set_max_map_size(limits.max_map_size);
    engine.set_max_call_levels(limits.max_call_levels);
    engine.set_max_expr_depths(limits.max_expr_depth, limits.max_expr_depth);
    engine.on_progress(|ops| {
        if ops % 256 == 0 {
            let late = DEADLINE.with(|d| d.get().is_some_and(|t| Instant::now() > t));
            if late {
                return Some(Dynamic::from("timeout"));
            }
        }
        None
    });
    engine
        .register_fn("norm", |a: Array| -> RhaiResult<f64> { Ok(nums(&a)?.iter().map(|x| x * x).sum::<f64>().sqrt()) });
    engine.register_fn("sum", |a: Array| -> RhaiResult<f64> { Ok(nums(&a)?.iter().sum()) });
    engine.register_fn("mean", |a: Array| -> RhaiResult<f64> {
        let v = nums(&a)?;
        Ok(if v.is_empty() { 0.0 } else { v.iter().sum::<f64>() / v.len() as f64 })
    });
    engine.register_fn("dot", |a: Array, b: Array| -> RhaiResult<f64> {
        let (a, b) = (nums(&a)?, nums(&b)?);
        if a.len() != b.len() {
            return Err(format!("dot: arrays of length {} and {}", a.len(), b.len()).into());
        }
        Ok(a.iter().zip(&b).map(|(x, y)| x * y).sum())
    });
    engine.register_fn("clip", |x: Dynamic, lo: Dynamic, hi: Dynamic| -> RhaiResult<f64> {
        let (x, lo, hi) = (num(&x)?, num(&lo)?, num(&hi)?);
        Ok(x.max(lo).min(hi))
    });
    engine.register_fn("dist2d", |x1: Dynamic, y1: Dynamic, x2: Dynamic, y2: Dynamic| -> RhaiResult<f64> {
        let (dx, dy) = (num(&x1)? - num(&x2)?, num(&y1)? - num(&y2)?);
        Ok((dx * dx + dy * dy).sqrt())
    });
    engine.register_fn("safe_div", |a: Dynamic, b: Dynamic| -> RhaiResult<f64> {
        let (a, b) = (num(&a)?, num(&b)?);
        Ok(if b.abs() < 1e-8 { 0.0 } else { a / b })
    });
    engine.register_fn("sq", |x: Dynamic| -> RhaiResult<f64> {
        let x = num(&x)?;
        Ok(x * x)
    });
    engine
}

/// Maps a Rhai error to a typed [`LareError::Script`].
fn classify(err: &EvalAltResult) -> ScriptErrorKind {
    match err {
        EvalAltResult::ErrorInFunctionCall(_, _, inner, _) => classify(inner),
        EvalAltResult::ErrorTooManyOperations(_) => ScriptErrorKind::TooManyOperations,
        EvalAltResult::ErrorTerminated(..) => ScriptErrorKind::Timeout,
        EvalAltResult::ErrorDataTooLarge(..) => ScriptErrorKind::TooLarge,
        EvalAltResult::ErrorStackOverflow(_) => ScriptErrorKind::TooDeep,
        EvalAltResult::ErrorParsing(..) => ScriptErrorKind::Compile,
        _ => ScriptErrorKind::Runtime,
    }
}

fn script_err(err: &EvalAltResult) -> LareError {
    LareError::script(classify(err), err.to_string())
}

/// What an encoder script needs besides its source.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ScriptSpec {
    /// The script (defines `fn evaluation_func(obs, act)` or `fn evaluation_func(obs)`).
    pub source: String,
    /// The observation's named fields.
    pub obs_layout: Layout,
    /// Action width.
    pub act_dim: usize,
    /// Number of factors the function returns.
    pub n_factors: usize,
    /// Which state `obs` is.
    pub state_source: StateSource,
}

/// A compiled, sandboxed encoder script (see the module docs).
pub struct ScriptEncoder {
    spec: ScriptSpec,
    limits: Valid<SandboxLimits>,
    engine: Engine,
    ast: AST,
    arity: usize,
    keys: Vec<rhai::ImmutableString>,
}

impl std::fmt::Debug for ScriptEncoder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ScriptEncoder").field("spec", &self.spec).field("limits", &self.limits).finish_non_exhaustive()
    }
}

impl ScriptEncoder {
    /// Compiles `spec.source` in the sandbox.
    ///
    /// # Errors
    /// An invalid layout or `n_factors == 0` ([`LareError::InvalidParameter`]); a script that
    /// does not compile ([`ScriptErrorKind::Compile`]) or has no `evaluation_func` of one or two
    /// parameters ([`ScriptErrorKind::MissingFunction`]).
    pub fn new(spec: ScriptSpec, limits: Valid<SandboxLimits>) -> Result<Self> {
        spec.obs_layout.validate()?;
        if spec.n_factors == 0 {
            return Err(LareError::invalid("n_factors", 0, "an encoder needs >= 1 factor"));
        }
        let engine = sandbox_engine(&limits);
        let ast =
            engine.compile(&spec.source).map_err(|e| LareError::script(ScriptErrorKind::Compile, e.to_string()))?;
        let arity = ast
            .iter_functions()
            .filter(|f| f.name == ENTRY_POINT)
            .map(|f| f.params.len())
            .find(|&n| n == 1 || n == 2)
            .ok_or_else(|| {
                LareError::script(
                    ScriptErrorKind::MissingFunction,
                    format!("the script must define `fn {ENTRY_POINT}(obs, act)` or `fn {ENTRY_POINT}(obs)`"),
                )
            })?;
        let keys = spec.obs_layout.fields.iter().map(|f| rhai::ImmutableString::from(f.name.as_str())).collect();
        Ok(Self { spec, limits, engine, ast, arity, keys })
    }

    /// Compiles `source` and runs it once on `(obs, act)` to count its factors.
    ///
    /// # Errors
    /// As [`ScriptEncoder::new`] and [`ScriptEncoder::call`].
    pub fn probe(
        source: &str,
        obs_layout: &Layout,
        act_dim: usize,
        state_source: StateSource,
        limits: Valid<SandboxLimits>,
        obs: &[f32],
        act: &[f32],
    ) -> Result<Self> {
        let spec =
            ScriptSpec { source: source.into(), obs_layout: obs_layout.clone(), act_dim, n_factors: 1, state_source };
        let mut enc = Self::new(spec, limits)?;
        let n = enc.call(obs, act)?.len();
        if n == 0 {
            return Err(LareError::script(ScriptErrorKind::BadOutput, "the function returned an empty array"));
        }
        enc.spec.n_factors = n;
        Ok(enc)
    }

    /// The spec.
    pub fn spec(&self) -> &ScriptSpec {
        &self.spec
    }

    /// The sandbox limits.
    pub fn limits(&self) -> &SandboxLimits {
        &self.limits
    }

    fn obs_map(&self, obs: &[f32]) -> Map {
        let mut m = Map::new();
        for (f, k) in self.spec.obs_layout.fields.iter().zip(&self.keys) {
            let v = if f.len == 1 {
                Dynamic::from_float(f64::from(obs[f.start]))
            } else {
                let arr: Array =
                    obs[f.start..f.start + f.len].iter().map(|&x| Dynamic::from_float(f64::from(x))).collect();
                Dynamic::from_array(arr)
            };
            m.insert(k.as_str().into(), v);
        }
        m
    }

    /// Runs the function on one step and returns its factors (any count).
    ///
    /// # Errors
    /// Wrong input lengths; [`LareError::Script`] for a sandbox limit, a runtime error or an
    /// output that is not an array of numbers.
    pub fn call(&self, obs: &[f32], act: &[f32]) -> Result<Vec<f32>> {
        check_len("obs", self.spec.obs_layout.dim, obs.len())?;
        check_len("action", self.spec.act_dim, act.len())?;
        let obs_map = Dynamic::from_map(self.obs_map(obs));
        let act_arr: Array = act.iter().map(|&x| Dynamic::from_float(f64::from(x))).collect();
        let mut scope = Scope::new();
        let opts = CallFnOptions::new().eval_ast(false).rewind_scope(true);
        let deadline = Instant::now() + Duration::from_millis(self.limits.max_wall_ms);
        let prev = DEADLINE.with(|d| d.replace(Some(deadline)));
        let out = if self.arity == 2 {
            self.engine.call_fn_with_options::<Dynamic>(opts, &mut scope, &self.ast, ENTRY_POINT, (obs_map, act_arr))
        } else {
            self.engine.call_fn_with_options::<Dynamic>(opts, &mut scope, &self.ast, ENTRY_POINT, (obs_map,))
        };
        DEADLINE.with(|d| d.set(prev));
        let out = out.map_err(|e| script_err(&e))?;
        let type_name = out.type_name();
        let arr = out.try_cast::<Array>().ok_or_else(|| {
            LareError::script(
                ScriptErrorKind::BadOutput,
                format!("`{ENTRY_POINT}` must return an array of numbers, returned {type_name}"),
            )
        })?;
        arr.iter()
            .enumerate()
            .map(|(i, d)| {
                num(d).map(|x| x as f32).map_err(|_| {
                    LareError::script(
                        ScriptErrorKind::BadOutput,
                        format!("factor {i} is {} (`{ENTRY_POINT}` must return an array of numbers)", d.type_name()),
                    )
                })
            })
            .collect()
    }
}

impl LatentEncoder for ScriptEncoder {
    fn dim(&self) -> usize {
        self.spec.n_factors
    }

    fn state_source(&self) -> StateSource {
        self.spec.state_source
    }

    fn encode(&self, obs: &[f32], act: &[f32], _next_obs: &[f32], out: &mut [f32]) -> Result<()> {
        check_len("factors", self.spec.n_factors, out.len())?;
        let f = self.call(obs, act)?;
        if f.len() != out.len() {
            return Err(LareError::script(
                ScriptErrorKind::BadOutput,
                format!("returned {} factors, expected {}", f.len(), out.len()),
            ));
        }
        out.copy_from_slice(&f);
        Ok(())
    }

    fn label(&self) -> String {
        format!("script ({} factors)", self.spec.n_factors)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn layout() -> Layout {
        Layout::new().scalar("cos_theta", "cos").scalar("sin_theta", "sin").scalar("theta_dot", "velocity")
    }

    fn probe(src: &str) -> Result<ScriptEncoder> {
        probe_with(src, SandboxLimits::default())
    }

    fn probe_with(src: &str, limits: SandboxLimits) -> Result<ScriptEncoder> {
        ScriptEncoder::probe(src, &layout(), 1, StateSource::Current, limits.check().unwrap(), &[1.0, 0.0, 0.5], &[0.2])
    }

    #[test]
    fn named_fields_helpers_and_ints() {
        let e = probe(
            "fn evaluation_func(obs, act) {
                let angle = atan(obs.sin_theta, obs.cos_theta);
                [abs(angle), sq(obs.theta_dot), act[0] * act[0], clip(obs.theta_dot, 0, 1), 3]
            }",
        )
        .unwrap();
        assert_eq!(e.dim(), 5);
        let mut out = [0.0f32; 5];
        e.encode(&[0.0, 1.0, 2.0], &[0.5], &[0.0; 3], &mut out).unwrap();
        assert!((out[0] - std::f32::consts::FRAC_PI_2).abs() < 1e-6);
        assert_eq!(&out[1..], &[4.0, 0.25, 1.0, 3.0]);
        let one = probe("fn evaluation_func(obs) { [obs.theta_dot, norm([3.0, 4.0]), safe_div(1.0, 0.0)] }").unwrap();
        assert_eq!(one.call(&[0.0, 0.0, 7.0], &[0.0]).unwrap(), vec![7.0, 5.0, 0.0]);
    }

    #[test]
    fn errors_are_typed() {
        let kind = |r: Result<ScriptEncoder>| match r {
            Err(LareError::Script { kind, .. }) => kind,
            other => panic!("expected a script error, got {other:?}"),
        };
        assert_eq!(kind(probe("fn evaluation_func(obs, act) { [1.0 ")), ScriptErrorKind::Compile);
        assert_eq!(kind(probe("fn other(obs, act) { [1.0] }")), ScriptErrorKind::MissingFunction);
        assert_eq!(kind(probe("fn evaluation_func(obs, act) { [obs.nope + 1.0] }")), ScriptErrorKind::Runtime);
        assert_eq!(kind(probe("fn evaluation_func(obs, act) { 1.0 }")), ScriptErrorKind::BadOutput);
        assert_eq!(kind(probe("fn evaluation_func(obs, act) { [\"a\"] }")), ScriptErrorKind::BadOutput);
        assert_eq!(kind(probe("fn evaluation_func(obs, act) { [] }")), ScriptErrorKind::BadOutput);
        // no I/O, no modules, no eval
        assert_eq!(kind(probe("import \"x\" as y; fn evaluation_func(obs, act) { [1.0] }")), ScriptErrorKind::Compile);
        assert!(matches!(
            kind(probe("fn evaluation_func(obs, act) { eval(\"1\"); [1.0] }")),
            ScriptErrorKind::Compile | ScriptErrorKind::Runtime
        ));
        let printed = probe("fn evaluation_func(obs, act) { print(\"hi\"); [1.0] }").unwrap();
        assert_eq!(printed.dim(), 1);
    }

    #[test]
    fn sandbox_stops_endless_loops_and_unbounded_allocation() {
        let kind = |r: Result<ScriptEncoder>| match r {
            Err(LareError::Script { kind, .. }) => kind,
            other => panic!("expected a script error, got {other:?}"),
        };
        // generous wall time, so that the limit under test is the one that stops the script
        let slow_ok = SandboxLimits::default().max_wall_ms(60_000);
        assert_eq!(
            kind(probe_with("fn evaluation_func(obs, act) { loop { } [1.0] }", slow_ok.clone())),
            ScriptErrorKind::TooManyOperations
        );
        let small = slow_ok.clone().max_array_size(200).max_operations(u64::MAX);
        assert_eq!(
            kind(probe_with("fn evaluation_func(obs, act) { let a = []; loop { a.push(1.0); } a }", small.clone())),
            ScriptErrorKind::TooLarge
        );
        assert_eq!(
            kind(probe_with("fn evaluation_func(obs, act) { let a = []; a.pad(100000000, 0.0); a }", small.clone())),
            ScriptErrorKind::TooLarge
        );
        assert_eq!(
            kind(probe_with("fn evaluation_func(obs, act) { let s = \"x\"; loop { s += s; } [1.0] }", small)),
            ScriptErrorKind::TooLarge
        );
        assert_eq!(
            kind(probe("fn f(x) { f(x + 1) } fn evaluation_func(obs, act) { [f(1)] }")),
            ScriptErrorKind::TooDeep
        );
        // the wall-clock limit stops a slow script before its operation budget runs out
        let slow = ScriptEncoder::probe(
            "fn evaluation_func(obs, act) { let x = 0; loop { x += 1; } [1.0] }",
            &layout(),
            1,
            StateSource::Current,
            SandboxLimits::default().max_operations(u64::MAX).max_wall_ms(20).check().unwrap(),
            &[1.0, 0.0, 0.5],
            &[0.2],
        );
        assert_eq!(kind(slow), ScriptErrorKind::Timeout);
        assert!(SandboxLimits::default().max_operations(0).check().is_err());
    }

    #[test]
    fn wrong_factor_count_and_input_length_are_errors() {
        let e = probe("fn evaluation_func(obs, act) { if obs.theta_dot > 1.0 { [1.0] } else { [1.0, 2.0] } }").unwrap();
        assert_eq!(e.dim(), 2);
        let mut out = [0.0f32; 2];
        assert!(matches!(
            e.encode(&[0.0, 0.0, 5.0], &[0.0], &[0.0; 3], &mut out),
            Err(LareError::Script { kind: ScriptErrorKind::BadOutput, .. })
        ));
        assert!(matches!(e.call(&[0.0, 0.0], &[0.0]), Err(LareError::Shape { .. })));
    }
}
