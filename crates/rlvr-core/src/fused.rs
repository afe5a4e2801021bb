//! The fused CPU kernels (tch-free): value, exact gradient `∂L/∂logp` and metrics of every
//! policy loss in one sweep over a row's tokens, on `f32` slices.
//!
//! The tensor glue (`LossConfig::loss` on a CPU `f32` batch, feature `tch`) reads the input
//! tensors in place, calls [`Kernel::row`] on each row and lets it write the gradient row
//! straight into the output tensor's buffer; the per-token arithmetic is the same as the
//! libtorch path's (tests hold the two to ~1e-6 in `f32`, gradients included). Per-row sums are
//! accumulated in `f64`.
//!
//! Written for the auto-vectoriser: the token loops are straight-line `f32` code over
//! pre-sliced rows (no bounds checks in the loop), with a branch-free `exp` ([`exp_f32`],
//! Cephes' `expf` polynomial, ≤ 2 ulp on the range the losses use) and reductions into eight
//! independent `f64` lanes. On x86-64 with AVX2 and FMA, [`Kernel::row`] runs an AVX2 build of
//! the same code (run-time detection; bit-identical results).

// Index loops over rows sliced to the same length `T` (no bounds checks, vectorised) read
// better than five-way zips here.
#![allow(clippy::needless_range_loop)]

use crate::aggregate::{Aggregation, Compat, GlobalCounts};
use crate::correction::{DecoupledParams, IsLevel, IsMode};
use crate::kl::{KlEstimator, KlParams};
use crate::policy::PolicyLoss;

/// Calls `$f(adv_src, w_src, args…)` with the advantage and weight sources monomorphised.
macro_rules! dispatch {
    ($adv:expr, $w:expr, $t:expr, $f:ident $(::<$($g:tt),*>)? ($($arg:expr),* $(,)?)) => {
        match ($adv, $w) {
            (Per::Row(a), Per::Row(w)) => $f$(::<$($g),*>)?(Const(a), Const(w), $($arg),*),
            (Per::Row(a), Per::Tok(w)) => $f$(::<$($g),*>)?(Const(a), Slice(&w[..$t]), $($arg),*),
            (Per::Tok(a), Per::Row(w)) => $f$(::<$($g),*>)?(Slice(&a[..$t]), Const(w), $($arg),*),
            (Per::Tok(a), Per::Tok(w)) => $f$(::<$($g),*>)?(Slice(&a[..$t]), Slice(&w[..$t]), $($arg),*),
        }
    };
}

pub(crate) const EXP20_F32: f32 = 485_165_200.0; // e^20 rounded to f32
pub(crate) const EXPM20_F32: f32 = 2.061_153_6e-9; // e^-20 rounded to f32

/// `e^x` in `f32`, branch-free: Cody–Waite reduction by `ln 2` and Cephes' degree-5 `expf`
/// polynomial; the input is clamped to `[−87, 88]` (no overflow, no subnormals).
#[inline(always)]
pub(crate) fn exp_f32(x: f32) -> f32 {
    exp_in_range(x.clamp(-87.0, 88.0))
}

/// [`exp_f32`] of a log-ratio clamped to `[−20, 20]` (verl's clamp), without the second
/// clamp: the same bits for every input, NaN included, in fewer instructions.
#[inline(always)]
pub(crate) fn exp_clamp20(x: f32) -> f32 {
    exp_in_range(x.clamp(-20.0, 20.0))
}

/// The body of [`exp_f32`] for `x` already in `[−87, 88]` (or NaN, which propagates).
#[inline(always)]
fn exp_in_range(x: f32) -> f32 {
    const LOG2E: f32 = std::f32::consts::LOG2_E;
    const LN2_HI: f32 = 0.693_359_4;
    const LN2_LO: f32 = -2.121_944_4e-4;
    const MAGIC: f32 = 12_582_912.0; // 1.5 · 2^23: adding it rounds to an integer
    let t = x * LOG2E + MAGIC;
    let k = t - MAGIC;
    let ki = t.to_bits() as i32 - MAGIC.to_bits() as i32;
    let r = x - k * LN2_HI - k * LN2_LO;
    let mut p = 1.987_569_2e-4f32;
    p = p * r + 1.398_199_9e-3;
    p = p * r + 8.333_452e-3;
    p = p * r + 4.166_579_6e-2;
    p = p * r + 1.666_666_5e-1;
    p = p * r + 0.5; // Cephes: 5.0000001201e-1 (rounds to 0.5 in f32)
    let e = p * r * r + r + 1.0;
    e * f32::from_bits(((ki + 127) << 23) as u32)
}

/// Sum in eight `f64` lanes (vectorises; the order differs from a sequential sum).
#[inline(always)]
pub(crate) fn sum_f32(x: &[f32]) -> f64 {
    let mut acc = [0f64; 8];
    let chunks = x.chunks_exact(8);
    let rem = chunks.remainder();
    for c in chunks {
        for j in 0..8 {
            acc[j] += f64::from(c[j]);
        }
    }
    acc.iter().sum::<f64>() + rem.iter().map(|&v| f64::from(v)).sum::<f64>()
}

/// The number of ones in a block of 0/1 flags (at most [`BLOCK`] long, so the `f32` lane sums
/// are exact integers): cheaper than [`sum_f32`]'s `f64` lanes, and the same value.
#[inline(always)]
pub(crate) fn count_f32(x: &[f32]) -> f64 {
    let mut acc = [0f32; 8];
    let chunks = x.chunks_exact(8);
    let rem = chunks.remainder();
    for c in chunks {
        for j in 0..8 {
            acc[j] += c[j];
        }
    }
    f64::from(acc.iter().sum::<f32>() + rem.iter().sum::<f32>())
}

/// `Σ a_i b_i` in eight `f64` lanes.
#[inline(always)]
pub(crate) fn dot_f32(a: &[f32], b: &[f32]) -> f64 {
    let n = a.len().min(b.len());
    let (ca, cb) = (a[..n].chunks_exact(8), b[..n].chunks_exact(8));
    let (ra, rb) = (ca.remainder(), cb.remainder());
    let mut acc = [0f64; 8];
    for (x, y) in ca.zip(cb) {
        for j in 0..8 {
            acc[j] += f64::from(x[j]) * f64::from(y[j]);
        }
    }
    let tail: f64 = ra.iter().zip(rb).map(|(&x, &y)| f64::from(x) * f64::from(y)).sum();
    acc.iter().sum::<f64>() + tail
}

/// An advantage or weight that is constant over a row or given per token.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Per<'a> {
    /// The same value for every token of the row.
    Row(f32),
    /// One value per token.
    Tok(&'a [f32]),
}

/// One row of inputs (every slice has the row length `T`; the mask as `f32` weights).
#[derive(Debug, Clone, Copy)]
pub(crate) struct RowIn<'a> {
    pub lp: &'a [f32],
    pub old: &'a [f32],
    pub mask: &'a [f32],
    pub adv: Per<'a>,
    pub behave: Option<&'a [f32]>,
    pub refl: Option<&'a [f32]>,
}

/// Tokens per block of the sweep (every per-token array of a block fits in L1).
pub(crate) const BLOCK: usize = 256;

impl<'a> Per<'a> {
    /// Tokens `b0 .. b0 + len`.
    #[inline(always)]
    fn sub(self, b0: usize, len: usize) -> Per<'a> {
        match self {
            Per::Row(v) => Per::Row(v),
            Per::Tok(s) => Per::Tok(&s[b0..b0 + len]),
        }
    }
}

