//! Reporting: accuracy-vs-rollouts plots (SVG) and summary tables (Markdown).

use std::path::Path;

use plotters::prelude::*;

use crate::error::{Result, TrainError};
use crate::trainer::{EvalPoint, RunSummary};

/// One labelled curve: held-out pass@1 against rollouts spent.
#[derive(Debug, Clone, PartialEq)]
pub struct Curve {
    /// Legend label.
    pub label: String,
    /// `(rollouts, pass@1)` points in order.
    pub points: Vec<(f64, f64)>,
}

impl Curve {
    /// The pass@1 curve of an evaluation history against rollouts spent.
    pub fn pass_at_1(label: impl Into<String>, history: &[EvalPoint]) -> Self {
        Self { label: label.into(), points: history.iter().map(|p| (p.rollouts as f64, p.report.pass_at_1)).collect() }
    }

    /// The pass@1 curve of an evaluation history against training steps.
    pub fn pass_at_1_by_step(label: impl Into<String>, history: &[EvalPoint]) -> Self {
        Self { label: label.into(), points: history.iter().map(|p| (p.step as f64, p.report.pass_at_1)).collect() }
    }

    /// The mean of several curves evaluated at the same points (runs of one method over
    /// seeds with the same schedule); points beyond the shortest curve are dropped.
    pub fn mean(label: impl Into<String>, curves: &[Curve]) -> Self {
        let len = curves.iter().map(|c| c.points.len()).min().unwrap_or(0);
        let n = curves.len().max(1) as f64;
        let points = (0..len)
            .map(|i| {
                let x = curves.iter().map(|c| c.points[i].0).sum::<f64>() / n;
                let y = curves.iter().map(|c| c.points[i].1).sum::<f64>() / n;
                (x, y)
            })
            .collect();
        Self { label: label.into(), points }
    }

    /// Rollouts at which the curve first reaches `target` (linear interpolation between
    /// evaluations), or `None` if it never does.
    pub fn rollouts_to_reach(&self, target: f64) -> Option<f64> {
        let mut prev: Option<(f64, f64)> = None;
        for &(x, y) in &self.points {
            if y >= target {
                return Some(match prev {
                    Some((px, py)) if y > py => px + (target - py) / (y - py) * (x - px),
                    _ => x,
                });
            }
            prev = Some((x, y));
        }
        None
    }
}

/// One panel of a plot: curves sharing an x axis.
#[derive(Debug, Clone, PartialEq)]
pub struct Panel {
    /// X-axis label.
    pub x_label: String,
    /// The curves.
    pub curves: Vec<Curve>,
}

/// Writes an SVG line plot of the curves (x: rollouts, y: held-out pass@1).
///
/// # Errors
/// [`TrainError::Plot`] on a drawing or file error.
pub fn plot_curves(path: impl AsRef<Path>, title: &str, curves: &[Curve]) -> Result<()> {
    plot_panels(path, title, &[Panel { x_label: "rollouts (training + selection)".into(), curves: curves.to_vec() }])
}

/// Writes an SVG with the panels side by side (y: held-out pass@1, shared range).
///
/// # Errors
/// [`TrainError::Plot`] on a drawing or file error.
pub fn plot_panels(path: impl AsRef<Path>, title: &str, panels: &[Panel]) -> Result<()> {
    let path = path.as_ref();
    if let Some(parent) = path.parent() {
        if !parent.as_os_str().is_empty() {
            std::fs::create_dir_all(parent).map_err(crate::error::io(format!("creating {}", parent.display())))?;
        }
    }
    let err = |e: &dyn std::fmt::Display| TrainError::Plot(format!("{}: {e}", path.display()));
    let all = || panels.iter().flat_map(|p| p.curves.iter().flat_map(|c| c.points.iter()));
    let y_max = all().map(|p| p.1).fold(0.1_f64, f64::max);
    let y_min = all().map(|p| p.1).fold(y_max, f64::min);
    let y_range = (y_min - 0.05).max(0.0)..(y_max + 0.05).min(1.0);
    let width = 800 * panels.len().max(1) as u32;
    let root = SVGBackend::new(path, (width, 500)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| err(&e))?;
    let root = root.titled(title, ("sans-serif", 20)).map_err(|e| err(&e))?;
    let areas = root.split_evenly((1, panels.len().max(1)));
    for (panel, area) in panels.iter().zip(areas.iter()) {
        let x_max = panel.curves.iter().flat_map(|c| c.points.iter().map(|p| p.0)).fold(1.0_f64, f64::max);
        let mut chart = ChartBuilder::on(area)
            .margin(12)
            .x_label_area_size(40)
            .y_label_area_size(55)
            .build_cartesian_2d(0.0..x_max * 1.02, y_range.clone())
            .map_err(|e| err(&e))?;
        chart.configure_mesh().x_desc(panel.x_label.as_str()).y_desc("held-out pass@1").draw().map_err(|e| err(&e))?;
        for (i, c) in panel.curves.iter().enumerate() {
            let color = Palette99::pick(i).to_rgba();
            chart
                .draw_series(LineSeries::new(c.points.iter().copied(), color.stroke_width(2)))
                .map_err(|e| err(&e))?
                .label(c.label.clone())
                .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], color.stroke_width(2)));
            chart.draw_series(c.points.iter().map(|&p| Circle::new(p, 3, color.filled()))).map_err(|e| err(&e))?;
        }
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::LowerRight)
            .background_style(WHITE.mix(0.85))
            .border_style(BLACK)
            .draw()
            .map_err(|e| err(&e))?;
    }
    root.present().map_err(|e| err(&e))?;
    Ok(())
}

/// A Markdown table of one or more run summaries.
pub fn summary_table(rows: &[(String, &RunSummary)]) -> String {
    let mut s = String::from(
        "| run | steps | rollouts | pass@1 before | pass@1 after | pass@k after | generated effective (outcome) | generated with reward variance | batch effective | s/step |\n\
         |---|---|---|---|---|---|---|---|---|---|\n",
    );
    for (label, r) in rows {
        let t = r.seconds;
        let per_step = (t.generation + t.scoring + t.selection + t.loss) / r.steps.max(1) as f64;
        s.push_str(&format!(
            "| {label} | {} | {} | {:.3} | {:.3} | {:.3} (k={}) | {:.2} | {:.2} | {:.2} | {:.2} |\n",
            r.steps,
            r.rollouts.total(),
            r.initial.pass_at_1,
            r.last.pass_at_1,
            r.last.pass_at_k,
            r.last.k,
            r.generated_mixed_outcome_ratio,
            r.generated_reward_variance_ratio,
            r.batch_effective_ratio,
            per_step,
        ));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::Curve;

    #[test]
    fn rollouts_to_reach_interpolates() {
        let c = Curve { label: "x".into(), points: vec![(0.0, 0.2), (100.0, 0.4), (200.0, 0.6)] };
        assert_eq!(c.rollouts_to_reach(0.1), Some(0.0));
        assert!((c.rollouts_to_reach(0.5).unwrap_or(f64::NAN) - 150.0).abs() < 1e-9);
        assert_eq!(c.rollouts_to_reach(0.7), None);
        let m = Curve::mean("m", &[c.clone(), Curve { label: "y".into(), points: vec![(0.0, 0.4), (50.0, 0.6)] }]);
        assert_eq!(m.points, vec![(0.0, 0.30000000000000004), (75.0, 0.5)]);
    }
}
