//! `GroupReplayBuffer::fill` at POPO scale: 512 groups × K = 8 × 1024 tokens per step, half
//! of them ineffective, against a buffer holding 512 effective groups of the previous step;
//! side by side with a bare `memcpy` of the same token data. Also prints stored bytes vs raw.
//!
//! `cargo bench --bench replay --features rlvr-replay`
use std::hint::black_box;

use criterion::{criterion_group, criterion_main, BatchSize, Criterion};
use rlvr_replay::{FlatResponses, Group, GroupReplayBuffer, Params, Priority, ReplayParams};

const GROUPS: usize = 512;
const K: usize = 8;
const LEN: usize = 1024;

fn group(prompt: u64, version: u64, effective: bool) -> Group {
    let n = K * LEN;
    let flat = FlatResponses {
        tokens: (0..n as u32).map(|t| t.wrapping_mul(2_654_435_761) % 50_000).collect(),
        behaviour_logp: (0..n).map(|t| -((t % 97) as f32) * 0.01).collect(),
        mask: Vec::new(),
        lengths: vec![LEN; K],
        rewards: (0..K).map(|k| if effective { (k % 2) as f32 } else { 0.0 }).collect(),
    };
    match Group::from_flat(prompt, version, flat) {
        Ok(g) => g,
        Err(e) => unreachable!("bench groups are valid: {e}"),
    }
}

/// A buffer holding `GROUPS` effective groups of version 0, and step-1 inputs (every other
/// group ineffective).
fn setup(priority: Priority) -> (GroupReplayBuffer, Vec<Group>) {
    let params = ReplayParams::new(K).capacity_groups(2 * GROUPS).capacity_bytes(1 << 32).priority(priority);
    let Ok(params) = params.check() else { unreachable!("valid params") };
    let Ok(mut buf) = GroupReplayBuffer::new(params) else { unreachable!("valid params") };
    let first: Vec<Group> = (0..GROUPS as u64).map(|p| group(p, 0, true)).collect();
    if buf.fill(first, 0).is_err() {
        unreachable!("valid fill");
    }
    let inputs = (0..GROUPS as u64).map(|p| group(GROUPS as u64 + p, 1, p % 2 == 0)).collect();
    (buf, inputs)
}

fn bench(c: &mut Criterion) {
    let mut g = c.benchmark_group("replay");
    g.sample_size(10);
    for (name, priority) in [("recency", Priority::Recency), ("adv_std", Priority::AdvantageStd)] {
        let (buf, inputs) = setup(priority);
        g.bench_function(format!("fill/{name}/512x8x1024"), |b| {
            b.iter_batched(
                || (buf.clone(), inputs.clone()),
                |(mut buf, inputs)| {
                    let batch = buf.fill(inputs, 1);
                    (buf, black_box(batch))
                },
                BatchSize::PerIteration,
            )
        });
    }

    // The same token data (ids + behaviour log-probs of 512 groups), copied once.
    let (_, inputs) = setup(Priority::Recency);
    let mut dst_tokens: Vec<Vec<u32>> = inputs.iter().map(|g| vec![0; g.tokens().len()]).collect();
    let mut dst_logp: Vec<Vec<f32>> = inputs.iter().map(|g| vec![0.0; g.behaviour_logp().len()]).collect();
    g.bench_function("memcpy/512x8x1024", |b| {
        b.iter(|| {
            for ((g, t), l) in inputs.iter().zip(&mut dst_tokens).zip(&mut dst_logp) {
                t.copy_from_slice(g.tokens());
                l.copy_from_slice(g.behaviour_logp());
            }
            black_box((&dst_tokens, &dst_logp));
        })
    });
    g.finish();

    // Memory: what the buffer holds after a fill vs the raw size of the same data.
    let (mut buf, inputs) = setup(Priority::Recency);
    if buf.fill(inputs, 1).is_ok() {
        let (heap, raw) = (buf.heap_bytes(), buf.raw_bytes());
        println!(
            "memory: {} groups stored, heap {heap} B, raw {raw} B, overhead {:.3}%",
            buf.len(),
            100.0 * (heap as f64 / raw as f64 - 1.0)
        );
    }
}

criterion_group!(benches, bench);
criterion_main!(benches);
