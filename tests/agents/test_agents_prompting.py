"""agents.prompting: templates are data; prompts hold goal, step, last-k history, admissible."""

from __future__ import annotations

import pytest

from agents.prompting import build_messages, load_template, render_prompt

HIST = [("obs one", "go east"), ("obs two", "look"), ("obs three", "go west")]


def _messages(**kw):
    args = dict(
        goal="reach room 3.",
        observation="You are in room 1.",
        admissible=["go east", "look"],
        history=HIST,
        step=3,
        k=2,
        fmt="think_action",
    )
    args.update(kw)
    return build_messages(args.pop("env", "alfworld"), **args)


def _user(**kw):
    return _messages(**kw)[1]["content"]


def test_alfworld_prompt_contents():
    msgs = _messages()
    assert [m["role"] for m in msgs] == ["system", "user"]
    user = msgs[1]["content"]
    assert "Your task is to: reach room 3." in user
    assert "already taken 3 step(s)" in user and "at step 4" in user
    assert "[Observation 2: 'obs two', Action 2: 'look']" in user
    assert "[Observation 3: 'obs three', Action 3: 'go west']" in user
    assert "obs one" not in user  # only the last k=2 pairs
    assert "['go east', 'look']" in user
    assert "<think> </think>" in user and "<action> </action>" in user


def test_first_step_and_k0_use_the_no_history_template():
    assert "Prior to this step" not in _user(history=[], step=0)
    assert "Prior to this step" not in _user(k=0)


def test_format_instruction_changes_with_fmt():
    assert "<think>" not in _user(fmt="action") and "<action>" in _user(fmt="action")
    assert "single line" in _user(fmt="raw")


def test_webshop_and_gym_id_alias():
    a = _user(env="webshop", admissible=["search[<query>]"])
    b = _user(env="ProGPO-WebShop-v0", admissible=["search[<query>]"])
    assert a == b and "WebShop" not in a and "search[your query]" in a
    assert (
        "e-commerce"
        in build_messages("webshop", goal="g", observation="o", admissible=[], history=[], step=0)[0]["content"]
    )


def test_goal_dict_uses_instruction_text():
    assert "Your task is to: buy red shoes" in _user(env="webshop", goal={"instruction_text": "buy red shoes"})


def test_values_with_braces_and_huge_observation_are_safe():
    user = _user(observation="{step} {goal} " + "x" * 1_000_000, goal="find {the} mug")
    assert "{step} {goal}" in user and "find {the} mug" in user
    assert len(user) < 10_000  # observation cut to max_observation_chars
    assert load_template("alfworld").max_observation_chars == 2000


def test_non_utf8_observation_bytes():
    user = _user(observation=b"room \xff 1")
    assert "room \ufffd 1" in user


def test_bad_arguments():
    with pytest.raises(ValueError, match="no prompt template"):
        _user(env="minecraft")
    with pytest.raises(ValueError, match="unknown format"):
        _user(fmt="xml")
    with pytest.raises(ValueError, match="k must be"):
        _user(k=-1)


def test_custom_template_file(tmp_path):
    src = load_template("alfworld")
    path = tmp_path / "mine.yaml"
    path.write_text(
        "name: mine\nsystem: SYS\nuser_first: 'FIRST {goal} {admissible}'\nuser: 'LATER {history}'\n"
        "history_item: '<{observation}|{action}>'\nformat_instructions: {think_action: T, action: A, raw: R}\n"
    )
    msgs = build_messages(str(path), goal="g", observation="o", admissible=["a"], history=[("o1", "a1")], step=1)
    assert msgs[0]["content"] == "SYS" and msgs[1]["content"] == "LATER <o1|a1>"
    assert src.name == "alfworld"
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: bad\nsystem: x\n")
    with pytest.raises(ValueError, match="lacks the field"):
        load_template(str(bad))


def test_render_prompt_uses_chat_template(tiny):
    _, tok = tiny
    msgs = build_messages("alfworld", goal="g", observation="o", admissible=["look"], history=[], step=0)
    ids = render_prompt(tok, msgs)
    text = tok.decode(ids)
    assert text.startswith("<|im_start|>system\n") and text.endswith("<|im_start|>assistant\n")
    assert text.count("<|im_end|>") == 2


_FIELDS = (
    "system: SYS\nuser_first: 'FIRST {goal} {admissible}'\nuser: 'LATER {history}'\n"
    "history_item: '<{observation}|{action}>'\nformat_instructions: {think_action: T, action: A, raw: R}\n"
)


def test_extends_chains_of_any_depth_with_parents_next_to_the_file(tmp_path, monkeypatch):
    (tmp_path / "t").mkdir()
    (tmp_path / "t" / "base.yaml").write_text("name: base\n" + _FIELDS)
    (tmp_path / "t" / "mid.yaml").write_text("extends: base.yaml\nname: mid\nsystem: MID\n")
    (tmp_path / "t" / "top.yaml").write_text("extends: mid.yaml\nname: top\n")
    (tmp_path / "t" / "notes.yaml").write_text("extends: alfworld-task-notes\nname: notes\n")  # itself an extension
    monkeypatch.chdir(tmp_path)  # not the templates' folder: relative parents are not read from here
    top = load_template(str(tmp_path / "t" / "top.yaml"))
    assert (top.name, top.system, top.user) == ("top", "MID", "LATER {history}")
    notes, task_notes = load_template(str(tmp_path / "t" / "notes.yaml")), load_template("alfworld-task-notes")
    assert notes.name == "notes" and notes.extra == task_notes.extra and notes.system == task_notes.system


@pytest.mark.parametrize(
    "files, match",
    [
        ({"a.yaml": "extends: b.yaml\nname: a\n", "b.yaml": "extends: a.yaml\nname: b\n"}, "forms a cycle"),
        ({"a.yaml": "extends: a.yaml\nname: a\n"}, "forms a cycle"),
        ({"a.yaml": "extends: missing.yaml\nname: a\n"}, "does not exist"),
        ({"a.yaml": "name: [unclosed\n"}, "not valid YAML"),
        ({"a.yaml": "!!python/object/apply:os.system ['echo pwned']\n"}, "not valid YAML"),
        ({"a.yaml": "name: a\n" + _FIELDS.replace("system: SYS", "system: 3")}, "system must be a string"),
        ({"a.yaml": "name: a\n" + _FIELDS + "max_admissible: many\n"}, "max_admissible must be an integer"),
        ({"a.yaml": "extends: 7\nname: a\n"}, "'extends' must name a template"),
    ],
)
def test_bad_template_is_one_cli_line(tmp_path, capsys, files, match):
    from trainers.cli.train import main

    for name, text in files.items():
        (tmp_path / name).write_text(text)
    out = tmp_path / "run"
    argv = [
        *(
            "--env rooms --model tiny --warm-start none --iterations 1 --num-groups 1 --group-size 2 "
            "--no-progress-bars --no-tensorboard --output-dir"
        ).split(),
        str(out),
        "--template",
        str(tmp_path / "a.yaml"),
    ]
    assert main(argv) == 2
    err = [ln for ln in capsys.readouterr().err.splitlines() if ln.strip()]
    assert len(err) == 1 and err[0].startswith("error:") and match in err[0], err
    assert not (out / "config.yaml").exists()
