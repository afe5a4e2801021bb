//! The smallest real example: fit `y = sin(3x) + 0.5x` with an `rl-nn` MLP and watch the loss fall.
//!
//! ```text
//! cargo run --release --example mlp_fit -- --steps 2000
//! FRUGAL_DEVICE=cpu cargo run --release --example mlp_fit
//! ```
use anyhow::Result;
use clap::Parser;
use rl_nn::{default_device, device_name, seed_torch, Activation, Mlp, MlpConfig};
use tch::nn::{Adam, OptimizerConfig, VarStore};
use tch::{Kind, Tensor};

#[derive(Parser, Debug)]
struct Args {
    /// Optimisation steps.
    #[arg(long, default_value_t = 1500)]
    steps: usize,
    /// Training points.
    #[arg(long, default_value_t = 512)]
    points: i64,
    /// Seed.
    #[arg(long, default_value_t = 0)]
    seed: u64,
}

fn target(x: &Tensor) -> Tensor {
    (x * 3.0).sin() + x * 0.5
}

fn main() -> Result<()> {
    let args = Args::parse();
    let device = default_device()?;
    seed_torch(args.seed);
    println!("device: {} (cuda available: {})", device_name(device), tch::Cuda::is_available());
    let vs = VarStore::new(device);
    let net = Mlp::new(&vs.root(), 1, 1, &MlpConfig::new([64, 64]).activation(Activation::Tanh))?;
    let mut opt = Adam::default().build(&vs, 3e-3)?;
    let x = Tensor::rand([args.points, 1], (Kind::Float, device)) * 4.0 - 2.0;
    let y = target(&x) + Tensor::randn([args.points, 1], (Kind::Float, device)) * 0.05;
    let x_test = Tensor::linspace(-2.0, 2.0, 200, (Kind::Float, device)).unsqueeze(1);
    let y_test = target(&x_test);
    let mse = |pred: &Tensor, t: &Tensor| (pred - t).square().mean(Kind::Float);
    let first = tch::no_grad(|| net.f_forward(&x_test).map(|p| mse(&p, &y_test).double_value(&[])))?;
    println!("{:>6}  {:>10}  {:>10}", "step", "train mse", "test mse");
    println!("{:>6}  {:>10}  {:>10.5}", 0, "-", first);
    let report_every = (args.steps / 6).max(1);
    let mut last_test = first;
    for step in 1..=args.steps {
        let loss = mse(&net.f_forward(&x)?, &y);
        opt.backward_step(&loss);
        if step % report_every == 0 || step == args.steps {
            last_test = tch::no_grad(|| net.f_forward(&x_test).map(|p| mse(&p, &y_test).double_value(&[])))?;
            println!("{:>6}  {:>10.5}  {:>10.5}", step, loss.double_value(&[]), last_test);
        }
    }
    println!("test mse: {first:.4} -> {last_test:.4} ({:.0}x lower)", first / last_test.max(1e-12));
    Ok(())
}
