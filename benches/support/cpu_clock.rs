//! A criterion measurement for the benches: wall time, or the calling thread's CPU time (Linux
//! `/proc/thread-self/schedstat`, nanoseconds). With one libtorch thread every op and the
//! backward pass run on the calling thread, so on a loaded machine CPU time measures the work
//! and wall time mostly the wait for a core. Included by the benches with `#[path]`.

use criterion::measurement::{Measurement, ValueFormatter};
use criterion::Throughput;

/// Wall time, or the calling thread's CPU time (an environment variable set to `cpu`), in
/// nanoseconds.
pub struct Clock {
    cpu: bool,
    origin: std::time::Instant,
}

impl Clock {
    /// CPU time when the variable `var` is `cpu`, wall time otherwise.
    pub fn from_env(var: &str) -> Self {
        let cpu = std::env::var(var).is_ok_and(|v| v == "cpu");
        Self { cpu, origin: std::time::Instant::now() }
    }

    /// Whether this clock measures CPU time.
    pub fn cpu(&self) -> bool {
        self.cpu
    }

    fn now(&self) -> u64 {
        if self.cpu {
            // first field: time this thread has spent on a CPU, in ns
            std::fs::read_to_string("/proc/thread-self/schedstat")
                .ok()
                .and_then(|s| s.split_whitespace().next().and_then(|v| v.parse().ok()))
                .unwrap_or_else(|| unreachable!("the CPU clock needs Linux /proc/thread-self/schedstat"))
        } else {
            self.origin.elapsed().as_nanos() as u64
        }
    }
}

impl Measurement for Clock {
    type Intermediate = u64;
    type Value = u64;
    fn start(&self) -> u64 {
        self.now()
    }
    fn end(&self, i: u64) -> u64 {
        self.now().saturating_sub(i)
    }
    fn add(&self, a: &u64, b: &u64) -> u64 {
        a + b
    }
    fn zero(&self) -> u64 {
        0
    }
    fn to_f64(&self, v: &u64) -> f64 {
        *v as f64
    }
    fn formatter(&self) -> &dyn ValueFormatter {
        self
    }
}

impl ValueFormatter for Clock {
    fn scale_values(&self, typical_ns: f64, values: &mut [f64]) -> &'static str {
        let (f, unit) = match typical_ns {
            x if x < 1e3 => (1.0, "ns"),
            x if x < 1e6 => (1e-3, "µs"),
            x if x < 1e9 => (1e-6, "ms"),
            _ => (1e-9, "s"),
        };
        values.iter_mut().for_each(|v| *v *= f);
        unit
    }
    fn scale_throughputs(&self, _typical: f64, throughput: &Throughput, values: &mut [f64]) -> &'static str {
        // per second of the clock: bytes or elements divided by seconds
        let per = match throughput {
            Throughput::Bytes(n) | Throughput::BytesDecimal(n) | Throughput::Elements(n) => *n as f64,
        };
        values.iter_mut().for_each(|v| *v = per / (*v * 1e-9) / (1u64 << 30) as f64);
        match throughput {
            Throughput::Elements(_) => "Gi elem/s",
            _ => "GiB/s",
        }
    }
    fn scale_for_machines(&self, _values: &mut [f64]) -> &'static str {
        "ns"
    }
}
