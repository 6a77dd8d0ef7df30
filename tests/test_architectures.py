"""Every architecture spec is complete and right: for a tiny random model of each (built
from its transformers config class), the split parts reproduce ``model(...).logits`` at
the targets, several targets in one row included (tolerance 1e-5 in float32), and an
input of exactly ``max_positions`` tokens runs, one more does not wherever a learned
position table sets the limit."""

from __future__ import annotations

import gc

import pytest
import torch
import transformers

from pll_harness.architectures import ARCHITECTURES, max_positions
from pll_harness.heads import split_masked_lm

VOCAB = 97
SMALL = {
    "vocab_size": VOCAB,
    "hidden_size": 32,
    "num_hidden_layers": 2,
    "num_attention_heads": 2,
    "intermediate_size": 48,
    "max_position_embeddings": 40,
    # Weights well above the usual 0.02, so that every term of a layer moves the logits by
    # more than the tolerance (at 0.02, DeBERTa's position terms did not).
    "initializer_range": 0.5,
}
FAIRSEQ = {"pad_token_id": 1}

# Each architecture's tiny configs: one per variant whose head or positions differ.
CONFIGS: dict[str, dict[str, dict]] = {
    "BertForMaskedLM": {"base": {}},
    "RobertaForMaskedLM": {"base": FAIRSEQ},
    "XLMRobertaForMaskedLM": {"base": FAIRSEQ},
    "CamembertForMaskedLM": {"base": FAIRSEQ},
    "Data2VecTextForMaskedLM": {"base": FAIRSEQ},
    "LongformerForMaskedLM": {"base": {**FAIRSEQ, "attention_window": 4}},
    "DistilBertForMaskedLM": {
        "base": {"dim": 32, "n_layers": 2, "n_heads": 2, "hidden_dim": 48},
        # Its FFN chunks along dimension 1, which target rows do not have as a sequence.
        "chunked": {
            "dim": 32,
            "n_layers": 2,
            "n_heads": 2,
            "hidden_dim": 48,
            "chunk_size_feed_forward": 1,
        },
    },
    "AlbertForMaskedLM": {
        # One layer module for both layers: the last layer is its second call.
        "base": {"embedding_size": 16},
        # Five layers in two groups (AlbertTransformer's int(i / 2.5): three, then two),
        # each of two inner layers: the last layer is the second call of the last group's
        # second inner layer.
        "groups": {
            "embedding_size": 16,
            "num_hidden_layers": 5,
            "num_hidden_groups": 2,
            "inner_group_num": 2,
        },
    },
    "ElectraForMaskedLM": {"base": {"embedding_size": 16}},
    "DebertaV2ForMaskedLM": {
        "legacy_head": {},
        # deberta-v3's layout: relative positions only, and the non-legacy head.
        "v3": {
            "legacy": False,
            "position_biased_input": False,
            "relative_attention": True,
            "position_buckets": 8,
            "pos_att_type": ["p2c", "c2p"],
            "norm_rel_ebd": "layer_norm",
            "share_att_key": True,
        },
        # deberta-v2's: own position projections, no buckets (relative distances past 6
        # clamped in the tests' 11 tokens), and the convolution after the first layer.
        "v2": {
            "relative_attention": True,
            "max_relative_positions": 6,
            "pos_att_type": ["p2c", "c2p"],
            "share_att_key": False,
            "conv_kernel_size": 3,
        },
    },
    "ModernBertForMaskedLM": {
        "base": {"global_attn_every_n_layers": 1, "local_attention": 8, "pad_token_id": 0},
        # A last layer with sliding-window attention (window 8 < the tests' 11 tokens).
        "sliding_last": {"global_attn_every_n_layers": 2, "local_attention": 8, "pad_token_id": 0},
        # Biased projections: the fused query-key-value bias is split like its weight.
        "biased": {
            "global_attn_every_n_layers": 1,
            "local_attention": 8,
            "pad_token_id": 0,
            "attention_bias": True,
            "mlp_bias": True,
        },
        # A vocabulary projection without a bias: the head's plain matrix product.
        "unbiased_decoder": {
            "global_attn_every_n_layers": 1,
            "local_attention": 8,
            "pad_token_id": 0,
            "decoder_bias": False,
        },
    },
}

CASES = [(arch, variant) for arch, variants in CONFIGS.items() for variant in variants]


def tiny_model(architecture: str, variant: str) -> torch.nn.Module:
    model_class = getattr(transformers, architecture)
    config = model_class.config_class(**{**SMALL, **CONFIGS[architecture][variant]})
    torch.manual_seed(0)
    model = model_class(config).eval()
    with torch.no_grad():  # biases start at zero, where a misplaced one would not show
        for name, parameter in model.named_parameters():
            if name.endswith("bias"):
                parameter.normal_(0, 0.5)
    return model


def tokens(rows: int, length: int) -> torch.Tensor:
    """Random ids above every tiny config's special ids (0-2), so no token is padding."""
    return torch.randint(3, VOCAB, (rows, length))


