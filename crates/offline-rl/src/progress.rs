//! The progress bar of long loops (training, dynamics pretraining), hidden unless asked for.

/// A bar over `total` steps starting at `pos`, labelled `what`; hidden when `show` is false.
pub(crate) fn progress_bar(total: u64, pos: u64, show: bool, what: &str) -> indicatif::ProgressBar {
    if !show {
        return indicatif::ProgressBar::hidden();
    }
    let bar = indicatif::ProgressBar::new(total);
    if let Ok(style) = indicatif::ProgressStyle::with_template(&format!(
        "{what} {{elapsed_precise}} [{{bar:30}}] {{pos}}/{{len}} ({{per_sec}}, eta {{eta}}) {{msg}}"
    )) {
        bar.set_style(style.progress_chars("=> "));
    }
    bar.set_position(pos);
    bar
}