impl<'a> RowIn<'a> {
    /// Tokens `b0 .. b0 + len`.
    #[inline(always)]
    fn sub(&self, b0: usize, len: usize) -> RowIn<'a> {
        let r = b0..b0 + len;
        RowIn {
            lp: &self.lp[r.clone()],
            old: &self.old[r.clone()],
            mask: &self.mask[r.clone()],
            adv: self.adv.sub(b0, len),
            behave: self.behave.map(|b| &b[r.clone()]),
            refl: self.refl.map(|b| &b[r]),
        }
    }
}

/// Sums over rows (the metrics' numerators and the value), in `f64`.
#[derive(Debug, Clone)]
pub(crate) struct Sums {
    pub pg_value: f64,
    pub kl_value: f64,
    pub tokens: f64,
    pub ppo_kl: f64,
    pub ratio: f64,
    pub clip_up: f64,
    pub clip_lo: f64,
    pub clip_dual: f64,
    pub kl_ref: f64,
    /// Any NaN/inf among the row inputs.
    pub nonfinite: bool,
    // decoupled correction statistics (units: tokens with m > 0, or non-empty rows)
    pub is_units: f64,
    pub is_raw: f64,
    pub is_applied: f64,
    pub is_min: f64,
    pub is_max: f64,
    pub is_oob: f64,
    pub behave_kl: f64,
    pub any_is: bool,
}

impl Default for Sums {
    fn default() -> Self {
        Self {
            pg_value: 0.0,
            kl_value: 0.0,
            tokens: 0.0,
            ppo_kl: 0.0,
            ratio: 0.0,
            clip_up: 0.0,
            clip_lo: 0.0,
            clip_dual: 0.0,
            kl_ref: 0.0,
            nonfinite: false,
            is_units: 0.0,
            is_raw: 0.0,
            is_applied: 0.0,
            is_min: f64::INFINITY,
            is_max: f64::NEG_INFINITY,
            is_oob: 0.0,
            behave_kl: 0.0,
            any_is: false,
        }
    }
}

/// Per-row extras the caller supplies for the losses that need a batch-level pass first.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct RowExtra<'a> {
    /// LPO: the row's coefficient (times `K` when `scale_by_group_size`).
    pub lpo_coef: f64,
    /// Clip-Cov / KL-Cov: token positions (within the row) selected by the covariance rule.
    pub selected: &'a [usize],
}

/// Scratch rows, reused across rows.
#[derive(Debug, Default)]
pub(crate) struct Scratch {
    val: Vec<f32>,
    ratio: Vec<f32>,
    up: Vec<f32>,
    lo: Vec<f32>,
    dual: Vec<f32>,
    w: Vec<f32>,
    aux: Vec<f32>,
}

impl Scratch {
    fn ensure(&mut self, t: usize) {
        for v in
            [&mut self.val, &mut self.ratio, &mut self.up, &mut self.lo, &mut self.dual, &mut self.w, &mut self.aux]
        {
            if v.len() != t {
                v.resize(t, 0.0);
            }
        }
    }
}

/// Everything a row needs from the configuration.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Kernel {
    pub policy: PolicyLoss,
    pub aggregation: Aggregation,
    pub compat: Compat,
    pub counts: GlobalCounts,
    pub kl: Option<KlParams>,
    pub correction: Option<DecoupledParams>,
    /// Padded row length `T`.
    pub t: usize,
    /// Rows of the micro-batch (verl's GMPO averages over them).
    pub rows: usize,
    pub metrics: bool,
}

#[inline(always)]
fn b2f(x: bool) -> f32 {
    f32::from(u8::from(x))
}

/// Whether every value is finite: `x · 0` is 0 for finite `x` and NaN otherwise.
#[inline(always)]
fn all_finite(x: &[f32]) -> bool {
    let mut acc = [0f32; 8];
    let chunks = x.chunks_exact(8);
    let rem = chunks.remainder();
    for c in chunks {
        for j in 0..8 {
            acc[j] += c[j] * 0.0;
        }
    }
    rem.iter().all(|v| v.is_finite()) && acc.iter().all(|&v| v == 0.0)
}

/// Whether three equally long slices are all finite: one pass over `(a + b + c)·0` (NaN as soon
/// as any term is NaN or infinite), confirmed slice by slice only when it raises the alarm (a
/// finite sum can overflow), so the answer is exact.
#[inline(always)]
fn all_finite3(a: &[f32], b: &[f32], c: &[f32]) -> bool {
    let n = a.len().min(b.len()).min(c.len());
    let (a, b, c) = (&a[..n], &b[..n], &c[..n]);
    let mut acc = [0f32; 8];
    let (ca, cb, cc) = (a.chunks_exact(8), b.chunks_exact(8), c.chunks_exact(8));
    let tail: f32 =
        ca.remainder().iter().zip(cb.remainder()).zip(cc.remainder()).map(|((x, y), z)| (x + y + z) * 0.0).sum();
    for ((x, y), z) in ca.zip(cb).zip(cc) {
        for j in 0..8 {
            acc[j] += (x[j] + y[j] + z[j]) * 0.0;
        }
    }
    (tail == 0.0 && acc.iter().all(|&v| v == 0.0)) || (all_finite(a) && all_finite(b) && all_finite(c))
}

/// Whether the CPU has AVX2 and FMA (detected once, then cached by `std`).
#[cfg(target_arch = "x86_64")]
#[inline]
fn avx2_fma() -> bool {
    std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("fma")
}

/// Whether the CPU has AVX-512 (F, BW, DQ, VL) besides AVX2 and FMA (detected once, then
/// cached by `std`).
#[cfg(target_arch = "x86_64")]
#[inline]
fn avx512() -> bool {
    avx2_fma()
        && std::arch::is_x86_feature_detected!("avx512f")
        && std::arch::is_x86_feature_detected!("avx512bw")
        && std::arch::is_x86_feature_detected!("avx512dq")
        && std::arch::is_x86_feature_detected!("avx512vl")
}

/// The row's per-token weight, `Per::Row(1)` without correction.
struct IsRow {
    w: f32,
    tokens: bool,
}

impl Kernel {
    /// Processes one row: writes `∂L/∂logp` of every token into `grad` and adds the row's
    /// value and metric numerators to `sums`. The row-level quantities (token count when the
    /// aggregation or the loss needs it, the behaviour weight, GSPO's sequence ratio) come
    /// first; the tokens are then swept in blocks of [`BLOCK`] so that every per-token array of
    /// the block stays in L1.
    #[allow(unsafe_code)]
    pub(crate) fn row(&self, x: &RowIn<'_>, extra: &RowExtra<'_>, grad: &mut [f32], s: &mut Scratch, sums: &mut Sums) {
        #[cfg(target_arch = "x86_64")]
        {
            if avx512() {
                // SAFETY: `row_avx512` only needs AVX-512 F/BW/DQ/VL, AVX2 and FMA, checked just above.
                return unsafe { self.row_avx512(x, extra, grad, s, sums) };
            }
            if avx2_fma() {
                // SAFETY: `row_avx2` only needs the CPU to support AVX2 and FMA, checked just above.
                return unsafe { self.row_avx2(x, extra, grad, s, sums) };
            }
        }
        self.row_impl(x, extra, grad, s, sums);
    }

