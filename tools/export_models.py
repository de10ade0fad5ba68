"""Exports the corpus of models "as people export them today" for the tests.

    /work/.venv-export/bin/python tools/export_models.py [--out tests/frontend/exported] [-k NAME]

Why: hetvm's importer was built against hand-written and 2017-era ONNX files;
what people bring today comes out of ``torch.onnx.export``. This script exports
small random-weight configurations (a few layers, narrow widths, tiny
vocabularies) of torchvision-style CNNs and Hugging Face transformers with BOTH
torch exporters -- the TorchScript one (``dynamo=False``) and the
``torch.export`` one (``dynamo=True``) -- with dynamic batch / sequence axes,
and writes ``manifest.json`` describing each file's inputs and two settings of
its dynamic dims. torch and transformers are development tools only: the tests
read the committed ``.onnx`` files and never import them.

The CNNs are defined here (small ResNet / MobileNetV3 / EfficientNet / ConvNeXt
blocks with the same layers torchvision uses) so that no torchvision wheel is
needed; the transformers are built from config objects (``HF_HUB_OFFLINE=1``,
nothing is downloaded).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import traceback
import warnings
from dataclasses import dataclass, field
from typing import Any, Callable

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import torch  # noqa: E402
from torch import nn  # noqa: E402

VOCAB = 97  # prime, so an index bug shows
OPSET_LEGACY = 17
OPSET_DYNAMO = 18


@dataclass
class InputSpec:
    """One graph input: its dims (ints or dim names) and how to draw values."""

    name: str
    dims: list[Any]
    dtype: str = "float32"
    kind: str = "float"  # float | ids (0 <= v < high) | mask (0/1, last positions 1)
    high: int = 0


@dataclass
class ModelSpec:
    name: str
    build: Callable[[], nn.Module]
    inputs: list[InputSpec]
    outputs: list[str]
    settings: list[dict[str, int]]
    exporters: tuple[str, ...] = ("legacy", "dynamo")
    notes: str = ""
    # dims whose values are tied to others in every setting (for the dynamo exporter)
    derived: dict[str, str] = field(default_factory=dict)


# ---------------------------------------------------------------------------
# torchvision-style CNNs, small
# ---------------------------------------------------------------------------


class BasicBlock(nn.Module):
    """torchvision's ResNet BasicBlock: two 3x3 convs, BN, ReLU, a projected shortcut."""

    def __init__(self, cin: int, cout: int, stride: int) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.down = None
        if stride != 1 or cin != cout:
            self.down = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))

    def forward(self, x):
        y = torch.relu(self.bn1(self.conv1(x)))
        y = self.bn2(self.conv2(y))
        return torch.relu(y + (x if self.down is None else self.down(x)))


class TinyResNet(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 8, 7, 2, 3, bias=False), nn.BatchNorm2d(8), nn.ReLU(),
                                  nn.MaxPool2d(3, 2, 1))
        self.layers = nn.Sequential(BasicBlock(8, 8, 1), BasicBlock(8, 16, 2))
        self.pool = nn.AdaptiveAvgPool2d((1, 1))
        self.fc = nn.Linear(16, 10)

    def forward(self, x):
        return self.fc(torch.flatten(self.pool(self.layers(self.stem(x))), 1))


class SqueezeExcite(nn.Module):
    def __init__(self, c: int, squeeze: int, gate: nn.Module, act: nn.Module) -> None:
        super().__init__()
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc1, self.fc2 = nn.Conv2d(c, squeeze, 1), nn.Conv2d(squeeze, c, 1)
        self.act, self.gate = act, gate

    def forward(self, x):
        return x * self.gate(self.fc2(self.act(self.fc1(self.pool(x)))))


