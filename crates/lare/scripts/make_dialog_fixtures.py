"""Writes the recorded fixture dialogs of crates/lare/tests/llm_pipeline.rs.

These dialogs are HAND-AUTHORED TEST FIXTURES, not answers of a language model: they stand in
for an LLM endpoint (served by a loopback HTTP server inside the test) so that CI exercises the
client, the cache, the summary turn and the repair loop without any network.

    python3 crates/lare/scripts/make_dialog_fixtures.py
"""
import json
import os

OUT = os.path.join(os.path.dirname(__file__), "..", "tests", "fixtures", "dialogs")


def answer(understand, analyze, functions):
    return json.dumps({"Understand": understand, "Analyze": analyze, "Functions": functions})


CAND_A = """fn evaluation_func(obs, act) {
    let angle = atan(obs.sin_theta, obs.cos_theta);
    [abs(angle), abs(obs.theta_dot)]
}"""
CAND_B = """fn evaluation_func(obs, act) {
    [1.0 - obs.cos_theta, sq(act[0])]
}"""
CAND_C = """fn evaluation_func(obs, act) {
    let upright = obs.cos_theta;
    [upright, sq(obs.theta_dot)]
}"""
# the summary answer references a field that does not exist: a runtime error
BROKEN_FIELD = """fn evaluation_func(obs, act) {
    let angle = atan(obs.sin_theta, obs.cos_theta);
    [sq(angle), sq(obs.theta), sq(act[0])]
}"""
# the first repair returns constant factors: rejected by the variance check
BROKEN_CONSTANT = """fn evaluation_func(obs, act) {
    [0.0, 1.0, 2.0]
}"""
FIXED = """fn evaluation_func(obs, act) {
    let angle = atan(obs.sin_theta, obs.cos_theta);
    [sq(angle), sq(obs.theta_dot), sq(act[0])]
}"""

pendulum_repair = {
    "note": "hand-authored test fixture (not an LLM answer): three candidates, a summary that reads a "
    "missing field, a repair that returns constant factors, a second repair that passes",
    "turns": [
        {"expect": "TASK: ", "answers": [
            answer("Swing the pendulum up.", "Angle and speed matter.", CAND_A),
            answer("Keep it upright.", "Height and torque.", CAND_B),
            answer("Balance.", "Uprightness and spin.", CAND_C),
        ]},
        {"expect": "Combine them", "answers": [
            "```json\n" + answer("Swing up and balance.", "Angle, speed and torque.", BROKEN_FIELD) + "\n```"
        ]},
        {"expect": "There is an error in your previous answer. Error: ", "answers": [
            answer("Swing up and balance.", "Constant weights.", BROKEN_CONSTANT)
        ]},
        {"expect": "Every factor is constant", "answers": [
            answer("Swing up and balance.", "Squared angle, squared speed, squared torque.", FIXED)
        ]},
    ],
}

always_broken = {
    "note": "hand-authored test fixture (not an LLM answer): every answer fails, so the repair budget runs out",
    "turns": [
        {"expect": "TASK: ", "answers": ["I cannot answer in JSON."]},
        {"expect": "There is an error in your previous answer. Error: The answer is not a JSON object.", "answers": [
            answer("", "", "fn evaluation_func(obs, act) { loop { } }")
        ]},
    ],
}

os.makedirs(OUT, exist_ok=True)
for name, d in [("pendulum_repair", pendulum_repair), ("always_broken", always_broken)]:
    with open(os.path.join(OUT, name + ".json"), "w") as f:
        json.dump(d, f, indent=1)
        f.write("\n")
print("wrote", OUT)
