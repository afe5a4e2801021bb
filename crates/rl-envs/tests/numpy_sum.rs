//! NumPy 2's summation order: `rl_envs::numpy_sum` against `np.sum(np.square(a))` of NumPy
//! 2.4.6 on random float32 arrays (the lengths of the MuJoCo action spaces and more) and
//! float64 arrays (Ant's 84 contact forces and more), bit for bit. The arrays are redrawn
//! here with the port of `default_rng(seed).uniform` (fixture: `scripts/golden_rl_envs.py
//! numpy_sum`, which records only the sums).

mod common;

use rl_envs::numpy_sum::{sum_of_squares_f32, sum_of_squares_f64};
use rl_envs::rng::{uniform, NumpyRng};

#[test]
fn sums_of_squares_are_numpy_2s_bit_for_bit() {
    let text = std::fs::read_to_string(format!("{}/tests/fixtures/numpy_sum.json", env!("CARGO_MANIFEST_DIR")))
        .expect("fixture numpy_sum.json");
    let fixture: serde_json::Value = serde_json::from_str(&text).expect("valid JSON");
    let (mut checked, mut old_order_differs_f32, mut f32_total) = (0, 0, 0);
    for case in fixture["cases"].as_array().unwrap() {
        let n = case["n"].as_u64().unwrap() as usize;
        let seed = case["seed"].as_u64().unwrap();
        let f32s = case["dtype"] == "float32";
        let mut rng = NumpyRng::new(seed);
        for (i, want) in case["sums"].as_array().unwrap().iter().enumerate() {
            let want = want.as_f64().unwrap();
            let a: Vec<f64> = (0..n).map(|_| uniform(&mut rng, -1.2, 1.2)).collect();
            if f32s {
                let a: Vec<f32> = a.iter().map(|&v| v as f32).collect();
                let got = sum_of_squares_f32(a.iter().copied());
                assert_eq!(f64::from(got).to_bits(), want.to_bits(), "float32 n={n} array {i}: {got} vs {want}");
                // the order used before (NumPy 1.x style: first element + the rest from zero)
                let sq: Vec<f32> = a.iter().map(|v| v * v).collect();
                let old = sq[0] + sq[1..].iter().fold(0.0f32, |s, v| s + v);
                old_order_differs_f32 += usize::from(f64::from(old) != want);
                f32_total += 1;
            } else {
                let a: Vec<f64> = if i % 2 == 1 { a.iter().map(|v| (v * 3.0).clamp(-1.0, 1.0)).collect() } else { a };
                let got = sum_of_squares_f64(a.iter().copied());
                assert_eq!(got.to_bits(), want.to_bits(), "float64 n={n} array {i}: {got} vs {want}");
            }
            checked += 1;
        }
    }
    assert!(checked >= 6000, "only {checked} sums checked");
    // the test can tell the orders apart: the old one misses on a good share of the arrays
    assert!(old_order_differs_f32 * 10 > f32_total, "{old_order_differs_f32} of {f32_total}");
    eprintln!(
        "numpy sums: {checked} bit-identical; the previous float32 order differed on {old_order_differs_f32} of {f32_total}"
    );
}
