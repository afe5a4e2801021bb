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
//! - The function returns an array of finite numbers: the latent factors. A NaN or infinite
//!   factor (also one that overflows `f32`) is [`LareError::NonFinite`] naming its index.
//!
//! # What a script may use
//!
//! The language (variables, `if`/`while`/`loop`/`for`, `fn` definitions, closures, arrays,
//! maps, strings, `try`/`catch`, `throw`) and these parts of Rhai's library only: arithmetic
//! (`ArithmeticPackage`), comparisons and `min`/`max` (`LogicPackage`), math (`BasicMathPackage`:
//! `abs`, `sqrt`, `exp`, `ln`, `log`, `sin` ... `atan(y, x)`, `floor`, `round`, `PI()`, `to_float`,
//! `parse_float`, ...), ranges and iteration (`BasicIteratorPackage`), array, map and string
//! methods (`BasicArrayPackage`, `BasicMapPackage`, `BasicStringPackage`, `MoreStringPackage`),
//! function pointers (`BasicFnPackage`); plus the helpers `norm(a)`, `dot(a, b)`, `sum(a)`,
//! `mean(a)`, `clip(x, lo, hi)`, `dist2d(x1, y1, x2, y2)`, `safe_div(a, b)` (0 when
//! `|b| < 1e-8`), `sq(x)`. Integers are accepted wherever numbers are.
//!
//! Not registered, so a call is "function not found" ([`ScriptErrorKind::Runtime`]): `sleep`,
//! every clock and timestamp (`timestamp`, `elapsed`; the engine is built with `no_time` and
//! without Rhai's `LanguageCorePackage`, which holds `sleep`), `exit`, `parse_json`, the
//! reflection functions (`get_fn_metadata_list`), bit fields and BLOBs. `import` does not parse
//! (`no_module`), `eval` is a disabled keyword ([`ScriptErrorKind::Compile`]), `print` and
//! `debug` run but go nowhere. There is no I/O, no randomness and no clock: a script is a pure
//! function of `(obs, act)`.
//!
//! Replaced by versions that cannot hide an error: `sort`, `sort_by`, `sort_desc`, `order`,
//! `order_by`, `order_desc` (a stable merge sort; an error thrown in a comparator, or a
//! comparator returning something other than a number or a boolean, is an error of the call,
//! where Rhai's own sort drops it) and `dedup(comparer)` (the same); `replace` on strings checks
//! the size of its result against `max_string_size` before building it.
//!
//! # Limits
//!
//! [`SandboxLimits`]: source size and compile time, operations and wall time per call and per
//! [`LatentEncoder::encode_batch`], array/string/map sizes, call and expression depth. Each
//! exceeded limit is [`ScriptErrorKind::Limit`] naming the limit and its value. Operations are
//! counted (and the clock read) on every operation the engine performs, closures called by
//! `map`/`filter`/`sort` and native calls included; a single built-in runs between two checks,
//! and with the size limits the slowest one is a linear scan of a full array (`contains`,
//! `index_of`, `==`, `dedup`: ~45 ms on 10 000 elements in a debug build, see `docs/lare.md`).

use std::cell::Cell;
use std::cmp::Ordering;
use std::time::{Duration, Instant};

use ndarray::{Array2, ArrayView2};
use rhai::packages::{
    ArithmeticPackage, BasicArrayPackage, BasicFnPackage, BasicIteratorPackage, BasicMapPackage, BasicMathPackage,
    BasicStringPackage, LogicPackage, MoreStringPackage, Package,
};
use rhai::{
    Array, CallFnOptions, Dynamic, Engine, EvalAltResult, FnPtr, ImmutableString, LexError, Map, NativeCallContext,
    ParseErrorType, Position, Scope, Token, AST,
};
use rl_core::{Params, Valid};
use serde::{Deserialize, Serialize};

use crate::encoder::{encode_rows, LatentEncoder, Layout, StateSource};
use crate::error::{check_len, LareError, Result, SandboxLimit, ScriptErrorKind};

/// The function every encoder script defines.
pub const ENTRY_POINT: &str = "evaluation_func";

/// Limits of the script sandbox.
///
/// | name | default | purpose | range |
/// |---|---|---|---|
/// | `max_source_bytes` | 65 536 | bytes of script source (checked before compiling) | `>= 1` |
/// | `max_compile_ms` | 500 | wall-clock budget of one compile in ms (checked on every token) | `>= 1` |
/// | `max_operations` | 200 000 | operations per call (stops endless loops) | `>= 1` |
/// | `max_wall_ms` | 200 | wall-clock budget per call in ms (checked on every operation) | `>= 1` |
/// | `max_batch_operations` | 20 000 000 | operations of all calls of one `encode_batch` | `>= 1` |
/// | `max_batch_wall_ms` | 10 000 | wall-clock budget of one `encode_batch` in ms | `>= 1` |
/// | `max_array_size` | 10 000 | elements of one array, nested ones included (stops unbounded allocation) | `>= 1` |
/// | `max_string_size` | 10 000 | bytes of one string (of all strings inside one array or map) | `>= 1` |
/// | `max_map_size` | 1 000 | entries of one map, nested ones included | `>= 1` |
/// | `max_call_levels` | 16 | function-call depth (stops runaway recursion) | `>= 1` |
/// | `max_expr_depth` | 64 | expression nesting at compile time | `1..=1000` |
/// | `max_stack_bytes` | 32 MiB | native stack one call may use (checked on every operation) | `1..=1 GiB` |
///
/// `max_array_size` and `max_map_size` are at most 1 000 000. A call stops at whichever of its
/// own and its batch's limits comes first. Scripts run on a thread of their own whose stack is
/// `max_stack_bytes` + 64 MiB + 4 KiB per allowed array element and map entry: nested data is
/// as deep as it is large, and the engine recurses over it (equality, printing, cloning,
/// dropping) with frames of up to a few KiB in a debug build; without this a 300-deep nested
/// array compared with `==` overflowed a 2 MiB thread stack and aborted the process.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SandboxLimits {
    /// Bytes of script source.
    pub max_source_bytes: usize,
    /// Wall-clock budget of one compile (ms).
    pub max_compile_ms: u64,
    /// Operations per call.
    pub max_operations: u64,
    /// Wall-clock budget per call (ms).
    pub max_wall_ms: u64,
    /// Operations of all the calls of one `encode_batch`.
    pub max_batch_operations: u64,
    /// Wall-clock budget of one `encode_batch` (ms).
    pub max_batch_wall_ms: u64,
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
    /// Native stack one call may use (bytes).
    pub max_stack_bytes: usize,
}

