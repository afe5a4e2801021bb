//! Homogeneous teams keep today's results: the shared-decoder `AgentCreditDecoder` (sum loss,
//! with and without the variance regulariser) gives bit for bit the losses and relabelled
//! rewards recorded from the implementation before per-type decoders and multi-agent RRD were
//! added (commit 8dd16e5).

use lare::{AgentCreditDecoder, CreditParams, MultiEpisode, MultiEpisodeBuffer, TeamTarget};
use ndarray::{Array2, Array3};
use rl_core::Params;

fn buffer() -> MultiEpisodeBuffer {
    let mut buf = MultiEpisodeBuffer::new(100, 2).unwrap();
    for e in 0..6usize {
        let (n, t) = (3, 4 + e % 3);
        let next =
            Array3::from_shape_fn((n, t, 2), |(i, k, d)| ((e * 31 + i * 7 + k * 3 + d) % 11) as f32 / 11.0 - 0.4);
        let dense = Array2::from_shape_fn((n, t), |(i, k)| -next[[i, k, 0]].abs());
        let ep = MultiEpisode {
            obs: next.clone(),
            actions: Array3::zeros((n, t, 1)),
            next_obs: next.clone(),
            team_return: dense.sum(),
            dense_rewards: dense,
        };
        buf.push(ep, next).unwrap();
    }
    buf
}

fn run(p: CreditParams) -> (Vec<u64>, Vec<u32>) {
    tch::set_num_threads(1);
    let buf = buffer();
    let mut dec = AgentCreditDecoder::new(p.check().unwrap(), 2, tch::Device::Cpu).unwrap();
    let losses: Vec<u64> =
        (0..5).map(|_| dec.update(&buf).unwrap().get("reward_model/loss").unwrap().to_bits()).collect();
    let r = dec.relabel(&buf.get(0).unwrap().1).unwrap();
    (losses, r.iter().map(|v| v.to_bits()).collect())
}

const SUM_LOSSES: [u64; 5] =
    [4596450769237966848, 4601635546920386560, 4591299076762370048, 4576507034375028736, 4590307208826191872];
const SUM_REWARDS: [u32; 12] = [
    3163852860, 3175612498, 3182983327, 3184183389, 3183887511, 3152884512, 3172820252, 3180239712, 3175612498,
    3182983327, 3184183389, 3169208000,
];
const REG_LOSSES: [u64; 5] =
    [4618951912312537088, 4619010495129583616, 4619788663209852928, 4618061804499632128, 4619397427122667520];
const REG_REWARDS: [u32; 12] = [
    3198018589, 3200949622, 3204030133, 3204091440, 3204248030, 3198271737, 3199922784, 3203003296, 3200949622,
    3204030133, 3204091440, 3198895947,
];

#[test]
fn shared_decoder_results_are_unchanged() {
    let (l, r) = run(CreditParams::default().hidden([8, 8]).batch_episodes(4).lr(1e-2));
    assert_eq!(l, SUM_LOSSES);
    assert_eq!(r, SUM_REWARDS);
    let (l, r) =
        run(CreditParams::default().hidden([8]).batch_episodes(3).variance_reg(0.5).target(TeamTarget::TeamSum));
    assert_eq!(l, REG_LOSSES);
    assert_eq!(r, REG_REWARDS);
}
