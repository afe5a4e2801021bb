//! Seeded, global-free initialisation: models built from the same seed in two threads are
//! bit-identical, different seeds differ, and libtorch's process-wide generator is untouched.
//! (Only this file's tests share its process, and none of them draws from libtorch's generator
//! except `the_global_generator_is_never_touched`.)
use rl_core::Params;
use rl_nn::init::Init;
use rl_nn::{EnsembleMlp, Mlp, MlpConfig};
use tch::nn::VarStore;
use tch::{Device, Kind, Tensor};

/// Every variable of a fresh actor MLP and critic ensemble built from `seed`, flattened, by name.
fn build(seed: u64) -> Vec<(String, Vec<f32>)> {
    let mut rng = rl_core::rng_from_seed(seed);
    let vs = VarStore::new(Device::Cpu);
    let actor = MlpConfig::new([64, 64])
        .layer_norm(true)
        .weight_init(Init::Orthogonal { gain: 2f64.sqrt() })
        .output_weight_init(Some(Init::Orthogonal { gain: 0.01 }))
        .bias_init(Init::Zeros)
        .check()
        .unwrap();
    let _a = Mlp::new(&vs.root().sub("actor"), 11, 3, &actor, &mut rng).unwrap();
    let _q = EnsembleMlp::new(&vs.root().sub("critic"), 5, 14, 1, &MlpConfig::new([32, 32]).check().unwrap(), &mut rng)
        .unwrap();
    let mut vars: Vec<(String, Tensor)> = vs.variables().into_iter().collect();
    vars.sort_by(|a, b| a.0.cmp(&b.0));
    vars.into_iter().map(|(n, t)| (n, Vec::<f32>::try_from(&t.detach().contiguous().view([-1])).unwrap())).collect()
}

#[test]
fn same_seed_in_two_threads_gives_bit_identical_models() {
    let handles: Vec<_> = (0..4).map(|i| std::thread::spawn(move || build(if i < 3 { 42 } else { 43 }))).collect();
    let models: Vec<_> = handles.into_iter().map(|h| h.join().unwrap()).collect();
    for m in &models[1..3] {
        assert_eq!(m.len(), models[0].len());
        for ((na, a), (nb, b)) in models[0].iter().zip(m) {
            assert_eq!(na, nb);
            let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
            assert_eq!(bits(a), bits(b), "{na} differs between threads");
        }
    }
    // a different seed changes every randomly initialised tensor
    for ((n, a), (_, b)) in models[0].iter().zip(&models[3]) {
        let constant = n.contains(".ln.") || n.starts_with("actor") && n.ends_with("bias");
        assert_eq!(a == b, constant, "{n}");
    }
}

#[test]
fn the_global_generator_is_never_touched() {
    tch::manual_seed(5);
    let _first = Tensor::randn([4], (Kind::Float, Device::Cpu));
    let want = Tensor::randn([4], (Kind::Float, Device::Cpu));
    tch::manual_seed(5);
    let _first = Tensor::randn([4], (Kind::Float, Device::Cpu));
    let _model = build(7);
    let mut rng = rl_core::rng_from_seed(1);
    let _noise = rl_nn::rand::standard_normal(&[16], (Kind::Float, Device::Cpu), &mut rng).unwrap();
    let _mask = rl_nn::rand::dropout_mask(&[16], 0.5, (Kind::Float, Device::Cpu), &mut rng).unwrap();
    let _tok = rl_nn::rand::categorical(&Tensor::zeros([3, 5], (Kind::Float, Device::Cpu)), &mut rng).unwrap();
    let got = Tensor::randn([4], (Kind::Float, Device::Cpu));
    assert!(got.equal(&want), "building models or drawing noise advanced libtorch's generator");
}