impl Default for SandboxLimits {
    fn default() -> Self {
        Self {
            max_source_bytes: 65_536,
            max_compile_ms: 500,
            max_operations: 200_000,
            max_wall_ms: 200,
            max_batch_operations: 20_000_000,
            max_batch_wall_ms: 10_000,
            max_array_size: 10_000,
            max_string_size: 10_000,
            max_map_size: 1_000,
            max_call_levels: 16,
            max_expr_depth: 64,
            max_stack_bytes: 32 << 20,
        }
    }
}

impl SandboxLimits {
    /// Sets `max_source_bytes`.
    #[must_use]
    pub fn max_source_bytes(mut self, v: usize) -> Self {
        self.max_source_bytes = v;
        self
    }
    /// Sets `max_compile_ms`.
    #[must_use]
    pub fn max_compile_ms(mut self, v: u64) -> Self {
        self.max_compile_ms = v;
        self
    }
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
    /// Sets `max_batch_operations`.
    #[must_use]
    pub fn max_batch_operations(mut self, v: u64) -> Self {
        self.max_batch_operations = v;
        self
    }
    /// Sets `max_batch_wall_ms`.
    #[must_use]
    pub fn max_batch_wall_ms(mut self, v: u64) -> Self {
        self.max_batch_wall_ms = v;
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
    /// Sets `max_stack_bytes`.
    #[must_use]
    pub fn max_stack_bytes(mut self, v: usize) -> Self {
        self.max_stack_bytes = v;
        self
    }

    /// The stack size of the thread scripts run on (see the table).
    fn thread_stack_bytes(&self) -> usize {
        let nested = self.max_array_size.saturating_add(self.max_map_size).saturating_mul(4 << 10);
        self.max_stack_bytes.saturating_add(64 << 20).saturating_add(nested)
    }

    /// The value of one limit.
    pub fn value(&self, limit: SandboxLimit) -> u64 {
        let u = |v: usize| u64::try_from(v).unwrap_or(u64::MAX);
        match limit {
            SandboxLimit::MaxSourceBytes => u(self.max_source_bytes),
            SandboxLimit::MaxCompileMs => self.max_compile_ms,
            SandboxLimit::MaxOperations => self.max_operations,
            SandboxLimit::MaxWallMs => self.max_wall_ms,
            SandboxLimit::MaxBatchOperations => self.max_batch_operations,
            SandboxLimit::MaxBatchWallMs => self.max_batch_wall_ms,
            SandboxLimit::MaxArraySize => u(self.max_array_size),
            SandboxLimit::MaxStringSize => u(self.max_string_size),
            SandboxLimit::MaxMapSize => u(self.max_map_size),
            SandboxLimit::MaxCallLevels => u(self.max_call_levels),
            SandboxLimit::MaxExprDepth => u(self.max_expr_depth),
            SandboxLimit::MaxStackBytes => u(self.max_stack_bytes),
        }
    }

    /// [`ScriptErrorKind::Limit`] for `limit` at its value here.
    fn exceeded(&self, limit: SandboxLimit) -> ScriptErrorKind {
        ScriptErrorKind::Limit { limit, value: self.value(limit) }
    }
}

/// Every limit, in field order.
const ALL_LIMITS: [SandboxLimit; 12] = [
    SandboxLimit::MaxSourceBytes,
    SandboxLimit::MaxCompileMs,
    SandboxLimit::MaxOperations,
    SandboxLimit::MaxWallMs,
    SandboxLimit::MaxBatchOperations,
    SandboxLimit::MaxBatchWallMs,
    SandboxLimit::MaxArraySize,
    SandboxLimit::MaxStringSize,
    SandboxLimit::MaxMapSize,
    SandboxLimit::MaxCallLevels,
    SandboxLimit::MaxExprDepth,
    SandboxLimit::MaxStackBytes,
];

/// Upper ends of the ranges (see the table of [`SandboxLimits`]).
const UPPER: [(SandboxLimit, u64); 4] = [
    (SandboxLimit::MaxArraySize, 1_000_000),
    (SandboxLimit::MaxMapSize, 1_000_000),
    (SandboxLimit::MaxExprDepth, 1_000),
    (SandboxLimit::MaxStackBytes, 1 << 30),
];

impl Params for SandboxLimits {
    type Error = LareError;
    fn validate(&self) -> Result<()> {
        for limit in ALL_LIMITS {
            let v = self.value(limit);
            if v == 0 {
                return Err(LareError::invalid(limit.name(), v, "must be >= 1"));
            }
        }
        for (limit, max) in UPPER {
            let v = self.value(limit);
            if v > max {
                return Err(LareError::invalid(limit.name(), v, format!("must be <= {max}")));
            }
        }
        Ok(())
    }
}

/// `now + ms`, or `None` (no deadline) past what `Instant` can hold.
fn deadline_after(now: Instant, ms: u64) -> Option<Instant> {
    now.checked_add(Duration::from_millis(ms))
}

/// The budget of the script call running on this thread (see [`on_operation`]).
#[derive(Debug, Clone, Copy)]
struct CallBudget {
    /// Operations counted in this call (every operation, closures and native calls included).
    ops: u64,
    max_ops: u64,
    deadline: Option<Instant>,
    batch: Option<BatchBudget>,
    /// Address of a local of the frame that started the call (the stack grows down).
    stack_base: usize,
    max_stack: usize,
}

/// The budget of the `encode_batch` running on this thread.
#[derive(Debug, Clone, Copy)]
struct BatchBudget {
    /// Operations of the batch's earlier calls.
    ops_before: u64,
    max_ops: u64,
    deadline: Option<Instant>,
}

thread_local! {
    static CALL: Cell<Option<CallBudget>> = const { Cell::new(None) };
    static BATCH: Cell<Option<BatchBudget>> = const { Cell::new(None) };
    /// The limit that stopped the call running on this thread.
    static TRIPPED: Cell<Option<SandboxLimit>> = const { Cell::new(None) };
    /// The deadline of the compile running on this thread, and whether it passed.
    static COMPILE_DEADLINE: Cell<Option<Instant>> = const { Cell::new(None) };
    static COMPILE_LATE: Cell<bool> = const { Cell::new(false) };
    /// Whether this thread is a sandbox thread (see [`on_sandbox_thread`]).
    static SANDBOX_THREAD: Cell<bool> = const { Cell::new(false) };
}

/// An address on the current stack frame.
#[inline(always)]
fn stack_address() -> usize {
    let marker = 0u8;
    std::hint::black_box(&marker) as *const u8 as usize
}

/// Runs `f` on a thread with the sandbox's stack (or directly when already on one).
fn on_sandbox_thread<T: Send>(limits: &SandboxLimits, f: impl FnOnce() -> Result<T> + Send) -> Result<T> {
    if SANDBOX_THREAD.with(Cell::get) {
        return f();
    }
    std::thread::scope(|s| {
        let handle = std::thread::Builder::new()
            .name("lare-sandbox".into())
            .stack_size(limits.thread_stack_bytes())
            .spawn_scoped(s, || {
                SANDBOX_THREAD.with(|t| t.set(true));
                f()
            })?;
        handle
            .join()
            .unwrap_or_else(|_| Err(LareError::script(ScriptErrorKind::Runtime, "the sandbox thread panicked")))
    })
}

/// The engine's progress callback: runs on every operation. Counts it and stops the call at
/// its first exceeded budget (operations, then wall time; the call's, then the batch's).
fn on_operation() -> Option<Dynamic> {
    let mut b = CALL.with(Cell::get)?;
    b.ops = b.ops.saturating_add(1);
    CALL.with(|c| c.set(Some(b)));
    let tripped = if b.ops > b.max_ops {
        Some(SandboxLimit::MaxOperations)
    } else if b.stack_base.saturating_sub(stack_address()) > b.max_stack {
        Some(SandboxLimit::MaxStackBytes)
    } else if b.batch.is_some_and(|t| t.ops_before.saturating_add(b.ops) > t.max_ops) {
        Some(SandboxLimit::MaxBatchOperations)
    } else {
        let now = Instant::now();
        if b.deadline.is_some_and(|t| now > t) {
            Some(SandboxLimit::MaxWallMs)
        } else if b.batch.is_some_and(|t| t.deadline.is_some_and(|t| now > t)) {
            Some(SandboxLimit::MaxBatchWallMs)
        } else {
            None
        }
    }?;
    TRIPPED.with(|t| t.set(Some(tripped)));
    Some(Dynamic::from(tripped.name()))
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

/// A stable bottom-up merge sort that never panics on an inconsistent order and stops at the
/// comparator's first error (leaving `v` a permutation of itself).
fn merge_sort(v: &mut Array, cmp: &mut dyn FnMut(&Dynamic, &Dynamic) -> RhaiResult<Ordering>) -> RhaiResult<()> {
    fn passes(
        src: &mut Array,
        dst: &mut Array,
        cmp: &mut dyn FnMut(&Dynamic, &Dynamic) -> RhaiResult<Ordering>,
    ) -> RhaiResult<()> {
        let n = src.len();
        let mut width = 1usize;
        while width < n {
            dst.clear();
            let mut lo = 0;
            while lo < n {
                let mid = lo.saturating_add(width).min(n);
                let hi = mid.saturating_add(width).min(n);
                let (mut i, mut j) = (lo, mid);
                while i < mid && j < hi {
                    // the right run's element goes first only when strictly smaller: stable
                    if cmp(&src[j], &src[i])? == Ordering::Less {
                        dst.push(src[j].clone());
                        j += 1;
                    } else {
                        dst.push(src[i].clone());
                        i += 1;
                    }
                }
                dst.extend_from_slice(&src[i..mid]);
                dst.extend_from_slice(&src[j..hi]);
                lo = hi;
            }
            std::mem::swap(src, dst);
            width = width.saturating_mul(2);
        }
        Ok(())
    }
    if v.len() < 2 {
        return Ok(());
    }
    let mut src = std::mem::take(v);
    let mut dst = Array::with_capacity(src.len());
    let out = passes(&mut src, &mut dst, cmp);
    *v = src;
    out
}

/// The order of Rhai's built-in `sort`: every element of one type (integer, float, character,
/// string, boolean or `()`); floats by `partial_cmp` with NaN equal to everything (as Rhai).
fn builtin_sort(v: &mut Array, descending: bool) -> RhaiResult<()> {
    let Some(first) = v.first() else { return Ok(()) };
    let type_id = first.type_id();
    if v.iter().any(|a| a.type_id() != type_id) {
        return Err("elements of different types cannot be sorted".into());
    }
    let type_name = first.type_name();
    let mut key = |a: &Dynamic, b: &Dynamic| -> RhaiResult<Ordering> {
        let o = if let (Ok(x), Ok(y)) = (a.as_int(), b.as_int()) {
            x.cmp(&y)
        } else if let (Ok(x), Ok(y)) = (a.as_float(), b.as_float()) {
            x.partial_cmp(&y).unwrap_or(Ordering::Equal)
        } else if let (Ok(x), Ok(y)) = (a.as_char(), b.as_char()) {
            x.cmp(&y)
        } else if let (Ok(x), Ok(y)) = (a.as_bool(), b.as_bool()) {
            x.cmp(&y)
        } else if let (Ok(x), Ok(y)) = (a.as_immutable_string_ref(), b.as_immutable_string_ref()) {
            x.as_str().cmp(y.as_str())
        } else if a.is_unit() && b.is_unit() {
            Ordering::Equal
        } else {
            return Err(format!("elements of {type_name} cannot be sorted").into());
        };
        Ok(if descending { o.reverse() } else { o })
    };
    merge_sort(v, &mut key)
}

/// What a `sort` comparator's return value means (Rhai's convention: a negative number or
/// `true` when the first element goes first); anything else is an error, not an arbitrary order.
fn comparator_order(v: &Dynamic) -> RhaiResult<Ordering> {
    if let Ok(i) = v.as_int() {
        return Ok(i.cmp(&0));
    }
    if let Ok(b) = v.as_bool() {
        return Ok(if b { Ordering::Less } else { Ordering::Greater });
    }
    if let Ok(f) = v.as_float() {
        return f.partial_cmp(&0.0).ok_or_else(|| "the sort comparator returned NaN".into());
    }
    Err(format!("the sort comparator must return a number or a boolean, returned {}", v.type_name()).into())
}

fn sort_with(ctx: &NativeCallContext<'_>, v: &mut Array, f: &FnPtr) -> RhaiResult<()> {
    let mut cmp = |a: &Dynamic, b: &Dynamic| comparator_order(&f.call_raw(ctx, None, [a.clone(), b.clone()])?);
    merge_sort(v, &mut cmp)
}

/// The result of `s.replace(find, sub)` unless it would exceed `max` bytes (checked before it
/// is built: a 10 000-byte string with 10 000-byte substitutions would be 100 MB).
fn checked_replace(s: &str, find: &str, n_matches: usize, sub: &str, max: usize) -> RhaiResult<ImmutableString> {
    let len = s
        .len()
        .saturating_sub(n_matches.saturating_mul(find.len()))
        .saturating_add(n_matches.saturating_mul(sub.len()));
    if len > max {
        return Err(EvalAltResult::ErrorDataTooLarge("Length of string".into(), Position::NONE).into());
    }
    Ok(s.replace(find, sub).into())
}

/// Registers the replacements of the built-ins that hide errors or allocate before checking.
fn register_checked_builtins(engine: &mut Engine, limits: &SandboxLimits) {
    engine.register_fn("sort", |v: &mut Array| builtin_sort(v, false));
    engine.register_fn("sort_desc", |v: &mut Array| builtin_sort(v, true));
    engine.register_fn("order", |mut v: Array| builtin_sort(&mut v, false).map(|()| v));
    engine.register_fn("order_desc", |mut v: Array| builtin_sort(&mut v, true).map(|()| v));
    for name in ["sort", "sort_by"] {
        engine.register_fn(name, |ctx: NativeCallContext<'_>, v: &mut Array, f: FnPtr| sort_with(&ctx, v, &f));
    }
    for name in ["order", "order_by"] {
        engine.register_fn(name, |ctx: NativeCallContext<'_>, mut v: Array, f: FnPtr| {
            sort_with(&ctx, &mut v, &f).map(|()| v)
        });
    }
    engine.register_fn("dedup", |ctx: NativeCallContext<'_>, v: &mut Array, f: FnPtr| -> RhaiResult<()> {
        let mut kept = Array::with_capacity(v.len());
        for x in v.iter() {
            let duplicate = match kept.last() {
                Some(last) => f.call_raw(&ctx, None, [Dynamic::clone(last), x.clone()])?.as_bool().map_err(|t| {
                    Box::<EvalAltResult>::from(format!("the dedup comparer must return a boolean, returned {t}"))
                })?,
                None => false,
            };
            if !duplicate {
                kept.push(x.clone());
            }
        }
        *v = kept;
        Ok(())
    });
    let max = limits.max_string_size;
    engine.register_fn("replace", move |s: &mut ImmutableString, find: &str, sub: &str| -> RhaiResult<()> {
        let n = s.matches(find).count();
        *s = checked_replace(s, find, n, sub, max)?;
        Ok(())
    });
    engine.register_fn("replace", move |s: &mut ImmutableString, find: char, sub: &str| -> RhaiResult<()> {
        let n = s.matches(find).count();
        *s = checked_replace(s, find.encode_utf8(&mut [0u8; 4]), n, sub, max)?;
        Ok(())
    });
}

/// Builds the sandboxed engine.
fn sandbox_engine(limits: &SandboxLimits) -> Engine {
    let mut engine = Engine::new_raw();
    // the parts of Rhai's standard library reward code needs; not `LanguageCorePackage`
    // (`sleep`, `exit`, `parse_json`, reflection), `BasicTimePackage`, `BitFieldPackage`,
    // `BasicBlobPackage`
    for module in [
        ArithmeticPackage::new().as_shared_module(),
        LogicPackage::new().as_shared_module(),
        BasicMathPackage::new().as_shared_module(),
        BasicIteratorPackage::new().as_shared_module(),
        BasicStringPackage::new().as_shared_module(),
        MoreStringPackage::new().as_shared_module(),
        BasicArrayPackage::new().as_shared_module(),
        BasicMapPackage::new().as_shared_module(),
        BasicFnPackage::new().as_shared_module(),
    ] {
        engine.register_global_module(module);
    }
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
    engine.on_progress(|_| on_operation());
    // The compile deadline, read on every token. (`on_parse_token` is marked deprecated only
    // as "volatile API" by Rhai.)
    #[allow(deprecated)]
    engine.on_parse_token(|token, _, _| {
        let late = COMPILE_DEADLINE.with(|d| d.get().is_some_and(|t| Instant::now() > t));
        if late {
            COMPILE_LATE.with(|l| l.set(true));
            return Token::LexError(Box::new(LexError::Runtime("compile time limit exceeded".into())));
        }
        token
    });
    register_checked_builtins(&mut engine, limits);
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

/// The limit behind a size error of the engine ("Length of string", "Size of array/BLOB",
/// "Size of object map").
fn size_limit(what: &str) -> SandboxLimit {
    if what.contains("string") {
        SandboxLimit::MaxStringSize
    } else if what.contains("map") {
        SandboxLimit::MaxMapSize
    } else {
        SandboxLimit::MaxArraySize
    }
}

/// Maps a Rhai error to a typed [`ScriptErrorKind`]; `tripped` is the limit the progress
/// callback stopped the call at, if it did.
fn classify(err: &EvalAltResult, tripped: Option<SandboxLimit>, limits: &SandboxLimits) -> ScriptErrorKind {
    match err {
        EvalAltResult::ErrorInFunctionCall(_, _, inner, _) => classify(inner, tripped, limits),
        EvalAltResult::ErrorTerminated(..) => limits.exceeded(tripped.unwrap_or(SandboxLimit::MaxWallMs)),
        EvalAltResult::ErrorTooManyOperations(_) => limits.exceeded(SandboxLimit::MaxOperations),
        EvalAltResult::ErrorDataTooLarge(what, _) => limits.exceeded(size_limit(what)),
        EvalAltResult::ErrorStackOverflow(_) => limits.exceeded(SandboxLimit::MaxCallLevels),
        EvalAltResult::ErrorParsing(e, _) => parse_kind(e, limits),
        _ => ScriptErrorKind::Runtime,
    }
}

fn parse_kind(e: &ParseErrorType, limits: &SandboxLimits) -> ScriptErrorKind {
    match e {
        ParseErrorType::ExprTooDeep => limits.exceeded(SandboxLimit::MaxExprDepth),
        ParseErrorType::LiteralTooLarge(what, _) => limits.exceeded(size_limit(what)),
        _ => ScriptErrorKind::Compile,
    }
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
    /// An invalid layout or `n_factors == 0` ([`LareError::InvalidParameter`]); a source over
    /// `max_source_bytes`, a compile past `max_compile_ms` or an expression nested deeper than
    /// `max_expr_depth` ([`ScriptErrorKind::Limit`]); a script that does not compile
    /// ([`ScriptErrorKind::Compile`]) or has no `evaluation_func` of one or two parameters
    /// ([`ScriptErrorKind::MissingFunction`]).
    pub fn new(spec: ScriptSpec, limits: Valid<SandboxLimits>) -> Result<Self> {
        spec.obs_layout.validate()?;
        if spec.n_factors == 0 {
            return Err(LareError::invalid("n_factors", 0, "an encoder needs >= 1 factor"));
        }
        if spec.source.len() > limits.max_source_bytes {
            return Err(LareError::script(
                limits.exceeded(SandboxLimit::MaxSourceBytes),
                format!("the source is {} bytes", spec.source.len()),
            ));
        }
        let engine = sandbox_engine(&limits);
        let ast = on_sandbox_thread(&limits, || compile(&engine, &spec.source, &limits))?;
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
    /// Inside [`LatentEncoder::encode_batch`] the call also counts against the batch's
    /// budget (`max_batch_operations`, `max_batch_wall_ms`).
    ///
    /// # Errors
    /// Wrong input lengths; [`LareError::Script`] for a sandbox limit
    /// ([`ScriptErrorKind::Limit`]), a runtime error or an output that is not an array of
    /// numbers; [`LareError::NonFinite`] for a factor that is NaN or infinite as an `f32`
    /// (its index).
    pub fn call(&self, obs: &[f32], act: &[f32]) -> Result<Vec<f32>> {
        check_len("obs", self.spec.obs_layout.dim, obs.len())?;
        check_len("action", self.spec.act_dim, act.len())?;
        on_sandbox_thread(&self.limits, || self.call_here(obs, act))
    }

    /// [`ScriptEncoder::call`] on the current (sandbox) thread; every value the script made is
    /// dropped here.
    fn call_here(&self, obs: &[f32], act: &[f32]) -> Result<Vec<f32>> {
        let obs_map = Dynamic::from_map(self.obs_map(obs));
        let act_arr: Array = act.iter().map(|&x| Dynamic::from_float(f64::from(x))).collect();
        let mut scope = Scope::new();
        let opts = CallFnOptions::new().eval_ast(false).rewind_scope(true);
        let batch = BATCH.with(Cell::get);
        let budget = CallBudget {
            ops: 0,
            max_ops: self.limits.max_operations,
            deadline: deadline_after(Instant::now(), self.limits.max_wall_ms),
            batch,
            stack_base: stack_address(),
            max_stack: self.limits.max_stack_bytes,
        };
        let prev_call = CALL.with(|c| c.replace(Some(budget)));
        let prev_tripped = TRIPPED.with(|t| t.replace(None));
        // A panic inside the engine (a bug of Rhai's, not the script's) is an error of this
        // call, not of the process.
        let out = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            if self.arity == 2 {
                self.engine.call_fn_with_options::<Dynamic>(
                    opts,
                    &mut scope,
                    &self.ast,
                    ENTRY_POINT,
                    (obs_map, act_arr),
                )
            } else {
                self.engine.call_fn_with_options::<Dynamic>(opts, &mut scope, &self.ast, ENTRY_POINT, (obs_map,))
            }
        }));
        let spent = CALL.with(|c| c.replace(prev_call)).map_or(0, |b| b.ops);
        let tripped = TRIPPED.with(|t| t.replace(prev_tripped));
        if let Some(mut t) = batch {
            t.ops_before = t.ops_before.saturating_add(spent);
            BATCH.with(|c| c.set(Some(t)));
        }
        let out = match out {
            Ok(r) => r.map_err(|e| LareError::script(classify(&e, tripped, &self.limits), e.to_string()))?,
            Err(_) => {
                return Err(LareError::script(ScriptErrorKind::Runtime, "the script engine panicked (a Rhai bug)"))
            }
        };
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
                let x = num(d).map(|x| x as f32).map_err(|_| {
                    LareError::script(
                        ScriptErrorKind::BadOutput,
                        format!("factor {i} is {} (`{ENTRY_POINT}` must return an array of numbers)", d.type_name()),
                    )
                })?;
                if !x.is_finite() {
                    let value = num(d).unwrap_or(f64::NAN);
                    return Err(LareError::NonFinite {
                        what: format!("factors returned by `{ENTRY_POINT}`"),
                        index: i,
                        value,
                    });
                }
                Ok(x)
            })
            .collect()
    }
}

