//! Named scalar metrics and sinks that record them (JSONL files, memory).

use std::collections::BTreeMap;
use std::fs::{File, OpenOptions};
use std::io::{BufWriter, Write};
use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::error::Result;

/// A set of named scalars, ordered by name (so logs are stable).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Metrics(pub BTreeMap<String, f64>);

impl Metrics {
    /// An empty set.
    pub fn new() -> Self {
        Self::default()
    }

    /// Sets `name` to `value` (replacing an earlier value).
    pub fn insert(&mut self, name: impl Into<String>, value: f64) {
        self.0.insert(name.into(), value);
    }

    /// Builder-style [`Metrics::insert`].
    #[must_use]
    pub fn with(mut self, name: impl Into<String>, value: f64) -> Self {
        self.insert(name, value);
        self
    }

    /// The value of `name`, if set.
    pub fn get(&self, name: &str) -> Option<f64> {
        self.0.get(name).copied()
    }

    /// Copies every entry of `other` in, with `prefix` prepended to its names.
    pub fn extend_prefixed(&mut self, prefix: &str, other: &Metrics) {
        for (k, v) in &other.0 {
            self.0.insert(format!("{prefix}{k}"), *v);
        }
    }

    /// Number of entries.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Whether there is no entry.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Iterates over `(name, value)` pairs in name order.
    pub fn iter(&self) -> impl Iterator<Item = (&str, f64)> {
        self.0.iter().map(|(k, v)| (k.as_str(), *v))
    }
}

/// Where metrics go.
pub trait MetricsSink {
    /// Records `metrics` for `step`.
    ///
    /// # Errors
    /// I/O or serialisation failures.
    fn log(&mut self, step: u64, metrics: &Metrics) -> Result<()>;
    /// Flushes buffered records.
    ///
    /// # Errors
    /// I/O failures.
    fn flush(&mut self) -> Result<()> {
        Ok(())
    }
}

/// One JSON object per line: `{"step": 3, "loss": 0.25, ...}`. Non-finite values are written as
/// `null` (JSON has no NaN).
#[derive(Debug)]
pub struct JsonlSink {
    out: BufWriter<File>,
}

impl JsonlSink {
    /// Creates (truncates) `path`, creating parent folders.
    ///
    /// # Errors
    /// I/O failures.
    pub fn create(path: impl AsRef<Path>) -> Result<Self> {
        let path = path.as_ref();
        if let Some(parent) = path.parent() {
            if !parent.as_os_str().is_empty() {
                std::fs::create_dir_all(parent)?;
            }
        }
        Ok(Self { out: BufWriter::new(File::create(path)?) })
    }

    /// Opens `path` for appending (e.g. when resuming a run).
    ///
    /// # Errors
    /// I/O failures.
    pub fn append(path: impl AsRef<Path>) -> Result<Self> {
        let f = OpenOptions::new().create(true).append(true).open(path)?;
        Ok(Self { out: BufWriter::new(f) })
    }
}

impl MetricsSink for JsonlSink {
    fn log(&mut self, step: u64, metrics: &Metrics) -> Result<()> {
        let mut obj = serde_json::Map::new();
        obj.insert("step".into(), serde_json::Value::from(step));
        for (k, v) in metrics.iter() {
            let val = serde_json::Number::from_f64(v).map_or(serde_json::Value::Null, serde_json::Value::Number);
            obj.insert(k.to_owned(), val);
        }
        serde_json::to_writer(&mut self.out, &obj)?;
        self.out.write_all(b"\n")?;
        Ok(())
    }

    fn flush(&mut self) -> Result<()> {
        self.out.flush()?;
        Ok(())
    }
}

impl Drop for JsonlSink {
    fn drop(&mut self) {
        // Best effort: errors at drop time cannot be reported; call `flush` to see them.
        let _ = self.out.flush();
    }
}

/// Keeps every record in memory (tests, small runs, plots).
#[derive(Debug, Clone, Default)]
pub struct MemorySink {
    /// The records in logging order.
    pub records: Vec<(u64, Metrics)>,
}

impl MetricsSink for MemorySink {
    fn log(&mut self, step: u64, metrics: &Metrics) -> Result<()> {
        self.records.push((step, metrics.clone()));
        Ok(())
    }
}

impl MemorySink {
    /// The series of `name` as `(step, value)` pairs, skipping records without it.
    pub fn series(&self, name: &str) -> Vec<(u64, f64)> {
        self.records.iter().filter_map(|(s, m)| m.get(name).map(|v| (*s, v))).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jsonl_roundtrip() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("sub/metrics.jsonl");
        {
            let mut sink = JsonlSink::create(&path).unwrap();
            sink.log(1, &Metrics::new().with("loss", 0.5).with("bad", f64::NAN)).unwrap();
            sink.log(2, &Metrics::new().with("loss", 0.25)).unwrap();
            sink.flush().unwrap();
        }
        let text = std::fs::read_to_string(&path).unwrap();
        let lines: Vec<serde_json::Value> = text.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
        assert_eq!(lines.len(), 2);
        assert_eq!(lines[0]["step"], 1);
        assert_eq!(lines[0]["loss"], 0.5);
        assert!(lines[0]["bad"].is_null());
        assert_eq!(lines[1]["loss"], 0.25);
        let mut again = JsonlSink::append(&path).unwrap();
        again.log(3, &Metrics::new()).unwrap();
        again.flush().unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap().lines().count(), 3);
    }

    #[test]
    fn dropping_a_sink_flushes_it() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("m.jsonl");
        {
            let mut sink = JsonlSink::create(&path).unwrap();
            sink.log(7, &Metrics::new().with("x", 1.0)).unwrap();
        }
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "{\"step\":7,\"x\":1.0}\n");
    }

    #[test]
    fn memory_sink_series_and_prefix() {
        let mut sink = MemorySink::default();
        let mut m = Metrics::new();
        m.extend_prefixed("eval/", &Metrics::new().with("acc", 0.75));
        sink.log(5, &m).unwrap();
        sink.log(6, &Metrics::new()).unwrap();
        assert_eq!(sink.series("eval/acc"), vec![(5, 0.75)]);
    }
}
