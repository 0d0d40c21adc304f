"""ProGPO-WebShop-v0 in text mode: API, page flow, action grammar, paging, bad input."""

from __future__ import annotations

import gymnasium as gym
import pytest
from gymnasium.utils.env_checker import check_env
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import progpo_envs  # noqa: F401  (registers the ids)
from progpo_envs.webshop.data import WebShopDataError
from progpo_envs.webshop.env import WebShopEnv

INFO_KEYS = {
    "admissible_commands",
    "available_actions",
    "task_id",
    "task_type",
    "goal",
    "won",
    "valid_action",
    "step",
    "page",
    "state",
    "outcome",
    "instruction",
}


def test_gym_make_default_works_offline_and_passes_check_env():
    env = gym.make("ProGPO-WebShop-v0")
    obs, info = env.reset(seed=0)
    assert obs.startswith("WebShop [SEP] Instruction: [SEP] ") and obs.endswith(" [SEP] Search")
    assert INFO_KEYS <= set(info)
    assert info["task_id"] >= 500  # default split is train
    check_env(env.unwrapped, skip_render_check=True)
    env.close()


def test_reset_seed_picks_goal_deterministically(ws_shop):
    a = WebShopEnv(shop=ws_shop, split="test")
    b = WebShopEnv(shop=ws_shop, split="test")
    ids = []
    for seed in range(20):
        oa, ia = a.reset(seed=seed)
        ob, ib = b.reset(seed=seed)
        assert (oa, ia["task_id"]) == (ob, ib["task_id"])
        assert 0 <= ia["task_id"] < 500
        ids.append(ia["task_id"])
    assert len(set(ids)) > 10  # seeds spread over the split
    obs, info = a.reset(seed=1, options={"goal_index": 7})
    assert info["task_id"] == 7
    assert info["goal"]["instruction_text"] == ws_shop.goals[7]["instruction_text"]
    assert info["goal"]["instruction_text"] in obs
    with pytest.raises(ValueError, match="out of range"):
        a.reset(options={"goal_index": 10**9})
    with pytest.raises(ValueError, match="split"):
        WebShopEnv(shop=ws_shop, split="valid")


def test_goal_info_exposes_what_an_oracle_needs(ws_env):
    _, info = ws_env.reset(seed=3)
    goal = info["goal"]
    assert set(goal) >= {"asin", "instruction_text", "attributes", "goal_options", "price_upper"}
    assert info["task_type"] == goal["category"]
    goal["attributes"].append("mutated")  # info is a copy, not the catalog's goal
    assert "mutated" not in ws_env.shop.goals[info["task_id"]]["attributes"]


@pytest.mark.parametrize("goal_index", [0, 1, 2, 17, 600])
def test_scripted_oracle_buys_the_goal_and_scores_1(ws_env, ws_oracle, goal_index):
    _, info = ws_env.reset(options={"goal_index": goal_index})
    taken = ws_oracle(ws_env, info)
    # replay the oracle's actions to inspect every step
    _, info = ws_env.reset(options={"goal_index": goal_index})
    for a in taken[:-1]:
        obs, reward, term, trunc, info = ws_env.step(a)
        assert reward == 0.0 and not term
    obs, reward, term, trunc, info = ws_env.step(taken[-1])
    assert term and not trunc and reward == 1.0 and info["won"] and info["outcome"] == 1.0
    assert info["page"] == "done" and obs.startswith("Thank you for shopping with us!")
    assert set(info["score_breakdown"]) >= {"r_type", "r_att", "r_option", "r_price"}
    # after the end: no-op, still terminated, no more reward
    obs2, reward2, term2, _, info2 = ws_env.step("click[buy now]")
    assert (obs2, reward2, term2, info2["valid_action"]) == (obs, 0.0, True, False)


def test_wrong_option_and_no_option_score_less_than_1(ws_env):
    _, info = ws_env.reset(options={"goal_index": 0})
    goal = info["goal"]
    assert goal["goal_options"], "goal 0 of the embedded catalog has options"
    _, _, _, _, info = ws_env.step(f"search[{goal['instruction_text']}]")
    for _ in range(5):
        if goal["asin"].lower() in info["available_actions"]["clickables"]:
            break
        _, _, _, _, info = ws_env.step("click[next >]")
    _, _, _, _, info = ws_env.step(f"click[{goal['asin'].lower()}]")
    assert info["state"]["options"] == {}  # nothing pre-selected
    _, reward, term, _, info = ws_env.step("click[buy now]")
    assert term and 0.0 < reward < 1.0 and not info["won"]