/// Compiles `source` under the compile-time limit.
fn compile(engine: &Engine, source: &str, limits: &SandboxLimits) -> Result<AST> {
    let start = Instant::now();
    let prev = COMPILE_DEADLINE.with(|d| d.replace(deadline_after(start, limits.max_compile_ms)));
    COMPILE_LATE.with(|l| l.set(false));
    let out = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| engine.compile(source)));
    COMPILE_DEADLINE.with(|d| d.set(prev));
    let late = COMPILE_LATE.with(|l| l.replace(false));
    let elapsed = start.elapsed();
    let too_slow = || {
        LareError::script(
            limits.exceeded(SandboxLimit::MaxCompileMs),
            format!("compiling took more than {} ms ({} bytes of source)", limits.max_compile_ms, source.len()),
        )
    };
    match out {
        Err(_) => Err(LareError::script(ScriptErrorKind::Compile, "the script compiler panicked (a Rhai bug)")),
        Ok(Err(_)) if late => Err(too_slow()),
        Ok(Err(e)) => Err(LareError::script(parse_kind(&e.0, limits), e.to_string())),
        // the parse finished, but what followed its last token (the optimiser) overran
        Ok(Ok(_)) if elapsed > Duration::from_millis(limits.max_compile_ms) => Err(too_slow()),
        Ok(Ok(ast)) => Ok(ast),
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

    /// As the default, with the rows' calls sharing one budget of `max_batch_operations`
    /// operations and `max_batch_wall_ms` of wall time.
    fn encode_batch(
        &self,
        obs: ArrayView2<'_, f32>,
        act: ArrayView2<'_, f32>,
        next_obs: ArrayView2<'_, f32>,
    ) -> Result<Array2<f32>> {
        let budget = BatchBudget {
            ops_before: 0,
            max_ops: self.limits.max_batch_operations,
            deadline: deadline_after(Instant::now(), self.limits.max_batch_wall_ms),
        };
        on_sandbox_thread(&self.limits, || {
            let prev = BATCH.with(|c| c.replace(Some(budget)));
            let out = encode_rows(self, obs, act, next_obs);
            BATCH.with(|c| c.set(prev));
            out
        })
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

    fn kind(r: Result<ScriptEncoder>) -> ScriptErrorKind {
        match r {
            Err(LareError::Script { kind, .. }) => kind,
            other => panic!("expected a script error, got {other:?}"),
        }
    }

    fn limit(limit: SandboxLimit, value: u64) -> ScriptErrorKind {
        ScriptErrorKind::Limit { limit, value }
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
        assert_eq!(kind(probe("fn evaluation_func(obs, act) { [1.0 ")), ScriptErrorKind::Compile);
        assert_eq!(kind(probe("fn other(obs, act) { [1.0] }")), ScriptErrorKind::MissingFunction);
        assert_eq!(kind(probe("fn evaluation_func(obs, act) { [obs.nope + 1.0] }")), ScriptErrorKind::Runtime);
        assert_eq!(kind(probe("fn evaluation_func(obs, act) { 1.0 }")), ScriptErrorKind::BadOutput);
        assert_eq!(kind(probe("fn evaluation_func(obs, act) { [\"a\"] }")), ScriptErrorKind::BadOutput);
        assert_eq!(kind(probe("fn evaluation_func(obs, act) { [] }")), ScriptErrorKind::BadOutput);
        // no I/O, no modules, no eval, no clock, no exit
        assert_eq!(kind(probe("import \"x\" as y; fn evaluation_func(obs, act) { [1.0] }")), ScriptErrorKind::Compile);
        assert!(matches!(
            kind(probe("fn evaluation_func(obs, act) { eval(\"1\"); [1.0] }")),
            ScriptErrorKind::Compile | ScriptErrorKind::Runtime
        ));
        for f in ["sleep(0.01)", "sleep(1)", "timestamp()", "exit()", "parse_json(\"{}\")", "blob(10)"] {
            let r = probe(&format!("fn evaluation_func(obs, act) {{ {f}; [1.0] }}"));
            let Err(LareError::Script { kind: ScriptErrorKind::Runtime, message }) = r else {
                panic!("{f}: {r:?}");
            };
            assert!(message.contains("Function not found"), "{f}: {message}");
        }
        let printed = probe("fn evaluation_func(obs, act) { print(\"hi\"); debug(obs); [1.0] }").unwrap();
        assert_eq!(printed.dim(), 1);
    }

    #[test]
    fn sandbox_stops_endless_loops_and_unbounded_allocation() {
        // generous wall time, so that the limit under test is the one that stops the script
        let slow_ok = SandboxLimits::default().max_wall_ms(60_000);
        assert_eq!(
            kind(probe_with("fn evaluation_func(obs, act) { loop { } [1.0] }", slow_ok.clone())),
            limit(SandboxLimit::MaxOperations, 200_000)
        );
        // operations inside closures count (Rhai's own counter forgets them on return)
        assert_eq!(
            kind(probe_with(
                "fn evaluation_func(obs, act) { let a = []; a.pad(100, 1.0);
                 let b = a.map(|x| { let s = 0; for i in 0..100 { s += i; } s }); [b.len()] }",
                slow_ok.clone().max_operations(5_000)
            )),
            limit(SandboxLimit::MaxOperations, 5_000)
        );
        let small = slow_ok.clone().max_array_size(200).max_operations(u64::MAX);
        assert_eq!(
            kind(probe_with("fn evaluation_func(obs, act) { let a = []; loop { a.push(1.0); } a }", small.clone())),
            limit(SandboxLimit::MaxArraySize, 200)
        );
        assert_eq!(
            kind(probe_with("fn evaluation_func(obs, act) { let a = []; a.pad(100000000, 0.0); a }", small.clone())),
            limit(SandboxLimit::MaxArraySize, 200)
        );
        assert_eq!(
            kind(probe_with("fn evaluation_func(obs, act) { let s = \"x\"; loop { s += s; } [1.0] }", small.clone())),
            limit(SandboxLimit::MaxStringSize, 10_000)
        );
        assert_eq!(
            kind(probe_with(
                "fn evaluation_func(obs, act) { let m = #{}; for i in 0..5000 { m[`k${i}`] = i; } [m.len()] }",
                small
            )),
            limit(SandboxLimit::MaxMapSize, 1_000)
        );
        assert_eq!(
            kind(probe("fn f(x) { f(x + 1) } fn evaluation_func(obs, act) { [f(1)] }")),
            limit(SandboxLimit::MaxCallLevels, 16)
        );
        // the wall-clock limit stops a slow script before its operation budget runs out
        let slow = probe_with(
            "fn evaluation_func(obs, act) { let x = 0; loop { x += 1; } [1.0] }",
            SandboxLimits::default().max_operations(u64::MAX).max_wall_ms(20),
        );
        assert_eq!(kind(slow), limit(SandboxLimit::MaxWallMs, 20));
    }

    #[test]
    fn deeply_nested_data_is_an_error_not_a_stack_overflow() {
        // each was a SIGABRT (stack overflow on a 2 MiB test thread) before scripts ran on a
        // thread of their own with a stack check on every operation
        for (depth, op) in
            [(300, "a == a"), (300, "to_string(a)"), (300, "a.contains(a)"), (3000, "let b = a"), (9000, "1")]
        {
            let src = format!(
                "fn evaluation_func(obs, act) {{ let a = []; for i in 0..{depth} {{ a = [a]; }} {op}; [1.0] }}"
            );
            let limits = SandboxLimits::default().max_wall_ms(120_000).max_operations(u64::MAX);
            match probe_with(&src, limits) {
                Ok(e) => assert_eq!(e.dim(), 1),
                Err(LareError::Script { kind: ScriptErrorKind::Limit { .. }, .. }) => {}
                Err(e) => panic!("{op} at depth {depth}: {e}"),
            }
        }
        // a small stack budget stops the recursion of `==` over nested arrays
        let src = "fn evaluation_func(obs, act) { let a = []; for i in 0..2000 { a = [a]; } a == a; [1.0] }";
        let limits = SandboxLimits::default().max_wall_ms(120_000).max_stack_bytes(256 << 10);
        assert_eq!(kind(probe_with(src, limits)), limit(SandboxLimit::MaxStackBytes, 256 << 10));
    }

    #[test]
    fn replace_checks_its_result_size_before_building_it() {
        // 10 000 bytes with a 10 000-byte string at each of its 10 001 boundaries: 100 MB
        let src =
            "fn evaluation_func(obs, act) { let s = \"\"; s.pad(10000, 'x'); let t = s; s.replace(\"\", t); [1.0] }";
        let t = Instant::now();
        assert_eq!(kind(probe(src)), limit(SandboxLimit::MaxStringSize, 10_000));
        assert!(t.elapsed() < Duration::from_secs(2), "{:?}", t.elapsed());
        let src = "fn evaluation_func(obs, act) { let s = \"\"; s.pad(1000, 'x'); s.replace('x', \"abcdefghijklmnopqrstuvwxyz\"); [1.0] }";
        assert_eq!(kind(probe(src)), limit(SandboxLimit::MaxStringSize, 10_000));
        let ok = probe("fn evaluation_func(obs, act) { let s = \"a-b-c\"; s.replace(\"-\", \"+=\"); s.replace('a', \"x\"); [s.len(), if s == \"x+=b+=c\" { 1 } else { 0 }] }")
            .unwrap();
        assert_eq!(ok.call(&[0.0; 3], &[0.0]).unwrap(), vec![7.0, 1.0]);
    }

    #[test]
    fn sorts_are_stable_and_surface_comparator_errors() {
        let e = probe(
            "fn evaluation_func(obs, act) {
                let a = [3, 1, 2, 5, 4];
                a.sort();
                let b = [3.5, -1.0, 2.0];
                b.sort_desc();
                let c = [[2, 0], [1, 1], [2, 2], [1, 3]];
                c.sort(|x, y| x[0] - y[0]);               // integer comparator, stable on ties
                let d = [0.5, -0.25, 2.0].order(|x, y| x - y); // float comparator: by sign
                let e = [1, 5, 2].order_by(|x, y| x > y);  // boolean: true puts x first
                let f = [1, 1, 2, 2, 2, 3];
                f.dedup(|p, q| p == q);
                [a[0], a[4], b[0], b[2], c[0][1], c[1][1], c[2][1], c[3][1], d[0], d[2], e[0], e[2], f.len(),
                 [\"b\", \"a\"].order()[0] == \"a\"]
            }",
        );
        // booleans are not factors: the last one makes it a BadOutput, so drop it
        assert_eq!(kind(e), ScriptErrorKind::BadOutput);
        let e = probe(
            "fn evaluation_func(obs, act) {
                let a = [3, 1, 2, 5, 4];
                a.sort();
                let b = [3.5, -1.0, 2.0];
                b.sort_desc();
                let c = [[2, 0], [1, 1], [2, 2], [1, 3]];
                c.sort(|x, y| x[0] - y[0]);
                let d = [0.5, -0.25, 2.0].order(|x, y| x - y);
                let e = [1, 5, 2].order_by(|x, y| x > y);
                let f = [1, 1, 2, 2, 2, 3];
                f.dedup(|p, q| p == q);
                [a[0], a[4], b[0], b[2], c[0][1], c[1][1], c[2][1], c[3][1], d[0], d[2], e[0], e[2], f.len()]
            }",
        )
        .unwrap();
        assert_eq!(
            e.call(&[0.0; 3], &[0.0]).unwrap(),
            vec![1.0, 5.0, 3.5, -1.0, 1.0, 3.0, 0.0, 2.0, -0.25, 2.0, 5.0, 1.0, 3.0]
        );
        // a throwing comparator is an error of the call (Rhai's own `sort` drops it)
        for f in ["sort", "sort_by", "order", "order_by"] {
            let src =
                format!("fn evaluation_func(obs, act) {{ let a = [3, 1, 2]; a.{f}(|x, y| throw \"boom\"); [1.0] }}");
            let r = probe(&src);
            let Err(LareError::Script { kind: ScriptErrorKind::Runtime, message }) = r else { panic!("{f}: {r:?}") };
            assert!(message.contains("boom"), "{f}: {message}");
        }
        let r = probe("fn evaluation_func(obs, act) { let a = [1, 1]; a.dedup(|x, y| throw \"dup\"); [1.0] }");
        assert!(
            matches!(&r, Err(LareError::Script { kind: ScriptErrorKind::Runtime, message }) if message.contains("dup"))
        );
        // a comparator returning nonsense or NaN, mixed types: errors, not an arbitrary order
        for body in ["a.sort(|x, y| \"no\")", "a.sort(|x, y| 0.0 / 0.0)", "a.dedup(|x, y| 1)", "[1, 2.0].sort()"] {
            let src = format!("fn evaluation_func(obs, act) {{ let a = [3, 1, 2]; {body}; [1.0] }}");
            assert_eq!(kind(probe(&src)), ScriptErrorKind::Runtime, "{body}");
        }
        // the script may catch a comparator's error, and the array keeps every element
        let caught = probe(
            "fn evaluation_func(obs, act) { let a = [3, 1, 2];
             try { a.sort(|x, y| if x == 2 { throw 1 } else { x - y }); } catch { }
             a.sort(); [a.len(), a[0], a[2]] }",
        )
        .unwrap();
        assert_eq!(caught.call(&[0.0; 3], &[0.0]).unwrap(), vec![3.0, 1.0, 3.0]);
        // NaN in a float sort: no panic, a permutation
        let nan = probe(
            "fn evaluation_func(obs, act) { let a = []; for i in 0..300 { a.push(if i % 7 == 0 { 0.0 / 0.0 } else { (i * 7919 % 1000) * 1.0 }); }
             a.sort(); [a.len()] }",
        )
        .unwrap();
        assert_eq!(nan.call(&[0.0; 3], &[0.0]).unwrap(), vec![300.0]);
    }

    #[test]
    fn source_size_compile_time_and_nesting_are_limited() {
        let body = "let x = 1.0;\n".repeat(6_000); // 78 000 bytes
        let src = format!("fn evaluation_func(obs, act) {{ {body} [x] }}");
        let r = probe(&src);
        let Err(LareError::Script { kind: k, message }) = r else { panic!("{r:?}") };
        assert_eq!(k, limit(SandboxLimit::MaxSourceBytes, 65_536));
        assert!(message.contains(&src.len().to_string()), "{message}");
        // within the size limit, a 1 ms compile budget stops the parse of 60 kB
        let body = "let x = 1.0 + 2.0 * 3.0;\n".repeat(2_400);
        let src = format!("fn evaluation_func(obs, act) {{ {body} [x] }}");
        assert!(src.len() <= 65_536);
        assert_eq!(
            kind(probe_with(&src, SandboxLimits::default().max_compile_ms(1))),
            limit(SandboxLimit::MaxCompileMs, 1)
        );
        assert!(probe(&src).is_ok());
        // nesting deeper than max_expr_depth
        let deep = format!("fn evaluation_func(obs, act) {{ [{}1.0{}] }}", "(".repeat(100), ")".repeat(100));
        assert_eq!(kind(probe(&deep)), limit(SandboxLimit::MaxExprDepth, 64));
        let deep_blocks = format!("fn evaluation_func(obs, act) {{ {} [1.0] }}", "{".repeat(100) + &*"}".repeat(100));
        assert_eq!(kind(probe(&deep_blocks)), limit(SandboxLimit::MaxExprDepth, 64));
    }

    #[test]
    fn non_finite_factors_are_errors_naming_the_factor() {
        let e = probe("fn evaluation_func(obs, act) { [1.0, safe_div(1.0, obs.theta_dot) * 0.0 + 1.0 / (obs.theta_dot - 0.5), 2.0] }");
        // probe state theta_dot = 0.5: the second factor is 1/0 = inf
        match e {
            Err(LareError::NonFinite { index: 1, value, .. }) => assert!(value.is_infinite()),
            other => panic!("{other:?}"),
        }
        let e =
            probe("fn evaluation_func(obs, act) { [obs.theta_dot, sqrt(obs.theta_dot - 1.0), 1e300 * obs.theta_dot] }")
                .unwrap_err();
        assert!(matches!(e, LareError::NonFinite { index: 1, .. }), "{e}");
        let e = probe("fn evaluation_func(obs, act) { [1.0, 2.0, 1e300 * obs.theta_dot] }").unwrap_err();
        // finite as f64, infinite as the f32 factor
        assert!(matches!(e, LareError::NonFinite { index: 2, value, .. } if value == 5e299), "{e}");
        let ok = probe("fn evaluation_func(obs, act) { [1.0, sqrt(obs.theta_dot)] }").unwrap();
        let mut out = [0.0f32; 2];
        let e = ok.encode(&[0.0, 0.0, -1.0], &[0.0], &[0.0; 3], &mut out).unwrap_err();
        assert!(matches!(&e, LareError::NonFinite { index: 1, value, .. } if value.is_nan()), "{e}");
        assert!(e.to_string().contains("index 1"), "{e}");
    }

    #[test]
    fn limits_validate_and_name_the_field() {
        SandboxLimits::default().check().unwrap();
        let zero = [
            SandboxLimits::default().max_source_bytes(0),
            SandboxLimits::default().max_compile_ms(0),
            SandboxLimits::default().max_operations(0),
            SandboxLimits::default().max_wall_ms(0),
            SandboxLimits::default().max_batch_operations(0),
            SandboxLimits::default().max_batch_wall_ms(0),
            SandboxLimits::default().max_array_size(0),
            SandboxLimits::default().max_string_size(0),
            SandboxLimits::default().max_map_size(0),
            SandboxLimits::default().max_call_levels(0),
            SandboxLimits::default().max_expr_depth(0),
            SandboxLimits::default().max_stack_bytes(0),
        ];
        for (p, l) in zero.into_iter().zip(ALL_LIMITS) {
            let e = p.clone().check().unwrap_err();
            assert!(e.to_string().contains(&format!("`{}`", l.name())), "{e}");
            assert_eq!(p.value(l), 0);
            // 1 and the upper end are accepted, one past it is not
            let upper = UPPER.iter().find(|(u, _)| *u == l).map_or(u64::MAX, |(_, m)| *m);
            let (mut one, mut max, mut past) = (p.clone(), p.clone(), p);
            set(&mut one, l, 1);
            set(&mut max, l, upper);
            one.check().unwrap();
            max.check().unwrap();
            if upper < u64::MAX {
                set(&mut past, l, upper + 1);
                let e = past.check().unwrap_err();
                assert!(e.to_string().contains(&format!("`{}`", l.name())), "{e}");
            }
        }
        let parsed: SandboxLimits = serde_json::from_str("{}").unwrap();
        assert_eq!(parsed, SandboxLimits::default());
        let parsed: SandboxLimits = serde_json::from_str(r#"{"max_compile_ms": 7}"#).unwrap();
        assert_eq!(parsed, SandboxLimits::default().max_compile_ms(7));
        assert!(serde_json::from_str::<SandboxLimits>(r#"{"max_wall": 7}"#).is_err());
        // a wall budget past what `Instant` holds means no deadline, not an overflow panic
        let e = probe_with("fn evaluation_func(obs, act) { [1.0] }", SandboxLimits::default().max_wall_ms(u64::MAX));
        assert_eq!(e.unwrap().dim(), 1);
    }

    fn set(p: &mut SandboxLimits, l: SandboxLimit, v: u64) {
        let u = usize::try_from(v).unwrap_or(usize::MAX);
        match l {
            SandboxLimit::MaxSourceBytes => p.max_source_bytes = u,
            SandboxLimit::MaxCompileMs => p.max_compile_ms = v,
            SandboxLimit::MaxOperations => p.max_operations = v,
            SandboxLimit::MaxWallMs => p.max_wall_ms = v,
            SandboxLimit::MaxBatchOperations => p.max_batch_operations = v,
            SandboxLimit::MaxBatchWallMs => p.max_batch_wall_ms = v,
            SandboxLimit::MaxArraySize => p.max_array_size = u,
            SandboxLimit::MaxStringSize => p.max_string_size = u,
            SandboxLimit::MaxMapSize => p.max_map_size = u,
            SandboxLimit::MaxCallLevels => p.max_call_levels = u,
            SandboxLimit::MaxExprDepth => p.max_expr_depth = u,
            SandboxLimit::MaxStackBytes => p.max_stack_bytes = u,
        }
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
