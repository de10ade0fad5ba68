"""Exports models held out of the tests: architectures the committed corpus never saw.

    /work/.venv-export/bin/python tools/export_held_out.py [--out /tmp/hetvm-held-out] [-k NAME]
    python benchmarks/onnx_models.py --threads 2 --batches 1 --models '' --corpus --corpus-dir /tmp/hetvm-held-out

Why: the speed and coverage work is measured on the corpus of
``tools/export_models.py`` (``tests/frontend/exported``); a change tuned to
those files would not show it. These are other small random-weight
configurations of Hugging Face models (LLMs with other attention and norm
variants, encoders, vision transformers, CNNs with grouped, pooled or
mixed convolution/attention stages), exported the same way (both torch
exporters, dynamic axes, a manifest) into a folder outside the tests. The files
are not committed: only this list is, so any session can regenerate them and
check that a result holds outside the corpus.
"""

from __future__ import annotations

import os
import sys
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import export_models as corpus  # noqa: E402
from export_models import TEXT, VOCAB, InputSpec, ModelSpec, _ids, _mask, _Outputs  # noqa: E402

DEFAULT_OUT = "/tmp/hetvm-held-out"

_LM = dict(vocab_size=VOCAB, hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=2,
           max_position_embeddings=64)  # fmt: skip
_ENCODER = dict(vocab_size=VOCAB, hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64,
                max_position_embeddings=66)  # fmt: skip
_VIT = dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=2, image_size=32, patch_size=8)
_STAGES = dict(hidden_sizes=[16, 32, 48, 64], depths=[1, 1, 1, 1])
_IMAGES = [{"batch": 1}, {"batch": 2}]


def _hf(config: str, model: str, outputs: tuple[str, ...], **kw: Any):
    """A builder of ``transformers.<model>(<config>(**kw))`` returning ``outputs``
    (``use_cache`` given for the causal LMs only)."""
    use_cache = kw.pop("use_cache", None)

    def build():
        import transformers

        net = getattr(transformers, model)(getattr(transformers, config)(**kw))
        extra = {} if use_cache is None else {"use_cache": use_cache}
        return _Outputs(net, outputs, **extra)

    return build


def _lm(name: str, config: str, model: str, **kw: Any) -> ModelSpec:
    text = [_ids("input_ids", ["batch", "seq"]), _mask("attention_mask", ["batch", "seq"])]
    return ModelSpec(name, _hf(config, model, ("logits",), use_cache=False, **_LM, **kw), text, ["logits"], TEXT)


def _encoder(name: str, config: str, model: str, **kw: Any) -> ModelSpec:
    text = [_ids("input_ids", ["batch", "seq"]), _mask("attention_mask", ["batch", "seq"])]
    build = _hf(config, model, ("last_hidden_state",), **{**_ENCODER, **kw})
    return ModelSpec(name, build, text, ["last_hidden_state"], TEXT)


def _image(name: str, config: str, model: str, side: int, **kw: Any) -> ModelSpec:
    pixels = [InputSpec("pixel_values", ["batch", 3, side, side])]
    return ModelSpec(name, _hf(config, model, ("last_hidden_state",), **kw), pixels, ["last_hidden_state"], _IMAGES)


def specs() -> list[ModelSpec]:
    return [
        _lm("mistral", "MistralConfig", "MistralForCausalLM", num_key_value_heads=1),
        _lm("phi3", "Phi3Config", "Phi3ForCausalLM", pad_token_id=0),
        _lm("gemma", "GemmaConfig", "GemmaForCausalLM", head_dim=16, num_key_value_heads=1),
        _lm("gpt_neox", "GPTNeoXConfig", "GPTNeoXForCausalLM"),
        _encoder("electra", "ElectraConfig", "ElectraModel", embedding_size=16),
        _encoder("mpnet", "MPNetConfig", "MPNetModel"),
        _encoder("xlm_roberta", "XLMRobertaConfig", "XLMRobertaModel", pad_token_id=1),
        _encoder("squeezebert", "SqueezeBertConfig", "SqueezeBertModel", embedding_size=32, q_groups=2, k_groups=2,
                 v_groups=2, post_attention_groups=2, intermediate_groups=2, output_groups=2),  # fmt: skip
        _image("clip_vision", "CLIPVisionConfig", "CLIPVisionModel", 32, intermediate_size=64, **_VIT),
        _image("deit", "DeiTConfig", "DeiTModel", 32, intermediate_size=64, **_VIT),
        _image("dinov2", "Dinov2Config", "Dinov2Model", 32, mlp_ratio=2, **_VIT),
        _image("hf_resnet", "ResNetConfig", "ResNetModel", 64, embedding_size=16, hidden_sizes=[16, 32, 64, 64],
               depths=[1, 1, 1, 1], layer_type="bottleneck"),  # fmt: skip
        _image("regnet", "RegNetConfig", "RegNetModel", 64, embedding_size=16, groups_width=8, **_STAGES),
        _image("convnextv2", "ConvNextV2Config", "ConvNextV2Model", 64, **_STAGES),
        _image("poolformer", "PoolFormerConfig", "PoolFormerModel", 64, **_STAGES),
        _image("mobilevit", "MobileViTConfig", "MobileViTModel", 64, image_size=64, hidden_sizes=[32, 40, 48],
               neck_hidden_sizes=[8, 8, 16, 16, 24, 32, 64], num_attention_heads=2),  # fmt: skip
        _image("levit", "LevitConfig", "LevitModel", 64, image_size=64, hidden_sizes=[32, 48, 64],
               num_attention_heads=[2, 2, 2], depths=[1, 1, 1], key_dim=[8, 8, 8]),  # fmt: skip
    ]


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if "--out" not in args:
        args = ["--out", DEFAULT_OUT] + args
    corpus.specs = specs  # the corpus's export, check and manifest, over this list
    return corpus.main(args)


if __name__ == "__main__":
    sys.exit(main())
