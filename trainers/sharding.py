"""Rollouts of group shards: a light summary to send between ranks, and the merge of several.

Rank r of a multi-process run plays a contiguous block of the iteration's groups
(:func:`trainers.distributed.shard_groups`). Rank 0 merges every rank's summary, in rank order,
into the rollout a single process would have collected over all the groups, and computes the
iteration's metrics on it (:func:`trainers.runs.metrics.rollout_metrics` reads only what a summary
keeps).

>>> from trainers.rollouts.rollout import Rollout, StepRecord, Trajectory
>>> def shard(n):
...     return Rollout(steps=[StepRecord(0, 0, object(), "a", "b", True, 0.0, True, "go")],
...                    trajectories=[Trajectory(0, 0, "t", "x", outcome=n)], seconds=n, response_tokens=2)
>>> rollout = merge_rollouts([rollout_summary(shard(1.0)), rollout_summary(shard(2.0))])
>>> [t.group for t in rollout.trajectories], [s.traj for s in rollout.steps], rollout.steps[0].output, rollout.seconds, rollout.response_tokens
([0, 1], [0, 1], None, 2.0, 4)
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from trainers.rollouts.rollout import Rollout

__all__ = ["merge_rollouts", "rollout_summary", "select_groups"]


def rollout_summary(rollout: Rollout) -> Rollout:
    """``rollout`` without the policy outputs (token ids, log-probs): what metrics need, cheap to pickle."""
    return dataclasses.replace(
        rollout,
        steps=[dataclasses.replace(s, output=None) for s in rollout.steps],
        trajectories=[dataclasses.replace(t) for t in rollout.trajectories],
    )


def merge_rollouts(parts: Sequence[Rollout]) -> Rollout:
    """One rollout from shards in order: trajectory, group and member indices shifted past the
    previous shards'; ``seconds`` / ``policy_seconds`` / ``env_seconds`` are the slowest shard's
    (shards run in parallel), ``response_tokens`` the sum."""
    out = Rollout()
    groups = members = 0
    for part in parts:
        base = len(out.trajectories)
        out.trajectories += [
            dataclasses.replace(t, group=t.group + groups, member=t.member + members) for t in part.trajectories
        ]
        out.rows += [(traj + base, i + len(out.steps)) for traj, i in part.rows]
        out.steps += [dataclasses.replace(s, traj=s.traj + base) for s in part.steps]
        groups += max((t.group for t in part.trajectories), default=-1) + 1
        members += len(part.trajectories)
        out.response_tokens += part.response_tokens
        out.seconds = max(out.seconds, part.seconds)
        out.policy_seconds = max(out.policy_seconds, part.policy_seconds)
        out.env_seconds = max(out.env_seconds, part.env_seconds)
        out.reset_seconds = max(out.reset_seconds, part.reset_seconds)
    return out


def select_groups(rollout: Rollout, groups: Sequence[int]) -> Rollout:
    """The groups ``groups`` of ``rollout`` as a rollout of their own, in the order they were
    played: group, trajectory and member indices renumbered from 0 (groups by their rank in
    ``groups``' sorted order), each kept step once (a tree's shared prefix too) and the rows in
    their order; the times and token count are the whole rollout's (what collecting it cost),
    its tree statistics dropped.

    >>> from trainers.rollouts.rollout import Rollout, StepRecord, Trajectory
    >>> r = Rollout(steps=[StepRecord(i, 0, None, "a", "b", True, 0.0, True, "go") for i in range(3)],
    ...             trajectories=[Trajectory(g, g, "t", "x", outcome=g) for g in (0, 1, 2)])
    >>> kept = select_groups(r, [2, 0])
    >>> [(t.group, t.outcome) for t in kept.trajectories], [s.traj for s in kept.steps], kept.rows
    ([(0, 0), (1, 2)], [0, 1], [(0, 0), (1, 1)])
    """
    new_group = {g: k for k, g in enumerate(sorted(set(groups)))}
    order = [i for i, t in enumerate(rollout.trajectories) if t.group in new_group]
    new_traj = {old: k for k, old in enumerate(order)}
    trajectories = [
        dataclasses.replace(rollout.trajectories[old], group=new_group[rollout.trajectories[old].group], member=k)
        for k, old in enumerate(order)
    ]
    kept_rows = [(traj, i) for traj, i in rollout.rows if traj in new_traj]
    new_step = {old: k for k, old in enumerate(sorted({i for _, i in kept_rows}))}
    steps = [dataclasses.replace(rollout.steps[old], traj=new_traj[rollout.steps[old].traj]) for old in new_step]
    return Rollout(
        steps=steps,
        trajectories=trajectories,
        seconds=rollout.seconds,
        response_tokens=rollout.response_tokens,
        policy_seconds=rollout.policy_seconds,
        env_seconds=rollout.env_seconds,
        reset_seconds=rollout.reset_seconds,
        rows=[(new_traj[traj], new_step[i]) for traj, i in kept_rows],
    )
