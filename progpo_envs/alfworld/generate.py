"""Generate new ALFWorld games from the AI2-THOR layouts shipped inside the ``alfworld`` wheel.

For a floor plan it reads ``alfworld/gen/layouts/FloorPlan<N>-objects.json`` (object classes in
the scene), ``-openable.json`` (receptacle ids and the pose to interact with them) and
``-layout.npy`` (reachable grid points), places objects into receptacles that may hold them
(``alfworld.gen.constants.VAL_RECEPTACLE_OBJECTS``), picks a goal from
``alfworld.gen.goal_library`` (goal PDDL + templated task sentence) and writes the original
layout::

    OUT/json_2.1.1/<split>/<task_type>-<Object>-None-<Recep>-<scene>/<trial>/game.tw-pddl
                                                                      /traj_data.json

Every game is played through the REAL engine with the handcoded expert before it is kept: the
game must not be won at reset and must be won by its walkthrough, which is stored in the game
file (``"walkthrough"``, as in newer ALFWorld files).

Difficulty knob (:class:`~progpo_envs.alfworld.scenes.Difficulty`): copies per object class, share of distractor classes,
probability that target objects start inside closed receptacles, start far from the targets,
and how many receptacles of the floor plan are kept. ``easy``, ``normal`` and ``hard`` are
predefined; ``easy`` (one instance per class, few distractors, targets never hidden, at most
8 receptacles: a small room) is where a CPU-sized policy can learn.

Usage::

    python -m progpo_envs.alfworld.generate --out /tmp/games --per-type 2 --seed 0
    python -m progpo_envs.alfworld.generate --out /tmp/hard --per-type 2 --difficulty hard
    python -m progpo_envs.alfworld.generate --build-default   # rebuilds the embedded set
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Sequence

from progpo_envs.alfworld.embedded import pack_games
from progpo_envs.alfworld.env import make_engine
from progpo_envs.alfworld.expert import ExpertError, solve
from progpo_envs.alfworld.install import alfworld_logic_files
from progpo_envs.alfworld.scenes import (
    ACTION_CLASS,
    APPLIANCE,
    DIFFICULTIES,
    LAMP_RECEPTACLES,
    VALID_FLOOR_PLANS,
    AlfredLib,
    Difficulty,
    Scene,
    class_of,
    load_scene,
    loc_id,
    pddl_id,
)
from progpo_envs.alfworld.tasks import TASK_TYPES

#: floor plans held out for the ``valid`` split of the default set (unseen scenes).


@dataclass
class GameSpec:
    """One sampled game before it is written: targets, placements, agent start."""

    scene: Scene
    task_type: str
    object_target: str
    parent_target: str  # receptacle class ("" for look_at_obj_in_light)
    toggle_target: str  # "DeskLamp" for look_at_obj_in_light else ""
    placements: dict[str, str] = field(default_factory=dict)  # object THOR id -> receptacle THOR id
    start: tuple[float, float, int, int] = (0.0, 0.0, 0, 30)
    sentence: str = ""


def _receptacle_classes(scene: Scene) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for rid in scene.receptacles:
        out.setdefault(class_of(rid), []).append(rid)
    return out


def _trim_scene(
    lib: AlfredLib, scene: Scene, task_type: str, obj: str, parent: str, limit: int, rng: random.Random
) -> Scene:
    """A copy of ``scene`` with at most ``limit`` receptacles, keeping what the task needs.

    Kept first: one receptacle of the goal class, the task's appliance, a desk-lamp holder (look
    tasks) and an open holder of the target object other than the goal class; then random others.
    """
    by_class = _receptacle_classes(scene)
    keep: list[str] = []

    def add(classes: Sequence[str]) -> None:
        pool = [r for cls in classes for r in by_class.get(cls, ()) if r not in keep]
        if pool:
            keep.append(rng.choice(sorted(pool)))

    for cls in (parent, APPLIANCE.get(task_type, "")):
        if cls:
            add([cls])
    if task_type == "look_at_obj_in_light":
        add([r for r in LAMP_RECEPTACLES if r in by_class])
    avoid = {parent, APPLIANCE.get(task_type, "")}
    holders = [h for h in lib.holders(obj, by_class) if h not in avoid]
    add([h for h in holders if h not in lib.c.OPENABLE_CLASS_SET] or holders)
    rest = sorted(r for r in scene.receptacles if r not in keep)
    rng.shuffle(rest)
    keep += rest[: max(limit - len(keep), 0)]
    return Scene(scene.floor_plan, scene.classes, {r: scene.receptacles[r] for r in sorted(keep)}, scene.points)


def _target_choices(
    lib: AlfredLib, scene: Scene, task_type: str, by_class: dict[str, list[str]], present_r: list[str], objs: list[str]
) -> tuple[str, list[tuple[str, str]]] | None:
    """The toggle object and the (target, goal receptacle) pairs the scene can host for
    ``task_type``; None where it lacks the lamp or the appliance the task needs."""
    if task_type == "look_at_obj_in_light":
        if "DeskLamp" not in scene.classes or not any(r in by_class for r in LAMP_RECEPTACLES):
            return None
        return "DeskLamp", [(o, "") for o in objs if lib.holders(o, present_r)]
    appliance = APPLIANCE.get(task_type)
    if appliance and appliance not in by_class:
        return None
    allowed = lib.c.VAL_ACTION_OBJECTS[ACTION_CLASS[task_type]] if task_type in ACTION_CLASS else None
    choices: list[tuple[str, str]] = []
    for o in objs:
        if allowed is not None and o not in allowed:
            continue
        holders = [r for r in lib.holders(o, present_r) if r != appliance]
        for r in holders:
            # the target object must start somewhere else than a receptacle of the goal's class
            if [h for h in holders if h != r]:
                choices.append((o, r))
    return "", choices


def sample_game(lib: AlfredLib, scene: Scene, task_type: str, diff: Difficulty, rng: random.Random) -> GameSpec | None:
    """Sample a feasible game of ``task_type`` in ``scene`` (None when the scene cannot host it)."""
    c = lib.c
    by_class = _receptacle_classes(scene)
    present_r = sorted(by_class)
    objs = sorted(set(scene.classes) & lib.pickupable)
    hosted = _target_choices(lib, scene, task_type, by_class, present_r, objs)
    if hosted is None:
        return None
    toggle, choices = hosted
    if not choices:
        return None
    obj, parent = rng.choice(choices)
    if diff.max_receptacles:
        scene = _trim_scene(lib, scene, task_type, obj, parent, diff.max_receptacles, rng)
        by_class = _receptacle_classes(scene)
        present_r = sorted(by_class)
    spec = GameSpec(scene, task_type, obj, parent, toggle)

    # which object classes are present: the target + a share of the others
    others = [o for o in objs if o != obj and lib.holders(o, present_r)]
    k = round(len(others) * diff.distractor_fraction)
    present = [obj] + sorted(rng.sample(others, k))
    avoid = {parent, APPLIANCE.get(task_type, "")}
    for cls in present:
        low = 2 if (cls == obj and task_type == "pick_two_obj_and_place") else 1
        n = rng.randint(low, max(low, diff.max_instances))
        holders = lib.holders(cls, present_r)
        if cls == obj:
            holders = [h for h in holders if h not in avoid]
        if not holders:
            continue
        closed = [h for h in holders if h in c.OPENABLE_CLASS_SET]
        in_view = [h for h in holders if h not in c.OPENABLE_CLASS_SET]
        for _ in range(n):
            pool = closed if (cls == obj and closed and rng.random() < diff.hidden) else holders
            if cls == obj and diff.hidden == 0.0 and in_view:
                pool = in_view  # never hidden: the target is seen on arrival
            rid = rng.choice(by_class[rng.choice(pool)])
            x, _, z = (float(v) for v in rid.split("|")[1:4])
            thor = "%s|%+06.2f|%+06.2f|%+06.2f" % (
                cls,
                x + rng.uniform(-0.3, 0.3),
                rng.uniform(0.0, 2.0),
                z + rng.uniform(-0.3, 0.3),
            )
            if thor not in spec.placements:
                spec.placements[thor] = rid
    if toggle:
        lamp_holders = [r for r in LAMP_RECEPTACLES if r in by_class]
        rid = rng.choice(by_class[rng.choice(lamp_holders)])
        x, _, z = (float(v) for v in rid.split("|")[1:4])
        spec.placements["DeskLamp|%+06.2f|%+06.2f|%+06.2f" % (x, 0.9, z)] = rid

    # agent start: a reachable point that is not a receptacle pose
    taken = {(p[0], p[1]) for p in scene.receptacles.values()}
    free = [p for p in scene.points if p not in taken] or scene.points
    if diff.far_start:
        targets = [scene.receptacles[r][:2] for o, r in spec.placements.items() if class_of(o) == obj]
        x, z = max(free, key=lambda p: (min(abs(p[0] - t[0]) + abs(p[1] - t[1]) for t in targets), p))
    else:
        x, z = rng.choice(free)
    spec.start = (x, z, rng.randrange(4) * 90, 30)

    template = rng.choice(lib.goals[task_type]["templates"])
    spec.sentence = template.format(obj=obj.lower(), recep=parent.lower(), toggle=toggle.lower(), mrecep="")
    return spec


def render_problem(lib: AlfredLib, spec: GameSpec, name: str) -> str:
    """The PDDL problem of ``spec`` in the layout of ALFRED's ``state_to_pddl``."""
    c = lib.c
    scene = spec.scene
    rec_ids = {r: pddl_id(r) for r in sorted(scene.receptacles)}
    obj_ids = {o: pddl_id(o) for o in sorted(spec.placements)}
    rec_loc = {r: loc_id(scene.receptacles[r]) for r in rec_ids}
    start = loc_id(spec.start)
    locations = sorted(set(rec_loc.values()) | {start})
    obj_classes = sorted({class_of(o) for o in obj_ids})
    rec_classes = sorted({class_of(r) for r in rec_ids})
    facts: list[str] = []
    for r, pid in rec_ids.items():
        cls = class_of(r)
        facts.append(f"(receptacleType {pid} {cls}Type)")
        if cls in c.OPENABLE_CLASS_SET:
            facts.append(f"(openable {pid})")
        facts.append(f"(receptacleAtLocation {pid} {rec_loc[r]})")
    facts.append(f"(atLocation agent1 {start})")
    for o, pid in obj_ids.items():
        cls = class_of(o)
        facts.append(f"(objectType {pid} {cls}Type)")
        if cls in lib.pickupable:
            facts.append(f"(pickupable {pid})")
        if cls in c.MOVABLE_RECEPTACLES_SET:
            facts.append(f"(isReceptacleObject {pid})")
        for flag, group in (
            ("cleanable", "Cleanable"),
            ("heatable", "Heatable"),
            ("coolable", "Coolable"),
            ("sliceable", "Sliceable"),
        ):
            if cls in c.VAL_ACTION_OBJECTS[group]:
                facts.append(f"({flag} {pid})")
        if cls == spec.toggle_target:
            facts.append(f"(toggleable {pid})")
        facts.append(f"(inReceptacle {pid} {rec_ids[spec.placements[o]]})")
        facts.append(f"(objectAtLocation {pid} {rec_loc[spec.placements[o]]})")
    for rc in rec_classes:
        for oc in obj_classes:
            if oc in c.VAL_RECEPTACLE_OBJECTS.get(rc, ()):
                facts.append(f"(canContain {rc}Type {oc}Type)")
    goal = lib.goals[spec.task_type]["pddl"].format(
        obj=spec.object_target, recep=spec.parent_target, toggle=spec.toggle_target, mrecep=""
    )
    goal = goal.replace("#", "-")
    objects = (
        ["agent1 - agent"]
        + [f"{t}Type - otype" for t in lib.otypes]
        + [f"{t}Type - rtype" for t in lib.rtypes]
        + [f"{p} - object" for p in obj_ids.values()]
        + [f"{p} - receptacle" for p in rec_ids.values()]
        + [f"{loc} - location" for loc in locations]
    )
    sep = "\n        "
    return (
        f"\n(define (problem plan_{name})\n(:domain alfred)\n(:objects\n        {sep.join(objects)}\n        )\n"
        f"(:init\n        {sep.join(facts)}\n        )\n{goal}"
    )