class InvertedResidual(nn.Module):
    """MobileNetV3 / EfficientNet block: expand 1x1, depthwise kxk, SE, project 1x1."""

    def __init__(self, cin, cexp, cout, k, stride, act, gate, se_act) -> None:
        super().__init__()
        self.use_res = stride == 1 and cin == cout
        self.expand = nn.Sequential(nn.Conv2d(cin, cexp, 1, bias=False), nn.BatchNorm2d(cexp), act())
        self.dw = nn.Sequential(nn.Conv2d(cexp, cexp, k, stride, k // 2, groups=cexp, bias=False),
                                nn.BatchNorm2d(cexp), act())
        self.se = SqueezeExcite(cexp, max(cexp // 4, 4), gate(), se_act())
        self.project = nn.Sequential(nn.Conv2d(cexp, cout, 1, bias=False), nn.BatchNorm2d(cout))

    def forward(self, x):
        y = self.project(self.se(self.dw(self.expand(x))))
        return x + y if self.use_res else y


class TinyMobileNetV3(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        hs = nn.Hardswish
        self.stem = nn.Sequential(nn.Conv2d(3, 8, 3, 2, 1, bias=False), nn.BatchNorm2d(8), hs())
        self.blocks = nn.Sequential(
            InvertedResidual(8, 16, 8, 3, 1, nn.ReLU, nn.Hardsigmoid, nn.ReLU),
            InvertedResidual(8, 24, 16, 5, 2, hs, nn.Hardsigmoid, nn.ReLU),
        )
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.head = nn.Sequential(nn.Linear(16, 32), hs(), nn.Dropout(0.2), nn.Linear(32, 10))

    def forward(self, x):
        return self.head(torch.flatten(self.pool(self.blocks(self.stem(x))), 1))


class TinyEfficientNet(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 8, 3, 2, 1, bias=False), nn.BatchNorm2d(8), nn.SiLU())
        self.blocks = nn.Sequential(
            InvertedResidual(8, 32, 8, 3, 1, nn.SiLU, nn.Sigmoid, nn.SiLU),
            InvertedResidual(8, 32, 16, 5, 2, nn.SiLU, nn.Sigmoid, nn.SiLU),
        )
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(16, 10)

    def forward(self, x):
        return self.fc(torch.flatten(self.pool(self.blocks(self.stem(x))), 1))


class LayerNorm2d(nn.LayerNorm):
    """torchvision's ConvNeXt stem/downsample norm: LayerNorm over channels of NCHW."""

    def forward(self, x):
        x = x.permute(0, 2, 3, 1)
        x = nn.functional.layer_norm(x, self.normalized_shape, self.weight, self.bias, self.eps)
        return x.permute(0, 3, 1, 2)


class CNBlock(nn.Module):
    def __init__(self, dim: int) -> None:
        super().__init__()
        self.dw = nn.Conv2d(dim, dim, 7, padding=3, groups=dim)
        self.norm = nn.LayerNorm(dim, eps=1e-6)
        self.pw1, self.pw2 = nn.Linear(dim, 4 * dim), nn.Linear(4 * dim, dim)
        self.gamma = nn.Parameter(torch.full((dim, 1, 1), 0.5))

    def forward(self, x):
        y = self.dw(x).permute(0, 2, 3, 1)
        y = self.pw2(nn.functional.gelu(self.pw1(self.norm(y)))).permute(0, 3, 1, 2)
        return x + self.gamma * y


class TinyConvNeXt(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 8, 4, 4), LayerNorm2d(8, eps=1e-6))
        self.stage1 = CNBlock(8)
        self.down = nn.Sequential(LayerNorm2d(8, eps=1e-6), nn.Conv2d(8, 16, 2, 2))
        self.stage2 = CNBlock(16)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.head = nn.Sequential(LayerNorm2d(16, eps=1e-6), nn.Flatten(1), nn.Linear(16, 10))

    def forward(self, x):
        return self.head(self.pool(self.stage2(self.down(self.stage1(self.stem(x))))))


def _image_spec(name: str, build: Callable[[], nn.Module], hw_dynamic: bool) -> ModelSpec:
    h, w = ("height", "width") if hw_dynamic else (32, 32)
    settings = [{"batch": 1}, {"batch": 3}]
    if hw_dynamic:
        settings = [{"batch": 1, "height": 32, "width": 32}, {"batch": 2, "height": 48, "width": 40}]
    return ModelSpec(name, build, [InputSpec("pixel_values", ["batch", 3, h, w])], ["logits"], settings)


# ---------------------------------------------------------------------------
# Hugging Face transformers, tiny
# ---------------------------------------------------------------------------


def _bert():
    from transformers import BertConfig, BertModel

    cfg = BertConfig(vocab_size=VOCAB, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                     intermediate_size=64, max_position_embeddings=64, type_vocab_size=2)
    return _Outputs(BertModel(cfg, add_pooling_layer=True), ("last_hidden_state", "pooler_output"))


def _distilbert():
    from transformers import DistilBertConfig, DistilBertModel

    cfg = DistilBertConfig(vocab_size=VOCAB, dim=32, n_layers=2, n_heads=2, hidden_dim=64,
                           max_position_embeddings=64)
    return _Outputs(DistilBertModel(cfg), ("last_hidden_state",))


def _gpt2_config():
    from transformers import GPT2Config

    return GPT2Config(vocab_size=VOCAB, n_embd=32, n_layer=2, n_head=2, n_positions=64)


def _gpt2():
    from transformers import GPT2LMHeadModel

    return _Outputs(GPT2LMHeadModel(_gpt2_config()), ("logits",), use_cache=False)


class _Outputs(nn.Module):
    """Calls a HF model with keyword inputs and returns the named outputs as a tuple."""

    def __init__(self, model: nn.Module, names: tuple[str, ...], **extra: Any) -> None:
        super().__init__()
        self.model, self.names, self.extra = model, names, extra

    def forward(self, *args):
        keys = self.input_keys
        out = self.model(**dict(zip(keys, args)), **self.extra)
        return tuple(getattr(out, n) for n in self.names)


class WithPast(nn.Module):
    """One decoding step of a causal LM: input ids, attention mask and flat past
    keys/values in; logits and the present keys/values out."""

    def __init__(self, build: Callable[[], nn.Module]) -> None:
        super().__init__()
        self.model = build()

    def forward(self, *inputs):
        from transformers import DynamicCache

        input_ids, attention_mask, *past = inputs
        cache = DynamicCache()
        for layer in range(len(past) // 2):
            cache.update(past[2 * layer], past[2 * layer + 1], layer)
        out = self.model(input_ids=input_ids, attention_mask=attention_mask, past_key_values=cache,
                         use_cache=True)
        present = []
        for layer in out.past_key_values.layers:
            present += [layer.keys, layer.values]
        return (out.logits, *present)


def _gpt2_lm():
    from transformers import GPT2LMHeadModel

    return GPT2LMHeadModel(_gpt2_config())


def _llama_config(**extra: Any):
    from transformers import LlamaConfig

    # grouped-query attention (2 heads share 1 KV head), rotary embeddings, RMSNorm, SiLU MLP
    return LlamaConfig(vocab_size=VOCAB, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                       num_attention_heads=2, num_key_value_heads=1, max_position_embeddings=64,
                       **extra)


def _llama_lm():
    from transformers import LlamaForCausalLM

    return LlamaForCausalLM(_llama_config())


def _llama():
    return _Outputs(_llama_lm(), ("logits",), use_cache=False)


def _qwen2():
    from transformers import Qwen2Config, Qwen2ForCausalLM

    cfg = Qwen2Config(vocab_size=VOCAB, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                      num_attention_heads=2, num_key_value_heads=1, max_position_embeddings=64)
    return _Outputs(Qwen2ForCausalLM(cfg), ("logits",), use_cache=False)


def _roberta():
    from transformers import RobertaConfig, RobertaModel

    cfg = RobertaConfig(vocab_size=VOCAB, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                        intermediate_size=64, max_position_embeddings=66, pad_token_id=1)
    return _Outputs(RobertaModel(cfg, add_pooling_layer=False), ("last_hidden_state",))


def _albert():
    from transformers import AlbertConfig, AlbertModel

    cfg = AlbertConfig(vocab_size=VOCAB, embedding_size=16, hidden_size=32, num_hidden_layers=2,
                       num_attention_heads=2, intermediate_size=64, max_position_embeddings=64)
    return _Outputs(AlbertModel(cfg), ("last_hidden_state", "pooler_output"))


def _deberta_v2():
    from transformers import DebertaV2Config, DebertaV2Model

    cfg = DebertaV2Config(vocab_size=VOCAB, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                          intermediate_size=64, max_position_embeddings=64, relative_attention=True,
                          position_buckets=8, pos_att_type=["p2c", "c2p"], max_relative_positions=16)
    return _Outputs(DebertaV2Model(cfg), ("last_hidden_state",))


def _bart():
    from transformers import BartConfig, BartModel

    cfg = BartConfig(vocab_size=VOCAB, d_model=32, encoder_layers=1, decoder_layers=1,
                     encoder_attention_heads=2, decoder_attention_heads=2, encoder_ffn_dim=64,
                     decoder_ffn_dim=64, max_position_embeddings=64)
    return _Outputs(BartModel(cfg), ("last_hidden_state",), use_cache=False)


def _opt():
    from transformers import OPTConfig, OPTForCausalLM

    cfg = OPTConfig(vocab_size=VOCAB, hidden_size=32, num_hidden_layers=2, ffn_dim=64,
                    num_attention_heads=2, max_position_embeddings=64, word_embed_proj_dim=32)
    return _Outputs(OPTForCausalLM(cfg), ("logits",), use_cache=False)


def _bloom():
    from transformers import BloomConfig, BloomForCausalLM

    cfg = BloomConfig(vocab_size=VOCAB, hidden_size=32, n_layer=2, n_head=2)  # ALiBi positions
    return _Outputs(BloomForCausalLM(cfg), ("logits",), use_cache=False)


def _swin():
    from transformers import SwinConfig, SwinModel

    cfg = SwinConfig(image_size=32, patch_size=4, num_channels=3, embed_dim=16, depths=[1, 1],
                     num_heads=[2, 2], window_size=4, mlp_ratio=2.0)
    return _Outputs(SwinModel(cfg, add_pooling_layer=False), ("last_hidden_state",))


def _segformer():
    from transformers import SegformerConfig, SegformerForSemanticSegmentation

    cfg = SegformerConfig(num_channels=3, num_encoder_blocks=2, depths=[1, 1], sr_ratios=[2, 1],
                          hidden_sizes=[16, 32], patch_sizes=[7, 3], strides=[4, 2],
                          num_attention_heads=[1, 2], mlp_ratios=[2, 2], decoder_hidden_size=32,
                          num_labels=5)
    return _Outputs(SegformerForSemanticSegmentation(cfg), ("logits",))


def _t5_config():
    from transformers import T5Config

    return T5Config(vocab_size=VOCAB, d_model=32, d_kv=16, d_ff=64, num_layers=2, num_decoder_layers=2,
                    num_heads=2, relative_attention_num_buckets=8, relative_attention_max_distance=16,
                    decoder_start_token_id=0, pad_token_id=0)


def _t5_encoder():
    from transformers import T5EncoderModel

    return _Outputs(T5EncoderModel(_t5_config()), ("last_hidden_state",))


def _t5():
    from transformers import T5Model

    return _Outputs(T5Model(_t5_config()), ("last_hidden_state",), use_cache=False)


def _vit():
    from transformers import ViTConfig, ViTModel

    cfg = ViTConfig(hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64,
                    image_size=32, patch_size=8, num_channels=3)
    return _Outputs(ViTModel(cfg, add_pooling_layer=False), ("last_hidden_state",))


def _ids(name: str, dims: list[Any]) -> InputSpec:
    return InputSpec(name, dims, "int64", "ids", VOCAB)


def _mask(name: str, dims: list[Any]) -> InputSpec:
    return InputSpec(name, dims, "int64", "mask")


TEXT = [{"batch": 1, "seq": 5}, {"batch": 2, "seq": 9}]
PAST = [{"batch": 1, "seq": 1, "past": 4, "total": 5}, {"batch": 2, "seq": 3, "past": 6, "total": 9}]
HEAD_DIM = 16
# torch 2.13's dynamo exporter fails on T5 with a dynamic sequence ("Cannot view a tensor
# with shape [b, s, 2, 16] and strides ... as [b, s, 32]" while decomposing the FX graph)
T5_EXPORTERS = ("legacy",)
T5_NOTE = "dynamo=True fails in torch 2.13 (view of a transposed tensor with symbolic strides)."  # Swin too


def _past_inputs(kv_heads: int) -> list[InputSpec]:
    inputs = [_ids("input_ids", ["batch", "seq"]), _mask("attention_mask", ["batch", "total"])]
    for layer in range(2):
        for kind in ("key", "value"):
            inputs.append(InputSpec(f"past_{kind}_{layer}", ["batch", kv_heads, "past", HEAD_DIM]))
    return inputs


def specs() -> list[ModelSpec]:
    bert_inputs = [_ids("input_ids", ["batch", "seq"]), _mask("attention_mask", ["batch", "seq"]),
                   InputSpec("token_type_ids", ["batch", "seq"], "int64", "ids", 2)]
    text = [_ids("input_ids", ["batch", "seq"]), _mask("attention_mask", ["batch", "seq"])]
    past_inputs = _past_inputs(2)
    present = [f"present_{k}_{i}" for i in range(2) for k in ("key", "value")]
    t5_inputs = text + [_ids("decoder_input_ids", ["batch", "dec_seq"])]
    t5_settings = [{"batch": 1, "seq": 5, "dec_seq": 3}, {"batch": 2, "seq": 8, "dec_seq": 4}]
    return [
        _image_spec("resnet", TinyResNet, hw_dynamic=True),
        _image_spec("mobilenet_v3", TinyMobileNetV3, hw_dynamic=True),
        _image_spec("efficientnet", TinyEfficientNet, hw_dynamic=True),
        _image_spec("convnext", TinyConvNeXt, hw_dynamic=True),
        ModelSpec("bert", _bert, bert_inputs, ["last_hidden_state", "pooler_output"], TEXT),
        ModelSpec("distilbert", _distilbert, text, ["last_hidden_state"], TEXT),
        ModelSpec("gpt2", _gpt2, text, ["logits"], TEXT),
        ModelSpec("gpt2_past", lambda: WithPast(_gpt2_lm), past_inputs, ["logits", *present], PAST,
                  notes="one decoding step with a KV cache of length past; total = past + seq"),
        ModelSpec("llama", _llama, text, ["logits"], TEXT, notes="rotary, RMSNorm, SiLU MLP, 1 KV head for 2"),
        ModelSpec("llama_past", lambda: WithPast(_llama_lm), _past_inputs(1), ["logits", *present], PAST,
                  notes="grouped-query attention with a KV cache; total = past + seq"),
        ModelSpec("qwen2", _qwen2, text, ["logits"], TEXT),
        ModelSpec("roberta", _roberta, text, ["last_hidden_state"], TEXT,
                  notes="position ids from the cumulative sum of the non-pad mask"),
        ModelSpec("albert", _albert, text, ["last_hidden_state", "pooler_output"], TEXT),
        ModelSpec("deberta_v2", _deberta_v2, text, ["last_hidden_state"], TEXT,
                  notes="disentangled relative-position attention"),
        ModelSpec("bart", _bart, t5_inputs, ["last_hidden_state"], t5_settings),
        ModelSpec("opt", _opt, text, ["logits"], TEXT),
        ModelSpec("bloom", _bloom, text, ["logits"], TEXT, notes="ALiBi position biases"),
        ModelSpec("t5_encoder", _t5_encoder, text, ["last_hidden_state"], TEXT, exporters=T5_EXPORTERS,
                  notes=T5_NOTE),
        ModelSpec("t5", _t5, t5_inputs, ["last_hidden_state"], t5_settings, exporters=T5_EXPORTERS,
                  notes="encoder-decoder, no cache; the decoder's last hidden state. " + T5_NOTE),
        ModelSpec("swin", _swin, [InputSpec("pixel_values", ["batch", 3, 32, 32])], ["last_hidden_state"],
                  [{"batch": 1}, {"batch": 2}], exporters=("legacy",),
                  notes="shifted windows: roll, window partition. " + T5_NOTE),
        ModelSpec("segformer", _segformer, [InputSpec("pixel_values", ["batch", 3, "height", "width"])],
                  ["logits"], [{"batch": 1, "height": 32, "width": 32}, {"batch": 2, "height": 64, "width": 48}],
                  notes="bilinear upsampling of every stage to the first one's size"),
        ModelSpec("vit", _vit, [InputSpec("pixel_values", ["batch", 3, 32, 32])], ["last_hidden_state"],
                  [{"batch": 1}, {"batch": 3}]),
    ]


# ---------------------------------------------------------------------------
# export
# ---------------------------------------------------------------------------


def sample_inputs(spec: ModelSpec, setting: dict[str, int], seed: int) -> list[torch.Tensor]:
    """Inputs for one setting of the dims, drawn the way the tests draw them."""
    gen = torch.Generator().manual_seed(seed)
    out = []
    for inp in spec.inputs:
        shape = [setting[d] if isinstance(d, str) else d for d in inp.dims]
        if inp.kind == "ids":
            out.append(torch.randint(0, inp.high, shape, generator=gen))
        elif inp.kind == "mask":
            mask = torch.ones(shape, dtype=torch.int64)
            if shape[-1] > 1:
                mask[0, 0] = 0  # one padded position in the first row
            out.append(mask)
        else:
            out.append(torch.randn(shape, generator=gen))
    return out


def _dynamic_axes(spec: ModelSpec) -> dict[str, dict[int, str]]:
    axes = {i.name: {k: d for k, d in enumerate(i.dims) if isinstance(d, str)} for i in spec.inputs}
    return {k: v for k, v in axes.items() if v}


def _dynamic_shapes(spec: ModelSpec, takes_varargs: bool) -> tuple[Any, ...]:
    from torch.export import Dim

    dims: dict[str, Any] = {}
    for inp in spec.inputs:
        for d in inp.dims:
            if isinstance(d, str) and d not in dims and d != "total":
                dims[d] = Dim(d, min=1, max=1024)
    if "total" in {d for i in spec.inputs for d in i.dims}:
        dims["total"] = Dim.AUTO  # past + seq: torch.export derives it
    per_input = tuple({k: dims[d] for k, d in enumerate(i.dims) if isinstance(d, str)} or None
                      for i in spec.inputs)
    return (per_input,) if takes_varargs else per_input


def export_one(spec: ModelSpec, exporter: str, path: str) -> None:
    torch.manual_seed(0)
    model = spec.build().eval()
    if isinstance(model, _Outputs):
        model.input_keys = [i.name for i in spec.inputs]
    _randomize(model)
    args = tuple(sample_inputs(spec, spec.settings[-1], seed=1))
    names = [i.name for i in spec.inputs]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if exporter == "legacy":
            torch.onnx.export(model, args, path, input_names=names, output_names=spec.outputs,
                              dynamic_axes=_dynamic_axes(spec), opset_version=OPSET_LEGACY, dynamo=False)
        else:
            prog = torch.onnx.export(model, args, input_names=names, output_names=spec.outputs,
                                     dynamic_shapes=_dynamic_shapes(spec, _takes_varargs(model)), opset_version=OPSET_DYNAMO,
                                     dynamo=True, external_data=False, verbose=False)
            prog.save(path, external_data=False)
            _strip_node_metadata(path)


def _strip_node_metadata(path: str) -> None:
    """Drops the dynamo exporter's per-node metadata (source stack traces, module
    paths: most of the file); the graph itself is left as exported."""
    import onnx

    model = onnx.load(path)
    for node in model.graph.node:
        del node.metadata_props[:]
    onnx.save(model, path)


def _takes_varargs(model: nn.Module) -> bool:
    import inspect

    params = inspect.signature(model.forward).parameters.values()
    return any(p.kind is inspect.Parameter.VAR_POSITIONAL for p in params)


def _randomize(model: nn.Module) -> None:
    """BatchNorm running statistics away from (0, 1), so folding them is tested."""
    gen = torch.Generator().manual_seed(2)
    for m in model.modules():
        if isinstance(m, nn.BatchNorm2d):
            m.running_mean.copy_(torch.randn(m.running_mean.shape, generator=gen) * 0.1)
            m.running_var.copy_(torch.rand(m.running_var.shape, generator=gen) + 0.5)


def check_with_ort(spec: ModelSpec, path: str) -> None:
    """The export runs in ONNX Runtime at both settings (else it is not worth testing)."""
    import onnxruntime as ort

    sess = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    for k, setting in enumerate(spec.settings):
        feeds = {i.name: t.numpy() for i, t in zip(spec.inputs, sample_inputs(spec, setting, seed=k))}
        sess.run(None, feeds)


def manifest_entry(spec: ModelSpec, exporter: str, file: str) -> dict[str, Any]:
    dyn = sorted({d for i in spec.inputs for d in i.dims if isinstance(d, str)})
    return {
        "file": file,
        "model": spec.name,
        "exporter": exporter,
        "opset": OPSET_LEGACY if exporter == "legacy" else OPSET_DYNAMO,
        "dynamic_dims": dyn,
        "settings": spec.settings,
        "inputs": [{"name": i.name, "dims": i.dims, "dtype": i.dtype, "kind": i.kind,
                    **({"high": i.high} if i.kind == "ids" else {})} for i in spec.inputs],
        "outputs": spec.outputs,
        "notes": spec.notes,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=os.path.join("tests", "frontend", "exported"))
    parser.add_argument("-k", default=None, help="only models whose name contains this")
    args = parser.parse_args(argv)
    os.makedirs(args.out, exist_ok=True)
    manifest_path = os.path.join(args.out, "manifest.json")
    entries: dict[str, Any] = {}
    if os.path.exists(manifest_path):
        with open(manifest_path) as f:
            entries = {e["file"]: e for e in json.load(f)["models"]}
    failed = []
    for spec in specs():
        if args.k and args.k not in spec.name:
            continue
        for exporter in spec.exporters:
            file = f"{spec.name}_{exporter}.onnx"
            path = os.path.join(args.out, file)
            try:
                export_one(spec, exporter, path)
                check_with_ort(spec, path)
            except Exception as exc:  # report and go on: one model must not stop the corpus
                traceback.print_exc()
                failed.append(f"{file}: {type(exc).__name__}: {str(exc).splitlines()[0][:200]}")
                entries.pop(file, None)
                if os.path.exists(path):
                    os.remove(path)
                continue
            entries[file] = manifest_entry(spec, exporter, file)
            print(f"{file}: {os.path.getsize(path) / 1024:.0f} KiB")
    with open(manifest_path, "w") as f:
        json.dump({"generated_by": "tools/export_models.py", "torch": torch.__version__,
                   "models": [entries[k] for k in sorted(entries)]}, f, indent=1)
        f.write("\n")
    for line in failed:
        print("FAILED", line, file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