    /// [`Kernel::row`] compiled for AVX-512 (16 `f32` lanes). Bit-identical to the baseline
    /// build's results for the same reason as [`Kernel::row_avx2`]'s.
    ///
    /// # Safety
    /// The CPU must support AVX-512 F, BW, DQ and VL, AVX2 and FMA.
    #[cfg(target_arch = "x86_64")]
    #[allow(unsafe_code)]
    #[target_feature(enable = "avx512f,avx512bw,avx512dq,avx512vl,avx2,fma")]
    unsafe fn row_avx512(
        &self,
        x: &RowIn<'_>,
        extra: &RowExtra<'_>,
        grad: &mut [f32],
        s: &mut Scratch,
        sums: &mut Sums,
    ) {
        self.row_impl(x, extra, grad, s, sums);
    }

    /// [`Kernel::row`] compiled for AVX2 + FMA (8 `f32` lanes instead of SSE2's 4). Rust never
    /// contracts `a·b + c` into an FMA on its own, so the results are bit-identical to the
    /// baseline build's.
    ///
    /// # Safety
    /// The CPU must support AVX2 and FMA.
    #[cfg(target_arch = "x86_64")]
    #[allow(unsafe_code)]
    #[target_feature(enable = "avx2,fma")]
    unsafe fn row_avx2(&self, x: &RowIn<'_>, extra: &RowExtra<'_>, grad: &mut [f32], s: &mut Scratch, sums: &mut Sums) {
        self.row_impl(x, extra, grad, s, sums);
    }

    #[inline(always)]
    fn row_impl(&self, x: &RowIn<'_>, extra: &RowExtra<'_>, grad: &mut [f32], s: &mut Scratch, sums: &mut Sums) {
        let t = self.t;
        let (lp, old, m) = (&x.lp[..t], &x.old[..t], &x.mask[..t]);
        let grad = &mut grad[..t];
        s.ensure(t);
        let seq_is = self.correction.is_some_and(|p| p.level == IsLevel::Sequence) && x.behave.is_some();
        let need_n = matches!(self.aggregation, Aggregation::SeqMeanTokenMean)
            || matches!(self.policy, PolicyLoss::Gspo(_) | PolicyLoss::Gmpo(_))
            || seq_is;
        let n = if need_n { sum_f32(m) } else { 0.0 };
        let c = self.aggregation.row_scale(n, t, &self.counts, self.compat) as f32;
        let is = self.is_row(x, n, s, sums);
        let wbuf = std::mem::take(&mut s.w);
        let w: Per<'_> = if is.tokens { Per::Tok(&wbuf[..t]) } else { Per::Row(is.w) };
        if let PolicyLoss::Gmpo(p) = self.policy {
            // row-level value: the whole row at once
            let (ok, _, kl) = self.prepass(lp, old, m);
            sums.nonfinite |= !(ok && self.finite_extra(x, 0, t));
            sums.tokens += n;
            sums.ppo_kl += kl;
            self.gmpo(x, n, c, w, p.eps_low as f32, p.eps_high as f32, grad, s, sums);
            if let (Some(k), Some(r)) = (self.kl, x.refl) {
                self.kl_term(lp, &r[..t], m, c, &k, grad, s, sums);
            }
            s.w = wbuf;
            return;
        }
        let slr = match self.policy {
            PolicyLoss::Gspo(_) => (dot_delta(lp, old, m) / n.max(1.0)) as f32,
            _ => 0.0,
        };
        let mut b0 = 0;
        let mut sel = extra.selected;
        let mut local: Vec<usize> = Vec::new();
        while b0 < t {
            let len = BLOCK.min(t - b0);
            let xb = x.sub(b0, len);
            let wb = w.sub(b0, len);
            let gb = &mut grad[b0..b0 + len];
            // REINFORCE: checks, counts and the policy term in one sweep of the block
            let fused_pg = matches!(self.policy, PolicyLoss::Reinforce);
            let (ok, nb, kl) = if fused_pg {
                self.reinforce_sweep(&xb, c, wb, gb, s, sums)
            } else {
                self.prepass(xb.lp, xb.old, xb.mask)
            };
            sums.nonfinite |= !(ok && self.finite_extra(x, b0, len));
            if !need_n {
                sums.tokens += nb;
            }
            sums.ppo_kl += kl;
            local.clear();
            while let Some((&j, rest)) = sel.split_first() {
                if j >= b0 + len {
                    break;
                }
                if j >= b0 {
                    local.push(j - b0);
                }
                sel = rest;
            }
            if !fused_pg {
                self.policy_block(&xb, c, wb, slr, &local, extra.lpo_coef, gb, s, sums);
            }
            if let (Some(k), Some(r)) = (self.kl, xb.refl) {
                self.kl_term(xb.lp, r, xb.mask, c, &k, gb, s, sums);
            }
            b0 += len;
        }
        if need_n {
            sums.tokens += n;
        }
        s.w = wbuf;
    }

    /// Whether the optional inputs (per-token advantages, behaviour and reference log-probs)
    /// of tokens `b0 .. b0 + len` are finite.
    #[inline(always)]
    fn finite_extra(&self, x: &RowIn<'_>, b0: usize, len: usize) -> bool {
        let r = b0..b0 + len;
        let mut ok = true;
        if let Per::Tok(a) = x.adv {
            ok &= all_finite(&a[r.clone()]);
        }
        for y in [x.behave, x.refl].into_iter().flatten() {
            ok &= all_finite(&y[r.clone()]);
        }
        ok
    }

    /// The policy term of one block of tokens (every loss but GMPO).
    #[allow(clippy::too_many_arguments)]
    #[inline(always)]
    fn policy_block(
        &self,
        x: &RowIn<'_>,
        c: f32,
        w: Per<'_>,
        slr: f32,
        selected: &[usize],
        lpo_coef: f64,
        grad: &mut [f32],
        s: &mut Scratch,
        sums: &mut Sums,
    ) {
        match self.policy {
            PolicyLoss::Ppo(p) => {
                let hi_neg = (p.dual_clip.unwrap_or(f64::INFINITY).min(p.ratio_cap.unwrap_or(f64::INFINITY)) as f32)
                    .min(EXP20_F32);
                let b = Bounds {
                    lo_pos: EXPM20_F32,
                    hi_pos: (1.0 + p.eps_high) as f32,
                    lo_neg: (1.0 - p.eps_low) as f32,
                    hi_neg,
                };
                let dual = p.dual_clip.is_some() || p.ratio_cap.is_some();
                self.ratio_clip(x, c, w, b, RatioKind::Token, grad, s, sums, dual, &[]);
            }
            PolicyLoss::ClipCov(p) => {
                let b = Bounds {
                    lo_pos: 0.0,
                    hi_pos: (1.0 + p.eps_high) as f32,
                    lo_neg: (1.0 - p.eps_low) as f32,
                    hi_neg: f32::INFINITY,
                };
                self.ratio_clip(x, c, w, b, RatioKind::Token, grad, s, sums, false, selected);
            }
            PolicyLoss::Gspo(p) => {
                let hi_neg = (p.ratio_cap.unwrap_or(f64::INFINITY) as f32).min(EXP20_F32);
                let b = Bounds {
                    lo_pos: EXPM20_F32,
                    hi_pos: (1.0 + p.eps_high) as f32,
                    lo_neg: (1.0 - p.eps_low) as f32,
                    hi_neg,
                };
                self.ratio_clip(x, c, w, b, RatioKind::Seq(slr), grad, s, sums, p.ratio_cap.is_some(), &[]);
            }
            PolicyLoss::Cispo(p) => self.cispo(
                x,
                c,
                w,
                p.eps_low.map_or(0.0, |e| (1.0 - e) as f32),
                (1.0 + p.eps_high) as f32,
                grad,
                s,
                sums,
            ),
            PolicyLoss::Sapo(p) => self.sapo(x, c, w, p.tau_pos as f32, p.tau_neg as f32, grad, s, sums),
            PolicyLoss::Reinforce => {} // one sweep with the checks, see `row_impl`
            PolicyLoss::KlCov(p) => self.kl_cov(x, c, w, p.kl_coef as f32, selected, grad, s, sums),
            PolicyLoss::Lpo(p) => {
                let clip = p.clip_eps.map(|e| ((1.0 - e).ln() as f32, (1.0 + e).ln() as f32));
                self.lpo(x, c, w, clip, lpo_coef as f32, grad, s, sums);
            }
            PolicyLoss::Gmpo(_) => {} // row-level, see `row`
        }
    }