def scene_number(floor_plan: str) -> int:
    return int(floor_plan[len("FloorPlan") :])


def build_game(
    lib: AlfredLib, spec: GameSpec, trial: str, domain: str, grammar: str
) -> tuple[str, dict[str, Any], dict[str, Any]]:
    """(task folder name, game.tw-pddl content, traj_data.json content) of ``spec``."""
    folder = f"{spec.task_type}-{spec.object_target}-None-{spec.parent_target or spec.toggle_target}-{scene_number(spec.scene.floor_plan)}"
    game = {
        "pddl_domain": domain,
        "grammar": grammar.replace("UNKNOWN GOAL", spec.sentence),
        "pddl_problem": render_problem(lib, spec, trial),
        "solvable": None,
        "walkthrough": None,
    }
    traj = {
        "task_id": trial,
        "task_type": spec.task_type,
        "pddl_params": {
            "object_target": spec.object_target,
            "parent_target": spec.parent_target,
            "toggle_target": spec.toggle_target,
            "mrecep_target": "",
            "object_sliced": False,
        },
        "scene": {"floor_plan": spec.scene.floor_plan, "scene_num": scene_number(spec.scene.floor_plan)},
        "turk_annotations": {
            "anns": [{"task_desc": spec.sentence, "high_descs": [], "assignment_id": "progpo-generated"}]
        },
    }
    return folder, game, traj