def test_results_paging_follows_webshop(ws_env):
    ws_env.reset(seed=0)
    obs, _, _, _, info = ws_env.step("search[size]")
    clickables = info["available_actions"]["clickables"]
    assert clickables[:2] == ["back to search", "next >"] and "< prev" not in clickables
    assert "Page 1 (Total results: 50)" in obs
    assert len(clickables) == 2 + 10
    assert info["state"] == {
        "page": "results",
        "query": "size",
        "page_num": 1,
        "asin": None,
        "options": {},
        "sub_page": None,
    }
    for page in range(2, 6):
        obs, _, _, _, info = ws_env.step("click[next >]")
        assert info["valid_action"] and f"Page {page} (Total results: 50)" in obs
        clickables = info["available_actions"]["clickables"]
        expected = ["back to search", "< prev"] + (["next >"] if page < 5 else [])
        assert clickables[: len(expected)] == expected and len(clickables) == len(expected) + 10
    # page 5 holds hits 41-50 of 50: no next page, so paging cannot mint new states
    obs, _, _, _, info = ws_env.step("click[next >]")
    assert not info["valid_action"] and info["state"]["page_num"] == 5 and "Next >" not in obs
    obs, _, _, _, info = ws_env.step("click[< prev]")
    assert info["state"]["page_num"] == 4
    # the search text is lower-cased; total counts only matching products; nothing found: no next page
    obs, _, _, _, info = ws_env.step("search[ZZZQQQ]")
    assert info["state"]["query"] == "zzzqqq" and "(Total results: 0)" in obs
    assert info["available_actions"]["clickables"] == ["back to search"]
    assert not ws_env.step("click[next >]")[4]["valid_action"]


