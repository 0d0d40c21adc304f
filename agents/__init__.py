"""LLM policies for ProGPO: prompts, action parsing, generation backends."""