def validate(engine: Any, game: dict[str, Any]) -> list[str]:
    """Play ``game`` in the real engine: not won at reset, won by the expert. Returns the walkthrough."""
    engine.load(game)
    engine.reset()
    if engine.won:
        raise ExpertError("goal already satisfied at reset")
    plan = solve(engine)
    # replay from a fresh reset: the stored walkthrough alone must win
    engine.reset()
    for cmd in plan:
        _, valid = engine.step(cmd)
        if not valid:
            raise ExpertError(f"walkthrough command {cmd!r} not admissible on replay")
    if not engine.won:
        raise ExpertError("walkthrough does not win on replay")
    return plan


@dataclass
class GeneratedGame:
    split: str
    task_folder: str
    trial: str
    game: dict[str, Any]
    traj: dict[str, Any]
    difficulty: str

    @property
    def task_id(self) -> str:
        return f"{self.task_folder}/{self.trial}"


def generate_games(
    split: str,
    per_type: int,
    seed: int,
    difficulty: str = "normal",
    floor_plans: Sequence[str] | None = None,
    task_types: Sequence[str] = TASK_TYPES,
    engine: Any = None,
    log: Any = None,
) -> list[GeneratedGame]:
    """Generate ``per_type`` validated games of each task type (deterministic in ``seed``)."""
    lib = AlfredLib()
    diff = DIFFICULTIES[difficulty]
    domain, grammar = alfworld_logic_files()
    plans = list(floor_plans) if floor_plans else lib.floor_plans()
    if not plans:
        raise ValueError("no floor plans to generate from")
    engine = engine or make_engine(fast=True)
    out: list[GeneratedGame] = []
    for t_idx, task_type in enumerate(task_types):
        rng = random.Random(f"{seed}/{split}/{difficulty}/{task_type}")
        kept, attempts = 0, 0
        while kept < per_type:
            attempts += 1
            if attempts > 50 * per_type + 50:
                raise RuntimeError(f"could not generate {per_type} {task_type} games from {len(plans)} floor plans")
            fp = rng.choice(plans)
            scene = load_scene(lib, fp, random.Random(f"{seed}/{fp}"))
            spec = sample_game(lib, scene, task_type, diff, rng)
            if spec is None:
                continue
            trial = f"trial_G{seed}_{split}_{t_idx}{kept:04d}"
            folder, game, traj = build_game(lib, spec, trial, domain, grammar)
            try:
                plan = validate(engine, game)
            except ExpertError as exc:
                if log:
                    log(f"rejected {folder}: {exc}")
                continue
            game["walkthrough"] = plan
            game["solvable"] = True
            out.append(GeneratedGame(split, folder, trial, game, traj, difficulty))
            kept += 1
            if log:
                log(f"[{split}] {folder}/{trial}: won in {len(plan)} steps")
    return out