def test_a_short_result_list_has_one_page_per_ten_hits(ws_env):
    ws_env.reset(seed=0)
    shop = ws_env.shop
    query = next(q for q in ("red", "black", "tea", "blue", "green", "pack", "size") if 10 < len(shop.search(q)) < 50)
    total = len(shop.search(query))
    obs, _, _, _, info = ws_env.step(f"search[{query}]")
    pages = 1
    while info["valid_action"]:
        obs, _, _, _, info = ws_env.step("click[next >]")
        pages += info["valid_action"]
    assert pages == -(-total // 10) and info["state"]["page_num"] == pages


def test_item_page_sub_pages_and_navigation(ws_env):
    _, info = ws_env.reset(options={"goal_index": 0})
    ws_env.step(f"search[{info['goal']['query']}]")
    obs, _, _, _, info = ws_env.step("click[next >]")
    asin = next(a for a in info["available_actions"]["clickables"][3:] if ws_env.shop.by_asin[a.upper()]["options"])
    obs, _, _, _, info = ws_env.step(f"click[{asin.upper()}]")  # argument is lower-cased
    assert info["page"] == "item" and info["state"]["asin"] == asin.upper()
    product = ws_env.shop.by_asin[asin.upper()]
    assert "Rating: N.A." in obs and obs.endswith("Description [SEP] Features [SEP] Reviews [SEP] Buy Now")
    assert info["available_actions"]["clickables"][:6] == [
        "back to search",
        "< prev",
        "description",
        "features",
        "reviews",
        "buy now",
    ]
    name, values = next(iter(product["options"].items()))
    _, _, _, _, info = ws_env.step(f"click[{values[-1]}]")
    assert info["state"]["options"] == {name: values[-1]}
    obs, _, _, _, info = ws_env.step("click[reviews]")
    assert info["page"] == "sub-page" and obs.endswith("Back to Search [SEP] < Prev")  # no reviews
    obs, _, _, _, info = ws_env.step("click[features]")
    assert not info["valid_action"]  # not a clickable of a sub-page
    obs, _, _, _, info = ws_env.step("click[< prev]")
    assert info["page"] == "item" and info["state"]["options"] == {name: values[-1]}  # kept
    obs, _, _, _, info = ws_env.step("click[description]")
    assert obs.endswith(product["Description"].strip())
    ws_env.step("click[< prev]")
    obs, _, _, _, info = ws_env.step("click[< prev]")  # item -> its results page, options cleared
    assert info["state"]["page"] == "results" and info["state"]["page_num"] == 2
    assert info["state"]["options"] == {}
    obs, _, _, _, info = ws_env.step(f"click[{asin}]")
    obs, _, _, _, info = ws_env.step("search[hat]")  # search works from any page
    assert info["valid_action"] and info["page"] == "results"
    obs, _, _, _, info = ws_env.step("click[back to search]")
    assert info["page"] == "search" and info["admissible_commands"] == ["search[<query>]"]


def test_invalid_actions_are_noops(ws_env):
    obs0, info0 = ws_env.reset(seed=5)
    for action in [
        "click[search]",
        "click[next >]",
        "click[buy now]",
        "search[]",
        "search",
        "click[",
        "",
        "  ",
        "buy[now]",
        "Search[x]",
        "click[x]y",
        "search[a\nb]",
        "x" * (1 << 20),
        "search[" + "a" * (1 << 20) + "]",
        "\udcff",
        "search[\udcff]",
        "é[ü]",
        "[]",
        "[x]",
        None,
        123,
        b"search[x]",
    ]:
        obs, reward, term, trunc, info = ws_env.step(action)
        assert (obs, reward, term, info["valid_action"], info["page"]) == (obs0, 0.0, False, False, "search")


def test_truncates_at_step_limit(ws_shop):
    env = WebShopEnv(shop=ws_shop, max_episode_steps=3)
    env.reset(seed=0)
    assert env.step("search[a]")[3] is False
    assert env.step("look")[3] is False
    _, _, term, trunc, info = env.step("search[b]")
    assert trunc and not term and info["step"] == 3


def test_bad_data_dir_fails_at_make_with_one_clear_error(tmp_path):
    with pytest.raises(WebShopDataError):
        gym.make("ProGPO-WebShop-v0", data_dir=str(tmp_path / "missing"))
    (tmp_path / "items_shuffle_1000.json").write_text("{not json")
    (tmp_path / "items_ins_v2_1000.json").write_text("{}")
    with pytest.raises(WebShopDataError):
        gym.make("ProGPO-WebShop-v0", data_dir=str(tmp_path))
    with pytest.raises(ValueError, match="mode"):
        WebShopEnv(mode="html")


_GARBAGE = st.one_of(
    st.text(max_size=60),
    st.builds(lambda s: f"click[{s}", st.text(max_size=20)),
    st.builds(lambda s: f"click[{s}]", st.text(max_size=20)),
    st.builds(lambda s: f"search[{s}]", st.text(max_size=30)),
    st.sampled_from(["search[]", "click[]", "click[[]]", "[", "]", "][", "search]x[", "click[buy now"]),
    st.binary(max_size=30).map(lambda b: b.decode("latin-1")),
)


@pytest.mark.slow
@settings(max_examples=2000, deadline=None, suppress_health_check=list(HealthCheck), database=None)
@given(action=_GARBAGE)
def test_fuzz_garbage_actions_never_crash(ws_shop, action):
    env = _fuzz_env(ws_shop)
    obs, reward, term, trunc, info = env.step(action)
    assert isinstance(obs, str) and env.observation_space.contains(obs)
    assert isinstance(info["valid_action"], bool)
    if info["valid_action"]:
        assert action.strip().startswith(("search[", "click["))
    else:
        assert reward == 0.0
    if term or trunc:
        env.reset()


_FUZZ: dict[int, WebShopEnv] = {}


def _fuzz_env(shop) -> WebShopEnv:
    env = _FUZZ.get(id(shop))
    if env is None:
        env = _FUZZ[id(shop)] = WebShopEnv(shop=shop, max_episode_steps=50)
        env.reset(seed=0)
    return env


def test_original_files_and_embedded_catalog_play_the_same(tmp_path):
    from progpo_envs.webshop.catalog_gen import write_catalog

    write_catalog(tmp_path, num_products=200, seed=0)
    from_files = WebShopEnv(data_dir=str(tmp_path), num_products=200, split="all")
    embedded = WebShopEnv(num_products=200, split="all")
    assert from_files.shop is not embedded.shop
    for seed in range(3):
        a, ia = from_files.reset(seed=seed)
        b, ib = embedded.reset(seed=seed)
        assert a == b and ia["goal"] == ib["goal"]
        for action in ["search[" + ia["goal"]["query"] + "]", "click[next >]"]:
            assert from_files.step(action)[0] == embedded.step(action)[0]


def test_envs_share_one_shop_per_catalog():
    a = gym.make("ProGPO-WebShop-v0", num_products=300)
    b = gym.make("ProGPO-WebShop-v0", num_products=300)
    c = gym.make("ProGPO-WebShop-v0", num_products=300, seed=1)
    assert a.unwrapped.shop is b.unwrapped.shop and c.unwrapped.shop is not a.unwrapped.shop


def test_coverage_repeated_search_revisits_and_invalid_clicks_are_not_new(ws_env):
    """First-visit coverage on WebShop: a repeated search, a page seen before, a rejected click."""
    from progpo_envs.webshop.canonical import canonicalize_webshop
    from wrappers import CanonicalizeObservation, FirstVisitCoverage

    env = FirstVisitCoverage(CanonicalizeObservation(ws_env, canonicalize_webshop))
    _, info = env.reset(options={"goal_index": 0})
    query = info["goal"]["query"]

    def go(action):
        return env.step(action)[4]

    first = go(f"search[{query}]")
    assert first["first_visit"] is True and first["coverage"] == 1
    for again in (f"search[{query}]", f"search[  {query.upper()} ]"):  # the same search: same results page
        info = go(again)
        assert info["first_visit"] is False and info["canonical_obs"] == first["canonical_obs"]
    assert go("click[next >]")["first_visit"] is True
    info = go("click[< prev]")
    assert info["first_visit"] is False  # back to page 1
    asin = next(a for a in info["available_actions"]["clickables"] if a not in ("back to search", "next >", "< prev"))
    assert go(f"click[{asin}]")["first_visit"] is True
    assert go("click[description]")["first_visit"] is True
    assert go("click[< prev]")["first_visit"] is False  # the item page again
    assert go("click[< prev]")["first_visit"] is False  # its results page again
    assert go("click[back to search]")["first_visit"] is False  # the reset page
    assert go(f"search[{query}]")["first_visit"] is False
    for bad in ("click[no such button]", "look", "click[buy now]"):  # rejected here: never new
        info = go(bad)
        assert info["valid_action"] is False and info["first_visit"] is False
        assert info["canonical_obs"] == first["canonical_obs"]
    assert env.coverage == 4  # results pages 1 and 2, the item, its description