    /// One pass over a block's `logp`, `old_logp` and mask: whether they are all finite, the
    /// mask sum, and the `ppo_kl` numerator (`Σ m (old − logp)`; clamped to ±20 or `Σ m |δ|`
    /// as verl reports it).
    #[inline(always)]
    fn prepass(&self, lp: &[f32], old: &[f32], m: &[f32]) -> (bool, f64, f64) {
        let mode = match (self.compat, &self.policy) {
            (Compat::Verl, PolicyLoss::Ppo(_) | PolicyLoss::Cispo(_) | PolicyLoss::Sapo(_)) => 1u8,
            (Compat::Verl, PolicyLoss::KlCov(_)) => 2,
            _ => 0,
        };
        match mode {
            1 => prepass_loop::<1>(lp, old, m),
            2 => prepass_loop::<2>(lp, old, m),
            _ => prepass_loop::<0>(lp, old, m),
        }
    }

    /// The decoupled behaviour weight of the row (sequence level: a constant; token level:
    /// written to `s.w`) and its statistics.
    #[inline(always)]
    fn is_row(&self, x: &RowIn<'_>, n: f64, s: &mut Scratch, sums: &mut Sums) -> IsRow {
        let (Some(p), Some(b)) = (self.correction, x.behave) else { return IsRow { w: 1.0, tokens: false } };
        sums.any_is = true;
        let t = self.t;
        let (old, m, b) = (&x.old[..t], &x.mask[..t], &b[..t]);
        // Σ m (behave − prox)
        sums.behave_kl += dot_delta(b, old, m);
        let lower = p.lower.unwrap_or(0.0) as f32;
        let upper = p.upper as f32;
        match p.level {
            IsLevel::Sequence => {
                let has = n > 0.0;
                let lw = -dot_delta(b, old, m) / n.max(1e-12);
                let (applied, raw, inside) = p.weight(lw);
                let (applied, raw) = (applied as f32, raw as f32);
                if has {
                    sums.is_units += 1.0;
                    sums.is_raw += f64::from(raw);
                    sums.is_applied += f64::from(applied);
                    sums.is_oob += f64::from(u8::from(!inside));
                    sums.is_min = sums.is_min.min(f64::from(raw));
                    sums.is_max = sums.is_max.max(f64::from(raw));
                }
                IsRow { w: applied, tokens: false }
            }
            IsLevel::Token => {
                let w = &mut s.w[..t];
                let raw_row = &mut s.aux[..t];
                let mask_mode = p.mode == IsMode::Mask;
                for ((((wi, ri), &o), &bh), _) in w.iter_mut().zip(raw_row.iter_mut()).zip(old).zip(b).zip(m) {
                    let raw = exp_clamp20(o - bh);
                    let inside = raw >= lower && raw <= upper;
                    *ri = raw;
                    *wi = if mask_mode {
                        if inside {
                            raw
                        } else {
                            0.0
                        }
                    } else {
                        raw.max(lower).min(upper)
                    };
                }
                sums.is_units += sum_f32(m);
                sums.is_raw += dot_f32(raw_row, m);
                sums.is_applied += dot_f32(w, m);
                let mut oob = 0.0f64;
                for (&r, &mm) in raw_row.iter().zip(m) {
                    if mm > 0.0 {
                        sums.is_min = sums.is_min.min(f64::from(r));
                        sums.is_max = sums.is_max.max(f64::from(r));
                        if !(r >= lower && r <= upper) {
                            oob += 1.0;
                        }
                    }
                }
                sums.is_oob += oob;
                IsRow { w: 1.0, tokens: true }
            }
        }
    }

    #[allow(clippy::too_many_arguments)]
    #[inline(always)]
    fn ratio_clip(
        &self,
        x: &RowIn<'_>,
        c: f32,
        w: Per<'_>,
        b: Bounds,
        kind: RatioKind,
        grad: &mut [f32],
        s: &mut Scratch,
        sums: &mut Sums,
        with_dual: bool,
        selected: &[usize],
    ) {
        let t = grad.len();
        let o = ClipOut {
            grad: &mut grad[..t],
            val: &mut s.val[..t],
            ratio: &mut s.ratio[..t],
            up: &mut s.up[..t],
            lo: &mut s.lo[..t],
            dual: &mut s.dual[..t],
        };
        match kind {
            RatioKind::Token => dispatch!(x.adv, w, t, clip_loop::<_, _, true>(x, c, b, 0.0, true, o)),
            RatioKind::Seq(slr) => {
                let (sr, ok) = (exp_f32(slr.min(10.0)), slr < 10.0);
                dispatch!(x.adv, w, t, clip_loop::<_, _, false>(x, c, b, sr, ok, o))
            }
        }
        let mut value = sum_f32(&s.val[..t]);
        // Clip-Cov: the selected tokens lose their loss and gradient
        for &j in selected {
            if j < t {
                value -= f64::from(s.val[j]);
                grad[j] = 0.0;
            }
        }
        sums.pg_value += value;
        if self.metrics {
            sums.ratio += sum_f32(&s.ratio[..t]);
            sums.clip_up += count_f32(&s.up[..t]);
            sums.clip_lo += count_f32(&s.lo[..t]);
            if with_dual {
                sums.clip_dual += count_f32(&s.dual[..t]);
            }
        }
    }

    #[allow(clippy::too_many_arguments)]
    #[inline(always)]
    fn cispo(
        &self,
        x: &RowIn<'_>,
        c: f32,
        w: Per<'_>,
        lo: f32,
        hi: f32,
        grad: &mut [f32],
        s: &mut Scratch,
        sums: &mut Sums,
    ) {
        let t = grad.len();
        let (g, val, ratio, up, low) =
            (&mut grad[..t], &mut s.val[..t], &mut s.ratio[..t], &mut s.up[..t], &mut s.lo[..t]);
        dispatch!(x.adv, w, t, cispo_loop(x, c, lo, hi, g, val, ratio, up, low));
        sums.pg_value += sum_f32(val);
        if self.metrics {
            sums.ratio += sum_f32(ratio);
            sums.clip_up += count_f32(up);
            sums.clip_lo += count_f32(low);
        }
    }

