//! Shared by the `rl-agents` examples: learning-curve plots (SVG) and per-seed summaries.
#![allow(dead_code)]

use std::path::Path;

use anyhow::Result;
use plotters::prelude::*;

/// One curve: `(env steps, value)` points.
#[derive(Debug, Clone)]
pub struct Curve {
    pub label: String,
    pub points: Vec<(f64, f64)>,
}

/// The `eval/return_mean` curve of a run's `metrics.jsonl`.
pub fn eval_curve(label: &str, jsonl: &Path) -> Result<Curve> {
    let rows = rl_agents::read_jsonl(jsonl)?;
    let points = rows.iter().filter_map(|(s, m)| m.get("eval/return_mean").map(|v| (*s as f64, *v))).collect();
    Ok(Curve { label: label.to_string(), points })
}

/// Writes an SVG line plot of the curves, with an optional dashed target line.
pub fn plot(path: &Path, title: &str, y_label: &str, curves: &[Curve], target: Option<f64>) -> Result<()> {
    let pts = curves.iter().flat_map(|c| c.points.iter());
    let (mut x1, mut y0, mut y1) = (1.0f64, f64::INFINITY, f64::NEG_INFINITY);
    for &(x, y) in pts {
        x1 = x1.max(x);
        y0 = y0.min(y);
        y1 = y1.max(y);
    }
    if let Some(t) = target {
        y0 = y0.min(t);
        y1 = y1.max(t);
    }
    if !y0.is_finite() {
        y0 = 0.0;
        y1 = 1.0;
    }
    let pad = ((y1 - y0) * 0.05).max(1e-6);
    let root = SVGBackend::new(path, (900, 540)).into_drawing_area();
    root.fill(&WHITE)?;
    let mut chart = ChartBuilder::on(&root)
        .caption(title, ("sans-serif", 20))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(60)
        .build_cartesian_2d(0.0..x1, (y0 - pad)..(y1 + pad))?;
    chart.configure_mesh().x_desc("environment steps").y_desc(y_label).draw()?;
    for (i, c) in curves.iter().enumerate() {
        let color = Palette99::pick(i).to_rgba();
        chart
            .draw_series(LineSeries::new(c.points.iter().copied(), color.stroke_width(2)))?
            .label(c.label.clone())
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], color.stroke_width(2)));
    }
    if let Some(t) = target {
        chart
            .draw_series(LineSeries::new(vec![(0.0, t), (x1, t)], BLACK.mix(0.5).stroke_width(1)))?
            .label(format!("target {t}"))
            .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], BLACK.mix(0.5)));
    }
    chart.configure_series_labels().background_style(WHITE.mix(0.8)).border_style(BLACK).draw()?;
    root.present()?;
    Ok(())
}

/// First environment step at which a curve reaches `target`, if it does.
pub fn steps_to(curve: &Curve, target: f64) -> Option<f64> {
    curve.points.iter().find(|(_, y)| *y >= target).map(|(x, _)| *x)
}

/// `mean ± std` of a slice (sample std).
pub fn mean_std(v: &[f64]) -> String {
    let n = v.len() as f64;
    if v.is_empty() {
        return "–".into();
    }
    let m = v.iter().sum::<f64>() / n;
    if v.len() < 2 {
        return format!("{m:.1}");
    }
    let s = (v.iter().map(|x| (x - m).powi(2)).sum::<f64>() / (n - 1.0)).sqrt();
    format!("{m:.1} ± {s:.1}")
}

/// CPU time of the calling thread in seconds (`/proc/thread-self/schedstat`, nanoseconds), `None`
/// where that file does not exist. With one libtorch thread a run's work all happens on the
/// thread that drives it, so this measures the run's cost whatever else the machine runs.
pub fn thread_cpu_seconds() -> Option<f64> {
    let s = std::fs::read_to_string("/proc/thread-self/schedstat").ok()?;
    let ns: u64 = s.split_whitespace().next()?.parse().ok()?;
    Some(ns as f64 * 1e-9)
}

/// `" (C CPU-s of this thread: X env steps and Y updates per CPU-s)"`, or `""` without a CPU clock.
pub fn cpu_rates(cpu0: Option<f64>, env_steps: u64, updates: u64) -> String {
    match (cpu0, thread_cpu_seconds()) {
        (Some(a), Some(b)) if b > a => format!(
            " ({:.0} CPU-s of this thread: {:.1} env steps and {:.1} updates per CPU-s)",
            b - a,
            env_steps as f64 / (b - a),
            updates as f64 / (b - a)
        ),
        _ => String::new(),
    }
}
