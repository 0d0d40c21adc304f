"""LLM policies for ProGPO: prompts, action parsing, generation backends, models, baselines.

Modules (import what you need; nothing heavy is imported here):

* :mod:`agents.models` -- ``load_model("smollm2" | "tiny" | path)``, ``make_tiny_model``.
* :mod:`agents.prompting` -- ``build_messages`` / ``render_prompt`` over ``agents/templates/*.yaml``.
* :mod:`agents.parsing` -- ``parse_action(text, fmt)``.
* :mod:`agents.backends` -- ``SamplingConfig``, ``TransformersBackend``, ``VLLMBackend``, ``make_backend``.
* :mod:`agents.contract` -- ``Policy`` / ``TrainablePolicy`` (what playing / training needs of a
  policy) and ``StepOutput`` (one decision), with no heavy imports.
* :mod:`agents.batching` -- how decisions are grouped into forward passes (counts, token budgets).
* :mod:`agents.policy` -- ``make_policy``, ``ScorePolicy`` / ``GeneratePolicy`` (one class per mode),
  ``PolicyOptions``, ``StepOutput``.
* :mod:`agents.baselines` -- ``RandomAgent``, ``ALFWorldExpertAgent``, ``WebShopOracleAgent``.
"""

__progpo_package__ = True  # marker read by progpo_envs.guard (generic top-level name)

from progpo_envs.guard import check_import_names  # after the package marker the guard reads

check_import_names()  # one-line error if agents / wrappers / trainers is another distribution's