    #[allow(clippy::too_many_arguments)]
    #[inline(always)]
    fn sapo(
        &self,
        x: &RowIn<'_>,
        c: f32,
        w: Per<'_>,
        tp: f32,
        tn: f32,
        grad: &mut [f32],
        s: &mut Scratch,
        sums: &mut Sums,
    ) {
        let t = grad.len();
        let (g, val, ratio) = (&mut grad[..t], &mut s.val[..t], &mut s.ratio[..t]);
        dispatch!(x.adv, w, t, sapo_loop(x, c, tp, tn, g, val, ratio));
        sums.pg_value += sum_f32(val);
        if self.metrics {
            sums.ratio += sum_f32(ratio);
        }
    }

    /// REINFORCE on one block: gradient, value and ratio in one elementwise loop (vectorised),
    /// their sums, and the checks of [`Kernel::prepass`] read off the `ppo_kl` sum.
    ///
    /// Every non-finite `logp`, `old_logp` or mask value makes its term `m (old − logp)` NaN
    /// or infinite (`0 · ∞` is NaN), so a finite sum proves the block finite without a pass of
    /// its own; a non-finite sum (also reached by finite values whose difference overflows) is
    /// confirmed by the exact check, so the answer is the same as [`Kernel::prepass`]'s.
    #[inline(always)]
    fn reinforce_sweep(
        &self,
        x: &RowIn<'_>,
        c: f32,
        w: Per<'_>,
        grad: &mut [f32],
        s: &mut Scratch,
        sums: &mut Sums,
    ) -> (bool, f64, f64) {
        let t = grad.len();
        let (g, val, ratio, klv) = (&mut grad[..t], &mut s.val[..t], &mut s.ratio[..t], &mut s.aux[..t]);
        if self.metrics {
            dispatch!(x.adv, w, t, reinforce_loop::<_, _, true>(x, c, g, val, ratio, klv));
            sums.ratio += sum_f32(ratio);
        } else {
            dispatch!(x.adv, w, t, reinforce_loop::<_, _, false>(x, c, g, val, ratio, klv));
        }
        sums.pg_value += sum_f32(val);
        // REINFORCE's `ppo_kl` is never clamped (`Kernel::prepass` mode 0)
        let kl = sum_f32(klv);
        let ok = kl.is_finite() || all_finite3(&x.lp[..t], &x.old[..t], &x.mask[..t]);
        (ok, sum_f32(&x.mask[..t]), kl)
    }

    #[allow(clippy::too_many_arguments)]
    #[inline(always)]
    fn gmpo(
        &self,
        x: &RowIn<'_>,
        n: f64,
        c: f32,
        w: Per<'_>,
        el: f32,
        eh: f32,
        grad: &mut [f32],
        s: &mut Scratch,
        sums: &mut Sums,
    ) {
        let t = self.t;
        let verl = self.compat == Compat::Verl;
        let (lp, old, m) = (&x.lp[..t], &x.old[..t], &x.mask[..t]);
        let ng = if verl { n + 1e-8 } else { n.max(1.0) };
        // sign-aware clip of each log-ratio into `val`; `aux` = 1 where unclipped
        let (dmin, unc) = (&mut s.val[..t], &mut s.aux[..t]);
        let asum = match x.adv {
            Per::Row(a) => {
                gmpo_dmin(x, Const(a), el, eh, false, dmin, unc);
                f64::from(a) * n
            }
            Per::Tok(a) => {
                let a = &a[..t];
                gmpo_dmin(x, Slice(a), el, eh, true, dmin, unc);
                dot_f32(a, m)
            }
        };
        let mlr = dot_f32(dmin, m) / ng;
        let in_range = mlr.abs() < 20.0;
        let ratio = mlr.clamp(-20.0, 20.0).exp();
        let abar = match x.adv {
            Per::Row(a) if !verl => f64::from(a),
            _ => asum / ng,
        };
        let corrected = self.correction.is_some() && x.behave.is_some();
        let wrow = if verl {
            let logw = match w {
                Per::Tok(wt) => {
                    let mut acc = 0.0;
                    for i in 0..t {
                        acc += (f64::from(wt[i]) + 1e-10).ln() * f64::from(m[i]);
                    }
                    acc
                }
                Per::Row(wv) => (f64::from(wv) + 1e-10).ln() * n,
            };
            let seqw = if corrected { (logw / ng).exp() } else { 1.0 };
            seqw / self.rows.max(1) as f64
        } else {
            match w {
                Per::Tok(wt) => f64::from(c) * dot_f32(&wt[..t], m),
                Per::Row(wv) => f64::from(c) * f64::from(wv) * n,
            }
        };
        let seq_loss = -abar * ratio;
        sums.pg_value += wrow * seq_loss;
        let row_g = if in_range { (wrow * seq_loss / ng) as f32 } else { 0.0 };
        let grad = &mut grad[..t];
        for i in 0..t {
            grad[i] = m[i] * row_g * unc[i];
        }
        if self.metrics {
            sums.ratio += ratio * n;
            let (mut up, mut lo) = (0.0f64, 0.0f64);
            for i in 0..t {
                if m[i] > 0.0 {
                    let a = match x.adv {
                        Per::Row(a) => a,
                        Per::Tok(at) => at[i],
                    };
                    let d = lp[i] - old[i];
                    let clipped = if verl { d.clamp(-el, eh) != d } else { unc[i] == 0.0 };
                    if clipped && a > 0.0 {
                        up += 1.0;
                    }
                    if clipped && a < 0.0 {
                        lo += 1.0;
                    }
                }
            }
            sums.clip_up += up;
            sums.clip_lo += lo;
        }
    }

    #[allow(clippy::too_many_arguments)]
    #[inline(always)]
    fn kl_cov(
        &self,
        x: &RowIn<'_>,
        c: f32,
        w: Per<'_>,
        beta: f32,
        selected: &[usize],
        grad: &mut [f32],
        s: &mut Scratch,
        sums: &mut Sums,
    ) {
        let t = grad.len();
        let (lp, old, m) = (&x.lp[..t], &x.old[..t], &x.mask[..t]);
        let (g, val, ratio) = (&mut grad[..t], &mut s.val[..t], &mut s.ratio[..t]);
        dispatch!(x.adv, w, t, kl_cov_loop(x, c, g, val, ratio));
        let mut value = sum_f32(val);
        for &j in selected {
            if j < t {
                let d = lp[j] - old[j];
                let wj = match w {
                    Per::Row(v) => v,
                    Per::Tok(wt) => wt[j],
                };
                let pen = c * m[j] * wj * beta;
                value += f64::from(pen * d.abs());
                g[j] += pen
                    * if d > 0.0 {
                        1.0
                    } else if d < 0.0 {
                        -1.0
                    } else {
                        0.0
                    };
            }
        }
        sums.pg_value += value;
        if self.metrics {
            sums.ratio += sum_f32(ratio);
        }
    }

    #[allow(clippy::too_many_arguments)]
    #[inline(always)]
    fn lpo(
        &self,
        x: &RowIn<'_>,
        c: f32,
        w: Per<'_>,
        clip: Option<(f32, f32)>,
        kc: f32,
        grad: &mut [f32],
        s: &mut Scratch,
        sums: &mut Sums,
    ) {
        let t = grad.len();
        let (g, val, ratio, lo) = (&mut grad[..t], &mut s.val[..t], &mut s.ratio[..t], &mut s.lo[..t]);
        let (clo, chi) = clip.unwrap_or((f32::NEG_INFINITY, f32::INFINITY));
        match w {
            Per::Row(v) => lpo_loop(x, Const(v), c * kc, clo, chi, g, val, ratio, lo),
            Per::Tok(wt) => lpo_loop(x, Slice(&wt[..t]), c * kc, clo, chi, g, val, ratio, lo),
        }
        sums.pg_value += sum_f32(val);
        if self.metrics {
            sums.ratio += sum_f32(ratio);
            if clip.is_some() {
                sums.clip_up += count_f32(lo);
            }
        }
    }