def test_every_architecture_has_a_tiny_config():
    assert set(CONFIGS) == set(ARCHITECTURES)


TARGETS = {
    "one per copy": ([0, 1, 2], [0, 3, 10]),
    "two in one copy": ([0, 1, 1, 2], [0, 3, 6, 10]),
}
"""Rows and positions of targets in three copies: the last layer's attention uses each
copy's keys where they lie when every copy holds one target, and gathers them per target
otherwise (architectures._per_target)."""


@pytest.mark.parametrize("targets", TARGETS)
@pytest.mark.parametrize(("architecture", "variant"), CASES)
def test_split_parts_equal_full_logits(architecture, variant, targets):
    model = tiny_model(architecture, variant)
    parts = split_masked_lm(model)
    assert parts.split
    torch.manual_seed(1)
    input_ids = tokens(3, 11)
    rows, cols = (torch.tensor(index) for index in TARGETS[targets])
    with torch.no_grad():
        full = model(input_ids=input_ids).logits
        gathered = parts.head(parts.states(input_ids, rows, cols))
    torch.testing.assert_close(gathered, full[rows, cols], atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize(("architecture", "variant"), CASES)
def test_the_split_parts_leave_no_reference_cycles(architecture, variant):
    """Scoring pauses the cyclic collector in its bulk steps (pll_harness.collector), and on
    a GPU those overlap the forward passes: a pass that left a cycle behind could keep its
    activations alive while the collector is paused, so none may, whatever the
    architecture."""
    parts = split_masked_lm(tiny_model(architecture, variant))
    rows, cols = torch.tensor([0, 1, 1, 2]), torch.tensor([0, 3, 6, 10])
    with torch.inference_mode():
        parts.head(parts.states(tokens(3, 11), rows, cols))  # first-call caches
        gc.collect()
        was_enabled = gc.isenabled()
        gc.disable()
        try:
            for _ in range(2):
                parts.head(parts.states(tokens(3, 11), rows, cols))
            assert gc.collect() == 0
        finally:
            if was_enabled:
                gc.enable()


def test_the_layouts_that_allow_it_run_their_last_layer_at_the_targets_only():
    """The target-only last layer is what makes small models fast (bench/README.md); it
    must not silently switch off for the architectures written for it, and must stay off
    for the layouts it cannot serve (a convolution after the only layer, a repeated last
    layer, an ALBERT group that no layer uses, a sliding-window last layer)."""
    fast = {
        architecture
        for architecture, variant in CASES
        if ARCHITECTURES[architecture].last_layer(tiny_model(architecture, variant))
    }
    assert fast == {
        "BertForMaskedLM",
        "RobertaForMaskedLM",
        "XLMRobertaForMaskedLM",
        "CamembertForMaskedLM",
        "Data2VecTextForMaskedLM",
        "DistilBertForMaskedLM",
        "ElectraForMaskedLM",
        "AlbertForMaskedLM",
        "DebertaV2ForMaskedLM",
        "ModernBertForMaskedLM",
    }
    one_layer = transformers.DebertaV2Config(
        **{**SMALL, **CONFIGS["DebertaV2ForMaskedLM"]["v2"], "num_hidden_layers": 1}
    )
    convolved = transformers.DebertaV2ForMaskedLM(one_layer).eval()
    assert ARCHITECTURES["DebertaV2ForMaskedLM"].last_layer(convolved) is None
    repeated = tiny_model("DebertaV2ForMaskedLM", "v3")
    repeated.deberta.z_steps = 2
    assert ARCHITECTURES["DebertaV2ForMaskedLM"].last_layer(repeated) is None
    idle_group = transformers.AlbertConfig(
        **{**SMALL, "embedding_size": 16, "num_hidden_groups": 3}
    )
    idle = transformers.AlbertForMaskedLM(idle_group).eval()
    assert ARCHITECTURES["AlbertForMaskedLM"].last_layer(idle) is None
    sliding = tiny_model("ModernBertForMaskedLM", "sliding_last")
    assert sliding.config.layer_types[-1] == "sliding_attention"
    assert ARCHITECTURES["ModernBertForMaskedLM"].last_layer(sliding) is None


def _learned_position_table(model: torch.nn.Module) -> bool:
    table = getattr(model.base_model.embeddings, "position_embeddings", None)
    return isinstance(table, torch.nn.Embedding)


@pytest.mark.parametrize(("architecture", "variant"), CASES)
def test_max_positions_is_the_longest_input_the_model_takes(architecture, variant):
    model = tiny_model(architecture, variant)
    limit = max_positions(model)
    assert limit is not None
    states = split_masked_lm(model).states

    def run(length: int) -> torch.Tensor:
        every = torch.arange(length)
        return states(tokens(1, length), torch.zeros_like(every), every)

    with torch.no_grad():
        assert run(limit).shape[0] == limit
        if _learned_position_table(model):
            with pytest.raises((IndexError, RuntimeError)):
                run(limit + 1)


def test_a_model_without_a_spec_uses_its_whole_position_table():
    class Unlisted(transformers.BertForMaskedLM):
        pass

    config = transformers.BertConfig(**SMALL)
    assert max_positions(Unlisted(config)) == SMALL["max_position_embeddings"]


@pytest.mark.parametrize(("architecture", "variant"), CASES)
def test_the_engine_scores_every_architecture_like_the_naive_reference(
    architecture, variant, tiny_bert_dir
):
    """The engine feeds batches of one length without an attention mask; every
    architecture must give, through it, the scores of one full forward per target
    (float64 reference, 1e-4 nats per token)."""
    from reference_pll import float64_model, naive_pll
    from transformers import AutoTokenizer

    from pll_harness.scorer import PLLScorer

    tokenizer = AutoTokenizer.from_pretrained(tiny_bert_dir)
    model_class = getattr(transformers, architecture)
    # The usual initializer range: with SMALL's larger weights the float32 model itself
    # strays from float64 by more than this test's tolerance.
    sizes = {
        **SMALL,
        "vocab_size": len(tokenizer),
        "max_position_embeddings": 64,
        "initializer_range": 0.02,
    }
    config = model_class.config_class(**{**sizes, **CONFIGS[architecture][variant]})
    torch.manual_seed(0)
    model = model_class(config).eval()
    sentences = ["The hooligan wrecked the souvenir.", "A cat sat.", "Who should Derek hug?"]
    scorer = PLLScorer(model, tokenizer, "word_l2r", device="cpu", max_batch_tokens=40)
    model64 = float64_model(model)
    for result, sentence in zip(scorer.score(sentences), sentences, strict=True):
        expected = naive_pll(model64, tokenizer, "", sentence, "word_l2r")
        assert result.token_logprobs == pytest.approx(expected, abs=1e-4)


class BertForMaskedLM(transformers.BertForMaskedLM):
    """Remote code's way: a class named like a supported one whose layers differ (here
    only in the attention's scale, which the spec's last layer does not read)."""

    def __init__(self, config: transformers.BertConfig) -> None:
        super().__init__(config)
        for layer in self.bert.encoder.layer:
            layer.attention.self.scaling = 1.0


def test_a_class_that_only_shares_a_supported_name_scores_its_own_logits():
    torch.manual_seed(0)
    model = BertForMaskedLM(transformers.BertConfig(**SMALL)).eval()
    parts = split_masked_lm(model)
    input_ids = tokens(2, 9)
    rows, cols = torch.tensor([0, 1]), torch.tensor([2, 7])
    with torch.no_grad():
        gathered = parts.head(parts.states(input_ids, rows, cols))
        expected = model(input_ids=input_ids).logits[rows, cols]
    torch.testing.assert_close(gathered, expected, atol=1e-5, rtol=1e-5)


def test_an_unlisted_fairseq_style_model_stops_before_its_padding_rows():
    """A RoBERTa descendant without a spec numbers its positions from ``pad + 1`` too; with
    a tokenizer that declares no limit, the table is all that bounds its inputs."""
    config = transformers.RobertaPreLayerNormConfig(**SMALL, **FAIRSEQ)
    model = transformers.RobertaPreLayerNormForMaskedLM(config).eval()
    limit = max_positions(model)
    assert limit == SMALL["max_position_embeddings"] - FAIRSEQ["pad_token_id"] - 1
    with torch.no_grad():
        model(input_ids=tokens(1, limit))
        with pytest.raises((IndexError, RuntimeError)):
            model(input_ids=tokens(1, limit + 1))


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
@pytest.mark.parametrize("per_copy", [1, 2])
@pytest.mark.parametrize(("dtype", "tolerance"), [(torch.float32, 1e-4), (torch.bfloat16, 3e-2)])
def test_the_last_layer_takes_more_targets_than_a_cuda_grid_dimension(dtype, tolerance, per_copy):
    """70,000 targets in one batch, on a GPU: short sentences make batches that large on
    one without MAX_BATCH_ROWS, one target per copy (keys and values used where they lie)
    or, as whole_word makes them, several (gathered per target).  With
    ``F.scaled_dot_product_attention``, torch 2.11 ran this one-query attention in bf16 on
    cuDNN's kernel, which failed from 65,536 targets on (pytorch#181235)."""
    config = transformers.BertConfig(
        vocab_size=VOCAB,
        hidden_size=128,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=256,
    )
    torch.manual_seed(0)
    model = transformers.BertForMaskedLM(config).eval().to("cuda", dtype)
    parts = split_masked_lm(model)
    input_ids = tokens(70_000 // per_copy, 8).cuda()
    targets = torch.arange(70_000, device="cuda")
    rows, cols = targets // per_copy, targets % 8
    with torch.no_grad():
        full = model(input_ids=input_ids).logits[rows, cols].float()
        gathered = parts.head(parts.states(input_ids, rows, cols)).float()
    torch.testing.assert_close(gathered, full, atol=tolerance, rtol=tolerance)
