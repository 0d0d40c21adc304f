"""Fixtures for the WebShop data / goals / reward tests."""

from __future__ import annotations

import pytest

from progpo_envs.webshop.data import Catalog, load_catalog


@pytest.fixture(scope="session")
def catalog_1k() -> Catalog:
    """The embedded 1,000-product catalog, seed 0 (generated once per session)."""
    return load_catalog(num_products=1000, seed=0)


@pytest.fixture(autouse=True)
def _no_webshop_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """Tests choose their data source explicitly: ignore a WEBSHOP_DATA set by the user."""
    monkeypatch.delenv("WEBSHOP_DATA", raising=False)