    #[allow(clippy::too_many_arguments)]
    #[inline(always)]
    fn kl_term(
        &self,
        lp: &[f32],
        r: &[f32],
        m: &[f32],
        c: f32,
        k: &KlParams,
        grad: &mut [f32],
        s: &mut Scratch,
        sums: &mut Sums,
    ) {
        let t = grad.len();
        let (g, val, kv) = (&mut grad[..t], &mut s.val[..t], &mut s.ratio[..t]);
        let (lp, r, m) = (&lp[..t], &r[..t], &m[..t]);
        let beta = k.coef as f32;
        match (k.estimator, k.straight_through) {
            (KlEstimator::K1, false) => kl_loop::<0, false>(lp, r, m, c, beta, g, val, kv),
            (KlEstimator::K1, true) => kl_loop::<0, true>(lp, r, m, c, beta, g, val, kv),
            (KlEstimator::Abs, false) => kl_loop::<1, false>(lp, r, m, c, beta, g, val, kv),
            (KlEstimator::Abs, true) => kl_loop::<1, true>(lp, r, m, c, beta, g, val, kv),
            (KlEstimator::K2, false) => kl_loop::<2, false>(lp, r, m, c, beta, g, val, kv),
            (KlEstimator::K2, true) => kl_loop::<2, true>(lp, r, m, c, beta, g, val, kv),
            (KlEstimator::K3, false) => kl_loop::<3, false>(lp, r, m, c, beta, g, val, kv),
            (KlEstimator::K3, true) => kl_loop::<3, true>(lp, r, m, c, beta, g, val, kv),
        }
        sums.kl_value += k.coef * sum_f32(val);
        if self.metrics {
            sums.kl_ref += sum_f32(kv);
        }
    }
}

/// `Σ m (a − b)` in `f64` lanes.
#[inline(always)]
fn dot_delta(a: &[f32], b: &[f32], m: &[f32]) -> f64 {
    let n = a.len().min(b.len()).min(m.len());
    let (a, b, m) = (&a[..n], &b[..n], &m[..n]);
    let mut acc = [0f64; 8];
    let mut i = 0;
    while i + 8 <= n {
        for j in 0..8 {
            acc[j] += f64::from(m[i + j] * (a[i + j] - b[i + j]));
        }
        i += 8;
    }
    let mut tail = 0.0;
    while i < n {
        tail += f64::from(m[i] * (a[i] - b[i]));
        i += 1;
    }
    acc.iter().sum::<f64>() + tail
}

#[derive(Debug, Clone, Copy)]
struct Bounds {
    lo_pos: f32,
    hi_pos: f32,
    lo_neg: f32,
    hi_neg: f32,
}

#[derive(Debug, Clone, Copy)]
enum RatioKind {
    /// `r = exp(logp − old)` per token.
    Token,
    /// GSPO: `s = exp(min(slr, 10))` for the whole row, `slr` the mean log-ratio.
    Seq(f32),
}

/// See [`Kernel::prepass`]; `MODE` 0: `Σ m (old − logp)`, 1: clamped to ±20, 2: `Σ m |δ|`.
#[inline(always)]
fn prepass_loop<const MODE: u8>(lp: &[f32], old: &[f32], m: &[f32]) -> (bool, f64, f64) {
    let n = lp.len().min(old.len()).min(m.len());
    let (lp, old, m) = (&lp[..n], &old[..n], &m[..n]);
    // three short loops over the (L1-resident) block: each vectorises on its own, one loop
    // with three accumulators of two widths does not
    let ok = all_finite3(lp, old, m);
    let (lc, oc, mc) = (lp.chunks_exact(8), old.chunks_exact(8), m.chunks_exact(8));
    let (lr, or, mr) = (lc.remainder(), oc.remainder(), mc.remainder());
    let mut kl = [0f64; 8];
    for ((l, o), mm) in lc.zip(oc).zip(mc) {
        for j in 0..8 {
            let d = o[j] - l[j];
            let d = match MODE {
                1 => d.clamp(-20.0, 20.0),
                2 => d.abs(),
                _ => d,
            };
            kl[j] += f64::from(mm[j] * d);
        }
    }
    let mut tkl = 0.0;
    for ((&l, &o), &mm) in lr.iter().zip(or).zip(mr) {
        let d = o - l;
        let d = match MODE {
            1 => d.clamp(-20.0, 20.0),
            2 => d.abs(),
            _ => d,
        };
        tkl += f64::from(mm * d);
    }
    (ok, sum_f32(m), kl.iter().sum::<f64>() + tkl)
}

/// `max`/`min` without NaN handling (the inputs are finite or flagged), so they lower to one
/// packed instruction.
#[inline(always)]
fn fmax(a: f32, b: f32) -> f32 {
    if a > b {
        a
    } else {
        b
    }
}
#[inline(always)]
fn fmin(a: f32, b: f32) -> f32 {
    if a < b {
        a
    } else {
        b
    }
}

/// A per-token source: a row constant or a slice (monomorphised, so the loops vectorise).
trait Src: Copy {
    /// The source restricted to `t` tokens (so indexing below `t` needs no bounds check).
    fn fit(self, t: usize) -> Self;
    fn at(&self, i: usize) -> f32;
}
#[derive(Clone, Copy)]
struct Const(f32);
impl Src for Const {
    #[inline(always)]
    fn fit(self, _: usize) -> Self {
        self
    }
    #[inline(always)]
    fn at(&self, _: usize) -> f32 {
        self.0
    }
}
#[derive(Clone, Copy)]
struct Slice<'a>(&'a [f32]);
impl Src for Slice<'_> {
    #[inline(always)]
    fn fit(self, t: usize) -> Self {
        Slice(&self.0[..t])
    }
    #[inline(always)]
    fn at(&self, i: usize) -> f32 {
        self.0[i]
    }
}

/// The outputs of [`clip_loop`].
struct ClipOut<'a> {
    grad: &'a mut [f32],
    val: &'a mut [f32],
    ratio: &'a mut [f32],
    up: &'a mut [f32],
    lo: &'a mut [f32],
    dual: &'a mut [f32],
}

