"""What the engine must know about each supported masked-LM architecture, in one place.

Each :class:`Architecture` names a transformers ``*ForMaskedLM`` class and says

- how its MLM head turns hidden rows into logits: the model's own modules up to the
  vocabulary projection, then that projection's weight and bias (a :class:`Head`), so
  that scoring can run the head on the target rows only (see :mod:`pll_harness.heads`)
  and write the logits into a buffer it reuses; the encoder is always the model's
  ``base_model``;
- how many of its ``max_position_embeddings`` an input can use: fairseq-style models
  (RoBERTa and its descendants) number positions from ``pad_token_id + 1``, so their
  table holds ``pad_token_id + 1`` rows that no input reaches;
- for BERT-style, DistilBERT, ALBERT, DeBERTa-v2/v3 and ModernBERT layers, how to run the
  encoder's last layer at the target positions only (a :class:`LastLayer`): every
  position still needs its keys and values there, but queries, the attention output and
  the feed-forward block are needed at the targets alone: one position of a BLiMP copy's
  13, on average.

Adding an architecture is one entry in ``ARCHITECTURES`` plus its tiny test config in
``tests/test_architectures.py``, whose tests fail until both are right.  A model of any
other class still scores correctly (full logits, within its tokenizer's and position
table's limits), only more slowly; so does one whose class only shares a listed name
(``trust_remote_code`` code).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F

Transform = Callable[[torch.Tensor], torch.Tensor]
Projection = Callable[[], tuple[torch.Tensor, torch.Tensor | None]]


@dataclass(frozen=True)
class Head:
    """An MLM head as its two steps: ``transform`` (hidden rows to the projection's input)
    and the affine projection onto the vocabulary, ``rows @ weight.T + bias``, whose
    ``(weight, bias)`` ``projection`` returns when called (so a model moved to another
    device after the split is still read correctly).

    The steps are apart so that the transform runs once on all of a batch's targets and
    only the projection in the vocabulary-sized chunks (:mod:`pll_harness.runner`).  The
    projection is done here rather than by the model's module so that the caller can pass
    ``out``: for a small model, a fresh logits tensor for every chunk cost more than the
    projection itself (bench/README.md, "Why fresh buffers were slow").
    """

    transform: Transform
    projection: Projection

    def project(self, rows: torch.Tensor, out: torch.Tensor | None = None) -> torch.Tensor:
        """The logits of ``rows``, which ``transform`` has made; into ``out`` if given."""
        weight, bias = self.projection()
        if bias is None:
            return torch.mm(rows, weight.t(), out=out)
        return torch.addmm(bias, rows, weight.t(), out=out)


def no_offset(config: Any) -> int:
    """Position ids start at 0: every row of the position table is usable."""
    return 0


def after_padding(config: Any) -> int:
    """fairseq's convention: position ids start at ``pad_token_id + 1``."""
    return (config.pad_token_id or 0) + 1


AtTargets = Callable[[torch.Tensor, torch.Tensor, torch.Tensor], torch.Tensor]


@dataclass(frozen=True)
class LastLayer:
    """The encoder's last layer, ``module``, and ``at_targets(hidden, rows, positions)``:
    that layer's output at ``(rows, positions)`` from its input ``hidden`` [copies, length,
    width], computed with the layer's own projections, normalisations and feed-forward
    block in eval mode, and the attention done here whatever the model's attention
    implementation (written out for one query, or DeBERTa's disentangled scores):
    equal to the layer's output up to float rounding (1e-5 in
    tests/test_architectures.py).  Inputs carry no padding, so no attention mask is
    needed.  ``rows`` are non-decreasing and name every copy at least once (the runner
    makes each copy for a target), so that one target per copy is told by the count alone
    (:func:`_per_target`).

    Scoring needs the encoder's output at the targets only, and in the last layer nothing
    else depends on the other positions' outputs: for a one-layer model that is most of
    the encoder's work, for bert-base a twelfth of it (bench/README.md).
    """

    module: torch.nn.Module
    at_targets: AtTargets
    calls: int = 1
    """Which call of ``module`` in one forward pass is the last layer's, counted from 1:
    ALBERT runs one shared module for several layers."""


def every_position(model: torch.nn.Module) -> None:
    """No :class:`LastLayer`: the whole encoder runs, as in the model's own forward."""
    return None


@dataclass(frozen=True)
class Architecture:
    """One supported ``*ForMaskedLM`` class (``model_class``, as transformers names it)."""

    model_class: str
    head: Callable[[torch.nn.Module], Head]
    position_offset: Callable[[Any], int]
    last_layer: Callable[[torch.nn.Module], LastLayer | None] = every_position


def _linear(module: torch.nn.Linear) -> Projection:
    return lambda: (module.weight, module.bias)


def _bert_head(model: torch.nn.Module) -> Head:
    predictions = model.cls.predictions
    return Head(predictions.transform, _linear(predictions.decoder))


def _roberta_head(model: torch.nn.Module) -> Head:
    """RobertaLMHead and its copies (XLM-R, CamemBERT, Data2VecText, Longformer)."""
    from transformers.activations import gelu

    head = model.lm_head
    return Head(lambda x: head.layer_norm(gelu(head.dense(x))), _linear(head.decoder))


def _distilbert_head(model: torch.nn.Module) -> Head:
    def transform(hidden: torch.Tensor) -> torch.Tensor:
        return model.vocab_layer_norm(model.activation(model.vocab_transform(hidden)))

    return Head(transform, _linear(model.vocab_projector))


def _albert_head(model: torch.nn.Module) -> Head:
    head = model.predictions
    return Head(lambda x: head.LayerNorm(head.activation(head.dense(x))), _linear(head.decoder))


def _electra_head(model: torch.nn.Module) -> Head:
    return Head(model.generator_predictions, _linear(model.generator_lm_head))


def _deberta_v2_head(model: torch.nn.Module) -> Head:
    """``legacy`` checkpoints (the default, e.g. deberta-v3) keep the BERT-style ``cls``
    head; the others project onto the word embeddings, plus the head's own bias."""
    if getattr(model, "legacy", True) and hasattr(model, "cls"):
        return _bert_head(model)
    head = model.lm_predictions.lm_head
    embeddings = model.deberta.embeddings.word_embeddings
    return Head(
        lambda x: head.LayerNorm(head.transform_act_fn(head.dense(x))),
        lambda: (embeddings.weight, head.bias),
    )


def _modernbert_head(model: torch.nn.Module) -> Head:
    return Head(model.head, _linear(model.decoder))


def _attend_from_targets(
    hidden: torch.Tensor,
    rows: torch.Tensor,
    own: torch.Tensor,
    projections: tuple[torch.nn.Module, torch.nn.Module, torch.nn.Module],
    heads: int,
) -> torch.Tensor:
    """Multi-head self-attention of the targets (their input states ``own``, in rows
    ``rows`` of ``hidden``) over all positions of their row, scaled by ``head_size **
    -0.5`` like every BERT-style layer: ``[targets, width]``."""
    query, key, value = projections
    copies, length, _ = hidden.shape
    queries = query(own)
    size = queries.shape[-1] // heads

    def per_head(states: torch.Tensor) -> torch.Tensor:
        return states.view(copies, length, heads, size)

    mixed = _one_query_attention(
        queries.view(-1, heads, size), per_head(key(hidden)), per_head(value(hidden)), rows
    )
    return mixed.reshape(-1, heads * size)


def _one_query_attention(
    queries: torch.Tensor, keys: torch.Tensor, values: torch.Tensor, rows: torch.Tensor
) -> torch.Tensor:
    """Attention of one query per target and head, ``[targets, heads, size]``, over the
    keys and values of its copy, ``[copies, length, heads, size]`` (copy ``rows[t]`` for
    target t), scaled by ``size ** -0.5`` after the product as transformers' eager
    attention does (scores in the inputs' dtype, softmax in float32): ``[targets, heads,
    size]``.  In bfloat16 and float16 each product is rounded to that dtype before the
    float32 sum, where a matrix product keeps it exact: against float64 on bert-base
    shapes, the output's mean error is 1.34e-3 against 1.18e-3 (the inputs' own rounding
    dominates both).

    Each target's keys and values are its copy's (:func:`_per_target`).  With one query, the
    products are elementwise and summed rather than batched matrix products, which need
    the keys gathered per target and laid out per head first: on the CPU, float32, 2
    threads, 5,461 targets x 2 heads x 12 tokens (nano) 1.9 against 4.2 ms, 2,000 x 12 x 12
    (bert-base) 62 against 138 ms.

    Written out rather than through ``F.scaled_dot_product_attention``: for bf16 and fp16
    on an H100 (torch 2.11) that picked cuDNN's kernel, which fails with "mha_graph.execute
    ... is_good()" at 65,536 targets or more (pytorch#181235), as a batch of short
    sentences has, and builds a new graph for each new batch shape.  On the CPU the
    written-out form was faster as well, in its batched-product form already: SDPA took
    1.2-1.9x its time per call at 2,000 targets x 12 heads x 12 tokens, 20,000 x 2 x 12
    (nano) and 500 x 12 x 40, float32, 2 threads."""
    keys, values = _per_target(keys, rows), _per_target(values, rows)
    scores = (keys * queries[:, None]).sum(-1) * queries.shape[-1] ** -0.5
    weights = torch.softmax(scores, dim=1, dtype=torch.float32).to(values.dtype)
    return (values * weights[..., None]).sum(1)


def _per_target(states: torch.Tensor, rows: torch.Tensor) -> torch.Tensor:
    """``states`` [copies, ...] as one entry per target, target t's being copy ``rows[t]``'s.
    ``rows`` are non-decreasing and name every copy (:class:`LastLayer`'s contract), so as
    many targets as copies means one target per copy, in order: the states are used where
    they lie rather than gathered (a copy of keys or values as large as the layer's)."""
    return states if rows.shape[0] == states.shape[0] else states[rows]


def _bert_last_layer(model: torch.nn.Module) -> LastLayer | None:
    """BertLayer and its copies (RoBERTa, XLM-R, CamemBERT, Data2VecText, ELECTRA).
    transformers 4's relative position embeddings change the attention scores, so those
    models run in full."""
    config = model.config
    if getattr(config, "position_embedding_type", "absolute") != "absolute" or config.is_decoder:
        return None
    layer = model.base_model.encoder.layer[-1]
    attention = layer.attention.self
    projections = (attention.query, attention.key, attention.value)

    def at_targets(hidden: torch.Tensor, rows: torch.Tensor, positions: torch.Tensor):
        own = hidden[rows, positions]
        mixed = _attend_from_targets(hidden, rows, own, projections, attention.num_attention_heads)
        attended = layer.attention.output(mixed, own)
        return layer.output(layer.intermediate(attended), attended)

    return LastLayer(layer, at_targets)


def _distilbert_last_layer(model: torch.nn.Module) -> LastLayer:
    """TransformerBlock.  Its FFN's own forward chunks along dimension 1, the sequence of a
    ``[copies, length, width]`` input but the width of target rows, so the rows go to the
    unchunked ``ff_chunk``."""
    layer = model.distilbert.transformer.layer[-1]
    attention = layer.attention
    projections = (attention.q_lin, attention.k_lin, attention.v_lin)

    def at_targets(hidden: torch.Tensor, rows: torch.Tensor, positions: torch.Tensor):
        own = hidden[rows, positions]
        mixed = _attend_from_targets(hidden, rows, own, projections, attention.n_heads)
        attended = layer.sa_layer_norm(attention.out_lin(mixed) + own)
        return layer.output_layer_norm(layer.ffn.ff_chunk(attended) + attended)

    return LastLayer(layer, at_targets)


def _albert_last_layer(model: torch.nn.Module) -> LastLayer | None:
    """AlbertLayer: BERT's attention and feed-forward block, its layer norms named
    otherwise, and one module shared by the layers of its group, so the last layer is
    that module's last call in the forward pass (counted as AlbertTransformer assigns
    layers to groups).  transformers 4's relative position embeddings run in full."""
    config = model.config
    if getattr(config, "position_embedding_type", "absolute") != "absolute":
        return None
    layer = model.base_model.encoder.albert_layer_groups[-1].albert_layers[-1]
    attention = layer.attention
    projections = (attention.query, attention.key, attention.value)
    layers, groups = config.num_hidden_layers, config.num_hidden_groups
    calls = sum(int(i / (layers / groups)) == groups - 1 for i in range(layers))
    if calls == 0:  # more groups than layers: the last group never runs
        return None

    def at_targets(hidden: torch.Tensor, rows: torch.Tensor, positions: torch.Tensor):
        own = hidden[rows, positions]
        mixed = _attend_from_targets(hidden, rows, own, projections, attention.num_attention_heads)
        attended = attention.LayerNorm(own + attention.dense(mixed))
        return layer.full_layer_layer_norm(layer.ff_chunk(attended) + attended)

    return LastLayer(layer, at_targets, calls)


def _deberta_v2_last_layer(model: torch.nn.Module) -> LastLayer | None:
    """DebertaV2Layer (DeBERTa-v2 and v3): disentangled attention, whose scores add to the
    content term a content-to-position term (the target's query against the relative
    position embeddings, ``c2p``) and a position-to-content one (each key against them,
    ``p2c``), indexed by the bucketed relative positions that the encoder itself builds;
    the scale counts every term the config names, as the model's does.  A model whose
    base repeats its last layer (``z_steps``) or whose only layer is followed by the
    encoder's convolution runs in full."""
    base = model.base_model
    encoder = base.encoder
    if getattr(base, "z_steps", 0) > 1 or (len(encoder.layer) == 1 and encoder.conv is not None):
        return None
    layer = encoder.layer[-1]
    attention = layer.attention.self
    heads, size = attention.num_attention_heads, attention.attention_head_size
    kinds = attention.pos_att_type
    scale = math.sqrt(size * (1 + ("c2p" in kinds) + ("p2c" in kinds)))
    shared = attention.share_att_key

    def at_targets(hidden: torch.Tensor, rows: torch.Tensor, positions: torch.Tensor):
        copies, length, _ = hidden.shape
        own = hidden[rows, positions]
        queries = attention.query_proj(own).view(-1, heads, size)
        keys = _per_target(attention.key_proj(hidden).view(copies, length, heads, size), rows)
        values = _per_target(attention.value_proj(hidden).view(copies, length, heads, size), rows)
        scores = torch.einsum("ths,tlhs->thl", queries / scale, keys)
        if attention.relative_attention:
            span = attention.pos_ebd_size
            embeddings = encoder.get_rel_embedding()[: 2 * span]
            # [query position, key position]; each term indexes it as the model does (p2c
            # by the key-to-query entry, negated), though the buckets are antisymmetric.
            relative = encoder.get_rel_pos(hidden)[0]
            if "c2p" in kinds:
                projection = attention.key_proj if shared else attention.pos_key_proj
                table = projection(embeddings).view(2 * span, heads, size)
                index = torch.clamp(relative[positions] + span, 0, 2 * span - 1)
                c2p = torch.einsum("ths,tlhs->thl", queries, table[index])
                scores = scores + c2p / scale
            if "p2c" in kinds:
                projection = attention.query_proj if shared else attention.pos_query_proj
                table = projection(embeddings).view(2 * span, heads, size)
                index = torch.clamp(-relative[:, positions].t() + span, 0, 2 * span - 1)
                p2c = torch.einsum("tlhs,tlhs->thl", keys, table[index])
                scores = scores + p2c / scale
        probabilities = torch.softmax(scores, dim=-1)
        mixed = torch.einsum("thl,tlhs->ths", probabilities, values).reshape(-1, heads * size)
        attended = layer.attention.output(mixed, own)
        return layer.output(layer.intermediate(attended), attended)

    return LastLayer(layer, at_targets)


def _modernbert_last_layer(model: torch.nn.Module) -> LastLayer | None:
    """ModernBertEncoderLayer: pre-norm, one fused query-key-value projection, rotary
    positions and a gated feed-forward block; the base model's final norm follows the last
    layer, so it is applied here.  A last layer with sliding-window attention (not the
    layout of the released checkpoints, whose last layer is global) runs in full, as does
    one whose weights accelerate offloaded."""
    base = model.base_model
    layer = base.layers[-1]
    # transformers 4's layers keep their rotary embedding inside the attention module and
    # name no attention type: those run in full.
    if getattr(layer, "attention_type", None) != "full_attention" or not hasattr(
        base, "rotary_emb"
    ):
        return None
    from transformers.models.modernbert.modeling_modernbert import apply_rotary_pos_emb

    attention = layer.attn
    # Its fused projection is read here, not called: weights that accelerate offloaded
    # (device_map with "cpu" or "disk") are loaded only for the module's own forward.
    if attention.Wqkv.weight.is_meta:
        return None
    heads, size = model.config.num_attention_heads, attention.head_dim
    width = heads * size

    def at_targets(hidden: torch.Tensor, rows: torch.Tensor, positions: torch.Tensor):
        copies, length, _ = hidden.shape
        normed = layer.attn_norm(hidden)
        weight, bias = attention.Wqkv.weight, attention.Wqkv.bias
        query = F.linear(normed[rows, positions], weight[:width], _bias_rows(bias, 0, width))
        key_value = F.linear(normed, weight[width:], _bias_rows(bias, width, 3 * width))
        keys, values = key_value.view(copies, length, 2, heads, size).transpose(1, 3).unbind(2)
        position_ids = torch.arange(length, device=hidden.device)[None]
        cos, sin = base.rotary_emb(hidden, position_ids, layer.attention_type)
        # The model's own rotation turns a query and a key tensor of the same positions;
        # keys cover every position and queries the targets', so each goes through on its
        # own, beside an empty tensor (keys) or itself (the few queries).
        _, keys = apply_rotary_pos_emb(keys[:0], keys, cos, sin)
        cos, sin = cos[0, positions, None], sin[0, positions, None]
        queries = query.view(-1, heads, 1, size)
        queries, _ = apply_rotary_pos_emb(queries, queries, cos, sin)
        mixed = _one_query_attention(
            queries.view(-1, heads, size), keys.transpose(1, 2), values.transpose(1, 2), rows
        )
        attended = hidden[rows, positions] + attention.Wo(mixed.reshape(-1, width))
        return base.final_norm(attended + layer.mlp(layer.mlp_norm(attended)))

    return LastLayer(layer, at_targets)


def _bias_rows(bias: torch.Tensor | None, start: int, stop: int) -> torch.Tensor | None:
    """The bias of rows ``start:stop`` of a fused projection, which projects the query
    and the key-value parts separately here."""
    return None if bias is None else bias[start:stop]


ARCHITECTURES: dict[str, Architecture] = {
    spec.model_class: spec
    for spec in (
        Architecture("BertForMaskedLM", _bert_head, no_offset, _bert_last_layer),
        Architecture("RobertaForMaskedLM", _roberta_head, after_padding, _bert_last_layer),
        Architecture("XLMRobertaForMaskedLM", _roberta_head, after_padding, _bert_last_layer),
        Architecture("CamembertForMaskedLM", _roberta_head, after_padding, _bert_last_layer),
        Architecture("Data2VecTextForMaskedLM", _roberta_head, after_padding, _bert_last_layer),
        Architecture("LongformerForMaskedLM", _roberta_head, after_padding),
        Architecture("DistilBertForMaskedLM", _distilbert_head, no_offset, _distilbert_last_layer),
        Architecture("AlbertForMaskedLM", _albert_head, no_offset, _albert_last_layer),
        Architecture("ElectraForMaskedLM", _electra_head, no_offset, _bert_last_layer),
        Architecture("DebertaV2ForMaskedLM", _deberta_v2_head, no_offset, _deberta_v2_last_layer),
        Architecture("ModernBertForMaskedLM", _modernbert_head, no_offset, _modernbert_last_layer),
    )
}


def architecture_of(model: torch.nn.Module) -> Architecture | None:
    """The spec of ``model``'s class, or None for a class without one.  Only transformers'
    own classes match: remote code (``trust_remote_code``) may call its class
    ``BertForMaskedLM`` while its layers differ (MosaicBERT-style code attends with ALiBi
    through a fused projection), and a spec applied to such layers fails or, where the
    module names agree, silently scores other numbers."""
    model_class = type(model)
    if not model_class.__module__.startswith("transformers.models."):
        return None
    return ARCHITECTURES.get(model_class.__name__)


def _unlisted_offset(model: torch.nn.Module) -> int:
    """The position offset of a class without a spec: fairseq-style tables (RoBERTa's
    descendants without a spec, e.g. XLM-RoBERTa-XL, RoBERTa-PreLayerNorm, X-MOD, MPNet)
    mark it with a padding row, after which their positions start."""
    embeddings = getattr(model.base_model, "embeddings", None)
    padding = getattr(getattr(embeddings, "position_embeddings", None), "padding_idx", None)
    return 0 if padding is None else int(padding) + 1


def max_positions(model: torch.nn.Module) -> int | None:
    """How many tokens, special tokens included, the model's positions allow (None when
    its config declares no limit)."""
    config = model.config
    positions = getattr(config, "max_position_embeddings", None)
    if not positions:
        return None
    spec = architecture_of(model)
    offset = spec.position_offset(config) if spec is not None else _unlisted_offset(model)
    return int(positions) - offset
