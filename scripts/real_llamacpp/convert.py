"""Convert CI's tiny Llama (scripts/real_vllm/make_model.py) to GGUF with llama.cpp's own
converter, from the same source tree as the llama-server binary.

Usage: python convert.py LLAMA_CPP_SRC HF_MODEL_DIR OUT.gguf

The tiny model's tokenizer is a byte-level BPE trained locally (``ByteLevel`` pre-tokenizer,
GPT-2 regex): the converter recognizes pre-tokenizers only by the hash of a known model's
tokens, so an unrecognized hash is mapped to ``gpt-2`` (the same pre-tokenization) instead of
failing. Needs torch, numpy and transformers (the vLLM venv has them).
"""

from __future__ import annotations

import sys
from pathlib import Path


def main() -> None:
    src, model, out = (Path(a) for a in sys.argv[1:4])
    sys.path[:0] = [str(src), str(src / "gguf-py")]
    import convert_hf_to_gguf  # the converter of this llama.cpp tree
    from conversion.base import TextModel

    original = TextModel.get_vocab_base_pre

    def vocab_base_pre(self, tokenizer) -> str:
        try:
            return original(self, tokenizer)
        except NotImplementedError:
            return "gpt-2"  # byte-level BPE with the GPT-2 regex, as make_model.py trains it

    TextModel.get_vocab_base_pre = vocab_base_pre
    sys.argv = ["convert_hf_to_gguf.py", str(model), "--outfile", str(out), "--outtype", "f32"]
    convert_hf_to_gguf.main()


if __name__ == "__main__":
    main()