/// PPO / GSPO / Clip-Cov: `eff = clamp(ratio, lo, hi)` by the sign of `A`, value `coef · eff`,
/// gradient `coef · ratio` where the ratio is unclipped. `TOKEN`: `ratio = exp(logp − old)` per
/// token; otherwise the row's `seq_r` (GSPO, unclipped only while `seq_ok`).
#[allow(clippy::too_many_arguments)]
#[inline(always)]
fn clip_loop<A: Src, W: Src, const TOKEN: bool>(
    a: A,
    w: W,
    x: &RowIn<'_>,
    c: f32,
    b: Bounds,
    seq_r: f32,
    seq_ok: bool,
    o: ClipOut<'_>,
) {
    let t = o.grad.len();
    let (a, w) = (a.fit(t), w.fit(t));
    let (lp, old, m) = (&x.lp[..t], &x.old[..t], &x.mask[..t]);
    let (grad, val, ratio, up, lo, dual) =
        (o.grad, &mut o.val[..t], &mut o.ratio[..t], &mut o.up[..t], &mut o.lo[..t], &mut o.dual[..t]);
    for i in 0..t {
        let av = a.at(i);
        let mm = m[i];
        let r = if TOKEN { exp_f32(lp[i] - old[i]) } else { seq_r };
        let pos = av > 0.0;
        let neg = av < 0.0;
        let l = if pos { b.lo_pos } else { b.lo_neg };
        let h = if pos { b.hi_pos } else { b.hi_neg };
        let eff = fmin(fmax(r, l), h);
        let coef = -av * c * mm * w.at(i);
        val[i] = coef * eff;
        let unclipped = (eff == r) & seq_ok;
        grad[i] = if unclipped { coef * r } else { 0.0 };
        ratio[i] = mm * fmin(r, EXP20_F32);
        let on = b2f(mm > 0.0);
        let high = eff < r;
        let low = eff > r;
        up[i] = on * b2f(high & pos);
        lo[i] = on * b2f(low & neg);
        dual[i] = on * b2f(high & neg);
    }
}

#[allow(clippy::too_many_arguments)]
#[inline(always)]
fn cispo_loop<A: Src, W: Src>(
    a: A,
    w: W,
    x: &RowIn<'_>,
    c: f32,
    lo: f32,
    hi: f32,
    grad: &mut [f32],
    val: &mut [f32],
    ratio: &mut [f32],
    up: &mut [f32],
    low: &mut [f32],
) {
    let t = grad.len();
    let (a, w) = (a.fit(t), w.fit(t));
    let (lp, old, m) = (&x.lp[..t], &x.old[..t], &x.mask[..t]);
    let (val, ratio, up, low) = (&mut val[..t], &mut ratio[..t], &mut up[..t], &mut low[..t]);
    for i in 0..t {
        let (l, mm) = (lp[i], m[i]);
        let r = exp_clamp20(l - old[i]);
        let wc = fmin(fmax(r, lo), hi);
        let g = -a.at(i) * c * mm * w.at(i) * wc;
        grad[i] = g;
        val[i] = g * l;
        ratio[i] = mm * r;
        let on = b2f(mm > 0.0);
        up[i] = on * b2f(wc < r);
        low[i] = on * b2f(wc > r);
    }
}

#[allow(clippy::too_many_arguments)]
#[inline(always)]
fn sapo_loop<A: Src, W: Src>(
    a: A,
    w: W,
    x: &RowIn<'_>,
    c: f32,
    tp: f32,
    tn: f32,
    grad: &mut [f32],
    val: &mut [f32],
    ratio: &mut [f32],
) {
    let t = grad.len();
    let (a, w) = (a.fit(t), w.fit(t));
    let (lp, old, m) = (&x.lp[..t], &x.old[..t], &x.mask[..t]);
    let (val, ratio) = (&mut val[..t], &mut ratio[..t]);
    for i in 0..t {
        let mm = m[i];
        let av = a.at(i);
        let r = exp_clamp20(lp[i] - old[i]);
        let tau = if av > 0.0 { tp } else { tn };
        let sig = 1.0 / (1.0 + exp_f32(-tau * (r - 1.0)));
        let coef = -av * c * mm * w.at(i);
        val[i] = coef * sig * (4.0 / tau);
        grad[i] = coef * 4.0 * sig * (1.0 - sig) * r;
        ratio[i] = mm * r;
    }
}

/// REINFORCE: `g = −A c m w`, value `g·logp`, the `ppo_kl` term `m (old − logp)` and (with
/// `MET`) the ratio metric's `m exp(clamp(logp − old, ±20))`.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
fn reinforce_loop<A: Src, W: Src, const MET: bool>(
    a: A,
    w: W,
    x: &RowIn<'_>,
    c: f32,
    grad: &mut [f32],
    val: &mut [f32],
    ratio: &mut [f32],
    klv: &mut [f32],
) {
    let t = grad.len();
    let (a, w) = (a.fit(t), w.fit(t));
    let (lp, old, m) = (&x.lp[..t], &x.old[..t], &x.mask[..t]);
    let (val, ratio, klv) = (&mut val[..t], &mut ratio[..t], &mut klv[..t]);
    for i in 0..t {
        let g = -a.at(i) * c * m[i] * w.at(i);
        grad[i] = g;
        val[i] = g * lp[i];
        klv[i] = m[i] * (old[i] - lp[i]);
        if MET {
            ratio[i] = m[i] * exp_clamp20(lp[i] - old[i]);
        }
    }
}

#[inline(always)]
fn kl_cov_loop<A: Src, W: Src>(
    a: A,
    w: W,
    x: &RowIn<'_>,
    c: f32,
    grad: &mut [f32],
    val: &mut [f32],
    ratio: &mut [f32],
) {
    let t = grad.len();
    let (a, w) = (a.fit(t), w.fit(t));
    let (lp, old, m) = (&x.lp[..t], &x.old[..t], &x.mask[..t]);
    let (val, ratio) = (&mut val[..t], &mut ratio[..t]);
    for i in 0..t {
        let mm = m[i];
        let r = exp_f32(lp[i] - old[i]);
        let coef = -a.at(i) * c * mm * w.at(i);
        val[i] = coef * r;
        grad[i] = coef * r;
        ratio[i] = mm * fmin(r, EXP20_F32);
    }
}

/// GMPO: the sign-aware clipped log-ratio of every token into `dmin`, 1 into `unc` where unclipped.
#[inline(always)]
fn gmpo_dmin<A: Src>(x: &RowIn<'_>, a: A, el: f32, eh: f32, tok_adv: bool, dmin: &mut [f32], unc: &mut [f32]) {
    let t = dmin.len();
    let a = a.fit(t);
    let (lp, old, unc) = (&x.lp[..t], &x.old[..t], &mut unc[..t]);
    for i in 0..t {
        let av = a.at(i);
        let d = lp[i] - old[i];
        let dm = if av > 0.0 { fmin(d, eh) } else { fmax(d, -el) };
        // per-token advantages: a token with A = 0 contributes nothing (verl's sign(A) = 0)
        let dm = if tok_adv & (av == 0.0) { 0.0 } else { dm };
        dmin[i] = dm;
        unc[i] = b2f(dm == d);
    }
}

#[allow(clippy::too_many_arguments)]
#[inline(always)]
fn lpo_loop<W: Src>(
    x: &RowIn<'_>,
    w: W,
    ck: f32,
    clo: f32,
    chi: f32,
    grad: &mut [f32],
    val: &mut [f32],
    ratio: &mut [f32],
    lo: &mut [f32],
) {
    let t = grad.len();
    let w = w.fit(t);
    let (lp, m) = (&x.lp[..t], &x.mask[..t]);
    let base = &x.behave.unwrap_or(x.old)[..t];
    let (val, ratio, lo) = (&mut val[..t], &mut ratio[..t], &mut lo[..t]);
    for i in 0..t {
        let mm = m[i];
        let d = lp[i] - base[i];
        let dc = fmin(fmax(d, clo), chi);
        let coef = ck * mm * w.at(i);
        val[i] = coef * dc;
        grad[i] = if dc == d { coef } else { 0.0 };
        ratio[i] = mm * exp_clamp20(d);
        lo[i] = b2f(mm > 0.0) * b2f(dc != d);
    }
}