def write_games(games: Iterable[GeneratedGame], out: Path) -> list[Path]:
    """Write games in the original layout under ``out/json_2.1.1``; returns the game file paths."""
    paths = []
    for g in games:
        d = Path(out) / "json_2.1.1" / g.split / g.task_folder / g.trial
        d.mkdir(parents=True, exist_ok=True)
        (d / "game.tw-pddl").write_text(json.dumps(g.game))
        (d / "traj_data.json").write_text(json.dumps(g.traj))
        paths.append(d / "game.tw-pddl")
    return paths


#: the default (embedded) set: split -> (difficulty, games per type, floor-plan filter)
DEFAULT_SET = {
    "train": ("normal", 24, "train"),
    "valid": ("normal", 6, "valid"),
    "hard": ("hard", 6, "all"),
    # the CPU learning demo's splits: small rooms, nothing hidden; valid on held-out floor plans
    "easy-train": ("easy", 24, "train"),
    "easy-valid": ("easy", 6, "valid"),
}
DEFAULT_SEED = 20261130


def build_default_set(archive: Path, seed: int = DEFAULT_SEED, log: Any = print) -> Path:
    """Generate, validate and pack the embedded default set into ``archive`` (.json.xz)."""
    lib = AlfredLib()
    every = lib.floor_plans()
    games: list[GeneratedGame] = []
    for split, (difficulty, per_type, which) in DEFAULT_SET.items():
        plans = {
            "train": [p for p in every if p not in VALID_FLOOR_PLANS],
            "valid": [p for p in every if p in VALID_FLOOR_PLANS],
            "all": every,
        }[which]
        games += generate_games(split, per_type, seed, difficulty, plans, log=log)
    return pack_games(games, archive, seed=seed)


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m progpo_envs.alfworld.generate", description=__doc__.split("\n\n")[0])
    p.add_argument("--out", type=Path, help="output root (gets json_2.1.1/<split>/...)")
    p.add_argument("--per-type", type=int, default=2, help="games per task type (default 2)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--split", default="train", help="split folder name (default train)")
    p.add_argument("--difficulty", choices=sorted(DIFFICULTIES), default="normal")
    p.add_argument("--task-types", nargs="*", choices=TASK_TYPES, default=list(TASK_TYPES))
    p.add_argument("--floor-plans", nargs="*", help="e.g. FloorPlan1 FloorPlan301 (default: all in the wheel)")
    p.add_argument("--build-default", action="store_true", help="rebuild the embedded default set archive")
    p.add_argument("--archive", type=Path, default=Path(__file__).parent / "data" / "generated_games.json.xz")
    p.add_argument("-q", "--quiet", action="store_true")
    args = p.parse_args(argv)
    log = None if args.quiet else (lambda m: print(m, file=sys.stderr, flush=True))
    t0 = time.time()
    if args.build_default:
        path = build_default_set(args.archive, log=log or (lambda m: None))
        print(f"wrote {path} ({os.path.getsize(path)} bytes) in {time.time() - t0:.0f} s")
        return 0
    if args.out is None:
        p.error("--out is required (or --build-default)")
    games = generate_games(
        args.split, args.per_type, args.seed, args.difficulty, args.floor_plans, args.task_types, log=log
    )
    paths = write_games(games, args.out)
    print(f"wrote {len(paths)} games under {args.out / 'json_2.1.1' / args.split} in {time.time() - t0:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
