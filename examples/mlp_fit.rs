//! The smallest real example: fit `y = sin(3x) + 0.5x` with an `rl-nn` MLP and watch the loss fall.
//! Weights and data come from one seed through `rl_nn::init` / `rl_nn::rand` (libtorch's global
//! generator is never used), and `rl_nn::optim::Adam` does the updates.
//!
//! ```text
//! cargo run --release --example mlp_fit -- --steps 2000
//! FRUGAL_DEVICE=cpu cargo run --release --example mlp_fit
//! ```
use anyhow::Result;
use clap::Parser;
use rl_core::{derive_seed_named, rng_from_seed, Params};
use rl_nn::optim::{Adam, AdamParams};
use rl_nn::{default_device, device_name, Activation, Mlp, MlpConfig};
use tch::nn::VarStore;
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
    let mut init_rng = rng_from_seed(derive_seed_named(args.seed, "init"));
    let mut data_rng = rng_from_seed(derive_seed_named(args.seed, "data"));
    println!("device: {} (cuda available: {})", device_name(device), tch::Cuda::is_available());
    let vs = VarStore::new(device);
    let cfg = MlpConfig::new([64, 64]).activation(Activation::Tanh).check()?;
    let net = Mlp::new(&vs.root(), 1, 1, &cfg, &mut init_rng)?;
    let mut opt = Adam::for_var_store(AdamParams::default().lr(3e-3).check()?, &vs)?;
    let opts = (Kind::Float, device);
    let x = rl_nn::rand::uniform(&[args.points, 1], -2.0, 2.0, opts, &mut data_rng)?;
    let y = target(&x) + rl_nn::rand::normal(&[args.points, 1], 0.0, 0.05, opts, &mut data_rng)?;
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
        opt.backward_step(&loss)?;
        if step % report_every == 0 || step == args.steps {
            last_test = tch::no_grad(|| net.f_forward(&x_test).map(|p| mse(&p, &y_test).double_value(&[])))?;
            println!("{:>6}  {:>10.5}  {:>10.5}", step, loss.double_value(&[]), last_test);
        }
    }
    println!("test mse: {first:.4} -> {last_test:.4} ({:.0}x lower)", first / last_test.max(1e-12));
    Ok(())
}
