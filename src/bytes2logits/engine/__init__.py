"""The inference engine: a GGUF file in, text out, in NumPy.

``gguf`` reads the file; ``quants`` dequantizes its tensors; ``tokenizer`` (with ``pretokenizers``) and
``chat`` rebuild the tokenizer and chat template from its metadata; ``ops`` and ``ggml_numerics`` are the
two implementations of the forward pass's numerical operations; ``model`` is the forward pass;
``generate`` samples; ``session`` keeps a conversation; ``cli`` is ``python -m bytes2logits chat``.

The engine stands only on the package's base layer (``errors``, ``text``, ``assets``): it imports nothing
from the lessons or the course kit.
"""
