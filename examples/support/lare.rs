//! Shared by the `lare` examples: progress bars, method labels (which say who wrote LaRe's
//! encoder), mean learning curves, SVG plots and markdown reports.
#![allow(dead_code)]

use std::path::Path;

use anyhow::Result;
use indicatif::{ProgressBar, ProgressStyle};
use lare::llm::EncoderRecord;
use plotters::prelude::*;

/// A progress bar (hidden with `quiet`).
pub fn bar(len: u64, msg: &str, quiet: bool) -> ProgressBar {
    if quiet {
        return ProgressBar::hidden();
    }
    let b = ProgressBar::new(len);
    if let Ok(style) = ProgressStyle::with_template("{msg:>20} [{bar:30}] {pos}/{len} {per_sec} eta {eta}") {
        b.set_style(style);
    }
    b.set_message(msg.to_string());
    b
}

/// The name of a method in tables, with the provenance of LaRe's encoder.
pub fn method_label(name: &str, record: Option<&EncoderRecord>) -> String {
    let enc = record.map_or_else(|| "?".to_string(), EncoderRecord::label);
    match name {
        "lare" => format!("LaRe (RRD unbiased; {enc})"),
        "lare_rd" => format!("LaRe (RD loss; {enc})"),
        "rrd_unbiased" => "RRD unbiased".into(),
        "rrd" => "RRD (biased)".into(),
        "rd" => "RD".into(),
        "ircr" => "IRCR".into(),
        "episodic" => "episodic reward (no redistribution)".into(),
        "dense" => "dense reward (reference, not episodic)".into(),
        other => other.into(),
    }
}

/// One method's results.
#[derive(Debug, Clone)]
pub struct Row {
    pub method: String,
    pub label: String,
    pub finals: Vec<f64>,
    pub mean_curve: Vec<(u64, f64, f64)>,
}

/// Mean and std over runs of `(step, value)` curves evaluated at the same steps.
pub fn mean_curve(curves: &[Vec<(u64, f64)>]) -> Vec<(u64, f64, f64)> {
    let n = curves.iter().map(Vec::len).min().unwrap_or(0);
    (0..n)
        .map(|i| {
            let v: Vec<f64> = curves.iter().map(|c| c[i].1).collect();
            let (m, s) = mean_std(&v);
            (curves[0][i].0, m, s)
        })
        .collect()
}

/// Mean and sample std.
pub fn mean_std(v: &[f64]) -> (f64, f64) {
    if v.is_empty() {
        return (f64::NAN, f64::NAN);
    }
    let n = v.len() as f64;
    let m = v.iter().sum::<f64>() / n;
    let s = if v.len() < 2 { 0.0 } else { (v.iter().map(|x| (x - m).powi(2)).sum::<f64>() / (n - 1.0)).sqrt() };
    (m, s)
}

/// Mean over the last `k` points of a curve (a less noisy "final return").
pub fn tail_mean(curve: &[(u64, f64, f64)], k: usize) -> f64 {
    let t: Vec<f64> = curve.iter().rev().take(k).map(|p| p.1).collect();
    t.iter().sum::<f64>() / t.len().max(1) as f64
}

/// SVG of the mean curves.
pub fn plot(path: &Path, title: &str, rows: &[Row]) -> Result<()> {
    let pts = rows.iter().flat_map(|r| r.mean_curve.iter());
    let (mut x1, mut y0, mut y1) = (1.0f64, f64::INFINITY, f64::NEG_INFINITY);
    for &(x, y, _) in pts {
        x1 = x1.max(x as f64);
        y0 = y0.min(y);
        y1 = y1.max(y);
    }
    if !y0.is_finite() {
        y0 = 0.0;
        y1 = 1.0;
    }
    let pad = ((y1 - y0) * 0.05).max(1e-6);
    let root = SVGBackend::new(path, (1000, 600)).into_drawing_area();
    root.fill(&WHITE)?;
    let mut chart = ChartBuilder::on(&root)
        .caption(title, ("sans-serif", 18))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(70)
        .build_cartesian_2d(0.0..x1, (y0 - pad)..(y1 + pad))?;
    chart.configure_mesh().x_desc("environment steps").y_desc("dense return (deterministic eval)").draw()?;
    for (i, r) in rows.iter().enumerate() {
        let color = Palette99::pick(i).to_rgba();
        chart
            .draw_series(LineSeries::new(r.mean_curve.iter().map(|&(x, y, _)| (x as f64, y)), color.stroke_width(2)))?
            .label(r.label.clone())
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], color.stroke_width(2)));
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::LowerRight)
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .draw()?;
    root.present()?;
    Ok(())
}

