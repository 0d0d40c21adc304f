"""A vector env of B groups x G members where the members of a group always play the same task.

Layout: member ``i`` belongs to group ``i // group_size``; ``num_envs = num_groups * group_size``.

Task schedule. The k-th task (episode) of group g is reset with the seed
``GroupSeedSchedule.seed_for(g, k)``, a pure function of the vector seed: all G members of
a group get the same seed (and the same ``options``), so envs that pick their task from the
seed (ALFWorld, WebShop, ``TextRoomsEnv``) give the group one task. The same vector seed
gives the same schedule, whatever the order in which groups finish.

Autoreset mode: "group wait" (``metadata["autoreset_mode"] = AutoresetMode.SAME_STEP`` at
group level, ``metadata["group_autoreset"] = "wait"``):

1. A member whose episode ends returns its real last transition (``terminated`` /
   ``truncated`` True, the final obs in ``obs`` and in ``infos["final_obs"]``, its step info in
   ``infos["final_info"]``) and then **waits**.
2. While it waits its steps are no-ops: the action is ignored (pass anything, e.g. ``None``),
   the obs is its final obs, reward 0, terminated/truncated False, ``infos["waiting"]`` True.
   Waiting steps are not transitions: drop them from your rollout buffer.
3. On the step where the last member of the group finishes, every member of the group gets
   ``infos["group_id"]``, ``infos["group_outcomes"]`` (the G outcomes, member order; the
   outcome is ``info["outcome"]`` of the final step when the env gives it, else the final
   reward) and ``infos["group_all_failed"]`` (all outcomes < ``tau_r``). In the **same step**
   the whole group resets to its next scheduled task: ``obs`` holds the new first
   observations, ``infos`` (top level) the reset infos with ``infos["group_reset"]`` and
   ``infos["task_seed"]``; the finishing member's last obs/info are in ``final_obs`` /
   ``final_info`` (as in Gymnasium's SAME_STEP mode).
4. With ``autoreset=False`` (``metadata["group_autoreset"] = "hold"``) step 3 emits the flags but
   does not reset: the finished group keeps waiting on its final observations until
   ``reset()``, so each group plays exactly one task per rollout batch.

Failures (the contract, both backends). No member's transition is ever lost:

* **Member exception**: a member whose ``step`` raises is reported like a crashed worker:
  ``truncated`` True, reward 0, its last observation, ``infos["worker_error"]`` = the exception
  type and message; the other members' results are returned as usual. Its env is kept and
  reset with its group. If that group **autoreset** raises, the step still returns every
  member's transition and the group's flags; its members keep their final obs, with
  ``infos["worker_error"]`` = ``"reset failed: ..."`` and ``infos["group_reset"]`` False, and the
  next ``step()`` retries the same task first (those members' actions are then ignored and
  they get their new first obs, ``waiting`` True). A second failure raises
  :class:`MemberError` with one line. An exception in ``reset()`` itself raises
  :class:`MemberError`.
* **Worker crash** (async, ray): the worker (Ray actor) is restarted; that member is truncated with
  ``infos["worker_restarted"]`` True and ``infos["worker_error"]`` saying why.
* **Hang**: a step that runs past ``step_timeout`` is treated as a crash: async / ray kill and
  restart the worker; sync interrupts the step with ``SIGALRM`` where it can (main thread,
  Unix, no other alarm set; code stuck in a C call is only interrupted when the call returns)
  and rebuilds the env. The default, ``"auto"``, is the env's ``metadata["step_timeout"]`` when
  it declares one, else :data:`DEFAULT_STEP_TIMEOUT` (600 s); ``None`` waits forever.
* **Unsendable action** (async, ray): every action is serialized before any is sent; one that
  cannot be pickled raises :class:`~wrappers.group.member_pools.UnsentActionError` (a ``TypeError``)
  and no member moves: call ``step`` again.
* **Closed**: after ``close()`` every ``step()`` / ``reset()`` raises ``RuntimeError``; no
  worker is started again.
* **Interrupted step** (``KeyboardInterrupt`` or another error escaping ``step`` part-way): some
  members may have moved, so the env refuses further steps until ``reset()``, which first
  drains every unread worker answer.

:attr:`GroupVectorEnv.worker_restarts` and :attr:`GroupVectorEnv.member_errors` count restarts
and failed member steps since creation (a trainer logs their increase per rollout).

Infos are Gymnasium 1.x dict-of-arrays with ``_key`` masks. A key whose values share one scalar
type (or one array shape) gets an array of that dtype; values whose types differ between members
or steps (an int on one page, ``None`` on another, a str, a dict) give an object array holding each
value as it is, never an error. ``infos["waiting"]`` and
``infos["worker_restarted"]`` are present on every step for every member.

Text observations: the batched observation is a ``tuple`` of ``num_envs`` strings (what
``gymnasium.vector.utils.concatenate`` gives for ``Text`` spaces); Text actions are passed as a
list/tuple of ``num_envs`` strings. Array observations are stacked into one ``np.ndarray``.

Example:
    >>> from progpo_envs.rooms import TextRoomsEnv
    >>> envs = GroupVectorEnv(TextRoomsEnv, num_groups=2, group_size=3, seed=7)
    >>> obs, infos = envs.reset()
    >>> len(obs), obs[0] == obs[1] == obs[2]
    (6, True)
    >>> obs, rewards, terminated, truncated, infos = envs.step(["look"] * 6)
    >>> infos["waiting"].tolist()
    [False, False, False, False, False, False]
    >>> envs.close()
"""

from __future__ import annotations

from wrappers.group.vector_env import DEFAULT_STEP_TIMEOUT, GroupSeedSchedule, GroupVectorEnv

__all__ = ["DEFAULT_STEP_TIMEOUT", "GroupSeedSchedule", "GroupVectorEnv"]
