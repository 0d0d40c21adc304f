"""The exported model card, read as a user and the Hub read it: literal text, not text rebuilt with
the functions under test. Fast: no training run (the export's own tests train one)."""

from __future__ import annotations

import yaml

from trainers.model_card import last_evaluation, model_card

CFG = {
    "model": "tiny",
    "estimator": "progpo-gigpo",
    "rollout": "tree",
    "distill": "none",
    "env": "alfworld",
    "train_split": "easy-train",
    "eval_split": "easy-valid",
}
EVAL = {"iteration": 2, "split": "easy-valid", "episodes": 8, "success": 0.25, "lo": 0.0, "hi": 0.5}


def _header(card: str) -> dict:
    assert card.startswith("---\n")
    return yaml.safe_load(card.split("---\n")[1])


def test_a_full_weights_card_reads_line_by_line():
    card = model_card(CFG, "full weights", EVAL, "/tmp/out", "abc1234")
    assert _header(card) == {
        "base_model": "tiny",
        "library_name": "transformers",
        "tags": ["progpo", "reinforcement-learning", "llm-agent", "alfworld"],
        "pipeline_tag": "text-generation",
    }
    assert card.split("---\n")[1] == (  # the Hub's order: the base first, the tags as a list
        "base_model: tiny\nlibrary_name: transformers\ntags:\n- progpo\n- reinforcement-learning\n- llm-agent\n"
        "- alfworld\npipeline_tag: text-generation\n"
    )
    body = card.split("---\n", 2)[2]
    assert body == (
        "\n"
        "# A ProGPO policy for alfworld\n"
        "\n"
        "Trained with ProGPO's trainer (`python -m trainers.progpo`) from `tiny`; weights: full weights.\n"
        "\n"
        "## Training\n"
        "\n"
        "- estimator: `progpo-gigpo`\n"
        "- collector: `tree` rollouts\n"
        "- teacher: none\n"
        "- env: `alfworld`, trained on `easy-train`, evaluated on `easy-valid`\n"
        "- code: commit `abc1234`\n"
        "\n"
        "## Evaluation\n"
        "\n"
        "Last evaluation: held-out success 0.250 (95% bootstrap interval [0.000, 0.500] over its episodes) "
        "on 8 episodes of `easy-valid` at iteration 2.\n"
        "\n"
        "## Loading\n"
        "\n"
        "```python\n"
        "from transformers import AutoModelForCausalLM\n"
        "model = AutoModelForCausalLM.from_pretrained('/tmp/out')\n"
        "```\n"
        "\n"
        "The prompt the policy was trained with is in `progpo_export.json` (`prompt`).\n"
    )


def test_an_adapter_card_names_peft_its_base_and_the_adapter_loader():
    card = model_card(CFG, "peft adapter", EVAL, "/tmp/out", None, base="/tmp/out/base")
    head = _header(card)
    assert head["base_model"] == "/tmp/out/base" and head["library_name"] == "peft"
    assert (
        "from peft import AutoPeftModelForCausalLM\nmodel = AutoPeftModelForCausalLM.from_pretrained('/tmp/out')"
        in card
    )
    assert "AutoModelForCausalLM.from_pretrained" not in card.replace("AutoPeftModelForCausalLM", "")
    assert "- code: commit `not recorded`\n" in card


def test_the_collector_defaults_to_flat_and_the_base_to_the_model():
    cfg = {k: v for k, v in CFG.items() if k != "rollout"}
    card = model_card(cfg, "full weights", None, "o", "c")
    assert "- collector: `flat` rollouts\n" in card and _header(card)["base_model"] == "tiny"


def test_each_teacher_is_named_as_it_is_and_only_the_privileged_one_is_tagged():
    said = {}
    for teacher in ("none", "privileged", "hindsight", "my-plugin-teacher"):
        card = model_card({**CFG, "distill": teacher}, "full weights", None, "o", "c")
        said[teacher] = next(line for line in card.splitlines() if line.startswith("- teacher: "))
        assert ("privileged-teacher" in _header(card)["tags"]) == (teacher == "privileged"), teacher
    assert said == {
        "none": "- teacher: none",
        "privileged": "- teacher: privileged (**privileged**: the teacher read information the agent never sees; "
        "not pure RL)",
        "hindsight": "- teacher: hindsight (no ground truth)",
        "my-plugin-teacher": "- teacher: my-plugin-teacher (a plug-in teacher, not loaded here)",
    }
    # a config that leaves the teacher out, or sets it empty, trained with none
    for cfg in ({k: v for k, v in CFG.items() if k != "distill"}, {**CFG, "distill": ""}):
        assert "- teacher: none\n" in model_card(cfg, "full weights", None, "o", "c")


def test_no_evaluation_says_not_recorded_and_an_interval_is_only_printed_when_known():
    card = model_card(CFG, "full weights", None, "o", "c")
    assert "Last evaluation: not recorded (the checkpoint's history holds no held-out evaluation).\n" in card
    bare = model_card(CFG, "full weights", {**EVAL, "lo": None, "hi": None, "success": 0.125}, "o", "c")
    assert "Last evaluation: held-out success 0.125 on 8 episodes of `easy-valid` at iteration 2.\n" in bare


def test_the_last_evaluation_is_the_last_eval_record_with_a_success_and_its_interval_from_its_episodes():
    records = [
        {
            "kind": "eval",
            "iteration": 0,
            "eval/split": "v",
            "eval/episodes": 4,
            "eval/success": 0.5,
            "eval/won": [1, 1, 0, 0],
        },
        {"kind": "train", "iteration": 1, "eval/success": 0.9},
        {
            "kind": "eval",
            "iteration": 2,
            "eval/split": "v",
            "eval/episodes": 4,
            "eval/success": 1.0,
            "eval/won": [1, 1, 1, 1],
        },
        {"kind": "eval", "iteration": 3, "eval/split": "v", "eval/success": None},  # unreadable: skipped
    ]
    assert last_evaluation(records) == {
        "iteration": 2,
        "split": "v",
        "episodes": 4,
        "success": 1.0,
        "lo": 1.0,
        "hi": 1.0,
    }
    mixed = last_evaluation(records[:1])
    assert mixed is not None and mixed["success"] == 0.5 and 0.0 <= mixed["lo"] < 0.5 < mixed["hi"] <= 1.0
    no_episodes = last_evaluation([{**records[0], "eval/won": []}])
    assert no_episodes is not None and no_episodes["lo"] is None and no_episodes["hi"] is None
    assert last_evaluation(records[1:2]) is None and last_evaluation([]) is None
    unlisted = last_evaluation([{k: v for k, v in records[0].items() if k != "eval/won"}])  # an older record
    assert unlisted is not None and unlisted["lo"] is None and unlisted["success"] == 0.5
