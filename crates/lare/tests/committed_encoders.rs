//! The committed encoders (`crates/lare/encoders/*.json`) replay from the committed response
//! cache (`crates/lare/llm_cache/`) with no endpoint, and say who wrote them: by hand.

use lare::llm::{generate_encoder, tasks, CachedChat, EncoderRecord, PipelineParams, ProbeSet, ResponseCache, Source};
use rl_core::Params;

fn dir(p: &str) -> String {
    format!("{}/{p}", env!("CARGO_MANIFEST_DIR"))
}

#[test]
fn committed_encoders_replay_offline_and_are_labelled_hand_written() {
    let cache = ResponseCache::new(dir("llm_cache"));
    for (task, prompt) in [("pendulum", tasks::pendulum()), ("simple_spread", tasks::simple_spread(3).unwrap())] {
        let committed = EncoderRecord::load(dir(&format!("encoders/{task}.json"))).unwrap();
        assert_eq!(committed.source, Source::HandWritten, "{task}");
        assert!(committed.label().contains("hand-written"));
        for key in &committed.cache_keys {
            let entry = cache.get(key).unwrap().expect("every call of the record is in the cache");
            assert_eq!(entry.provenance.source, Source::HandWritten, "{task}: {key}");
        }
        // the generate example's probe states (seed 0, 32 states)
        let mut rng = rl_core::rng_from_seed(0);
        let probe = if task == "pendulum" {
            let mut env =
                rl_envs::classic::Pendulum::new(rl_envs::classic::PendulumParams::default().check().unwrap()).unwrap();
            ProbeSet::from_env(&mut env, 32, &mut rng).unwrap()
        } else {
            let mut env =
                rl_envs::mpe::SimpleSpread::new(rl_envs::mpe::SimpleSpreadParams::default().check().unwrap()).unwrap();
            ProbeSet::from_multi_env(&mut env, 11, &mut rng).unwrap()
        };
        let params = PipelineParams::default().model("hand-written").n_candidates(1).check().unwrap();
        let replayed = generate_encoder(&mut CachedChat::replay(cache.clone()), &prompt, &probe, &params).unwrap();
        assert_eq!(replayed, committed, "{task}");
    }
}
