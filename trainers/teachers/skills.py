"""Hindsight skills: what a skill writer may read of a finished trajectory (:class:`Transcript`),
and the two writers (a template, the CPU default; the policy itself, generate mode)."""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass
from typing import Any, Protocol, Sequence

__all__ = ["PolicySkillWriter", "SkillWriter", "TemplateSkillWriter", "Transcript", "transcripts_of"]


@dataclass(frozen=True)
class Transcript:
    """What a skill writer may read: the instruction the agent was shown, and its own
    (observation, action) pairs and final observation. Nothing the agent did not observe."""

    goal: str
    steps: tuple[tuple[str, str], ...]
    final_observation: str = ""


class SkillWriter(Protocol):
    """Writes a short hindsight skill for one finished trajectory."""

    def write(self, transcripts: Sequence[Transcript]) -> list[str]: ...


_STOP = frozenset(
    "a an the and or of to in on at for with from your you is are it its this that some put place "
    "find take then them two task look".split()
)


def _words(text: str) -> list[str]:
    return [w for w in re.findall(r"[a-z]+", text.lower()) if len(w) > 2 and w not in _STOP]


class TemplateSkillWriter:
    """A few sentences built from the transcript alone (the CPU default: no model, no ground truth):

    1. where a word of the instruction first appeared: ``"X" appeared after "ACTION".``;
    2. the places gone to more than once: ``Going back to P brought nothing new.`` (``go to``
       and ``click`` targets);
    3. the actions taken three times or more: ``"A" was repeated N times: try something else.``

    >>> t = Transcript("put a mug in the sink", (("You are in a room.", "go to desk 1"),
    ...     ("On the desk 1, you see a pen 1.", "go to shelf 1"), ("On the shelf 1, you see a mug 1.", "go to desk 1"),
    ...     ("On the desk 1, you see a pen 1.", "go to desk 1")), "On the desk 1, you see a pen 1.")
    >>> print(TemplateSkillWriter().write([t])[0])
    Hindsight from an earlier attempt at this task: "mug" appeared after "go to shelf 1". Going back to desk 1 brought nothing new.
    """

    def write(self, transcripts: Sequence[Transcript]) -> list[str]:
        return [self.write_one(t) for t in transcripts]

    def write_one(self, t: Transcript) -> str:
        goal = list(dict.fromkeys(_words(t.goal)))
        after = [obs for obs, _ in t.steps[1:]] + [t.final_observation]
        sentences: list[str] = []
        seen: set[str] = set(w for w in _words(t.steps[0][0]) if w in goal) if t.steps else set()
        for (_, action), obs in zip(t.steps, after):
            new = [w for w in goal if w not in seen and w in set(_words(obs))]
            if new:
                sentences.append(f'"{new[0]}" appeared after "{action}".')
                seen.update(new)
        places = Counter(m.group(2) for _, a in t.steps for m in [re.match(r"(go to|click\[)\s*([^\]]+)", a)] if m)
        again = [p for p, n in places.items() if n > 1]
        if again:
            sentences.append(f"Going back to {', '.join(again[:3])} brought nothing new.")
        repeats = [
            (a, n)
            for a, n in Counter(a for _, a in t.steps).items()
            if n >= 3 and not a.startswith(("go to", "click["))
        ]
        for a, n in repeats[:2]:
            sentences.append(f'"{a}" was repeated {n} times: try something else.')
        body = " ".join(sentences) if sentences else "nothing in it is worth repeating; explore other places."
        return f"Hindsight from an earlier attempt at this task: {body}"


class PolicySkillWriter:
    """The policy writes the skill itself from a hindsight prompt (generate mode: its backend)."""

    PROMPT = (
        "Here is an earlier attempt at a task.\nTask: {goal}\n{steps}\nWrite one or two short sentences: what "
        "to do, or what to avoid, next time.\nLesson:"
    )

    def __init__(self, policy: Any, max_new_tokens: int = 48) -> None:
        if getattr(policy, "backend", None) is None:
            raise ValueError("skill_writer policy needs a generating policy (--policy-mode generate)")
        self.policy, self.max_new_tokens = policy, max_new_tokens

    def write(self, transcripts: Sequence[Transcript]) -> list[str]:
        tok = self.policy.tokenizer
        prompts = []
        for t in transcripts:
            steps = "\n".join(f"> {a}\n{o[:200]}" for o, a in t.steps[-8:])
            prompts.append(tok.encode(self.PROMPT.format(goal=t.goal, steps=steps), add_special_tokens=False))
        cfg = self.policy.sampling.with_(max_new_tokens=self.max_new_tokens, min_new_tokens=0, n=1)
        gens = self.policy.backend.generate(prompts, cfg, seed=0)
        return [f"Hindsight from an earlier attempt at this task: {g.text.strip()[:400]}" for g in gens]


def transcripts_of(rollout: Any) -> list[Transcript]:
    """One :class:`Transcript` per trajectory of a rollout: the instruction it was shown and its
    own observations and actions (a tree's leaf: its whole path)."""
    out = []
    for traj, path in zip(rollout.trajectories, rollout.paths()):
        steps = tuple((rollout.steps[k].obs, rollout.steps[k].action) for k in path)
        final = rollout.steps[path[-1]].next_obs if path else ""
        out.append(Transcript(traj.goal, steps, final))
    return out
