"""Env-agnostic Gymnasium wrappers exposing the ProGPO signals.

Depends on gymnasium and numpy only (no torch, TextWorld or Flask).
"""