/// The KL term: `E` selects the estimator (0 k1, 1 abs, 2 k2, 3 k3), `ST` the straight-through
/// gradient (k2's, `logp − ref`).
#[allow(clippy::too_many_arguments)]
#[inline(always)]
fn kl_loop<const E: u8, const ST: bool>(
    lp: &[f32],
    r: &[f32],
    m: &[f32],
    c: f32,
    beta: f32,
    grad: &mut [f32],
    val: &mut [f32],
    kv: &mut [f32],
) {
    let t = grad.len();
    let (lp, r, m, val, kv) = (&lp[..t], &r[..t], &m[..t], &mut val[..t], &mut kv[..t]);
    for i in 0..t {
        let lr = lp[i] - r[i];
        let (v, g) = match E {
            0 => (lr, 1.0),
            1 => (
                lr.abs(),
                if lr > 0.0 {
                    1.0
                } else if lr < 0.0 {
                    -1.0
                } else {
                    0.0
                },
            ),
            2 => (0.5 * lr * lr, lr),
            _ => {
                let xx = (-lr).clamp(-20.0, 20.0);
                let ex = exp_f32(xx);
                let raw = ex - xx - 1.0;
                let active = (lr.abs() < 20.0) & (raw < 10.0);
                (raw.clamp(-10.0, 10.0), if active { 1.0 - ex } else { 0.0 })
            }
        };
        let g = if ST { lr } else { g };
        let wt = c * m[i];
        val[i] = wt * v;
        kv[i] = m[i] * v;
        grad[i] += beta * wt * g;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exp_f32_is_within_two_ulp() {
        let mut worst = 0.0f64;
        let mut x = -87.0f32;
        while x < 88.0 {
            let want = f64::from(x).exp();
            let got = f64::from(exp_f32(x));
            worst = worst.max(((got - want) / want).abs());
            x += 0.000_731;
        }
        assert!(worst < 2.4e-7, "worst relative error {worst}");
        assert_eq!(exp_f32(0.0), 1.0);
        assert_eq!(exp_f32(-1000.0), exp_f32(-87.0));
        assert!(exp_f32(1000.0).is_finite());
        // the clamped-ratio form: the same bits as clamping first, NaN propagated
        for x in [-1000.0f32, -20.5, -20.0, -3.25, -1e-6, 0.0, 0.7, 19.99, 20.0, 55.0, f32::INFINITY, f32::NEG_INFINITY]
        {
            assert_eq!(exp_clamp20(x).to_bits(), exp_f32(x.clamp(-20.0, 20.0)).to_bits(), "{x}");
        }
        assert!(exp_clamp20(f32::NAN).is_nan());
    }

    #[test]
    fn lane_sums_match_sequential_sums() {
        let x: Vec<f32> = (0..1003).map(|i| ((i * 37 % 101) as f32 - 50.0) * 0.013).collect();
        let y: Vec<f32> = (0..1003).map(|i| ((i * 11 % 17) as f32) * 0.25).collect();
        let seq: f64 = x.iter().map(|&v| f64::from(v)).sum();
        assert!((sum_f32(&x) - seq).abs() < 1e-12);
        let seq: f64 = x.iter().zip(&y).map(|(&a, &b)| f64::from(a) * f64::from(b)).sum();
        assert!((dot_f32(&x, &y) - seq).abs() < 1e-12);
        assert!(all_finite(&x));
        let mut z = x.clone();
        z[500] = f32::INFINITY;
        assert!(!all_finite(&z));
        z[500] = 0.0;
        z[1002] = f32::NAN;
        assert!(!all_finite(&z));
    }

    /// The AVX2 build of the row kernel gives bit-identical results to the baseline build (the
    /// dispatch changes only the instruction set, never the arithmetic).
    #[test]
    #[cfg(target_arch = "x86_64")]
    #[allow(unsafe_code)]
    fn simd_rows_equal_baseline_rows_bit_for_bit() {
        use crate::policy::{CispoParams, GmpoParams, GspoParams, PpoParams, SapoParams};
        if !avx2_fma() {
            return; // nothing to compare on this CPU
        }
        let t = 301; // a full block, a partial block and a remainder of the 8-token chunks
        let f = |k: usize, s: f32| -> Vec<f32> { (0..t).map(|i| ((i * k % 97) as f32 / 97.0 - 0.5) * s).collect() };
        let old: Vec<f32> = f(13, 1.6).iter().map(|v| v - 1.5).collect();
        let lp: Vec<f32> = old.iter().zip(f(29, 0.7)).map(|(o, d)| o + d).collect();
        let refl: Vec<f32> = old.iter().zip(f(41, 0.6)).map(|(o, d)| o + d).collect();
        let adv = f(7, 3.0);
        let mask: Vec<f32> = (0..t).map(|i| f32::from(u8::from(i < 250 && i % 17 != 3))).collect();
        let counts = GlobalCounts::new(1000.0, 4.0, 1).unwrap();
        for policy in [
            PolicyLoss::Reinforce,
            PolicyLoss::Ppo(PpoParams::default()),
            PolicyLoss::Gspo(GspoParams::default().eps(0.02, 0.03)),
            PolicyLoss::Cispo(CispoParams::default()),
            PolicyLoss::Sapo(SapoParams::default()),
            PolicyLoss::Gmpo(GmpoParams::default()),
        ] {
            for (adv_in, kl) in [(Per::Row(0.7), None), (Per::Tok(&adv[..]), Some(KlParams::default()))] {
                let k = Kernel {
                    policy,
                    aggregation: Aggregation::TokenMean,
                    compat: Compat::Native,
                    counts,
                    kl,
                    correction: None,
                    t,
                    rows: 4,
                    metrics: true,
                };
                let x = RowIn { lp: &lp, old: &old, mask: &mask, adv: adv_in, behave: None, refl: Some(&refl) };
                let extra = RowExtra::default();
                let (mut g0, mut s0) = (vec![0f32; t], Sums::default());
                k.row_impl(&x, &extra, &mut g0, &mut Scratch::default(), &mut s0);
                assert!(g0.iter().any(|&v| v != 0.0), "{policy:?}: a gradient to compare");
                let bits = |g: &[f32]| g.iter().map(|v| v.to_bits()).collect::<Vec<_>>();
                let sums = |s: &Sums| {
                    [s.pg_value, s.kl_value, s.tokens, s.ppo_kl, s.ratio, s.clip_up, s.clip_lo].map(f64::to_bits)
                };
                for build in ["AVX2", "AVX-512"] {
                    let (mut g1, mut s1) = (vec![0f32; t], Sums::default());
                    match build {
                        // SAFETY: AVX2 and FMA are available (checked above).
                        "AVX2" => unsafe { k.row_avx2(&x, &extra, &mut g1, &mut Scratch::default(), &mut s1) },
                        // SAFETY: AVX-512 F/BW/DQ/VL, AVX2 and FMA are available (checked just before).
                        _ if avx512() => unsafe {
                            k.row_avx512(&x, &extra, &mut g1, &mut Scratch::default(), &mut s1);
                        },
                        _ => continue, // not on this CPU
                    }
                    assert_eq!(bits(&g0), bits(&g1), "{policy:?}: gradient ({build})");
                    assert_eq!(sums(&s0), sums(&s1), "{policy:?}: sums ({build}) {s0:?} vs {s1:?}");
                }
            }
        }
    }
}