/// A markdown table: final return (last evaluation) and mean of the last 5 evaluations, mean ±
/// std over seeds, plus the per-seed finals.
pub fn report(title: &str, rows: &[Row], args: &str) -> String {
    let mut s = format!(
        "## {title}\n\n| method | final return (mean ± std) | last-5-evals mean | per seed |\n|---|---|---|---|\n"
    );
    for r in rows {
        let (m, sd) = mean_std(&r.finals);
        let per: Vec<String> = r.finals.iter().map(|v| format!("{v:.1}")).collect();
        s.push_str(&format!(
            "| {} | {m:.1} ± {sd:.1} | {:.1} | {} |\n",
            r.label,
            tail_mean(&r.mean_curve, 5),
            per.join(", ")
        ));
    }
    s.push_str(&format!("\nArguments: `{args}`\n"));
    s
}

/// Runs `f` on every job with up to `jobs` runs at a time (scoped threads) and returns the
/// results in job order; the first error wins.
pub fn run_jobs<J: Sync, T: Send>(jobs: &[J], parallel: usize, f: impl Fn(&J) -> Result<T> + Sync) -> Result<Vec<T>> {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Mutex;
    let next = AtomicUsize::new(0);
    let slots: Mutex<Vec<Option<Result<T>>>> = Mutex::new((0..jobs.len()).map(|_| None).collect());
    std::thread::scope(|sc| {
        for _ in 0..parallel.clamp(1, jobs.len().max(1)) {
            sc.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::SeqCst);
                let Some(job) = jobs.get(i) else { break };
                let r = f(job);
                let failed = r.is_err();
                if let Ok(mut s) = slots.lock() {
                    s[i] = Some(r);
                }
                if failed {
                    next.store(jobs.len(), Ordering::SeqCst);
                }
            });
        }
    });
    let slots = slots.into_inner().map_err(|_| anyhow::anyhow!("a run's thread panicked"))?;
    let mut out = Vec::with_capacity(jobs.len());
    for s in slots {
        match s {
            Some(r) => out.push(r?),
            None => anyhow::bail!("a run did not finish (an earlier run failed)"),
        }
    }
    Ok(out)
}

/// Reopens a resumed run's `metrics.jsonl` for appending after dropping the records written
/// after the checkpoint (`step > steps`: logged by the interrupted run past its last save), so
/// the file ends up as the uninterrupted run's. A missing file starts empty.
pub fn resume_jsonl(path: &Path, steps: u64) -> Result<rl_core::JsonlSink> {
    if path.is_file() {
        let text = std::fs::read_to_string(path)?;
        let mut kept = String::with_capacity(text.len());
        for (i, line) in text.lines().enumerate() {
            let v: serde_json::Value = serde_json::from_str(line)
                .map_err(|e| anyhow::anyhow!("{} line {}: not a JSON record: {e}", path.display(), i + 1))?;
            let step = v
                .get("step")
                .and_then(serde_json::Value::as_u64)
                .ok_or_else(|| anyhow::anyhow!("{} line {}: no integer `step`", path.display(), i + 1))?;
            if step <= steps {
                kept.push_str(line);
                kept.push('\n');
            }
        }
        std::fs::write(path, kept)?;
    }
    Ok(rl_core::JsonlSink::append(path)?)
}
